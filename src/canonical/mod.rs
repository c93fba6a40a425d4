//! The one internal chat model. Every inbound API converts into it and every upstream kind out of
//! it, so the router never sees a wire format. Same-format hops (OpenAI in, OpenAI-compatible out)
//! skip the conversion and forward the client's body with only `model` rewritten.

pub mod anthropic;
pub mod converse;
pub mod effort;
pub mod gemini;
pub mod ids;
mod json;
pub mod openai;
pub mod options;
pub mod responses;
pub mod search;
pub mod web;

pub(crate) use json::{at, str_at};
pub use options::{OutputFormat, ToolChoice};

use serde_json::{Map, Value};

/// A request the client must fix; `param` is the offending field's path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidRequest {
    pub param: String,
    pub message: String,
}

/// An optional whole-number field: absent or null is `None`; anything but a non-negative
/// integer is a clear 400 rather than silently ignored.
pub(crate) fn opt_u64(
    body: &Map<String, Value>,
    field: &str,
) -> Result<Option<u64>, InvalidRequest> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            invalid(
                field,
                format!(
                    "`{field}` must be a non-negative integer, not {}",
                    kind_of(v)
                ),
            )
        }),
    }
}

/// An optional number field (temperature, top_p).
pub(crate) fn opt_f64(
    body: &Map<String, Value>,
    field: &str,
) -> Result<Option<f64>, InvalidRequest> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| {
            invalid(
                field,
                format!("`{field}` must be a number, not {}", kind_of(v)),
            )
        }),
    }
}

/// An optional true/false field.
pub(crate) fn opt_bool(
    body: &Map<String, Value>,
    field: &str,
) -> Result<Option<bool>, InvalidRequest> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(invalid(
            field,
            format!("`{field}` must be true or false, not {}", kind_of(v)),
        )),
    }
}

/// How a JSON value reads in an error message.
pub(crate) fn kind_of(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(_) => "a string".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

pub(crate) fn invalid(param: impl Into<String>, message: impl Into<String>) -> InvalidRequest {
    InvalidRequest {
        param: param.into(),
        message: message.into(),
    }
}

/// A chat request in Baton's internal form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub model: String,
    /// System / developer instructions, in order.
    pub system: Vec<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools at once, when the client said.
    pub parallel_tool_calls: Option<bool>,
    /// The shape the answer must take (JSON, to a schema), when the client asked.
    pub output: Option<OutputFormat>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stop: Vec<String>,
    pub stream: bool,
    /// Ask for a final usage chunk when streaming.
    pub stream_usage: bool,
    /// A Chat Completions client's fields that have no slot here (`seed`, `logprobs`…): sent
    /// on to Chat Completions upstreams only. Other dialects' own fields travel in the
    /// client's original body, to upstreams of their own API.
    pub extra: Map<String, Value>,
    /// How hard the model should think (`effort::LEVELS`), when the client said.
    pub effort: Option<String>,
    /// The hosted web search the client declared (`search`): passed through to an upstream of
    /// its own API, run by Baton on any other.
    pub web_search: Option<web::WebSearch>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Part>,
    /// Sender name (OpenAI `name`), when given.
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// An image by URL (`https:` or `data:` URL).
    Image {
        url: String,
        detail: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        /// JSON text, as the model produced it.
        arguments: String,
    },
    ToolResult {
        call_id: String,
        content: String,
    },
    /// The model's reasoning, as readable text (a summary, or the raw thinking of an open
    /// model). Never signed: it goes to clients that show it, not back to a provider.
    Reasoning(String),
    /// A web search Baton ran for the model (answers only: in a request's history a search is
    /// the call and the result it was).
    WebSearch(web::SearchRun),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    /// A function's arguments, as a JSON Schema. A freeform tool's is the one string
    /// parameter ([`FREEFORM_INPUT`]) it takes on an API without freeform tools.
    pub parameters: Value,
    /// Set for a freeform tool (a Responses or Chat `custom` tool): its input is raw text, not
    /// JSON. An API with freeform tools gets it as one, any other a function with one string
    /// parameter; either way its calls reach the client as the client's own freeform calls.
    pub freeform: Option<Freeform>,
}

/// What a freeform tool's input must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freeform {
    /// Any text.
    Text,
    /// Text in a grammar (`syntax`: `lark` or `regex`).
    Grammar { syntax: String, definition: String },
}

/// The one parameter a freeform tool has on an API without freeform tools; a freeform call's
/// canonical `arguments` are `{"input": <raw text>}`.
pub const FREEFORM_INPUT: &str = "input";

