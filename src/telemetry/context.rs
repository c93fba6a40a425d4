//! The vocabulary of a request's trace (a leaf of `telemetry`): the caller's span it continues
//! and what Baton keeps of a request it traces.

use std::time::SystemTime;

use http::HeaderValue;

/// A `traceparent` a client sent: the trace it belongs to and the span that called Baton.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Parent {
    pub trace_id: u128,
    pub span_id: u64,
    pub sampled: bool,
}

impl Parent {
    /// A W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), or `None` when it is not one (a
    /// malformed header starts a new trace, as the recommendation says). A later version's
    /// header is read by its first four fields.
    pub fn parse(v: &str) -> Option<Parent> {
        let v = v.trim();
        let mut parts = v.split('-');
        let (version, trace, span, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        if !hex(version, 2) || version == "ff" || !hex(trace, 32) || !hex(span, 16) {
            return None;
        }
        if !hex(flags, 2) || (version == "00" && parts.next().is_some()) {
            return None;
        }
        let trace_id = u128::from_str_radix(trace, 16).ok()?;
        let span_id = u64::from_str_radix(span, 16).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        (trace_id != 0 && span_id != 0).then_some(Parent {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }
}

/// A request Baton traces: where its spans go, its ids, and when it started.
pub(super) struct Ours {
    pub(super) trace_id: u128,
    /// The request's own span.
    pub(super) span_id: u64,
    pub(super) parent: Option<Parent>,
    pub(super) state: Option<HeaderValue>,
    pub(super) started: SystemTime,
}
