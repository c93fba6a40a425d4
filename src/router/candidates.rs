//! Candidate bookkeeping for the fallback loop: capability checks, concurrency slots and the
//! bounded wait for one, key choice (round-robin, cooling-aware, quota-aware), attempt records.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::time::timeout_at;

use super::context::Routing;
use super::snapshot::{Snapshot, Target};
use super::types::{Back, Failure, Pick, Slot};
use crate::canonical::Needs;
use crate::limits::quota::DEMOTE_BELOW;
use crate::limits::{self, Cause, Classified};
use crate::providers::{ApiKey, ProviderEntry};
use crate::store::AttemptRecord;

fn ok_classified() -> Classified {
    limits::classify_transport("")
}

/// The attempt that served the answer.
pub(crate) fn served(
    t: &Target,
    key: Option<&ApiKey>,
    started: std::time::Instant,
) -> AttemptRecord {
    let mut ok = record(t, key, &ok_classified(), Some(200), started);
    ok.class = crate::limits::Outcome::Ok;
    ok
}

pub(super) fn larger_window(candidate: Option<u64>, failed: Option<u64>) -> bool {
    match (candidate, failed) {
        (Some(c), Some(f)) => c > f,
        _ => true,
    }
}

/// Why a model cannot take a request with these needs, in words for Activity; `None` when it can.
pub(super) fn cannot_serve(m: &crate::providers::ModelInfo, needs: &Needs) -> Option<String> {
    if can_serve(m, needs) {
        return None;
    }
    Some(if needs.tools && !m.tools {
        "this model does not take tool calls".to_string()
    } else if needs.images && !m.images {
        "this model does not take images".to_string()
    } else {
        format!(
            "the request (about {} tokens) does not fit its context window of {}",
            needs.estimated_tokens,
            m.context_window.unwrap_or_default()
        )
    })
}

/// The prompt's size counted the way each model's tokenizer would, once per tokenizer.
#[derive(Default)]
pub(super) struct Counts(Vec<(Option<crate::tokens::Tokenizer>, u64)>);

impl Counts {
    /// The request's needs for model `m`. Near its context window (within a factor of two),
    /// the bytes-a-token guess cannot decide whether the request fits: the prompt is counted as
    /// that model counts it (`tokens`: OpenAI's tokenizer for OpenAI's models, else the
    /// calibrated estimate, which counts CJK text at its heavier weight).
    pub(super) fn needs_for(
        &mut self,
        req: &crate::canonical::ChatRequest,
        needs: &Needs,
        m: &crate::providers::ModelInfo,
    ) -> Needs {
        let Some(w) = m.context_window else {
            return *needs;
        };
        let guess = needs.estimated_tokens;
        if guess.saturating_mul(2) < w || guess > w.saturating_mul(2) {
            return *needs;
        }
        let t = crate::tokens::Tokenizer::for_model(&m.id);
        let prompt = match self.0.iter().find(|(k, _)| *k == t) {
            Some((_, n)) => *n,
            None => {
                let n = match t {
                    Some(t) => crate::tokens::count_request(t, req),
                    None => crate::tokens::estimate_request(req),
                };
                self.0.push((t, n));
                n
            }
        };
        Needs {
            estimated_tokens: prompt + needs.max_tokens,
            ..*needs
        }
    }
}

pub(super) fn can_serve(m: &crate::providers::ModelInfo, needs: &Needs) -> bool {
    (!needs.tools || m.tools)
        && (!needs.images || m.images)
        && m.context_window.is_none_or(|w| {
            // A capped max_tokens only needs the cap's room in the window.
            let asked = needs.max_tokens;
            let room = m.max_output_tokens.map_or(asked, |cap| asked.min(cap));
            needs.estimated_tokens - asked + room <= w
        })
}

pub(super) fn unsupported_message(needs: &Needs) -> String {
    let mut wants = Vec::new();
    if needs.tools {
        wants.push("tool calls");
    }
    if needs.images {
        wants.push("images");
    }
    if wants.is_empty() {
        format!(
            "No configured model has a context window large enough for this request (about {} tokens).",
            needs.estimated_tokens
        )
    } else {
        format!(
            "No configured model for this route accepts {}, or none has a large enough context window; pin a provider that does with \"provider/model\".",
            wants.join(" and ")
        )
    }
}

