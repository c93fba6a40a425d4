//! The steps of a pass (shared by the loop and a hedged race): admitting a candidate (its key,
//! its breaker), telling a failover, settling an attempt's outcome (its answer checked, or its
//! failure logged and weighed), and handing a winner on.

use super::pass::{Ctx, Pass, Queue, Sent, Verdict};
use crate::limits::breaker::Admit;
use crate::limits::ErrorClass;
use crate::providers::ApiKey;
use crate::router::candidates::{fmt_ms, pick_key, served, skipped};
use crate::router::context::Routing;
use crate::router::failure::{cooldown_until, on_failure, Decision, Failed, Next};
use crate::router::record::Record;
use crate::router::snapshot::Target;
use crate::router::types::{
    Answer, Attempt, Back, Completed, Failure, Pick, Served, Slot, Streamed,
};
use crate::structured::Checked;

/// How an attempt (or a race of two) ended.
pub(super) enum Settled {
    /// Its answer (the first content), with its slot, to hand on.
    Won(Box<(Sent, Slot, (Answer, Option<Checked>))>),
    /// It failed, logged and weighed: `Some` ends the request with it.
    Lost(Option<Failure>),
}

/// The key to use on `t`, or `None` (noted) while every key cools or its breaker is open.
pub(super) fn admit(
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
pub(super) fn announce_failover(routing: &Routing, pass: &mut Pass, t: &Target, request_id: &str) {
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

/// A failed attempt logged, its slot given back, and weighed: `Some` ends the request.
pub(super) async fn failed<U>(
    cx: &Ctx<'_, U>,
    sent: Sent,
    slot: Slot,
    v: Verdict,
    (queue, pass): (&mut Queue, &mut Pass),
    rec: &mut Record,
) -> Option<Failure> {
    let t = &sent.target;
    rec.push_attempt(sent.failed(&v.c, v.status));
    drop(slot);
    tracing::info!(request_id = rec.id(), target = %t.label(), class = v.c.class.as_str(), reason = %v.c.reason, "attempt failed");
    weigh(cx, sent, v, queue, pass).await
}

/// A successful attempt: the target's health is restored and the answer handed on (a stream
/// with the candidates that may resume it if it breaks).
pub(super) fn answered<U>(
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
    let mut ok = served(&sent.target, sent.key(), sent.started);
    ok.hedge = sent.hedge;
    ok.span = sent.span;
    rec.push_attempt(ok);
    routing.remember(
        &cx.snap.routing.affinity,
        cx.inbound.conversation.as_ref(),
        crate::router::affinity::Stick {
            provider: p.id().to_string(),
            model: model.clone(),
            key: sent.key().map(|k| k.id.clone()).unwrap_or_default(),
        },
    );
    let target = sent.target;
    match answer {
        Answer::Complete(reply, usage, _) => Served::Complete(Completed {
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
                output,
            })
        }
    }
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

/// A lane's outcome: its answer checked (a winner, and the failover to it told when the first
/// failed), or its failure logged and weighed.
pub(super) async fn settle<U>(
    cx: &Ctx<'_, U>,
    (sent, slot, outcome): (Sent, Slot, Attempt),
    (queue, pass): (&mut Queue, &mut Pass),
    rec: &mut Record,
) -> Settled {
    let (outcome, checked) = crate::router::output::verify(
        cx.routing,
        cx.inbound,
        &sent.target,
        outcome,
        rec.id(),
        cx.deadline,
    )
    .await;
    match outcome {
        Attempt::Served(answer) => {
            announce_failover(cx.routing, pass, &sent.target, rec.id());
            Settled::Won(Box::new((sent, slot, (answer, checked))))
        }
        Attempt::Failed {
            classified,
            status,
            body,
        } => {
            let v = Verdict {
                c: classified,
                status,
                body,
            };
            // Boxed: a failure's weighing (cooldowns, the shared state's barrier) is a large
            // future, and every future above this one would carry its size on every request.
            Settled::Lost(Box::pin(failed(cx, sent, slot, v, (queue, pass), rec)).await)
        }
    }
}
