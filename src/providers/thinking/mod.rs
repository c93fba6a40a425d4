//! Anthropic's signed thinking across failover. A `thinking` block carries a signature (a
//! `redacted_thinking` block its encrypted `data`) that only the account that produced it
//! accepts; sent anywhere else, the request fails with "Invalid `signature` in `thinking`
//! block". Baton notes who signed each block it relays ([`ThinkingBook`]), and before a
//! client's own Messages body goes to an Anthropic account it removes the blocks another account
//! signed, and any that nobody signed ([`strip`]). A block Baton cannot place (signed before it
//! started) stays; if the account refuses it, the attempt is sent once more without any.
//!
//! Without its thinking, a final assistant turn that called a tool no longer begins with a
//! thinking block, which the API refuses while thinking is on. Rather than switching thinking
//! off (which would keep it off for the rest of the tool loop), that final exchange is written
//! as text and the model thinks in a new turn ([`close`]); only on the retry after a refusal is
//! thinking switched off for that one request.

mod close;
mod turns;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

/// How many signatures are remembered (each a 16-byte digest and a shared origin name).
const CAPACITY: usize = 50_000;

/// Who signed which thinking block: a bounded map from a digest of the signature to the origin
/// (`provider/key`) that produced it; the oldest are forgotten first.
#[derive(Default)]
pub struct ThinkingBook {
    inner: Mutex<Book>,
    /// Two independently seeded hashers: a signature's 128-bit digest (`digest`).
    seeds: [foldhash::quality::RandomState; 2],
}

#[derive(Default)]
struct Book {
    origins: HashMap<u128, Arc<str>, foldhash::fast::RandomState>,
    order: VecDeque<u128>,
}

impl ThinkingBook {
    /// A signature's digest: 128 bits from two hashers seeded at random for this process, so
    /// no client can make two signatures meet (the book lives in memory only). A signature
    /// is ~400 characters and a long conversation has hundreds: SHA-256 made looking them up
    /// a seventh of what a 600 KB Claude Code turn cost Baton.
    fn digest(&self, signature: &str) -> u128 {
        use std::hash::BuildHasher;
        let [a, b] = &self.seeds;
        (u128::from(a.hash_one(signature)) << 64) | u128::from(b.hash_one(signature))
    }
}

impl ThinkingBook {
    /// `origin` produced the block with this signature (or redacted data).
    pub fn record(&self, signature: &str, origin: &str) {
        if signature.is_empty() {
            return;
        }
        let Ok(mut b) = self.inner.lock() else {
            return;
        };
        let d = self.digest(signature);
        if b.origins.insert(d, Arc::from(origin)).is_none() {
            b.order.push_back(d);
        }
        while b.order.len() > CAPACITY {
            if let Some(old) = b.order.pop_front() {
                b.origins.remove(&old);
            }
        }
    }

    /// Who produced the block with this signature, when Baton relayed it.
    pub fn origin(&self, signature: &str) -> Option<Arc<str>> {
        let b = self.inner.lock().ok()?;
        b.origins.get(&self.digest(signature)).cloned()
    }

    /// Every signature in a complete Messages answer, noted as `origin`'s.
    pub fn record_answer(&self, body: &[u8], origin: &str) {
        if memchr::memmem::find(body, b"thinking").is_none() {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return;
        };
        for b in v
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(sig) = seal(b) {
                self.record(sig, origin);
            }
        }
    }
}

/// A thinking block's seal: the signature of `thinking`, the data of `redacted_thinking`.
fn seal(block: &Value) -> Option<&str> {
    match block.get("type").and_then(Value::as_str)? {
        "thinking" => block.get("signature").and_then(Value::as_str),
        "redacted_thinking" => block.get("data").and_then(Value::as_str),
        _ => None,
    }
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

/// Which thinking blocks leave.
#[derive(Clone, Copy)]
pub enum Keep<'a> {
    /// Those `origin` signed, and those Baton cannot place; a final tool exchange left without
    /// thinking is closed so thinking stays on.
    Own(&'a ThinkingBook, &'a str),
    /// None, and thinking off if the final tool exchange then has none (the account refused
    /// what was sent).
    None,
}

/// What [`strip`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Stripped {
    pub blocks: usize,
    /// Tool calls of the final exchange written as text so thinking stays on.
    pub closed: usize,
    /// Thinking was switched off for the request (see the module text).
    pub thinking_off: bool,
}

/// Whether a Messages body has any thinking block in its history.
pub fn has_thinking(body: &Map<String, Value>) -> bool {
    messages(body).any(|m| content(m).any(is_thinking))
}

/// Whether [`strip`] has work on this body: thinking blocks to place, or thinking asked for
/// (then the last tool turn must begin with thinking, whoever served it).
pub fn to_check(body: &Map<String, Value>) -> bool {
    thinking_on(body) || has_thinking(body)
}

