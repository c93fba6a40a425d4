//! Conversation affinity. Agent clients resend a long, mostly identical prefix every turn and
//! rely on the provider's prompt cache, which lives per account: a conversation whose turns hop
//! between keys (or providers) pays for its whole prompt every turn. So each conversation is
//! remembered with the provider, model and key that last served it; its next turn goes there
//! first (the key first among the provider's, the provider first among equals for `auto` and
//! routes) while that target is healthy. A failover moves the conversation, and it stays on the
//! new target for as long as it keeps going: going back would lose the new target's warm cache.
//! A conversation idle for longer than `routing.affinity.ttlMs` (the providers' cache lifetime)
//! is forgotten, and its next turn follows the configured order again.
//!
//! A conversation is named by what the client sends: `prompt_cache_key`, Codex's `session-id`
//! header, Claude Code's session in `metadata.user_id`; else (a plain SDK chat) by the prefix
//! every turn repeats: system prompt, tools and first user turn, followed from the second turn
//! on. Only a digest is kept. The memory is bounded (least recently used go first) and, when
//! `state.backend` is Redis, shared: every instance reads and writes the same entry.

use std::num::NonZeroUsize;
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::canonical::{ChatRequest, Part, Role};

/// How many conversations are remembered per instance.
const CAPACITY: usize = 20_000;

/// The shortest prompt the providers cache (Anthropic and OpenAI: 1,024 tokens).
pub const MIN_CACHED_TOKENS: u64 = 1024;

/// A conversation's name: a digest of what the client calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Conversation([u8; 16]);

impl Conversation {
    fn of(kind: &str, name: &str) -> Self {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(kind.as_bytes());
        ctx.update(b"\n");
        ctx.update(name.as_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&ctx.finish().as_ref()[..16]);
        Self(out)
    }

    /// The conversation as one client key's: two team members who name the same session (or
    /// send the same prompt) have two conversations, so neither can steer the other's routing.
    pub fn of_client(self, client: &str) -> Self {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&self.0);
        ctx.update(b"\n");
        ctx.update(client.as_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&ctx.finish().as_ref()[..16]);
        Self(out)
    }

    /// The name in hex (the shared-state key).
    pub fn hex(&self) -> String {
        use std::fmt::Write;
        let mut out = String::with_capacity(32);
        for b in self.0 {
            let _ = write!(out, "{b:02x}");
        }
        out
    }

    /// The session header a client names its conversation with (Codex's `session-id`).
    pub fn session_header(headers: &http::HeaderMap) -> Option<String> {
        // Named once: a name written as text is parsed and checked again on every lookup.
        static SESSION: [http::HeaderName; 3] = [
            http::HeaderName::from_static("session-id"),
            http::HeaderName::from_static("session_id"),
            http::HeaderName::from_static("x-claude-code-session-id"),
        ];
        SESSION
            .iter()
            .find_map(|h| headers.get(h).and_then(|v| v.to_str().ok()))
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    }

    /// The conversation the client names: its `prompt_cache_key`, its session header, Claude
    /// Code's session.
    pub fn named(session: Option<&str>, body: &Map<String, Value>) -> Option<Self> {
        if let Some(k) = body.get("prompt_cache_key").and_then(Value::as_str) {
            return Some(Self::of("cache-key", k));
        }
        if let Some(s) = session {
            return Some(Self::of("session", s));
        }
        claude_code_session(body).map(|s| Self::of("session", &s))
    }

    /// A conversation the client does not name (a plain SDK chat), by the start of its prompt
    /// that every turn repeats: the system prompt, the tools, and the first user turn. `None`
    /// without a user turn.
    pub fn by_prefix(canonical: &ChatRequest) -> Option<Self> {
        let first = canonical.messages.iter().find(|m| m.role == Role::User)?;
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(b"prefix\n");
        for s in &canonical.system {
            ctx.update(s.as_bytes());
            ctx.update(b"\n");
        }
        // Tools are part of the cached prefix: the same opening with other tools is another
        // conversation. Their names tell them apart; their schemas (tens of kilobytes for an
        // agent) are not serialised again for this.
        for t in &canonical.tools {
            ctx.update(b"\x00tool\x00");
            ctx.update(t.name.as_bytes());
        }
        ctx.update(b"\x00user\x00");
        for p in &first.content {
            if let Part::Text(t) = p {
                ctx.update(t.as_bytes());
                ctx.update(b"\n");
            }
        }
        let mut out = [0u8; 16];
        out.copy_from_slice(&ctx.finish().as_ref()[..16]);
        Some(Self(out))
    }

    /// Whether an unnamed request goes where its conversation was last served: from its
    /// second turn on (an assistant turn is in it), or when its prompt is long enough for
    /// the providers to cache (`MIN_CACHED_TOKENS`). A first turn is remembered but not
    /// followed, so that one-off requests with the same prompt (a batch, a health check)
    /// keep the keys' round-robin.
    pub fn follows_unnamed(canonical: &ChatRequest, prompt_tokens: u64) -> bool {
        canonical.messages.iter().any(|m| m.role != Role::User)
            || prompt_tokens >= MIN_CACHED_TOKENS
    }
}

