//! Anthropic streaming: canonical events -> Anthropic SSE frames (for Anthropic clients) and
//! Anthropic upstream events -> canonical events (for other clients).

use serde_json::{json, Value};

use super::{anthropic_id, stop_from_anthropic, stop_reason, usage_from_anthropic};
use crate::canonical::{StopReason, StreamEvent, Usage};

/// Builds Anthropic SSE frames from canonical stream events.
pub struct StreamEncoder {
    id: String,
    model: String,
    started: bool,
    /// Index of the open content block and what it is.
    open: Option<(usize, Block)>,
    /// The client asked for thinking: reasoning goes out as (unsigned) thinking blocks.
    thinking: bool,
    next_index: usize,
    /// canonical tool index -> Anthropic block index
    tools: Vec<(u32, usize)>,
    stop: Option<StopReason>,
    usage: Usage,
    /// The prompt's size before the upstream says it (`message_start` comes first).
    prompt_estimate: u64,
    /// Web searches Baton ran for this answer (`usage.server_tool_use`).
    searches: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    Tool,
}

fn frame(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

impl StreamEncoder {
    pub fn new(id: &str, model: &str) -> Self {
        Self {
            id: anthropic_id(id),
            model: model.to_string(),
            started: false,
            open: None,
            thinking: false,
            next_index: 0,
            tools: Vec::new(),
            stop: None,
            usage: Usage::default(),
            prompt_estimate: 0,
            searches: 0,
        }
    }

    /// `message_start` reports this many input tokens when the upstream has not said yet
    /// (clients show it as the context used; `message_delta` then gives the real count).
    pub fn with_prompt_estimate(mut self, tokens: u64) -> Self {
        self.prompt_estimate = tokens;
        self
    }

    /// Reasoning from the upstream goes to the client as thinking blocks, with no signature:
    /// for a client that asked for thinking. (Sent back, Baton leaves them out of what goes to
    /// any Anthropic account, which takes only its own signed ones: `providers::thinking`.)
    pub fn with_thinking(mut self, asked: bool) -> Self {
        self.thinking = asked;
        self
    }

    /// Opens a block of `kind` unless one is open; its index.
    fn open_block(&mut self, kind: Block, start: Value, out: &mut String) -> usize {
        if let Some((i, k)) = self.open {
            if k == kind && kind != Block::Tool {
                return i;
            }
        }
        self.close(out);
        let i = self.next_index;
        self.next_index += 1;
        self.open = Some((i, kind));
        out.push_str(&frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": i, "content_block": start}),
        ));
        i
    }

    fn start(&mut self, out: &mut String) {
        if !self.started {
            self.started = true;
            out.push_str(&frame(
                "message_start",
                &json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": self.start_input_tokens(), "output_tokens": 0}}}),
            ));
            out.push_str(&frame("ping", &json!({"type": "ping"})));
        }
    }

    fn start_input_tokens(&self) -> u64 {
        match self.usage.input_tokens {
            0 => self.prompt_estimate,
            _ => super::usage_json(&self.usage)["input_tokens"]
                .as_u64()
                .unwrap_or(0),
        }
    }

    fn close(&mut self, out: &mut String) {
        if let Some((i, _)) = self.open.take() {
            out.push_str(&frame(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": i}),
            ));
        }
    }

    /// Frames for one canonical event.
    pub fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        // Usage that arrives first (Gemini's) goes into `message_start`.
        if let StreamEvent::Usage(u) = ev {
            self.usage = *u;
            return;
        }
        self.start(out);
        match ev {
            StreamEvent::ReasoningDelta(t) => {
                if !self.thinking {
                    return;
                }
                let start = json!({"type": "thinking", "thinking": "", "signature": ""});
                let i = self.open_block(Block::Thinking, start, out);
                out.push_str(&frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "thinking_delta", "thinking": t}}),
                ));
            }
            StreamEvent::TextDelta(t) => {
                let i = self.open_block(Block::Text, json!({"type": "text", "text": ""}), out);
                out.push_str(&frame(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "text_delta", "text": t}}),
                ));
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                let start = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
                let i = self.open_block(Block::Tool, start, out);
                self.tools.push((*index, i));
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                if let Some((_, i)) = self.tools.iter().find(|(t, _)| t == index) {
                    out.push_str(&frame(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": arguments}}),
                    ));
                }
            }
            StreamEvent::Finish(r) => self.stop = Some(r.clone()),
            StreamEvent::Usage(_) => {}
            StreamEvent::WebSearch(run) => self.search(run, out),
        }
    }

    /// A search Baton ran, as Anthropic streams a server tool: the call with its input as one
    /// delta, then the result block whole.
    fn search(&mut self, run: &crate::canonical::search::SearchRun, out: &mut String) {
        self.searches += 1;
        let mut call = run.anthropic_call();
        let input = std::mem::replace(&mut call["input"], json!({}));
        let i = self.open_block(Block::Tool, call, out);
        out.push_str(&frame(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": i,
            "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        ));
        self.open_block(Block::Tool, run.anthropic_result(), out);
        self.close(out);
    }

    /// The closing frames of a complete answer.
    pub fn finish(&mut self, out: &mut String) {
        self.start(out);
        self.close(out);
        let reason = self.stop.as_ref().map(stop_reason).unwrap_or("end_turn");
        let mut usage = super::usage_json(&self.usage);
        if self.searches > 0 {
            usage["server_tool_use"] = json!({ "web_search_requests": self.searches });
        }
        out.push_str(&frame(
            "message_delta",
            &json!({"type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": null},
            "usage": usage}),
        ));
        out.push_str(&frame("message_stop", &json!({"type": "message_stop"})));
    }
}

