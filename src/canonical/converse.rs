//! AWS Bedrock's Converse API <-> canonical model: the one request shape Bedrock takes for every
//! model it hosts (Llama, Mistral, Nova, DeepSeek, Claude…), its answers and its stream events.
//! The shapes are botocore's service model of `bedrock-runtime` (`ConverseRequest`,
//! `ConverseResponse`, `ConverseStreamOutput`): every content block is a union with one member
//! set (`{"text": …}`, `{"toolUse": …}`), the settings are `inferenceConfig`, the tools
//! `toolConfig`, and a stream is typed events (`messageStart`, `contentBlockStart`,
//! `contentBlockDelta`, `contentBlockStop`, `messageStop`, `metadata`), which
//! `providers::eventstream` hands on as `{"<type>": <event>}`.
//!
//! What Converse cannot carry is said, never dropped silently: an image by `https:` URL (Converse
//! takes bytes or S3) goes as a line of text naming it. Reasoning is the answering model's and
//! is not sent back, so no signature made on another platform reaches Bedrock.

use serde_json::{json, Map, Value};

use super::{ChatRequest, ChatResponse, Part, Role, StopReason, StreamEvent, Usage};

/// The image formats Converse takes (`ImageFormat`).
const IMAGE_FORMATS: [&str; 4] = ["png", "jpeg", "gif", "webp"];

/// Converse's `temperature` and `topP` are in [0, 1] (OpenAI's temperature goes to 2).
fn unit(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// One canonical part as a Converse content block (`None`: nothing Converse carries).
fn block(p: &Part) -> Option<Value> {
    Some(match p {
        Part::Text(t) if t.is_empty() => return None,
        Part::Text(t) => json!({"text": t}),
        Part::Image { url, .. } => {
            let inline = url
                .strip_prefix("data:image/")
                .and_then(|r| r.split_once(";base64,"))
                .map(|(f, data)| (if f == "jpg" { "jpeg" } else { f }, data))
                .filter(|(f, _)| IMAGE_FORMATS.contains(f));
            match inline {
                Some((format, data)) => {
                    json!({"image": {"format": format, "source": {"bytes": data}}})
                }
                None => json!({"text": format!("[image: {url}]")}),
            }
        }
        Part::ToolCall {
            id,
            name,
            arguments,
        } => json!({"toolUse": {"toolUseId": id, "name": name,
            "input": serde_json::from_str::<Value>(arguments)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!({}))}}),
        Part::ToolResult { call_id, content } => {
            let content: Vec<Value> = if content.is_empty() {
                Vec::new()
            } else {
                vec![json!({"text": content})]
            };
            json!({"toolResult": {"toolUseId": call_id, "content": content}})
        }
        Part::Reasoning(_) | Part::WebSearch(_) => return None,
    })
}

/// The turns, user first and alternating, as Converse requires: a tool's results are the user's
/// turn, and turns of one role in a row are one.
fn turns(req: &ChatRequest) -> Vec<Value> {
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for m in &req.messages {
        let role = if m.role == Role::Assistant {
            "assistant"
        } else {
            "user"
        };
        let blocks: Vec<Value> = m.content.iter().filter_map(block).collect();
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, b)) if *r == role => b.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    if turns.first().is_some_and(|(r, _)| *r == "assistant") {
        turns.insert(0, ("user", vec![json!({"text": "(continued)"})]));
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// `toolConfig`: the declared tools, and a stand-in for each tool the history calls that is no
/// longer declared (Bedrock refuses `toolUse` blocks without a `toolConfig`).
fn tool_config(req: &ChatRequest) -> Option<Value> {
    let mut tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| {
            let mut spec = json!({"name": t.name, "inputSchema": {"json": t.parameters}});
            if let Some(d) = t.description.as_deref().filter(|d| !d.is_empty()) {
                spec["description"] = json!(d);
            }
            json!({"toolSpec": spec})
        })
        .collect();
    for m in &req.messages {
        for p in &m.content {
            if let Part::ToolCall { name, .. } = p {
                if !req.tools.iter().any(|t| &t.name == name)
                    && !tools.iter().any(|t| t["toolSpec"]["name"] == *name)
                {
                    tools.push(json!({"toolSpec": {"name": name,
                        "inputSchema": {"json": {"type": "object"}}}}));
                }
            }
        }
    }
    if tools.is_empty() {
        return None;
    }
    let mut config = json!({ "tools": tools });
    if let Some(choice) = req.tool_choice.as_ref().and_then(|c| c.to_converse()) {
        config["toolChoice"] = choice;
    }
    Some(config)
}

