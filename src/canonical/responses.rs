//! OpenAI Responses API (`POST /v1/responses`, what Codex speaks) ⇄ canonical.
//!
//! Baton keeps no conversation state: the whole conversation comes in `input` (Codex sends it
//! so, with `store: false`); `previous_response_id` goes only to a Responses upstream, which
//! keeps its own, and is refused with a message that says so when there is none.
//! Freeform tools (`"type": "custom"`, such as Codex's `apply_patch` and `exec`) are canonical
//! freeform tools: a Responses upstream gets them as they are, other APIs a function with one
//! string parameter, `input`, whose description carries the tool's grammar; their calls come
//! back to the client as `custom_tool_call` items with the raw input. Reasoning items (encrypted, for OpenAI's own servers) are dropped.
//! Tools may also come in an `additional_tools` input item and in namespaces (current Codex
//! declares its tools so): a namespaced tool travels as `<namespace>__<name>` and its calls go
//! back with their `namespace`, as the client declared them (`ClientTools`).

pub mod compaction;
pub mod stream;
mod tools;
pub mod upstream;

use serde_json::{json, Map, Value};

use super::{freeform_input, FREEFORM_INPUT};
use super::{
    invalid, kind_of, ChatRequest, ChatResponse, InvalidRequest, Message, Part, Role, StopReason,
    Usage,
};
pub use tools::ClientTools;
use tools::{called_name, tools};

/// A Responses request as a canonical request.
pub fn request_from_responses(body: &Map<String, Value>) -> Result<ChatRequest, InvalidRequest> {
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.trim().is_empty() => m.clone(),
        _ => {
            return Err(invalid(
                "model",
                "`model` is required: a model name or a Baton route",
            ))
        }
    };
    match body.get("previous_response_id") {
        // Only a Responses upstream, which stores conversations, can continue one (the
        // router sends it nowhere else).
        None | Some(Value::Null | Value::String(_)) => {}
        Some(v) => {
            return Err(invalid(
                "previous_response_id",
                format!(
                    "`previous_response_id` must be a string, not {}",
                    kind_of(v)
                ),
            ))
        }
    }
    let mut req = ChatRequest {
        model,
        ..ChatRequest::default()
    };
    match body.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => req.system.push(s.clone()),
        Some(v) => {
            return Err(invalid(
                "instructions",
                format!("`instructions` must be a string, not {}", kind_of(v)),
            ))
        }
    }
    match body.get("input") {
        Some(Value::String(s)) => req.messages.push(Message {
            role: Role::User,
            content: vec![Part::Text(s.clone())],
            name: None,
        }),
        Some(Value::Array(items)) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                push_item(&mut req, i, item)?;
            }
        }
        Some(Value::Array(_)) => return Err(invalid("input", "`input` is empty")),
        None | Some(Value::Null) => return Err(invalid("input", "`input` is required")),
        Some(v) => {
            return Err(invalid(
                "input",
                format!(
                    "`input` must be a string or a list of items, not {}",
                    kind_of(v)
                ),
            ))
        }
    }
    req.tools = tools(body)?;
    req.web_search = tools::web_search(body);
    options(body, &mut req)?;
    Ok(req)
}

/// The request's settings: effort, tool choice, limits, sampling, streaming, output format.
fn options(body: &Map<String, Value>, req: &mut ChatRequest) -> Result<(), InvalidRequest> {
    req.effort = super::effort::level(body.get("reasoning").and_then(|r| r.get("effort")));
    req.tool_choice = body
        .get("tool_choice")
        .and_then(super::ToolChoice::from_responses);
    req.max_tokens = super::opt_u64(body, "max_output_tokens")?;
    req.temperature = super::opt_f64(body, "temperature")?;
    req.top_p = super::opt_f64(body, "top_p")?;
    req.stream = super::opt_bool(body, "stream")?.unwrap_or(false);
    // A translated stream ends with the usage in `response.completed`.
    req.stream_usage = req.stream;
    req.parallel_tool_calls = super::opt_bool(body, "parallel_tool_calls")?;
    req.output = body
        .get("text")
        .and_then(|t| t.get("format"))
        .and_then(super::OutputFormat::from_responses);
    Ok(())
}

