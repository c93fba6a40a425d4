//! Proactive quota awareness: a 0..1 score per provider key from the remaining/limit headers
//! providers send on every answer (and from local counters for limits declared in the config), so
//! `auto` can move away from a nearly exhausted key before it ever answers 429.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use http::HeaderMap;
use serde::{Deserialize, Serialize};

/// A header reading stays trusted this long (windows are usually a minute).
const FRESH_MS: i64 = 60_000;
/// Below this, a key is demoted behind the others.
pub const DEMOTE_BELOW: f64 = 0.05;

/// Limits a provider declares for each key (free tiers), counted locally.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeclaredLimits {
    /// Requests per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Requests per day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpd: Option<u32>,
    /// Tokens (prompt + completion) per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u32>,
}

#[derive(Debug, Default)]
struct KeyQuota {
    header_score: Option<(f64, i64)>,
    sent: VecDeque<i64>,
    tokens: VecDeque<(i64, u64)>,
    /// Every instance's counts, as Redis last answered (with shared state).
    shared: Option<SharedCounts>,
}

/// Requests this minute and this UTC day, and tokens this minute, across all instances.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SharedCounts {
    pub minute_start: i64,
    pub minute_requests: u64,
    pub minute_tokens: u64,
    pub day_start: i64,
    pub day_requests: u64,
}

/// Quota state of one provider, by key id ("" for a keyless provider), and whether anything
/// was ever written there: `auto` asks every provider on every request, and 200 of them made a
/// lock each a request's 3 % (entries are never removed, so once set it stays true).
#[derive(Debug, Default)]
pub struct Quota(Mutex<HashMap<String, KeyQuota>>, AtomicBool);

