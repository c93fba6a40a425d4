//! OpenTelemetry traces of the requests Baton serves (`telemetry` in the config and Settings →
//! Diagnostics; off by default).
//!
//! A request's trace is decided when it arrives ([`Telemetry::start`]): the client's W3C
//! `traceparent` is honoured (its trace continued, its sampling decision kept), else the
//! configured share of requests is traced. Each upstream attempt gets its own span id, sent to
//! the upstream as the `traceparent` of its request, so the provider's own spans hang under
//! Baton's attempt. The spans themselves are built once the request is over, from its log row
//! (`export.rs`): nothing on the request's path waits on them, and with tracing off a request
//! costs one load of an empty pointer and, when the client sent one, its `traceparent` relayed
//! as it came.

use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use http::{HeaderMap, HeaderName, HeaderValue};

mod context;
mod export;

use context::Ours;
pub use context::Parent;
pub use export::{Exporter, Finished};

/// The W3C trace-context headers.
pub const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The tracing Baton does now: the exporter, when tracing is on.
#[derive(Default)]
pub struct Telemetry {
    exporter: ArcSwapOption<Exporter>,
}

impl Telemetry {
    /// Turns tracing on with `exporter`, or off (`None`); the exporter it replaces sends what
    /// it holds and stops, on a thread of its own.
    pub fn set(&self, exporter: Option<Exporter>) {
        if let Some(old) = self.exporter.swap(exporter.map(Arc::new)) {
            std::thread::spawn(move || old.shutdown());
        }
    }

    pub fn enabled(&self) -> bool {
        self.exporter.load().is_some()
    }

    /// Sends the spans held and stops (the gateway is stopping).
    pub fn shutdown(&self) {
        if let Some(old) = self.exporter.swap(None) {
            old.shutdown();
        }
    }

    /// The trace of a request arriving with `headers`: `None` when there is nothing to send
    /// upstream or export (tracing off and no `traceparent` from the client).
    pub fn start(&self, headers: &HeaderMap) -> Option<Arc<Trace>> {
        let incoming = headers.get(TRACEPARENT);
        let guard = self.exporter.load();
        let Some(exporter) = guard.as_ref() else {
            // Off: the client's own trace context goes on as it came.
            return Trace::relayed(headers);
        };
        let parent = incoming
            .and_then(|v| v.to_str().ok())
            .and_then(Parent::parse);
        let state = headers
            .get(TRACESTATE)
            .filter(|_| parent.is_some())
            .cloned();
        let trace_id = parent
            .as_ref()
            .map(|p| p.trace_id)
            .unwrap_or_else(random_trace_id);
        if !exporter.samples(parent.as_ref(), trace_id) {
            return Trace::relayed(headers);
        }
        Some(Arc::new(Trace {
            relay: None,
            ours: Some((
                exporter.clone(),
                Ours {
                    trace_id,
                    span_id: random_span_id(),
                    parent,
                    state,
                    started: SystemTime::now(),
                },
            )),
        }))
    }
}

/// One request's trace context.
pub struct Trace {
    /// Tracing off (or this request not sampled): the client's own headers, relayed upstream.
    relay: Option<(HeaderValue, Option<HeaderValue>)>,
    /// Traced by Baton: where its spans go, and its ids.
    ours: Option<(Arc<Exporter>, Ours)>,
}

impl Trace {
    /// The client's own trace context, passed on as it came (`None` when it sent none).
    fn relayed(headers: &HeaderMap) -> Option<Arc<Trace>> {
        headers.get(TRACEPARENT).map(|tp| {
            Arc::new(Trace {
                relay: Some((tp.clone(), headers.get(TRACESTATE).cloned())),
                ours: None,
            })
        })
    }

    /// Whether Baton records this request's spans.
    pub fn traced(&self) -> bool {
        self.ours.is_some()
    }

    /// Whether the spans carry the prompt and the answer (`captureContent`).
    pub fn wants_content(&self) -> bool {
        self.ours
            .as_ref()
            .is_some_and(|(e, _)| e.captures_content())
    }

    /// A new span id for an upstream attempt, when Baton traces this request (0 otherwise).
    pub fn attempt_span(&self) -> u64 {
        if self.ours.is_some() {
            random_span_id()
        } else {
            0
        }
    }