/// Anthropic stream events -> canonical events.
#[derive(Default)]
pub struct StreamDecoder {
    /// Anthropic block index -> canonical tool index.
    tools: Vec<(u64, u32)>,
    input: Usage,
}

impl StreamDecoder {
    /// Long because it is one match arm per Anthropic event type.
    pub fn push(&mut self, data: &Value) -> Vec<StreamEvent> {
        let mut out = Vec::new();
        match data.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message_start" => {
                if let Some(u) = crate::canonical::at(data, &["message", "usage"]) {
                    self.input = usage_from_anthropic(u);
                }
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => {
                        let n = self.tools.len() as u32;
                        self.tools.push((index, n));
                        out.push(StreamEvent::ToolCallStart {
                            index: n,
                            id: block
                                .get("id")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string(),
                            name: block
                                .get("name")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string(),
                        });
                    }
                    Some("text") => {
                        if let Some(t) = block
                            .get("text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(StreamEvent::TextDelta(t.to_string()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => out.push(StreamEvent::TextDelta(
                        delta
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                    )),
                    Some("thinking_delta") => {
                        if let Some(t) = delta
                            .get("thinking")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            out.push(StreamEvent::ReasoningDelta(t.to_string()));
                        }
                    }
                    Some("input_json_delta") => {
                        if let Some((_, n)) = self.tools.iter().find(|(i, _)| *i == index) {
                            out.push(StreamEvent::ToolCallDelta {
                                index: *n,
                                arguments: delta
                                    .get("partial_json")
                                    .and_then(Value::as_str)
                                    .unwrap_or_default()
                                    .to_string(),
                            });
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(r) =
                    crate::canonical::at(data, &["delta", "stop_reason"]).and_then(Value::as_str)
                {
                    out.push(StreamEvent::Finish(stop_from_anthropic(r)));
                }
                if let Some(u) = data.get("usage") {
                    let mut usage = self.input;
                    usage.output_tokens =
                        u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0);
                    out.push(StreamEvent::Usage(usage));
                }
            }
            _ => {}
        }
        out
    }
}

/// Anthropic's `event: error` frame.
/// What [`named_as`] is given: one stream event, or a whole answer.
#[derive(Clone, Copy)]
pub enum Framing {
    Event,
    Body,
}

/// A relayed answer (its `message_start` event, or its whole body) naming `model`, when it
/// names another; `None` when it needs no change (or is not a message start).
pub fn named_as(raw: &[u8], model: &str, framing: Framing) -> Option<Vec<u8>> {
    // Most answers already name it (compactly, as the API writes JSON): no parse then.
    let named = format!("\"model\":{}", Value::String(model.to_string()));
    if model.is_empty() || memchr::memmem::find(raw, named.as_bytes()).is_some() {
        return None;
    }
    let (head, data, tail) = match framing {
        Framing::Body => (&b""[..], raw, &b""[..]),
        Framing::Event => {
            memchr::memmem::find(raw, b"\"message_start\"")?;
            let at = memchr::memmem::find(raw, b"data:")? + b"data:".len();
            let end = memchr::memchr(b'\n', &raw[at..]).map_or(raw.len(), |e| at + e);
            (&raw[..at], &raw[at..end], &raw[end..])
        }
    };
    let mut v: Value = serde_json::from_slice(data).ok()?;
    let named = match framing {
        Framing::Body => v.get_mut("model")?,
        Framing::Event => v.get_mut("message")?.get_mut("model")?,
    };
    if named.as_str() == Some(model) {
        return None;
    }
    *named = Value::String(model.to_string());
    let mut out = head.to_vec();
    if matches!(framing, Framing::Event) {
        out.push(b' ');
    }
    serde_json::to_writer(&mut out, &v).ok()?;
    out.extend_from_slice(tail);
    Some(out)
}

pub fn error_frame(kind: &str, message: &str) -> String {
    frame(
        "error",
        &json!({"type": "error", "error": {"type": kind, "message": message}}),
    )
}

impl crate::canonical::StreamEncode for StreamEncoder {
    fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        StreamEncoder::push(self, ev, out)
    }

    fn finish(&mut self, out: &mut String) {
        StreamEncoder::finish(self, out)
    }

    fn error(&mut self, message: &str, _relaying: bool, out: &mut String) {
        out.push_str(&error_frame("api_error", message));
    }

    fn wire(&self) -> Option<crate::canonical::Wire> {
        Some(crate::canonical::Wire::Anthropic)
    }

    fn relayed_end(&self) -> &'static [u8] {
        b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
    }

    /// A relayed `message_start` names the model the client asked for: Claude Code drops from
    /// the next request the thinking of an answer that names another model, and thinking then
    /// stops (the served model is in the `x-gateway-model` header).
    fn relay(&mut self, raw: bytes::Bytes) -> bytes::Bytes {
        if self.started {
            return raw;
        }
        self.started = true;
        match named_as(&raw, &self.model, Framing::Event) {
            Some(renamed) => bytes::Bytes::from(renamed),
            None => raw,
        }
    }
}