/// Input item `i`: a message, a tool call the model made, or a tool's output.
fn push_item(req: &mut ChatRequest, i: usize, item: &Value) -> Result<(), InvalidRequest> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    let s = |k: &str| super::str_at(item, k);
    match kind {
        "message" => push_message(req, i, item),
        "function_call" => {
            push_call(req, s("call_id"), called_name(item), s("arguments"));
            Ok(())
        }
        "custom_tool_call" => {
            let arguments = json!({ FREEFORM_INPUT: s("input") }).to_string();
            push_call(req, s("call_id"), called_name(item), arguments);
            Ok(())
        }
        // A hosted search served earlier: the call and what is left of its result.
        "web_search_call" => {
            let (call, result) = super::search::responses_history(item);
            let Part::ToolCall {
                id,
                name,
                arguments,
            } = call
            else {
                return Ok(());
            };
            push_call(req, id, name, arguments);
            req.messages.push(Message {
                role: Role::Tool,
                content: vec![result],
                name: None,
            });
            Ok(())
        }
        "function_call_output" | "custom_tool_call_output" => {
            let content = match item.get("output") {
                Some(Value::String(t)) => t.clone(),
                // Codex sends a tool's output as a list of text parts, pieces of one text.
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
                Some(v) => v.to_string(),
                None => String::new(),
            };
            req.messages.push(Message {
                role: Role::Tool,
                content: vec![Part::ToolResult {
                    call_id: s("call_id"),
                    content,
                }],
                name: None,
            });
            Ok(())
        }
        "compaction_trigger" | "compaction" => {
            compaction::push(req, item);
            Ok(())
        }
        // Tools declared in the input were read with the others (`declared`). Reasoning is for
        // the server that produced it; other items have no canonical slot.
        _ => Ok(()),
    }
}

/// A message item: system and developer text joins the instructions.
fn push_message(req: &mut ChatRequest, i: usize, item: &Value) -> Result<(), InvalidRequest> {
    let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
    let content = item.get("content").unwrap_or(&Value::Null);
    let role = match role {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" | "developer" => {
            req.system.push(text_of(content));
            return Ok(());
        }
        other => {
            return Err(invalid(
                format!("input[{i}].role"),
                format!("unknown role `{other}`; use user, assistant, system or developer"),
            ))
        }
    };
    let parts = match content {
        Value::String(t) => vec![Part::Text(t.clone())],
        Value::Array(items) => items.iter().filter_map(content_part).collect(),
        Value::Null => Vec::new(),
        v => {
            return Err(invalid(
                format!("input[{i}].content"),
                format!(
                    "a message's content must be a string or a list of parts, not {}",
                    kind_of(v)
                ),
            ))
        }
    };
    if !parts.is_empty() {
        req.messages.push(Message {
            role,
            content: parts,
            name: None,
        });
    }
    Ok(())
}

fn content_part(p: &Value) -> Option<Part> {
    match p.get("type").and_then(Value::as_str).unwrap_or_default() {
        "input_image" => {
            let url = p
                .get("image_url")
                .and_then(|u| u.as_str().or_else(|| u.get("url").and_then(Value::as_str)))?;
            Some(Part::Image {
                url: url.to_string(),
                detail: p.get("detail").and_then(Value::as_str).map(str::to_string),
            })
        }
        _ => p
            .get("text")
            .and_then(Value::as_str)
            .map(|t| Part::Text(t.to_string())),
    }
}

/// A tool call the model made earlier: joins the assistant turn before it, when there is one.
fn push_call(req: &mut ChatRequest, id: String, name: String, arguments: String) {
    let call = Part::ToolCall {
        id,
        name,
        arguments,
    };
    match req.messages.last_mut() {
        Some(m) if m.role == Role::Assistant => m.content.push(call),
        _ => req.messages.push(Message {
            role: Role::Assistant,
            content: vec![call],
            name: None,
        }),
    }
}

/// The text in a list of parts (or a string).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What a response echoes of its request, and what it needs to render tool calls.
#[derive(Debug, Clone, Default)]
pub struct Echo {
    pub id: String,
    pub model: String,
    pub created: i64,
    pub tools: ClientTools,
    /// The request asked for a compaction: the answer is one `compaction` item.
    pub compaction: bool,
    fields: Map<String, Value>,
}

