//! OpenAI Chat Completions <-> canonical model, for requests, responses and stream chunks.

use serde_json::{json, Map, Value};

use super::{
    str_at, ChatRequest, ChatResponse, Message, Part, Role, StopReason, StreamEvent, Tool, Usage,
};

pub use super::InvalidRequest;
use super::{invalid, opt_bool, opt_f64, opt_u64};

/// Fields with a canonical slot; everything else goes to `extra`.
const KNOWN: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "stream",
    "stream_options",
    "response_format",
    "parallel_tool_calls",
];

/// An OpenAI Chat Completions body as a canonical request. Long because it is a flat list of
/// fields, each checked with its own message.
pub fn request_from_openai(body: &Map<String, Value>) -> Result<ChatRequest, InvalidRequest> {
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        Some(Value::String(_)) | None | Some(Value::Null) => return Err(invalid(
            "model",
            "`model` is required: use \"auto\", a route name, a provider id or \"provider/model\"",
        )),
        Some(_) => return Err(invalid("model", "`model` must be a string")),
    };
    let messages = match body.get("messages") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => {
            return Err(invalid(
                "messages",
                "`messages` must contain at least one message",
            ))
        }
        None | Some(Value::Null) => return Err(invalid("messages", "`messages` is required")),
        Some(_) => return Err(invalid("messages", "`messages` must be an array")),
    };
    let mut req = ChatRequest {
        model,
        ..ChatRequest::default()
    };
    for (i, m) in messages.iter().enumerate() {
        parse_message(m, i, &mut req)?;
    }
    if let Some(tools) = body.get("tools").filter(|v| !v.is_null()) {
        let Value::Array(tools) = tools else {
            return Err(invalid("tools", "`tools` must be an array"));
        };
        for (i, t) in tools.iter().enumerate() {
            let f = t.get("function").unwrap_or(t);
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("tools[{i}].function.name"), "tool needs a name"))?;
            req.tools.push(Tool {
                name: name.to_string(),
                description: f
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                parameters: f
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                freeform: None,
            });
        }
    }
    req.tool_choice = body
        .get("tool_choice")
        .and_then(super::ToolChoice::from_openai);
    req.output = body
        .get("response_format")
        .and_then(super::OutputFormat::from_openai);
    req.parallel_tool_calls = opt_bool(body, "parallel_tool_calls")?;
    req.max_tokens = match opt_u64(body, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => opt_u64(body, "max_tokens")?,
    };
    req.temperature = opt_f64(body, "temperature")?;
    req.top_p = opt_f64(body, "top_p")?;
    req.stop = match body.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| invalid("stop", "`stop` must be a string or an array of strings"))?,
        Some(_) => {
            return Err(invalid(
                "stop",
                "`stop` must be a string or an array of strings",
            ))
        }
    };
    req.stream = opt_bool(body, "stream")?.unwrap_or(false);
    req.stream_usage = body
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for (k, v) in body {
        if !KNOWN.contains(&k.as_str()) {
            req.extra.insert(k.clone(), v.clone());
        }
    }
    req.effort = super::effort::level(body.get("reasoning_effort"));
    Ok(req)
}

