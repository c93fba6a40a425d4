//! Bedrock's Converse API (`POST /model/{id}/converse` and `/converse-stream`), as strict as the
//! service: the body is checked against botocore's service model (`contract::Api::BedrockConverse`:
//! unknown members, Smithy unions with one member set, lengths, ranges, tool-name and id
//! patterns), then against the conversation rules AWS states in its own words (a user turn
//! first, roles alternating, each tool result answering a tool use of the turn before). The
//! answer is the Anthropic fake's, read back the other way: this file's own translation of a
//! Converse body to the Messages API and of the answer to Converse's shapes (a complete
//! `ConverseResponse`, or `messageStart` … `metadata` event-stream messages padded with `p` as
//! AWS pads them), so Baton's translation is checked against code that is not Baton's.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::{aws_error, message, Account};
use crate::contract::Api;
use crate::Shared;

/// `POST /model/{id}/converse[-stream]`, authenticated already.
pub(crate) async fn converse(
    s: Arc<Shared>,
    account: &Account,
    model: &str,
    headers: HeaderMap,
    body: &[u8],
    stream: bool,
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "SerializationException",
            "Unexpected content: the body is not JSON",
        );
    };
    let api = if stream {
        Api::BedrockConverseStream
    } else {
        Api::BedrockConverse
    };
    if let Some(r) = s.contract(api, &body) {
        return r;
    }
    if let Err(message) = conversation_rules(&body) {
        s.refusals.lock().unwrap().push(message.clone());
        return aws_error(StatusCode::BAD_REQUEST, "ValidationException", &message);
    }
    if !account.models.iter().any(|m| m == model) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The provided model identifier is invalid.",
        );
    }
    if stream && super::take_exception(&s) {
        return super::throttled_stream();
    }
    let mut messages = match to_messages(&body) {
        Ok(m) => m,
        Err(message) => return aws_error(StatusCode::BAD_REQUEST, "ValidationException", &message),
    };
    messages.insert("model".into(), json!(model));
    if stream {
        messages.insert("stream".into(), json!(true));
    }
    let mut headers = headers;
    headers.remove("authorization");
    let answer = crate::anthropic::messages(
        State(s),
        headers,
        Bytes::from(serde_json::to_vec(&messages).unwrap()),
    )
    .await;
    if !answer.status().is_success() {
        return as_aws_error(answer).await;
    }
    let (mut parts, body) = answer.into_parts();
    parts.headers.remove("content-length");
    if stream {
        parts.headers.insert(
            "content-type",
            HeaderValue::from_static("application/vnd.amazon.eventstream"),
        );
        return Response::from_parts(parts, Body::from_stream(events(body)));
    }
    let bytes = axum::body::to_bytes(body, 1 << 24)
        .await
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let mut r = axum::Json(response_of(&v)).into_response();
    r.headers_mut()
        .extend(parts.headers.into_iter().filter_map(|(k, v)| Some((k?, v))));
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

/// CountTokens' `converse` input (checked as a Converse body's members), counted by the
/// Anthropic fake.
pub(crate) async fn count(
    s: Arc<Shared>,
    model: &str,
    headers: HeaderMap,
    conversation: &Value,
) -> Response {
    let Some(c) = conversation.as_object() else {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "input.converse must be an object",
        );
    };
    if let Some(k) = c.keys().find(|k| {
        !matches!(
            k.as_str(),
            "messages" | "system" | "toolConfig" | "additionalModelRequestFields"
        )
    }) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            &format!("Unknown parameter in input.converse: \"{k}\""),
        );
    }
    if let Some(r) = s.contract(Api::BedrockConverse, conversation) {
        return r;
    }
    if let Err(message) = conversation_rules(conversation) {
        return aws_error(StatusCode::BAD_REQUEST, "ValidationException", &message);
    }
    let mut b = match to_messages(conversation) {
        Ok(b) => b,
        Err(message) => return aws_error(StatusCode::BAD_REQUEST, "ValidationException", &message),
    };
    b.remove("max_tokens");
    b.insert("model".into(), json!(model));
    let answer = crate::anthropic::count_tokens(
        State(s),
        headers,
        Bytes::from(serde_json::to_vec(&b).unwrap()),
    )
    .await;
    super::as_input_tokens(answer).await
}

/// The rules AWS checks beyond the model: the first turn is the user's, turns alternate, and a
/// turn's tool results answer the tool uses of the turn before it.
fn conversation_rules(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let has = |kind: &str| {
        messages.iter().any(|m| {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|b| b.get(kind).is_some())
        })
    };
    if (has("toolUse") || has("toolResult")) && body.get("toolConfig").is_none() {
        return Err("The toolConfig field must be defined when using toolUse and toolResult content blocks.".into());
    }
    if messages.first().is_some_and(|m| m["role"] != "user") {
        return Err("A conversation must start with a user message. Try again with a conversation that starts with a user message.".into());
    }
    for pair in messages.windows(2) {
        if pair[0]["role"] == pair[1]["role"] {
            return Err("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.".into());
        }
    }
    let blocks = |m: &Value, kind: &str, id: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b.get(kind)?.get(id)?.as_str().map(str::to_string))
            .collect()
    };
    for (i, m) in messages.iter().enumerate() {
        let results = blocks(m, "toolResult", "toolUseId");
        if results.is_empty() {
            continue;
        }
        let uses = i
            .checked_sub(1)
            .map(|p| blocks(&messages[p], "toolUse", "toolUseId"))
            .unwrap_or_default();
        if results.len() > uses.len() {
            return Err(format!("The number of toolResult blocks at messages.{i}.content exceeds the number of toolUse blocks of previous turn."));
        }
        if let Some(stray) = results.iter().find(|r| !uses.contains(r)) {
            return Err(format!("The toolUseId {stray} in messages.{i}.content does not match any toolUse block of the previous turn."));
        }
    }
    Ok(())
}