pub(super) fn try_slot(t: &Target) -> Option<Slot> {
    match &t.provider.runtime.semaphore {
        None => Some(Slot::new(t.provider.clone(), None)),
        Some(sem) => sem
            .clone()
            .try_acquire_owned()
            .ok()
            .map(|p| Slot::new(t.provider.clone(), Some(p))),
    }
}

/// Waits (bounded by the queue timeout and size) until any saturated candidate frees a slot.
pub(super) async fn wait_for_slot(
    routing: &Routing,
    busy: &mut Vec<Target>,
    snap: &Snapshot,
    deadline: tokio::time::Instant,
) -> Result<(Target, Slot), Failure> {
    let wait_ms = snap.routing.queue_timeout_ms;
    let queued = routing.queued.fetch_add(1, Ordering::SeqCst);
    let _leave = scopeguard(&routing.queued);
    if queued >= snap.routing.max_queued {
        return Err(Failure::Busy {
            retry_after_ms: 1_000,
            message: format!(
                "Too many requests are waiting for a free provider slot ({queued} queued); retry shortly."
            ),
        });
    }
    let until = (tokio::time::Instant::now() + Duration::from_millis(wait_ms)).min(deadline);
    let waits = busy.iter().enumerate().map(|(i, t)| {
        let sem = t.provider.runtime.semaphore.clone();
        Box::pin(async move {
            match sem {
                Some(s) => (i, s.acquire_owned().await.ok()),
                None => (i, None),
            }
        })
    });
    match timeout_at(until, futures_util::future::select_all(waits)).await {
        Ok(((i, permit), _, _)) => {
            let t = busy.remove(i);
            let slot = Slot::new(t.provider.clone(), permit);
            Ok((t, slot))
        }
        Err(_) => Err(Failure::Busy {
            retry_after_ms: 1_000,
            message: format!(
                "Every candidate provider was at its concurrency limit for {} ms ({}).",
                wait_ms,
                busy.iter()
                    .map(Target::label)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

pub(super) struct QueueGuard<'a>(&'a std::sync::atomic::AtomicUsize);
pub(super) fn scopeguard(c: &std::sync::atomic::AtomicUsize) -> QueueGuard<'_> {
    QueueGuard(c)
}
impl Drop for QueueGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The key index that stands for the client's own credential.
pub(super) const CLIENT_KEY: usize = usize::MAX;

/// Round-robin over the provider's keys that are not cooling, without sending anything to a
/// cooling one; keys whose quota score is nearly exhausted are used only when no other is free.
/// `prefer`: the key that served this conversation, first while it is not cooling.
pub(super) fn pick_key(
    routing: &Routing,
    t: &Target,
    client: Option<&ApiKey>,
    prefer: Option<&str>,
) -> Pick {
    let p = &t.provider;
    let n = p.keys.len();
    if !p.config.credentials.is_baton() {
        // The client's account is this provider's only key.
        let account = client.map(|k| k.id.as_str());
        return match routing.cooldowns.blocking(p.id(), account, &t.model.id) {
            Some(c) if !recheck(routing, p, &c) => {
                Pick::Cooling(c.until_ms, c.reason, back(c.class, c.until_ms))
            }
            _ => Pick::Go(CLIENT_KEY),
        };
    }
    if n == 0 {
        return match routing.cooldowns.blocking(p.id(), None, &t.model.id) {
            Some(c) if !recheck(routing, p, &c) => {
                Pick::Cooling(c.until_ms, c.reason, back(c.class, c.until_ms))
            }
            _ => Pick::Go(0),
        };
    }
    if let Some(i) = prefer.and_then(|id| p.keys.iter().position(|k| k.id == id)) {
        if routing
            .cooldowns
            .blocking(p.id(), Some(&p.keys[i].id), &t.model.id)
            .is_none()
        {
            return Pick::Go(i);
        }
    }
    let now = routing.clock.now_ms();
    let day = p.quota_day(now).0;
    let start = p.runtime.key_start();
    let mut soonest: Option<(i64, String, Back)> = None;
    let mut low: Option<usize> = None;
    for i in 0..n {
        let idx = (start + i) % n;
        match routing
            .cooldowns
            .blocking(p.id(), Some(&p.keys[idx].id), &t.model.id)
        {
            None => {
                let score = p
                    .runtime
                    .quota
                    .score(&p.keys[idx].id, now, &p.config.limits, day);
                if score.is_some_and(|s| s < DEMOTE_BELOW) {
                    low.get_or_insert(idx);
                } else {
                    return Pick::Go(idx);
                }
            }
            Some(c) if recheck(routing, p, &c) => return Pick::Go(idx),
            Some(c) => {
                if soonest.as_ref().is_none_or(|(u, ..)| c.until_ms < *u) {
                    let why = back(c.class, c.until_ms);
                    soonest = Some((c.until_ms, c.reason, why));
                }
            }
        }
    }
    if let Some(idx) = low {
        return Pick::Go(idx);
    }
    let (until, reason, why) = soonest.unwrap_or((0, String::new(), Back::Unknown));
    Pick::Cooling(until, reason, why)
}

/// A long limit cooldown is tried again with this request now and then (an HTTP provider's
/// 429 costs nothing; a CLI is checked without a billed request instead, when its reset
/// passes): a provider that reset early is back at once.
fn recheck(routing: &Routing, p: &ProviderEntry, c: &crate::limits::CooldownEntry) -> bool {
    c.class.is_limit() && !p.config.kind.is_cli() && routing.cooldowns.recheck_due(c)
}

/// What a cooldown of `class` until `until` tells the client: a limit (answered with 429 and
/// the reset when nothing else can take the request), a time to come back (overload and
/// transient failures cool for a stated or bounded time), or nothing.
fn back(class: Cause, until: i64) -> Back {
    use crate::limits::ErrorClass;
    match class {
        _ if class.is_limit() => Back::Limit(until),
        Cause::Failed(ErrorClass::Overloaded | ErrorClass::Transient) => Back::At(until),
        _ => Back::Unknown,
    }
}

/// A provider whose every key (or keyless endpoint) reports a nearly exhausted quota.
pub(super) fn nearly_exhausted(p: &ProviderEntry, now: i64) -> bool {
    // Nothing read from its answers or counted against declared limits yet: nothing to say,
    // found without a lock per key or a quota day worked out (every candidate, every request).
    if p.runtime.quota.is_empty() {
        return false;
    }
    let day = p.quota_day(now).0;
    let low = |key: &str| {
        p.runtime
            .quota
            .score(key, now, &p.config.limits, day)
            .is_some_and(|s| s < DEMOTE_BELOW)
    };
    if p.keys.is_empty() {
        low("")
    } else {
        p.keys.iter().all(|k| low(&k.id))
    }
}

pub(super) fn record(
    t: &Target,
    key: Option<&ApiKey>,
    c: &Classified,
    status: Option<u16>,
    started: Instant,
) -> AttemptRecord {
    let took = started.elapsed();
    AttemptRecord {
        provider: t.provider.id().to_string(),
        model: t.model.id.clone(),
        key: key.map(|k| k.id.clone()),
        class: crate::limits::Outcome::Failed(c.class),
        status,
        latency_ms: took.as_millis() as u64,
        latency_us: took.as_micros() as u64,
        reason: Some(c.reason.clone()).filter(|r| !r.is_empty()),
        reset_at_ms: c.reset_at_ms,
        streamed: false,
        hedge: false,
        input_tokens: None,
        started: Some(started),
        span: 0,
    }
}

/// A candidate passed over without sending anything, and why.
pub(crate) fn skipped(
    t: &Target,
    key: Option<&ApiKey>,
    why: &str,
    reason: Option<String>,
    until: Option<i64>,
) -> AttemptRecord {
    AttemptRecord {
        provider: t.provider.id().to_string(),
        model: t.model.id.clone(),
        key: key.map(|k| k.id.clone()),
        class: crate::limits::Outcome::Skipped,
        status: None,
        latency_ms: 0,
        latency_us: 0,
        reason: Some(match reason {
            Some(r) => format!("{why}: {r}"),
            None => why.to_string(),
        }),
        reset_at_ms: until,
        streamed: false,
        hedge: false,
        input_tokens: None,
        started: None,
        span: 0,
    }
}

pub fn fmt_ms(unix_ms: i64) -> String {
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_millis(unix_ms.max(0) as u64))
}

/// Puts the target that served the conversation first, when the order is Baton's to choose
/// and that target is not about to run out.
pub(crate) fn stuck_first(
    targets: &mut Vec<super::snapshot::Target>,
    stick: &super::affinity::Stick,
    now_ms: i64,
) {
    let Some(i) = targets
        .iter()
        .position(|t| t.provider.id() == stick.provider && t.model.id == stick.model)
    else {
        return;
    };
    if i > 0 && !nearly_exhausted(&targets[i].provider, now_ms) {
        let t = targets.remove(i);
        targets.insert(0, t);
    }
}