impl Tool {
    /// A freeform tool: on APIs without freeform tools, a function with one string parameter
    /// whose description carries the grammar, when there is one.
    pub fn freeform(name: String, description: Option<String>, format: Freeform) -> Tool {
        let input = match &format {
            Freeform::Grammar { definition, .. } => {
                format!("The tool's raw input, exactly in this grammar:\n{definition}")
            }
            Freeform::Text => "The tool's raw input.".to_string(),
        };
        Tool {
            name,
            description,
            parameters: serde_json::json!({"type": "object",
                "properties": {FREEFORM_INPUT: {"type": "string", "description": input}},
                "required": [FREEFORM_INPUT], "additionalProperties": false}),
            freeform: Some(format),
        }
    }
}

impl Freeform {
    /// A Responses tool's `format` (`{"type": "grammar", "syntax", "definition"}`) or a Chat
    /// custom tool's (`{"type": "grammar", "grammar": {"syntax", "definition"}}`); text when
    /// absent or anything else.
    pub fn from_format(format: Option<&Value>) -> Freeform {
        let Some(f) = format.filter(|f| f.get("type").and_then(Value::as_str) == Some("grammar"))
        else {
            return Freeform::Text;
        };
        let g = f.get("grammar").unwrap_or(f);
        match g.get("definition").and_then(Value::as_str) {
            Some(definition) => Freeform::Grammar {
                syntax: str_at(g, "syntax"),
                definition: definition.to_string(),
            },
            None => Freeform::Text,
        }
    }

    /// As a Responses custom tool's `format`.
    pub fn to_responses(&self) -> Value {
        match self {
            Freeform::Text => serde_json::json!({"type": "text"}),
            Freeform::Grammar { syntax, definition } => {
                serde_json::json!({"type": "grammar", "syntax": syntax, "definition": definition})
            }
        }
    }
}

/// A freeform call's raw input from its canonical arguments (`{"input": …}`); arguments of
/// another shape are the input as they are.
pub fn freeform_input(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| {
            v.get(FREEFORM_INPUT)
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| arguments.to_string())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    Stop,
    Length,
    ToolCalls,
    ContentFilter,
    Other(String),
}

impl StopReason {
    pub fn from_openai(s: &str) -> Self {
        match s {
            "stop" => StopReason::Stop,
            "length" => StopReason::Length,
            "tool_calls" | "function_call" => StopReason::ToolCalls,
            "content_filter" => StopReason::ContentFilter,
            other => StopReason::Other(other.to_string()),
        }
    }

    pub fn as_openai(&self) -> &str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolCalls => "tool_calls",
            StopReason::ContentFilter => "content_filter",
            StopReason::Other(s) => s,
        }
    }
}

/// An answer's tokens. `input_tokens` is the whole prompt, including the part read from the
/// provider's prompt cache (`cached_input_tokens`) and the part written to it
/// (`cache_write_tokens`: Anthropic's `cache_creation_input_tokens`; others do not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_tokens: u64,
}

/// A complete (non-streamed) answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    pub id: String,
    pub model: String,
    pub created: i64,
    pub content: Vec<Part>,
    pub stop: Option<StopReason>,
    pub usage: Option<Usage>,
}

impl ChatResponse {
    /// The answer's text, its parts joined.
    pub fn text(&self) -> String {
        self.joined(|p| match p {
            Part::Text(t) => Some(t),
            _ => None,
        })
    }

    /// The answer's reasoning, its parts joined.
    pub fn reasoning(&self) -> String {
        self.joined(|p| match p {
            Part::Reasoning(t) => Some(t),
            _ => None,
        })
    }

    fn joined(&self, pick: impl Fn(&Part) -> Option<&String>) -> String {
        self.content
            .iter()
            .filter_map(pick)
            .map(String::as_str)
            .collect()
    }
}

/// One increment of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    /// A piece of the model's reasoning (see `Part::Reasoning`). Not content: it does not
    /// commit a stream, which can still fail over until the answer itself begins.
    ReasoningDelta(String),
    ToolCallStart {
        index: u32,
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: u32,
        arguments: String,
    },
    Finish(StopReason),
    Usage(Usage),
    /// A web search Baton ran, whole (see `Part::WebSearch`).
    WebSearch(web::SearchRun),
}

impl StreamEvent {
    /// Whether this event carries part of the answer (as opposed to bookkeeping).
    pub fn is_content(&self) -> bool {
        match self {
            StreamEvent::TextDelta(t) => !t.is_empty(),
            StreamEvent::ReasoningDelta(_) => false,
            StreamEvent::ToolCallStart { .. } | StreamEvent::ToolCallDelta { .. } => true,
            StreamEvent::Finish(_) | StreamEvent::WebSearch(_) => true,
            StreamEvent::Usage(_) => false,
        }
    }
}

