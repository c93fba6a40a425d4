//! The committed half of a streamed answer: forward upstream events as they come, watch for a
//! proper finish, and end with an explicit error event — never a silent truncation — when the
//! upstream breaks, stalls or stops early. Dropping the stream (client gone) drops the upstream
//! connection at once and records the request as cancelled.

use std::collections::VecDeque;
use std::convert::Infallible;

use bytes::Bytes;
use futures_util::Stream;
use serde_json::{json, Value};

use super::record::Record;
use super::snapshot::Target;
use super::sse::SseReader;
use super::Slot;
use crate::canonical::openai::usage_from_openai;

struct Pump {
    reader: SseReader,
    queued: VecDeque<Bytes>,
    rec: Record,
    target: Target,
    _slot: Slot,
    finish_seen: bool,
    ended: bool,
}

/// The client-facing body of a streamed answer (OpenAI SSE format).
pub fn openai_body(
    reader: SseReader,
    prelude: Vec<Bytes>,
    slot: Slot,
    target: Target,
    mut rec: Record,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    rec.first_byte();
    let mut pump = Pump {
        reader,
        queued: VecDeque::new(),
        rec,
        target,
        _slot: slot,
        finish_seen: false,
        ended: false,
    };
    // The held-back events go out as one write: the client gets the first token in one packet.
    let mut first = bytes::BytesMut::new();
    for ev in prelude {
        pump.inspect(&ev);
        first.extend_from_slice(&ev);
    }
    if !first.is_empty() {
        pump.queued.push_back(first.freeze());
    }
    futures_util::stream::unfold(pump, |mut p| async move {
        if let Some(b) = p.queued.pop_front() {
            return Some((Ok(b), p));
        }
        if p.ended {
            return None;
        }
        let out = p.next_output().await;
        Some((Ok(out), p))
    })
}

impl Pump {
    /// Notes finish reasons and usage in an event about to be forwarded.
    fn inspect(&mut self, raw: &Bytes) {
        let data = raw
            .split(|b| *b == b'\n')
            .find_map(|l| l.strip_prefix(b"data:"))
            .map(|d| d.strip_prefix(b" ").unwrap_or(d));
        let Some(data) = data else { return };
        if data.starts_with(b"[DONE]") {
            return;
        }
        // Cheap checks first: most chunks carry neither a finish reason nor usage.
        let has_finish = memchr::memmem::find(data, b"\"finish_reason\"").is_some();
        let has_usage = memchr::memmem::find(data, b"\"usage\"").is_some();
        if !has_finish && !has_usage {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if v.pointer("/choices/0/finish_reason")
            .is_some_and(|f| !f.is_null())
        {
            self.finish_seen = true;
        }
        if let Some(u) = v.get("usage").and_then(usage_from_openai) {
            self.rec.usage(u);
        }
    }

    async fn next_output(&mut self) -> Bytes {
        match self.reader.next_event().await {
            Ok(Some(ev)) => {
                if ev.is_done() {
                    self.ended = true;
                    self.rec.finish(200, None);
                    return ev.raw;
                }
                if let Some(data) = &ev.data {
                    if memchr::memmem::find(data, b"\"error\"").is_some() {
                        if let Ok(v) = serde_json::from_slice::<Value>(data) {
                            if v.get("error").is_some() && v.get("choices").is_none() {
                                let msg = v
                                    .pointer("/error/message")
                                    .and_then(Value::as_str)
                                    .unwrap_or("upstream error")
                                    .to_string();
                                self.ended = true;
                                self.rec
                                    .finish(502, Some(format!("upstream error mid-stream: {msg}")));
                                return ev.raw;
                            }
                        }
                    }
                }
                self.inspect(&ev.raw);
                ev.raw
            }
            Ok(None) => {
                self.ended = true;
                if self.finish_seen {
                    // Complete answer without the terminator some servers omit: add it.
                    self.rec.finish(200, None);
                    Bytes::from_static(b"data: [DONE]\n\n")
                } else {
                    self.fail("the upstream stream ended before the answer was finished".into())
                }
            }
            Err(e) => {
                self.ended = true;
                self.fail(e.to_string())
            }
        }
    }

    fn fail(&mut self, why: String) -> Bytes {
        let message = format!(
            "Provider {} stopped mid-answer ({why}); the answer above is incomplete.",
            self.target.label()
        );
        tracing::warn!(request_id = self.rec.id(), target = %self.target.label(), %why, "stream broke after content was sent");
        self.rec.finish(502, Some(message.clone()));
        let body = json!({"error": {"message": message, "type": "upstream_error", "param": null,
            "code": "stream_interrupted"}});
        Bytes::from(format!("data: {body}\n\n"))
    }
}