/// Canonical request -> Converse body (without the model, which is in the path). `max_output`
/// caps `maxTokens` at the model's own limit, when known.
pub fn request_to_converse(req: &ChatRequest, max_output: Option<u64>) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(turns(req)));
    let system: Vec<Value> = req
        .system
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| json!({ "text": s }))
        .collect();
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    let mut cfg = Map::new();
    if let Some(n) = req.max_tokens {
        let n = max_output.map_or(n, |c| n.min(c)).max(1);
        cfg.insert("maxTokens".into(), json!(n));
    }
    if let Some(t) = req.temperature {
        cfg.insert("temperature".into(), json!(unit(t)));
    }
    if let Some(p) = req.top_p {
        cfg.insert("topP".into(), json!(unit(p)));
    }
    let stops: Vec<&String> = req.stop.iter().filter(|s| !s.is_empty()).collect();
    if !stops.is_empty() {
        cfg.insert("stopSequences".into(), json!(stops));
    }
    if !cfg.is_empty() {
        body.insert("inferenceConfig".into(), Value::Object(cfg));
    }
    if let Some(tc) = tool_config(req) {
        body.insert("toolConfig".into(), tc);
    }
    if let Some(f) = req.output.as_ref().and_then(|f| f.to_converse()) {
        body.insert("outputConfig".into(), json!({ "textFormat": f }));
    }
    body
}

/// A Converse stop reason as canonical.
fn stop_from(s: &str) -> StopReason {
    match s {
        "end_turn" | "stop_sequence" => StopReason::Stop,
        "tool_use" => StopReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "guardrail_intervened" | "content_filtered" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_string()),
    }
}

/// Converse's `TokenUsage`: `inputTokens` leaves out what was read from or written to the cache.
pub fn usage_from_converse(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cacheReadInputTokens");
    let written = n("cacheWriteInputTokens");
    Usage {
        input_tokens: n("inputTokens") + cached + written,
        output_tokens: n("outputTokens"),
        cached_input_tokens: cached,
        cache_write_tokens: written,
    }
}

/// A `ConverseResponse` -> canonical answer (it names neither an id nor the model).
pub fn response_from_converse(v: &Value) -> Option<ChatResponse> {
    let message = super::at(v, &["output", "message"])?;
    let mut content = Vec::new();
    for b in message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = b.get("text").and_then(Value::as_str) {
            content.push(Part::Text(t.to_string()));
        } else if let Some(u) = b.get("toolUse") {
            content.push(Part::ToolCall {
                id: super::str_at(u, "toolUseId"),
                name: super::str_at(u, "name"),
                arguments: u.get("input").map_or_else(|| "{}".into(), Value::to_string),
            });
        } else if let Some(t) =
            super::at(b, &["reasoningContent", "reasoningText", "text"]).and_then(Value::as_str)
        {
            content.push(Part::Reasoning(t.to_string()));
        }
    }
    Some(ChatResponse {
        id: String::new(),
        model: String::new(),
        created: 0,
        stop: v.get("stopReason").and_then(Value::as_str).map(stop_from),
        content,
        usage: v.get("usage").map(usage_from_converse),
    })
}

/// ConverseStream's events -> canonical events: a tool call's block index becomes its call
/// index, the stop comes with `messageStop` and the usage with `metadata`, the stream's last
/// event.
#[derive(Default)]
pub struct StreamDecoder {
    /// The content block index of each tool call begun, in order.
    calls: Vec<u64>,
}

impl StreamDecoder {
    /// One event (`{"<type>": <event>}`); `true` with the events when it was the last one.
    pub fn push(&mut self, v: &Value) -> (Vec<StreamEvent>, bool) {
        let Some((kind, e)) = v.as_object().and_then(|o| o.iter().next()) else {
            return (Vec::new(), false);
        };
        let index = e.get("contentBlockIndex").and_then(Value::as_u64);
        let mut out = Vec::new();
        match kind.as_str() {
            "contentBlockStart" => {
                if let (Some(u), Some(i)) = (super::at(e, &["start", "toolUse"]), index) {
                    self.calls.push(i);
                    out.push(StreamEvent::ToolCallStart {
                        index: (self.calls.len() - 1) as u32,
                        id: super::str_at(u, "toolUseId"),
                        name: super::str_at(u, "name"),
                    });
                }
            }
            "contentBlockDelta" => {
                let d = &e["delta"];
                if let Some(t) = d.get("text").and_then(Value::as_str) {
                    out.push(StreamEvent::TextDelta(t.to_string()));
                } else if let Some(args) =
                    super::at(d, &["toolUse", "input"]).and_then(Value::as_str)
                {
                    if let Some(call) = self.calls.iter().position(|c| Some(*c) == index) {
                        out.push(StreamEvent::ToolCallDelta {
                            index: call as u32,
                            arguments: args.to_string(),
                        });
                    }
                } else if let Some(t) =
                    super::at(d, &["reasoningContent", "text"]).and_then(Value::as_str)
                {
                    out.push(StreamEvent::ReasoningDelta(t.to_string()));
                }
            }
            "messageStop" => {
                let stop = stop_from(e.get("stopReason").and_then(Value::as_str).unwrap_or(""));
                out.push(StreamEvent::Finish(
                    if self.calls.is_empty() || stop != StopReason::Stop {
                        stop
                    } else {
                        StopReason::ToolCalls
                    },
                ));
            }
            "metadata" => {
                if let Some(u) = e.get("usage") {
                    out.push(StreamEvent::Usage(usage_from_converse(u)));
                }
                return (out, true);
            }
            _ => {}
        }
        (out, false)
    }
}

#[cfg(test)]
mod tests;