fn messages(body: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn content(m: &Value) -> impl Iterator<Item = &Value> {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// Whether this block may not go where `keep` says.
fn leaves(block: &Value, keep: Keep) -> bool {
    if !is_thinking(block) {
        return false;
    }
    match (keep, seal(block).filter(|s| !s.is_empty())) {
        (Keep::None, _) | (Keep::Own(..), None) => true,
        (Keep::Own(book, origin), Some(sig)) => book.origin(sig).is_some_and(|o| &*o != origin),
    }
}

/// Whether [`strip`] would change this body. Most turns of a tool loop go back to the account
/// that signed their thinking, and then nothing changes: the client's bytes can go as they
/// came instead of a copy of the whole conversation written out again.
pub fn changes(body: &Map<String, Value>, keep: Keep) -> bool {
    let assistant = |m: &Value| m.get("role").and_then(Value::as_str) == Some("assistant");
    messages(body)
        .any(|m| turns::is_empty_turn(m) || (assistant(m) && content(m).any(|b| leaves(b, keep))))
        || (thinking_on(body) && !last_turn_starts_thinking(body))
}

/// Removes from a client's Messages body the thinking blocks that may not go to this account.
pub fn strip(body: &mut Map<String, Value>, keep: Keep) -> Stripped {
    let mut out = Stripped::default();
    let Some(Value::Array(msgs)) = body.get_mut("messages") else {
        return out;
    };
    for m in msgs.iter_mut() {
        if m.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(Value::Array(blocks)) = m.get_mut("content") else {
            continue;
        };
        let before = blocks.len();
        blocks.retain(|b| !leaves(b, keep));
        out.blocks += before - blocks.len();
    }
    turns::drop_empty_turns(msgs);
    // Whatever left the last tool turn without thinking (blocks removed here, or a turn
    // another provider served, which had none to give), the API would refuse the request.
    if thinking_on(body) && !last_turn_starts_thinking(body) {
        match keep {
            Keep::Own(..) => out.closed = close::close(body),
            Keep::None => {
                body.remove("thinking");
                out.thinking_off = true;
            }
        }
    }
    out
}

/// Thinking `enabled` (adaptive thinking may leave a turn without it, and the API takes that).
fn thinking_on(body: &Map<String, Value>) -> bool {
    body.get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        == Some("enabled")
}

/// Whether the last assistant turn, when it called a tool, still begins with thinking (the
/// API's rule while thinking is on). The API joins consecutive messages of one role into one
/// turn, and Claude Code sends a turn's thinking and its tool call as two.
fn last_turn_starts_thinking(body: &Map<String, Value>) -> bool {
    let all = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let Some(run) = turns::final_assistant_run(all) else {
        return true;
    };
    let blocks: Vec<&Value> = all[run].iter().flat_map(content).collect();
    let calls = blocks
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"));
    !calls || blocks.first().is_some_and(|b| is_thinking(b))
}

/// Whether an error is Anthropic refusing the conversation's thinking: a block's signature, a
/// final assistant turn that does not begin with thinking, or a changed block of the latest
/// turn. Worth one retry without any thinking block (and thinking off if it must be).
pub fn is_thinking_refusal(status: u16, body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(&body[..body.len().min(2000)]).to_ascii_lowercase();
    status == 400
        && text.contains("thinking")
        && (text.contains("signature")
            || text.contains("must start with a thinking block")
            || text.contains("cannot be modified"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body() -> Map<String, Value> {
        json!({"model": "m", "thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "a thinks", "signature": "sig-a-1"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
            {"role": "assistant", "content": [
                {"type": "redacted_thinking", "data": "opaque-b"},
                {"type": "thinking", "thinking": "nobody's", "signature": ""},
                {"type": "thinking", "thinking": "unknown", "signature": "sig-old"},
                {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "y"}]}
        ]})
        .as_object()
        .cloned()
        .unwrap_or_default()
    }

    fn kinds(b: &Map<String, Value>) -> Vec<Vec<String>> {
        messages(b)
            .filter(|m| m["role"] == "assistant")
            .map(|m| {
                content(m)
                    .map(|c| c["type"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn blocks_go_back_only_to_their_signer_and_thinking_stays_on() {
        let book = ThinkingBook::default();
        book.record("sig-a-1", "a/k1");
        book.record("opaque-b", "b/k2");
        // Back to a: its own block and the one nobody can place stay; b's and the unsigned go.
        let mut to_a = body();
        let s = strip(&mut to_a, Keep::Own(&book, "a/k1"));
        assert_eq!(s.blocks, 2);
        assert_eq!(
            kinds(&to_a),
            [
                vec!["thinking", "text", "tool_use"],
                vec!["thinking", "tool_use"]
            ]
        );
        assert!(!s.thinking_off, "the last turn still begins with thinking");
        // To b: a's goes, b's stays.
        let mut to_b = body();
        strip(&mut to_b, Keep::Own(&book, "b/k2"));
        assert_eq!(kinds(&to_b)[0], ["text", "tool_use"]);
        assert_eq!(
            kinds(&to_b)[1],
            ["redacted_thinking", "thinking", "tool_use"]
        );
        // To a third account, once the old block is known as a's: the final turn keeps no
        // thinking, so its exchange is written as text and thinking stays on.
        book.record("sig-old", "a/k1");
        let mut to_c = body();
        let s = strip(&mut to_c, Keep::Own(&book, "c/k3"));
        assert_eq!((s.blocks, s.closed, s.thinking_off), (4, 1, false));
        assert_eq!(kinds(&to_c), [vec!["text", "tool_use"], vec!["text"]]);
        assert!(to_c.contains_key("thinking"));
        let last = messages(&to_c).last().cloned().unwrap_or_default();
        assert_eq!(last["content"][0]["text"], "(The `Read` tool returned: y)");
        // None at all: the text and tool turns stay, and thinking is switched off.
        let mut none = body();
        let s = strip(&mut none, Keep::None);
        assert_eq!(s.blocks, 4);
        assert_eq!(kinds(&none), [vec!["text", "tool_use"], vec!["tool_use"]]);
        assert!(s.thinking_off && !none.contains_key("thinking"));
        assert!(has_thinking(&body()) && !has_thinking(&none));
    }

    /// `changes` is what lets a body go as it came: it must say yes whenever `strip` would
    /// change the body, and no when it would not.
    #[test]
    fn changes_says_whether_strip_would_change_the_body() {
        let book = ThinkingBook::default();
        book.record("sig-a-1", "a/k1");
        book.record("opaque-b", "b/k2");
        let tool = json!({"type": "tool_use", "id": "t2", "name": "Read", "input": {}});
        let variant = |last: Value, thinking: bool| {
            let mut b = body();
            b["messages"][1]["content"][0]["signature"] = json!("sig-a-1");
            b["messages"][3]["content"] = last;
            if !thinking {
                b.remove("thinking");
            }
            b
        };
        let a_or_unknown =
            json!([{"type": "thinking", "thinking": "t", "signature": "sig-old"}, tool]);
        let clean = variant(a_or_unknown.clone(), true);
        let bodies = [
            body(),
            clean.clone(),
            variant(
                json!([{"type": "redacted_thinking", "data": "opaque-b"}, tool]),
                true,
            ),
            variant(json!([tool]), true),
            variant(json!([tool]), false),
            variant(json!([]), false),
            variant(a_or_unknown, false),
        ];
        let mut seen = [0; 2];
        for b in &bodies {
            for keep in [
                Keep::Own(&book, "a/k1"),
                Keep::Own(&book, "b/k2"),
                Keep::Own(&book, "c/k3"),
                Keep::None,
            ] {
                let mut stripped = b.clone();
                strip(&mut stripped, keep);
                let changed = stripped != *b;
                assert_eq!(changes(b, keep), changed, "{b:?}");
                seen[usize::from(changed)] += 1;
            }
        }
        assert!(
            seen[0] >= 3 && seen[1] >= 3,
            "both answers are tried: {seen:?}"
        );
        assert!(!changes(&clean, Keep::Own(&book, "a/k1")));
        assert!(
            changes(&clean, Keep::Own(&book, "b/k2")),
            "a's block leaves"
        );
    }

    #[test]
    fn the_book_remembers_answers_and_forgets_the_oldest() {
        let book = ThinkingBook::default();
        let answer = json!({"type": "message", "content": [
            {"type": "thinking", "thinking": "t", "signature": "sig-x"},
            {"type": "text", "text": "hi"}]});
        book.record_answer(answer.to_string().as_bytes(), "x/k");
        assert_eq!(book.origin("sig-x").as_deref(), Some("x/k"));
        for i in 0..CAPACITY {
            book.record(&format!("s{i}"), "y/k");
        }
        assert_eq!(book.origin("sig-x"), None, "the oldest went first");
        assert!(book.origin("s1").is_some());
        assert!(is_thinking_refusal(
            400,
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: Invalid `signature` in `thinking` block"}}"#
        ));
        assert!(is_thinking_refusal(
            400,
            br#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.3.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`."}}"#
        ));
        assert!(!is_thinking_refusal(429, b"signature thinking"));
        assert!(!is_thinking_refusal(
            400,
            b"`max_tokens` must be greater than `thinking.budget_tokens`"
        ));
    }
}