impl Echo {
    /// `id`: Baton's request id; `created`: Unix seconds.
    pub fn new(body: &Map<String, Value>, id: &str, model: &str, created: i64) -> Self {
        let mut fields = Map::new();
        for k in [
            "instructions",
            "max_output_tokens",
            "metadata",
            "temperature",
            "top_p",
            "text",
            "reasoning",
            "prompt_cache_key",
        ] {
            if let Some(v) = body.get(k) {
                fields.insert(k.into(), v.clone());
            }
        }
        fields.insert(
            "tools".into(),
            body.get("tools").cloned().unwrap_or(json!([])),
        );
        fields.insert(
            "tool_choice".into(),
            body.get("tool_choice").cloned().unwrap_or(json!("auto")),
        );
        fields.insert(
            "parallel_tool_calls".into(),
            body.get("parallel_tool_calls")
                .cloned()
                .unwrap_or(json!(true)),
        );
        fields.insert("store".into(), json!(false));
        Self {
            id: format!("resp_{id}"),
            model: model.to_string(),
            created,
            tools: ClientTools::of(body),
            compaction: compaction::asked(body),
            fields,
        }
    }

    /// The `response` object with these output items.
    pub fn response(&self, status: &str, output: Vec<Value>, usage: Option<&Usage>) -> Value {
        let mut r = self.fields.clone();
        r.insert("id".into(), json!(self.id));
        r.insert("object".into(), json!("response"));
        r.insert("created_at".into(), json!(self.created));
        r.insert("model".into(), json!(self.model));
        r.insert("status".into(), json!(status));
        r.insert("output".into(), Value::Array(output));
        r.insert("error".into(), Value::Null);
        r.insert(
            "incomplete_details".into(),
            if status == "incomplete" {
                json!({"reason": "max_output_tokens"})
            } else {
                Value::Null
            },
        );
        r.insert("usage".into(), usage.map_or(Value::Null, usage_json));
        Value::Object(r)
    }

    /// A tool call as its output item: `custom_tool_call` for a freeform tool; `status` is
    /// `in_progress` while it streams (then with empty arguments) and `completed` after.
    fn call_item(
        &self,
        item_id: String,
        call_id: &str,
        name: &str,
        arguments: &str,
        status: &str,
    ) -> Value {
        let mut item = if self.tools.is_freeform(name) {
            let input = if arguments.is_empty() {
                String::new()
            } else {
                freeform_input(arguments)
            };
            json!({"type": "custom_tool_call", "id": item_id, "call_id": call_id,
                "input": input, "status": status})
        } else {
            json!({"type": "function_call", "id": item_id, "call_id": call_id,
                "arguments": arguments, "status": status})
        };
        self.tools.name_into(name, &mut item);
        item
    }
}

fn usage_json(u: &Usage) -> Value {
    json!({"input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input_tokens + u.output_tokens})
}

/// The id of a reasoning item Baton made (from another provider's reasoning): marked, so that
/// when the client sends it back it is not passed to a Responses server, which could not resolve
/// it (`openai_responses::body`).
pub const REASONING_ID_PREFIX: &str = "rs_baton_";

fn reasoning_id(response_id: &str, n: usize) -> String {
    let id = response_id.trim_start_matches("resp_");
    format!("{REASONING_ID_PREFIX}{id}_{n}")
}

/// Reasoning as a `reasoning` item with one summary part.
fn reasoning_item(id: String, text: &str) -> Value {
    json!({"type": "reasoning", "id": id, "summary": [{"type": "summary_text", "text": text}]})
}

fn message_item(id: String, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
}

/// A complete canonical answer as a Responses `response`.
pub fn response_to_responses(r: &ChatResponse, echo: &Echo) -> Value {
    let text = r.text();
    if echo.compaction {
        let output = vec![compaction::item(&echo.id, &text)];
        return echo.response("completed", output, r.usage.as_ref());
    }
    let mut output = Vec::new();
    let reasoning = r.reasoning();
    if !reasoning.is_empty() {
        output.push(reasoning_item(reasoning_id(&echo.id, 0), &reasoning));
    }
    for p in &r.content {
        if let Part::WebSearch(run) = p {
            output.push(run.responses_item());
        }
    }
    if !text.is_empty() {
        output.push(message_item(format!("msg_{}", echo.id), &text, "completed"));
    }
    for (n, p) in r.content.iter().enumerate() {
        if let Part::ToolCall {
            id,
            name,
            arguments,
        } = p
        {
            let kind = if echo.tools.is_freeform(name) {
                "ctc"
            } else {
                "fc"
            };
            let item_id = format!("{kind}_{}_{n}", echo.id);
            output.push(echo.call_item(item_id, id, name, arguments, "completed"));
        }
    }
    let status = match r.stop {
        Some(StopReason::Length) => "incomplete",
        _ => "completed",
    };
    echo.response(status, output, r.usage.as_ref())
}

#[cfg(test)]
mod tests;
