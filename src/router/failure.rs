//! What a failed attempt does to the provider's state (cooldowns, breaker, disabled keys) and
//! where the request goes next: the same target again, the next candidate, or past the rest of
//! this provider.

use std::time::Duration;

use super::context::Routing;
use super::snapshot::{Snapshot, Target};
use crate::config::LimitScope;
use crate::events::Event;
use crate::limits::{Classified, ErrorClass, Scope};
use crate::providers::ApiKey;

/// Billing and model verdicts: waiting a minute cannot fix them.
const LONG_COOLDOWN_MS: i64 = 3_600_000;
/// How long a failover waits for its cooldown to reach the disk (a commit takes milliseconds;
/// only a database locked by another process takes longer).
const PERSIST_WAIT: Duration = Duration::from_millis(250);
/// The longest any cooldown lasts (weekly subscription windows exist).
const MAX_COOLDOWN_MS: i64 = 8 * 86_400_000;
/// Longest cooldown for a spending limit with a stated date.
const MAX_BILLING_COOLDOWN_MS: i64 = 32 * 86_400_000;

pub(super) enum Next {
    /// Try the same target again now (after a short wait, if any).
    SameTarget,
    /// Try the same target with another of the provider's keys (this one is now cooling).
    OtherKey,
    /// Skip the provider's remaining candidates.
    DropProvider,
    /// Go on to the next candidate.
    Move,
}

/// A failed attempt, as [`on_failure`] weighs it.
pub(super) struct Failed<'a> {
    pub t: &'a Target,
    pub key: Option<&'a ApiKey>,
    pub c: &'a Classified,
    pub status: Option<u16>,
    /// This target was not retried on the spot yet in this request.
    pub first_retry: bool,
}

/// What to do next, and whether this failure started a cooldown (false when another request
/// already put the target in cooldown for the same limit: that failover is announced once,
/// not for every request).
pub(super) struct Decision {
    pub next: Next,
    pub fresh: bool,
}

/// Records the failure's consequences and decides the next step.
pub(super) async fn on_failure(
    routing: &Routing,
    snap: &Snapshot,
    f: Failed<'_>,
    deadline: tokio::time::Instant,
) -> Decision {
    let (t, key, c) = (f.t, f.key, f.c);
    let (next, fresh, recorded) = match c.class {
        ErrorClass::Transient => {
            let (next, opened) = transient(routing, snap, &f);
            (next, true, opened)
        }
        // A CLI's login is tracked as its status (unavailable until it is logged in again),
        // not as a cooldown that would outlast the fix.
        ErrorClass::Auth if t.provider.config.kind.is_cli() => (Next::DropProvider, true, false),
        // The provider is well; this answer was not what the client asked for: the next
        // candidate, nothing cooled, no breaker fed.
        ErrorClass::InvalidOutput => (Next::Move, true, false),
        class => {
            let fresh = apply_cooldown(routing, snap, t, key, c);
            if class == ErrorClass::Auth {
                routing.events.emit(Event::KeyDisabled {
                    provider: t.provider.id().to_string(),
                    key: key
                        .map(|k| k.id.clone())
                        .unwrap_or_else(|| "(no key)".into()),
                    reason: c.reason.clone(),
                });
            }
            let next = match class {
                ErrorClass::Rate => rate(routing, snap, &f, deadline).await,
                ErrorClass::Auth | ErrorClass::Billing if other_key_free(routing, t, key) => {
                    Next::OtherKey
                }
                _ => Next::Move,
            };
            (next, fresh, true)
        }
    };
    // The cooldown is in force in memory already. It is normally on disk before the answer
    // from the next candidate is sent (a crash right after a 429 never calls the limited key
    // again after the restart), but a database another process has locked does not hold the
    // failover: past `PERSIST_WAIT` the writer thread finishes the write on its own.
    if recorded
        && tokio::time::timeout(PERSIST_WAIT, routing.cooldowns.flush())
            .await
            .is_err()
    {
        tracing::warn!(
            provider = %t.provider.id(),
            "the cooldown is not on disk yet (the database is busy); failing over without waiting"
        );
    }
    Decision { next, fresh }
}

/// A transient failure feeds the breaker (which may open, cooling the provider or model:
/// `true`); a lone 500 or a dropped connection is retried once on the spot.
fn transient(routing: &Routing, snap: &Snapshot, f: &Failed<'_>) -> (Next, bool) {
    let (t, c) = (f.t, f.c);
    let p = &t.provider;
    let model = p.breaker_scope(&t.model.id);
    let now = routing.clock.now_ms();
    if let Some(until) = p
        .runtime
        .breakers
        .get(model)
        .failure(now, &snap.routing.breaker)
    {
        let scope = Scope {
            provider: p.id().to_string(),
            key: None,
            model: model.map(str::to_string),
        };
        routing
            .cooldowns
            .start(scope, until, crate::limits::Cause::Breaker, &c.reason);
        routing.events.emit(Event::BreakerOpened {
            provider: p.id().to_string(),
            until_ms: until,
            reason: c.reason.clone(),
        });
        return (Next::Move, true);
    }
    // One immediate retry after a lone 500 or a dropped connection; never after a timeout.
    // (A CLI is not retried on the spot: its failures are a dead network or a crash, and
    // each try is a new process.)
    let lone = f.status.is_none_or(|s| s == 500) && !c.timeout && !p.config.kind.is_cli();
    if lone && f.first_retry && p.config.retries > 0 {
        return (Next::SameTarget, false);
    }
    (Next::Move, false)
}

