//! One pass over the candidates: take the next one that has a slot, skip it while it cools or
//! its breaker is open, announce the failover from the last failure, attempt it through the
//! [`Upstream`], and either return its answer or weigh its failure and go on.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::time::timeout_at;

use super::candidates::larger_window;
use super::candidates::{
    fmt_ms, pick_key, record, served, skipped, try_slot, wait_for_slot, CLIENT_KEY,
};
use super::context::Routing;
use super::failure::{cooldown_until, on_failure, Decision, Failed, Next};
use super::record::Record;
use super::snapshot::{Snapshot, Target};
use super::types::{
    Answer, Attempt, Back, Completed, Failure, Inbound, Pick, Served, Slot, Streamed, Upstream,
};
use crate::limits::breaker::Admit;
use crate::limits::{self, Classified, ErrorClass};
use crate::providers::ApiKey;
use crate::structured::Checked;

/// How often a request waiting for another instance to free a shared slot looks again.
const SHARED_SLOT_POLL: Duration = Duration::from_millis(20);

/// What a pass needs around it: where to send, the state it reads and the request's deadline.
pub(super) struct Ctx<'a, U> {
    pub up: &'a U,
    pub routing: &'a Routing,
    pub snap: &'a Snapshot,
    pub inbound: &'a Inbound,
    pub deadline: tokio::time::Instant,
    pub deadline_ms: u64,
    /// Where the conversation was last served (`affinity`).
    pub stick: Option<&'a super::affinity::Stick>,
}

/// Per-target bookkeeping within one pass over the candidates.
struct Pass {
    soonest_reset: Option<i64>,
    all_limited: bool,
    /// The soonest instant a candidate that is out for a stated time is back, while every
    /// candidate passed over is such (a limit or a timed wait).
    soonest_back: Option<i64>,
    all_timed: bool,
    context_retry: Option<Option<u64>>,
    /// The failure to announce as a failover when the next target is tried: label,
    /// verdict, display name.
    last_failure: Option<(String, Classified, String)>,
    summary: Vec<String>,
    /// Targets already retried on the spot (lone 500 / reset, or a short rate-limit wait).
    retried: HashSet<String>,
    /// The first answer saying the request alone is over a provider's per-minute token
    /// limit: what the client gets (as a 413) if no other candidate takes it.
    too_large: Option<Bytes>,
}

