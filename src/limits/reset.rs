//! When does a limit lift? Reset instants from headers, structured bodies, message text and
//! window words, most specific source first. All arithmetic is relative to a given `now`, and
//! wall-clock times are resolved in the right time zone (with DST) through `jiff`.

use http::HeaderMap;
use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde_json::Value;

/// What reset parsing needs besides the error itself.
#[derive(Clone)]
pub struct ResetContext {
    pub now_ms: i64,
    /// The machine's zone: CLIs print local times without a zone.
    pub local_tz: TimeZone,
    /// The provider's daily-reset zone (e.g. Gemini: America/Los_Angeles); UTC when unknown.
    pub day_reset: Option<TimeZone>,
}

impl ResetContext {
    pub fn new(now_ms: i64) -> Self {
        Self {
            now_ms,
            local_tz: TimeZone::system(),
            day_reset: None,
        }
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_millisecond(self.now_ms).unwrap_or(Timestamp::UNIX_EPOCH)
    }
}

/// The furthest ahead a reset may lie: weekly windows and billing periods are well within it;
/// "999999999h" is a garbled or hostile text, and a cooldown for ages would bench a key for good.
pub const MAX_AHEAD_MS: i64 = 366 * 86_400_000;

/// A reset instant a cooldown can use: `None` when it is implausibly far ahead. (One already
/// past is kept: the text said so, and a cooldown that ends at once is the right reading.)
fn plausible(at: Option<i64>, now_ms: i64) -> Option<i64> {
    at.filter(|t| *t <= now_ms.saturating_add(MAX_AHEAD_MS))
}

/// The reset a response's headers announce (see [`headers_raw`] for the forms).
pub fn from_headers(headers: &HeaderMap, now_ms: i64) -> Option<i64> {
    plausible(headers_raw(headers, now_ms), now_ms)
}

/// The reset a structured error body announces (see [`body_raw`]).
pub fn from_body(v: &Value, now_ms: i64) -> Option<i64> {
    plausible(body_raw(v, now_ms), now_ms)
}

/// The reset an error message's words announce (see [`text_raw`]).
pub fn from_text(text: &str, ctx: &ResetContext) -> Option<i64> {
    plausible(text_raw(text, ctx), ctx.now_ms)
}

/// Headers: `retry-after-ms`, `Retry-After` (seconds or HTTP date), OpenAI/Groq
/// `x-ratelimit-reset-*` durations, Anthropic `anthropic-ratelimit-*-reset` (RFC 3339) and
/// `anthropic-ratelimit-unified-reset` (Unix seconds).
fn headers_raw(headers: &HeaderMap, now_ms: i64) -> Option<i64> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Some(now_ms.saturating_add(ms.max(0.0) as i64));
    }
    if let Some(v) = get("retry-after") {
        if let Ok(secs) = v.parse::<f64>() {
            return Some(now_ms.saturating_add((secs.max(0.0) * 1000.0) as i64));
        }
        if let Ok(t) = httpdate::parse_http_date(v) {
            let ms = t
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(now_ms);
            return Some(ms.max(now_ms));
        }
    }
    if let Some(secs) = get("anthropic-ratelimit-unified-reset").and_then(|v| v.parse::<i64>().ok())
    {
        return Some(epoch_to_ms(secs));
    }
    let durations = [
        "x-ratelimit-reset-requests",
        "x-ratelimit-reset-tokens",
        "x-ratelimit-reset",
    ]
    .iter()
    .filter_map(|h| get(h).and_then(super::classified::parse_go_duration_ms))
    .max()
    .map(|ms| now_ms.saturating_add(ms));
    if durations.is_some() {
        return durations;
    }
    [
        "anthropic-ratelimit-requests-reset",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-input-tokens-reset",
        "anthropic-ratelimit-output-tokens-reset",
    ]
    .iter()
    .filter_map(|h| get(h).and_then(|v| v.parse::<Timestamp>().ok()))
    .map(|t| t.as_millisecond())
    .filter(|ms| *ms > now_ms)
    .max()
}

/// Seconds or milliseconds since the epoch, told apart by magnitude.
pub(crate) fn epoch_to_ms(n: i64) -> i64 {
    if n > 100_000_000_000 {
        n
    } else {
        n.saturating_mul(1000)
    }
}

