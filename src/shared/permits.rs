//! Requests admitted ahead: a client that sends fast is given several requests from the shared
//! bucket in one round trip (the admission script takes them all at once, so the bucket is
//! never overdrawn), and this instance hands them out without asking Redis again.
//!
//! What keeps limits whole:
//! - the batch is taken from the shared rate bucket up front, and the script grants more than
//!   one only while the client's token bucket and every budget it has are less than half used,
//!   and never more than 1 % of its requests per minute;
//! - each request admitted ahead still passes the budgets on this instance's view (its own
//!   spending is counted there at once), and a batch lives [`LIFETIME_MS`], within its UTC day;
//! - the size adapts: it doubles only when the previous batch ran out within its lifetime, and
//!   halves when permits were left over, so a client that sends slowly asks Redis each time.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::clients::limiter::{Headroom, Limiter, Room};
use crate::clients::{utc_day, Client, ClientPolicy};

/// How long permits taken ahead may be handed out.
pub(super) const LIFETIME_MS: i64 = 250;
/// The most requests asked for at once.
pub(super) const MAX_BATCH: i64 = 64;

#[derive(Default)]
pub(super) struct Permits {
    by_client: Mutex<HashMap<String, Batch>>,
}

struct Batch {
    /// Permits still to hand out.
    left: i64,
    /// When they were taken, and the UTC day they count in.
    at_ms: i64,
    day: i64,
    /// What the next round trip asks for.
    ask: i64,
    /// How many the script granted: more than one only while every budget and the token
    /// bucket were less than half used.
    granted: i64,
    /// The shared bucket's level after the grant (requests), and the token room then.
    level: f64,
    tokens: Option<Room>,
    /// The policy they were granted under: a key changed since (on any instance) asks again.
    policy: ClientPolicy,
}

impl Batch {
    /// Still usable for `c` at `now`: within its lifetime and UTC day, under the policy it was
    /// granted under.
    fn current(&self, c: &Client, now: i64) -> bool {
        now - self.at_ms < LIFETIME_MS
            && now >= self.at_ms
            && utc_day(now).0 == self.day
            && self.policy == c.policy
    }
}

impl Permits {
    /// A request admitted from a batch taken earlier, with what its headers say is left; `None`
    /// when there is none to use (the caller asks Redis).
    pub(super) fn take(&self, c: &Client, now: i64, limiter: &Limiter) -> Option<Headroom> {
        let mut map = self.by_client.lock().ok()?;
        let b = map.get_mut(&c.id)?;
        if b.left <= 0 || !b.current(c, now) || limiter.over_budget(c, now).is_some() {
            return None;
        }
        b.left -= 1;
        Some(Headroom {
            requests: c.policy.rpm.map(|rpm| Room::of(u64::from(rpm), b.level)),
            tokens: b.tokens,
        })
    }

    /// Whether `c` holds a batch granted while it was far from its limits (more than one
    /// request, under the policy it has now, within the batch's lifetime and UTC day): its
    /// spending may be gathered for a moment (`gather`).
    pub(super) fn roomy(&self, c: &Client, now: i64) -> bool {
        let Ok(map) = self.by_client.lock() else {
            return false;
        };
        map.get(&c.id)
            .is_some_and(|b| b.granted > 1 && b.current(c, now))
    }

    /// How many requests to ask for now: double the last batch when it ran out within its
    /// lifetime, half of it when some were left over.
    pub(super) fn ask(&self, c: &Client, now: i64) -> i64 {
        let Ok(map) = self.by_client.lock() else {
            return 1;
        };
        match map.get(&c.id) {
            Some(b) if b.left <= 0 && now - b.at_ms < LIFETIME_MS => (b.ask * 2).min(MAX_BATCH),
            Some(b) if b.left > 0 => (b.ask / 2).max(1),
            Some(b) => b.ask,
            None => 1,
        }
    }

