//! The verdict on one failed attempt ([`Classified`]) and the small readings every limit file
//! shares (Go-style durations, truncated reasons). A leaf: the limit files take these from here.

use crate::verdict::ErrorClass;

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
    /// The limit is per model (Gemini `PerModel` quotas, Groq "for model …").
    pub per_model: bool,
    /// The attempt timed out (such a target is not retried; the next candidate is).
    pub timeout: bool,
    /// The request alone is larger than the provider's per-minute token limit ("Limit 6000,
    /// Requested 9000"): nothing to wait out and nothing to cool; another candidate may have a
    /// larger limit, else the client gets a 413.
    pub too_large: bool,
}

/// A transport-level failure (no usable HTTP answer).
pub fn classify_transport(reason: impl Into<String>) -> Classified {
    Classified {
        class: ErrorClass::Transient,
        reason: reason.into(),
        reset_at_ms: None,
        context_length: false,
        per_model: false,
        timeout: false,
        too_large: false,
    }
}

/// No answer (or no next chunk) within the configured time.
pub fn classify_timeout(reason: impl Into<String>) -> Classified {
    Classified {
        timeout: true,
        ..classify_transport(reason)
    }
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

pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Response headers from name/value pairs, for the limits' unit tests.
#[cfg(test)]
pub(crate) fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.parse().expect("header"));
    }
    h
}
