//! Hedging (`routing.hedge`, off by default): when a request's first candidate has not answered
//! with content after a wait (a fixed one, or its own measured p95 time to first token), the
//! same request goes to the next candidate too. The first *content* wins: an attempt ends only
//! at its first content or whole answer (`attempt`), so an error frame or a refusal is a
//! failure, never a win, and a JSON answer that does not fit is one too (`output`). The loser
//! is cancelled at once (its future dropped, which closes its connection) and logged as
//! `outrun` with the prompt tokens it is estimated to have cost, priced.
//!
//! Only Baton's own keys over HTTP race: a subscription passed through (the client's login is
//! the client's to spend) and a CLI (a process per try) never do, nor a request Baton runs a
//! hosted search around. A budget bounds the extra requests: each request that could be hedged
//! earns `budgetPercent` / 100 of a hedge, and each hedge spends one (one is held at the start).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use super::pass::{shared_slot, Ctx, Pass, Queue, Sent};
use super::steps::{admit, settle, Settled};
use crate::config::{HedgeAfter, Percentile};
use crate::router::candidates::{try_slot, CLIENT_KEY};
use crate::router::record::Record;
use crate::router::snapshot::Target;
use crate::router::types::{Attempt, Failure, Inbound, Slot, Upstream};

/// Whether `t` may race: Baton's own key over HTTP, with no search Baton runs around it.
fn may_race(t: &Target, inbound: &Inbound) -> bool {
    !t.provider.config.kind.is_cli()
        && t.provider.config.credentials.is_baton()
        && !crate::router::hosted::serves(t, inbound)
}

/// The next candidate, when it may take a hedge beside `first` (another provider).
fn next_for<'q>(queue: &'q Queue, first: &Target, inbound: &Inbound) -> Option<&'q Target> {
    queue
        .pending
        .front()
        .filter(|t| t.provider.id() != first.provider.id() && may_race(t, inbound))
}

/// How long `first` is given before a hedge goes beside it, when this attempt is hedged (once
/// a request, while a next candidate may take it); the request earns its share of the budget.
pub(super) fn delay<U>(
    cx: &Ctx<'_, U>,
    first: &Target,
    queue: &Queue,
    pass: &mut Pass,
) -> Option<Duration> {
    if pass.hedged || !first.provider.config.hedge.unwrap_or(cx.hedging) {
        return None;
    }
    if !may_race(first, cx.inbound) || next_for(queue, first, cx.inbound).is_none() {
        return None;
    }
    pass.hedged = true;
    let h = &cx.snap.routing.hedge;
    cx.routing.hedges.earn(h.budget_percent);
    let ms = match h.after {
        HedgeAfter::Ms(ms) => ms,
        HedgeAfter::Measured(Percentile::P95) => cx
            .routing
            .speeds
            .p95(first.provider.id(), &first.model.id)
            .unwrap_or(h.unmeasured_ms),
    };
    Some(Duration::from_millis(ms))
}

/// The next candidate sent beside the first: it has a slot free now (a hedge never waits for
/// one), a key that is not cooling, and the budget holds a hedge.
async fn take_second<U>(
    cx: &Ctx<'_, U>,
    first: &Target,
    queue: &mut Queue,
    pass: &mut Pass,
    rec: &mut Record,
) -> Option<(Sent, Slot)> {
    let t = next_for(queue, first, cx.inbound)?;
    if t.provider.unavailable().is_some() {
        return None;
    }
    let mut slot = try_slot(t)?;
    if !shared_slot(cx, t, &mut slot).await {
        return None;
    }
    let target = queue.pending.pop_front()?;
    let client = cx.inbound.client.as_ref().map(|c| &c.key);
    // A candidate that cools is passed over (and logged) as the loop would have.
    let key = admit(cx.routing, &target, client, None, pass, rec)?;
    if !cx.routing.hedges.spend() {
        queue.pending.push_front(target);
        return None;
    }
    if key != CLIENT_KEY {
        target.provider.runtime.used_key(key);
    }
    tracing::info!(request_id = rec.id(), first = %first.label(), hedge = %target.label(), "hedging a slow first attempt");
    let sent = Sent {
        target,
        key,
        client: None,
        started: Instant::now(),
        sent_ms: cx.routing.clock.now_ms(),
        hedge: true,
        span: cx.inbound.attempt_span(),
    };
    Some((sent, slot))
}

