//! Per-client admission on this instance: token buckets for requests and tokens per minute,
//! budgets per UTC day and month, and the bad-request throttle. With a shared Redis the buckets
//! and budgets live there (see `shared`), and this is the fallback while Redis is away.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::{utc_day, utc_month, Client, ClientPolicy};

/// Client errors (400, 404, 413, 422) in a minute that get a client throttled.
pub const BAD_REQUEST_LIMIT: usize = 20;
/// Window of the bad-request count, and how long the throttle lasts.
pub const BAD_REQUEST_WINDOW_MS: i64 = 60_000;

/// Why a client's request is refused before routing.
#[derive(Debug, Clone, PartialEq)]
pub enum Deny {
    Disabled,
    Expired(i64),
    /// Requests per minute spent; retry in `retry_ms`.
    Rate {
        limit: u32,
        retry_ms: i64,
    },
    /// Tokens per minute spent.
    Tokens {
        limit: u64,
        retry_ms: i64,
    },
    /// A budget is spent until `until_ms` (the next UTC day or month).
    Budget {
        period: &'static str,
        what: String,
        until_ms: i64,
    },
    /// Too many bad requests lately.
    BadRequests {
        count: usize,
        retry_ms: i64,
    },
}

impl Deny {
    /// Milliseconds until a retry can succeed, for `Retry-After`.
    pub fn retry_ms(&self, now: i64) -> Option<i64> {
        match self {
            Deny::Disabled | Deny::Expired(_) => None,
            Deny::Rate { retry_ms, .. }
            | Deny::Tokens { retry_ms, .. }
            | Deny::BadRequests { retry_ms, .. } => Some(*retry_ms),
            Deny::Budget { until_ms, .. } => Some(until_ms - now),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Deny::Disabled => "key_disabled",
            Deny::Expired(_) => "key_expired",
            Deny::Rate { .. } => "client_rate_limited",
            Deny::Tokens { .. } => "client_token_limited",
            Deny::Budget { .. } => "budget_exceeded",
            Deny::BadRequests { .. } => "too_many_bad_requests",
        }
    }

    pub fn message(&self, label: &str) -> String {
        let secs = |ms: &i64| (*ms as f64 / 1000.0).ceil().max(1.0) as i64;
        match self {
            Deny::Disabled => format!("The key `{label}` is disabled. Ask the gateway's admin to enable it."),
            Deny::Expired(at) => format!(
                "The key `{label}` expired at {}. Ask the gateway's admin for a new key.",
                crate::clock::fmt_utc(*at)
            ),
            Deny::Rate { limit, retry_ms } => format!(
                "The key `{label}` is limited to {limit} requests per minute; retry in {} s. Other keys are not affected.",
                secs(retry_ms)
            ),
            Deny::Tokens { limit, retry_ms } => format!(
                "The key `{label}` is limited to {limit} tokens per minute; retry in {} s.",
                secs(retry_ms)
            ),
            Deny::Budget { period, what, until_ms } => format!(
                "The key `{label}` has spent its {period} budget ({what}); it renews at {}.",
                crate::clock::fmt_utc(*until_ms)
            ),
            Deny::BadRequests { count, retry_ms } => format!(
                "The key `{label}` sent {count} invalid requests in the last minute and is paused for {} s. Fix the requests (each error said what was wrong).",
                secs(retry_ms)
            ),
        }
    }
}

/// What is left of a key's per-minute limits once a request is admitted: what the
/// `x-ratelimit-*` headers tell its client, so an SDK can pace itself before a 429.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Headroom {
    pub requests: Option<Room>,
    pub tokens: Option<Room>,
}

/// One limit: its size per minute, what is left now, and how long until it is full again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Room {
    pub limit: u64,
    pub remaining: u64,
    pub reset_ms: i64,
}

impl Room {
    /// A bucket of `limit` per minute at `level`.
    pub fn of(limit: u64, level: f64) -> Room {
        let per = limit.max(1) as f64;
        Room {
            limit,
            remaining: level.clamp(0.0, per).floor() as u64,
            reset_ms: ((per - level).max(0.0) * 60_000.0 / per).ceil() as i64,
        }
    }
}

/// Tokens and estimated cost of one finished request.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spend {
    pub tokens: u64,
    /// Estimated cost in millionths of a US dollar.
    pub micro_usd: u64,
}

