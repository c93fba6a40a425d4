//! Per-provider circuit breaker for transient failures (5xx, resets, timeouts): opens after N
//! failures in a row or when at least half of ten or more requests in the last minute failed;
//! after its cooldown exactly one trial request goes through (half-open); success closes it,
//! failure re-opens it for longer.
//!
//! A provider keeps one breaker per scope ([`Breakers`]): per model unless the provider declares
//! its limits provider- or key-wide (`limitScope`), so one failing model does not bench the rest.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Breaker settings (`routing.breaker`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BreakerConfig {
    /// Consecutive transient failures that open the breaker.
    #[serde(default = "d_failures")]
    pub failures: u32,
    /// First open period; doubles with each re-opening.
    #[serde(default = "d_cooldown")]
    pub cooldown_ms: u64,
    /// Longest open period.
    #[serde(default = "d_max")]
    pub max_cooldown_ms: u64,
}

fn d_failures() -> u32 {
    3
}
fn d_cooldown() -> u64 {
    30_000
}
fn d_max() -> u64 {
    300_000
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failures: d_failures(),
            cooldown_ms: d_cooldown(),
            max_cooldown_ms: d_max(),
        }
    }
}

const WINDOW_MS: i64 = 60_000;
const MIN_WINDOW_REQUESTS: usize = 10;
/// A trial that never reported back (client vanished) stops blocking after this long.
const TRIAL_TIMEOUT_MS: i64 = 120_000;

/// What the breaker lets through right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Closed,
    /// Half-open: this caller is the single trial.
    Trial,
    /// Open until this instant (or a trial is already under way).
    Open(i64),
}

#[derive(Debug, Default)]
struct State {
    consecutive: u32,
    window: VecDeque<(i64, bool)>,
    open_until: Option<i64>,
    openings: u32,
    trial_since: Option<i64>,
}

#[derive(Debug, Default)]
pub struct Breaker(Mutex<State>);

impl Breaker {
    pub fn admit(&self, now: i64) -> Admit {
        let Ok(mut s) = self.0.lock() else {
            return Admit::Closed;
        };
        let Some(until) = s.open_until else {
            return Admit::Closed;
        };
        if now < until {
            return Admit::Open(until);
        }
        match s.trial_since {
            Some(t) if now - t < TRIAL_TIMEOUT_MS => Admit::Open(until),
            _ => {
                s.trial_since = Some(now);
                Admit::Trial
            }
        }
    }

    /// Records a success; returns true when this closed an open breaker.
    pub fn success(&self, now: i64) -> bool {
        let Ok(mut s) = self.0.lock() else {
            return false;
        };
        s.consecutive = 0;
        push(&mut s.window, now, true);
        let was_open = s.open_until.take().is_some();
        s.trial_since = None;
        if was_open {
            s.openings = 0;
            s.window.clear();
        }
        was_open
    }

    /// Records a transient failure; returns the open-until instant when this opened the breaker.
    pub fn failure(&self, now: i64, cfg: &BreakerConfig) -> Option<i64> {
        let Ok(mut s) = self.0.lock() else {
            return None;
        };
        s.consecutive += 1;
        push(&mut s.window, now, false);
        let trial_failed = s.trial_since.take().is_some();
        let failed = s.window.iter().filter(|(_, ok)| !ok).count();
        let rate_trip = s.window.len() >= MIN_WINDOW_REQUESTS && failed * 2 >= s.window.len();
        let already_open = s.open_until.is_some_and(|u| now < u);
        if already_open || !(trial_failed || s.consecutive >= cfg.failures.max(1) || rate_trip) {
            return None;
        }
        let factor = 1u64 << s.openings.min(16);
        let ms = cfg
            .cooldown_ms
            .saturating_mul(factor)
            .min(cfg.max_cooldown_ms.max(cfg.cooldown_ms));
        s.openings += 1;
        let until = now + ms as i64;
        s.open_until = Some(until);
        Some(until)
    }

    /// Closes the breaker by hand (admin).
    pub fn reset(&self) {
        if let Ok(mut s) = self.0.lock() {
            *s = State::default();
        }
    }

