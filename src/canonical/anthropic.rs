//! Anthropic Messages API <-> canonical model: requests, complete answers, and the streaming
//! event sequence (`message_start` … `message_stop`) built from canonical stream events.

use serde_json::{json, Map, Value};

use super::{
    invalid, ChatRequest, ChatResponse, InvalidRequest, Message, Part, Role, StopReason, Tool,
    Usage,
};

fn text_of_blocks(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub fn request_from_anthropic(body: &Map<String, Value>) -> Result<ChatRequest, InvalidRequest> {
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        _ => {
            return Err(invalid(
                "model",
                "model: Field required (a model name or a Baton route)",
            ))
        }
    };
    let messages = match body.get("messages") {
        Some(Value::Array(m)) if !m.is_empty() => m,
        Some(Value::Array(_)) => {
            return Err(invalid(
                "messages",
                "messages: at least one message is required",
            ))
        }
        _ => return Err(invalid("messages", "messages: Field required")),
    };
    let mut req = ChatRequest {
        model,
        ..ChatRequest::default()
    };
    match body.get("system") {
        None | Some(Value::Null) => {}
        Some(s @ (Value::String(_) | Value::Array(_))) => req.system.push(text_of_blocks(s)),
        Some(_) => {
            return Err(invalid(
                "system",
                "system: must be a string or a list of text blocks",
            ))
        }
    }
    for (i, m) in messages.iter().enumerate() {
        push_message(&mut req, i, m)?;
    }
    req.tools = tools_from_anthropic(body)?;
    req.web_search = super::search::WebSearch::from_anthropic(body);
    if let Some(tc) = body.get("tool_choice") {
        req.tool_choice = super::ToolChoice::from_anthropic(tc);
        if tc.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
            req.parallel_tool_calls = Some(false);
        }
    }
    req.output = super::OutputFormat::from_anthropic(body);
    req.max_tokens = super::opt_u64(body, "max_tokens")?;
    req.temperature = super::opt_f64(body, "temperature")?;
    req.top_p = super::opt_f64(body, "top_p")?;
    req.stop = stop_sequences(body)?;
    req.stream = super::opt_bool(body, "stream")?.unwrap_or(false);
    // A translated stream needs the upstream's usage for message_delta. The client's other
    // fields (metadata, cache_control, context_management…) stay in its own body, which only
    // an Anthropic upstream receives.
    req.stream_usage = req.stream;
    req.effort = super::effort::from_anthropic(body);
    Ok(req)
}

/// Message `i` of a request: a system message joins the system prompt; tool results become
/// their own tool turn (as in the canonical and OpenAI models), ahead of the rest.
fn push_message(req: &mut ChatRequest, i: usize, m: &Value) -> Result<(), InvalidRequest> {
    let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
    let content = m.get("content").unwrap_or(&Value::Null);
    let role = match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        // Claude Code sends a system message inside `messages`.
        "system" => {
            req.system.push(text_of_blocks(content));
            return Ok(());
        }
        other => {
            return Err(invalid(
                format!("messages.{i}.role"),
                format!("messages.{i}.role: unexpected role `{other}`; use user or assistant"),
            ))
        }
    };
    let mut parts = Vec::new();
    let mut results = Vec::new();
    match content {
        Value::String(s) => parts.push(Part::Text(s.clone())),
        Value::Array(blocks) => {
            for (j, b) in blocks.iter().enumerate() {
                match block_part(i, j, b)? {
                    // A search's result inside the assistant's turn (a server tool's): the
                    // turn so far, then the result as its own tool turn, as other APIs have it.
                    Some(p @ Part::ToolResult { .. }) if role == Role::Assistant => {
                        if !parts.is_empty() {
                            req.messages.push(Message {
                                role,
                                content: std::mem::take(&mut parts),
                                name: None,
                            });
                        }
                        req.messages.push(Message {
                            role: Role::Tool,
                            content: vec![p],
                            name: None,
                        });
                    }
                    Some(p @ Part::ToolResult { .. }) => results.push(p),
                    Some(p) => parts.push(p),
                    None => {}
                }
            }
        }
        Value::Null => {}
        _ => {
            return Err(invalid(
                format!("messages.{i}.content"),
                format!("messages.{i}.content: must be a string or a list of content blocks"),
            ))
        }
    }
    if !results.is_empty() {
        req.messages.push(Message {
            role: Role::Tool,
            content: results,
            name: None,
        });
    }
    if !parts.is_empty() {
        req.messages.push(Message {
            role,
            content: parts,
            name: None,
        });
    }
    Ok(())
}