fn parse_message(m: &Value, i: usize, req: &mut ChatRequest) -> Result<(), InvalidRequest> {
    let at = |f: &str| format!("messages[{i}].{f}");
    let Value::Object(m) = m else {
        return Err(invalid(
            format!("messages[{i}]"),
            "each message must be an object",
        ));
    };
    let role = m
        .get("role")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(at("role"), "message needs a `role`"))?;
    let content = m.get("content").unwrap_or(&Value::Null);
    let name = m.get("name").and_then(Value::as_str).map(str::to_string);
    match role {
        "system" | "developer" => {
            req.system.push(text_of(content, || at("content"))?);
            return Ok(());
        }
        "user" | "assistant" | "tool" | "function" => {}
        other => {
            return Err(invalid(
                at("role"),
                format!("unknown role `{other}`; use system, developer, user, assistant or tool"),
            ))
        }
    }
    let mut parts = Vec::new();
    if role == "tool" || role == "function" {
        let call_id = m
            .get("tool_call_id")
            .and_then(Value::as_str)
            .or(name.as_deref())
            .unwrap_or_default()
            .to_string();
        parts.push(Part::ToolResult {
            call_id,
            content: text_of(content, || at("content"))?,
        });
        req.messages.push(Message {
            role: Role::Tool,
            content: parts,
            name,
        });
        return Ok(());
    }
    match content {
        Value::Null => {}
        Value::String(s) => parts.push(Part::Text(s.clone())),
        Value::Array(items) => {
            for (j, item) in items.iter().enumerate() {
                parts.extend(content_part(i, j, item)?);
            }
        }
        _ => {
            return Err(invalid(
                at("content"),
                "content must be a string or an array of parts",
            ))
        }
    }
    if role == "assistant" {
        if let Some(Value::Array(calls)) = m.get("tool_calls") {
            parts.extend(calls.iter().map(tool_call_part));
        }
    }
    req.messages.push(Message {
        role: if role == "assistant" {
            Role::Assistant
        } else {
            Role::User
        },
        content: parts,
        name,
    });
    Ok(())
}

/// Part `j` of message `i`'s content list; `None` for a part with no canonical slot and no text.
fn content_part(i: usize, j: usize, item: &Value) -> Result<Option<Part>, InvalidRequest> {
    // As OpenAI does: every part says its type, and a text part has its text.
    let kind = item.get("type").and_then(Value::as_str).ok_or_else(|| {
        invalid(
            format!("messages[{i}].content[{j}].type"),
            "each content part needs a string `type` (\"text\", \"image_url\", …)",
        )
    })?;
    Ok(match kind {
        "text" | "input_text" | "output_text" => Some(Part::Text(
            item.get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    invalid(
                        format!("messages[{i}].content[{j}].text"),
                        "a text part needs a string `text`",
                    )
                })?
                .to_string(),
        )),
        "image_url" => {
            let iu = item.get("image_url");
            let url = iu
                .and_then(|v| v.get("url").or(Some(v)))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    invalid(
                        format!("messages[{i}].content[{j}].image_url.url"),
                        "image part needs a url",
                    )
                })?;
            Some(Part::Image {
                url: url.to_string(),
                detail: iu
                    .and_then(|v| v.get("detail"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            })
        }
        // Audio, files and refusals have no canonical slot yet; keep their text if any.
        _ => item
            .get("text")
            .and_then(Value::as_str)
            .map(|t| Part::Text(t.to_string())),
    })
}

/// One entry of an assistant message's `tool_calls`.
fn tool_call_part(c: &Value) -> Part {
    let f = c.get("function").unwrap_or(&Value::Null);
    Part::ToolCall {
        id: str_at(c, "id"),
        name: str_at(f, "name"),
        arguments: match f.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => "{}".into(),
        },
    }
}

/// `param` names the field in an error; it is written only when there is one.
fn text_of(content: &Value, param: impl FnOnce() -> String) -> Result<String, InvalidRequest> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(items) => Ok(items
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")),
        _ => Err(invalid(
            param(),
            "content must be a string or an array of text parts",
        )),
    }
}

