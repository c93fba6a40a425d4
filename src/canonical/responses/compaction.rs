//! Codex's compaction on an upstream of another API. Codex compacts a long conversation by
//! sending it with a `compaction_trigger` item last and expects exactly one `compaction` item
//! back, whose opaque `encrypted_content` it then sends in place of the history it replaces.
//! The public Responses API makes that item itself; no other API can. So Baton asks the
//! upstream for a summary of the conversation and returns it as the item, its content Baton's
//! own readable envelope ([`envelope`]); a later request carrying it gets the summary as a
//! user message on any upstream ([`summary_of`]), a Responses one included. A `compaction`
//! item another server made cannot be read anywhere else and is left out there.

use base64::Engine as _;
use serde_json::{json, Value};

/// What the upstream is asked for in place of the compaction (tools are not offered).
pub const PROMPT: &str = "Your context is about to be compacted. Write a summary of the conversation so far that lets you continue the task without it: the user's goals and instructions, what has been done (files read, written and changed, commands run and their results), decisions made, the current state, and what remains to do next. Answer with the summary only.";

/// How a summary is introduced when it comes back in a later request.
const LEAD: &str =
    "Summary of the conversation so far (compacted earlier; it replaces the turns before it):";

/// How Baton's compaction content begins.
const MARK: &str = "baton-compaction-v1.";

/// Whether a Responses body asks for a compaction (its last input item is the trigger).
pub fn asked(body: &serde_json::Map<String, Value>) -> bool {
    body.get("input")
        .and_then(Value::as_array)
        .and_then(|items| items.last())
        .and_then(|i| i.get("type"))
        .and_then(Value::as_str)
        == Some("compaction_trigger")
}

/// The `encrypted_content` of a compaction Baton made of this summary.
pub fn envelope(summary: &str) -> String {
    format!(
        "{MARK}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(summary)
    )
}

/// The summary in a `compaction` item Baton made, as the user message that carries it on.
pub fn summary_of(item: &Value) -> Option<String> {
    let content = item
        .get("encrypted_content")?
        .as_str()?
        .strip_prefix(MARK)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(content)
        .ok()?;
    let summary = String::from_utf8(bytes).ok()?;
    Some(format!("{LEAD}\n\n{summary}"))
}

/// A `compaction_trigger` item as the request for a summary (no tool call), and a
/// `compaction` Baton made as its summary; another server's cannot be read here.
pub(super) fn push(req: &mut crate::canonical::ChatRequest, item: &Value) {
    use crate::canonical::{Message, Part, Role};
    let text = match item.get("type").and_then(Value::as_str) {
        Some("compaction_trigger") => {
            req.tool_choice = Some(crate::canonical::ToolChoice::None);
            Some(PROMPT.to_string())
        }
        _ => summary_of(item),
    };
    if let Some(t) = text {
        req.messages.push(Message {
            role: Role::User,
            content: vec![Part::Text(t)],
            name: None,
        });
    }
}

/// The one output item of a compaction answer.
pub fn item(id: &str, summary: &str) -> Value {
    json!({"type": "compaction", "id": format!("cmp_{id}"), "encrypted_content": envelope(summary)})
}

/// A Responses input item list with Baton's compactions written as the user messages they
/// stand for (for a Responses upstream, which cannot read them).
pub fn unwrap_items(items: &mut [Value]) {
    for i in items.iter_mut() {
        if i.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        if let Some(text) = summary_of(i) {
            *i = json!({"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]});
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_goes_out_as_an_item_and_comes_back_as_a_user_message() {
        let it = item("req1", "Wrote hello.py; next: run it. \"quoted\" ✓");
        assert_eq!(it["type"], "compaction");
        assert_eq!(it["id"], "cmp_req1");
        let back = summary_of(&it).unwrap_or_default();
        assert!(back.starts_with(LEAD) && back.ends_with("next: run it. \"quoted\" ✓"));
        // OpenAI's own compaction is opaque to Baton.
        assert_eq!(
            summary_of(&json!({"type": "compaction", "encrypted_content": "gAAAAB..."})),
            None
        );
        let mut items = vec![
            it,
            json!({"type": "compaction", "encrypted_content": "gAAAAB..."}),
            json!({"type": "message", "role": "user", "content": "go on"}),
        ];
        unwrap_items(&mut items);
        assert_eq!(items[0]["type"], "message");
        assert_eq!(items[0]["role"], "user");
        assert_eq!(
            items[1]["type"], "compaction",
            "another server's stays as it is"
        );
        let body = json!({"input": [{"type": "message", "role": "user", "content": "x"},
            {"type": "compaction_trigger"}]});
        assert!(asked(body.as_object().unwrap_or(&Default::default())));
    }
}