    /// `(open_until, consecutive failures)` for the admin state.
    pub fn snapshot(&self) -> (Option<i64>, u32) {
        self.0
            .lock()
            .map(|s| (s.open_until, s.consecutive))
            .unwrap_or((None, 0))
    }
}

/// A provider's breakers, one per scope: a model id, or `None` for the whole provider
/// (looked up on every attempt: foldhash, not SipHash).
#[derive(Debug, Default)]
pub struct Breakers(Mutex<HashMap<Option<String>, Arc<Breaker>, foldhash::fast::RandomState>>);

impl Breakers {
    /// The breaker for this scope (created closed on first use).
    pub fn get(&self, model: Option<&str>) -> Arc<Breaker> {
        let Ok(mut m) = self.0.lock() else {
            return Arc::default();
        };
        m.entry(model.map(str::to_string)).or_default().clone()
    }

    /// Closes every breaker of the provider (`model` None), or only that model's.
    pub fn reset(&self, model: Option<&str>) {
        if let Ok(m) = self.0.lock() {
            for (scope, b) in m.iter() {
                if model.is_none() || scope.as_deref() == model {
                    b.reset();
                }
            }
        }
    }

    /// Every breaker that is open or half-open: `(model, open_until, consecutive failures)`,
    /// provider-wide first.
    pub fn tripped(&self) -> Vec<(Option<String>, i64, u32)> {
        let Ok(m) = self.0.lock() else {
            return Vec::new();
        };
        let mut out: Vec<_> = m
            .iter()
            .filter_map(|(scope, b)| {
                let (until, n) = b.snapshot();
                until.map(|u| (scope.clone(), u, n))
            })
            .collect();
        out.sort();
        out
    }

    /// The provider as a whole, `(open_until, consecutive failures)`: its provider-wide breaker,
    /// or — when its breakers are per model — open only while every one of `models` is open
    /// (until the first of them half-opens).
    pub fn provider_snapshot(&self, models: &[&str]) -> (Option<i64>, u32) {
        let Ok(m) = self.0.lock() else {
            return (None, 0);
        };
        if let Some(wide) = m.get(&None) {
            return wide.snapshot();
        }
        if models.is_empty() {
            return (None, 0);
        }
        let mut until: Option<i64> = None;
        let mut most = 0;
        for model in models {
            let Some((Some(u), n)) = m.get(&Some(model.to_string())).map(|b| b.snapshot()) else {
                return (None, 0);
            };
            until = Some(until.map_or(u, |x| x.min(u)));
            most = most.max(n);
        }
        (until, most)
    }
}

fn push(w: &mut VecDeque<(i64, bool)>, now: i64, ok: bool) {
    while w.front().is_some_and(|(t, _)| now - t > WINDOW_MS) {
        w.pop_front();
    }
    w.push_back((now, ok));
    if w.len() > 1024 {
        w.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_half_opens_with_one_trial_and_closes() {
        let b = Breaker::default();
        let cfg = BreakerConfig::default();
        assert_eq!(b.failure(0, &cfg), None);
        assert_eq!(b.failure(1, &cfg), None);
        assert_eq!(b.failure(2, &cfg), Some(30_002), "third in a row opens");
        assert_eq!(b.admit(10), Admit::Open(30_002));
        assert_eq!(
            b.admit(30_002),
            Admit::Trial,
            "one trial after the cooldown"
        );
        assert_eq!(b.admit(30_003), Admit::Open(30_002), "only one");
        assert_eq!(
            b.failure(30_004, &cfg),
            Some(90_004),
            "failed trial re-opens for twice as long"
        );
        assert_eq!(b.admit(90_004), Admit::Trial);
        assert!(b.success(90_005), "successful trial closes");
        assert_eq!(b.admit(90_006), Admit::Closed);
    }

    #[test]
    fn half_failing_window_opens() {
        let b = Breaker::default();
        let cfg = BreakerConfig {
            failures: 100,
            ..BreakerConfig::default()
        };
        let mut opened = None;
        for i in 0..10 {
            if i % 2 == 0 {
                b.success(i);
            } else {
                opened = opened.or(b.failure(i, &cfg));
            }
        }
        assert!(
            opened.is_some(),
            "50% of 10 requests failing opens the breaker"
        );
    }
}
