//! Candidate selection and the fallback loop: try targets in order, skip cooling or saturated
//! ones, classify each failure, cool what the provider said, and stop at the first success or
//! at an error the client must fix.

pub mod affinity;
mod attempt;
pub(crate) mod candidates;
mod cli;
mod context;
mod failure;
mod fallback;
mod forecast;
mod hosted;
mod live;
mod output;
pub mod record;
pub(crate) mod searcher;
pub mod snapshot;
pub(crate) mod speed;

pub mod stream;
#[cfg(test)]
mod tests;
mod types;

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::limits::{self, Classified};
pub(crate) use candidates::skipped;
use candidates::*;
pub use context::{Routing, Sink};
pub(crate) use live::Live;
use record::Record;
use snapshot::{Selection, Snapshot, Target};
pub use types::*;

/// Why a `credentials: "client"` provider was passed over.
const OTHER_VENDOR: &str = "it calls with the client's own login, and this request's login belongs to another vendor (a login goes only to its own vendor's providers)";
const NO_CLIENT_CREDENTIAL: &str = "it calls with the client's own credential, and this request carried none (send Baton's key in x-baton-key and your own in Authorization or x-api-key)";

/// Runs the fallback loop for one request.
pub async fn dispatch(
    routing: &Routing,
    snap: &Snapshot,
    inbound: &Inbound,
    targets: Vec<Target>,
    selection: Selection,
    rec: &mut Record,
) -> Result<Served, Failure> {
    dispatch_via(
        &Live(routing),
        routing,
        snap,
        inbound,
        targets,
        selection,
        rec,
    )
    .await
}

/// The candidates in the order they are tried: a provider about to run out behind the others
/// (`auto`), the fastest first among equals for a route ordered by speed, then the usage
/// windows (reserves kept, the most room first unless ordered by speed, a forecast cap behind).
fn order(
    routing: &Routing,
    snap: &Snapshot,
    inbound: &Inbound,
    targets: &mut Vec<Target>,
    selection: Selection,
    rec: &mut Record,
    now: i64,
) {
    if matches!(selection, Selection::Auto) {
        // Once per target (a stable sort), not once per comparison; no sort (nor its buffer)
        // when none is about to run out, as on most requests.
        let first = targets
            .iter()
            .position(|t| nearly_exhausted(&t.provider, now));
        if first.is_some_and(|i| i + 1 < targets.len()) {
            targets.sort_by_cached_key(|t| nearly_exhausted(&t.provider, now));
        }
    }
    let by_speed = snap.orders_by_speed(selection, &inbound.canonical.model);
    if by_speed {
        routing.speeds.fastest_first(targets);
    }
    forecast::plan(routing, inbound, targets, selection, rec, now, by_speed);
}

/// The fallback loop over `up`.
pub(crate) async fn dispatch_via<U: Upstream>(
    up: &U,
    routing: &Routing,
    snap: &Snapshot,
    inbound: &Inbound,
    targets: Vec<Target>,
    selection: Selection,
    rec: &mut Record,
) -> Result<Served, Failure> {
    let mut targets = able(snap, inbound, targets, selection, rec)?;
    let now = routing.clock.now_ms();
    order(routing, snap, inbound, &mut targets, selection, rec, now);
    // The conversation goes back where it was served, to keep that prompt cache warm.
    let stick = routing
        .stuck(
            &snap.routing.affinity,
            inbound.conversation.as_ref().filter(|_| inbound.follows),
        )
        .await;
    if let Some(s) = &stick {
        if !matches!(selection, Selection::Pinned | Selection::Provider) {
            stuck_first(&mut targets, s, now);
        }
    }
    // A client may shorten the operator's bound, never lengthen it.
    let deadline_ms = inbound
        .deadline_ms
        .map_or(snap.routing.request_timeout_ms, |d| {
            d.min(snap.routing.request_timeout_ms)
        });
    let deadline =
        tokio::time::Instant::from_std(rec.started()) + Duration::from_millis(deadline_ms);
    let mut waited_for_reset = false;
    let hedging = snap.hedging(selection, &inbound.canonical.model);
    let mut targets = Some(targets);
    loop {
        let cx = fallback::Ctx {
            up,
            routing,
            snap,
            inbound,
            deadline,
            deadline_ms,
            stick: stick.as_ref(),
            hedging,
        };
        // The list is kept for a second pass only when one may follow (waiting for a reset).
        let bound = snap.routing.wait_for_reset_ms as i64;
        let these = match &targets {
            Some(t) if bound > 0 && !waited_for_reset => t.clone(),
            _ => targets.take().unwrap_or_default(),
        };
        let result = fallback::run_candidates(&cx, these, rec).await;
        // Opt-in: when everything is rate-limited but the soonest reset is close, wait for it once.
        if let Err(Failure::Exhausted {
            retry_at_ms: Some(at),
            ..
        }) = &result
        {
            let wait = at - routing.clock.now_ms();
            let fits =
                tokio::time::Instant::now() + Duration::from_millis(wait.max(0) as u64) < deadline;
            if !waited_for_reset && bound > 0 && wait <= bound && fits {
                waited_for_reset = true;
                tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
                continue;
            }
        }
        return result;
    }
}

