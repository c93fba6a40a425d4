//! The fake upstream as an Anthropic Messages API: same script, Anthropic's answer shapes and
//! streaming event sequence.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::contract::Api;
use crate::{sse, Behavior, InFlight, Received, Shared};

/// The fake as an Anthropic Messages API: same script, Anthropic's shapes and event sequence.
/// Long because it is the behaviour table again, each arm in Anthropic's shapes.
pub(crate) async fn messages(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = body.clone();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // The beta fields are accepted when the request names a beta.
    let api = if headers.contains_key("anthropic-beta") {
        Api::AnthropicBetaMessages
    } else {
        Api::AnthropicMessages
    };
    let subscription = s.subscription.lock().unwrap().clone();
    let refusal = match subscription {
        Some(token) => refuse_but(&headers, &token),
        None => s.strict().then(|| refuse(&headers)).flatten(),
    };
    s.receive(Received {
        headers,
        body: body.clone(),
        raw,
    });
    if let Some(r) = refusal {
        return r;
    }
    if let Some(r) = s.contract(api, &body) {
        return r;
    }
    if let Some(message) = refuse_tools(&body) {
        s.refusals.lock().unwrap().push(message.clone());
        return crate::refuse::anthropic(&message);
    }
    if let Some(message) = refuse_thinking(&s.name, &body) {
        s.refusals.lock().unwrap().push(message.clone());
        return crate::refuse::anthropic(&message);
    }
    let _guard = InFlight::new(s.clone());
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    // The web search server tool runs here, as on Anthropic's servers (complete answers).
    if !stream {
        if let Some(q) = crate::search::native_query(&s, &body) {
            let model = body["model"].as_str().unwrap_or("fake");
            return axum::Json(crate::search::anthropic_answer(model, &q)).into_response();
        }
    }
    let behavior = crate::resolve_auto(s.next_behavior(), &body);
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_string();
    let last_user = last_user_text(&body);
    // Extra response headers (the unified usage windows a subscription reports).
    let extra = match &behavior {
        Behavior::OkHeaders(h) => h.clone(),
        _ => Vec::new(),
    };
    let (blocks, stop, cut) = match behavior {
        Behavior::Status {
            status,
            body,
            headers,
        } => {
            return crate::status_response(status, body, headers);
        }
        Behavior::ToolCall { name, arguments } => (
            vec![
                // Unique, as the real ids are: this fake's name and its request's number.
                json!({"type": "tool_use", "id": tool_id(&s.name, s.hits.load(std::sync::atomic::Ordering::SeqCst)), "name": name,
                "input": serde_json::from_str::<Value>(&arguments).unwrap_or(json!({}))}),
            ],
            "tool_use",
            None,
        ),
        // Parallel calls: several tool_use blocks in one message, each with its own id.
        Behavior::ToolCalls(calls) => (
            calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    let n = s.hits.load(std::sync::atomic::Ordering::SeqCst);
                    json!({"type": "tool_use", "id": format!("{}_{i}", tool_id(&s.name, n)), "name": name,
                    "input": serde_json::from_str::<Value>(arguments).unwrap_or(json!({}))})
                })
                .collect(),
            "tool_use",
            None,
        ),
        Behavior::Text(t) => (vec![json!({"type": "text", "text": t})], "end_turn", None),
        Behavior::StreamDies(n) => (
            vec![
                json!({"type": "text", "text": crate::schema_answer(&body).unwrap_or_else(|| format!("{}: {}", s.name, last_user))}),
            ],
            "end_turn",
            Some(n),
        ),
        _ => {
            let text = crate::schema_answer(&body)
                .unwrap_or_else(|| format!("{}: {}", s.name, last_user));
            let (text, cut) = crate::model::within_limit(text, &body);
            (
                vec![json!({"type": "text", "text": text})],
                if cut { "max_tokens" } else { "end_turn" },
                None,
            )
        }
    };
    // With thinking on, the answer begins with a thinking block this fake signs as its own.
    let thinking = body
        .pointer("/thinking/type")
        .and_then(Value::as_str)
        .is_some_and(|t| t == "enabled" || t == "adaptive");
    let mut blocks = blocks;
    if thinking {
        let n = s.hits.load(std::sync::atomic::Ordering::SeqCst);
        blocks.insert(
            0,
            json!({"type": "thinking", "thinking": format!("{} thinks.", s.name),
                "signature": signature(&s.name, n)}),
        );
    }
    let usage = if s.cached() {
        json!({"input_tokens": 18, "cache_read_input_tokens": 80,
            "cache_creation_input_tokens": 2, "output_tokens": 7})
    } else {
        json!({"input_tokens": 11, "output_tokens": 7})
    };
    let mut start_usage = usage.clone();
    start_usage["output_tokens"] = json!(0);
    let with_extra = |mut r: Response| {
        for (k, v) in &extra {
            if let (Ok(k), Ok(v)) = (
                axum::http::HeaderName::from_bytes(k.as_bytes()),
                axum::http::HeaderValue::from_str(v),
            ) {
                r.headers_mut().insert(k, v);
            }
        }
        r
    };
    // Each answer its own id, as the API gives: Claude Code joins the messages of one id.
    let id = format!(
        "msg_fake_{}_{}",
        s.name,
        s.hits.load(std::sync::atomic::Ordering::SeqCst)
    );
    if !stream {
        return with_extra(
            axum::Json(
                json!({"id": id, "type": "message", "role": "assistant", "model": model,
            "content": blocks, "stop_reason": stop, "stop_sequence": null, "usage": usage}),
            )
            .into_response(),
        );
    }
    let frame = |ev: &str, data: Value| Bytes::from(format!("event: {ev}\ndata: {data}\n\n"));
    let mut frames = vec![frame(
        "message_start",
        json!({"type": "message_start", "message": {"id": id,
        "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": null,
        "usage": start_usage}}),
    )];
    let mut deltas = 0;
    for (i, b) in blocks.iter().enumerate() {
        if b["type"] == "thinking" {
            frames.push(frame("content_block_start", json!({"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "", "signature": ""}})));
            frames.push(frame("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": b["thinking"]}})));
            frames.push(frame("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta", "signature": b["signature"]}})));
        } else if b["type"] == "text" {
            frames.push(frame("content_block_start", json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})));
            for w in b["text"].as_str().unwrap_or("").split_inclusive(' ') {
                frames.push(frame("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": w}})));
                deltas += 1;
                if cut == Some(deltas) {
                    break;
                }
            }
        } else {
            frames.push(frame("content_block_start", json!({"type": "content_block_start", "index": i,
                "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})));
            let args = b["input"].to_string();
            let mid = args.len() / 2;
            for part in [&args[..mid], &args[mid..]] {
                frames.push(frame("content_block_delta", json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": part}})));
            }
        }
        if cut.is_none() {
            frames.push(frame(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": i}),
            ));
        }
    }
    if cut.is_none() {
        frames.push(frame("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 7}})));
        frames.push(frame("message_stop", json!({"type": "message_stop"})));
    }
    let body = futures_util::stream::iter(frames.into_iter().map(Ok::<Bytes, Infallible>));
    with_extra(sse(Body::from_stream(body)))
}

/// `count_tokens` with an exact-looking answer the tests can tell from Baton's estimate.
pub(crate) async fn count_tokens(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = body.clone();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refused = s.contract(Api::AnthropicCountTokens, &body);
    s.receive(Received { headers, body, raw });
    if let Some(r) = refused {
        return r;
    }
    axum::Json(json!({"input_tokens": 4242})).into_response()
}

/// A subscription endpoint: only `Authorization: Bearer {token}`.
fn refuse_but(headers: &HeaderMap, token: &str) -> Option<Response> {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok());
    if bearer == Some(&format!("Bearer {token}")) && !headers.contains_key("x-api-key") {
        return None;
    }
    Some(
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"type": "error", "error": {"type": "authentication_error",
                "message": "Invalid bearer token"}}),
            ),
        )
            .into_response(),
    )
}

/// What Anthropic answers a request that is not authenticated its way.
fn refuse(headers: &HeaderMap) -> Option<Response> {
    let error = |status: StatusCode, kind: &str, message: &str| {
        (
            status,
            axum::Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
        )
            .into_response()
    };
    if headers.contains_key("authorization") || !headers.contains_key("x-api-key") {
        return Some(error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        ));
    }
    if !headers.contains_key("anthropic-version") {
        return Some(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version: header is required",
        ));
    }
    None
}