/// A rate limit (already cooling): a short stated wait is waited out once on the spot;
/// else another key, or past this provider when its limit covers every model.
async fn rate(
    routing: &Routing,
    snap: &Snapshot,
    f: &Failed<'_>,
    deadline: tokio::time::Instant,
) -> Next {
    let (t, c) = (f.t, f.c);
    let p = &t.provider;
    if c.reset_at_ms.is_some() {
        // Wait for the cooldown as recorded (clamped to at least a second).
        let wait = cooldown_until(routing, snap, c) - routing.clock.now_ms();
        let pause = Duration::from_millis(wait.max(0) as u64);
        let fits = tokio::time::Instant::now() + pause < deadline;
        if f.first_retry && (0..=snap.routing.short_wait_ms as i64).contains(&wait) && fits {
            tokio::time::sleep(pause).await;
            return Next::SameTarget;
        }
    }
    if other_key_free(routing, t, f.key) {
        return Next::OtherKey;
    }
    let per_model = matches!(
        p.config.limit_scope,
        Some(LimitScope::KeyModel | LimitScope::Model)
    ) || p.config.limit_scope.is_none() && c.per_model;
    if per_model && !p.config.model_fallback {
        Next::DropProvider
    } else {
        Next::Move
    }
}

/// Whether the provider has another key that is not cooling for this model.
fn other_key_free(routing: &Routing, t: &Target, used: Option<&ApiKey>) -> bool {
    let Some(used) = used else { return false };
    t.provider.keys.iter().any(|k| {
        k.id != used.id
            && routing
                .cooldowns
                .blocking(t.provider.id(), Some(&k.id), &t.model.id)
                .is_none()
    })
}

pub(super) fn cooldown_until(routing: &Routing, snap: &Snapshot, c: &Classified) -> i64 {
    let now = routing.cooldowns.now_ms();
    let default = match c.class {
        ErrorClass::Billing | ErrorClass::Model => LONG_COOLDOWN_MS,
        // Out until the user changes the key (or restarts with a new one).
        ErrorClass::Auth => MAX_COOLDOWN_MS,
        // Overload is the provider's momentary state: keep it short.
        ErrorClass::Overloaded => (snap.routing.default_cooldown_ms as i64).min(30_000),
        _ => snap.routing.default_cooldown_ms as i64,
    };
    // A spending limit names the date access returns (often the 1st of next month): honour
    // it up to a month; anything else is re-checked after at most eight days.
    let max = match (c.class, c.reset_at_ms) {
        (ErrorClass::Billing, Some(_)) => MAX_BILLING_COOLDOWN_MS,
        _ => MAX_COOLDOWN_MS,
    };
    c.reset_at_ms
        .unwrap_or(now + default)
        .clamp(now + 1_000, now + max)
}

/// Cools the narrowest scope the failure applies to; false when that scope was already
/// cooling (another request hit the same limit first).
pub(super) fn apply_cooldown(
    routing: &Routing,
    snap: &Snapshot,
    t: &Target,
    key: Option<&ApiKey>,
    c: &Classified,
) -> bool {
    let provider = t.provider.id().to_string();
    let key_id = key.map(|k| k.id.clone());
    let model = Some(t.model.id.clone());
    let scope = match c.class {
        // The narrowest scope the provider's limit applies to.
        // A client's own subscription: its cap is that account's, never another user's.
        ErrorClass::Rate if !t.provider.config.credentials.is_baton() => Scope {
            provider,
            key: key_id,
            model: c.per_model.then_some(t.model.id.clone()),
        },
        ErrorClass::Rate => match (t.provider.config.limit_scope, c.per_model) {
            (Some(LimitScope::Provider), _) => Scope {
                provider,
                key: None,
                model: None,
            },
            (Some(LimitScope::Model), _) => Scope {
                provider,
                key: None,
                model,
            },
            (Some(LimitScope::KeyModel), _) | (None, true) => Scope {
                provider,
                key: key_id,
                model,
            },
            (Some(LimitScope::Key), _) | (None, false) => Scope {
                provider,
                key: key_id,
                model: None,
            },
        },
        ErrorClass::Billing | ErrorClass::Auth => Scope {
            provider,
            key: key_id,
            model: None,
        },
        // Overload is a model's serving capacity: the other models stay in rotation unless
        // the provider declares its limits provider- or key-wide. Keys are never penalised.
        ErrorClass::Overloaded => Scope {
            provider,
            key: None,
            model: match t.provider.config.limit_scope {
                Some(LimitScope::Provider | LimitScope::Key) => None,
                _ => model,
            },
        },
        ErrorClass::Model => Scope {
            provider,
            key: None,
            model,
        },
        ErrorClass::Transient
        | ErrorClass::Request
        | ErrorClass::ContentPolicy
        | ErrorClass::InvalidOutput => return true,
    };
    let until = cooldown_until(routing, snap, c);
    // A subscription's cap, or a limit of an hour or more, is a window spent until then.
    let p = &t.provider;
    let subscription = p.config.kind.is_cli() || !p.config.credentials.is_baton();
    if c.class == ErrorClass::Rate
        && (subscription || until - routing.cooldowns.now_ms() >= 3_600_000)
    {
        let account = key.map(|k| k.id.as_str()).unwrap_or_default();
        routing.usage_capped(p, account, Some(until));
    }
    routing
        .cooldowns
        .start(scope, until, c.class.into(), &c.reason)
}
