//! How fast each provider answers each model right now, from live traffic: a decaying average
//! of the time to the first token (a whole answer's first token is the answer) and of tokens
//! per second, per provider and model. A route (or `auto`) with `order: "speed"` puts the
//! fastest first among candidates of equal priority; one not measured yet goes before the
//! measured ones once, so every candidate gets measured. Usage windows still decide first:
//! a reserve or a forecast cap is never given up for speed (`forecast::plan` runs after).

use std::collections::HashMap;
use std::sync::Mutex;

use super::snapshot::Target;
use crate::limits::Outcome;
use crate::store::LogRow;

/// The weight of the newest answer in the averages: the last ten or so answers count.
const ALPHA: f64 = 0.2;
/// Most (provider, model) pairs remembered.
const MAX_ENTRIES: usize = 4096;
/// The latest times to first token kept per pair, for its 95th percentile (a hedge's wait).
const RECENT: usize = 20;
/// Answers measured before the percentile is trusted.
const MIN_FOR_PERCENTILE: usize = 10;

/// One provider and model's recent speed.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Speed {
    /// Time to the first token, ms (decaying average).
    pub ttft_ms: f64,
    /// Answer tokens per second after the first (decaying average), when answers had tokens.
    pub tokens_per_s: Option<f64>,
    /// Answers measured.
    pub samples: u64,
}

/// One pair's averages and its latest times to first token (a ring).
#[derive(Debug, Clone, Copy)]
struct Entry {
    speed: Speed,
    recent: [u32; RECENT],
    next: usize,
}

impl Entry {
    fn new(speed: Speed) -> Self {
        Self {
            speed,
            recent: [0; RECENT],
            next: 0,
        }
    }

    fn note(&mut self, ttft_ms: u64) {
        self.recent[self.next % RECENT] = ttft_ms.min(u32::MAX as u64) as u32;
        self.next += 1;
    }
}

/// Every provider and model's recent speed: provider -> model, nested so that a request's
/// update looks up by `&str` and allocates nothing once the pair is known (foldhash, not
/// SipHash: two lookups a request).
#[derive(Debug, Default)]
pub struct Speeds(Mutex<HashMap<String, Models, foldhash::fast::RandomState>>);

type Models = HashMap<String, Entry, foldhash::fast::RandomState>;

impl Speeds {
    /// Notes a finished request: its serving attempt's time to first token (its own, from
    /// when it was sent) and tokens per second; an attempt cancelled because a hedge answered
    /// first adds how long it had waited, a time to first token at least that long.
    pub fn observe(&self, row: &LogRow) {
        for a in row.attempts.iter().filter(|a| a.class == Outcome::Outrun) {
            self.note(&a.provider, &a.model, a.latency_ms, None);
        }
        if row.status >= 400 {
            return;
        }
        let (Some(provider), Some(model), Some(ttfb)) = (&row.provider, &row.model, row.ttfb_ms)
        else {
            return;
        };
        let ttft = row
            .attempts
            .iter()
            .rev()
            .find(|a| a.class == Outcome::Ok)
            .map_or(ttfb, |a| a.latency_ms.min(ttfb));
        let after = row.total_ms.saturating_sub(ttfb);
        // Tokens per second of what came after the first token (a stream), or of the whole
        // answer when it came at once.
        let tps = row.output_tokens.filter(|n| *n > 0).map(|n| {
            n as f64 * 1000.0 / (if row.stream { after } else { row.total_ms }).max(1) as f64
        });
        self.note(provider, model, ttft, tps);
    }

    /// A time to first token measured outside live traffic (a probe's one-token answer).
    pub fn measured(&self, provider: &str, model: &str, ttft_ms: u64) {
        self.note(provider, model, ttft_ms, None);
    }

    fn note(&self, provider: &str, model: &str, ttft: u64, tps: Option<f64>) {
        let Ok(mut map) = self.0.lock() else { return };
        let fresh = Speed {
            ttft_ms: ttft as f64,
            tokens_per_s: tps,
            samples: 0,
        };
        let e = match map.get_mut(provider).and_then(|m| m.get_mut(model)) {
            Some(e) => e,
            None => {
                let known: usize = map.values().map(HashMap::len).sum();
                if known >= MAX_ENTRIES {
                    return;
                }
                let models = map.entry(provider.to_string()).or_default();
                models.entry(model.to_string()).or_insert(Entry::new(fresh))
            }
        };
        e.note(ttft);
        let s = &mut e.speed;
        if s.samples > 0 {
            s.ttft_ms += ALPHA * (ttft as f64 - s.ttft_ms);
            s.tokens_per_s = match (s.tokens_per_s, tps) {
                (Some(old), Some(new)) => Some(old + ALPHA * (new - old)),
                (old, new) => new.or(old),
            };
        }
        s.samples += 1;
    }