/// Structured bodies: Gemini `RetryInfo.retryDelay`, `resets_at` / `resets_in_seconds`,
/// OpenRouter's `metadata.headers.X-RateLimit-Reset`.
fn body_raw(v: &Value, now_ms: i64) -> Option<i64> {
    let err = v.get("error").unwrap_or(v);
    if let Some(details) = err.get("details").and_then(Value::as_array) {
        for d in details {
            let retry_info = d
                .get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with("RetryInfo"));
            if retry_info {
                if let Some(ms) = d
                    .get("retryDelay")
                    .and_then(Value::as_str)
                    .and_then(super::classified::parse_go_duration_ms)
                {
                    return Some(now_ms.saturating_add(ms));
                }
            }
        }
    }
    for key in ["resets_in_seconds", "reset_in_seconds"] {
        if let Some(s) = err.get(key).and_then(Value::as_f64) {
            return Some(now_ms.saturating_add((s * 1000.0) as i64));
        }
    }
    if let Some(r) = err.get("resets_at") {
        if let Some(n) = r.as_i64() {
            return Some(epoch_to_ms(n));
        }
        if let Some(t) = r.as_str().and_then(|s| s.parse::<Timestamp>().ok()) {
            return Some(t.as_millisecond());
        }
    }
    let meta = err.pointer("/metadata/headers")?;
    let reset = meta
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-ratelimit-reset"))
        .map(|(_, v)| v)?;
    let n = reset
        .as_i64()
        .or_else(|| reset.as_str().and_then(|s| s.trim().parse().ok()))?;
    Some(epoch_to_ms(n))
}

/// Message text: durations ("try again in 1m26.4s", "retry after 20 seconds", "in 5 days 22
/// hours 11 minutes", "reset after 8h44m7s"), clock times with or without a zone ("resets 3pm
/// (America/New_York)", "try again at 11:51 PM"), dates ("try again at Jul 5th, 2026 8:19 PM",
/// "resets Dec 4, 8:56am (America/New_York)") and epochs ("usage limit reached|1767225600").
fn text_raw(text: &str, ctx: &ResetContext) -> Option<i64> {
    if let Some((_, tail)) = text.rsplit_once('|') {
        if let Ok(n) = tail.trim().parse::<i64>() {
            return Some(epoch_to_ms(n));
        }
    }
    let lower = text.to_ascii_lowercase();
    for marker in [
        "try again in ",
        "retry in ",
        "retry after ",
        "reset after ",
        "resets in ",
        "reset in ",
        "wait ",
    ] {
        if let Some(i) = lower.find(marker) {
            if let Some(ms) = parse_duration_words(&lower[i + marker.len()..]) {
                return Some(ctx.now_ms.saturating_add(ms));
            }
        }
    }
    for marker in [
        "try again at ",
        "resets at ",
        "reset at ",
        "resets ",
        "reset ",
    ] {
        let mut from = 0;
        while let Some(i) = lower[from..].find(marker) {
            let start = from + i + marker.len();
            if let Some(ms) = parse_when(&text[start..], ctx) {
                return Some(ms);
            }
            from = start;
        }
    }
    None
}