/// A Converse body as the Messages API's (this fake's own reading of AWS's documentation).
fn to_messages(body: &Value) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    let system: Vec<Value> = body["system"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b.get("text"))
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    let mut messages = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let mut content = Vec::new();
        for b in m["content"].as_array().into_iter().flatten() {
            if let Some(block) = block_of(b)? {
                content.push(block);
            }
        }
        messages.push(json!({"role": m["role"], "content": content}));
    }
    out.insert("messages".into(), Value::Array(messages));
    let cfg = &body["inferenceConfig"];
    // Converse leaves `maxTokens` to the model's default; the Messages API needs one.
    out.insert(
        "max_tokens".into(),
        cfg.get("maxTokens").cloned().unwrap_or(json!(4096)),
    );
    // The sampling settings are the model's; the model here (the Anthropic fake, of an API
    // version without them) takes the stop sequences only.
    if let Some(v) = cfg.get("stopSequences") {
        out.insert("stop_sequences".into(), v.clone());
    }
    if let Some(tc) = body.get("toolConfig") {
        let tools: Vec<Value> = tc["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("toolSpec"))
            .map(|t| {
                let mut tool = json!({"name": t["name"], "input_schema": t["inputSchema"]["json"]});
                if let Some(d) = t.get("description") {
                    tool["description"] = d.clone();
                }
                tool
            })
            .collect();
        out.insert("tools".into(), Value::Array(tools));
        if let Some(choice) = tc.get("toolChoice").and_then(Value::as_object) {
            let choice = match choice.keys().next().map(String::as_str) {
                Some("any") => json!({"type": "any"}),
                Some("tool") => json!({"type": "tool", "name": choice["tool"]["name"]}),
                _ => json!({"type": "auto"}),
            };
            out.insert("tool_choice".into(), choice);
        }
    }
    if let Some(schema) = body.pointer("/outputConfig/textFormat/structure/jsonSchema/schema") {
        let parsed: Value = serde_json::from_str(schema.as_str().unwrap_or_default())
            .map_err(|_| "The provided JSON schema is not valid JSON.".to_string())?;
        out.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": parsed}}),
        );
    }
    // A model's own fields (Claude's `thinking`) go to it as they are.
    if let Some(Value::Object(extra)) = body.get("additionalModelRequestFields") {
        for (k, v) in extra {
            out.insert(k.clone(), v.clone());
        }
    }
    Ok(out)
}

/// One Converse content block as a Messages content block (`None`: a cache point).
fn block_of(b: &Value) -> Result<Option<Value>, String> {
    let (kind, v) = b
        .as_object()
        .and_then(|o| o.iter().next())
        .ok_or("an empty content block")?;
    Ok(Some(match kind.as_str() {
        "text" => json!({"type": "text", "text": v}),
        "image" => json!({"type": "image", "source": {"type": "base64",
            "media_type": format!("image/{}", v["format"].as_str().unwrap_or("png")),
            "data": v["source"]["bytes"]}}),
        "toolUse" => json!({"type": "tool_use", "id": v["toolUseId"], "name": v["name"],
            "input": v["input"]}),
        "toolResult" => {
            let text: Vec<String> = v["content"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| match (c.get("text"), c.get("json")) {
                    (Some(Value::String(t)), _) => t.clone(),
                    (_, Some(j)) => j.to_string(),
                    _ => String::new(),
                })
                .collect();
            json!({"type": "tool_result", "tool_use_id": v["toolUseId"], "content": text.join(""),
                "is_error": v.get("status") == Some(&json!("error"))})
        }
        "reasoningContent" => match v.get("reasoningText") {
            Some(r) => json!({"type": "thinking", "thinking": r["text"],
                "signature": r.get("signature").cloned().unwrap_or(json!(""))}),
            None => json!({"type": "redacted_thinking", "data": v["redactedContent"]}),
        },
        "cachePoint" => return Ok(None),
        other => return Err(format!("This fake does not take {other} blocks.")),
    }))
}

/// A Messages stop reason as Converse's.
fn stop_of(reason: &Value) -> &'static str {
    match reason.as_str().unwrap_or_default() {
        "tool_use" => "tool_use",
        "max_tokens" => "max_tokens",
        "stop_sequence" => "stop_sequence",
        "refusal" => "content_filtered",
        _ => "end_turn",
    }
}