impl Quota {
    /// The key's entry, noting that something is known.
    fn entry<'m>(&self, m: &'m mut HashMap<String, KeyQuota>, key: &str) -> &'m mut KeyQuota {
        self.1.store(true, Ordering::Release);
        m.entry(key.to_string()).or_default()
    }

    /// Reads remaining/limit headers from an answer.
    pub fn observe(&self, key: &str, headers: &HeaderMap, now: i64) {
        if let Some(score) = header_score(headers) {
            if let Ok(mut m) = self.0.lock() {
                self.entry(&mut m, key).header_score = Some((score, now));
            }
        }
    }

    /// Whether nothing is known of any key: no limit headers read, nothing counted.
    pub fn is_empty(&self) -> bool {
        !self.1.load(Ordering::Acquire)
    }

    /// Whether anything is declared to count.
    pub fn counts(declared: &DeclaredLimits) -> bool {
        declared.rpm.is_some() || declared.rpd.is_some() || declared.tpm.is_some()
    }

    /// Counts a request sent with `key` against the declared limits.
    pub fn sent(&self, key: &str, now: i64, declared: &DeclaredLimits) {
        if declared.rpm.is_none() && declared.rpd.is_none() && declared.tpm.is_none() {
            return;
        }
        if let Ok(mut m) = self.0.lock() {
            let q = self.entry(&mut m, key);
            q.sent.push_back(now);
            // A quota day lasts up to 25 hours (DST).
            while q.sent.front().is_some_and(|t| now - t > 26 * 3_600_000) {
                q.sent.pop_front();
            }
        }
    }

    /// Counts the tokens an answer used against a declared `tpm`.
    pub fn tokens(&self, key: &str, now: i64, n: u64, declared: &DeclaredLimits) {
        if declared.tpm.is_none() || n == 0 {
            return;
        }
        if let Ok(mut m) = self.0.lock() {
            let q = self.entry(&mut m, key);
            q.tokens.push_back((now, n));
            while q.tokens.front().is_some_and(|(t, _)| now - t > 60_000) {
                q.tokens.pop_front();
            }
        }
    }

    /// Records what all instances together have used (from the shared store); readings
    /// arriving out of order never lower a count within the same window.
    pub fn shared(&self, key: &str, c: SharedCounts) {
        if let Ok(mut m) = self.0.lock() {
            let q = self.entry(&mut m, key);
            let mut next = c;
            if let Some(old) = q.shared {
                if old.minute_start == c.minute_start {
                    next.minute_requests = c.minute_requests.max(old.minute_requests);
                    next.minute_tokens = c.minute_tokens.max(old.minute_tokens);
                }
                if old.day_start == c.day_start {
                    next.day_requests = c.day_requests.max(old.day_requests);
                }
            }
            q.shared = Some(next);
        }
    }

    /// The key's score (1 = plenty left, 0 = exhausted); `None` when nothing is known.
    /// `day_start` is the start of the provider's quota day (`ProviderEntry::quota_day`): a
    /// declared `rpd` counts the requests sent since then, as the provider does.
    pub fn score(
        &self,
        key: &str,
        now: i64,
        declared: &DeclaredLimits,
        day_start: i64,
    ) -> Option<f64> {
        let m = self.0.lock().ok()?;
        let q = m.get(key)?;
        let mut score: Option<f64> = q
            .header_score
            .filter(|(_, at)| now - at < FRESH_MS)
            .map(|(s, _)| s);
        for (limit, used) in q.used(now, declared, day_start).against(declared) {
            let s = (1.0 - used as f64 / f64::from(limit)).max(0.0);
            score = Some(score.map_or(s, |x| x.min(s)));
        }
        score
    }

    /// The declared limits as usage windows (local counts, and every instance's with shared
    /// state): `rpm` and `tpm` over the last minute, `rpd` over the provider's quota day
    /// (`day` = its start and end).
    pub fn declared_windows(
        &self,
        key: &str,
        now: i64,
        declared: &DeclaredLimits,
        day: (i64, i64),
    ) -> Vec<super::windows::Window> {
        let Ok(m) = self.0.lock() else {
            return Vec::new();
        };
        let used = m
            .get(key)
            .map_or_else(Used::default, |q| q.used(now, declared, day.0));
        let shape = [
            ("rpm", "1 min requests", 60_000, now + 60_000),
            ("tpm", "1 min tokens", 60_000, now + 60_000),
            ("rpd", "day requests", day.1 - day.0, day.1),
        ];
        let limits = [declared.rpm, declared.tpm, declared.rpd];
        let counts = [used.minute_requests, used.minute_tokens, used.day_requests];
        shape
            .into_iter()
            .zip(limits.into_iter().zip(counts))
            .filter_map(|((id, label, len, reset), (limit, used))| {
                let limit = limit.filter(|l| *l > 0)?;
                let share = (used as f64 / f64::from(limit)).clamp(0.0, 1.0);
                Some(super::windows::Window {
                    id: id.into(),
                    label: label.into(),
                    length_ms: Some(len),
                    used: Some(share),
                    resets_at_ms: Some(reset),
                    status: super::windows::WindowStatus::of_share(share),
                    source: "declared".into(),
                })
            })
            .collect()
    }
}

/// What a key has used of its declared limits, here or (with shared state) across all
/// instances, whichever is more: requests in the last minute (a sliding minute here, the
/// current minute across instances), tokens in the last minute, requests since the provider's
/// quota day began. Only the declared ones are counted (the rest stay 0).
#[derive(Debug, Default, Clone, Copy)]
struct Used {
    minute_requests: u64,
    day_requests: u64,
    minute_tokens: u64,
}

impl Used {
    /// `(limit, used)` for each declared limit.
    fn against(self, d: &DeclaredLimits) -> impl Iterator<Item = (u32, u64)> {
        [
            (d.rpm, self.minute_requests),
            (d.rpd, self.day_requests),
            (d.tpm, self.minute_tokens),
        ]
        .into_iter()
        .filter_map(|(limit, used)| limit.filter(|l| *l > 0).map(|l| (l, used)))
    }
}

