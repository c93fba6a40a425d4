//! Upstream error classification, reset-time parsing and the cooldown table.

mod cooldown;

use http::HeaderMap;
use serde_json::Value;

pub use cooldown::{CooldownEntry, Cooldowns, Scope};

/// What kind of failure an attempt hit; each class has its own consequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request itself is wrong: back to the client, nothing cools.
    Request,
    /// Key rejected: that key is out until the user fixes it.
    Auth,
    /// Out of credit: waiting a minute does not help.
    Billing,
    /// Model unknown or unavailable for this provider.
    Model,
    /// Rate or quota limit.
    Rate,
    /// Provider says it is overloaded.
    Overloaded,
    /// 5xx, connection failure, timeout, malformed answer.
    Transient,
    /// The provider refused on policy grounds.
    ContentPolicy,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Request => "request",
            ErrorClass::Auth => "auth",
            ErrorClass::Billing => "billing",
            ErrorClass::Model => "model",
            ErrorClass::Rate => "rate",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::Transient => "transient",
            ErrorClass::ContentPolicy => "content_policy",
        }
    }

    /// Whether another provider could succeed where this one failed.
    pub fn fails_over(self) -> bool {
        !matches!(self, ErrorClass::Request | ErrorClass::ContentPolicy)
    }
}

/// The verdict on one failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub class: ErrorClass,
    /// Short, secret-free explanation for logs, headers and the UI.
    pub reason: String,
    /// When the limit lifts (Unix ms), if the provider said.
    pub reset_at_ms: Option<i64>,
    /// A 400 because the prompt is longer than the model's context window.
    pub context_length: bool,
}

/// Classifies an HTTP error answer from an upstream.
pub fn classify_http(status: u16, headers: &HeaderMap, body: &[u8], now_ms: i64) -> Classified {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let err = json.as_ref().map(|v| v.get("error").unwrap_or(v));
    let field = |k: &str| {
        err.and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    let code = field("code");
    let etype = field("type");
    let message = err
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
    let lower = message.to_ascii_lowercase();
    let reset_at_ms = reset_from_headers(headers, now_ms);

    let context_length = code == "context_length_exceeded"
        || lower.contains("maximum context length")
        || lower.contains("context window")
        || lower.contains("context_length_exceeded")
        || lower.contains("prompt is too long");
    let billing = code == "insufficient_quota"
        || etype == "insufficient_quota"
        || status == 402
        || lower.contains("credit balance is too low")
        || lower.contains("check your plan and billing");

    let class = match status {
        _ if billing => ErrorClass::Billing,
        429 => ErrorClass::Rate,
        401 | 403 => ErrorClass::Auth,
        404 => ErrorClass::Model,
        408 => ErrorClass::Transient,
        503 | 529 => ErrorClass::Overloaded,
        500..=599 => ErrorClass::Transient,
        _ if code == "content_policy_violation" || code == "content_filter" => {
            ErrorClass::ContentPolicy
        }
        _ => ErrorClass::Request,
    };
    Classified {
        class,
        reason: format!("HTTP {status}: {}", truncate(&message, 240)),
        reset_at_ms,
        context_length: context_length && class == ErrorClass::Request,
    }
}

/// A transport-level failure (no usable HTTP answer).
pub fn classify_transport(reason: impl Into<String>) -> Classified {
    Classified {
        class: ErrorClass::Transient,
        reason: reason.into(),
        reset_at_ms: None,
        context_length: false,
    }
}

/// `Retry-After` (seconds or HTTP date), `retry-after-ms` and the OpenAI/Groq
/// `x-ratelimit-reset-*` durations, most specific first.
pub fn reset_from_headers(headers: &HeaderMap, now_ms: i64) -> Option<i64> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(now_ms + ms.max(0.0) as i64);
    }
    if let Some(v) = get("retry-after") {
        if let Ok(secs) = v.parse::<f64>() {
            return Some(now_ms + (secs.max(0.0) * 1000.0) as i64);
        }
        if let Ok(t) = httpdate::parse_http_date(v) {
            let ms = t
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(now_ms);
            return Some(ms.max(now_ms));
        }
    }
    ["x-ratelimit-reset-requests", "x-ratelimit-reset-tokens"]
        .iter()
        .filter_map(|h| get(h).and_then(parse_go_duration_ms))
        .max()
        .map(|ms| now_ms + ms)
}

/// Parses durations such as `1m30s`, `6ms`, `2.5s`, `1h2m` into milliseconds.
pub fn parse_go_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_end] {
            "ms" => 1.0,
            "s" | "" => 1000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return None,
        };
        total += n * factor;
        rest = &rest[unit_end..];
    }
    Some(total.round() as i64)
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("header"));
        }
        h
    }

    #[test]
    fn durations() {
        assert_eq!(parse_go_duration_ms("1m30s"), Some(90_000));
        assert_eq!(parse_go_duration_ms("6ms"), Some(6));
        assert_eq!(parse_go_duration_ms("2.5s"), Some(2_500));
        assert_eq!(parse_go_duration_ms("1h2m"), Some(3_720_000));
        assert_eq!(parse_go_duration_ms("soon"), None);
        assert_eq!(parse_go_duration_ms(""), None);
    }

    #[test]
    fn retry_after_forms() {
        let now = 1_700_000_000_000;
        assert_eq!(
            reset_from_headers(&headers(&[("retry-after", "20")]), now),
            Some(now + 20_000)
        );
        assert_eq!(
            reset_from_headers(&headers(&[("retry-after-ms", "1500")]), now),
            Some(now + 1_500)
        );
        assert_eq!(
            reset_from_headers(
                &headers(&[("retry-after", "Tue, 14 Nov 2023 22:13:40 GMT")]),
                now
            ),
            Some(1_700_000_020_000)
        );
        assert_eq!(
            reset_from_headers(&headers(&[("x-ratelimit-reset-requests", "1m30s")]), now),
            Some(now + 90_000)
        );
        assert_eq!(reset_from_headers(&HeaderMap::new(), now), None);
    }

    #[test]
    fn classes() {
        let h = HeaderMap::new();
        let c = classify_http(
            429,
            &h,
            br#"{"error":{"message":"slow down","code":"rate_limit_exceeded"}}"#,
            0,
        );
        assert_eq!(c.class, ErrorClass::Rate);
        let c = classify_http(429, &h, br#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#, 0);
        assert_eq!(c.class, ErrorClass::Billing);
        let c = classify_http(400, &h, br#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#, 0);
        assert_eq!((c.class, c.context_length), (ErrorClass::Request, true));
        let c = classify_http(
            400,
            &h,
            br#"{"error":{"message":"temperature must be <= 2"}}"#,
            0,
        );
        assert_eq!((c.class, c.context_length), (ErrorClass::Request, false));
        assert!(!c.class.fails_over());
        assert_eq!(
            classify_http(503, &h, b"busy", 0).class,
            ErrorClass::Overloaded
        );
        assert_eq!(
            classify_http(500, &h, b"oops", 0).class,
            ErrorClass::Transient
        );
        assert_eq!(classify_http(401, &h, b"{}", 0).class, ErrorClass::Auth);
        assert_eq!(classify_http(404, &h, b"{}", 0).class, ErrorClass::Model);
        assert!(classify_http(500, &h, b"oops", 0).class.fails_over());
    }
}
