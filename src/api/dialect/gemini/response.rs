//! Canonical answers in Gemini's shape: a `GenerateContentResponse`, its streamed chunks (as
//! SSE with `alt=sse`, else as the JSON array Google streams by default), and Google's error.

use std::fmt::Write;

use serde_json::{json, Map, Value};

use crate::canonical::{ChatResponse, Part, StopReason, StreamEvent, Usage, Wire};

/// Gemini's `finishReason` for a canonical stop. A function call ends with `STOP`, as
/// Gemini's own do.
fn finish_reason(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::Stop | StopReason::ToolCalls => "STOP",
        StopReason::Length => "MAX_TOKENS",
        StopReason::ContentFilter => "SAFETY",
        StopReason::Other(_) => "OTHER",
    }
}

fn usage_metadata(u: &Usage) -> Value {
    let mut m = json!({
        "promptTokenCount": u.input_tokens,
        "candidatesTokenCount": u.output_tokens,
        "totalTokenCount": u.input_tokens + u.output_tokens,
    });
    if u.cached_input_tokens > 0 {
        m["cachedContentTokenCount"] = json!(u.cached_input_tokens);
    }
    m
}

fn call_part(id: &str, name: &str, arguments: &str) -> Value {
    // Arguments a model cut short are not JSON: the text goes back as it came, under one key,
    // rather than the call being lost.
    let args = match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ "arguments": arguments }),
    };
    json!({"functionCall": {"id": id, "name": name, "args": args}})
}

fn part(p: &Part) -> Option<Value> {
    match p {
        Part::Text(t) => Some(json!({ "text": t })),
        Part::Reasoning(t) => Some(json!({ "text": t, "thought": true })),
        Part::ToolCall {
            id,
            name,
            arguments,
        } => Some(call_part(id, name, arguments)),
        Part::Image { .. } | Part::ToolResult { .. } | Part::WebSearch(_) => None,
    }
}

/// Searches Baton ran, as Gemini's `groundingMetadata`: the queries and the pages found.
fn grounding(runs: &[&crate::canonical::search::SearchRun]) -> Option<Value> {
    if runs.is_empty() {
        return None;
    }
    let queries: Vec<&str> = runs.iter().map(|r| r.query.as_str()).collect();
    let chunks: Vec<Value> = runs
        .iter()
        .flat_map(|r| &r.hits)
        .map(|h| json!({"web": {"uri": h.url, "title": h.title}}))
        .collect();
    Some(json!({"webSearchQueries": queries, "groundingChunks": chunks}))
}

fn candidate(parts: Vec<Value>, stop: Option<&StopReason>) -> Value {
    let mut c = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(s) = stop {
        c["finishReason"] = json!(finish_reason(s));
    }
    c
}

/// A complete answer as a `GenerateContentResponse`.
pub fn response_to_gemini(a: &ChatResponse, model: &str, response_id: &str) -> Value {
    let parts = a.content.iter().filter_map(part).collect();
    let mut out = json!({
        "candidates": [candidate(parts, Some(a.stop.as_ref().unwrap_or(&StopReason::Stop)))],
        "modelVersion": model,
        "responseId": response_id,
    });
    let runs: Vec<_> = a
        .content
        .iter()
        .filter_map(|p| match p {
            Part::WebSearch(r) => Some(r),
            _ => None,
        })
        .collect();
    if let Some(g) = grounding(&runs) {
        out["candidates"][0]["groundingMetadata"] = g;
    }
    if let Some(u) = &a.usage {
        out["usageMetadata"] = usage_metadata(u);
    }
    out
}

/// Canonical stream events as Gemini chunks. Text and thoughts go out as they come; a function
/// call goes out whole (Gemini never splits one), when its arguments are complete; the finish
/// and the usage go out on the last chunk, as Gemini's own stream ends.
pub struct StreamEncoder {
    model: String,
    response_id: String,
    /// `alt=sse`: events; otherwise one JSON array, written as it grows.
    sse: bool,
    /// Nothing written yet (the array's `[` is still to come).
    first: bool,
    /// Function calls whose arguments are still arriving: index, id, name, arguments.
    calls: Vec<(u32, String, String, String)>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
    /// Searches Baton ran: `groundingMetadata` on the last chunk.
    searches: Vec<crate::canonical::search::SearchRun>,
}

