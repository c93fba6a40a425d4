//! Tool call ids every API takes. A conversation that went through several providers carries
//! the ids each one made, and they need not fit the next: two providers may both number their
//! calls `call_1` (Anthropic refuses a repeated `tool_use` id), and an id may hold characters
//! the target does not allow (Anthropic takes `^[a-zA-Z0-9_-]+$`). The ids are rewritten the
//! same way on every turn (a repeated id's later calls get `_2`, `_3`…; a character not allowed
//! becomes `_`; for a provider with Mistral's rule, nine characters derived from the id), so a
//! conversation keeps one id per call and its prompt cache; a result follows the call it
//! answers (the latest call with its id before it).
//!
//! The other way, an answer's new calls get ids the conversation does not hold yet ([`Fresh`]):
//! some servers number their calls per answer (`call_1`, `0`) or give none, and a client that
//! sees an id again takes the call for one it already ran (Claude Code answers it with "[Tool
//! use interrupted]", and the task goes round in circles).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{ChatRequest, ChatResponse, Part, StreamEncode, StreamEvent};

/// What a target allows in a tool call id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdRule {
    /// Any text, unique in the conversation (OpenAI's APIs).
    Unique,
    /// Unique, of ASCII letters, digits, `_` and `-` only (Anthropic's `tool_use.id`).
    Anthropic,
    /// Unique, exactly nine ASCII letters and digits (Mistral's: "Tool call id was … but must
    /// be a-z, A-Z, 0-9, with a length of 9").
    NineAlphanumerics,
}

impl IdRule {
    fn fits(self, id: &str) -> bool {
        match self {
            IdRule::Unique => !id.is_empty(),
            IdRule::Anthropic => {
                !id.is_empty()
                    && id
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            }
            IdRule::NineAlphanumerics => {
                id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric())
            }
        }
    }

    /// `id` made to fit: as it is when it does; else its refused characters as `_`
    /// (Anthropic), or nine characters derived from it (Mistral).
    fn fit(self, id: &str) -> String {
        match self {
            _ if self.fits(id) => id.to_string(),
            IdRule::Unique => "call".to_string(),
            IdRule::Anthropic => {
                let s: String = id
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                if s.is_empty() {
                    "call".to_string()
                } else {
                    s
                }
            }
            IdRule::NineAlphanumerics => nine_derived(id, 0),
        }
    }

    /// The `n`th (from 2) id for `id`'s later call when its fitted form `base` is taken:
    /// `<base>_<n>`, or for Mistral nine other characters derived from it.
    fn variant(self, id: &str, base: &str, n: u64) -> String {
        match self {
            IdRule::NineAlphanumerics => nine_derived(id, n),
            IdRule::Unique | IdRule::Anthropic => format!("{base}_{n}"),
        }
    }
}

/// Nine letters and digits derived from `id` (FNV-1a, so the same on every turn) and `salt`.
fn nine_derived(id: &str, salt: u64) -> String {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (0..9)
        .map(|_| {
            let c = ALPHABET[(h % 62) as usize] as char;
            h /= 62;
            c
        })
        .collect()
}

/// A conversation's ids renamed in order: each call gets an id that fits and no earlier call
/// has, each result the id of the latest call it names. One walk for the canonical request and
/// for a Chat Completions body alike.
struct Renamer {
    rule: IdRule,
    used: HashSet<String>,
    /// The id given to the latest call with each original id.
    latest: HashMap<String, String>,
}

impl Renamer {
    fn new(rule: IdRule) -> Self {
        Renamer {
            rule,
            used: HashSet::new(),
            latest: HashMap::new(),
        }
    }

    fn call(&mut self, id: &str) -> String {
        let base = self.rule.fit(id);
        let mut new = base.clone();
        let mut n = 1;
        while self.used.contains(&new) {
            n += 1;
            new = self.rule.variant(id, &base, n);
        }
        self.used.insert(new.clone());
        self.latest.insert(id.to_string(), new.clone());
        new
    }

    fn result(&self, id: &str) -> String {
        self.latest
            .get(id)
            .cloned()
            .unwrap_or_else(|| self.rule.fit(id))
    }
}

/// Whether every call id (in order) and result id fits `rule`, no call's id repeating.
fn all_fit<'a>(rule: IdRule, ids: impl Iterator<Item = (bool, &'a str)>) -> bool {
    let mut seen = HashSet::new();
    let mut ids = ids;
    ids.all(|(call, id)| rule.fits(id) && (!call || seen.insert(id)))
}

