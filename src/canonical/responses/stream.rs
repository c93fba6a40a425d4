//! Canonical stream events as the Responses API's streamed events, each with its
//! `sequence_number`: `response.created`, `response.in_progress`, then per output item
//! `output_item.added`, its deltas (`output_text`, `function_call_arguments`,
//! `custom_tool_call_input`), its `.done` events and `output_item.done`, and at the end
//! `response.completed` (or `response.incomplete` when the answer hit its token limit) with
//! the whole response and its usage. A break after content ends with `response.failed`.
//! Reasoning an upstream gives is a `reasoning` item with one summary part
//! (`response.reasoning_summary_text.delta`…), its id marked as Baton's (`rs_baton_…`).

use std::fmt::Write;

use serde_json::{json, Value};

use super::{message_item, reasoning_id, reasoning_item, Echo};
use crate::canonical::{StopReason, StreamEvent, Usage};

/// A tool call being streamed.
struct Call {
    index: u32,
    output_index: usize,
    item_id: String,
    call_id: String,
    name: String,
    arguments: String,
    freeform: bool,
}

/// The message item being streamed.
struct Text {
    output_index: usize,
    item_id: String,
    text: String,
}

pub struct StreamEncoder {
    echo: Echo,
    seq: u64,
    started: bool,
    next_index: usize,
    message: Option<Text>,
    /// The reasoning item being streamed (a `Text` of summary text).
    reasoning: Option<Text>,
    calls: Vec<Call>,
    /// Finished items by output index.
    done: Vec<(usize, Value)>,
    stop: Option<StopReason>,
    usage: Option<Usage>,
    /// A compaction's summary so far (the answer is one `compaction` item, at the end).
    summary: String,
}

impl StreamEncoder {
    pub fn new(echo: Echo) -> Self {
        Self {
            echo,
            seq: 0,
            started: false,
            next_index: 0,
            message: None,
            reasoning: None,
            calls: Vec::new(),
            done: Vec::new(),
            stop: None,
            usage: None,
            summary: String::new(),
        }
    }

