//! Resuming a broken stream on another target (route `resumeOnBreak`): the partial answer goes
//! to a prefill-capable candidate as an assistant turn, and its continuation is relayed as part
//! of the same answer (one id, one role chunk, every part's tokens counted).

use std::time::Instant;

use bytes::Bytes;
use serde_json::{json, Value};

use super::pump::{Parts, Pump, Resume};
use crate::canonical::openai::usage_from_openai;
use crate::canonical::{StreamEvent, Usage};
use crate::providers::codec::Decoded;
use crate::router::snapshot::Target;

impl Parts {
    pub(super) fn new(prompt_tokens: u64, first: String) -> Self {
        Parts {
            prompt_tokens,
            chain: vec![first],
            ..Parts::default()
        }
    }
}

/// About four characters a token, at least one for any text.
fn estimate_text_tokens(s: &str) -> u64 {
    (s.chars().count() as u64).div_ceil(4)
}

fn add_usage(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
        cached_input_tokens: a.cached_input_tokens + b.cached_input_tokens,
        cache_write_tokens: a.cache_write_tokens + b.cache_write_tokens,
    }
}

/// The payload of an event's first `data:` line.
fn data_line(raw: &[u8]) -> Option<&[u8]> {
    raw.split(|b| *b == b'\n')
        .find_map(|l| l.strip_prefix(b"data:"))
        .map(|d| d.strip_prefix(b" ").unwrap_or(d))
}

impl Pump {
    /// Whether a continuation is being relayed (more than one part).
    pub(super) fn resumed(&self) -> bool {
        self.parts.as_ref().is_some_and(|p| p.chain.len() > 1)
    }