/// Claude Code's session, in `metadata.user_id` (a JSON text with `session_id`, or the older
/// `user_…_account_…_session_<id>`).
fn claude_code_session(body: &Map<String, Value>) -> Option<String> {
    let user = body.get("metadata")?.get("user_id")?.as_str()?;
    let s = match serde_json::from_str::<Value>(user) {
        Ok(v) => v.get("session_id")?.as_str()?.to_string(),
        Err(_) => user.split_once("_session_")?.1.to_string(),
    };
    (!s.is_empty()).then_some(s)
}

/// Where a conversation was last served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stick {
    pub provider: String,
    pub model: String,
    /// The key's id (`env:…`, or the client's account); empty for a keyless provider.
    pub key: String,
}

impl Stick {
    /// As kept in shared state: `provider\nmodel\nkey`.
    pub fn encode(&self) -> String {
        format!("{}\n{}\n{}", self.provider, self.model, self.key)
    }

    pub fn decode(s: &str) -> Option<Self> {
        let mut it = s.splitn(3, '\n');
        Some(Self {
            provider: it.next()?.to_string(),
            model: it.next()?.to_string(),
            key: it.next()?.to_string(),
        })
    }
}

/// The conversations this instance remembers: where each was last served, and when.
pub struct Affinity {
    inner: Mutex<lru::LruCache<Conversation, (Stick, i64)>>,
}

impl Default for Affinity {
    fn default() -> Self {
        Self {
            inner: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(CAPACITY).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }
}

impl Affinity {
    /// Where `c` was last served, unless that was more than `ttl_ms` ago.
    pub fn get(&self, c: &Conversation, now_ms: i64, ttl_ms: u64) -> Option<Stick> {
        let mut m = self.inner.lock().ok()?;
        match m.get(c) {
            Some((s, at)) if now_ms - *at <= ttl_ms as i64 => Some(s.clone()),
            Some(_) => {
                m.pop(c);
                None
            }
            None => None,
        }
    }

    pub fn set(&self, c: Conversation, s: Stick, now_ms: i64) {
        if let Ok(mut m) = self.inner.lock() {
            m.put(c, (s, now_ms));
        }
    }

