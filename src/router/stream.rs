//! The committed half of a streamed answer: forward upstream events as they come, watch for a
//! proper finish, and end with an explicit error event — never a silent truncation — when the
//! upstream breaks, stalls or stops early. Dropping the stream (client gone) drops the upstream
//! connection at once and records the request as cancelled.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures_util::Stream;
use serde_json::{json, Map, Value};

use super::record::Record;
use super::snapshot::Target;
use super::sse::SseReader;
use super::Slot;
use crate::canonical::openai::usage_from_openai;

/// What a stream needs to continue elsewhere after a break (route `resumeOnBreak`).
pub struct Resume {
    pub core: Arc<crate::gateway::Core>,
    /// The client's original request body.
    pub body: Map<String, Value>,
    /// Candidates that declared prefill support, in order.
    pub targets: VecDeque<Target>,
    /// Estimated prompt tokens, for an attempt that broke before reporting its usage.
    pub prompt_tokens: u64,
}

/// A resumable stream's bookkeeping: the parts so far, so the answer reads as one (one id, one
/// role chunk) and every part's tokens count.
#[derive(Default)]
struct Parts {
    /// Text forwarded so far (kept only when the stream may resume).
    text: String,
    /// Where the current attempt's text starts in `text`.
    attempt_start: usize,
    /// The first attempt's chunk id, kept on every continuation.
    id: Option<String>,
    /// Usage the current attempt reported, if any.
    attempt_usage: Option<crate::canonical::Usage>,
    /// Tokens of the attempts that broke (reported, else estimated).
    carried: crate::canonical::Usage,
    prompt_tokens: u64,
    /// Targets that served a part, and why each one before the last broke.
    chain: Vec<String>,
    breaks: Vec<String>,
}

/// The payload of an event's first `data:` line.
fn data_line(raw: &[u8]) -> Option<&[u8]> {
    raw.split(|b| *b == b'\n')
        .find_map(|l| l.strip_prefix(b"data:"))
        .map(|d| d.strip_prefix(b" ").unwrap_or(d))
}

/// Bytes of the `delta.content` string in an OpenAI chunk, found without parsing it.
fn content_len(data: &[u8]) -> usize {
    let Some(at) = memchr::memmem::find(data, b"\"content\":\"") else {
        return 0;
    };
    let s = &data[at + 11..];
    let mut from = 0;
    while let Some(off) = memchr::memchr(b'"', &s[from..]) {
        let q = from + off;
        let escapes = s[..q].iter().rev().take_while(|b| **b == b'\\').count();
        if escapes % 2 == 0 {
            return q;
        }
        from = q + 1;
    }
    0
}

/// About four characters a token, at least one for any text.
fn estimate_text_tokens(s: &str) -> u64 {
    (s.chars().count() as u64).div_ceil(4)
}

fn add_usage(a: crate::canonical::Usage, b: crate::canonical::Usage) -> crate::canonical::Usage {
    crate::canonical::Usage {
        input_tokens: a.input_tokens + b.input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
        cached_input_tokens: a.cached_input_tokens + b.cached_input_tokens,
    }
}

struct Pump {
    reader: SseReader,
    queued: VecDeque<Bytes>,
    rec: Record,
    target: Target,
    _slot: Slot,
    finish_seen: bool,
    ended: bool,
    resume: Option<Resume>,
    /// Present when the stream may resume on another target.
    parts: Option<Box<Parts>>,
    client_wants_usage: bool,
    prompt_tokens: u64,
    /// Some usage was reported; otherwise the end estimates it from the bytes of content.
    usage_seen: bool,
    content_bytes: u64,
    /// The event just inspected is the usage-only chunk a client that did not ask must not get.
    drop_event: bool,
    out: Out,
    upstream: super::Wire,
    /// Anthropic upstream events -> canonical (when the client speaks OpenAI).
    decoder: crate::canonical::anthropic::StreamDecoder,
    /// Gemini upstream chunks -> canonical.
    gemini: crate::canonical::gemini::StreamDecoder,
    /// Prompt tokens from an Anthropic `message_start`, for the usage at the end.
    input_usage: crate::canonical::Usage,
}