impl KeyQuota {
    fn used(&self, now: i64, declared: &DeclaredLimits, day_start: i64) -> Used {
        let shared = self.shared.unwrap_or_default();
        let this_minute = shared.minute_start == crate::clock::minute_start(now);
        let theirs = |same: bool, n: u64| if same { n } else { 0 };
        let sent_since = |since: i64| self.sent.iter().filter(|t| **t > since).count() as u64;
        let mut u = Used::default();
        if declared.rpm.is_some() {
            u.minute_requests =
                sent_since(now - 60_000).max(theirs(this_minute, shared.minute_requests));
        }
        if declared.rpd.is_some() {
            u.day_requests = sent_since(day_start - 1)
                .max(theirs(shared.day_start == day_start, shared.day_requests));
        }
        if declared.tpm.is_some() {
            let mine: u64 = self
                .tokens
                .iter()
                .filter(|(t, _)| now - t < 60_000)
                .map(|(_, n)| n)
                .sum();
            u.minute_tokens = mine.max(theirs(this_minute, shared.minute_tokens));
        }
        u
    }
}

fn num(headers: &HeaderMap, name: &str) -> Option<f64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

/// `(remaining, limit)` header pairs, spelled out so that the per-answer check allocates nothing.
const PAIRS: &[(&str, &str)] = &[
    (
        "x-ratelimit-remaining-requests",
        "x-ratelimit-limit-requests",
    ),
    ("x-ratelimit-remaining-tokens", "x-ratelimit-limit-tokens"),
    (
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-limit",
    ),
    (
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-limit",
    ),
    (
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-limit",
    ),
    (
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-limit",
    ),
];
const UTILIZATION: &[&str] = &[
    "anthropic-ratelimit-unified-5h-utilization",
    "anthropic-ratelimit-unified-7d-utilization",
];

/// The lowest remaining/limit ratio among the headers present.
pub fn header_score(headers: &HeaderMap) -> Option<f64> {
    let mut score: Option<f64> = None;
    let mut take = |s: f64| score = Some(score.map_or(s, |x: f64| x.min(s)).clamp(0.0, 1.0));
    for (remaining, limit) in PAIRS {
        if let (Some(r), Some(l)) = (num(headers, remaining), num(headers, limit)) {
            if l > 0.0 {
                take(r / l);
            }
        }
    }
    for name in UTILIZATION {
        if let Some(u) = num(headers, name) {
            // Sent as a fraction (0.93) by current versions; accept percentages too.
            let u = if u > 1.0 { u / 100.0 } else { u };
            take(1.0 - u);
        }
    }
    if let Some(status) = headers
        .get("anthropic-ratelimit-unified-status")
        .and_then(|v| v.to_str().ok())
    {
        match status {
            "allowed_warning" => take(DEMOTE_BELOW / 2.0),
            "rejected" => take(0.0),
            _ => {}
        }
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::limits::classified::headers as h;

    #[test]
    fn scores_from_headers_and_counters() {
        let s = header_score(&h(&[
            ("x-ratelimit-remaining-requests", "2"),
            ("x-ratelimit-limit-requests", "100"),
            ("x-ratelimit-remaining-tokens", "9000"),
            ("x-ratelimit-limit-tokens", "10000"),
        ]));
        assert_eq!(s, Some(0.02));
        assert_eq!(
            header_score(&h(&[(
                "anthropic-ratelimit-unified-status",
                "allowed_warning"
            )])),
            Some(0.025)
        );
        assert_eq!(
            header_score(&h(&[("anthropic-ratelimit-unified-5h-utilization", "0.5")])),
            Some(0.5)
        );
        assert_eq!(header_score(&HeaderMap::new()), None);

        let q = Quota::default();
        let declared = DeclaredLimits {
            rpm: Some(4),
            rpd: None,
            tpm: None,
        };
        for t in 0..3 {
            q.sent("k", t, &declared);
        }
        assert_eq!(q.score("k", 10, &declared, 0), Some(0.25));
        assert_eq!(
            q.score("k", 70_000, &declared, 0),
            Some(1.0),
            "the minute has passed"
        );
        q.observe(
            "k",
            &h(&[
                ("x-ratelimit-remaining-requests", "1"),
                ("x-ratelimit-limit-requests", "10"),
            ]),
            0,
        );
        assert_eq!(q.score("k", 10, &declared, 0), Some(0.1));
        assert_eq!(
            q.score("k", 61_000, &declared, 0),
            Some(1.0),
            "stale header readings expire"
        );
    }
}
