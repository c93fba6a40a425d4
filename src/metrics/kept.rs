//! The series a finished request counts into, kept per pair of label values so that the
//! request path finds them with one lookup instead of one per family.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

/// Pairs of label values kept before more are looked up afresh each time (bounded like the
/// labels themselves: at most 200 providers times 200 clients, but a map this size is plenty for
/// a real setup and a misbehaving one only loses the shortcut).
pub(super) const MAX_KEPT: usize = 4096;

/// What a finished request counts into for one pair of label values (serving provider and
/// client key, or provider and provider key), found in the families once and kept. Five
/// family lookups a request (each a SipHash of the label set under a lock, ~400
/// instructions) become one lookup here. A metric's handle is the series itself (an `Arc`
/// inside), and the request families are never cleared, so a kept handle counts where
/// `/metrics` reads.
pub(super) struct Kept<T>(Mutex<Pairs<T>>);

/// The kept entries by their first value, then their second, and how many there are in all.
struct Pairs<T> {
    by: HashMap<Arc<str>, HashMap<Arc<str>, T, FoldState>, FoldState>,
    len: usize,
}

type FoldState = foldhash::fast::RandomState;

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Self(Mutex::new(Pairs {
            by: HashMap::default(),
            len: 0,
        }))
    }
}

impl<T> Kept<T> {
    /// Runs `f` on the pair's entry, made by `make` the first time. Past [`MAX_KEPT`] pairs a
    /// new pair's entry is made for this call only.
    pub(super) fn with<R>(
        &self,
        a: &str,
        b: &str,
        make: impl FnOnce() -> T,
        f: impl FnOnce(&mut T) -> R,
    ) -> R {
        let Ok(mut kept) = self.0.lock() else {
            return f(&mut make());
        };
        let kept = &mut *kept;
        if let Some(t) = kept.by.get_mut(a).and_then(|m| m.get_mut(b)) {
            return f(t);
        }
        if kept.len >= MAX_KEPT {
            return f(&mut make());
        }
        kept.len += 1;
        let inner = kept.by.entry(Arc::from(a)).or_default();
        f(inner.entry(Arc::from(b)).or_insert_with(make))
    }
}

/// The counter kept under `k`, found in its family by `find` the first time.
pub(super) fn kept_counter<K: PartialEq, G: std::ops::Deref<Target = Counter>>(
    kept: &mut Vec<(K, Counter)>,
    k: K,
    find: impl FnOnce() -> G,
) -> &Counter {
    let at = match kept.iter().position(|(x, _)| *x == k) {
        Some(at) => at,
        None => {
            kept.push((k, find().clone()));
            kept.len() - 1
        }
    };
    &kept[at].1
}

/// A serving provider and client key's series (label values as capped).
pub(super) struct ByClient {
    pub(super) provider: Arc<str>,
    pub(super) client: Arc<str>,
    pub(super) requests: Vec<(u16, Counter)>,
    /// Input, output, cache read, cache write: made when first counted, as the family would.
    pub(super) tokens: [Option<Counter>; 4],
    pub(super) duration: Histogram,
}

/// A provider and provider key's attempts by outcome class.
pub(super) struct ByKey {
    pub(super) provider: Arc<str>,
    pub(super) key: Arc<str>,
    pub(super) attempts: Vec<(&'static str, Counter)>,
}