/// The request with every tool call id fitting `rule` and unique; borrowed as it is when every
/// id already does (the common case costs one walk and no copy).
pub fn fit(req: &ChatRequest, rule: IdRule) -> Cow<'_, ChatRequest> {
    let ids = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some((true, id.as_str())),
            Part::ToolResult { call_id, .. } => Some((false, call_id.as_str())),
            _ => None,
        });
    if all_fit(rule, ids) {
        return Cow::Borrowed(req);
    }
    let mut out = req.clone();
    let mut names = Renamer::new(rule);
    for part in out.messages.iter_mut().flat_map(|m| m.content.iter_mut()) {
        match part {
            Part::ToolCall { id, .. } => *id = names.call(id),
            Part::ToolResult { call_id, .. } => *call_id = names.result(call_id),
            _ => {}
        }
    }
    Cow::Owned(out)
}

/// A Chat Completions body (the client's own, sent on as it came) with every tool call id
/// fitting `rule`, as [`fit`] does for the canonical request; `None` when every id already
/// fits (no copy).
pub fn fit_chat_body(body: &Map<String, Value>, rule: IdRule) -> Option<Map<String, Value>> {
    let messages = body.get("messages")?.as_array()?;
    let ids = messages.iter().flat_map(|m| {
        let calls = m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("id").and_then(Value::as_str))
            .map(|id| (true, id));
        calls.chain(
            m.get("tool_call_id")
                .and_then(Value::as_str)
                .map(|id| (false, id)),
        )
    });
    if all_fit(rule, ids) {
        return None;
    }
    let mut out = body.clone();
    let mut names = Renamer::new(rule);
    for m in out.get_mut("messages")?.as_array_mut()? {
        for c in m
            .get_mut("tool_calls")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(Value::String(id)) = c.get_mut("id") {
                *id = names.call(id);
            }
        }
        if let Some(Value::String(id)) = m.get_mut("tool_call_id") {
            *id = names.result(id);
        }
    }
    Some(out)
}

/// The call ids a conversation holds, so that each new call in an answer gets its own.
#[derive(Debug, Default)]
pub struct Fresh {
    used: HashSet<String>,
}

impl Fresh {
    pub fn of(req: &ChatRequest) -> Fresh {
        let used = req
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|p| match p {
                Part::ToolCall { id, .. } => Some(id.clone()),
                Part::ToolResult { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        Fresh { used }
    }

    /// `id` when the conversation does not hold it yet, else a new random one in the shape
    /// OpenAI's are (`call_` and 24 hex digits; not a suffix on the old one, which a client may
    /// take for the same call); remembered either way.
    pub fn id(&mut self, id: &str) -> String {
        let mut new = id.to_string();
        while new.is_empty() || self.used.contains(&new) {
            new = format!("call_{:024x}", rand::random::<u128>() >> 32);
        }
        self.used.insert(new.clone());
        new
    }

    /// A complete answer's calls, each with an id of its own.
    pub fn answer(&mut self, answer: &mut ChatResponse) {
        for p in &mut answer.content {
            if let Part::ToolCall { id, .. } = p {
                *id = self.id(id);
            }
        }
    }
}

/// A client's stream encoder whose new calls get ids of their own in the conversation.
pub struct FreshIds {
    inner: Box<dyn StreamEncode>,
    fresh: Fresh,
}

impl FreshIds {
    pub fn new(inner: Box<dyn StreamEncode>, req: &ChatRequest) -> Self {
        FreshIds {
            inner,
            fresh: Fresh::of(req),
        }
    }
}

impl StreamEncode for FreshIds {
    fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        match ev {
            StreamEvent::ToolCallStart { index, id, name } => {
                let ev = StreamEvent::ToolCallStart {
                    index: *index,
                    id: self.fresh.id(id),
                    name: name.clone(),
                };
                self.inner.push(&ev, out)
            }
            ev => self.inner.push(ev, out),
        }
    }

    fn finish(&mut self, out: &mut String) {
        self.inner.finish(out)
    }

    fn error(&mut self, message: &str, relaying: bool, out: &mut String) {
        self.inner.error(message, relaying, out)
    }

    fn wire(&self) -> Option<super::Wire> {
        self.inner.wire()
    }

    fn relayed_end(&self) -> &'static [u8] {
        self.inner.relayed_end()
    }

    fn relay(&mut self, raw: bytes::Bytes) -> bytes::Bytes {
        self.inner.relay(raw)
    }