/// A Messages `usage` as Converse's `TokenUsage`.
fn usage_of(u: &Value) -> Value {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let read = n("cache_read_input_tokens");
    let write = n("cache_creation_input_tokens");
    let input = n("input_tokens");
    let output = n("output_tokens");
    json!({"inputTokens": input, "outputTokens": output,
        "totalTokens": input + output + read + write,
        "cacheReadInputTokens": read, "cacheWriteInputTokens": write})
}

/// A Messages answer as a `ConverseResponse`.
fn response_of(v: &Value) -> Value {
    let content: Vec<Value> = v["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| match b["type"].as_str()? {
            "text" => Some(json!({"text": b["text"]})),
            "tool_use" => Some(json!({"toolUse": {"toolUseId": b["id"], "name": b["name"],
                "input": b["input"]}})),
            "thinking" => Some(json!({"reasoningContent": {"reasoningText": {
                "text": b["thinking"], "signature": b["signature"]}}})),
            _ => None,
        })
        .collect();
    json!({"output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_of(&v["stop_reason"]), "usage": usage_of(&v["usage"]),
        "metrics": {"latencyMs": 12}})
}

/// An Anthropic error answer as AWS's (its exception in `x-amzn-ErrorType`).
async fn as_aws_error(answer: Response) -> Response {
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let message = v
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("The request failed.");
    let exception = match parts.status.as_u16() {
        429 => "ThrottlingException",
        400 | 413 => "ValidationException",
        401 | 403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        503 | 529 => "ServiceUnavailableException",
        _ => "InternalServerException",
    };
    let status = if parts.status.as_u16() == 529 {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        parts.status
    };
    aws_error(status, exception, message)
}

/// The padding AWS puts in each event, so its length does not tell its content.
const PAD: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV";

fn event(kind: &str, mut payload: Value) -> Bytes {
    payload["p"] = json!(&PAD[..(payload.to_string().len() % PAD.len()).max(1)]);
    Bytes::from(message(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    ))
}

fn exception(kind: &str, message_text: &str) -> Bytes {
    Bytes::from(message(
        &[
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({"message": message_text}).to_string().as_bytes(),
    ))
}

/// What a Messages stream has said so far, for Converse's events.
#[derive(Default)]
struct Turn {
    stop: Value,
    usage: Map<String, Value>,
}

impl Turn {
    /// One Messages event as Converse's events.
    fn events(&mut self, v: &Value) -> Vec<Bytes> {
        let index = v.get("index").cloned().unwrap_or(json!(0));
        match v["type"].as_str().unwrap_or_default() {
            "message_start" => {
                if let Some(Value::Object(u)) = v.pointer("/message/usage") {
                    self.usage.extend(u.clone());
                }
                vec![event("messageStart", json!({"role": "assistant"}))]
            }
            "content_block_start" if v["content_block"]["type"] == "tool_use" => {
                let b = &v["content_block"];
                vec![event(
                    "contentBlockStart",
                    json!({"contentBlockIndex": index,
                        "start": {"toolUse": {"toolUseId": b["id"], "name": b["name"]}}}),
                )]
            }
            "content_block_delta" => {
                let d = &v["delta"];
                let delta = match d["type"].as_str().unwrap_or_default() {
                    "text_delta" => json!({"text": d["text"]}),
                    "input_json_delta" => json!({"toolUse": {"input": d["partial_json"]}}),
                    "thinking_delta" => json!({"reasoningContent": {"text": d["thinking"]}}),
                    "signature_delta" => {
                        json!({"reasoningContent": {"signature": d["signature"]}})
                    }
                    _ => return Vec::new(),
                };
                vec![event(
                    "contentBlockDelta",
                    json!({"contentBlockIndex": index, "delta": delta}),
                )]
            }
            "content_block_stop" => vec![event(
                "contentBlockStop",
                json!({"contentBlockIndex": index}),
            )],
            "message_delta" => {
                self.stop = v["delta"]["stop_reason"].clone();
                if let Some(Value::Object(u)) = v.get("usage") {
                    self.usage.extend(u.clone());
                }
                Vec::new()
            }
            "message_stop" => vec![
                event("messageStop", json!({"stopReason": stop_of(&self.stop)})),
                event(
                    "metadata",
                    json!({"usage": usage_of(&Value::Object(self.usage.clone())),
                        "metrics": {"latencyMs": 12}}),
                ),
            ],
            "error" => {
                let kind = match v["error"]["type"].as_str().unwrap_or_default() {
                    "rate_limit_error" => "throttlingException",
                    "overloaded_error" => "serviceUnavailableException",
                    _ => "internalServerException",
                };
                vec![exception(
                    kind,
                    v["error"]["message"].as_str().unwrap_or("error"),
                )]
            }
            _ => Vec::new(),
        }
    }
}

/// The Anthropic fake's SSE body as Converse's event-stream messages.
fn events(body: Body) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let mut turn = Turn::default();
    super::reframed(body, move |data| {
        match serde_json::from_str::<Value>(data) {
            Ok(v) => turn.events(&v),
            Err(_) => Vec::new(),
        }
    })
}
