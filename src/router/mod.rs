//! Candidate selection and the fallback loop: try targets in order, skip cooling or saturated
//! ones, classify each failure, cool what the provider said, and stop at the first success or
//! at an error the client must fix.

mod attempt;
pub(crate) mod candidates;
mod cli;
mod failure;
pub mod record;
pub mod snapshot;
pub mod sse;
pub mod stream;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::timeout_at;

use crate::canonical::{ChatRequest, Needs, Usage};
use crate::gateway::Core;
use crate::limits::{self, Classified, ErrorClass};
use crate::providers::codec::Codec;
use crate::providers::ProviderEntry;
pub(crate) use candidates::skipped;
use candidates::*;
use failure::{cooldown_until, on_failure, Next};
use limits::breaker::Admit;
use record::Record;
use snapshot::{Selection, Snapshot, Target};
use sse::SseReader;

/// Largest non-streamed upstream body accepted.
const MAX_UPSTREAM_BODY: usize = 64 * 1024 * 1024;
/// Longest error body read for classification.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Events buffered before the first content event; past this the stream is committed anyway.
const MAX_PRELUDE_EVENTS: usize = 64;

pub use crate::providers::outbound::Wire;

/// A client request after parsing and authentication.
pub struct Inbound {
    /// The request in OpenAI form (the client's own body when it spoke OpenAI).
    pub body: Map<String, Value>,
    /// The client's own body when it spoke Anthropic: sent unchanged (but for the model) to
    /// Anthropic upstreams, keeping thinking signatures, cache control and betas.
    pub anthropic_body: Option<Map<String, Value>>,
    /// `anthropic-beta` from the client, passed to Anthropic upstreams.
    pub anthropic_beta: Option<String>,
    pub canonical: ChatRequest,
    pub needs: Needs,
    /// Per-request deadline from `x-gateway-timeout-ms`, overriding `routing.requestTimeoutMs`.
    pub deadline_ms: Option<u64>,
}

/// A concurrency slot on a provider, released when the answer is complete.
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    /// The slot every instance counts, when state is shared.
    _lease: Option<crate::shared::Lease>,
    provider: Arc<ProviderEntry>,
}

impl Slot {
    fn new(provider: Arc<ProviderEntry>, permit: Option<OwnedSemaphorePermit>) -> Self {
        provider.runtime.in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            _permit: permit,
            _lease: None,
            provider,
        }
    }
}

/// How often a request waiting for another instance to free a shared slot looks again.
const SHARED_SLOT_POLL: Duration = Duration::from_millis(20);

impl Drop for Slot {
    fn drop(&mut self) {
        self.provider
            .runtime
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A successful upstream answer.
pub enum Served {
    Complete {
        target: Target,
        body: Bytes,
        usage: Option<Usage>,
        slot: Slot,
        /// The answer's format (the upstream's API).
        wire: Wire,
    },
    Stream {
        target: Target,
        reader: SseReader,
        /// The events held back until the first content, decoded once.
        prelude: Vec<Held>,
        /// The decoder those events went through, handed on to the pump.
        codec: Codec,
        slot: Slot,
        /// Candidates that may continue this stream if it breaks (route `resumeOnBreak`).
        resume: Vec<Target>,
    },
}

/// Why no upstream answer can be given.
#[derive(Debug)]
pub enum Failure {
    /// The upstream rejected the request itself; its own error goes back to the client.
    Client { status: u16, body: Bytes },
    /// Every candidate failed or is cooling; `retry_at_ms` is set when all were rate-limited.
    Exhausted {
        retry_at_ms: Option<i64>,
        summary: String,
    },
    /// Nothing to route to (no providers, all disabled or unavailable).
    NoProvider(String),
    /// No candidate has the capabilities this request needs.
    Unsupported(String),
    /// Every candidate was busy for the whole queue wait, or the queue was full.
    Busy {
        retry_after_ms: u64,
        message: String,
    },
    /// The request's deadline passed.
    Deadline(u64),
}

/// What one attempt produced before the target and slot are attached.
pub(crate) enum Answer {
    Complete(Bytes, Option<Usage>, Wire),
    Stream {
        reader: SseReader,
        prelude: Vec<Held>,
        codec: Codec,
    },
}

/// One stream event held back before the commit: as received, and decoded.
pub struct Held {
    pub raw: Bytes,
    pub decoded: crate::providers::codec::Decoded,
}

pub(crate) enum Attempt {
    Served(Answer),
    Failed {
        classified: Classified,
        status: Option<u16>,
        body: Option<Bytes>,
    },
}

pub(crate) enum Pick {
    Go(usize),
    /// Out until this instant, why, and whether that is a limit to wait out (rate or spending)
    /// rather than a failure (breaker, overload, a rejected key).
    Cooling(i64, String, bool),
}

/// How the fallback loop reaches an upstream: one call per attempt, up to the first content of
/// a stream or the whole answer. [`Live`] sends HTTP (the request built for the target's kind,
/// the answer read by its codec) or spawns a CLI; the loop's unit tests script answers.
pub(crate) trait Upstream: Sync {
    fn attempt<'a>(
        &'a self,
        t: &'a Target,
        key: Option<&'a crate::providers::ApiKey>,
        inbound: &'a Inbound,
        request_id: &'a str,
    ) -> impl std::future::Future<Output = Attempt> + Send + 'a;
}

/// The real upstreams.
pub(crate) struct Live<'a>(pub &'a Core);

