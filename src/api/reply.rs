//! What every answer carries: its request id, and which provider and model served it (every
//! attempt in `x-gateway-attempt-details`).

use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// `x-gateway-attempts` (the requests sent upstream) and, when anything was tried,
/// `x-gateway-attempt-details`.
pub(super) fn attempt_headers(
    h: &mut HeaderMap,
    sent: usize,
    attempts: &[crate::store::AttemptRecord],
) {
    h.insert(X_GATEWAY_ATTEMPTS.clone(), HeaderValue::from(sent));
    if !attempts.is_empty() {
        let details = header_value(&attempt_details(attempts));
        h.insert(X_GATEWAY_ATTEMPT_DETAILS.clone(), details);
    }
}

/// `a/m1=rate@2026-11-30T01:19:53Z, b/m2=ok`: every attempt, cooling skips included.
fn attempt_details(attempts: &[crate::store::AttemptRecord]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for a in attempts {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&a.provider);
        out.push('/');
        out.push_str(&a.model);
        out.push('=');
        out.push_str(a.class.as_str());
        if let Some(at) = a
            .reset_at_ms
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        {
            // Written into `out` itself (a `String` cannot fail to take it).
            let _ = write!(out, "@{}", at.round(jiff::Unit::Second).unwrap_or(at));
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
    h.insert(X_GATEWAY_PROVIDER.clone(), header_value(provider));
    h.insert(X_GATEWAY_MODEL.clone(), header_value(model));
}

// The headers every answer carries, named once: a name written as text is parsed and checked
// again each time it is inserted.
pub(super) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub(super) static X_GATEWAY_PROVIDER: HeaderName = HeaderName::from_static("x-gateway-provider");
pub(super) static X_GATEWAY_MODEL: HeaderName = HeaderName::from_static("x-gateway-model");
static X_GATEWAY_ATTEMPTS: HeaderName = HeaderName::from_static("x-gateway-attempts");
static X_GATEWAY_ATTEMPT_DETAILS: HeaderName = HeaderName::from_static("x-gateway-attempt-details");

pub(super) fn header_value(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// `req_` and 16 lowercase hex digits, random.
pub(super) fn new_request_id() -> String {
    request_id_of(rand::random::<u64>())
}

/// `req_` and `n` in 16 lowercase hex digits.
fn request_id_of(n: u64) -> String {
    let mut id = String::with_capacity(20);
    id.push_str("req_");
    // Spelled out rather than `format!("req_{n:016x}")`: formatting machinery for one number
    // was a thousand instructions of every request.
    for shift in (0..16).rev() {
        id.push(char::from(
            b"0123456789abcdef"[((n >> (shift * 4)) & 0xf) as usize],
        ));
    }
    id
}

/// OpenAI's rate-limit headers for a client key's own limits: `x-ratelimit-limit-requests`,
/// `-remaining-requests`, `-reset-requests` (a duration, "1s", "6m0s", "120ms") and the
/// token variants — what every OpenAI-compatible SDK and many vendors send.
pub(crate) fn openai_rate_limits(room: &crate::clients::limiter::Headroom, base: &mut HeaderMap) {
    rate_limits(
        [
            [
                "x-ratelimit-limit-requests",
                "x-ratelimit-remaining-requests",
                "x-ratelimit-reset-requests",
            ],
            [
                "x-ratelimit-limit-tokens",
                "x-ratelimit-remaining-tokens",
                "x-ratelimit-reset-tokens",
            ],
        ],
        room,
        &|r| go_duration(r.reset_ms),
        base,
    );
}

/// Each limit of `room` as three headers named by `names` (limit, remaining, reset; requests
/// first, then tokens), the reset written by `reset`.
pub(crate) fn rate_limits(
    names: [[&'static str; 3]; 2],
    room: &crate::clients::limiter::Headroom,
    reset: &dyn Fn(&crate::clients::limiter::Room) -> String,
    base: &mut HeaderMap,
) {
    for ([limit, remaining, when], r) in names.into_iter().zip([room.requests, room.tokens]) {
        let Some(r) = r else {
            continue;
        };
        base.insert(HeaderName::from_static(limit), HeaderValue::from(r.limit));
        base.insert(
            HeaderName::from_static(remaining),
            HeaderValue::from(r.remaining),
        );
        base.insert(HeaderName::from_static(when), header_value(&reset(&r)));
    }
}

/// A duration as OpenAI writes its resets: "120ms", "1s", "1.5s", "6m0s".
pub(crate) fn go_duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (m, s) = (ms / 60_000, (ms % 60_000) as f64 / 1000.0);
    let secs = if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s:.3}").trim_end_matches('0').to_string()
    };
    if m > 0 {
        format!("{m}m{secs}s")
    } else {
        format!("{secs}s")
    }
}

#[cfg(test)]
mod rate_limit_tests {
    use super::go_duration;

    /// The resets read back with the parser Baton uses for upstreams' headers.
    #[test]
    fn resets_are_go_durations() {
        for (ms, text) in [
            (120, "120ms"),
            (1000, "1s"),
            (1500, "1.5s"),
            (360_000, "6m0s"),
            (61_250, "1m1.25s"),
        ] {
            assert_eq!(go_duration(ms), text);
            assert_eq!(
                crate::limits::parse_go_duration_ms(text),
                Some(ms),
                "{text}"
            );
        }
    }
}

#[cfg(test)]
mod id_tests {
    #[test]
    fn a_request_id_is_req_and_sixteen_hex_digits() {
        assert_eq!(super::request_id_of(0), "req_0000000000000000");
        assert_eq!(
            super::request_id_of(0x0123_4567_89ab_cdef),
            "req_0123456789abcdef"
        );
        assert_eq!(super::request_id_of(u64::MAX), "req_ffffffffffffffff");
        for _ in 0..1000 {
            let n = rand::random::<u64>();
            assert_eq!(super::request_id_of(n), format!("req_{n:016x}"));
        }
    }
}