/// The targets that can take this request: those that lack what it needs (tools, images,
/// context) or cannot take its shape (a CLI's one prompt) are passed over and logged with the
/// reason; a request pinned to one learns why it cannot go there.
/// Long because it is one pass over every candidate: each is checked for what the request
/// needs, a conversation held upstream, the client's own credential and a CLI's one prompt
/// (in that order), and the error told when none is left is that of the last check to empty the
/// list — the checks were four passes, and 200 providers made them a tenth of a request; a
/// glance (at all of `auto`'s candidates at once, then at each) spares most requests the rest.
fn able(
    snap: &Snapshot,
    inbound: &Inbound,
    mut targets: Vec<Target>,
    selection: Selection,
    rec: &mut Record,
) -> Result<Vec<Target>, Failure> {
    if snap.enabled().next().is_none() {
        return Err(Failure::NoProvider(if snap.providers.is_empty() {
            "No provider is configured. Add one to the config file (see config.example.json) and restart, or add one in the UI.".into()
        } else {
            "Every provider is disabled. Enable one in the UI or the config file.".into()
        }));
    }
    // A request pinned to a target is sent even when its capabilities look wrong.
    let needs = !matches!(selection, Selection::Pinned | Selection::Provider);
    let mut counts = candidates::Counts::default();
    let stored = inbound.continues.as_ref().zip(inbound.original.as_ref());
    // `auto`'s candidates (some of the snapshot's) all take what most requests need: nothing
    // to check one by one, however many there are.
    if matches!(selection, Selection::Auto)
        && !targets.is_empty()
        && stored.is_none()
        && snap.auto_glance().takes(&inbound.needs)
    {
        return Ok(targets);
    }
    let mut why = |t: &Target| -> Option<(Check, String)> {
        let p = &t.provider.config;
        if needs {
            let n = counts.needs_for(&inbound.canonical, &inbound.needs, &t.model);
            if let Some(r) = cannot_serve(&t.model, &n) {
                return Some((Check::Needs, r));
            }
        }
        if let Some((c, _)) = stored.filter(|(_, o)| p.kind.wire() != Some(o.wire)) {
            return Some((Check::Stored, c.why.to_string()));
        }
        // A provider that calls with the client's own credential needs one, and one of its
        // own vendor's (a capped Claude login must never reach the ChatGPT backend, nor a
        // ChatGPT token Anthropic).
        let credential = match &inbound.client {
            _ if p.credentials.is_baton() => None,
            None => Some(NO_CLIENT_CREDENTIAL),
            Some(c) if !c.fits(p) => Some(OTHER_VENDOR),
            Some(_) => None,
        };
        if let Some(r) = credential {
            return Some((Check::Credential, r.to_string()));
        }
        // A CLI takes one prompt: `auto` skips CLI providers for conversations they cannot
        // take, and a request pinned to one learns why it cannot go there.
        p.kind
            .is_cli()
            .then(|| crate::providers::cli::shape_problem(&inbound.canonical, p.flatten_history))
            .flatten()
            .map(|r| (Check::Cli, r))
    };
    // What passes every check at a glance (most candidates of most requests, and each of 200
    // providers on every `auto` one): the same verdict as `why` without its calls and copies,
    // by the rule the shortcut above applies to all of `auto` at once.
    let quick = |t: &Target| {
        let g = snapshot::Glance::of_target(t);
        stored.is_none()
            && if needs {
                g.takes(&inbound.needs)
            } else {
                g.plain()
            }
    };
    let (mut last, mut first_cli) = (None, None);
    targets.retain(|t| {
        if quick(t) {
            return true;
        }
        let Some((check, reason)) = why(t) else {
            return true;
        };
        last = last.max(Some(check));
        if check == Check::Cli && first_cli.is_none() {
            first_cli = Some((t.provider.id().to_string(), reason.clone()));
        }
        // Passed over: Activity says why for each one.
        let s = skipped(t, None, "cannot take this request", Some(reason), None);
        rec.push_attempt(s);
        false
    });
    if !targets.is_empty() {
        return Ok(targets);
    }
    Err(match (last, stored, first_cli) {
        (Some(Check::Needs), ..) => Failure::Unsupported(unsupported_message(&inbound.needs)),
        (Some(Check::Stored), Some((c, _)), _) => c.failure.clone(),
        (Some(Check::Credential), ..) if inbound.client.is_none() => Failure::Unsupported(format!(
            "This model is served with your own subscription: {NO_CLIENT_CREDENTIAL}."
        )),
        (Some(Check::Cli), _, Some((id, why))) => Failure::Unsupported(format!(
            "This request cannot go to a subscription CLI provider: `{id}`: {why}."
        )),
        _ => Failure::NoProvider("No enabled provider is available for this model.".into()),
    })
}