/// The committed upstream stream and the format it speaks.
pub struct Upstream {
    pub reader: SseReader,
    pub prelude: Vec<Bytes>,
    pub wire: super::Wire,
    /// The client asked for a usage chunk (`stream_options.include_usage`); Baton always asks
    /// the upstream, and drops that chunk for a client that did not.
    pub client_wants_usage: bool,
    /// Estimated prompt tokens, for an answer whose upstream reports no usage.
    pub prompt_tokens: u64,
}

/// The client's wire format.
pub enum Out {
    /// OpenAI chunks, forwarded as the upstream sent them.
    OpenAi,
    /// Anthropic Messages events, translated from the upstream's OpenAI chunks.
    Anthropic(Box<crate::canonical::anthropic::StreamEncoder>),
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
        reader,
        prelude,
        wire,
        client_wants_usage,
        prompt_tokens,
    } = up;
    let parts = resume.as_ref().map(|r| {
        Box::new(Parts {
            prompt_tokens: r.prompt_tokens,
            chain: vec![target.label()],
            ..Parts::default()
        })
    });
    let mut pump = Pump {
        client_wants_usage,
        prompt_tokens,
        usage_seen: false,
        content_bytes: 0,
        drop_event: false,
        parts,
        upstream: wire,
        decoder: Default::default(),
        gemini: Default::default(),
        input_usage: Default::default(),
        reader,
        queued: VecDeque::new(),
        rec,
        target,
        _slot: slot,
        finish_seen: false,
        ended: false,
        resume,
        out,
    };
    // The held-back events go out as one write: the client gets the first token in one packet.
    let mut first = bytes::BytesMut::new();
    for ev in prelude {
        pump.inspect(&ev);
        let b = pump.translate(ev);
        first.extend_from_slice(&b);
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
        let data = data_line(raw);
        let Some(data) = data else { return };
        if data.starts_with(b"[DONE]") {
            return;
        }
        if self.upstream == super::Wire::Anthropic {
            self.inspect_anthropic(data);
            return;
        }
        if self.upstream == super::Wire::Gemini {
            if let Ok(v) = serde_json::from_slice::<Value>(data) {
                if v.pointer("/candidates/0/finishReason")
                    .is_some_and(|r| !r.is_null())
                {
                    self.finish_seen = true;
                }
                if let Some(u) = v.get("usageMetadata") {
                    self.note_usage(crate::canonical::gemini::usage_from_gemini(u));
                }
            }
            return;
        }
        if let Some(parts) = &mut self.parts {
            if let Ok(v) = serde_json::from_slice::<Value>(data) {
                if let Some(t) = v
                    .pointer("/choices/0/delta/content")
                    .and_then(Value::as_str)
                {
                    parts.text.push_str(t);
                }
                if parts.id.is_none() {
                    parts.id = v.get("id").and_then(Value::as_str).map(str::to_string);
                }
            }
        }
        self.content_bytes += content_len(data) as u64;
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
            self.note_usage(u);
            // The usage-only chunk Baton asked for on the client's behalf.
            self.drop_event = !self.client_wants_usage
                && matches!(self.out, Out::OpenAi)
                && v.get("choices")
                    .and_then(Value::as_array)
                    .is_some_and(|c| c.is_empty());
        }
    }

    /// An answer whose upstream reported no usage still counts: the prompt as estimated and
    /// about four bytes of content a token (logged as an estimate).
    fn estimate_if_unreported(&mut self) {
        if self.usage_seen || self.parts.as_ref().is_some_and(|p| p.chain.len() > 1) {
            return;
        }
        let u = crate::canonical::Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.content_bytes.div_ceil(4),
            cached_input_tokens: 0,
        };
        tracing::debug!(
            request_id = self.rec.id(),
            input = u.input_tokens,
            output = u.output_tokens,
            "upstream reported no usage; tokens estimated"
        );
        self.rec.usage(u);
    }

    /// Usage the current attempt reported: the record gets it plus the parts that broke.
    fn note_usage(&mut self, u: crate::canonical::Usage) {
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
            crate::canonical::Usage {
                input_tokens: parts.prompt_tokens + estimate_text_tokens(prefill),
                output_tokens: estimate_text_tokens(&parts.text[parts.attempt_start..]),
                cached_input_tokens: 0,
            }
        });
        parts.carried = add_usage(parts.carried, part);
        parts.attempt_start = parts.text.len();
        self.rec.usage(parts.carried);
    }

    /// A continuation's OpenAI chunk as part of the first answer: the first attempt's id, no
    /// second role, usage covering every part. `None` when nothing is left to send.
    fn rewrite_continuation(&self, raw: &Bytes) -> Option<Bytes> {
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

    /// Usage and the stop reason from Anthropic `message_start` / `message_delta`.
    fn inspect_anthropic(&mut self, data: &[u8]) {
        let is = |t: &[u8]| memchr::memmem::find(data, t).is_some();
        if !is(b"\"message_start\"") && !is(b"\"message_delta\"") {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        match v.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                if let Some(u) = v.pointer("/message/usage") {
                    self.input_usage = crate::canonical::anthropic::usage_from_anthropic(u);
                }
            }
            Some("message_delta") => {
                if v.pointer("/delta/stop_reason")
                    .is_some_and(|r| !r.is_null())
                {
                    self.finish_seen = true;
                }
                if let Some(out) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    let mut u = self.input_usage;
                    u.output_tokens = out;
                    self.usage_seen = true;
                    self.rec.usage(u);
                }
            }
            _ => {}
        }
    }

    async fn next_output(&mut self) -> Bytes {
        loop {
            let out = self.next_event_output().await;
            // Events with nothing to say in the client's format (keep-alives when translating)
            // are skipped rather than sent as empty chunks.
            if !out.is_empty() || self.ended {
                return out;
            }
        }
    }

    async fn next_event_output(&mut self) -> Bytes {
        match self.reader.next_event().await {
            Ok(Some(ev)) => {
                let anthropic_kind = (self.upstream == super::Wire::Anthropic)
                    .then(|| {
                        ev.data
                            .as_ref()
                            .and_then(|d| serde_json::from_slice::<Value>(d).ok())
                    })
                    .flatten();
                let kind = anthropic_kind
                    .as_ref()
                    .and_then(|v| v.get("type"))
                    .and_then(Value::as_str);
                if ev.is_done() || kind == Some("message_stop") {
                    self.ended = true;
                    self.settle_resumed();
                    self.estimate_if_unreported();
                    self.count_tokens();
                    self.rec.finish(200, None);
                    return self.done(Some(ev.raw));
                }
                if kind == Some("error") {
                    let redactor = self.rec.core().redactor.clone();
                    let msg = redactor.string(
                        anthropic_kind
                            .as_ref()
                            .and_then(|v| v.pointer("/error/message"))
                            .and_then(Value::as_str)
                            .unwrap_or("upstream error")
                            .to_string(),
                    );
                    self.ended = true;
                    self.rec
                        .finish(502, Some(format!("upstream error mid-stream: {msg}")));
                    return match &self.out {
                        Out::Anthropic(_) => match redactor.bytes(&ev.raw) {
                            std::borrow::Cow::Borrowed(_) => ev.raw,
                            std::borrow::Cow::Owned(b) => Bytes::from(b),
                        },
                        Out::OpenAi => {
                            let body = json!({"error": {"message": msg, "type": "upstream_error",
                                "param": null, "code": "stream_interrupted"}});
                            Bytes::from(format!("data: {body}\n\n"))
                        }
                    };
                }
                if let Some(data) = &ev.data {
                    if memchr::memmem::find(data, b"\"error\"").is_some() {
                        if let Ok(v) = serde_json::from_slice::<Value>(data) {
                            if v.get("error").is_some() && v.get("choices").is_none() {
                                let redactor = self.rec.core().redactor.clone();
                                let msg = redactor.string(
                                    v.pointer("/error/message")
                                        .and_then(Value::as_str)
                                        .unwrap_or("upstream error")
                                        .to_string(),
                                );
                                self.ended = true;
                                self.rec
                                    .finish(502, Some(format!("upstream error mid-stream: {msg}")));
                                return match &self.out {
                                    Out::OpenAi => match redactor.bytes(&ev.raw) {
                                        std::borrow::Cow::Borrowed(_) => ev.raw,
                                        std::borrow::Cow::Owned(b) => Bytes::from(b),
                                    },
                                    Out::Anthropic(_) => Bytes::from(
                                        crate::canonical::anthropic::error_frame("api_error", &msg),
                                    ),
                                };
                            }
                        }
                    }
                }
                // An event that is not JSON after content has reached the client would crash
                // the client's parser (the official SDKs raise mid-stream): end explicitly
                // instead, or resume where the route allows. Checked without building a tree.
                if let Some(data) = &ev.data {
                    if !ev.is_done()
                        && serde_json::from_slice::<serde::de::IgnoredAny>(data).is_err()
                    {
                        return self
                            .broke("the upstream sent an event that is not JSON".into())
                            .await;
                    }
                }
                self.inspect(&ev.raw);
                if std::mem::take(&mut self.drop_event) {
                    return Bytes::new();
                }
                self.translate(ev.raw)
            }
            Ok(None) => {
                if self.finish_seen {
                    // Complete answer without the terminator some servers omit: add it.
                    self.ended = true;
                    self.settle_resumed();
                    self.estimate_if_unreported();
                    self.count_tokens();
                    self.rec.finish(200, None);
                    self.done(None)
                } else {
                    self.broke("the upstream stream ended before the answer was finished".into())
                        .await
                }
            }
            Err(e) => self.broke(e.to_string()).await,
        }
    }

    /// One upstream event in the client's format.
    fn translate(&mut self, raw: Bytes) -> Bytes {
        let resumed = self.parts.as_ref().is_some_and(|p| p.chain.len() > 1);
        let raw = if resumed && self.upstream == super::Wire::OpenAi {
            match self.rewrite_continuation(&raw) {
                Some(b) => b,
                None => return Bytes::new(),
            }
        } else {
            raw
        };
        let same = matches!(
            (self.upstream, &self.out),
            (super::Wire::OpenAi, Out::OpenAi) | (super::Wire::Anthropic, Out::Anthropic(_))
        );
        if same {
            return raw;
        }
        let data = data_line(&raw);
        let Some(v) = data.and_then(|d| serde_json::from_slice::<Value>(d).ok()) else {
            return Bytes::new();
        };
        let mut out = String::new();
        let events = match self.upstream {
            super::Wire::OpenAi => crate::canonical::openai::chunk_events(&v),
            super::Wire::Anthropic => self.decoder.push(&v),
            super::Wire::Gemini => self.gemini.push(&v),
        };
        match &mut self.out {
            Out::Anthropic(enc) => {
                for ev in &events {
                    enc.push(ev, &mut out);
                }
            }
            Out::OpenAi => {
                let id = self.rec.id().to_string();
                let model = self.target.model.id.clone();
                for ev in events {
                    let chunk = crate::canonical::openai::event_to_chunk(&ev, &id, &model, 0);
                    out.push_str(&format!("data: {chunk}\n\n"));
                }
            }
        }
        Bytes::from(out)
    }

    /// The end of a complete answer in the client's format; after a resume, preceded by an SSE
    /// comment naming every part's target (the headers named only the first).
    fn done(&mut self, raw: Option<Bytes>) -> Bytes {
        let chain = self.parts.as_ref().filter(|p| p.chain.len() > 1).map(|p| {
            format!(
                ": baton: answer served by {} (resumed after: {})\n\n",
                p.chain.join(" then "),
                p.breaks.join("; ")
            )
        });
        let end = self.end_frame(raw);
        match chain {
            Some(c) => {
                let mut b = bytes::BytesMut::from(c.as_bytes());
                b.extend_from_slice(&end);
                b.freeze()
            }
            None => end,
        }
    }

    fn end_frame(&mut self, raw: Option<Bytes>) -> Bytes {
        match (&mut self.out, self.upstream) {
            (Out::OpenAi, super::Wire::OpenAi) => {
                raw.unwrap_or_else(|| Bytes::from_static(b"data: [DONE]\n\n"))
            }
            (Out::OpenAi, super::Wire::Anthropic | super::Wire::Gemini) => {
                Bytes::from_static(b"data: [DONE]\n\n")
            }
            (Out::Anthropic(_), super::Wire::Anthropic) => raw.unwrap_or_else(|| {
                Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
            }),
            (Out::Anthropic(enc), super::Wire::OpenAi | super::Wire::Gemini) => {
                let mut out = String::new();
                enc.finish(&mut out);
                Bytes::from(out)
            }
        }
    }

    /// The stream broke mid-answer: continue on a prefill-capable candidate when the route
    /// allows it, else end with the explicit error event.
    async fn broke(&mut self, why: String) -> Bytes {
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
    async fn continue_on(&mut self, resume: &Resume, next: Target, why: &str) -> Option<Bytes> {
        let core = &resume.core;
        let key = match super::pick_key(core, &next) {
            super::Pick::Go(i) => i,
            super::Pick::Cooling(..) => return None,
        };
        let slot = super::try_slot(&next)?;
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
        let inbound = super::Inbound {
            body,
            anthropic_body: None,
            anthropic_beta: None,
            canonical: crate::canonical::ChatRequest {
                stream: true,
                ..Default::default()
            },
            needs: Default::default(),
            deadline_ms: None,
        };
        let started = Instant::now();
        let outcome = super::attempt::attempt(core, &next, api_key, &inbound, self.rec.id()).await;
        match outcome {
            super::Attempt::Served(super::Answer::Stream {
                reader, prelude, ..
            }) => {
                tracing::info!(request_id = self.rec.id(), from = %self.target.label(), to = %next.label(), %why, "stream resumed on another provider");
                core.events.emit(crate::events::Event::Failover {
                    request_id: self.rec.id().to_string(),
                    from: self.target.label(),
                    to: next.label(),
                    class: "transient".into(),
                    reason: format!("stream broke mid-answer ({why}); resumed with the partial answer as prefill"),
                    reset_at_ms: None,
                    message: format!(
                        "{} broke off mid-answer; {} finished it",
                        self.target.provider.config.display_name(),
                        next.provider.config.display_name()
                    ),
                });
                let mut ok =
                    super::record(&next, api_key, &super::ok_classified(), Some(200), started);
                ok.class = "ok".into();
                self.rec.push_attempt(ok);
                self.rec.served_by(&next);
                self.reader = reader;
                self._slot = slot;
                if let Some(parts) = &mut self.parts {
                    parts.chain.push(next.label());
                    parts.attempt_usage = None;
                }
                self.target = next;
                self.finish_seen = false;
                let mut first = bytes::BytesMut::new();
                for ev in prelude {
                    self.inspect(&ev);
                    let b = self.translate(ev);
                    first.extend_from_slice(&b);
                }
                Some(first.freeze())
            }
            super::Attempt::Served(super::Answer::Complete(..)) => None,
            super::Attempt::Failed {
                classified, status, ..
            } => {
                self.rec
                    .push_attempt(super::record(&next, api_key, &classified, status, started));
                None
            }
        }
    }

    /// A break after content is a transient failure of the serving provider: in the log and
    /// health (the attempt is no longer `ok`) and towards its breaker, so a provider that cuts
    /// or stalls every stream does not stay first in line.
    fn count_break(&mut self, why: &str) {
        self.rec.serving_attempt_broke(why);
        let core = self.rec.core().clone();
        let p = &self.target.provider;
        let snap = core.snapshot.load();
        let model = p.breaker_scope(&self.target.model.id);
        if let Some(until) = p
            .runtime
            .breakers
            .get(model)
            .failure(core.clock.now_ms(), &snap.routing.breaker)
        {
            let reason = format!("streams keep breaking: {why}");
            core.cooldowns.start(
                crate::limits::Scope {
                    provider: p.id().to_string(),
                    key: None,
                    model: model.map(str::to_string),
                },
                until,
                "breaker",
                &reason,
            );
            core.events.emit(crate::events::Event::BreakerOpened {
                provider: p.id().to_string(),
                until_ms: until,
                reason,
            });
        }
    }

    /// At a resumed answer's end, its last part counts too (estimated if it gave no usage).
    fn settle_resumed(&mut self) {
        if self.parts.as_ref().is_some_and(|p| p.chain.len() > 1) {
            self.settle_attempt();
        }
    }

    /// Counts the answer's tokens against the serving key's declared `tpm`.
    fn count_tokens(&self) {
        self.rec.core().count_tokens(
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
        match &self.out {
            Out::OpenAi => {
                let body = json!({"error": {"message": message, "type": "upstream_error",
                    "param": null, "code": "stream_interrupted"}});
                Bytes::from(format!("data: {body}\n\n"))
            }
            Out::Anthropic(_) => Bytes::from(crate::canonical::anthropic::error_frame(
                "api_error",
                &message,
            )),
        }
    }
}