    /// Keeps what the script granted beyond the request that asked (`granted - 1` permits).
    pub(super) fn keep(&self, c: &Client, now: i64, asked: i64, granted: i64, room: &Headroom) {
        let Ok(mut map) = self.by_client.lock() else {
            return;
        };
        let level = room.requests.map_or(0.0, |r| r.remaining as f64);
        map.insert(
            c.id.clone(),
            Batch {
                left: (granted - 1).max(0),
                at_ms: now,
                day: utc_day(now).0,
                ask: asked,
                granted,
                level,
                tokens: room.tokens,
                policy: c.policy.clone(),
            },
        );
    }

    /// Forgets every batch (Redis went away: what comes back is asked for again).
    pub(super) fn clear(&self) {
        if let Ok(mut map) = self.by_client.lock() {
            map.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(rpm: u32) -> Client {
        Client {
            id: "team".into(),
            label: "team".into(),
            policy: ClientPolicy {
                rpm: Some(rpm),
                ..Default::default()
            },
        }
    }

    fn room(remaining: u64) -> Headroom {
        Headroom {
            requests: Some(Room {
                limit: 100_000,
                remaining,
                reset_ms: 0,
            }),
            tokens: None,
        }
    }

    #[test]
    fn a_batch_is_handed_out_once_within_its_lifetime() {
        let (p, l, c) = (Permits::default(), Limiter::default(), client(100_000));
        assert_eq!(p.ask(&c, 1_000), 1);
        p.keep(&c, 1_000, 4, 4, &room(500));
        let first = p.take(&c, 1_010, &l).unwrap();
        assert_eq!(
            first.requests.unwrap().remaining,
            500,
            "what the shared bucket has left"
        );
        assert!(p.take(&c, 1_020, &l).is_some());
        assert!(p.take(&c, 1_030, &l).is_some());
        assert!(
            p.take(&c, 1_040, &l).is_none(),
            "three were left beyond the asking one"
        );
        // Ran out within its lifetime: the next asks for twice as many.
        assert_eq!(p.ask(&c, 1_050), 8);
        // A key changed since (its limit lowered on another instance) asks Redis again.
        p.keep(&c, 1_000, 4, 4, &room(500));
        let lowered = client(1);
        assert!(p.take(&lowered, 1_010, &l).is_none());
    }

    #[test]
    fn leftovers_expire_and_halve_the_next_ask() {
        let (p, l, c) = (Permits::default(), Limiter::default(), client(100_000));
        p.keep(&c, 1_000, 16, 16, &room(500));
        assert!(p.take(&c, 1_000 + LIFETIME_MS, &l).is_none(), "expired");
        assert_eq!(p.ask(&c, 1_000 + LIFETIME_MS), 8);
        // A clock that went back, or a new UTC day, uses none either.
        p.keep(&c, 1_000, 16, 16, &room(500));
        assert!(p.take(&c, 999, &l).is_none());
        let midnight = utc_day(1_000).1;
        p.keep(&c, midnight - 10, 16, 16, &room(500));
        assert!(p.take(&c, midnight, &l).is_none());
    }

    #[test]
    fn only_a_batch_granted_far_from_the_limits_is_roomy() {
        let (p, c) = (Permits::default(), client(100_000));
        assert!(!p.roomy(&c, 1_000), "no batch");
        p.keep(&c, 1_000, 8, 8, &room(500));
        assert!(p.roomy(&c, 1_000 + LIFETIME_MS - 1));
        assert!(!p.roomy(&c, 1_000 + LIFETIME_MS), "expired");
        assert!(!p.roomy(&client(1), 1_010), "a policy changed since");
        // Near a limit the script grants one at a time: nothing is gathered then.
        p.keep(&c, 2_000, 8, 1, &room(500));
        assert!(!p.roomy(&c, 2_001));
    }

    #[test]
    fn a_budget_spent_here_stops_the_batch_at_once() {
        let (p, l) = (Permits::default(), Limiter::default());
        let mut c = client(100_000);
        c.policy.budget.day_tokens = Some(100);
        p.keep(&c, 1_000, 8, 8, &room(500));
        assert!(p.take(&c, 1_001, &l).is_some());
        l.spend(
            &c,
            crate::clients::limiter::Spend {
                tokens: 100,
                micro_usd: 0,
            },
            1_002,
        );
        assert!(p.take(&c, 1_003, &l).is_none(), "Redis decides from here");
    }
}
