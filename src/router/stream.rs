//! The committed half of a streamed answer: forward upstream events as they come, watch for a
//! proper finish, and end with an explicit error event — never a silent truncation — when the
//! upstream breaks, stalls or stops early. Dropping the stream (client gone) drops the upstream
//! connection at once and records the request as cancelled.
//!
//! Each event is decoded once by the upstream's codec (the prelude's events arrive decoded).
//! A same-format hop forwards the upstream's bytes untouched; events already buffered when one
//! arrives go out in the same write.

mod pump;
mod resume;
pub(crate) mod source;

use std::collections::VecDeque;
use std::convert::Infallible;

use bytes::{Bytes, BytesMut};
use futures_util::Stream;

use super::record::Record;
use super::snapshot::Target;
use super::types::{Held, Slot};
use crate::providers::codec::{Decoded, UpstreamError};
pub use pump::{Out, Resume};
use pump::{Parts, Pump};
use source::Next;
pub use source::Source;

/// Most bytes gathered into one write from events that were already buffered.
const MAX_COALESCED: usize = 64 * 1024;
/// Yields a look-ahead allows the HTTP client to hand over an already-received chunk.
const LOOKAHEAD_YIELDS: u32 = 2;

/// The committed upstream stream and the format it speaks.
pub struct Upstream {
    pub source: Source,
    pub prelude: Vec<Held>,
    /// The client asked for a usage chunk (`stream_options.include_usage`); Baton always asks
    /// the upstream, and drops that chunk for a client that did not.
    pub client_wants_usage: bool,
    /// Estimated prompt tokens, for an answer whose upstream reports no usage.
    pub prompt_tokens: u64,
    /// The JSON the client asked for: the streamed answer is checked at its end (`structured`).
    pub expect: Option<crate::structured::Expect>,
}