impl StreamEncoder {
    pub fn new(model: &str, response_id: &str, sse: bool) -> Self {
        Self {
            model: model.to_string(),
            response_id: response_id.to_string(),
            sse,
            first: true,
            calls: Vec::new(),
            stop: None,
            usage: None,
            searches: Vec::new(),
        }
    }

    fn chunk(&mut self, body: &Value, out: &mut String) {
        if self.sse {
            let _ = write!(out, "data: {body}\r\n\r\n");
        } else {
            out.push_str(if self.first { "[" } else { ",\r\n" });
            let _ = write!(out, "{body}");
        }
        self.first = false;
    }

    fn content(&mut self, parts: Vec<Value>, stop: Option<&StopReason>, out: &mut String) {
        let mut body = json!({
            "candidates": [candidate(parts, stop)],
            "modelVersion": self.model,
            "responseId": self.response_id,
        });
        if stop.is_some() {
            if let Some(u) = &self.usage {
                body["usageMetadata"] = usage_metadata(u);
            }
            if let Some(g) = grounding(&self.searches.iter().collect::<Vec<_>>()) {
                body["candidates"][0]["groundingMetadata"] = g;
            }
        }
        self.chunk(&body, out);
    }

    /// The calls whose arguments are complete, as parts.
    fn take_calls(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.calls)
            .into_iter()
            .map(|(_, id, name, args)| call_part(&id, &name, &args))
            .collect()
    }

    pub fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        match ev {
            StreamEvent::TextDelta(t) | StreamEvent::ReasoningDelta(t) if t.is_empty() => {}
            StreamEvent::TextDelta(t) => {
                let mut parts = self.take_calls();
                parts.push(json!({ "text": t }));
                self.content(parts, None, out);
            }
            StreamEvent::ReasoningDelta(t) => {
                let mut parts = self.take_calls();
                parts.push(json!({ "text": t, "thought": true }));
                self.content(parts, None, out);
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.calls
                    .push((*index, id.clone(), name.clone(), String::new()));
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                if let Some(c) = self.calls.iter_mut().find(|c| c.0 == *index) {
                    c.3.push_str(arguments);
                }
            }
            StreamEvent::Finish(s) => self.stop = Some(s.clone()),
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::WebSearch(run) => self.searches.push(run.clone()),
        }
    }

    /// The last chunk: calls still held, the finish and the usage; then the array's end.
    pub fn finish(&mut self, out: &mut String) {
        let parts = self.take_calls();
        let stop = self.stop.take().unwrap_or(StopReason::Stop);
        self.content(parts, Some(&stop), out);
        if !self.sse {
            out.push(']');
        }
    }
}

impl crate::canonical::StreamEncode for StreamEncoder {
    fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        StreamEncoder::push(self, ev, out)
    }

    fn finish(&mut self, out: &mut String) {
        StreamEncoder::finish(self, out)
    }

    /// Google ends a broken stream with an error object in place of the next chunk.
    fn error(&mut self, message: &str, _relaying: bool, out: &mut String) {
        let body = error_body(502, message, None);
        self.chunk(&body, out);
        if !self.sse {
            out.push(']');
        }
    }

    /// Only an SSE stream passes a Gemini upstream's events through (Baton asks upstreams
    /// for SSE); the JSON array is always written here.
    fn wire(&self) -> Option<Wire> {
        self.sse.then_some(Wire::Gemini)
    }

    fn content_type(&self) -> &'static str {
        if self.sse {
            "text/event-stream"
        } else {
            "application/json"
        }
    }

    /// No notes: Google sends no SSE comments, and its SDKs read a line that is not `data:`
    /// as the start of an error object (the Python SDK fails on it).
    fn comment(&self, _text: &str, _out: &mut String) {}
}

/// Google's `status` for an HTTP status.
pub fn status_name(status: u16) -> &'static str {
    match status {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 | 501 => "UNIMPLEMENTED",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        503 | 529 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    }
}

/// `{"error": {"code", "message", "status", "details"}}`; a wait goes in a `RetryInfo`
/// detail, which Google's SDKs and Gemini CLI read.
pub fn error_body(status: u16, message: &str, retry_after_secs: Option<u64>) -> Value {
    let mut e = Map::new();
    e.insert("code".into(), json!(status));
    e.insert("message".into(), json!(message));
    e.insert("status".into(), json!(status_name(status)));
    if let Some(s) = retry_after_secs {
        e.insert(
            "details".into(),
            json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{s}s")}]),
        );
    }
    json!({ "error": e })
}
