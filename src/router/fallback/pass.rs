//! The vocabulary of a pass over the candidates (a leaf of the loop): what it needs around it
//! (`Ctx`), its bookkeeping (`Pass`), the queue of candidates holding slots (`Queue`), an
//! attempt in flight (`Sent`) and a failure's verdict (`Verdict`).

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::limits::Classified;
use crate::providers::ApiKey;
use crate::router::candidates::{
    larger_window, record, skipped, try_slot, wait_for_slot, CLIENT_KEY,
};
use crate::router::context::Routing;
use crate::router::record::Record;
use crate::router::snapshot::{Snapshot, Target};
use crate::router::types::{Back, Failure, Inbound, Slot};

/// How often a request waiting for another instance to free a shared slot looks again.
const SHARED_SLOT_POLL: Duration = Duration::from_millis(20);

/// What a pass needs around it: where to send, the state it reads and the request's deadline.
pub(crate) struct Ctx<'a, U> {
    pub up: &'a U,
    pub routing: &'a Routing,
    pub snap: &'a Snapshot,
    pub inbound: &'a Inbound,
    pub deadline: tokio::time::Instant,
    pub deadline_ms: u64,
    /// Where the conversation was last served (`affinity`).
    pub stick: Option<&'a crate::router::affinity::Stick>,
    /// Hedging is on for the way this request was routed (`routing.hedge`, the route's own
    /// word); the first candidate's provider may still decide otherwise.
    pub hedging: bool,
}

/// Per-target bookkeeping within one pass over the candidates.
pub(super) struct Pass {
    pub(super) soonest_reset: Option<i64>,
    pub(super) all_limited: bool,
    /// The soonest instant a candidate that is out for a stated time is back, while every
    /// candidate passed over is such (a limit or a timed wait).
    pub(super) soonest_back: Option<i64>,
    pub(super) all_timed: bool,
    pub(super) context_retry: Option<Option<u64>>,
    /// The failure to announce as a failover when the next target is tried: label,
    /// verdict, display name.
    pub(super) last_failure: Option<(String, Classified, String)>,
    pub(super) summary: Vec<String>,
    /// Targets already retried on the spot (lone 500 / reset, or a short rate-limit wait).
    pub(super) retried: HashSet<String>,
    /// The first answer saying the request alone is over a provider's per-minute token
    /// limit: what the client gets (as a 413) if no other candidate takes it.
    pub(super) too_large: Option<Bytes>,
    /// A hedge was considered for this request already (one race a request).
    pub(super) hedged: bool,
}

impl Pass {
    pub(super) fn new() -> Self {
        Pass {
            soonest_reset: None,
            all_limited: true,
            soonest_back: None,
            all_timed: true,
            context_retry: None,
            last_failure: None,
            summary: Vec::new(),
            retried: HashSet::new(),
            too_large: None,
            hedged: false,
        }
    }

    pub(super) fn limited_until(&mut self, until: i64) {
        self.soonest_reset = Some(self.soonest_reset.map_or(until, |s| s.min(until)));
    }

    /// Notes why `t` was passed over, and when it is back.
    pub(super) fn passed(&mut self, t: &Target, why: &str, back: Back) {
        match back {
            Back::Limit(until) => self.limited_until(until),
            Back::At(_) | Back::Unknown => self.all_limited = false,
        }
        match back {
            Back::Limit(until) | Back::At(until) => {
                self.soonest_back = Some(self.soonest_back.map_or(until, |s| s.min(until)));
            }
            Back::Unknown => self.all_timed = false,
        }
        self.summary.push(format!("{}: {why}", t.label()));
    }

    pub(super) fn announce_next(&mut self, t: &Target, c: Classified) {
        self.last_failure = Some((t.label(), c, t.provider.config.display_name().to_string()));
    }

    /// Why no candidate answered.
    pub(super) fn exhausted(self) -> Failure {
        if let Some(body) = self.too_large {
            return Failure::Client { status: 413, body };
        }
        if !self.all_limited && self.all_timed {
            if let Some(at) = self.soonest_back {
                return Failure::Unavailable {
                    retry_at_ms: at,
                    summary: self.summary.join("; "),
                };
            }
        }
        Failure::Exhausted {
            retry_at_ms: if self.all_limited {
                self.soonest_reset
            } else {
                None
            },
            summary: if self.summary.is_empty() {
                "no candidate could be tried".into()
            } else {
                self.summary.join("; ")
            },
        }
    }
}

/// The candidates still to try, in order, and those waiting for a concurrency slot.
pub(super) struct Queue {
    pub(super) pending: VecDeque<Target>,
    pub(super) busy: Vec<Target>,
    /// Targets whose shared slots (across instances) are all taken, and how long to wait.
    pub(super) shared_busy: Vec<Target>,
    pub(super) shared_wait_until: Option<tokio::time::Instant>,
}

