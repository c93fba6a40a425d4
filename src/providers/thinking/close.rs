//! Keeping thinking on when the tool exchange a request continues cannot carry a valid block.
//!
//! While thinking is `enabled`, the Messages API wants the final assistant turn of a tool loop
//! to begin with a thinking block the account signed, and a tool loop is one assistant turn:
//! thinking may change only between turns. A turn another account or another API served (or
//! one served with thinking off) has no such block, and turning thinking off for it keeps it
//! off for every later request of the loop, since each then continues a turn without thinking.
//!
//! [`close`] ends that turn instead: the final exchange (the last assistant turn's tool calls
//! and the results that answer them) is written as text, the calls as what was called with
//! what input, the results as what each returned. The conversation then asks for a new turn,
//! which may think; nothing the tools did is lost, and the next exchange, answered with
//! thinking, is sent as it was. Only the final exchange is written so.

use serde_json::{json, Map, Value};

/// Writes the final tool exchange of a Messages body as text; returns how many calls it held.
pub(super) fn close(body: &mut Map<String, Value>) -> usize {
    let Some(Value::Array(msgs)) = body.get_mut("messages") else {
        return 0;
    };
    let Some(run) = super::turns::final_assistant_run(msgs) else {
        return 0;
    };
    let start = *run.start();
    let mut names = Vec::new();
    for m in &mut msgs[run] {
        let blocks = std::mem::take(blocks_of(m));
        *blocks_of(m) = blocks
            .into_iter()
            .filter_map(|b| call_as_text(b, &mut names))
            .collect();
    }
    for m in msgs.iter_mut().skip(start) {
        if m.get("role").and_then(Value::as_str) == Some("user") {
            let blocks = std::mem::take(blocks_of(m));
            *blocks_of(m) = blocks
                .into_iter()
                .flat_map(|b| result_as_text(b, &names))
                .collect();
        }
    }
    // A message that held only thinking is empty now: the API refuses empty turns.
    super::turns::drop_empty_turns(msgs);
    names.len()
}

/// A message's blocks, a string content made one text block first.
fn blocks_of(m: &mut Value) -> &mut Vec<Value> {
    if let Some(Value::String(s)) = m.get("content") {
        let text = json!([{"type": "text", "text": s}]);
        m["content"] = text;
    }
    if !m.get("content").is_some_and(Value::is_array) {
        m["content"] = json!([]);
    }
    match m.get_mut("content") {
        Some(Value::Array(a)) => a,
        _ => unreachable!("content was made an array above"),
    }
}

/// An assistant block of the closed turn: a tool call as text (its id and name noted), thinking
/// left out (an unsigned or foreign block has no place in it), anything else as it was.
fn call_as_text(b: Value, names: &mut Vec<(String, String)>) -> Option<Value> {
    match b.get("type").and_then(Value::as_str) {
        Some("tool_use") => {
            let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
            let name = b.get("name").and_then(Value::as_str).unwrap_or("tool");
            let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
            names.push((id.to_string(), name.to_string()));
            Some(with_cache(
                json!({"type": "text", "text": format!("(Called the `{name}` tool with {input}.)")}),
                &b,
            ))
        }
        Some("thinking" | "redacted_thinking") => None,
        _ => Some(b),
    }
}

/// A user block after the closed turn: a result of one of its calls as text (an image or a
/// document it returned goes beside the text), anything else as it was.
fn result_as_text(b: Value, names: &[(String, String)]) -> Vec<Value> {
    if b.get("type").and_then(Value::as_str) != Some("tool_result") {
        return vec![b];
    }
    let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
    let Some((_, name)) = names.iter().find(|(i, _)| i == id) else {
        return vec![b];
    };
    let failed = b.get("is_error").and_then(Value::as_bool) == Some(true);
    let mut text = String::new();
    let mut beside = Vec::new();
    match b.get("content") {
        Some(Value::String(s)) => text.push_str(s),
        Some(Value::Array(parts)) => {
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(p.get("text").and_then(Value::as_str).unwrap_or_default());
                    }
                    Some("image" | "document" | "search_result") => beside.push(p.clone()),
                    _ => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(&p.to_string());
                    }
                }
            }
        }
        _ => {}
    }
    let said = if failed {
        format!("(The `{name}` tool failed: {text})")
    } else if text.is_empty() {
        format!("(The `{name}` tool returned nothing as text.)")
    } else {
        format!("(The `{name}` tool returned: {text})")
    };
    let mut out = vec![json!({"type": "text", "text": said})];
    out.extend(beside);
    // The client's cache breakpoint stays where it was: on the last block of the result.
    if let Some(last) = out.last_mut() {
        *last = with_cache(last.take(), &b);
    }
    out
}

/// `to` with `from`'s `cache_control`, when it had one.
fn with_cache(mut to: Value, from: &Value) -> Value {
    if let Some(c) = from.get("cache_control") {
        to["cache_control"] = c.clone();
    }
    to
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_exchange_becomes_text_and_nothing_it_did_is_lost() {
        let mut body = json!({"thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "t", "signature": "sig-a"},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "b's", "signature": ""}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Running both."},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "ls"}},
                {"type": "tool_use", "id": "t3", "name": "Shot", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "is_error": true, "content": "exit 2"},
                {"type": "tool_result", "tool_use_id": "t3", "content": [
                    {"type": "text", "text": "the screen"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}],
                 "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "<system-reminder>keep going</system-reminder>"}]}
        ]})
        .as_object()
        .cloned()
        .unwrap_or_default();
        assert_eq!(close(&mut body), 2);
        let msgs = body["messages"].as_array().cloned().unwrap_or_default();
        // The earlier exchange is untouched; the thinking-only message is gone.
        assert_eq!(msgs.len(), 5);
        assert_eq!(msgs[1]["content"][1]["type"], "tool_use");
        assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
        assert_eq!(
            msgs[3]["content"],
            json!([
                {"type": "text", "text": "Running both."},
                {"type": "text", "text": "(Called the `Bash` tool with {\"command\":\"ls\"}.)"},
                {"type": "text", "text": "(Called the `Shot` tool with {}.)"}])
        );
        assert_eq!(
            msgs[4]["content"],
            json!([
                {"type": "text", "text": "(The `Bash` tool failed: exit 2)"},
                {"type": "text", "text": "(The `Shot` tool returned: the screen)"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                 "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "<system-reminder>keep going</system-reminder>"}])
        );
        assert!(!body["messages"].to_string().contains("tool_use_id\":\"t2"));
    }

    #[test]
    fn a_body_without_an_assistant_turn_is_left_alone() {
        let mut body = json!({"messages": [{"role": "user", "content": "hi"}]})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let before = body.clone();
        assert_eq!(close(&mut body), 0);
        assert_eq!(body, before);
    }
}