/// "2m59.52s", "120ms", "37.5s", "20 seconds", "5 days 22 hours 11 minutes", "8h44m7s".
fn parse_duration_words(s: &str) -> Option<i64> {
    let mut total = 0f64;
    let mut found = false;
    let mut rest = s.trim_start();
    loop {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_end == 0 {
            break;
        }
        let Ok(n) = rest[..num_end].trim_end_matches('.').parse::<f64>() else {
            break;
        };
        let after = rest[num_end..].trim_start();
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let factor = match &after[..unit_end] {
            "ms" | "millisecond" | "milliseconds" => 1.0,
            "s" | "sec" | "secs" | "second" | "seconds" => 1000.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000.0,
            "d" | "day" | "days" => 86_400_000.0,
            _ => break,
        };
        total += n * factor;
        found = true;
        rest = after[unit_end..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        rest = rest.strip_prefix("and ").unwrap_or(rest);
    }
    found.then(|| total.round() as i64)
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// A wall-clock instant such as "12:50am (America/Los_Angeles)", "Dec 4, 8:56am (…)",
/// "Dec 2nd, 2026 6:24 AM", "11:51 PM", "12pm", resolved to the next such instant after now.
/// Long because it is one small parser over the clause (month, day, year, time, meridiem,
/// zone) whose steps share the cursor.
fn parse_when(s: &str, ctx: &ResetContext) -> Option<i64> {
    // Stop at the end of the clause.
    let end = s
        .find(['·', '∙', '\n', '|'])
        .or_else(|| s.find(". "))
        .unwrap_or(s.len());
    let clause = s[..end].trim().trim_end_matches('.');
    let (clause, tz) = match (clause.find('('), clause.find(')')) {
        (Some(a), Some(b)) if b > a => {
            let tz = TimeZone::get(clause[a + 1..b].trim()).ok()?;
            (clause[..a].trim(), tz)
        }
        _ => (clause, ctx.local_tz.clone()),
    };
    let mut words: Vec<String> = clause
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    // Join "6:24" + "am" into one token.
    let mut i = 0;
    while i + 1 < words.len() {
        if (words[i + 1] == "am" || words[i + 1] == "pm")
            && words[i].chars().next()?.is_ascii_digit()
        {
            let merged = format!("{}{}", words[i], words[i + 1]);
            words[i] = merged;
            words.remove(i + 1);
        }
        i += 1;
    }
    let (mut month, mut day, mut year, mut time) = (None, None, None, None);
    for w in &words {
        if let Some(m) = MONTHS.iter().position(|m| w.starts_with(m)) {
            month = Some(m as i8 + 1);
        } else if let Some(t) = parse_clock(w) {
            time = Some(t);
        } else if let Ok(n) = w
            .trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse::<i16>()
        {
            if n > 31 {
                year = Some(n);
            } else if month.is_some() && day.is_none() {
                day = Some(n as i8);
            } else {
                return None;
            }
        } else if w == "at" || w == "on" {
            continue;
        } else {
            return None;
        }
    }
    let time = time?;
    let now = ctx.now().to_zoned_datetime(tz.clone());
    let candidate = |date: Date| -> Option<Timestamp> {
        let dt = DateTime::from_parts(date, time);
        tz.to_ambiguous_zoned_datetime(dt)
            .compatible()
            .ok()
            .map(|z| z.timestamp())
    };
    let ts = match (month, day) {
        (Some(m), Some(d)) => match year {
            Some(y) => candidate(Date::new(y, m, d).ok()?)?,
            // No year: the next such date after now (for 29 Feb, up to eight years on).
            None => (now.year()..now.year().saturating_add(9))
                .filter_map(|y| Date::new(y, m, d).ok())
                .filter_map(candidate)
                .find(|t| *t > ctx.now())?,
        },
        (None, None) => {
            let today = now.date();
            let t = candidate(today)?;
            if t > ctx.now() {
                t
            } else {
                candidate(today.tomorrow().ok()?)?
            }
        }
        _ => return None,
    };
    Some(ts.as_millisecond())
}

/// "12:50am", "12pm", "6:24am", "23:51", "8:19pm".
fn parse_clock(w: &str) -> Option<Time> {
    let (body, pm) = if let Some(b) = w.strip_suffix("am") {
        (b, Some(false))
    } else if let Some(b) = w.strip_suffix("pm") {
        (b, Some(true))
    } else {
        (w, None)
    };
    let (h, m) = match body.split_once(':') {
        Some((h, m)) => (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?),
        None if pm.is_some() => (body.parse::<i8>().ok()?, 0),
        None => return None,
    };
    let h = match pm {
        Some(true) if h < 12 => h + 12,
        Some(false) if h == 12 => 0,
        Some(_) if !(1..=12).contains(&h) => return None,
        _ => h,
    };
    Time::new(h, m, 0, 0).ok()
}

/// "You will regain access on 2027-01-01 at 00:00 UTC." (a spending limit the account set).
pub fn regain_access(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let i = lower.find("regain access on ")? + "regain access on ".len();
    let rest = &text[i..];
    let date = rest.get(..10)?.parse::<Date>().ok()?;
    let after = rest[10..].trim_start();
    let time = after
        .strip_prefix("at ")
        .and_then(|t| {
            let hm = t.split_whitespace().next()?;
            let (h, m) = hm.split_once(':')?;
            Time::new(h.parse().ok()?, m.parse().ok()?, 0, 0).ok()
        })
        .unwrap_or(Time::midnight());
    TimeZone::UTC
        .to_ambiguous_zoned_datetime(DateTime::from_parts(date, time))
        .compatible()
        .ok()
        .map(|z| z.timestamp().as_millisecond())
}

/// Window words: per-minute limits reset within a minute, per-day limits at the provider's next
/// daily reset (midnight in its zone, DST-correct).
pub fn from_window(text: &str, ctx: &ResetContext) -> Option<i64> {
    let t = text.to_ascii_lowercase();
    let per_day = [
        "perday", "per day", "per_day", "daily", "(rpd)", "(tpd)", "per-day", "rpd", "tpd",
    ];
    let per_minute = [
        "perminute",
        "per minute",
        "per_minute",
        "(rpm)",
        "(tpm)",
        "per min",
        "rpm",
        "tpm",
    ];
    if per_day.iter().any(|w| t.contains(w)) {
        return next_midnight(ctx);
    }
    if per_minute.iter().any(|w| t.contains(w)) {
        return Some(ctx.now_ms + 60_000);
    }
    None
}

/// The next local midnight in the provider's daily-reset zone (UTC when none is declared).
pub fn next_midnight(ctx: &ResetContext) -> Option<i64> {
    let tz = ctx.day_reset.clone().unwrap_or(TimeZone::UTC);
    let now = ctx.now().to_zoned_datetime(tz.clone());
    let tomorrow = now.date().tomorrow().ok()?;
    let z = tz
        .to_ambiguous_zoned_datetime(tomorrow.to_datetime(Time::midnight()))
        .compatible()
        .ok()?;
    Some(z.timestamp().as_millisecond())
}