/// A client's spending in the current UTC day and month.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub day_tokens: u64,
    pub day_usd: f64,
    pub month_tokens: u64,
    pub month_usd: f64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: f64,
    at: i64,
}

impl Bucket {
    /// Refills at `per_minute` per minute up to `per_minute`.
    fn refill(&mut self, per_minute: f64, now: i64) {
        let dt = (now - self.at).max(0) as f64;
        self.level = (self.level + dt * per_minute / 60_000.0).min(per_minute);
        self.at = now;
    }

    /// Milliseconds until the level reaches `need`.
    fn wait_for(&self, need: f64, per_minute: f64) -> i64 {
        ((need - self.level) * 60_000.0 / per_minute)
            .ceil()
            .max(1.0) as i64
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub struct Period {
    pub start: i64,
    pub tokens: u64,
    pub micro_usd: u64,
}

impl Period {
    fn roll(&mut self, start: i64) {
        if self.start != start {
            *self = Period {
                start,
                ..Default::default()
            };
        }
    }
}

#[derive(Debug, Default)]
struct State {
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
    bad: VecDeque<i64>,
    throttled_until: i64,
    day: Period,
    month: Period,
}

impl State {
    /// The day and month brought to `now`, and the budget they exceed, if any.
    fn over_budget(&mut self, p: &ClientPolicy, now: i64) -> Option<Deny> {
        self.day.roll(utc_day(now).0);
        self.month.roll(utc_month(now).0);
        over_budget(p, &self.day, &self.month, now)
    }
}

/// Admission state of every client seen by this instance.
#[derive(Debug, Default)]
pub struct Limiter {
    clients: Mutex<HashMap<String, State>>,
}

pub(crate) fn usd(micro: u64) -> f64 {
    micro as f64 / 1_000_000.0
}

/// The first budget `day`/`month` spending breaks, if any.
pub fn over_budget(policy: &ClientPolicy, day: &Period, month: &Period, now: i64) -> Option<Deny> {
    let b = &policy.budget;
    let (_, next_day) = utc_day(now);
    let (_, next_month) = utc_month(now);
    let checks = [
        (
            "daily",
            b.day_tokens.map(|l| (l as f64, day.tokens as f64, false)),
            next_day,
        ),
        (
            "daily",
            b.day_usd.map(|l| (l, usd(day.micro_usd), true)),
            next_day,
        ),
        (
            "monthly",
            b.month_tokens
                .map(|l| (l as f64, month.tokens as f64, false)),
            next_month,
        ),
        (
            "monthly",
            b.month_usd.map(|l| (l, usd(month.micro_usd), true)),
            next_month,
        ),
    ];
    for (period, check, until_ms) in checks {
        if let Some((limit, used, dollars)) = check {
            if used >= limit {
                let what = if dollars {
                    format!("${used:.4} of ${limit:.2}")
                } else {
                    format!("{used} of {limit} tokens")
                };
                return Some(Deny::Budget {
                    period,
                    what,
                    until_ms,
                });
            }
        }
    }
    None
}

impl Limiter {
    /// Refusals that do not depend on shared state: disabled, expired, throttled.
    pub fn gate(&self, c: &Client, now: i64) -> Result<(), Deny> {
        if c.policy.disabled {
            return Err(Deny::Disabled);
        }
        if let Some(at) = c.policy.expires_ms.filter(|at| *at <= now) {
            return Err(Deny::Expired(at));
        }
        let Ok(map) = self.clients.lock() else {
            return Ok(());
        };
        if let Some(s) = map.get(&c.id) {
            if s.throttled_until > now {
                return Err(Deny::BadRequests {
                    count: s.bad.len().max(BAD_REQUEST_LIMIT),
                    retry_ms: s.throttled_until - now,
                });
            }
        }
        Ok(())
    }

    /// Rate limits and budgets on this instance's counters; takes one request from the bucket
    /// and says what is left.
    pub fn admit(&self, c: &Client, now: i64) -> Result<Headroom, Deny> {
        let p = &c.policy;
        let mut room = Headroom::default();
        if !p.is_metered() {
            return Ok(room);
        }
        let Ok(mut map) = self.clients.lock() else {
            return Ok(room);
        };
        let s = map.entry(c.id.clone()).or_default();
        if let Some(d) = s.over_budget(p, now) {
            return Err(d);
        }
        if let Some(tpm) = p.tpm {
            let b = s.tokens.get_or_insert(Bucket {
                level: tpm as f64,
                at: now,
            });
            b.refill(tpm as f64, now);
            if b.level <= 0.0 {
                return Err(Deny::Tokens {
                    limit: tpm,
                    retry_ms: b.wait_for(1.0, tpm as f64),
                });
            }
            room.tokens = Some(Room::of(tpm, b.level));
        }
        if let Some(rpm) = p.rpm {
            let b = s.requests.get_or_insert(Bucket {
                level: rpm as f64,
                at: now,
            });
            b.refill(rpm as f64, now);
            if b.level < 1.0 {
                return Err(Deny::Rate {
                    limit: rpm,
                    retry_ms: b.wait_for(1.0, rpm as f64),
                });
            }
            b.level -= 1.0;
            room.requests = Some(Room::of(u64::from(rpm), b.level));
        }
        Ok(room)
    }

    /// Counts a finished request's tokens and cost against the client's buckets and budgets.
    pub fn spend(&self, c: &Client, spend: Spend, now: i64) {
        let p = &c.policy;
        if !p.is_metered() {
            return;
        }
        let Ok(mut map) = self.clients.lock() else {
            return;
        };
        let s = map.entry(c.id.clone()).or_default();
        if let Some(tpm) = p.tpm {
            let b = s.tokens.get_or_insert(Bucket {
                level: tpm as f64,
                at: now,
            });
            b.refill(tpm as f64, now);
            b.level -= spend.tokens as f64;
        }
        s.day.roll(utc_day(now).0);
        s.month.roll(utc_month(now).0);
        for period in [&mut s.day, &mut s.month] {
            period.tokens += spend.tokens;
            period.micro_usd += spend.micro_usd;
        }
    }

    /// The client's budgets alone, on this instance's view (what a request admitted ahead of
    /// the shared store checks): the reason to refuse, if one is spent.
    pub fn over_budget(&self, c: &Client, now: i64) -> Option<Deny> {
        if c.policy.budget.is_empty() {
            return None;
        }
        let mut map = self.clients.lock().ok()?;
        map.get_mut(&c.id)?.over_budget(&c.policy, now)
    }

    /// Raises this instance's view of a client's spending to what the shared store says.
    pub fn mirror(&self, id: &str, day: Period, month: Period) {
        let Ok(mut map) = self.clients.lock() else {
            return;
        };
        let s = map.entry(id.to_string()).or_default();
        for (mine, theirs) in [(&mut s.day, day), (&mut s.month, month)] {
            if theirs.start > mine.start {
                *mine = theirs;
            } else if theirs.start == mine.start {
                mine.tokens = mine.tokens.max(theirs.tokens);
                mine.micro_usd = mine.micro_usd.max(theirs.micro_usd);
            }
        }
    }

    /// This instance's view of a client's current day and month.
    pub fn periods(&self, id: &str) -> Option<(Period, Period)> {
        let map = self.clients.lock().ok()?;
        map.get(id).map(|s| (s.day, s.month))
    }

    /// Sets the day and month totals (from the request log at start-up).
    pub fn seed(&self, id: &str, day: (i64, u64, u64), month: (i64, u64, u64)) {
        let p = |(start, tokens, micro_usd)| Period {
            start,
            tokens,
            micro_usd,
        };
        self.mirror(id, p(day), p(month));
    }

    /// Records a request the client got wrong; returns true when this starts a throttle.
    pub fn bad_request(&self, id: &str, now: i64) -> bool {
        let Ok(mut map) = self.clients.lock() else {
            return false;
        };
        let s = map.entry(id.to_string()).or_default();
        s.bad.push_back(now);
        while s
            .bad
            .front()
            .is_some_and(|t| now - t >= BAD_REQUEST_WINDOW_MS)
        {
            s.bad.pop_front();
        }
        if s.bad.len() >= BAD_REQUEST_LIMIT && s.throttled_until <= now {
            s.throttled_until = now + BAD_REQUEST_WINDOW_MS;
            return true;
        }
        false
    }

    /// The client's spending in the current day and month, as this instance knows it.
    pub fn usage(&self, id: &str, now: i64) -> Usage {
        let Ok(map) = self.clients.lock() else {
            return Usage::default();
        };
        let Some(s) = map.get(id) else {
            return Usage::default();
        };
        let day = if s.day.start == utc_day(now).0 {
            s.day
        } else {
            Period::default()
        };
        let month = if s.month.start == utc_month(now).0 {
            s.month
        } else {
            Period::default()
        };
        Usage {
            day_tokens: day.tokens,
            day_usd: usd(day.micro_usd),
            month_tokens: month.tokens,
            month_usd: usd(month.micro_usd),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::Budget;
    use super::*;

    fn client(policy: ClientPolicy) -> Client {
        Client {
            id: "k".into(),
            label: "ui:k".into(),
            policy,
        }
    }

    /// What is left after each admission: the rate-limit headers' numbers.
    #[test]
    fn each_admission_says_what_is_left() {
        let l = Limiter::default();
        let c = client(ClientPolicy {
            rpm: Some(3),
            tpm: Some(600),
            ..Default::default()
        });
        let left = |now| l.admit(&c, now).unwrap();
        let first = left(0);
        assert_eq!(
            first.requests,
            Some(Room {
                limit: 3,
                remaining: 2,
                reset_ms: 20_000
            })
        );
        assert_eq!(
            first.tokens,
            Some(Room {
                limit: 600,
                remaining: 600,
                reset_ms: 0
            })
        );
        assert_eq!(left(0).requests.map(|r| r.remaining), Some(1));
        let third = left(0).requests.unwrap();
        assert_eq!((third.remaining, third.reset_ms), (0, 60_000));
        assert_eq!(Headroom::default(), {
            let free = client(ClientPolicy::default());
            l.admit(&free, 0).unwrap()
        });
    }

    #[test]
    fn request_bucket_allows_a_minute_then_refills() {
        let l = Limiter::default();
        let c = client(ClientPolicy {
            rpm: Some(3),
            ..Default::default()
        });
        for _ in 0..3 {
            assert!(l.admit(&c, 0).is_ok());
        }
        match l.admit(&c, 0) {
            Err(Deny::Rate { retry_ms, .. }) => assert_eq!(retry_ms, 20_000),
            other => panic!("{other:?}"),
        }
        assert!(l.admit(&c, 20_000).is_ok());
    }

    #[test]
    fn tokens_are_taken_after_the_answer_and_budgets_renew() {
        let l = Limiter::default();
        let c = client(ClientPolicy {
            tpm: Some(1_000),
            budget: Budget {
                day_tokens: Some(1_500),
                ..Default::default()
            },
            ..Default::default()
        });
        assert!(l.admit(&c, 1_000).is_ok());
        l.spend(
            &c,
            Spend {
                tokens: 1_200,
                micro_usd: 0,
            },
            1_000,
        );
        assert!(matches!(l.admit(&c, 1_000), Err(Deny::Tokens { .. })));
        // A minute later the bucket has refilled but the day's budget is nearly spent.
        assert!(l.admit(&c, 61_000).is_ok());
        l.spend(
            &c,
            Spend {
                tokens: 400,
                micro_usd: 0,
            },
            61_000,
        );
        match l.admit(&c, 200_000) {
            Err(Deny::Budget { until_ms, .. }) => assert_eq!(until_ms, 86_400_000),
            other => panic!("{other:?}"),
        }
        assert!(l.admit(&c, 86_400_000).is_ok(), "a new UTC day");
        assert_eq!(l.usage("k", 86_400_000).day_tokens, 0);
        assert_eq!(l.usage("k", 86_400_000).month_tokens, 1_600);
    }

    #[test]
    fn bad_requests_throttle_one_client() {
        let l = Limiter::default();
        let c = client(ClientPolicy::default());
        for i in 0..BAD_REQUEST_LIMIT - 1 {
            assert!(!l.bad_request("k", i as i64));
        }
        assert!(l.bad_request("k", 100));
        assert!(matches!(l.gate(&c, 200), Err(Deny::BadRequests { .. })));
        assert_eq!(
            l.gate(
                &client(ClientPolicy::default()),
                200 + BAD_REQUEST_WINDOW_MS
            ),
            Ok(())
        );
        let other = Client::unlimited("other");
        assert_eq!(l.gate(&other, 200), Ok(()));
    }
}