impl Pass {
    fn new() -> Self {
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
        }
    }

    fn limited_until(&mut self, until: i64) {
        self.soonest_reset = Some(self.soonest_reset.map_or(until, |s| s.min(until)));
    }

    /// Notes why `t` was passed over, and when it is back.
    fn passed(&mut self, t: &Target, why: &str, back: Back) {
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

    fn announce_next(&mut self, t: &Target, c: Classified) {
        self.last_failure = Some((t.label(), c, t.provider.config.display_name().to_string()));
    }

    /// Why no candidate answered.
    fn exhausted(self) -> Failure {
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
struct Queue {
    pending: VecDeque<Target>,
    busy: Vec<Target>,
    /// Targets whose shared slots (across instances) are all taken, and how long to wait.
    shared_busy: Vec<Target>,
    shared_wait_until: Option<tokio::time::Instant>,
}

/// The next candidate, or why there is none.
enum Take {
    Go(Target, Slot),
    /// Nothing left to try.
    Done,
    /// Nothing was sent and nothing can be: the request fails with this.
    Fail(Failure),
}

impl Queue {
    /// The next candidate holding a concurrency slot (local and, when state is shared, across
    /// instances). Candidates out of the running are skipped and noted on the way.
    async fn next<U>(&mut self, cx: &Ctx<'_, U>, pass: &mut Pass, rec: &mut Record) -> Take {
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
            let p = &target.provider;
            let ttl = cx.snap.routing.request_timeout_ms.max(60_000);
            match cx
                .routing
                .shared
                .lease(p.id(), p.config.concurrency(), ttl)
                .await
            {
                crate::shared::LeaseResult::Local => {}
                crate::shared::LeaseResult::Held(lease) => slot.hold(lease),
                crate::shared::LeaseResult::Full => {
                    drop(slot);
                    self.shared_busy.push(target);
                    continue;
                }
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

/// The key to use on `t`, or `None` (noted) while every key cools or its breaker is open.
fn admit(
    routing: &Routing,
    t: &Target,
    client: Option<&ApiKey>,
    prefer: Option<&str>,
    pass: &mut Pass,
    rec: &mut Record,
) -> Option<usize> {
    let key = match pick_key(routing, t, client, prefer) {
        Pick::Go(i) => i,
        Pick::Cooling(until, reason, back) => {
            // Only limits make "every candidate is rate-limited" true: a provider out after
            // failures (an overload's stated wait) is not rate-limited, but back at a time.
            let why = format!("cooling until {} ({reason})", fmt_ms(until));
            pass.passed(t, &why, back);
            rec.push_attempt(skipped(t, None, "cooling", Some(reason), Some(until)));
            return None;
        }
    };
    if let Admit::Open(until) = t
        .provider
        .breaker(&t.model.id)
        .admit(routing.clock.now_ms())
    {
        pass.passed(t, "circuit breaker open", Back::At(until));
        rec.push_attempt(skipped(t, None, "breaker open", None, Some(until)));
        return None;
    }
    Some(key)
}

/// Announces the failover from the last failed target to `t` (not to the same target again).
fn announce_failover(routing: &Routing, pass: &mut Pass, t: &Target, request_id: &str) {
    let Some((from, c, from_name)) = pass.last_failure.take() else {
        return;
    };
    if from == t.label() {
        return;
    }
    let to_name = t.provider.config.display_name();
    let now = routing.clock.now_ms();
    let subscription = from
        .split('/')
        .next()
        .and_then(|id| {
            routing
                .snapshot
                .load()
                .provider(id)
                .map(|p| p.config.is_subscription())
        })
        .unwrap_or(false);
    let notable = crate::events::worth_telling(c.class, subscription, c.reset_at_ms, now);
    routing.events.emit(crate::events::Event::Failover {
        notable,
        request_id: request_id.to_string(),
        message: crate::limits::failover_message(
            &from_name,
            to_name,
            &c,
            &routing.local_tz,
            routing.clock.now_ms(),
            routing.locale.get(),
        ),
        from,
        to: t.label(),
        class: c.class,
        reason: c.reason,
        reset_at_ms: c.reset_at_ms,
    });
}

/// One attempt in flight: the target, the key's index, when it was sent.
struct Sent {
    target: Target,
    key: usize,
    /// The client's own credential, when the key is [`CLIENT_KEY`].
    client: Option<ApiKey>,
    started: Instant,
    sent_ms: i64,
}

impl Sent {
    fn key(&self) -> Option<&ApiKey> {
        match self.key {
            CLIENT_KEY => self.client.as_ref(),
            i => self.target.provider.keys.get(i),
        }
    }
}

/// Runs one pass over `targets`.
pub(super) async fn run_candidates<U: Upstream>(
    cx: &Ctx<'_, U>,
    targets: Vec<Target>,
    rec: &mut Record,
) -> Result<Served, Failure> {
    let mut queue = Queue {
        pending: targets.into(),
        busy: Vec::new(),
        shared_busy: Vec::new(),
        shared_wait_until: None,
    };
    let mut pass = Pass::new();
    loop {
        let (target, slot) = match queue.next(cx, &mut pass, rec).await {
            Take::Go(t, s) => (t, s),
            Take::Done => return Err(pass.exhausted()),
            Take::Fail(f) => return Err(f),
        };
        let client = cx.inbound.client.as_ref().map(|c| &c.key);
        // The key that served this conversation on this provider, to keep its cache warm.
        let prefer = cx
            .stick
            .filter(|s| s.provider == target.provider.id())
            .map(|s| s.key.as_str());
        let Some(key) = admit(cx.routing, &target, client, prefer, &mut pass, rec) else {
            continue;
        };
        if target.provider.keys.get(key).is_some() && prefer.is_none() {
            target.provider.runtime.used_key(key);
        }
        announce_failover(cx.routing, &mut pass, &target, rec.id());
        let sent = Sent {
            target,
            key,
            client: (key == CLIENT_KEY).then(|| client.cloned()).flatten(),
            started: Instant::now(),
            sent_ms: cx.routing.clock.now_ms(),
        };
        let attempt = cx
            .up
            .attempt(&sent.target, sent.key(), cx.inbound, rec.id());
        let outcome = match timeout_at(cx.deadline, attempt).await {
            Ok(o) => o,
            Err(_) => {
                let c = limits::classify_timeout("request deadline reached");
                rec.push_attempt(record(&sent.target, sent.key(), &c, None, sent.started));
                return Err(Failure::Deadline(cx.deadline_ms));
            }
        };
        let (outcome, checked) =
            super::output::check(cx.routing, cx.inbound, &sent.target, outcome, rec.id());
        match outcome {
            Attempt::Served(answer) => {
                return Ok(answered(cx, sent, (answer, checked), slot, &queue, rec))
            }
            Attempt::Failed {
                classified,
                status,
                body,
            } => {
                let t = &sent.target;
                rec.push_attempt(record(t, sent.key(), &classified, status, sent.started));
                drop(slot);
                tracing::info!(request_id = rec.id(), target = %t.label(), class = classified.class.as_str(), reason = %classified.reason, "attempt failed");
                let verdict = Verdict {
                    c: classified,
                    status,
                    body,
                };
                if let Some(f) = weigh(cx, sent, verdict, &mut queue, &mut pass).await {
                    return Err(f);
                }
            }
        }
    }
}

/// A successful attempt: the target's health is restored and the answer handed on (a stream
/// with the candidates that may resume it if it breaks).
fn answered<U>(
    cx: &Ctx<'_, U>,
    sent: Sent,
    (answer, output): (Answer, Option<Checked>),
    slot: Slot,
    queue: &Queue,
    rec: &mut Record,
) -> Served {
    let routing = cx.routing;
    let p = &sent.target.provider;
    let model = &sent.target.model.id;
    routing.cooldowns.clear_covering(
        p.id(),
        sent.key().map(|k| k.id.as_str()),
        model,
        sent.sent_ms,
    );
    if p.breaker(model).success(routing.clock.now_ms()) {
        routing.events.emit(crate::events::Event::BreakerClosed {
            provider: p.id().to_string(),
        });
    }
    rec.push_attempt(served(&sent.target, sent.key(), sent.started));
    routing.remember(
        &cx.snap.routing.affinity,
        cx.inbound.conversation.as_ref(),
        super::affinity::Stick {
            provider: p.id().to_string(),
            model: model.clone(),
            key: sent.key().map(|k| k.id.clone()).unwrap_or_default(),
        },
    );
    let target = sent.target;
    match answer {
        Answer::Complete(reply, usage) => Served::Complete(Completed {
            target,
            reply,
            usage,
            slot,
            output,
        }),
        Answer::Stream { source, prelude } => {
            let snap = cx.snap;
            let resume = if snap.resumes_on_break(snap.map_model(&cx.inbound.canonical.model)) {
                queue
                    .pending
                    .iter()
                    .chain(queue.busy.iter())
                    .filter(|t| {
                        t.provider.config.capabilities.prefill
                            && t.provider.id() != target.provider.id()
                            && crate::providers::kinds::of_provider(&t.provider.config).is_some_and(
                                |k| k.resumes_from_prefill() && source.wire() == Some(k.wire()),
                            )
                            && t.provider.config.credentials.is_baton()
                    })
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            };
            Served::Stream(Streamed {
                target,
                source,
                prelude,
                slot,
                resume,
            })
        }
    }
}

/// A failed attempt's classification, status and (redacted) body.
struct Verdict {
    c: Classified,
    status: Option<u16>,
    body: Option<Bytes>,
}

/// Weighs a failed attempt: the request fails with the upstream's own error (one the client
/// must fix), or the target is retried, or the pass moves on (with the failure noted and its
/// failover announced when the next target is tried).
async fn weigh<U>(
    cx: &Ctx<'_, U>,
    sent: Sent,
    v: Verdict,
    queue: &mut Queue,
    pass: &mut Pass,
) -> Option<Failure> {
    let (snap, t, c) = (cx.snap, &sent.target, &v.c);
    if c.too_large {
        // Nothing to wait out and nothing to cool (a smaller request still fits there):
        // another candidate may have a larger per-minute limit.
        pass.too_large
            .get_or_insert_with(|| v.body.clone().unwrap_or_default());
        pass.passed(t, &c.reason, Back::Unknown);
        return None;
    }
    if c.context_length && snap.routing.context_fallback && pass.context_retry.is_none() {
        pass.context_retry = Some(t.model.context_window);
        pass.passed(t, &c.reason, Back::Unknown);
        pass.announce_next(t, v.c);
        return None;
    }
    let policy_fallback =
        c.class == ErrorClass::ContentPolicy && snap.routing.content_policy_fallback;
    if !c.class.fails_over() && !policy_fallback || pass.context_retry.is_some() && c.context_length
    {
        return Some(Failure::Client {
            status: v.status.unwrap_or(400),
            body: v.body.unwrap_or_default(),
        });
    }
    let label = t.label();
    let failed = Failed {
        t,
        key: sent.key(),
        c,
        status: v.status,
        first_retry: !pass.retried.contains(&label),
    };
    let Decision { next, fresh } = on_failure(cx.routing, snap, failed, cx.deadline).await;
    // Another instance asked right after this one must already know about any cooldown this
    // failure started.
    cx.routing.shared.barrier().await;
    match next {
        Next::SameTarget => {
            pass.retried.insert(label);
            queue.pending.push_front(sent.target);
            return None;
        }
        Next::OtherKey => {
            queue.pending.push_front(sent.target);
            return None;
        }
        Next::DropProvider => {
            let id = t.provider.id().to_string();
            queue.pending.retain(|t| t.provider.id() != id);
        }
        Next::Move => {}
    }
    let back = match c.class {
        ErrorClass::Rate => Back::Limit(cooldown_until(cx.routing, snap, c)),
        // An overload that says when to come back.
        ErrorClass::Overloaded if c.reset_at_ms.is_some() => {
            Back::At(cooldown_until(cx.routing, snap, c))
        }
        _ => Back::Unknown,
    };
    pass.passed(t, &c.reason, back);
    if fresh {
        pass.announce_next(t, v.c);
    }
    None
}