/// One attempt on its way: it owns what it was sent with and its slot (given back when a lost
/// lane is dropped), and hands them back with its outcome.
type Lane<'a> = Pin<Box<dyn Future<Output = (Sent, Slot, Attempt)> + Send + 'a>>;

/// Sends `first`; past `delay` without its answer, sends the next candidate beside it, and
/// takes whichever answers with content first.
pub(super) async fn race<U: Upstream>(
    cx: &Ctx<'_, U>,
    first: Sent,
    slot: Slot,
    delay: Duration,
    queue: &mut Queue,
    pass: &mut Pass,
    rec: &mut Record,
) -> Settled {
    let id = rec.id().to_string();
    let id = id.as_str();
    let go = |s: Sent, slot: Slot| -> Lane<'_> {
        Box::pin(async move {
            let attempt = cx.up.attempt(&s.target, s.key(), cx.inbound, id);
            let outcome = crate::telemetry::in_attempt(s.span, attempt).await;
            (s, slot, outcome)
        })
    };
    // What each lane was sent with, for the log when it does not finish.
    let mut shadows = vec![first.clone()];
    let mut a = go(first, slot);
    tokio::select! {
        done = &mut a => return settle(cx, done, (queue, pass), rec).await,
        _ = tokio::time::sleep(delay) => {}
        _ = tokio::time::sleep_until(cx.deadline) => return timed_out(cx, &shadows, rec),
    }
    let mut b = None;
    if let Some((second, slot)) = take_second(cx, &shadows[0].target, queue, pass, rec).await {
        shadows.push(second.clone());
        b = Some(go(second, slot));
    }
    let mut live = [true, b.is_some()];
    let mut held = None;
    loop {
        let (i, done) = tokio::select! {
            done = &mut a, if live[0] => (0, done),
            done = async {
                match b.as_mut() {
                    Some(lane) => lane.await,
                    None => std::future::pending().await,
                }
            }, if live[1] => (1, done),
            _ = tokio::time::sleep_until(cx.deadline) => {
                let open: Vec<Sent> = shadows.iter().zip(live).filter(|(_, l)| *l).map(|(s, _)| s.clone()).collect();
                return timed_out(cx, &open, rec);
            }
        };
        live[i] = false;
        let Some(o) = live.iter().position(|l| *l) else {
            return match settle(cx, done, (queue, pass), rec).await {
                Settled::Lost(f) => Settled::Lost(held.or(f)),
                won => won,
            };
        };
        // No retry on the spot while the other attempt runs: the race goes on.
        pass.retried.insert(shadows[i].target.label());
        match settle(cx, done, (queue, pass), rec).await {
            Settled::Won(won) => {
                let price = shadows[o].target.model.price;
                rec.push_outrun(outrun(&shadows[o], &won.0, cx.inbound), price);
                // Returning drops the other lane: its connection closes and its slot is free.
                return Settled::Won(won);
            }
            Settled::Lost(f) => {
                if let Some(f) = f {
                    held.get_or_insert(f);
                }
            }
        }
    }
}

/// The lane that lost: sent, cancelled before it answered, its prompt estimated.
fn outrun(loser: &Sent, winner: &Sent, inbound: &Inbound) -> crate::store::AttemptRecord {
    let mut a = crate::router::candidates::served(&loser.target, loser.key(), loser.started);
    a.class = crate::limits::Outcome::Outrun;
    a.status = None;
    a.hedge = loser.hedge;
    a.span = loser.span;
    a.reason = Some(format!(
        "cancelled: {} answered first",
        winner.target.label()
    ));
    a.input_tokens = Some(inbound.needs.prompt_tokens());
    a
}

/// The request's deadline passed with these lanes still waiting: each logged as timed out.
fn timed_out<U>(cx: &Ctx<'_, U>, open: &[Sent], rec: &mut Record) -> Settled {
    let c = crate::limits::classify_timeout("request deadline reached");
    for s in open {
        rec.push_attempt(s.failed(&c, None));
    }
    Settled::Lost(Some(Failure::Deadline(cx.deadline_ms)))
}