/// Canonical request -> OpenAI Chat Completions body.
pub fn request_to_openai(req: &ChatRequest) -> Map<String, Value> {
    // Ids several providers made may repeat, or hold characters this API refuses.
    let fitted = super::ids::fit(req, super::ids::IdRule::Unique);
    let req: &ChatRequest = &fitted;
    let mut body = req.extra.clone();
    body.insert("model".into(), json!(req.model));
    let mut messages = Vec::new();
    for s in &req.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    for m in &req.messages {
        messages.extend(message_to_openai(m));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut f = json!({"name": t.name, "parameters": t.parameters});
                if let Some(d) = &t.description {
                    f["description"] = json!(d);
                }
                json!({"type": "function", "function": f})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(tc) = &req.tool_choice {
        body.insert("tool_choice".into(), tc.to_openai());
    }
    if let Some(p) = req.parallel_tool_calls.filter(|_| !req.tools.is_empty()) {
        body.insert("parallel_tool_calls".into(), json!(p));
    }
    if let Some(f) = &req.output {
        body.insert("response_format".into(), f.to_openai());
    }
    if let Some(n) = req.max_tokens {
        body.insert("max_tokens".into(), json!(n));
    }
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(p) = req.top_p {
        body.insert("top_p".into(), json!(p));
    }
    if !req.stop.is_empty() {
        body.insert("stop".into(), json!(req.stop));
    }
    if req.stream {
        body.insert("stream".into(), json!(true));
        if req.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    body
}

fn message_to_openai(m: &Message) -> Vec<Value> {
    match m.role {
        Role::Tool => m
            .content
            .iter()
            .filter_map(|p| match p {
                Part::ToolResult { call_id, content } => {
                    Some(json!({"role": "tool", "tool_call_id": call_id, "content": content}))
                }
                _ => None,
            })
            .collect(),
        Role::User | Role::Assistant => {
            let role = if m.role == Role::User {
                "user"
            } else {
                "assistant"
            };
            let mut out = json!({"role": role});
            let texts_only = m.content.iter().all(|p| !matches!(p, Part::Image { .. }));
            let mut parts = Vec::new();
            let mut calls = Vec::new();
            for p in &m.content {
                match p {
                    Part::Text(t) => parts.push(json!({"type": "text", "text": t})),
                    Part::Image { url, detail } => {
                        let mut iu = json!({"url": url});
                        if let Some(d) = detail {
                            iu["detail"] = json!(d);
                        }
                        parts.push(json!({"type": "image_url", "image_url": iu}));
                    }
                    Part::ToolCall {
                        id,
                        name,
                        arguments,
                    } => calls.push(json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}})),
                    // Reasoning is the answering model's, not part of the conversation sent on.
                    Part::ToolResult { .. } | Part::Reasoning(_) | Part::WebSearch(_) => {}
                }
            }
            let texts = m
                .content
                .iter()
                .filter(|p| matches!(p, Part::Text(_)))
                .count();
            out["content"] = match (&m.content.first(), texts_only, texts) {
                // No text at all: `null` beside tool calls, "" otherwise.
                (_, true, 0) if !calls.is_empty() => Value::Null,
                (_, true, 0) => json!(""),
                // One text part: the plain string every server accepts.
                (Some(Part::Text(t)), true, 1) => json!(t),
                // Several parts keep their boundaries.
                _ => Value::Array(parts),
            };
            if !calls.is_empty() {
                out["tool_calls"] = Value::Array(calls);
            }
            if let Some(n) = &m.name {
                out["name"] = json!(n);
            }
            vec![out]
        }
    }
}

pub fn usage_from_openai(u: &Value) -> Option<Usage> {
    let input = u.get("prompt_tokens")?.as_u64()?;
    Some(Usage {
        input_tokens: input,
        output_tokens: u
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cached_input_tokens: super::at(u, &["prompt_tokens_details", "cached_tokens"])
            .and_then(Value::as_u64)
            .unwrap_or(0),
        cache_write_tokens: 0,
    })
}

fn usage_to_openai(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
    })
}

/// OpenAI `chat.completion` body -> canonical response (first choice).
pub fn response_from_openai(v: &Value) -> Option<ChatResponse> {
    let choice = v.get("choices")?.get(0)?;
    let msg = choice.get("message")?;
    let mut content = Vec::new();
    if let Some(t) = reasoning_of(msg) {
        content.push(Part::Reasoning(t.to_string()));
    }
    if let Some(t) = msg.get("content").and_then(Value::as_str) {
        content.push(Part::Text(t.to_string()));
    }
    if let Some(Value::Array(calls)) = msg.get("tool_calls") {
        for c in calls {
            let f = c.get("function").unwrap_or(&Value::Null);
            content.push(Part::ToolCall {
                id: str_at(c, "id"),
                name: str_at(f, "name"),
                arguments: str_at(f, "arguments"),
            });
        }
    }
    Some(ChatResponse {
        id: str_at(v, "id"),
        model: str_at(v, "model"),
        created: v.get("created").and_then(Value::as_i64).unwrap_or(0),
        content,
        stop: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(StopReason::from_openai),
        usage: v.get("usage").and_then(usage_from_openai),
    })
}