    pub fn len(&self) -> usize {
        self.inner.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(system: &str, first: &str) -> ChatRequest {
        ChatRequest {
            // Long enough to be cached.
            system: vec![format!("{system}{}", " ".repeat(5000))],
            messages: vec![crate::canonical::Message {
                role: Role::User,
                content: vec![Part::Text(first.into())],
                name: None,
            }],
            ..ChatRequest::default()
        }
    }

    #[test]
    fn a_conversation_is_named_by_what_the_client_sends_first() {
        let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
        let named = |session: Option<&str>, body: Value| Conversation::named(session, &obj(body));
        let by_key = named(Some("s1"), json!({"prompt_cache_key": "k1"}));
        assert_eq!(
            by_key,
            named(None, json!({"prompt_cache_key": "k1"})),
            "the key first"
        );
        let mut codex = http::HeaderMap::new();
        codex.insert("session-id", "s1".parse().unwrap());
        let session = Conversation::session_header(&codex);
        let by_session = named(session.as_deref(), json!({}));
        let by_cc = named(
            None,
            json!({"metadata": {"user_id": "{\"device_id\":\"d\",\"account_uuid\":\"\",\"session_id\":\"s1\"}"}}),
        );
        let older = named(
            None,
            json!({"metadata": {"user_id": "user_ab_account_cd_session_s1"}}),
        );
        assert!(by_session.is_some());
        assert_eq!(by_session, by_cc, "one session, however it is sent");
        assert_eq!(by_cc, older);
        assert_ne!(by_key, by_session);
        assert_eq!(named(None, json!({})), None);
        // Unnamed: the prompt's start names it, the same for every later turn.
        let r = req("You are Codex.", "fix it");
        let mut later = req("You are Codex.", "fix it");
        later.messages.push(crate::canonical::Message {
            role: Role::Assistant,
            content: vec![Part::Text("done".into())],
            name: None,
        });
        let a = Conversation::by_prefix(&r);
        assert_eq!(a, Conversation::by_prefix(&later));
        assert_ne!(a, Conversation::by_prefix(&req("You are Codex.", "other")));
        assert_eq!(a.unwrap().hex().len(), 32);
        // Other tools: another conversation.
        let mut tooled = req("You are Codex.", "fix it");
        tooled.tools.push(crate::canonical::Tool {
            name: "shell".into(),
            description: None,
            parameters: json!({"type": "object"}),
            freeform: None,
        });
        assert_ne!(a, Conversation::by_prefix(&tooled));
        assert_eq!(Conversation::by_prefix(&ChatRequest::default()), None);
    }

    #[test]
    fn an_unnamed_conversation_is_followed_from_its_second_turn_or_once_cacheable() {
        let first = ChatRequest {
            system: vec!["Be brief.".into()],
            messages: vec![crate::canonical::Message {
                role: Role::User,
                content: vec![Part::Text("hi".into())],
                name: None,
            }],
            ..ChatRequest::default()
        };
        assert!(
            Conversation::by_prefix(&first).is_some(),
            "a short first turn is remembered"
        );
        assert!(
            !Conversation::follows_unnamed(&first, 20),
            "but not followed: one-off requests keep the round-robin"
        );
        assert!(Conversation::follows_unnamed(&first, MIN_CACHED_TOKENS));
        let mut second = first.clone();
        second.messages.push(crate::canonical::Message {
            role: Role::Assistant,
            content: vec![Part::Text("hello".into())],
            name: None,
        });
        second.messages.push(crate::canonical::Message {
            role: Role::User,
            content: vec![Part::Text("more".into())],
            name: None,
        });
        assert!(Conversation::follows_unnamed(&second, 40));
        assert_eq!(
            Conversation::by_prefix(&first),
            Conversation::by_prefix(&second)
        );
    }

    #[test]
    fn entries_expire_and_the_oldest_go_first() {
        let aff = Affinity::default();
        let c = Conversation::of("t", "1");
        let s = Stick {
            provider: "p".into(),
            model: "m".into(),
            key: "env:K".into(),
        };
        aff.set(c, s.clone(), 1_000);
        assert_eq!(aff.get(&c, 1_000 + 600_000, 600_000), Some(s.clone()));
        assert_eq!(aff.get(&c, 1_000 + 600_001, 600_000), None, "idle too long");
        assert!(aff.is_empty());
        for i in 0..=CAPACITY {
            aff.set(Conversation::of("t", &i.to_string()), s.clone(), 0);
        }
        assert_eq!(aff.len(), CAPACITY);
        assert_eq!(aff.get(&Conversation::of("t", "0"), 0, 1), None);
        assert_eq!(Stick::decode(&s.encode()), Some(s));
    }
}