    /// The 95th percentile of `provider`'s latest times to first token on `model`, ms, once
    /// enough are measured (the wait before a hedge).
    pub fn p95(&self, provider: &str, model: &str) -> Option<u64> {
        let map = self.0.lock().ok()?;
        let e = map.get(provider)?.get(model)?;
        let n = e.next.min(RECENT);
        if n < MIN_FOR_PERCENTILE {
            return None;
        }
        let mut v = e.recent;
        let v = &mut v[..n];
        v.sort_unstable();
        Some(u64::from(v[(n * 95).div_ceil(100) - 1]))
    }

    /// `provider`'s recent speed on `model`.
    pub fn of(&self, provider: &str, model: &str) -> Option<Speed> {
        let map = self.0.lock().ok()?;
        map.get(provider)?.get(model).map(|e| e.speed)
    }

    /// `provider`'s fastest model's speed (for its card).
    pub fn best_of(&self, provider: &str) -> Option<Speed> {
        let map = self.0.lock().ok()?;
        map.get(provider)?
            .values()
            .map(|e| e.speed)
            .min_by(|a, b| a.ttft_ms.total_cmp(&b.ttft_ms))
    }

    /// Among equal priority, the fastest first; a candidate not measured yet goes first once
    /// (so it gets measured), the order of equals kept.
    pub fn fastest_first(&self, targets: &mut [Target]) {
        let key = |t: &Target| {
            self.of(t.provider.id(), &t.model.id)
                .map_or(-1.0, |s| s.ttft_ms)
        };
        // A stable sort: equals keep their order.
        super::forecast::each_priority_run(
            targets,
            |t| t.provider.config.priority,
            |run| run.sort_by(|a, b| key(a).total_cmp(&key(b))),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(provider: &str, ttfb: u64, total: u64, tokens: u64, stream: bool) -> LogRow {
        LogRow {
            id: "r".into(),
            ts_ms: 0,
            client: String::new(),
            requested_model: "auto".into(),
            provider: Some(provider.into()),
            model: Some("m".into()),
            status: 200,
            stream,
            attempts: Vec::new(),
            ttfb_ms: Some(ttfb),
            total_ms: total,
            input_tokens: Some(10),
            output_tokens: Some(tokens),
            error: None,
            client_key: String::new(),
            cost_usd: None,
            upstream_ms: None,
            cache_read_tokens: None,
            cache_write_tokens: None,
            output: None,
        }
    }

    #[test]
    fn the_averages_follow_the_recent_answers_and_failures_do_not_count() {
        let s = Speeds::default();
        s.observe(&row("a", 100, 1100, 100, true));
        let first = s.of("a", "m").unwrap();
        assert_eq!(
            (first.ttft_ms, first.tokens_per_s, first.samples),
            (100.0, Some(100.0), 1)
        );
        s.observe(&row("a", 600, 600, 0, false));
        let second = s.of("a", "m").unwrap();
        assert_eq!(
            second.ttft_ms, 200.0,
            "a fifth of the way to the new answer"
        );
        assert_eq!(
            second.tokens_per_s,
            Some(100.0),
            "an answer without tokens says nothing of them"
        );
        let mut failed = row("a", 5, 5, 1, false);
        failed.status = 502;
        s.observe(&failed);
        assert_eq!(s.of("a", "m").unwrap().samples, 2);
        assert!(s.of("b", "m").is_none());
    }

    #[test]
    fn the_p95_is_of_the_latest_twenty_once_ten_are_measured() {
        let s = Speeds::default();
        for ms in 1..=9 {
            s.observe(&row("a", ms * 10, ms * 10, 1, false));
        }
        assert_eq!(s.p95("a", "m"), None, "nine are not enough");
        s.observe(&row("a", 1000, 1000, 1, false));
        assert_eq!(s.p95("a", "m"), Some(1000), "of ten, the slowest");
        for _ in 0..9 {
            s.observe(&row("a", 50, 50, 1, false));
        }
        assert_eq!(
            s.p95("a", "m"),
            Some(1000),
            "of nineteen, still the slowest"
        );
        s.observe(&row("a", 50, 50, 1, false));
        assert_eq!(
            s.p95("a", "m"),
            Some(90),
            "of twenty, the 19th: one slow answer in twenty is the tail beyond the p95"
        );
        for _ in 0..20 {
            s.observe(&row("a", 50, 50, 1, false));
        }
        assert_eq!(s.p95("a", "m"), Some(50), "only the latest twenty count");
        // A cancelled attempt (a hedge answered first) says it was at least that slow.
        let mut hedged = row("b", 120, 120, 1, false);
        hedged.attempts = vec![outrun("a", 4000)];
        s.observe(&hedged);
        assert_eq!(s.of("a", "m").unwrap().samples, 41);
        assert!(s.of("a", "m").unwrap().ttft_ms > 800.0);
    }

    fn outrun(provider: &str, ms: u64) -> crate::store::AttemptRecord {
        crate::store::AttemptRecord {
            provider: provider.into(),
            model: "m".into(),
            key: None,
            class: Outcome::Outrun,
            status: None,
            latency_ms: ms,
            latency_us: ms * 1000,
            reason: None,
            reset_at_ms: None,
            streamed: false,
            hedge: false,
            input_tokens: Some(10),
            started: None,
            span: 0,
        }
    }
}
