//! Usage windows in routing: move traffic before a cap instead of finding it by hitting it.
//! Among providers of equal priority the one with the most room in its binding window goes
//! first (the sooner reset on a near tie); a provider whose recent burn rate runs its window out
//! before the reset goes behind the others; and a provider's `reserve` keeps the last share of
//! a window for requests pinned to it. Each decision is written into the request's attempts.

use super::candidates::skipped;
use super::context::Routing;
use super::record::Record;
use super::snapshot::{Selection, Target};
use super::types::Inbound;
use crate::limits::usage::Forecast;
use crate::providers::ProviderEntry;

/// Rooms closer than this are a tie, decided by the sooner reset.
const TIE: f64 = 0.1;

/// The account a request would use at `p`, with its forecast: the client's own login, the
/// CLI's login or keyless endpoint (""), or the key with the most room.
fn account(routing: &Routing, p: &ProviderEntry, inbound: &Inbound, now: i64) -> Fact {
    let fact = |id: String| {
        let f = routing.usage.forecast(p.id(), &id, now);
        (id, f)
    };
    if !p.config.credentials.is_baton() {
        let id = inbound.client.as_ref().map(|c| c.key.id.clone());
        return fact(id.unwrap_or_default());
    }
    if p.keys.is_empty() {
        return fact(String::new());
    }
    let room = |f: &Fact| f.1.as_ref().map_or(1.0, |f| f.room);
    p.keys
        .iter()
        .map(|k| fact(k.id.clone()))
        .max_by(|a, b| room(a).total_cmp(&room(b)))
        .unwrap_or_default()
}

/// What routing knows of one target's account: its id and where its windows are headed.
type Fact = (String, Option<Forecast>);

/// Orders (and for reserves, filters) `targets` by their accounts' usage windows.
pub(super) fn plan(
    routing: &Routing,
    inbound: &Inbound,
    targets: &mut Vec<Target>,
    selection: Selection,
    rec: &mut Record,
    now: i64,
    by_speed: bool,
) {
    if matches!(selection, Selection::Pinned | Selection::Provider) {
        return; // The client chose: a pinned request may use the reserve.
    }
    if routing.usage.is_empty() {
        return; // No provider has reported a window yet: nothing to weigh.
    }
    let facts = facts(routing, inbound, targets, now);
    // Reserves first: a window inside its reserve is for pinned requests only.
    let mut kept: Vec<(Target, Fact)> = Vec::with_capacity(targets.len());
    for (t, fact) in targets.drain(..).zip(facts) {
        match reserve_held(routing, &t.provider, &fact.0, now) {
            Some(why) => rec.push_attempt(skipped(&t, None, "reserve", Some(why), None)),
            None => kept.push((t, fact)),
        }
    }
    // Ordered by speed, the room decides no more than a reserve and a cap.
    if !by_speed {
        most_room_first(&mut kept);
    }
    defer_forecast_caps(routing, kept, targets, rec, now);
}

/// Each target's account and forecast (once per provider, however many there are).
fn facts(routing: &Routing, inbound: &Inbound, targets: &[Target], now: i64) -> Vec<Fact> {
    let mut seen: std::collections::HashMap<*const crate::providers::ProviderEntry, Fact> =
        std::collections::HashMap::with_capacity(targets.len());
    targets
        .iter()
        .map(|t| {
            let p = &t.provider;
            seen.entry(std::sync::Arc::as_ptr(p))
                .or_insert_with(|| account(routing, p, inbound, now))
                .clone()
        })
        .collect()
}

/// Among equal priority: most room first, the sooner reset on a near tie. Providers Baton
/// knows nothing about keep their place.
fn most_room_first(list: &mut [(Target, Fact)]) {
    each_priority_run(
        list,
        |x| x.0.provider.config.priority,
        |run| {
            let slots: Vec<usize> = (0..run.len()).filter(|&j| run[j].1 .1.is_some()).collect();
            if slots.len() > 1 {
                let mut group: Vec<(Target, Fact)> =
                    slots.iter().map(|&j| run[j].clone()).collect();
                group.sort_by(|a, b| better(a.1 .1.as_ref(), b.1 .1.as_ref()));
                for (&j, item) in slots.iter().zip(group) {
                    run[j] = item;
                }
            }
        },
    );
}

/// Runs `f` over each run of consecutive candidates of equal priority: the order between
/// priorities is the user's, and the orderings (room, speed) act within a run.
pub(super) fn each_priority_run<T>(
    list: &mut [T],
    priority: impl Fn(&T) -> i64,
    mut f: impl FnMut(&mut [T]),
) {
    let mut start = 0;
    while start < list.len() {
        let prio = priority(&list[start]);
        let end = (start..list.len())
            .find(|&j| priority(&list[j]) != prio)
            .unwrap_or(list.len());
        f(&mut list[start..end]);
        start = end;
    }
}

/// A provider that caps before its reset at the recent rate goes behind the others (when
/// there are others), with the reason in the request's attempts.
/// Attempt reasons are written for the log, in English.
const ENGLISH: crate::i18n::Locale = crate::i18n::Locale::ENGLISH;

fn defer_forecast_caps(
    routing: &Routing,
    list: Vec<(Target, Fact)>,
    targets: &mut Vec<Target>,
    rec: &mut Record,
    now: i64,
) {
    let mut back = Vec::new();
    for (t, (_, f)) in list {
        match f.as_ref().and_then(|f| f.caps_at_ms.map(|at| (at, f))) {
            Some((at, f)) => {
                let reset = f
                    .window
                    .resets_at_ms
                    .map(|r| crate::limits::clock_time(r, &routing.local_tz, now, ENGLISH))
                    .unwrap_or_default();
                let why = format!(
                    "{} window {:.0} % used; at the recent rate it runs out at {}, before its reset at {reset}",
                    f.window.label,
                    (1.0 - f.room) * 100.0,
                    crate::limits::clock_time(at, &routing.local_tz, now, ENGLISH),
                );
                back.push((t, why));
            }
            None => targets.push(t),
        }
    }
    if !targets.is_empty() {
        for (t, why) in &back {
            rec.push_attempt(skipped(t, None, "deferred", Some(why.clone()), None));
        }
    }
    targets.extend(back.into_iter().map(|(t, _)| t));
}

/// Whether `a` should go before `b`: more room, or about as much and a sooner reset.
fn better(a: Option<&Forecast>, b: Option<&Forecast>) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (Some(a), Some(b)) = (a, b) else {
        return Ordering::Equal;
    };
    if (a.room - b.room).abs() >= TIE {
        return b.room.total_cmp(&a.room);
    }
    let ra = a.window.resets_at_ms.unwrap_or(i64::MAX);
    let rb = b.window.resets_at_ms.unwrap_or(i64::MAX);
    ra.cmp(&rb).then(b.room.total_cmp(&a.room))
}

/// Why `p`'s account is inside a reserve it keeps (`reserve: {"7d": 0.1}`), if it is.
fn reserve_held(routing: &Routing, p: &ProviderEntry, account: &str, now: i64) -> Option<String> {
    p.config.reserve.iter().find_map(|(id, share)| {
        let w = routing.usage.window(p.id(), account, id, now)?;
        let used = w.used_or_status();
        (used >= 1.0 - share).then(|| {
            format!(
                "{id} {:.0} % used; the last {:.0} % is kept for requests pinned to {}",
                used * 100.0,
                share * 100.0,
                p.id()
            )
        })
    })
}