    /// Appends the events for `ev` to `out`.
    pub fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        self.start(out);
        if self.echo.compaction {
            match ev {
                StreamEvent::TextDelta(t) => self.summary.push_str(t),
                StreamEvent::Finish(stop) => self.stop = Some(stop.clone()),
                StreamEvent::Usage(u) => self.usage = Some(*u),
                _ => {}
            }
            return;
        }
        if !matches!(ev, StreamEvent::ReasoningDelta(_)) {
            self.close_reasoning(out);
        }
        match ev {
            StreamEvent::TextDelta(t) => self.text(t, out),
            StreamEvent::ReasoningDelta(t) => self.reasoning(t, out),
            StreamEvent::ToolCallStart { index, id, name } => {
                self.close_message(out);
                let output_index = self.take_index();
                let freeform = self.echo.tools.is_freeform(name);
                let item_id = format!(
                    "{}_{}_{output_index}",
                    if freeform { "ctc" } else { "fc" },
                    self.echo.id
                );
                let item = self
                    .echo
                    .call_item(item_id.clone(), id, name, "", "in_progress");
                self.frame(
                    out,
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": item}),
                );
                self.calls.push(Call {
                    index: *index,
                    output_index,
                    item_id,
                    call_id: id.clone(),
                    name: name.clone(),
                    arguments: String::new(),
                    freeform,
                });
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                self.arguments(*index, arguments, out)
            }
            StreamEvent::Finish(stop) => self.stop = Some(stop.clone()),
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::WebSearch(run) => self.search(run, out),
        }
    }

    /// A search Baton ran, as the API streams its hosted search: the item added in progress,
    /// `in_progress`, `searching`, `completed`, the item done.
    fn search(&mut self, run: &crate::canonical::search::SearchRun, out: &mut String) {
        self.close_message(out);
        let output_index = self.take_index();
        let item = run.responses_item();
        let id = item["id"].clone();
        self.frame(
            out,
            "response.output_item.added",
            json!({"output_index": output_index,
                "item": {"type": "web_search_call", "id": id, "status": "in_progress",
                    "action": {"type": "search", "query": run.query}}}),
        );
        for phase in ["in_progress", "searching", "completed"] {
            self.frame(
                out,
                &format!("response.web_search_call.{phase}"),
                json!({"output_index": output_index, "item_id": id}),
            );
        }
        self.frame(
            out,
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        );
        self.done.push((output_index, item));
    }

    /// The end of a complete answer: every open item closed, then the whole response.
    pub fn finish(&mut self, out: &mut String) {
        self.start(out);
        if self.echo.compaction {
            let output_index = self.take_index();
            let item = super::compaction::item(&self.echo.id, &self.summary);
            for kind in ["response.output_item.added", "response.output_item.done"] {
                self.frame(
                    out,
                    kind,
                    json!({"output_index": output_index, "item": item}),
                );
            }
            self.done.push((output_index, item));
        }
        self.close_reasoning(out);
        self.close_message(out);
        for call in std::mem::take(&mut self.calls) {
            self.close_call(call, out);
        }
        let mut items = std::mem::take(&mut self.done);
        items.sort_by_key(|(i, _)| *i);
        let output = items.into_iter().map(|(_, v)| v).collect();
        let (kind, status) = match self.stop {
            Some(StopReason::Length) => ("response.incomplete", "incomplete"),
            _ => ("response.completed", "completed"),
        };
        let response = self.echo.response(status, output, self.usage.as_ref());
        self.frame(out, kind, json!({ "response": response }));
    }

    /// A break after content: the response failed, with why.
    pub fn fail(&mut self, message: &str, out: &mut String) {
        self.start(out);
        let mut response = self
            .echo
            .response("failed", Vec::new(), self.usage.as_ref());
        response["error"] = json!({"code": "server_error", "message": message});
        self.frame(out, "response.failed", json!({ "response": response }));
    }

    /// A break inside a stream someone else started (a Responses upstream's own): an `error`
    /// event only.
    pub fn error(&mut self, message: &str, out: &mut String) {
        self.frame(
            out,
            "error",
            json!({"code": "stream_interrupted", "message": message, "param": null}),
        );
    }

    fn start(&mut self, out: &mut String) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        let response = self.echo.response("in_progress", Vec::new(), None);
        self.frame(out, "response.created", json!({ "response": response }));
        self.frame(out, "response.in_progress", json!({ "response": response }));
    }

    fn take_index(&mut self) -> usize {
        self.next_index += 1;
        self.next_index - 1
    }

    fn text(&mut self, t: &str, out: &mut String) {
        if self.message.is_none() {
            let output_index = self.take_index();
            let item_id = format!("msg_{}_{output_index}", self.echo.id);
            self.frame(
                out,
                "response.output_item.added",
                json!({"output_index": output_index, "item": {"type": "message", "id": item_id,
                    "status": "in_progress", "role": "assistant", "content": []}}),
            );
            self.frame(
                out,
                "response.content_part.added",
                json!({"item_id": item_id, "output_index": output_index, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
            );
            self.message = Some(Text {
                output_index,
                item_id,
                text: String::new(),
            });
        }
        let Some(m) = &mut self.message else {
            return;
        };
        m.text.push_str(t);
        let data = json!({"item_id": m.item_id, "output_index": m.output_index,
            "content_index": 0, "delta": t, "logprobs": []});
        self.frame(out, "response.output_text.delta", data);
    }

    fn reasoning(&mut self, t: &str, out: &mut String) {
        if self.reasoning.is_none() {
            self.close_message(out);
            let output_index = self.take_index();
            let item_id = reasoning_id(&self.echo.id, output_index);
            self.frame(
                out,
                "response.output_item.added",
                json!({"output_index": output_index, "item": {"type": "reasoning",
                    "id": item_id, "summary": []}}),
            );
            self.frame(
                out,
                "response.reasoning_summary_part.added",
                json!({"item_id": item_id, "output_index": output_index, "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""}}),
            );
            self.reasoning = Some(Text {
                output_index,
                item_id,
                text: String::new(),
            });
        }
        let Some(r) = &mut self.reasoning else {
            return;
        };
        r.text.push_str(t);
        let data = json!({"item_id": r.item_id, "output_index": r.output_index,
            "summary_index": 0, "delta": t});
        self.frame(out, "response.reasoning_summary_text.delta", data);
    }

    fn close_reasoning(&mut self, out: &mut String) {
        let Some(r) = self.reasoning.take() else {
            return;
        };
        let (id, oi) = (&r.item_id, r.output_index);
        self.frame(
            out,
            "response.reasoning_summary_text.done",
            json!({"item_id": id, "output_index": oi, "summary_index": 0, "text": r.text}),
        );
        let part = json!({"type": "summary_text", "text": r.text});
        self.frame(
            out,
            "response.reasoning_summary_part.done",
            json!({"item_id": id, "output_index": oi, "summary_index": 0, "part": part}),
        );
        let item = reasoning_item(id.clone(), &r.text);
        self.frame(
            out,
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        self.done.push((oi, item));
    }

    fn close_message(&mut self, out: &mut String) {
        let Some(m) = self.message.take() else {
            return;
        };
        let (id, oi) = (&m.item_id, m.output_index);
        self.frame(
            out,
            "response.output_text.done",
            json!({"item_id": id, "output_index": oi, "content_index": 0, "text": m.text,
                "logprobs": []}),
        );
        self.frame(
            out,
            "response.content_part.done",
            json!({"item_id": id, "output_index": oi, "content_index": 0,
                "part": {"type": "output_text", "text": m.text, "annotations": [], "logprobs": []}}),
        );
        let item = message_item(m.item_id.clone(), &m.text, "completed");
        self.frame(
            out,
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        self.done.push((oi, item));
    }

    /// A piece of a tool call's arguments. A freeform tool's input is held back: it is the
    /// `input` string inside JSON arguments, readable only once they are complete.
    fn arguments(&mut self, index: u32, delta: &str, out: &mut String) {
        let Some(call) = self.calls.iter_mut().rev().find(|c| c.index == index) else {
            return;
        };
        call.arguments.push_str(delta);
        if call.freeform {
            return;
        }
        let data = json!({"item_id": call.item_id, "output_index": call.output_index,
            "delta": delta});
        self.frame(out, "response.function_call_arguments.delta", data);
    }

    fn close_call(&mut self, call: Call, out: &mut String) {
        let (id, oi) = (&call.item_id, call.output_index);
        let item = self.echo.call_item(
            id.clone(),
            &call.call_id,
            &call.name,
            &call.arguments,
            "completed",
        );
        if call.freeform {
            let input = item["input"].clone();
            self.frame(
                out,
                "response.custom_tool_call_input.delta",
                json!({"item_id": id, "output_index": oi, "delta": input}),
            );
            self.frame(
                out,
                "response.custom_tool_call_input.done",
                json!({"item_id": id, "output_index": oi, "input": input}),
            );
        } else {
            self.frame(
                out,
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": oi, "name": item["name"],
                    "arguments": call.arguments}),
            );
        }
        self.frame(
            out,
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        self.done.push((oi, item));
    }

    fn frame(&mut self, out: &mut String, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        let _ = write!(out, "event: {kind}\ndata: {data}\n\n");
    }
}

impl crate::canonical::StreamEncode for StreamEncoder {
    fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        StreamEncoder::push(self, ev, out)
    }

    fn finish(&mut self, out: &mut String) {
        StreamEncoder::finish(self, out)
    }

    /// Relaying a Responses upstream's own response: an error event, not a second lifecycle
    /// under another id.
    fn error(&mut self, message: &str, relaying: bool, out: &mut String) {
        if relaying {
            StreamEncoder::error(self, message, out)
        } else {
            self.fail(message, out)
        }
    }

    fn wire(&self) -> Option<crate::canonical::Wire> {
        Some(crate::canonical::Wire::Responses)
    }
}
