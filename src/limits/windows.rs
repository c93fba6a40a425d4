//! Usage windows: how much of each limit window an account has used and when it resets, read
//! from every signal Baton already sees — Anthropic's unified subscription headers, the Codex
//! backend's `x-codex-primary-*` / `x-codex-secondary-*` headers and `usage_limit_reached`
//! body, Claude Code's `rate_limit_event` lines, API keys' `x-ratelimit-*` /
//! `anthropic-ratelimit-*` headers — and from the local counters of declared limits.
//!
//! Windows are told apart by their length, never by position: a Codex "primary" window may be
//! the weekly one on an account that has no 5-hour window.

use http::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::reset::epoch_to_ms;

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// What the provider says about a window now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum WindowStatus {
    #[default]
    Allowed,
    /// Allowed, but close to the limit (Anthropic's `allowed_warning`).
    Warning,
    /// Spent: requests are refused until the reset.
    Rejected,
}

impl WindowStatus {
    /// The status a share used implies when the provider names none: spent at 100 %.
    pub fn of_share(used: f64) -> Self {
        if used >= 1.0 {
            WindowStatus::Rejected
        } else {
            WindowStatus::Allowed
        }
    }
}

/// One limit window of one account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    /// Stable id: `5h`, `7d`, `7d_opus`, `requests`, `tokens`, `declared_rpd`…
    pub id: String,
    /// For people: "5 h", "7 d", "7 d Opus", "1 min requests".
    pub label: String,
    /// The window's length, where the provider says or it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_ms: Option<i64>,
    /// Share used, 0..=1 (`None`: only the status is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resets_at_ms: Option<i64>,
    #[serde(default)]
    pub status: WindowStatus,
    /// Where the reading came from: `anthropic`, `codex`, `claude-cli`, `headers`, `declared`.
    pub source: String,
}

impl Window {
    /// Used share for comparisons: a spent window counts as full.
    pub fn used_or_status(&self) -> f64 {
        match (self.status, self.used) {
            (WindowStatus::Rejected, _) => 1.0,
            (_, Some(u)) => u,
            (WindowStatus::Warning, None) => 0.9,
            (WindowStatus::Allowed, None) => 0.0,
        }
    }
}

/// "5 h", "7 d", "1 min", "30 s": a length as people say it.
pub fn length_label(ms: i64) -> String {
    if ms >= DAY && ms % DAY == 0 {
        format!("{} d", ms / DAY)
    } else if ms >= HOUR && ms % HOUR == 0 {
        format!("{} h", ms / HOUR)
    } else if ms >= MINUTE && ms % MINUTE == 0 {
        format!("{} min", ms / MINUTE)
    } else {
        format!("{} s", (ms / 1000).max(1))
    }
}