/// Content block `j` of message `i`; `None` for blocks other formats have no place for
/// (thinking, unknown types).
fn block_part(i: usize, j: usize, b: &Value) -> Result<Option<Part>, InvalidRequest> {
    // As the Messages API does: every block says its type, a text block has text.
    let kind = b.get("type").and_then(Value::as_str).ok_or_else(|| {
        invalid(
            format!("messages.{i}.content.{j}.type"),
            format!("messages.{i}.content.{j}: each content block needs a string `type` (\"text\", \"image\", \"tool_use\", \"tool_result\", …)"),
        )
    })?;
    Ok(Some(match kind {
        "text" => Part::Text(
            b.get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    invalid(
                        format!("messages.{i}.content.{j}.text"),
                        format!(
                            "messages.{i}.content.{j}.text: a text block needs a string `text`"
                        ),
                    )
                })?
                .to_string(),
        ),
        "image" => {
            let src = b.get("source").unwrap_or(&Value::Null);
            let url = match src.get("type").and_then(Value::as_str) {
                Some("base64") => format!(
                    "data:{};base64,{}",
                    src.get("media_type")
                        .and_then(Value::as_str)
                        .unwrap_or("image/png"),
                    src.get("data").and_then(Value::as_str).unwrap_or_default()
                ),
                _ => src
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            };
            Part::Image { url, detail: None }
        }
        "tool_use" => tool_use_part(b),
        // A web search the server ran reads as the call it was (other server tools have no
        // slot elsewhere).
        "server_tool_use" if super::str_at(b, "name") == super::search::TOOL => tool_use_part(b),
        "web_search_tool_result" => super::search::anthropic_result_part(b),
        "tool_result" => Part::ToolResult {
            call_id: b
                .get("tool_use_id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            content: text_of_blocks(b.get("content").unwrap_or(&Value::Null)),
        },
        _ => return Ok(None),
    }))
}

fn tools_from_anthropic(body: &Map<String, Value>) -> Result<Vec<Tool>, InvalidRequest> {
    let tools = match body.get("tools") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(t)) => &t[..],
        Some(_) => return Err(invalid("tools", "tools: must be a list of tools")),
    };
    tools
        .iter()
        .enumerate()
        // The hosted web search is no function: `req.web_search`.
        .filter(|(_, t)| !super::search::WebSearch::is_anthropic(t))
        .map(|(i, t)| {
            let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
                invalid(
                    format!("tools.{i}.name"),
                    format!("tools.{i}.name: Field required"),
                )
            })?;
            Ok(Tool {
                name: name.to_string(),
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                parameters: t
                    .get("input_schema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                freeform: None,
            })
        })
        .collect()
}

fn stop_sequences(body: &Map<String, Value>) -> Result<Vec<String>, InvalidRequest> {
    let bad = || {
        invalid(
            "stop_sequences",
            "`stop_sequences` must be an array of strings",
        )
    };
    match body.get("stop_sequences") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

/// A `tool_use` block (in a request's history or an answer) as a canonical tool call.
fn tool_use_part(b: &Value) -> Part {
    Part::ToolCall {
        id: super::str_at(b, "id"),
        name: super::str_at(b, "name"),
        arguments: b
            .get("input")
            .map(Value::to_string)
            .unwrap_or_else(|| "{}".into()),
    }
}

pub fn stop_reason(s: &StopReason) -> &'static str {
    match s {
        StopReason::Stop | StopReason::Other(_) => "end_turn",
        StopReason::Length => "max_tokens",
        StopReason::ToolCalls => "tool_use",
        StopReason::ContentFilter => "refusal",
    }
}