    fn content_type(&self) -> &'static str {
        self.inner.content_type()
    }

    fn comment(&self, text: &str, out: &mut String) {
        self.inner.comment(text, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{Message, Role};

    fn call(id: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![Part::ToolCall {
                id: id.into(),
                name: "exec".into(),
                arguments: "{}".into(),
            }],
            name: None,
        }
    }

    fn result(id: &str) -> Message {
        Message {
            role: Role::Tool,
            content: vec![Part::ToolResult {
                call_id: id.into(),
                content: "ok".into(),
            }],
            name: None,
        }
    }

    fn ids(req: &ChatRequest) -> Vec<String> {
        req.messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|p| match p {
                Part::ToolCall { id, .. } => Some(format!("call {id}")),
                Part::ToolResult { call_id, .. } => Some(format!("result {call_id}")),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn ids_that_fit_are_not_copied() {
        let req = ChatRequest {
            messages: vec![
                call("call_1"),
                result("call_1"),
                call("toolu_2"),
                result("toolu_2"),
            ],
            ..ChatRequest::default()
        };
        assert!(matches!(fit(&req, IdRule::Anthropic), Cow::Borrowed(_)));
    }

    /// Two providers that both numbered their calls from 1: each later call gets its own id,
    /// and its result follows it; the same conversation gets the same ids on the next turn.
    #[test]
    fn a_repeated_id_is_made_unique_and_results_follow_their_call() {
        let req = ChatRequest {
            messages: vec![
                call("call_1"),
                result("call_1"),
                call("call_1"),
                result("call_1"),
                call("call_1_2"),
                result("call_1_2"),
            ],
            ..ChatRequest::default()
        };
        let fitted = fit(&req, IdRule::Unique);
        assert_eq!(
            ids(&fitted),
            [
                "call call_1",
                "result call_1",
                "call call_1_2",
                "result call_1_2",
                "call call_1_2_2",
                "result call_1_2_2"
            ]
        );
        assert_eq!(ids(&fit(&req, IdRule::Unique)), ids(&fitted), "stable");
    }

    /// A server that numbers its calls per answer: the new call gets an id the conversation
    /// does not hold, and a call without an id gets one.
    #[test]
    fn an_answers_new_call_never_repeats_an_id_of_the_conversation() {
        let req = ChatRequest {
            messages: vec![call("call_1"), result("call_1")],
            ..ChatRequest::default()
        };
        let mut fresh = Fresh::of(&req);
        let again = fresh.id("call_1");
        assert!(again.starts_with("call_") && again.len() == 29, "{again}");
        assert_eq!(fresh.id("call_9"), "call_9");
        let third = fresh.id("call_1");
        assert!(third != again && third != "call_1", "{third}");
        let minted = fresh.id("");
        assert!(
            minted.starts_with("call_") && minted.len() == 29,
            "{minted}"
        );
    }

    /// Mistral's rule on a Chat body: an id that fits stays; another becomes nine letters and
    /// digits, the same on every turn, its result following it; a repeated id's later call
    /// gets nine others.
    #[test]
    fn a_chat_body_gets_ids_in_mistrals_rule() {
        let call = |id: &str| {
            serde_json::json!({"role": "assistant", "tool_calls": [{"id": id, "type": "function",
                "function": {"name": "f", "arguments": "{}"}}]})
        };
        let result =
            |id: &str| serde_json::json!({"role": "tool", "tool_call_id": id, "content": "ok"});
        let body = serde_json::json!({"messages": [call("abcDEF123"), result("abcDEF123"),
            call("call_1"), result("call_1"), call("call_1"), result("call_1")]});
        let body = body.as_object().unwrap();
        let fitted = fit_chat_body(body, IdRule::NineAlphanumerics).unwrap();
        let ids: Vec<String> = fitted["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m.pointer("/tool_calls/0/id")
                    .or_else(|| m.get("tool_call_id"))
                    .and_then(Value::as_str)
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(ids[0], "abcDEF123");
        assert_eq!((ids[2] == ids[3], ids[4] == ids[5]), (true, true));
        assert_ne!(ids[2], ids[4]);
        assert!(
            ids.iter().all(|i| IdRule::NineAlphanumerics.fits(i)),
            "{ids:?}"
        );
        assert_eq!(
            fit_chat_body(body, IdRule::NineAlphanumerics),
            Some(fitted.clone())
        );
        assert_eq!(
            fit_chat_body(&fitted, IdRule::NineAlphanumerics),
            None,
            "no copy when all fit"
        );
    }

    #[test]
    fn characters_anthropic_refuses_become_underscores() {
        let req = ChatRequest {
            messages: vec![call("functions.exec:0"), result("functions.exec:0")],
            ..ChatRequest::default()
        };
        let fitted = fit(&req, IdRule::Anthropic);
        assert_eq!(
            ids(&fitted),
            ["call functions_exec_0", "result functions_exec_0"]
        );
        assert!(matches!(fit(&req, IdRule::Unique), Cow::Borrowed(_)));
    }
}