/// A window's id from its length (`5h`, `7d`, `1m`…), so the same window has the same id
/// whichever header family reported it.
pub fn length_id(ms: i64) -> String {
    if ms >= DAY && ms % DAY == 0 {
        format!("{}d", ms / DAY)
    } else if ms >= HOUR && ms % HOUR == 0 {
        format!("{}h", ms / HOUR)
    } else {
        format!("{}m", (ms / MINUTE).max(1))
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

fn number(headers: &HeaderMap, name: &str) -> Option<f64> {
    header(headers, name)?
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
}

/// A Claude subscription answer drawn from paid extra usage ("overage"), as Claude Code itself
/// reads it: `anthropic-ratelimit-unified-overage-in-use: true`, or the unified status
/// `rejected` (the window is spent) while `…-overage-status` is `allowed` or
/// `allowed_warning` (so the request was served, and billed, past it). Returns when the
/// spent window resets (`anthropic-ratelimit-unified-reset`, Unix seconds → ms), if stated.
pub fn overage_in_use(headers: &HeaderMap) -> Option<Option<i64>> {
    let in_use = header(headers, "anthropic-ratelimit-unified-overage-in-use") == Some("true");
    let rejected = header(headers, "anthropic-ratelimit-unified-status") == Some("rejected");
    let overage_allowed = matches!(
        header(headers, "anthropic-ratelimit-unified-overage-status"),
        Some("allowed" | "allowed_warning")
    );
    (in_use || (rejected && overage_allowed))
        .then(|| number(headers, "anthropic-ratelimit-unified-reset").map(|s| (s * 1000.0) as i64))
}

/// Anthropic's claim abbreviations (`5h`, `7d`, `7d_opus`) and names (`five_hour`,
/// `seven_day_opus`) to a window: (id, length, scope).
fn anthropic_window(claim: &str) -> Option<(String, i64, Option<String>)> {
    let (len, rest) = if let Some(r) = claim
        .strip_prefix("five_hour")
        .or_else(|| claim.strip_prefix("5h"))
    {
        (5 * HOUR, r)
    } else if let Some(r) = claim
        .strip_prefix("seven_day")
        .or_else(|| claim.strip_prefix("7d"))
    {
        (7 * DAY, r)
    } else {
        // `overage` is paid credit, not a window.
        return None;
    };
    let scope = rest.trim_start_matches('_');
    let scope = match scope {
        "" => None,
        "oi" | "overage_included" => Some("included".to_string()),
        s => Some(s.to_string()),
    };
    let id = match &scope {
        None => length_id(len),
        Some(s) => format!("{}_{s}", length_id(len)),
    };
    Some((id, len, scope))
}

fn scoped_label(len: i64, scope: Option<&str>) -> String {
    match scope {
        None => length_label(len),
        Some(s) => {
            let mut c = s.chars();
            let cap: String = c
                .next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default();
            format!("{} {cap}", length_label(len))
        }
    }
}

fn status_word(s: &str) -> WindowStatus {
    match s {
        "rejected" => WindowStatus::Rejected,
        "allowed_warning" | "warning" => WindowStatus::Warning,
        _ => WindowStatus::Allowed,
    }
}

/// A utilization as a share: current Anthropic headers send fractions (0.72), other signals
/// percentages (72); anything outside 0..=1 after that is clamped.
fn share(u: f64, percent: bool) -> f64 {
    let u = if percent { u / 100.0 } else { u };
    u.clamp(0.0, 1.0)
}

/// Anthropic's unified subscription headers (what Claude Code itself reads):
/// `anthropic-ratelimit-unified-{5h,7d,7d_oi,…}-utilization` / `-reset` (Unix seconds) per
/// window, and `-status`, `-reset`, `-representative-claim` for the window that decides now.
fn anthropic_unified(headers: &HeaderMap, out: &mut Vec<Window>) {
    const PREFIX: &str = "anthropic-ratelimit-unified-";
    let status = header(headers, "anthropic-ratelimit-unified-status").map(status_word);
    let claim = header(headers, "anthropic-ratelimit-unified-representative-claim");
    for (name, _) in headers.iter() {
        let Some(abbr) = name
            .as_str()
            .strip_prefix(PREFIX)
            .and_then(|r| r.strip_suffix("-utilization"))
        else {
            continue;
        };
        let Some((id, len, scope)) = anthropic_window(abbr) else {
            continue;
        };
        let used = number(headers, name.as_str()).map(|u| share(u, u > 1.0));
        let reset =
            number(headers, &format!("{PREFIX}{abbr}-reset")).map(|s| epoch_to_ms(s as i64));
        let own = header(headers, &format!("{PREFIX}{abbr}-status")).map(status_word);
        let claimed = claim.and_then(anthropic_window).is_some_and(|c| c.0 == id);
        let st = own
            .or(if claimed { status } else { None })
            .unwrap_or_else(|| used.map_or(WindowStatus::Allowed, WindowStatus::of_share));
        out.push(Window {
            label: scoped_label(len, scope.as_deref()),
            id,
            length_ms: Some(len),
            used,
            resets_at_ms: reset,
            status: st,
            source: "anthropic".into(),
        });
    }
    // The deciding window without per-window numbers (a cap on a model-specific weekly window).
    if let (Some(c), Some(st)) = (claim.and_then(anthropic_window), status) {
        if !out.iter().any(|w| w.id == c.0) {
            out.push(Window {
                label: scoped_label(c.1, c.2.as_deref()),
                id: c.0,
                length_ms: Some(c.1),
                used: (st == WindowStatus::Rejected).then_some(1.0),
                resets_at_ms: number(headers, "anthropic-ratelimit-unified-reset")
                    .map(|s| epoch_to_ms(s as i64)),
                status: st,
                source: "anthropic".into(),
            });
        }
    }
}

/// The Codex backend's `x-codex-{primary,secondary}-used-percent` / `-window-minutes` /
/// `-reset-at` (Unix seconds; older servers `-reset-after-seconds`).
fn codex(headers: &HeaderMap, now_ms: i64, out: &mut Vec<Window>) {
    for family in ["primary", "secondary"] {
        let h = |what: &str| number(headers, &format!("x-codex-{family}-{what}"));
        let Some(pct) = h("used-percent") else {
            continue;
        };
        let len = h("window-minutes")
            .filter(|m| *m > 0.0)
            .map(|m| m as i64 * MINUTE);
        let reset = h("reset-at").map(|s| epoch_to_ms(s as i64)).or_else(|| {
            h("reset-after-seconds").map(|s| now_ms.saturating_add((s.max(0.0) * 1000.0) as i64))
        });
        let used = share(pct, true);
        out.push(Window {
            id: len.map(length_id).unwrap_or_else(|| family.to_string()),
            label: len.map(length_label).unwrap_or_else(|| family.to_string()),
            length_ms: len,
            used: Some(used),
            resets_at_ms: reset,
            status: WindowStatus::of_share(used),
            source: "codex".into(),
        });
    }
}

/// API keys: OpenAI-style `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (Groq,
/// OpenRouter, Mistral…) and Anthropic's `anthropic-ratelimit-{requests,tokens,…}-*`.
/// Their length is not sent: Anthropic's are per minute; the others are named by what they
/// count, with the reset they announce.
fn api_key(headers: &HeaderMap, now_ms: i64, out: &mut Vec<Window>) {
    for what in ["requests", "tokens"] {
        let (Some(limit), Some(left)) = (
            number(headers, &format!("x-ratelimit-limit-{what}")),
            number(headers, &format!("x-ratelimit-remaining-{what}")),
        ) else {
            continue;
        };
        if limit <= 0.0 {
            continue;
        }
        let reset = header(headers, &format!("x-ratelimit-reset-{what}"))
            .and_then(super::classified::parse_go_duration_ms)
            .map(|ms| now_ms.saturating_add(ms));
        out.push(counted(what.into(), what.into(), None, limit, left, reset));
    }
    for what in ["requests", "tokens", "input-tokens", "output-tokens"] {
        let (Some(limit), Some(left)) = (
            number(headers, &format!("anthropic-ratelimit-{what}-limit")),
            number(headers, &format!("anthropic-ratelimit-{what}-remaining")),
        ) else {
            continue;
        };
        if limit <= 0.0 {
            continue;
        }
        let reset = header(headers, &format!("anthropic-ratelimit-{what}-reset"))
            .and_then(|v| v.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_millisecond());
        let words = what.replace('-', " ");
        out.push(counted(
            format!("1m_{what}"),
            format!("1 min {words}"),
            Some(MINUTE),
            limit,
            left,
            reset,
        ));
    }
}

fn counted(
    id: String,
    label: String,
    length_ms: Option<i64>,
    limit: f64,
    left: f64,
    resets_at_ms: Option<i64>,
) -> Window {
    let used = (1.0 - left / limit).clamp(0.0, 1.0);
    Window {
        id,
        label,
        length_ms,
        used: Some(used),
        resets_at_ms,
        status: WindowStatus::of_share(used),
        source: "headers".into(),
    }
}

/// Which families of limit headers an answer carries: OpenAI's and the compatible hosts'
/// `x-ratelimit-*` and Anthropic's per-key `anthropic-ratelimit-*` (keyed), Anthropic's
/// subscription `anthropic-ratelimit-unified-*`, the Codex backend's `x-codex-*`. One pass over
/// the names: most answers carry none of these, and pay no more than that.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimitHeaders {
    unified: bool,
    codex: bool,
    keyed: bool,
}

impl LimitHeaders {
    pub fn scan(headers: &HeaderMap) -> Self {
        let mut found = Self::default();
        for name in headers.keys() {
            let n = name.as_str();
            if n.starts_with("anthropic-ratelimit-unified-") {
                found.unified = true;
            } else if n.starts_with("x-codex-") {
                found.codex = true;
            } else if n.starts_with("x-ratelimit-") || n.starts_with("anthropic-ratelimit-") {
                found.keyed = true;
            }
        }
        found
    }

    /// Whether any limit header is there.
    pub fn any(self) -> bool {
        self.unified || self.codex || self.keyed
    }

    /// Every window the headers describe (empty when they say nothing about limits).
    pub fn windows(self, headers: &HeaderMap, now_ms: i64) -> Vec<Window> {
        let mut out = Vec::new();
        if self.unified {
            anthropic_unified(headers, &mut out);
        }
        if self.codex {
            codex(headers, now_ms, &mut out);
        }
        if out.is_empty() && self.keyed {
            api_key(headers, now_ms, &mut out);
        }
        out
    }
}

/// Every window a response's headers describe (empty when they say nothing about limits).
pub fn from_headers(headers: &HeaderMap, now_ms: i64) -> Vec<Window> {
    LimitHeaders::scan(headers).windows(headers, now_ms)
}

/// Claude Code's `rate_limit_event` line (`{"type":"rate_limit_event","rate_limit_info":
/// {"status","resetsAt","rateLimitType","utilization"}}`).
pub fn from_cli_event(v: &Value) -> Option<Window> {
    if v.get("type").and_then(Value::as_str) != Some("rate_limit_event") {
        return None;
    }
    let info = v.get("rate_limit_info")?;
    let kind = info.get("rateLimitType").and_then(Value::as_str)?;
    let (id, len, scope) = anthropic_window(kind)?;
    let status = info
        .get("status")
        .and_then(Value::as_str)
        .map(status_word)
        .unwrap_or_default();
    let used = info
        .get("utilization")
        .and_then(Value::as_f64)
        .map(|u| share(u, u > 1.0))
        .or((status == WindowStatus::Rejected).then_some(1.0));
    Some(Window {
        label: scoped_label(len, scope.as_deref()),
        id,
        length_ms: Some(len),
        used,
        resets_at_ms: info
            .get("resetsAt")
            .and_then(Value::as_f64)
            .map(|s| epoch_to_ms(s as i64)),
        status,
        source: "claude-cli".into(),
    })
}

/// The window that decides now: a spent one (the one back last, since every spent window must
/// reset), else the fullest (the longer on a tie: it takes longer to come back).
pub fn binding(windows: &[Window]) -> Option<&Window> {
    let rejected = windows
        .iter()
        .filter(|w| w.status == WindowStatus::Rejected)
        .max_by_key(|w| w.resets_at_ms.unwrap_or(i64::MAX));
    rejected.or_else(|| {
        windows.iter().max_by(|a, b| {
            a.used_or_status()
                .total_cmp(&b.used_or_status())
                .then(a.length_ms.unwrap_or(0).cmp(&b.length_ms.unwrap_or(0)))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overage signals as Claude Code 2.1.197 reads them (its binary names the headers):
    /// in use when it says so, or when the window is rejected but the overage allowed; not
    /// when the overage is rejected too (then the request itself fails: a cap) or absent.
    #[test]
    fn an_answer_from_paid_extra_usage_is_told_from_the_headers() {
        let h = |pairs: &[(&'static str, &'static str)]| {
            let mut m = HeaderMap::new();
            for (k, v) in pairs {
                m.insert(*k, http::HeaderValue::from_static(v));
            }
            m
        };
        let reset = ("anthropic-ratelimit-unified-reset", "1796000000");
        assert_eq!(
            overage_in_use(&h(&[
                ("anthropic-ratelimit-unified-overage-in-use", "true"),
                reset
            ])),
            Some(Some(1_796_000_000_000))
        );
        for status in ["allowed", "allowed_warning"] {
            let got = overage_in_use(&h(&[
                ("anthropic-ratelimit-unified-status", "rejected"),
                ("anthropic-ratelimit-unified-overage-status", status),
            ]));
            assert_eq!(got, Some(None), "{status}");
        }
        for quiet in [
            h(&[("anthropic-ratelimit-unified-status", "allowed"), reset]),
            h(&[
                ("anthropic-ratelimit-unified-status", "rejected"),
                ("anthropic-ratelimit-unified-overage-status", "rejected"),
            ]),
            h(&[("anthropic-ratelimit-unified-overage-in-use", "false")]),
            HeaderMap::new(),
        ] {
            assert_eq!(overage_in_use(&quiet), None, "{quiet:?}");
        }
    }

    #[test]
    fn limit_headers_are_found_by_family_and_only_then() {
        let any = |pairs: &[(&'static str, &'static str)]| LimitHeaders::scan(&h(pairs)).any();
        assert!(any(&[("x-ratelimit-remaining-requests", "9")]));
        assert!(any(&[(
            "anthropic-ratelimit-unified-5h-utilization",
            "0.5"
        )]));
        assert!(any(&[("x-codex-primary-used-percent", "40")]));
        assert!(!any(&[
            ("content-type", "application/json"),
            ("retry-after", "3"),
            ("x-request-id", "r1"),
        ]));
    }

    use crate::limits::classified::headers as h;

    #[test]
    fn lengths_name_windows() {
        assert_eq!(length_label(5 * HOUR), "5 h");
        assert_eq!(length_label(7 * DAY), "7 d");
        assert_eq!(length_label(MINUTE), "1 min");
        assert_eq!(length_id(300 * MINUTE), "5h");
        assert_eq!(length_id(10_080 * MINUTE), "7d");
    }

    #[test]
    fn a_codex_primary_window_that_is_weekly_is_the_weekly_window() {
        let w = from_headers(
            &h(&[
                ("x-codex-primary-used-percent", "40"),
                ("x-codex-primary-window-minutes", "10080"),
                ("x-codex-primary-reset-at", "1796000000"),
            ]),
            0,
        );
        assert_eq!(w.len(), 1);
        assert_eq!((w[0].id.as_str(), w[0].label.as_str()), ("7d", "7 d"));
        assert_eq!(w[0].used, Some(0.4));
        assert_eq!(w[0].resets_at_ms, Some(1_796_000_000_000));
    }

    #[test]
    fn the_spent_window_binds_even_when_another_is_fuller_looking() {
        let w = from_headers(
            &h(&[
                ("anthropic-ratelimit-unified-status", "rejected"),
                (
                    "anthropic-ratelimit-unified-representative-claim",
                    "seven_day",
                ),
                ("anthropic-ratelimit-unified-5h-utilization", "0.3"),
                ("anthropic-ratelimit-unified-5h-reset", "1796000000"),
                ("anthropic-ratelimit-unified-7d-utilization", "1.0"),
                ("anthropic-ratelimit-unified-7d-reset", "1796400000"),
            ]),
            0,
        );
        assert_eq!(binding(&w).map(|b| b.id.as_str()), Some("7d"));
        assert_eq!(
            w.iter().find(|x| x.id == "5h").map(|x| x.status),
            Some(WindowStatus::Allowed)
        );
    }
}
