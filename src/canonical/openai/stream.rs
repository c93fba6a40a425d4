//! Canonical stream events as OpenAI `chat.completion.chunk` events, for a client whose
//! upstream spoke another format (or was a CLI): the first delta names the assistant role, as
//! OpenAI's does; the usage chunk comes after the finish and only when the client asked for it
//! (`stream_options.include_usage`); the stream ends with `[DONE]`.

use std::fmt::Write;

use super::event_to_chunk;
use crate::canonical::{StreamEvent, Usage};

pub struct StreamEncoder {
    id: String,
    model: String,
    created: i64,
    include_usage: bool,
    /// No delta written yet: the next one carries the role.
    first: bool,
    finished: bool,
    /// Usage that arrived before the finish, written after it.
    usage: Option<Usage>,
}

impl StreamEncoder {
    /// `id`: the request's; `created`: Unix seconds.
    pub fn new(id: &str, model: &str, created: i64, include_usage: bool) -> Self {
        Self {
            id: format!("chatcmpl-{id}"),
            model: model.to_string(),
            created,
            include_usage,
            first: true,
            finished: false,
            usage: None,
        }
    }

    /// Appends the chunks for `ev` to `out`.
    pub fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        match ev {
            StreamEvent::Usage(u) => {
                if !self.include_usage {
                    return;
                }
                if self.finished {
                    self.write(ev, out);
                } else {
                    self.usage = Some(*u);
                }
            }
            StreamEvent::Finish(_) => {
                self.write(ev, out);
                self.finished = true;
                if let Some(u) = self.usage.take() {
                    self.write(&StreamEvent::Usage(u), out);
                }
            }
            _ => self.write(ev, out),
        }
    }

    /// The end of the stream: usage still held (no finish came), then `[DONE]`.
    pub fn finish(&mut self, out: &mut String) {
        if let Some(u) = self.usage.take() {
            self.write(&StreamEvent::Usage(u), out);
        }
        out.push_str("data: [DONE]\n\n");
    }

    fn write(&mut self, ev: &StreamEvent, out: &mut String) {
        let mut chunk = event_to_chunk(ev, &self.id, &self.model, self.created);
        if !matches!(ev, StreamEvent::Usage(_)) && std::mem::take(&mut self.first) {
            chunk["choices"][0]["delta"]["role"] = "assistant".into();
        }
        let _ = write!(out, "data: {chunk}\n\n");
    }
}

impl crate::canonical::StreamEncode for StreamEncoder {
    fn push(&mut self, ev: &StreamEvent, out: &mut String) {
        StreamEncoder::push(self, ev, out)
    }

    fn finish(&mut self, out: &mut String) {
        StreamEncoder::finish(self, out)
    }

    fn error(&mut self, message: &str, _relaying: bool, out: &mut String) {
        let body = serde_json::json!({"error": {"message": message, "type": "upstream_error",
            "param": null, "code": "stream_interrupted"}});
        let _ = write!(out, "data: {body}\n\n");
    }

    fn wire(&self) -> Option<crate::canonical::Wire> {
        Some(crate::canonical::Wire::OpenAi)
    }

    fn relayed_end(&self) -> &'static [u8] {
        b"data: [DONE]\n\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::StopReason;

    fn lines(out: &str) -> Vec<serde_json::Value> {
        out.split("\n\n")
            .filter_map(|f| f.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str(d).unwrap_or_default())
            .collect()
    }

    #[test]
    fn role_first_usage_after_the_finish_and_only_when_asked() {
        let u = Usage {
            input_tokens: 3,
            output_tokens: 2,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
        };
        let events = [
            StreamEvent::Usage(u),
            StreamEvent::TextDelta("Hi".into()),
            StreamEvent::TextDelta(" there".into()),
            StreamEvent::Finish(StopReason::Stop),
        ];
        let mut enc = StreamEncoder::new("req1", "m", 1_800_000_000, true);
        let mut out = String::new();
        for e in &events {
            enc.push(e, &mut out);
        }
        enc.finish(&mut out);
        assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
        let c = lines(&out);
        assert_eq!(c.len(), 4, "{out}");
        assert_eq!(c[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(c[0]["choices"][0]["delta"]["content"], "Hi");
        assert!(c[1]["choices"][0]["delta"].get("role").is_none());
        assert_eq!(c[2]["choices"][0]["finish_reason"], "stop");
        assert_eq!(c[3]["usage"]["prompt_tokens"], 3);
        assert_eq!(c[3]["choices"], serde_json::json!([]));
        assert!(c
            .iter()
            .all(|c| c["id"] == "chatcmpl-req1" && c["created"] == 1_800_000_000));

        let mut enc = StreamEncoder::new("req1", "m", 0, false);
        let mut out = String::new();
        for e in &events {
            enc.push(e, &mut out);
        }
        enc.finish(&mut out);
        assert!(
            lines(&out).iter().all(|c| c.get("usage").is_none()),
            "{out}"
        );
    }
}
