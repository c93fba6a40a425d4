//! The other direction, for `openai-responses` upstreams: a canonical request as a Responses
//! request, and a Responses answer and its stream events as canonical ones. A freeform tool
//! goes as a `custom` tool, its calls in the conversation as `custom_tool_call` items; a
//! freeform call the upstream makes (`custom_tool_call`) becomes a tool call whose arguments
//! are `{"input": …}`, as a freeform call travels everywhere else.

use serde_json::{json, Map, Value};

use crate::canonical::FREEFORM_INPUT;
use crate::canonical::{
    freeform_input, ChatRequest, ChatResponse, Part, Role, StopReason, StreamEvent, Usage,
};

/// A canonical request as a Responses body (Baton keeps no state upstream either: `store` is
/// off and the whole conversation goes in `input`).
pub fn request_to_responses(req: &ChatRequest) -> Map<String, Value> {
    // Ids several providers made may repeat (the API keys outputs by call id).
    let fitted = crate::canonical::ids::fit(req, crate::canonical::ids::IdRule::Unique);
    let req: &ChatRequest = &fitted;
    let mut b = Map::new();
    b.insert("model".into(), json!(req.model));
    if !req.system.is_empty() {
        b.insert("instructions".into(), json!(req.system.join("\n\n")));
    }
    let mut input = Vec::new();
    let mut freeform_calls = Vec::new();
    for m in &req.messages {
        push_items(&mut input, m.role, &m.content, req, &mut freeform_calls);
    }
    b.insert("input".into(), Value::Array(input));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req.tools.iter().map(tool).collect();
        b.insert("tools".into(), Value::Array(tools));
    }
    if let Some(tc) = &req.tool_choice {
        let mut choice = tc.to_responses();
        // One freeform tool is chosen as one (`{"type": "custom", "name"}`).
        if choice
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| req.is_freeform(n))
        {
            choice["type"] = json!("custom");
        }
        b.insert("tool_choice".into(), choice);
    }
    if let Some(n) = req.max_tokens {
        b.insert("max_output_tokens".into(), json!(n));
    }
    for (k, v) in [("temperature", req.temperature), ("top_p", req.top_p)] {
        if let Some(v) = v {
            b.insert(k.into(), json!(v));
        }
    }
    if let Some(p) = req.parallel_tool_calls.filter(|_| !req.tools.is_empty()) {
        b.insert("parallel_tool_calls".into(), json!(p));
    }
    if let Some(f) = &req.output {
        b.insert("text".into(), json!({ "format": f.to_responses() }));
    }
    b.insert("stream".into(), json!(req.stream));
    b.insert("store".into(), json!(false));
    b
}

/// A tool as the Responses API declares it: a freeform tool as a `custom` tool (the model
/// then answers it with a `custom_tool_call`), a function as a function. `strict` is required
/// on a function, and strict mode would refuse the schemas most clients write (optional
/// properties, open objects): a translated function is not strict.
fn tool(t: &crate::canonical::Tool) -> Value {
    let mut v = match &t.freeform {
        Some(f) => json!({"type": "custom", "name": t.name, "format": f.to_responses()}),
        None => json!({"type": "function", "name": t.name, "parameters": t.parameters,
            "strict": false}),
    };
    if let Some(d) = &t.description {
        v["description"] = json!(d);
    }
    v
}

/// One canonical message as input items: its text and images as a message, its tool calls and
/// results as their own items (a freeform tool's as `custom_tool_call` and its output;
/// `freeform_calls` keeps their ids for the outputs that follow).
fn push_items(
    input: &mut Vec<Value>,
    role: Role,
    content: &[Part],
    req: &ChatRequest,
    freeform_calls: &mut Vec<String>,
) {
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    for p in content {
        match p {
            Part::Text(t) => parts.push(json!({"type": "input_text", "text": t})),
            Part::Image { url, detail } => parts.push(json!({"type": "input_image",
                "image_url": url, "detail": detail.as_deref().unwrap_or("auto")})),
            Part::ToolCall {
                id,
                name,
                arguments,
            } if req.is_freeform(name) => {
                freeform_calls.push(id.clone());
                calls.push(
                    json!({"type": "custom_tool_call", "call_id": id, "name": name,
                    "input": freeform_input(arguments)}),
                );
            }
            Part::ToolCall {
                id,
                name,
                arguments,
            } => calls.push(json!({"type": "function_call", "call_id": id, "name": name,
                "arguments": arguments})),
            Part::ToolResult { call_id, content } => {
                let kind = if freeform_calls.contains(call_id) {
                    "custom_tool_call_output"
                } else {
                    "function_call_output"
                };
                calls.push(json!({"type": kind, "call_id": call_id, "output": content}));
            }
            // Reasoning is the answering model's, not part of the conversation sent on.
            Part::Reasoning(_) | Part::WebSearch(_) => {}
        }
    }
    if !parts.is_empty() {
        if role == Role::Assistant {
            // An earlier answer is an easy input message with its text as a string: the
            // request types take `output_text` parts only in an output message the server
            // made (with its `id`, `status` and `annotations`), which a translated one is not.
            let text: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            input.push(json!({"type": "message", "role": "assistant", "content": text}));
        } else {
            input.push(json!({"type": "message", "role": "user", "content": parts}));
        }
    }
    input.extend(calls);
}