    /// Keeps the text and the first chunk id of a resumable stream.
    pub(super) fn note_part(&mut self, raw: &Bytes, d: &Decoded) {
        let Some(parts) = &mut self.parts else { return };
        for ev in &d.events {
            if let StreamEvent::TextDelta(t) = ev {
                parts.text.push_str(t);
            }
        }
        if parts.id.is_none() {
            parts.id = data_line(raw)
                .and_then(|d| serde_json::from_slice::<Value>(d).ok())
                .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string));
        }
    }

    /// Usage the current attempt reported: the record gets it plus the parts that broke.
    pub(super) fn note_usage(&mut self, u: Usage) {
        self.usage_seen = true;
        match &mut self.parts {
            Some(parts) => {
                parts.attempt_usage = Some(u);
                self.rec.usage(add_usage(parts.carried, u));
            }
            None => self.rec.usage(u),
        }
    }

    /// The current attempt's tokens: as reported, else estimated from the prompt (with the
    /// prefill a continuation carries) and the text it streamed.
    fn settle_attempt(&mut self) {
        let Some(parts) = &mut self.parts else { return };
        let part = parts.attempt_usage.take().unwrap_or_else(|| {
            let prefill = &parts.text[..parts.attempt_start];
            Usage {
                input_tokens: parts.prompt_tokens + estimate_text_tokens(prefill),
                output_tokens: estimate_text_tokens(&parts.text[parts.attempt_start..]),
                ..Default::default()
            }
        });
        parts.carried = add_usage(parts.carried, part);
        parts.attempt_start = parts.text.len();
        self.rec.usage(parts.carried);
    }

    /// At a resumed answer's end, its last part counts too (estimated if it gave no usage).
    pub(super) fn settle_resumed(&mut self) {
        if self.resumed() {
            self.settle_attempt();
        }
    }

    /// After a resume, an SSE comment naming every part's target.
    pub(super) fn chain_comment(&self) -> Option<String> {
        self.parts.as_ref().filter(|p| p.chain.len() > 1).map(|p| {
            format!(
                "baton: answer served by {} (resumed after: {})",
                p.chain.join(" then "),
                p.breaks.join("; ")
            )
        })
    }

    /// A continuation's OpenAI chunk as part of the first answer: the first attempt's id, no
    /// second role, usage covering every part. `None` when nothing is left to send.
    pub(super) fn rewrite_continuation(&self, raw: &Bytes) -> Option<Bytes> {
        let parts = self.parts.as_ref()?;
        let data = data_line(raw)?;
        let Ok(Value::Object(mut v)) = serde_json::from_slice::<Value>(data) else {
            return Some(raw.clone());
        };
        if let Some(id) = &parts.id {
            v.insert("id".into(), Value::String(id.clone()));
        }
        let mut empty = false;
        if let Some(choice) = v
            .get_mut("choices")
            .and_then(|c| c.get_mut(0))
            .and_then(Value::as_object_mut)
        {
            if let Some(Value::Object(delta)) = choice.get_mut("delta") {
                delta.remove("role");
                if delta.get("content").is_some_and(|c| c == "") {
                    delta.remove("content");
                }
                empty = delta.is_empty()
                    && choice.get("finish_reason").is_none_or(Value::is_null)
                    && choice.get("logprobs").is_none_or(Value::is_null);
            }
        }
        if let Some(u) = v.get("usage").and_then(usage_from_openai) {
            let total = add_usage(parts.carried, u);
            v.insert(
                "usage".into(),
                json!({"prompt_tokens": total.input_tokens, "completion_tokens": total.output_tokens,
                    "total_tokens": total.input_tokens + total.output_tokens}),
            );
            empty = false;
        }
        if empty {
            return None;
        }
        Some(Bytes::from(format!("data: {}\n\n", Value::Object(v))))
    }

    /// The stream broke mid-answer: continue on a prefill-capable candidate when the route
    /// allows it, else end with the explicit error event.
    pub(super) async fn broke(&mut self, why: String) -> Bytes {
        self.count_break(&why);
        self.settle_attempt();
        if let Some(parts) = &mut self.parts {
            parts.breaks.push(format!("{}: {why}", self.target.label()));
        }
        if let Some(mut resume) = self.resume.take() {
            while let Some(next) = resume.targets.pop_front() {
                if let Some(first) = self.continue_on(&resume, next, &why).await {
                    self.resume = Some(resume);
                    return first;
                }
            }
        }
        self.ended = true;
        self.fail(why)
    }

    /// Sends the original request plus the partial answer as an assistant prefill to `next`;
    /// on success swaps the upstream and returns the continuation's first bytes.
    /// Long because it is one attempt, step by step (key, slot, request, first content, swap),
    /// each of which can end the resume with its own reason.
    async fn continue_on(&mut self, resume: &Resume, next: Target, why: &str) -> Option<Bytes> {
        use crate::router::candidates;
        use crate::router::types::{Answer, Attempt, Inbound, Pick};
        let routing = &resume.routing;
        let key = match candidates::pick_key(routing, &next, None, None) {
            Pick::Go(i) => i,
            Pick::Cooling(..) => return None,
        };
        let slot = candidates::try_slot(&next)?;
        let api_key = next.provider.keys.get(key);
        let mut body = resume.body.clone();
        let prefill = self
            .parts
            .as_ref()
            .map(|p| p.text.clone())
            .unwrap_or_default();
        if let Some(Value::Array(messages)) = body.get_mut("messages") {
            messages.push(json!({"role": "assistant", "content": prefill}));
        }
        let inbound = Inbound {
            openai: body.into(),
            original: None,
            // The conversation with the answer so far: not the client's bytes.
            verbatim: Default::default(),
            continues: None,
            expect: Default::default(),
            trace: None,
            capture: None,
            client: None,
            anthropic_beta: None,
            canonical: crate::canonical::ChatRequest {
                stream: true,
                ..Default::default()
            },
            needs: Default::default(),
            deadline_ms: None,
            conversation: None,
            follows: false,
        };
        let started = Instant::now();
        let up = crate::router::live::Live(routing);
        let outcome =
            crate::router::types::Upstream::attempt(&up, &next, api_key, &inbound, self.rec.id())
                .await;
        match outcome {
            Attempt::Served(Answer::Stream { source, prelude }) => {
                tracing::info!(request_id = self.rec.id(), from = %self.target.label(), to = %next.label(), %why, "stream resumed on another provider");
                routing.events.emit(crate::events::Event::Failover {
                    request_id: self.rec.id().to_string(),
                    from: self.target.label(),
                    to: next.label(),
                    class: crate::limits::ErrorClass::Transient,
                    reason: format!("stream broke mid-answer ({why}); resumed with the partial answer as prefill"),
                    reset_at_ms: None,
                    // Not a limit: a broken stream the user should hear about.
                    notable: true,
                    message: format!(
                        "{} broke off mid-answer; {} finished it",
                        self.target.provider.config.display_name(),
                        next.provider.config.display_name()
                    ),
                });
                self.rec
                    .push_attempt(candidates::served(&next, api_key, started));
                self.rec.served_by(&next);
                self.source = source;
                self._slot = slot;
                if let Some(parts) = &mut self.parts {
                    parts.chain.push(next.label());
                    parts.attempt_usage = None;
                }
                self.target = next;
                self.finish_seen = false;
                Some(self.held(prelude))
            }
            Attempt::Served(Answer::Complete(..)) => None,
            Attempt::Failed {
                classified, status, ..
            } => {
                self.rec.push_attempt(candidates::record(
                    &next,
                    api_key,
                    &classified,
                    status,
                    started,
                ));
                None
            }
        }
    }
}