/// Canonical answer -> Anthropic `message`.
/// `thinking`: the client asked for thinking, and gets the upstream's reasoning as (unsigned)
/// thinking blocks.
pub fn response_to_anthropic(r: &ChatResponse, model: &str, thinking: bool) -> Value {
    let content: Vec<Value> = r
        .content
        .iter()
        .flat_map(|p| match p {
            Part::WebSearch(run) => vec![run.anthropic_call(), run.anthropic_result()],
            p => block(p, thinking).into_iter().collect(),
        })
        .collect();
    let usage = r.usage.unwrap_or_default();
    let mut usage = usage_json(&usage);
    let searches = r
        .content
        .iter()
        .filter(|p| matches!(p, Part::WebSearch(_)))
        .count();
    if searches > 0 {
        usage["server_tool_use"] = json!({ "web_search_requests": searches });
    }
    json!({
        "id": anthropic_id(&r.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": r.stop.as_ref().map(stop_reason).unwrap_or("end_turn"),
        "stop_sequence": null,
        "usage": usage,
    })
}

/// One canonical part of an answer as an Anthropic content block, if it has one.
fn block(p: &Part, thinking: bool) -> Option<Value> {
    match p {
        Part::Text(t) if !t.is_empty() => Some(json!({"type": "text", "text": t})),
        Part::Reasoning(t) if thinking && !t.is_empty() => {
            Some(json!({"type": "thinking", "thinking": t, "signature": ""}))
        }
        Part::ToolCall {
            id,
            name,
            arguments,
        } => Some(json!({"type": "tool_use", "id": id, "name": name,
                "input": serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({}))})),
        _ => None,
    }
}

/// Usage as Anthropic counts it: `input_tokens` only what was neither read from nor written to
/// the cache.
pub(super) fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens
            .saturating_sub(u.cached_input_tokens)
            .saturating_sub(u.cache_write_tokens),
        "output_tokens": u.output_tokens,
        "cache_read_input_tokens": u.cached_input_tokens,
        "cache_creation_input_tokens": u.cache_write_tokens,
    })
}

pub(super) fn anthropic_id(id: &str) -> String {
    if id.starts_with("msg_") {
        id.to_string()
    } else {
        format!("msg_{}", id.trim_start_matches("chatcmpl-"))
    }
}

/// Canonical request -> Anthropic Messages body (for `anthropic` upstreams). Consecutive
/// same-role turns are merged (the API requires alternation); tool results become `tool_result`
/// blocks in a user turn; `max_tokens` is filled in when the client left it out. Long because
/// it is one walk over the messages with an arm per part kind, merging turns as it goes.
/// Whether a Messages request asks for thinking (`enabled` or `adaptive`).
pub fn thinking_asked(body: &Map<String, Value>) -> bool {
    body.get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t == "enabled" || t == "adaptive")
}

/// Canonical messages as Messages turns: consecutive turns of one role joined, as the API
/// wants user and assistant to alternate.
fn messages_to_anthropic(messages: &[crate::canonical::Message]) -> Vec<Value> {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in messages {
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks: Vec<Value> = m
            .content
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) if !t.is_empty() => Some(json!({"type": "text", "text": t})),
                Part::Text(_) => None,
                Part::Image { url, .. } => Some(image_block(url)),
                Part::ToolCall { id, name, arguments } => Some(json!({"type": "tool_use", "id": id, "name": name,
                    "input": serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| json!({}))})),
                Part::ToolResult { call_id, content } => {
                    Some(json!({"type": "tool_result", "tool_use_id": call_id, "content": content}))
                }
                // Unsigned reasoning from elsewhere: Anthropic takes only its own, signed.
                Part::Reasoning(_) | Part::WebSearch(_) => None,
            })
            .collect();
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