/// What a request needs from a provider; used to skip candidates that cannot serve it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    pub tools: bool,
    pub images: bool,
    /// More than one user turn, or any assistant/tool turn.
    pub multi_turn: bool,
    /// Rough prompt size in tokens (4 characters a token), for context-window checks.
    pub estimated_tokens: u64,
    /// The `max_tokens` asked for (part of `estimated_tokens`; models may cap it).
    pub max_tokens: u64,
}

impl Needs {
    /// The prompt alone, estimated (at least one token): what a request costs before answering.
    pub fn prompt_tokens(&self) -> u64 {
        self.estimated_tokens.saturating_sub(self.max_tokens).max(1)
    }
}

impl ChatRequest {
    /// Whether the tool `name` is declared freeform.
    pub fn is_freeform(&self, name: &str) -> bool {
        self.tools
            .iter()
            .any(|t| t.name == name && t.freeform.is_some())
    }

    pub fn needs(&self) -> Needs {
        let mut needs = Needs {
            // A hosted search is a function call on any upstream that does not run it itself.
            tools: !self.tools.is_empty() || self.web_search.is_some(),
            ..Needs::default()
        };
        let mut chars: u64 = self.system.iter().map(|s| s.len() as u64).sum();
        let mut user_turns = 0;
        for m in &self.messages {
            match m.role {
                Role::User => user_turns += 1,
                Role::Assistant | Role::Tool => needs.multi_turn = true,
            }
            for p in &m.content {
                match p {
                    Part::Text(t) | Part::Reasoning(t) => chars += t.len() as u64,
                    Part::Image { .. } => {
                        needs.images = true;
                        chars += 1000 * 4;
                    }
                    Part::ToolCall { arguments, .. } => {
                        needs.tools = true;
                        chars += arguments.len() as u64;
                    }
                    Part::ToolResult { content, .. } => {
                        needs.tools = true;
                        chars += content.len() as u64;
                    }
                    Part::WebSearch(_) => {}
                }
            }
        }
        for t in &self.tools {
            chars += t.parameters.to_string().len() as u64;
        }
        needs.multi_turn |= user_turns > 1;
        needs.max_tokens = self.max_tokens.unwrap_or(0);
        needs.estimated_tokens = chars / 4 + needs.max_tokens;
        needs
    }
}

/// The wire format of a request or answer: the APIs Baton speaks, to clients and upstreams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI's Chat Completions.
    OpenAi,
    /// OpenAI's Responses API.
    Responses,
    /// Anthropic's Messages API.
    Anthropic,
    /// Gemini's `generateContent`.
    Gemini,
    /// AWS Bedrock's Converse API (upstreams only: no client speaks it to Baton).
    Converse,
}

/// A client dialect's stream encoder: canonical events in, that dialect's events out, the end
/// of a complete answer, and the explicit error event a broken answer ends with. The stream
/// pump holds one as `dyn StreamEncode` and knows no dialect.
pub trait StreamEncode: Send {
    fn push(&mut self, ev: &StreamEvent, out: &mut String);
    fn finish(&mut self, out: &mut String);
    /// The explicit error event that ends an incomplete answer. `relaying` is true when the
    /// upstream's own stream in this format is being passed through (its lifecycle is open).
    fn error(&mut self, message: &str, relaying: bool, out: &mut String);
    /// The format whose events reach this client untouched, if any.
    fn wire(&self) -> Option<Wire>;
    /// The end of a relayed stream whose upstream's own terminator never came.
    fn relayed_end(&self) -> &'static [u8] {
        b""
    }
    /// An upstream event in this client's own format, as it goes to the client: as it came,
    /// unless the client compares something in it with what it sent (see the Anthropic one).
    fn relay(&mut self, raw: bytes::Bytes) -> bytes::Bytes {
        raw
    }
    /// The `content-type` of the stream.
    fn content_type(&self) -> &'static str {
        "text/event-stream"
    }
    /// A note for whoever reads the raw stream: an SSE comment, which the OpenAI and Anthropic
    /// clients skip; nothing where a client would not (Gemini's streams, see its encoder).
    fn comment(&self, text: &str, out: &mut String) {
        if self.content_type() == "text/event-stream" {
            out.push_str(": ");
            out.push_str(&text.replace(['\r', '\n'], " "));
            out.push_str("\n\n");
        }
    }
}
