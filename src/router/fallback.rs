//! One pass over the candidates: take the next one that has a slot, skip it while it cools or
//! its breaker is open, announce the failover from the last failure, attempt it through the
//! [`Upstream`] (raced against the next candidate when it is hedged and slow), and either
//! return its answer or weigh its failure and go on. Its vocabulary is `pass.rs`, its steps
//! `steps.rs`, the race `hedge.rs`.

use std::time::Instant;

use tokio::time::timeout_at;

use super::candidates::CLIENT_KEY;
use super::record::Record;
use super::snapshot::Target;
use super::types::{Failure, Served, Slot, Upstream};
use crate::limits;

mod hedge;
mod pass;
mod steps;

pub(super) use pass::Ctx;
use pass::{Pass, Queue, Sent, Take};
use steps::{admit, announce_failover, answered, settle, Settled};

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
            hedge: false,
            span: cx.inbound.attempt_span(),
        };
        let settled = match hedge::delay(cx, &sent.target, &queue, &mut pass) {
            // Boxed: hedging is opt-in, and its race (two attempts at once) is the largest
            // future of the loop; unboxed, every request's state would be that large.
            Some(delay) => {
                Box::pin(hedge::race(
                    cx, sent, slot, delay, &mut queue, &mut pass, rec,
                ))
                .await
            }
            None => match attempt(cx, sent, slot, (&mut queue, &mut pass), rec).await {
                Ok(s) => s,
                Err(f) => return Err(f),
            },
        };
        match settled {
            Settled::Won(won) => {
                let (sent, slot, answer) = *won;
                return Ok(answered(cx, sent, answer, slot, &queue, rec));
            }
            Settled::Lost(Some(f)) => return Err(f),
            Settled::Lost(None) => {}
        }
    }
}

/// One attempt up to its first content (or whole answer), within the request's deadline.
async fn attempt<U: Upstream>(
    cx: &Ctx<'_, U>,
    sent: Sent,
    slot: Slot,
    (queue, pass): (&mut Queue, &mut Pass),
    rec: &mut Record,
) -> Result<Settled, Failure> {
    let attempt = cx
        .up
        .attempt(&sent.target, sent.key(), cx.inbound, rec.id());
    // Boxed: the attempt (the HTTP client's request and the answer's first read) is the
    // deepest future of a request; held by pointer, the futures above it stay small, and a
    // request's state is not copied kilobytes at a time as it goes down the call chain.
    let attempt = Box::pin(timeout_at(
        cx.deadline,
        crate::telemetry::in_attempt(sent.span, attempt),
    ));
    match attempt.await {
        Ok(outcome) => Ok(settle(cx, (sent, slot, outcome), (queue, pass), rec).await),
        Err(_) => {
            let c = limits::classify_timeout("request deadline reached");
            rec.push_attempt(sent.failed(&c, None));
            Err(Failure::Deadline(cx.deadline_ms))
        }
    }
}