pub fn request_to_anthropic(
    req: &ChatRequest,
    model: &str,
    default_max_tokens: u64,
) -> Map<String, Value> {
    // Ids several providers made may repeat, or hold characters this API refuses.
    let fitted = super::ids::fit(req, super::ids::IdRule::Anthropic);
    let req: &ChatRequest = &fitted;
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let mut system = req.system.join("\n\n");
    // Structured output: a schema goes in `output_config.format`; a bare JSON object, which
    // the Messages API has no format for, is asked for in words.
    match req.output.as_ref().map(|f| (f, f.to_anthropic())) {
        Some((_, Some(format))) => {
            body.insert("output_config".into(), json!({ "format": format }));
        }
        Some((_, None)) => {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str("Answer with one JSON object and nothing else.");
        }
        None => {}
    }
    if !system.is_empty() {
        body.insert("system".into(), json!(system));
    }
    let messages = messages_to_anthropic(&req.messages);
    body.insert("messages".into(), Value::Array(messages));
    tools_to_anthropic(req, &mut body);
    let max_tokens = req.max_tokens.unwrap_or(default_max_tokens);
    body.insert("max_tokens".into(), json!(max_tokens));
    // The client's effort as a thinking budget, for a Claude that thinks (which then takes no
    // temperature or top_p of the client's). In the middle of a tool loop the API wants the
    // final assistant turn to begin with signed thinking, which a translated conversation
    // cannot have: the Anthropic kind closes that exchange (`providers::thinking`).
    let thinking = req
        .effort
        .as_deref()
        .filter(|_| super::effort::claude_thinks(model))
        .and_then(|e| super::effort::anthropic_thinking(e, max_tokens));
    // No `temperature` or `top_p`: the Messages API as published (the SDKs' request types)
    // has no sampling parameters, and refuses them as extra inputs.
    if let Some(t) = thinking {
        body.insert("thinking".into(), t);
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), json!(req.stop));
    }
    if req.stream {
        body.insert("stream".into(), json!(true));
    }
    body
}

/// The client's tools and tool choice in Anthropic's shapes.
fn tools_to_anthropic(req: &ChatRequest, body: &mut Map<String, Value>) {
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut v = json!({"name": t.name, "input_schema": t.parameters});
                if let Some(d) = &t.description {
                    v["description"] = json!(d);
                }
                v
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let parallel_off = req.parallel_tool_calls == Some(false) && !req.tools.is_empty();
    let choice = match (&req.tool_choice, parallel_off) {
        (Some(tc), _) => Some(tc.to_anthropic()),
        (None, true) => Some(super::ToolChoice::Auto.to_anthropic()),
        (None, false) => None,
    };
    if let Some(mut c) = choice {
        if parallel_off && c["type"] != "none" {
            c["disable_parallel_tool_use"] = json!(true);
        }
        body.insert("tool_choice".into(), c);
    }
}

fn image_block(url: &str) -> Value {
    match url
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(";base64,"))
    {
        Some((media_type, data)) => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        None => json!({"type": "image", "source": {"type": "url", "url": url}}),
    }
}

pub(super) fn stop_from_anthropic(s: &str) -> StopReason {
    match s {
        "end_turn" | "stop_sequence" | "pause_turn" => StopReason::Stop,
        "max_tokens" => StopReason::Length,
        "tool_use" => StopReason::ToolCalls,
        "refusal" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_string()),
    }
}

pub fn usage_from_anthropic(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cache_read_input_tokens");
    let written = n("cache_creation_input_tokens");
    Usage {
        input_tokens: n("input_tokens") + cached + written,
        output_tokens: n("output_tokens"),
        cached_input_tokens: cached,
        cache_write_tokens: written,
    }
}

/// Anthropic `message` -> canonical answer.
pub fn response_from_anthropic(v: &Value) -> Option<ChatResponse> {
    if v.get("type").and_then(Value::as_str) != Some("message") {
        return None;
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => Some(Part::Text(
                b.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            )),
            Some("tool_use") => Some(tool_use_part(b)),
            // Readable thinking (not `redacted_thinking`); its signature stays here.
            Some("thinking") => b
                .get("thinking")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
                .map(|t| Part::Reasoning(t.to_string())),
            _ => None,
        })
        .collect();
    Some(ChatResponse {
        id: crate::canonical::str_at(v, "id"),
        model: crate::canonical::str_at(v, "model"),
        created: 0,
        content,
        stop: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(stop_from_anthropic),
        usage: v.get("usage").map(usage_from_anthropic),
    })
}

pub mod stream;

#[cfg(test)]
mod tests;