    /// The trace-context headers of an upstream request: the attempt's span as the parent
    /// (the request's when the attempt has none), or the client's own as they came.
    pub fn upstream_headers(&self, attempt_span: u64) -> Vec<(HeaderName, HeaderValue)> {
        if let Some((tp, state)) = &self.relay {
            let mut v = vec![(TRACEPARENT, tp.clone())];
            v.extend(state.clone().map(|s| (TRACESTATE, s)));
            return v;
        }
        let Some((_, o)) = &self.ours else {
            return Vec::new();
        };
        let span = if attempt_span == 0 {
            o.span_id
        } else {
            attempt_span
        };
        let tp = format!("00-{:032x}-{:016x}-01", o.trace_id, span);
        let mut v = Vec::with_capacity(2);
        if let Ok(h) = HeaderValue::from_str(&tp) {
            v.push((TRACEPARENT, h));
        }
        v.extend(o.state.clone().map(|s| (TRACESTATE, s)));
        v
    }

    /// The request is over: its spans go to the exporter.
    pub fn finish(&self, done: &Finished<'_>) {
        if let Some((exporter, o)) = &self.ours {
            exporter.emit(o, done);
        }
    }
}

/// Why a streamed answer ended, from the event that ended it: the canonical event when it
/// was decoded, else the upstream's own words (`finish_reason`, `stop_reason`,
/// `finishReason`, a Responses stream's final `status`).
pub fn finish_reason(events: &[crate::canonical::StreamEvent], raw: &[u8]) -> Option<String> {
    for e in events {
        if let crate::canonical::StreamEvent::Finish(r) = e {
            return Some(r.as_openai().to_string());
        }
    }
    let text = std::str::from_utf8(raw).ok()?;
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
        .find_map(|v| said_finish(&v, 0))
}

fn said_finish(v: &serde_json::Value, depth: usize) -> Option<String> {
    use serde_json::Value;
    let obj = match v {
        Value::Object(o) if depth < 4 => o,
        Value::Array(a) if depth < 4 => return a.iter().find_map(|i| said_finish(i, depth + 1)),
        _ => return None,
    };
    for k in ["finish_reason", "stop_reason", "finishReason"] {
        if let Some(Value::String(s)) = obj.get(k) {
            return Some(s.clone());
        }
    }
    obj.values().find_map(|i| said_finish(i, depth + 1))
}

tokio::task_local! {
    /// The span of the upstream attempt being made on this task (`router/fallback`).
    static ATTEMPT_SPAN: u64;
}

/// Runs an attempt's future with its span id at hand for the request it sends.
pub async fn in_attempt<F: std::future::Future>(span: u64, f: F) -> F::Output {
    ATTEMPT_SPAN.scope(span, f).await
}

/// The span id of the attempt this task is making (0 outside an attempt).
pub fn attempt_span() -> u64 {
    ATTEMPT_SPAN.try_with(|s| *s).unwrap_or(0)
}

fn random_trace_id() -> u128 {
    loop {
        let id: u128 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

fn random_span_id() -> u64 {
    loop {
        let id: u64 = rand::random();
        if id != 0 {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_read_as_the_recommendation_says() {
        let p = Parent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        assert_eq!(p.trace_id, 0x0af7651916cd43dd8448eb211c80319c);
        assert_eq!(p.span_id, 0xb7ad6b7169203331);
        assert!(p.sampled);
        let p = Parent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00").unwrap();
        assert!(!p.sampled);
        // A later version: its first four fields, whatever follows.
        assert!(
            Parent::parse("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra")
                .is_some()
        );
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",
        ] {
            assert_eq!(Parent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn with_tracing_off_the_clients_context_is_relayed_as_it_came() {
        let t = Telemetry::default();
        assert!(t.start(&HeaderMap::new()).is_none());
        let mut h = HeaderMap::new();
        h.insert(
            TRACEPARENT,
            HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        );
        h.insert(TRACESTATE, HeaderValue::from_static("vendor=1"));
        let trace = t.start(&h).unwrap();
        assert!(!trace.traced());
        assert_eq!(trace.attempt_span(), 0);
        let up = trace.upstream_headers(0);
        assert_eq!(up.len(), 2);
        assert_eq!(up[0].1, h[TRACEPARENT]);
        assert_eq!(up[1].1, h[TRACESTATE]);
    }
}