/// Chat Completions' `response_format` as a Responses `text.format`.
/// The usage of a `response` object.
pub(crate) fn usage_from_responses(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("/input_tokens"),
        output_tokens: n("/output_tokens"),
        cached_input_tokens: n("/input_tokens_details/cached_tokens"),
        cache_write_tokens: 0,
    }
}

/// A tool call item (`function_call` or `custom_tool_call`) as canonical name and arguments.
fn call_of(item: &Value) -> Option<(String, String, String)> {
    let s = |k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
    match item.get("type").and_then(Value::as_str)? {
        "function_call" => Some((
            s("call_id")?,
            s("name")?,
            s("arguments").unwrap_or_default(),
        )),
        "custom_tool_call" => Some((
            s("call_id")?,
            s("name")?,
            json!({ FREEFORM_INPUT: s("input").unwrap_or_default() }).to_string(),
        )),
        _ => None,
    }
}

/// A complete `response` object as a canonical answer.
pub fn response_from_responses(v: &Value) -> Option<ChatResponse> {
    let output = v.get("output")?.as_array()?;
    let mut content = Vec::new();
    for item in output {
        if item.get("type").and_then(Value::as_str) == Some("reasoning") {
            let summary: String = item
                .get("summary")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n");
            if !summary.is_empty() {
                content.push(Part::Reasoning(summary));
            }
        } else if item.get("type").and_then(Value::as_str) == Some("message") {
            for p in item
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    content.push(Part::Text(t.to_string()));
                }
            }
        } else if let Some((id, name, arguments)) = call_of(item) {
            content.push(Part::ToolCall {
                id,
                name,
                arguments,
            });
        }
    }
    let calls = content.iter().any(|p| matches!(p, Part::ToolCall { .. }));
    Some(ChatResponse {
        id: crate::canonical::str_at(v, "id"),
        model: crate::canonical::str_at(v, "model"),
        created: v.get("created_at").and_then(Value::as_i64).unwrap_or(0),
        content,
        stop: Some(stop_of(v, calls)),
        usage: v
            .get("usage")
            .filter(|u| u.is_object())
            .map(usage_from_responses),
    })
}

fn stop_of(response: &Value, calls: bool) -> StopReason {
    if response.get("status").and_then(Value::as_str) == Some("incomplete") {
        StopReason::Length
    } else if calls {
        StopReason::ToolCalls
    } else {
        StopReason::Stop
    }
}

/// A Responses stream's events as canonical events.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    /// Output index of each tool call -> its canonical index.
    calls: Vec<(u64, u32)>,
}

impl StreamDecoder {
    pub fn push(&mut self, v: &Value) -> Vec<StreamEvent> {
        let output_index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let tool = |calls: &[(u64, u32)]| {
            calls
                .iter()
                .find(|(o, _)| *o == output_index)
                .map(|(_, i)| *i)
        };
        match v.get("type").and_then(Value::as_str).unwrap_or_default() {
            "response.output_text.delta" => v
                .get("delta")
                .and_then(Value::as_str)
                .map(|t| vec![StreamEvent::TextDelta(t.to_string())])
                .unwrap_or_default(),
            "response.reasoning_summary_text.delta" => v
                .get("delta")
                .and_then(Value::as_str)
                .map(|t| vec![StreamEvent::ReasoningDelta(t.to_string())])
                .unwrap_or_default(),
            "response.output_item.added" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                let Some((id, name, _)) = call_of(item) else {
                    return Vec::new();
                };
                let index = self.calls.len() as u32;
                self.calls.push((output_index, index));
                vec![StreamEvent::ToolCallStart { index, id, name }]
            }
            "response.function_call_arguments.delta" => match tool(&self.calls) {
                Some(index) => vec![StreamEvent::ToolCallDelta {
                    index,
                    arguments: v
                        .get("delta")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .into(),
                }],
                None => Vec::new(),
            },
            // A freeform call's input is whole at its `.done`; canonical arguments are JSON.
            "response.custom_tool_call_input.done" => match tool(&self.calls) {
                Some(index) => vec![StreamEvent::ToolCallDelta {
                    index,
                    arguments:
                        json!({ FREEFORM_INPUT: v.get("input").cloned().unwrap_or_default() })
                            .to_string(),
                }],
                None => Vec::new(),
            },
            "response.completed" | "response.incomplete" => {
                let r = v.get("response").unwrap_or(&Value::Null);
                let mut out = vec![StreamEvent::Finish(stop_of(r, !self.calls.is_empty()))];
                if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                    out.push(StreamEvent::Usage(usage_from_responses(u)));
                }
                out
            }
            _ => Vec::new(),
        }
    }
}