impl Upstream for Live<'_> {
    fn attempt<'a>(
        &'a self,
        t: &'a Target,
        key: Option<&'a crate::providers::ApiKey>,
        inbound: &'a Inbound,
        request_id: &'a str,
    ) -> impl std::future::Future<Output = Attempt> + Send + 'a {
        attempt::attempt(self.0, t, key, inbound, request_id)
    }
}

/// Runs the fallback loop for one request.
pub async fn dispatch(
    core: &Core,
    snap: &Snapshot,
    inbound: &Inbound,
    targets: Vec<Target>,
    selection: Selection,
    rec: &mut Record,
) -> Result<Served, Failure> {
    dispatch_via(&Live(core), core, snap, inbound, targets, selection, rec).await
}

/// The fallback loop over `up`.
pub(crate) async fn dispatch_via<U: Upstream>(
    up: &U,
    core: &Core,
    snap: &Snapshot,
    inbound: &Inbound,
    mut targets: Vec<Target>,
    selection: Selection,
    rec: &mut Record,
) -> Result<Served, Failure> {
    if snap.enabled().next().is_none() {
        return Err(Failure::NoProvider(if snap.providers.is_empty() {
            "No provider is configured. Add one to the config file (see config.example.json) and restart, or add one in the UI.".into()
        } else {
            "Every provider is disabled. Enable one in the UI or the config file.".into()
        }));
    }
    if !matches!(selection, Selection::Pinned | Selection::Provider) {
        let needs = inbound.needs;
        let before = targets.len();
        // Passed over for what the request needs: Activity says so for each one.
        targets.retain(|t| match cannot_serve(&t.model, &needs) {
            None => true,
            Some(why) => {
                rec.push_attempt(skipped(
                    t,
                    None,
                    "cannot take this request",
                    Some(why),
                    None,
                ));
                false
            }
        });
        if targets.is_empty() && before > 0 {
            return Err(Failure::Unsupported(unsupported_message(&needs)));
        }
    }
    // A CLI takes one prompt: `auto` skips CLI providers for conversations they cannot take,
    // and a request pinned to one learns why it cannot go there.
    let mut cli_problem = None;
    targets.retain(|t| {
        let p = &t.provider.config;
        if !p.kind.is_cli() {
            return true;
        }
        match crate::providers::cli::shape_problem(&inbound.canonical, p.flatten_history) {
            Some(why) => {
                rec.push_attempt(skipped(
                    t,
                    None,
                    "cannot take this request",
                    Some(why.to_string()),
                    None,
                ));
                cli_problem.get_or_insert(format!("`{}`: {why}", p.id));
                false
            }
            None => true,
        }
    });
    if targets.is_empty() {
        if let Some(why) = cli_problem {
            return Err(Failure::Unsupported(format!(
                "This request cannot go to a subscription CLI provider: {why}."
            )));
        }
        return Err(Failure::NoProvider(
            "No enabled provider is available for this model.".into(),
        ));
    }
    if matches!(selection, Selection::Auto) {
        // Proactive: providers about to run out go behind the others (order otherwise kept).
        let now = core.clock.now_ms();
        targets.sort_by_key(|t| nearly_exhausted(&t.provider, now));
    }
    let deadline_ms = inbound
        .deadline_ms
        .unwrap_or(snap.routing.request_timeout_ms);
    let deadline =
        tokio::time::Instant::from_std(rec.started()) + Duration::from_millis(deadline_ms);
    let mut waited_for_reset = false;
    loop {
        let result = run_candidates(
            up,
            core,
            snap,
            inbound,
            targets.clone(),
            rec,
            (deadline, deadline_ms),
        )
        .await;
        // Opt-in: when everything is rate-limited but the soonest reset is close, wait for it once.
        if let Err(Failure::Exhausted {
            retry_at_ms: Some(at),
            ..
        }) = &result
        {
            let wait = at - core.clock.now_ms();
            let bound = snap.routing.wait_for_reset_ms as i64;
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

/// Per-target bookkeeping within one pass over the candidates.
#[derive(Default)]
struct Pass {
    soonest_reset: Option<i64>,
    all_limited: bool,
    context_retry: Option<Option<u64>>,
    /// The failure to announce as a failover when the next target is tried: label,
    /// verdict, display name.
    last_failure: Option<(String, Classified, String)>,
    summary: Vec<String>,
    /// Targets already retried on the spot (lone 500 / reset, or a short rate-limit wait).
    retried: std::collections::HashSet<String>,
    /// The first answer saying the request alone is over a provider's per-minute token
    /// limit: what the client gets (as a 413) if no other candidate takes it.
    too_large: Option<Bytes>,
}

impl Pass {
    fn limited_until(&mut self, until: i64) {
        self.soonest_reset = Some(self.soonest_reset.map_or(until, |s| s.min(until)));
    }
}

fn announce(t: &Target, c: Classified) -> Option<(String, Classified, String)> {
    Some((t.label(), c, t.provider.config.display_name().to_string()))
}

async fn run_candidates<U: Upstream>(
    up: &U,
    core: &Core,
    snap: &Snapshot,
    inbound: &Inbound,
    targets: Vec<Target>,
    rec: &mut Record,
    (deadline, deadline_ms): (tokio::time::Instant, u64),
) -> Result<Served, Failure> {
    let mut pending: VecDeque<Target> = targets.into();
    let mut busy: Vec<Target> = Vec::new();
    // Targets whose shared slots (across instances) are all taken, and how long to wait.
    let mut shared_busy: Vec<Target> = Vec::new();
    let mut shared_wait_until: Option<tokio::time::Instant> = None;
    let mut pass = Pass {
        all_limited: true,
        ..Pass::default()
    };
    loop {
        let (target, slot) = if let Some(t) = pending.pop_front() {
            if let Some(window) = pass.context_retry {
                if !larger_window(t.model.context_window, window) {
                    continue;
                }
            }
            if let Some(reason) = t.provider.unavailable() {
                pass.all_limited = false;
                pass.summary.push(format!("{}: {reason}", t.label()));
                rec.push_attempt(skipped(&t, None, "unavailable", Some(reason), None));
                continue;
            }
            match try_slot(&t) {
                Some(slot) => (t, slot),
                None => {
                    busy.push(t);
                    continue;
                }
            }
        } else if !busy.is_empty() {
            match wait_for_slot(core, &mut busy, snap, deadline).await {
                Ok(ts) => ts,
                Err(f) => {
                    if rec.sent_count() == 0 {
                        return Err(f);
                    }
                    break;
                }
            }
        } else if !shared_busy.is_empty() {
            let until = *shared_wait_until.get_or_insert_with(|| {
                (tokio::time::Instant::now() + Duration::from_millis(snap.routing.queue_timeout_ms))
                    .min(deadline)
            });
            if tokio::time::Instant::now() + SHARED_SLOT_POLL >= until {
                if rec.sent_count() == 0 {
                    return Err(Failure::Busy {
                        retry_after_ms: 1_000,
                        message: format!(
                            "Every candidate provider was at its concurrency limit across all Baton instances for {} ms ({}).",
                            snap.routing.queue_timeout_ms,
                            shared_busy
                                .iter()
                                .map(Target::label)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    });
                }
                break;
            }
            tokio::time::sleep(SHARED_SLOT_POLL).await;
            pending.extend(shared_busy.drain(..));
            continue;
        } else {
            break;
        };
        let mut slot = slot;
        match core
            .shared
            .lease(
                target.provider.id(),
                target.provider.config.concurrency(),
                snap.routing.request_timeout_ms.max(60_000),
            )
            .await
        {
            crate::shared::LeaseResult::Local => {}
            crate::shared::LeaseResult::Held(lease) => slot._lease = Some(lease),
            crate::shared::LeaseResult::Full => {
                drop(slot);
                shared_busy.push(target);
                continue;
            }
        }

        let key = match pick_key(core, &target) {
            Pick::Go(i) => i,
            Pick::Cooling(until, reason, limit) => {
                // Only limits make "every candidate is rate-limited" true: a provider out after
                // failures (an unreachable host behind an open breaker) is not rate-limited.
                if limit {
                    pass.limited_until(until);
                } else {
                    pass.all_limited = false;
                }
                pass.summary.push(format!(
                    "{}: cooling until {} ({reason})",
                    target.label(),
                    fmt_ms(until)
                ));
                rec.push_attempt(skipped(&target, None, "cooling", Some(reason), Some(until)));
                continue;
            }
        };
        let now = core.clock.now_ms();
        if let Admit::Open(until) = target.provider.breaker(&target.model.id).admit(now) {
            pass.all_limited = false;
            pass.summary
                .push(format!("{}: circuit breaker open", target.label()));
            rec.push_attempt(skipped(&target, None, "breaker open", None, Some(until)));
            continue;
        }
        let api_key = target.provider.keys.get(key);
        if api_key.is_some() {
            target.provider.runtime.used_key(key);
        }
        if let Some((from, c, from_name)) = pass.last_failure.take() {
            if from != target.label() {
                let to_name = target.provider.config.display_name();
                core.events.emit(crate::events::Event::Failover {
                    request_id: rec.id().to_string(),
                    message: crate::events::failover_message(
                        &from_name,
                        to_name,
                        &c,
                        &core.local_tz,
                        core.clock.now_ms(),
                    ),
                    from,
                    to: target.label(),
                    class: c.class.as_str().into(),
                    reason: c.reason,
                    reset_at_ms: c.reset_at_ms,
                });
            }
        }

        let started = Instant::now();
        let sent_ms = core.clock.now_ms();
        let outcome =
            match timeout_at(deadline, up.attempt(&target, api_key, inbound, rec.id())).await {
                Ok(o) => o,
                Err(_) => {
                    let c = limits::classify_timeout("request deadline reached");
                    rec.push_attempt(record(&target, api_key, &c, None, started));
                    return Err(Failure::Deadline(deadline_ms));
                }
            };
        match outcome {
            Attempt::Served(answer) => {
                let p = &target.provider;
                core.cooldowns.clear_covering(
                    p.id(),
                    api_key.map(|k| k.id.as_str()),
                    &target.model.id,
                    sent_ms,
                );
                if p.breaker(&target.model.id).success(core.clock.now_ms()) {
                    core.events.emit(crate::events::Event::BreakerClosed {
                        provider: p.id().to_string(),
                    });
                }
                rec.push_attempt(served(&target, api_key, started));
                return Ok(match answer {
                    Answer::Complete(body, usage, wire) => Served::Complete {
                        wire,
                        target,
                        body,
                        usage,
                        slot,
                    },
                    Answer::Stream {
                        reader,
                        prelude,
                        codec,
                    } => {
                        let resume =
                            if snap.resumes_on_break(snap.map_model(&inbound.canonical.model)) {
                                pending
                                    .iter()
                                    .chain(busy.iter())
                                    .filter(|t| {
                                        t.provider.config.capabilities.prefill
                                            && t.provider.id() != target.provider.id()
                                            && t.provider.config.kind
                                                == crate::config::ProviderKind::OpenaiCompatible
                                            && codec.wire() == Wire::OpenAi
                                    })
                                    .cloned()
                                    .collect()
                            } else {
                                Vec::new()
                            };
                        Served::Stream {
                            target,
                            reader,
                            prelude,
                            codec,
                            slot,
                            resume,
                        }
                    }
                });
            }
            Attempt::Failed {
                classified,
                status,
                body,
            } => {
                rec.push_attempt(record(&target, api_key, &classified, status, started));
                drop(slot);
                tracing::info!(request_id = rec.id(), target = %target.label(), class = classified.class.as_str(), reason = %classified.reason, "attempt failed");
                if classified.too_large {
                    // Nothing to wait out and nothing to cool (a smaller request still fits
                    // there): another candidate may have a larger per-minute limit.
                    pass.too_large
                        .get_or_insert_with(|| body.clone().unwrap_or_default());
                    pass.all_limited = false;
                    pass.summary
                        .push(format!("{}: {}", target.label(), classified.reason));
                    continue;
                }
                if classified.context_length
                    && snap.routing.context_fallback
                    && pass.context_retry.is_none()
                {
                    pass.context_retry = Some(target.model.context_window);
                    pass.all_limited = false;
                    pass.summary
                        .push(format!("{}: {}", target.label(), classified.reason));
                    pass.last_failure = announce(&target, classified);
                    continue;
                }
                let policy_fallback = classified.class == ErrorClass::ContentPolicy
                    && snap.routing.content_policy_fallback;
                if !classified.class.fails_over() && !policy_fallback
                    || pass.context_retry.is_some() && classified.context_length
                {
                    return Err(Failure::Client {
                        status: status.unwrap_or(400),
                        body: body.unwrap_or_default(),
                    });
                }
                let label = target.label();
                let first_retry = !pass.retried.contains(&label);
                // False when another request already put this target in cooldown for the
                // same limit: that failover is announced once, not for every request.
                let mut fresh = true;
                let next = on_failure(
                    core,
                    snap,
                    &target,
                    api_key,
                    &classified,
                    status,
                    first_retry,
                    deadline,
                    &mut fresh,
                )
                .await;
                // Another instance asked right after this one must already know about any
                // cooldown this failure started.
                core.shared.barrier().await;
                match next {
                    Next::SameTarget => {
                        pass.retried.insert(label);
                        pending.push_front(target);
                        continue;
                    }
                    Next::OtherKey => {
                        pending.push_front(target);
                        continue;
                    }
                    Next::DropProvider => {
                        let id = target.provider.id().to_string();
                        pending.retain(|t| t.provider.id() != id);
                    }
                    Next::Move => {}
                }
                if classified.class == ErrorClass::Rate {
                    pass.limited_until(cooldown_until(core, snap, &classified));
                } else {
                    pass.all_limited = false;
                }
                pass.summary
                    .push(format!("{}: {}", target.label(), classified.reason));
                pass.last_failure = if fresh {
                    announce(&target, classified)
                } else {
                    None
                };
            }
        }
    }
    if let Some(body) = pass.too_large {
        return Err(Failure::Client { status: 413, body });
    }
    Err(Failure::Exhausted {
        retry_at_ms: if pass.all_limited {
            pass.soonest_reset
        } else {
            None
        },
        summary: if pass.summary.is_empty() {
            "no candidate could be tried".into()
        } else {
            pass.summary.join("; ")
        },
    })
}

/// A limit the UI's Test found on a saved provider, applied like routing would (same scope
/// rules, same bounds), so the row and the next request agree with what the test showed.
pub fn adopt_limit(
    core: &Core,
    target: &Target,
    key: Option<&crate::providers::ApiKey>,
    c: &Classified,
) {
    let snap = core.snapshot.load();
    // Started, or (already cooling) replaced with what the test found.
    failure::apply_cooldown(core, &snap, target, key, c);
}

/// The UI's "Test": one tiny real request (a one-word answer) to `target` through the same
/// attempt path routing uses, with `key` (or none). Changes no routing state.
pub async fn test_target(
    core: &Core,
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
        body,
        anthropic_body: None,
        anthropic_beta: None,
        deadline_ms: None,
    };
    let started = Instant::now();
    let limit = Duration::from_millis(
        target.provider.config.timeouts.first_byte_ms + target.provider.config.timeouts.idle_ms,
    );
    match tokio::time::timeout(limit, Live(core).attempt(target, key, &inbound, "test")).await {
        Err(_) => Err(limits::classify_timeout("no answer in time")),
        Ok(Attempt::Served(_)) => Ok(started.elapsed().as_millis() as u64),
        Ok(Attempt::Failed { classified, .. }) => Err(classified),
    }
}
