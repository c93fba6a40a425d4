//! What every answer carries: its request id, and which provider and model served it (every
//! attempt in `x-gateway-attempt-details`).

use axum::http::{HeaderMap, HeaderValue};

/// `a/m1=rate@2026-11-30T01:19:53Z, b/m2=ok`: every attempt, cooling skips included.
pub(super) fn attempt_details(attempts: &[crate::store::AttemptRecord]) -> String {
    let mut out = String::new();
    for a in attempts {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&format!("{}/{}={}", a.provider, a.model, a.class));
        if let Some(at) = a
            .reset_at_ms
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        {
            out.push_str(&format!("@{}", at.round(jiff::Unit::Second).unwrap_or(at)));
        }
        if out.len() > 2000 {
            out.push_str(", …");
            break;
        }
    }
    out.retain(|c| c.is_ascii() && !c.is_ascii_control());
    out
}

/// How the JSON the client asked for turned out: `valid`, `repaired` (what was taken off it is
/// in the log), or `invalid` (a stream checked at its end).
pub(super) const OUTPUT_HEADER: &str = "x-baton-output";

pub(super) fn gateway_headers(h: &mut HeaderMap, provider: &str, model: &str) {
    h.insert("x-gateway-provider", header_value(provider));
    h.insert("x-gateway-model", header_value(model));
}

pub(super) fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

pub(super) fn new_request_id() -> String {
    format!("req_{:016x}", rand::random::<u64>())
}