/// The client-facing body of a streamed answer, in the client's format.
pub fn body(
    up: Upstream,
    slot: Slot,
    target: Target,
    mut rec: Record,
    resume: Option<Resume>,
    out: Out,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    rec.first_byte();
    let Upstream {
        source,
        prelude,
        client_wants_usage,
        prompt_tokens,
        expect,
    } = up;
    let parts = resume
        .as_ref()
        .map(|r| Box::new(Parts::new(r.prompt_tokens, target.label())));
    let mut pump = Pump {
        client_wants_usage,
        prompt_tokens,
        usage_seen: false,
        content_bytes: 0,
        parts,
        source,
        queued: VecDeque::new(),
        rec,
        target,
        _slot: slot,
        finish_seen: false,
        ended: false,
        resume,
        out,
        verdict: None,
        json: expect.map(|expect| {
            Box::new(pump::Json {
                expect,
                seen: Default::default(),
            })
        }),
    };
    // The held-back events go out as one write: the client gets the first token in one packet.
    let first = pump.held(prelude);
    if !first.is_empty() {
        pump.queued.push_back(first);
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
    fn same_format(&self) -> bool {
        self.source.wire().is_some() && self.source.wire() == self.out.wire()
    }

    /// Whether the canonical events are needed: to translate, or to keep the partial answer
    /// for a resume.
    fn wants_events(&self) -> bool {
        !self.same_format() || self.parts.is_some() || self.json.is_some()
    }

    /// What the source gave, in the client's format.
    async fn act(&mut self, next: Next) -> Bytes {
        match next {
            Next::Event(raw, decoded) => self.step(raw, decoded),
            Next::End => self.upstream_ended().await,
            Next::Broke(why) => self.broke(why).await,
        }
    }

    /// The prelude's events (decoded before the commit) in the client's format, as one buffer.
    fn held(&mut self, prelude: Vec<Held>) -> Bytes {
        let mut first = BytesMut::new();
        for h in prelude {
            let b = self.step(h.raw, Some(h.decoded));
            first.extend_from_slice(&b);
        }
        first.freeze()
    }

    /// The next non-empty output: one event, plus every complete event already buffered.
    async fn next_output(&mut self) -> Bytes {
        loop {
            let next = self.source.next(self.wants_events()).await;
            let out = self.act(next).await;
            if out.is_empty() && !self.ended {
                // Nothing to say in the client's format (a keep-alive while translating).
                continue;
            }
            if self.ended {
                return out;
            }
            // Gather what the upstream already sent into this one write. The HTTP client hands
            // its body over a chunk at a time and decodes the next only after this task has
            // asked and yielded (measured: two yields); so a look-ahead that finds nothing
            // yields up to twice before giving up. An upstream that paces its tokens costs two
            // extra polls per event and no waiting; a burst goes out as one write instead of
            // one per event. The buffer is made only when a second event is found: a paced
            // stream's event goes out as it is, uncopied.
            let mut buf: Option<BytesMut> = None;
            let mut yields = 0;
            while buf.as_ref().map_or(out.len(), BytesMut::len) < MAX_COALESCED && !self.ended {
                match self.source.buffered(self.wants_events()) {
                    Some(next) => {
                        yields = 0;
                        let more = self.act(next).await;
                        buf.get_or_insert_with(|| BytesMut::from(&out[..]))
                            .extend_from_slice(&more);
                    }
                    None if yields < LOOKAHEAD_YIELDS => {
                        yields += 1;
                        tokio::task::yield_now().await;
                    }
                    None => break,
                }
            }
            return buf.map_or(out, BytesMut::freeze);
        }
    }

    /// One decoded upstream event (`None`: a comment or keep-alive) in the client's format.
    fn step(&mut self, raw: Bytes, decoded: Option<Decoded>) -> Bytes {
        let Some(d) = decoded else {
            return if self.same_format() {
                raw
            } else {
                Bytes::new()
            };
        };
        if let Some(json) = &mut self.json {
            json.seen.note(&d.events);
        }
        if d.end {
            // The last event may carry the answer's last facts (a Responses stream's
            // `response.completed` has its usage and finish): noted, and translated, first.
            if let Some(u) = d.usage {
                self.note_usage(u);
            }
            self.note_finish(&d, &raw);
            let last = if self.same_format() || d.events.is_empty() {
                Bytes::new()
            } else {
                self.translate(Bytes::new(), &d)
            };
            self.finished();
            let end = self.done(Some(raw));
            if last.is_empty() {
                return end;
            }
            let mut b = BytesMut::from(&last[..]);
            b.extend_from_slice(&end);
            return b.freeze();
        }
        if let Some(e) = d.error {
            return self.upstream_error(raw, e);
        }
        if d.finish {
            self.finish_seen = true;
            self.note_finish(&d, &raw);
        }
        self.content_bytes += d.text_bytes as u64;
        if let Some(u) = d.usage {
            self.note_usage(u);
        }
        if let Some(seal) = &d.seal {
            let key = self.rec.served_key().map(str::to_string);
            let origin = format!("{}/{}", self.target.provider.id(), key.unwrap_or_default());
            self.rec.routing().thinking.record(seal, &origin);
        }
        self.note_part(&raw, &d);
        // The usage-only chunk Baton asked for on the client's behalf.
        if d.usage_only && !self.client_wants_usage && self.same_format() {
            return Bytes::new();
        }
        self.translate(raw, &d)
    }

    /// Why the answer ended, for a traced request's spans (read only when it is traced).
    fn note_finish(&mut self, d: &Decoded, raw: &[u8]) {
        if self.rec.wants_trace(false) {
            if let Some(r) = crate::telemetry::finish_reason(&d.events, raw) {
                self.rec.finish_reason(&r);
            }
        }
    }

    /// The answer is complete: its tokens are settled and counted, and the request logged.
    fn finished(&mut self) {
        self.ended = true;
        self.settle_resumed();
        self.estimate_if_unreported();
        self.count_tokens();
        self.check_json();
        self.rec.finish(200, None);
    }

    /// A streamed answer to a request for JSON, checked at its end: it went to the client as
    /// it came, so the log says whether it was the JSON asked for (a fence or prose around the
    /// value, which a whole answer would have had taken off, is `invalid` here).
    fn check_json(&mut self) {
        let Some(checked) = self.json.take().and_then(|j| j.seen.check(&j.expect)) else {
            return;
        };
        let (word, why) = match checked {
            crate::structured::Checked::Valid => ("valid", None),
            crate::structured::Checked::Repaired { what, .. } => {
                tracing::warn!(request_id = self.rec.id(), target = %self.target.label(), around = what, "the streamed answer's JSON came with something around it");
                ("invalid", Some(what.to_string()))
            }
            crate::structured::Checked::Invalid(why) => {
                let why = self.rec.routing().redactor.string(why);
                tracing::warn!(request_id = self.rec.id(), target = %self.target.label(), reason = %why, "the streamed answer is not the JSON asked for");
                (
                    "invalid",
                    Some(crate::limits::truncate(&why, 300).to_string()),
                )
            }
        };
        self.rec.output(word);
        self.verdict = Some(match why {
            Some(why) => format!("baton-output: {word} ({why})"),
            None => format!("baton-output: {word}"),
        });
    }

    /// The upstream's body ended without its terminator.
    async fn upstream_ended(&mut self) -> Bytes {
        if self.finish_seen {
            // Complete answer without the terminator some servers omit: add it.
            self.finished();
            self.done(None)
        } else {
            self.broke("the upstream stream ended before the answer was finished".into())
                .await
        }
    }

    /// An error event after the commit: the request fails with it, and the client gets it in
    /// its own format (the upstream's own frame, redacted, when the formats match).
    fn upstream_error(&mut self, raw: Bytes, e: UpstreamError) -> Bytes {
        let redactor = self.rec.routing().redactor.clone();
        let msg = redactor.string(e.message().to_string());
        self.ended = true;
        self.rec
            .finish(502, Some(format!("upstream error mid-stream: {msg}")));
        if self.same_format() {
            return match redactor.bytes(&raw) {
                std::borrow::Cow::Borrowed(_) => raw,
                std::borrow::Cow::Owned(b) => Bytes::from(b),
            };
        }
        self.error_frame(&msg)
    }

    /// An explicit error event in the client's format: the answer above it is incomplete.
    fn error_frame(&mut self, message: &str) -> Bytes {
        let relaying = self.same_format();
        let mut out = String::new();
        self.out.error(message, relaying, &mut out);
        Bytes::from(out)
    }

    /// An answer whose upstream reported no usage still counts: the prompt as estimated and
    /// about four bytes of content a token (logged as an estimate).
    fn estimate_if_unreported(&mut self) {
        if self.usage_seen || self.resumed() {
            return;
        }
        let u = crate::canonical::Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.content_bytes.div_ceil(4),
            ..Default::default()
        };
        tracing::debug!(
            request_id = self.rec.id(),
            input = u.input_tokens,
            output = u.output_tokens,
            "upstream reported no usage; tokens estimated"
        );
        self.rec.usage(u);
    }

    /// One upstream event in the client's format: the bytes as they came on a same-format hop,
    /// else the canonical events encoded.
    fn translate(&mut self, raw: Bytes, d: &Decoded) -> Bytes {
        if self.same_format() {
            if self.resumed() {
                return self.rewrite_continuation(&raw).unwrap_or_default();
            }
            return self.out.relay(raw);
        }
        let mut out = String::new();
        for ev in &d.events {
            self.out.push(ev, &mut out);
        }
        Bytes::from(out)
    }

    /// The end of a complete answer in the client's format; after a resume, preceded by an SSE
    /// comment naming every part's target (the headers named only the first).
    fn done(&mut self, raw: Option<Bytes>) -> Bytes {
        let mut notes = String::new();
        if let Some(chain) = self.chain_comment() {
            self.out.comment(&chain, &mut notes);
        }
        if let Some(verdict) = self.verdict.take() {
            self.out.comment(&verdict, &mut notes);
        }
        let end = self.end_frame(raw);
        if notes.is_empty() {
            return end;
        }
        let mut b = BytesMut::from(notes.as_bytes());
        b.extend_from_slice(&end);
        b.freeze()
    }

    fn end_frame(&mut self, raw: Option<Bytes>) -> Bytes {
        if self.same_format() {
            // A stream without a terminator of its own (Responses, Gemini) ends with its
            // last event, which went by.
            return raw.unwrap_or_else(|| Bytes::from_static(self.out.relayed_end()));
        }
        let mut out = String::new();
        self.out.finish(&mut out);
        Bytes::from(out)
    }

    /// A break after content is a transient failure of the serving provider: in the log and
    /// health (the attempt is no longer `ok`) and towards its breaker, so a provider that cuts
    /// or stalls every stream does not stay first in line.
    fn count_break(&mut self, why: &str) {
        self.rec.serving_attempt_broke(why);
        let routing = self.rec.routing().clone();
        let p = &self.target.provider;
        let snap = routing.snapshot.load();
        let model = p.breaker_scope(&self.target.model.id);
        if let Some(until) = p
            .runtime
            .breakers
            .get(model)
            .failure(routing.clock.now_ms(), &snap.routing.breaker)
        {
            let reason = format!("streams keep breaking: {why}");
            routing.cooldowns.start(
                crate::limits::Scope {
                    provider: p.id().to_string(),
                    key: None,
                    model: model.map(str::to_string),
                },
                until,
                crate::limits::Cause::Breaker,
                &reason,
            );
            routing.events.emit(crate::events::Event::BreakerOpened {
                provider: p.id().to_string(),
                until_ms: until,
                reason,
            });
        }
    }

    /// Counts the answer's tokens against the serving key's declared `tpm`.
    fn count_tokens(&self) {
        self.rec.routing().count_tokens(
            &self.target.provider,
            self.rec.served_key().unwrap_or_default(),
            self.rec.total_tokens(),
        );
    }

    fn fail(&mut self, why: String) -> Bytes {
        self.estimate_if_unreported();
        let message = format!(
            "Provider {} stopped mid-answer ({why}); the answer above is incomplete.",
            self.target.label()
        );
        tracing::warn!(request_id = self.rec.id(), target = %self.target.label(), %why, "stream broke after content was sent");
        self.rec.finish(502, Some(message.clone()));
        self.error_frame(&message)
    }
}