/// A message's or delta's reasoning, in the field reasoning models' servers put it in
/// (`reasoning_content`: DeepSeek, vLLM, Qwen; `reasoning`: OpenRouter, Ollama).
fn reasoning_of(v: &Value) -> Option<&str> {
    ["reasoning_content", "reasoning"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .filter(|t| !t.is_empty())
}

/// Canonical response -> OpenAI `chat.completion` body.
pub fn response_to_openai(r: &ChatResponse) -> Value {
    let text = r.text();
    let calls: Vec<Value> = r
        .content
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall {
                id,
                name,
                arguments,
            } => Some(json!({"id": id, "type": "function",
                "function": {"name": name, "arguments": arguments}})),
            _ => None,
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) }});
    let reasoning = r.reasoning();
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let mut out = json!({
        "id": r.id, "object": "chat.completion", "created": r.created, "model": r.model,
        "choices": [{"index": 0, "message": message,
            "finish_reason": r.stop.as_ref().map(StopReason::as_openai)}],
    });
    if let Some(u) = &r.usage {
        out["usage"] = usage_to_openai(u);
    }
    out
}

/// One OpenAI `chat.completion.chunk` -> canonical events (first choice).
pub fn chunk_events(v: &Value) -> Vec<StreamEvent> {
    let mut out = Vec::new();
    if let Some(choice) = v.get("choices").and_then(|c| c.get(0)) {
        if let Some(delta) = choice.get("delta") {
            if let Some(t) = reasoning_of(delta) {
                out.push(StreamEvent::ReasoningDelta(t.to_string()));
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                if !t.is_empty() {
                    out.push(StreamEvent::TextDelta(t.to_string()));
                }
            }
            if let Some(Value::Array(calls)) = delta.get("tool_calls") {
                for c in calls {
                    let index = c.get("index").and_then(Value::as_u64).unwrap_or(0) as u32;
                    let f = c.get("function").unwrap_or(&Value::Null);
                    if let Some(id) = c.get("id").and_then(Value::as_str) {
                        out.push(StreamEvent::ToolCallStart {
                            index,
                            id: id.to_string(),
                            name: str_at(f, "name"),
                        });
                    }
                    if let Some(a) = f.get("arguments").and_then(Value::as_str) {
                        if !a.is_empty() {
                            out.push(StreamEvent::ToolCallDelta {
                                index,
                                arguments: a.to_string(),
                            });
                        }
                    }
                }
            }
        }
        if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
            out.push(StreamEvent::Finish(StopReason::from_openai(r)));
        }
    }
    if let Some(u) = v.get("usage").and_then(usage_from_openai) {
        out.push(StreamEvent::Usage(u));
    }
    out
}

/// Canonical event -> one OpenAI chunk body.
pub fn event_to_chunk(ev: &StreamEvent, id: &str, model: &str, created: i64) -> Value {
    let (delta, finish, usage) = match ev {
        StreamEvent::TextDelta(t) => (json!({"content": t}), Value::Null, None),
        // The field reasoning models' OpenAI-compatible servers use (DeepSeek, vLLM, Qwen).
        StreamEvent::ReasoningDelta(t) => (json!({"reasoning_content": t}), Value::Null, None),
        StreamEvent::ToolCallStart { index, id, name } => (
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
            None,
        ),
        StreamEvent::ToolCallDelta { index, arguments } => (
            json!({"tool_calls": [{"index": index, "function": {"arguments": arguments}}]}),
            Value::Null,
            None,
        ),
        StreamEvent::Finish(r) => (json!({}), json!(r.as_openai()), None),
        StreamEvent::Usage(u) => (json!({}), Value::Null, Some(usage_to_openai(u))),
        // Chat Completions has no search item: the answer's text carries what was found.
        StreamEvent::WebSearch(_) => (json!({}), Value::Null, None),
    };
    let choices = if usage.is_some() {
        json!([])
    } else {
        json!([{"index": 0, "delta": delta, "finish_reason": finish}])
    };
    let mut chunk = json!({"id": id, "object": "chat.completion.chunk", "created": created,
        "model": model, "choices": choices});
    if let Some(u) = usage {
        chunk["usage"] = u;
    }
    chunk
}

pub mod stream;

#[cfg(test)]
mod tests;