/// The next candidate, or why there is none.
pub(super) enum Take {
    Go(Target, Slot),
    /// Nothing left to try.
    Done,
    /// Nothing was sent and nothing can be: the request fails with this.
    Fail(Failure),
}

impl Queue {
    /// The next candidate holding a concurrency slot (local and, when state is shared, across
    /// instances). Candidates out of the running are skipped and noted on the way.
    pub(super) async fn next<U>(
        &mut self,
        cx: &Ctx<'_, U>,
        pass: &mut Pass,
        rec: &mut Record,
    ) -> Take {
        loop {
            let (target, mut slot) = if let Some(t) = self.pending.pop_front() {
                if let Some(window) = pass.context_retry {
                    if !larger_window(t.model.context_window, window) {
                        continue;
                    }
                }
                if let Some(reason) = t.provider.unavailable() {
                    pass.passed(&t, &reason, Back::Unknown);
                    rec.push_attempt(skipped(&t, None, "unavailable", Some(reason), None));
                    continue;
                }
                match try_slot(&t) {
                    Some(slot) => (t, slot),
                    None => {
                        self.busy.push(t);
                        continue;
                    }
                }
            } else if !self.busy.is_empty() {
                match wait_for_slot(cx.routing, &mut self.busy, cx.snap, cx.deadline).await {
                    Ok(ts) => ts,
                    Err(f) if rec.sent_count() == 0 => return Take::Fail(f),
                    Err(_) => return Take::Done,
                }
            } else if !self.shared_busy.is_empty() {
                if let Some(f) = self.wait_shared(cx).await {
                    return if rec.sent_count() == 0 {
                        Take::Fail(f)
                    } else {
                        Take::Done
                    };
                }
                continue;
            } else {
                return Take::Done;
            };
            if !shared_slot(cx, &target, &mut slot).await {
                drop(slot);
                self.shared_busy.push(target);
                continue;
            }
            return Take::Go(target, slot);
        }
    }

    /// Waits a moment for another instance to free a shared slot and puts those targets back
    /// in line; the failure when the queue wait is over.
    async fn wait_shared<U>(&mut self, cx: &Ctx<'_, U>) -> Option<Failure> {
        let wait_ms = cx.snap.routing.queue_timeout_ms;
        let until = *self.shared_wait_until.get_or_insert_with(|| {
            (tokio::time::Instant::now() + Duration::from_millis(wait_ms)).min(cx.deadline)
        });
        if tokio::time::Instant::now() + SHARED_SLOT_POLL >= until {
            let names: Vec<String> = self.shared_busy.iter().map(Target::label).collect();
            return Some(Failure::Busy {
                retry_after_ms: 1_000,
                message: format!(
                    "Every candidate provider was at its concurrency limit across all Baton instances for {wait_ms} ms ({}).",
                    names.join(", ")
                ),
            });
        }
        tokio::time::sleep(SHARED_SLOT_POLL).await;
        self.pending.extend(self.shared_busy.drain(..));
        None
    }
}

/// One attempt in flight: the target, the key's index, when it was sent.
#[derive(Clone)]
pub(super) struct Sent {
    pub(super) target: Target,
    pub(super) key: usize,
    /// The client's own credential, when the key is [`CLIENT_KEY`].
    pub(super) client: Option<ApiKey>,
    pub(super) started: Instant,
    pub(super) sent_ms: i64,
    /// Sent beside a slow first attempt (`hedge`).
    pub(super) hedge: bool,
    /// Its span in the request's trace (0: not traced).
    pub(super) span: u64,
}

impl Sent {
    pub(super) fn key(&self) -> Option<&ApiKey> {
        match self.key {
            CLIENT_KEY => self.client.as_ref(),
            i => self.target.provider.keys.get(i),
        }
    }

    /// Its failure as Activity logs it.
    pub(super) fn failed(
        &self,
        c: &Classified,
        status: Option<u16>,
    ) -> crate::store::AttemptRecord {
        let mut a = record(&self.target, self.key(), c, status, self.started);
        a.hedge = self.hedge;
        a.span = self.span;
        a
    }
}

/// A failed attempt's classification, status and (redacted) body.
pub(super) struct Verdict {
    pub(super) c: Classified,
    pub(super) status: Option<u16>,
    pub(super) body: Option<Bytes>,
}

/// The slot every instance counts, held with `slot` when state is shared; false when every
/// one of the provider's slots across instances is taken.
pub(super) async fn shared_slot<U>(cx: &Ctx<'_, U>, t: &Target, slot: &mut Slot) -> bool {
    let p = &t.provider;
    let ttl = cx.snap.routing.request_timeout_ms.max(60_000);
    match cx
        .routing
        .shared
        .lease(p.id(), p.config.concurrency(), ttl)
        .await
    {
        crate::shared::LeaseResult::Local => true,
        crate::shared::LeaseResult::Held(lease) => {
            slot.hold(lease);
            true
        }
        crate::shared::LeaseResult::Full => false,
    }
}
