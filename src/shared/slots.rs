//! Concurrency slots held ahead: while a provider is busy, its shared slots (`maxConcurrency`
//! across instances) are leased several at once, and a slot a finished request gives back is
//! handed to the next request here instead of going back to Redis and being asked for again.
//!
//! What keeps the limit whole:
//! - every slot is a lease in Redis's sorted set, counted by every instance, from its grant to
//!   its release; a slot is reused only within [`LIFETIME_MS`] of its grant, and its lease runs
//!   that much longer than a request may, so a reused slot's lease outlives its request;
//! - a provider pools only when its `maxConcurrency` is 32 or more, and then holds at most a
//!   sixteenth of it idle (16 at most), for at most [`LIFETIME_MS`]: a small limit is shared
//!   one request at a time, as before;
//! - idle slots past their lifetime are given back at the next lease or within half a second
//!   (the health loop), and all of them when Redis goes away.

use std::collections::HashMap;
use std::sync::Mutex;

/// How long after its grant a slot may be handed to another request.
pub(super) const LIFETIME_MS: i64 = 250;
/// The most slots leased at once.
const MAX_BATCH: i64 = 16;

#[derive(Default)]
pub(super) struct Slots {
    pools: Mutex<HashMap<String, Pool>>,
}

#[derive(Default)]
struct Pool {
    /// Slots leased and not in use: (lease id, granted at).
    idle: Vec<(String, i64)>,
    /// The last lease round trip, and how many it asked for.
    asked_ms: i64,
    ask: i64,
}

/// How many slots at once a provider of `max` may take (1: no pooling).
pub(super) fn batch_cap(max: u32) -> i64 {
    (i64::from(max) / 16).clamp(1, MAX_BATCH)
}

impl Slots {
    /// An idle slot of `provider` still within its lifetime, and those past it (to give back).
    pub(super) fn reuse(&self, provider: &str, now: i64) -> (Option<(String, i64)>, Vec<String>) {
        let Ok(mut pools) = self.pools.lock() else {
            return (None, Vec::new());
        };
        let Some(pool) = pools.get_mut(provider) else {
            return (None, Vec::new());
        };
        let stale = take_stale(&mut pool.idle, now);
        (pool.idle.pop(), stale)
    }

    /// How many slots to ask for now: twice the last when it was asked within a lifetime (the
    /// provider is busy), else one.
    pub(super) fn ask(&self, provider: &str, max: u32, now: i64) -> i64 {
        let cap = batch_cap(max);
        let Ok(mut pools) = self.pools.lock() else {
            return 1;
        };
        if cap <= 1 {
            return 1;
        }
        let pool = pools.entry(provider.to_string()).or_default();
        let ask = if now - pool.asked_ms < LIFETIME_MS {
            (pool.ask * 2).clamp(1, cap)
        } else {
            1
        };
        pool.asked_ms = now;
        pool.ask = ask;
        ask
    }

    /// Keeps slots granted beyond the one the asking request takes.
    pub(super) fn keep(&self, provider: &str, ids: Vec<String>, now: i64) {
        if ids.is_empty() {
            return;
        }
        if let Ok(mut pools) = self.pools.lock() {
            let pool = pools.entry(provider.to_string()).or_default();
            pool.idle.extend(ids.into_iter().map(|id| (id, now)));
        }
    }

    /// Takes back a slot a request finished with, when it may still be reused (its provider
    /// pools, and it is within its lifetime); false when it goes back to Redis.
    pub(super) fn put_back(&self, provider: &str, id: &str, granted_ms: i64, now: i64) -> bool {
        if now - granted_ms >= LIFETIME_MS || now < granted_ms {
            return false;
        }
        let Ok(mut pools) = self.pools.lock() else {
            return false;
        };
        match pools.get_mut(provider) {
            Some(pool) if pool.ask > 1 || !pool.idle.is_empty() => {
                pool.idle.push((id.to_string(), granted_ms));
                true
            }
            _ => false,
        }
    }

    /// Every idle slot past its lifetime, by provider (given back by the health loop).
    pub(super) fn sweep(&self, now: i64) -> Vec<(String, String)> {
        self.take(|idle| take_stale(idle, now))
    }

    /// Every idle slot, by provider (Redis went away).
    pub(super) fn drain(&self) -> Vec<(String, String)> {
        self.take(|idle| idle.drain(..).map(|(id, _)| id).collect())
    }

    fn take(
        &self,
        mut gone: impl FnMut(&mut Vec<(String, i64)>) -> Vec<String>,
    ) -> Vec<(String, String)> {
        let Ok(mut pools) = self.pools.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (provider, pool) in pools.iter_mut() {
            out.extend(
                gone(&mut pool.idle)
                    .into_iter()
                    .map(|id| (provider.clone(), id)),
            );
        }
        out
    }
}

fn take_stale(idle: &mut Vec<(String, i64)>, now: i64) -> Vec<String> {
    let mut stale = Vec::new();
    idle.retain(|(id, at)| {
        let fresh = now - *at < LIFETIME_MS && now >= *at;
        if !fresh {
            stale.push(id.clone());
        }
        fresh
    });
    stale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_limit_is_shared_one_request_at_a_time() {
        let s = Slots::default();
        assert_eq!(batch_cap(31), 1);
        for now in [1_000, 1_001, 1_002] {
            assert_eq!(s.ask("p", 31, now), 1);
        }
        assert!(
            !s.put_back("p", "a-1", 1_000, 1_010),
            "straight back to Redis"
        );
    }

    #[test]
    fn a_busy_provider_leases_more_at_once_and_reuses_them_within_their_lifetime() {
        let s = Slots::default();
        assert_eq!(batch_cap(256), 16);
        assert_eq!(s.ask("p", 256, 1_000), 1);
        assert_eq!(s.ask("p", 256, 1_010), 2);
        assert_eq!(s.ask("p", 256, 1_020), 4);
        s.keep(
            "p",
            vec!["a-3.2".into(), "a-3.3".into(), "a-3.4".into()],
            1_020,
        );
        assert_eq!(
            s.reuse("p", 1_030).0.map(|(id, _)| id).as_deref(),
            Some("a-3.4")
        );
        assert!(
            s.put_back("p", "a-3", 1_020, 1_040),
            "within its lifetime: kept"
        );
        // Past it: given back, never handed out.
        let (slot, stale) = s.reuse("p", 1_020 + LIFETIME_MS);
        assert_eq!(slot, None);
        assert_eq!(stale.len(), 3);
        assert!(!s.put_back("p", "a-3", 1_020, 1_020 + LIFETIME_MS));
        // A quiet provider asks for one again.
        assert_eq!(s.ask("p", 256, 5_000), 1);
    }

    #[test]
    fn the_sweep_gives_back_what_is_past_its_lifetime_and_everything_when_redis_goes() {
        let s = Slots::default();
        s.ask("p", 256, 1_000);
        s.keep("p", vec!["old".into()], 1_000);
        s.keep("p", vec!["new".into()], 1_200);
        assert_eq!(
            s.sweep(1_000 + LIFETIME_MS),
            vec![("p".into(), "old".into())]
        );
        assert_eq!(s.drain(), vec![("p".into(), "new".into())]);
        assert!(s.drain().is_empty());
    }
}