/// What passes a candidate over, in the order the checks run (and their errors are told).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Check {
    Needs,
    /// A conversation held upstream can go only to the kind of server that holds it: Baton
    /// keeps no conversation state, and no other format could be given the turns before.
    /// A Responses request continuing a stored one (`previous_response_id`) goes only to a
    /// Responses upstream (elsewhere a 400 that says to send the whole conversation); an
    /// Anthropic client continuing a message thread (the message-threads beta, which sends
    /// only the new turn) only to an Anthropic one (elsewhere "thread not found", which the
    /// Anthropic SDKs answer by replaying the whole conversation under a new thread).
    Stored,
    Credential,
    Cli,
}

/// A limit the UI's Test found on a saved provider, applied like routing would (same scope
/// rules, same bounds), so the row and the next request agree with what the test showed.
pub fn adopt_limit(
    routing: &Routing,
    target: &Target,
    key: Option<&crate::providers::ApiKey>,
    c: &Classified,
) {
    let snap = routing.snapshot.load();
    // Started, or (already cooling) replaced with what the test found.
    failure::apply_cooldown(routing, &snap, target, key, c);
}

/// The UI's "Test": one tiny real request (a one-word answer) to `target` through the same
/// attempt path routing uses, with `key` (or none). Changes no routing state.
pub async fn test_target(
    routing: &Routing,
    target: &Target,
    key: Option<&crate::providers::ApiKey>,
) -> Result<u64, Classified> {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(target.model.id.clone()));
    body.insert(
        "messages".into(),
        serde_json::json!([{"role": "user", "content": "Reply with the single word: OK"}]),
    );
    body.insert("max_tokens".into(), Value::from(8));
    let canonical = match crate::canonical::openai::request_from_openai(&body) {
        Ok(c) => c,
        Err(e) => return Err(limits::classify_transport(e.message)),
    };
    let inbound = Inbound {
        needs: canonical.needs(),
        canonical,
        openai: body.into(),
        original: None,
        verbatim: Default::default(),
        continues: None,
        expect: Default::default(),
        trace: None,
        capture: None,
        client: None,
        anthropic_beta: None,
        deadline_ms: None,
        conversation: None,
        follows: false,
    };
    let started = Instant::now();
    let limit = Duration::from_millis(
        target.provider.config.timeouts.first_byte_ms + target.provider.config.timeouts.idle_ms,
    );
    match tokio::time::timeout(limit, Live(routing).attempt(target, key, &inbound, "test")).await {
        Err(_) => Err(limits::classify_timeout("no answer in time")),
        Ok(Attempt::Served(_)) => Ok(started.elapsed().as_millis() as u64),
        Ok(Attempt::Failed { classified, .. }) => Err(classified),
    }
}