/// The text of the last user message (a string or its last text block).
fn last_user_text(body: &Value) -> String {
    // The user's words, past turns that only carry tool results (as the OpenAI fake reads past
    // tool messages).
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "user")
        .find_map(|m| match &m["content"] {
            Value::String(t) => Some(t.clone()),
            // A tool exchange written out as text is a tool's result, not the user's words.
            Value::Array(blocks) => blocks
                .iter()
                .rev()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .find(|t| !crate::model::told_tool_result(t))
                .map(str::to_string),
            _ => None,
        })
        .unwrap_or_default()
}

/// What the real API refuses in a conversation's thinking: a block another account signed (or
/// nobody did), and, with thinking enabled, a final assistant turn that called a tool without
/// beginning with thinking.
fn refuse_thinking(name: &str, body: &Value) -> Option<String> {
    let refuse = Some;
    let messages = body.get("messages").and_then(Value::as_array)?;
    let own = signed_by(name);
    for (i, m) in messages.iter().enumerate() {
        let blocks = m.get("content").and_then(Value::as_array);
        for (j, b) in blocks.into_iter().flatten().enumerate() {
            let seal = match b["type"].as_str() {
                Some("thinking") => b["signature"].as_str(),
                Some("redacted_thinking") => b["data"].as_str(),
                _ => continue,
            };
            if !seal.is_some_and(|s| s.starts_with(&own)) {
                return refuse(format!(
                    "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                ));
            }
        }
    }
    // With `enabled` thinking only: adaptive thinking may or may not think in a turn.
    let thinking_on = body.pointer("/thinking/type").and_then(Value::as_str) == Some("enabled");
    // The API joins consecutive turns of one role (Claude Code sends a turn's thinking and its
    // tool call as two assistant messages): the last assistant turn is the last such run.
    let end = messages.iter().rposition(|m| m["role"] == "assistant")?;
    let start = messages[..end]
        .iter()
        .rposition(|m| m["role"] != "assistant")
        .map_or(0, |p| p + 1);
    let i = start;
    let blocks: Vec<&Value> = messages[start..=end]
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .collect();
    let calls = blocks.iter().any(|b| b["type"] == "tool_use");
    let first = blocks
        .first()
        .and_then(|b| b["type"].as_str())
        .unwrap_or("");
    if thinking_on && calls && first != "thinking" && first != "redacted_thinking" {
        return refuse(format!(
            "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."
        ));
    }
    None
}

/// This fake's signature for its `n`th thinking block: base64-looking, as the real ones are
/// (Claude Code keeps only those in the history it sends back), with the fake's name in it.
fn signature(name: &str, n: usize) -> String {
    format!("{}{n:X}MA", signed_by(name))
}

/// How every signature of this fake begins.
fn signed_by(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("EqQBCkYIBxgCKkA{hex}Zz")
}

/// What the real API refuses in a conversation's tool turns: a `tool_use` id used twice, a
/// `tool_use` not answered by a `tool_result` in the next message, and a `tool_result` whose
/// call is not in the message before. Consecutive messages of one role count as one turn, as
/// the API joins them.
pub(crate) fn refuse_tools(body: &Value) -> Option<String> {
    let messages = body.get("messages").and_then(Value::as_array)?;
    // The turns: (role, index of the turn's first message, its blocks).
    let mut turns: Vec<(String, usize, Vec<Value>)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default().to_string();
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        match turns.last_mut() {
            Some((r, _, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, i, blocks)),
        }
    }
    let ids = |blocks: &[Value], kind: &str, field: &str| -> Vec<String> {
        blocks
            .iter()
            .filter(|b| b["type"] == kind)
            .filter_map(|b| b[field].as_str().map(str::to_string))
            .collect()
    };
    let mut seen = std::collections::HashSet::new();
    for (t, (role, i, blocks)) in turns.iter().enumerate() {
        if role == "assistant" {
            let uses = ids(blocks, "tool_use", "id");
            for (j, id) in uses.iter().enumerate() {
                // The API's pattern for a tool_use id.
                let pattern = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
                if id.is_empty() || !id.bytes().all(pattern) {
                    return Some(format!(
                        "messages.{i}.content.{j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                    ));
                }
                if !seen.insert(id.clone()) {
                    return Some(format!(
                        "messages.{i}.content: `tool_use` ids must be unique"
                    ));
                }
            }
            let answered = turns
                .get(t + 1)
                .map(|(_, _, next)| ids(next, "tool_result", "tool_use_id"))
                .unwrap_or_default();
            let missing: Vec<&String> = uses.iter().filter(|u| !answered.contains(u)).collect();
            if !missing.is_empty() && t + 1 < turns.len() {
                return Some(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.",
                    missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ));
            }
        } else {
            let results = ids(blocks, "tool_result", "tool_use_id");
            let called = t
                .checked_sub(1)
                .map(|p| ids(&turns[p].2, "tool_use", "id"))
                .unwrap_or_default();
            if let Some(stray) = results.iter().find(|r| !called.contains(r)) {
                return Some(format!(
                    "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
        }
    }
    None
}

/// A `tool_use` id no other fake or request repeats (`toolu_` and letters, as the API's are).
fn tool_id(name: &str, n: usize) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("toolu_fake{hex}x{n}")
}
