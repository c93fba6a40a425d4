//! Spending gathered for a moment before it goes to Redis: a client sending fast had one
//! spending script a request (the largest part of Redis's work for it, ~27 µs of Lua each);
//! gathered, it has one per [`GATHER_MS`]. A leaf of the shared-state module.
//!
//! Only a client holding requests admitted ahead (`permits`) has its spending gathered: the
//! admission script granted that batch only while every budget and the token bucket were less
//! than half used, the same room requests admitted ahead already rely on. Anyone else's
//! spending is written at once, as before. This instance counts its own spending locally at
//! once either way (`Limiter::spend`), and mirroring Redis's counts never lowers it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::clients::limiter::Spend;
use crate::clients::{utc_day, Client};

/// How long spending waits for more before it is written.
pub(super) const GATHER_MS: u64 = 50;

/// Spending not yet written, by client and the UTC day it was spent in (a day's and a month's
/// counters are keyed by the day and month of the spending, so days are never summed).
#[derive(Default)]
pub(super) struct Gathered {
    by_client: Mutex<HashMap<(String, i64), Pending>>,
    /// A write is due: the next spending waits for it instead of arranging another.
    armed: AtomicBool,
}

/// One client's spending in one day, summed.
pub(super) struct Pending {
    pub(super) client: Arc<Client>,
    pub(super) spend: Spend,
    /// The latest of its requests' ends (the token bucket is charged as of then).
    pub(super) now: i64,
}

impl Gathered {
    /// Adds a request's spending; true when no write is due yet and the caller must arrange
    /// one (in [`GATHER_MS`]).
    pub(super) fn add(&self, client: &Arc<Client>, spend: Spend, now: i64) -> bool {
        let Ok(mut map) = self.by_client.lock() else {
            return false;
        };
        let p = map
            .entry((client.id.clone(), utc_day(now).0))
            .or_insert_with(|| Pending {
                client: client.clone(),
                spend: Spend::default(),
                now,
            });
        p.spend.tokens += spend.tokens;
        p.spend.micro_usd += spend.micro_usd;
        p.now = p.now.max(now);
        !self.armed.swap(true, Ordering::AcqRel)
    }

    /// Everything gathered, to be written now; the next spending arranges the next write.
    pub(super) fn take(&self) -> Vec<Pending> {
        self.armed.store(false, Ordering::Release);
        match self.by_client.lock() {
            Ok(mut map) => map.drain().map(|(_, p)| p).collect(),
            Err(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str) -> Arc<Client> {
        Arc::new(Client {
            id: id.into(),
            label: id.into(),
            policy: Default::default(),
        })
    }

    fn spend(tokens: u64, micro_usd: u64) -> Spend {
        Spend { tokens, micro_usd }
    }

    #[test]
    fn one_write_is_arranged_for_many_spendings_and_each_is_counted() {
        let g = Gathered::default();
        let (a, b) = (client("a"), client("b"));
        assert!(
            g.add(&a, spend(10, 5), 1_000),
            "the first arranges the write"
        );
        assert!(!g.add(&a, spend(7, 1), 1_020), "the others wait for it");
        assert!(!g.add(&b, spend(3, 0), 1_010));
        let mut taken = g.take();
        taken.sort_by(|x, y| x.client.id.cmp(&y.client.id));
        let got: Vec<_> = taken
            .iter()
            .map(|p| (p.client.id.as_str(), p.spend, p.now))
            .collect();
        assert_eq!(
            got,
            vec![("a", spend(17, 6), 1_020), ("b", spend(3, 0), 1_010)]
        );
        assert!(g.take().is_empty(), "written once");
        assert!(
            g.add(&a, spend(1, 0), 1_100),
            "after a write, the next arranges its own"
        );
    }

    #[test]
    fn spending_either_side_of_midnight_stays_in_its_own_day() {
        let g = Gathered::default();
        let a = client("a");
        let midnight = utc_day(1_000).1;
        g.add(&a, spend(5, 0), midnight - 1);
        g.add(&a, spend(8, 0), midnight);
        let mut taken = g.take();
        taken.sort_by_key(|p| p.now);
        let got: Vec<_> = taken.iter().map(|p| (p.spend.tokens, p.now)).collect();
        assert_eq!(got, vec![(5, midnight - 1), (8, midnight)]);
    }
}
