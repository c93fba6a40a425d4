//! What routing may touch: the narrow slice of the gateway the fallback loop, the attempts and
//! the stream pump read and change. The composition root (`gateway`) owns one [`Routing`] and
//! hands it down; nothing in the router reaches the rest of the gateway except through the
//! [`Sink`] a finished request goes to.

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::clients::Client;
use crate::clock::Clock;
use crate::events::Events;
use crate::limits::{Cooldowns, ResetContext};
use crate::providers::cli::CliProcesses;
use crate::providers::{HttpClients, ProviderEntry};
use crate::redact::Redactor;
use crate::shared::Shared;
use crate::store::LogRow;

use super::snapshot::Snapshot;

/// Where a finished request goes: the request log, health statistics, metrics, the client's
/// spending and the request event. The composition root implements it.
pub trait Sink: Send + Sync {
    /// `row` is complete (status, timing, tokens, cost); `total` is the wall time of the request
    /// and `upstream_us` the part of it spent waiting on upstreams.
    fn finished(&self, client: &Arc<Client>, row: LogRow, total: Duration, upstream_us: u64);
}

/// The routing context.
pub struct Routing {
    /// Providers, routes and models as configured now; swapped whole on every change.
    pub snapshot: ArcSwap<Snapshot>,
    pub cooldowns: Cooldowns,
    pub events: Events,
    pub clock: Arc<dyn Clock>,
    pub http: HttpClients,
    /// Subscription CLIs running now (killed on shutdown).
    pub cli_procs: Arc<CliProcesses>,
    /// Requests currently waiting for a concurrency slot.
    pub queued: AtomicUsize,
    /// Masks secrets in every text that came from an upstream (see `redact`).
    pub redactor: Arc<Redactor>,
    /// The machine's zone, for CLI messages that print local times.
    pub local_tz: jiff::tz::TimeZone,
    /// Who signed the thinking blocks Baton relayed (`providers::thinking`).
    pub thinking: crate::providers::thinking::ThinkingBook,
    /// Where each conversation was last served (`router::affinity`).
    pub affinity: super::affinity::Affinity,
    /// Slots, quotas and cooldowns shared with other instances (Redis), when configured.
    pub shared: Shared,
    /// Weak: the gateway owns the routing context, not the other way round.
    sink: Weak<dyn Sink>,
}

impl Routing {
    pub(crate) fn new(
        snapshot: Snapshot,
        cooldowns: Cooldowns,
        events: Events,
        clock: Arc<dyn Clock>,
        shared: Shared,
        sink: Weak<dyn Sink>,
    ) -> Self {
        Self {
            snapshot: ArcSwap::from_pointee(snapshot),
            cooldowns,
            events,
            clock,
            http: HttpClients::default(),
            cli_procs: Default::default(),
            queued: AtomicUsize::new(0),
            redactor: Default::default(),
            thinking: Default::default(),
            affinity: Default::default(),
            local_tz: jiff::tz::TimeZone::system(),
            shared,
            sink,
        }
    }

    /// Hands a finished request to the gateway (nothing, once the gateway is gone).
    pub(crate) fn finished(
        &self,
        client: &Arc<Client>,
        row: LogRow,
        total: Duration,
        upstream_us: u64,
    ) {
        if let Some(sink) = self.sink.upgrade() {
            sink.finished(client, row, total, upstream_us);
        }
    }

    /// "Now" and the zones reset times are read in, for errors from provider `p`.
    pub fn reset_context(&self, p: &ProviderEntry) -> ResetContext {
        ResetContext {
            now_ms: self.clock.now_ms(),
            local_tz: self.local_tz.clone(),
            day_reset: p.day_reset.clone(),
        }
    }

    /// Counts an answer's tokens against the serving provider key's declared `tpm`.
    pub fn count_tokens(&self, p: &ProviderEntry, key: &str, n: u64) {
        let now = self.clock.now_ms();
        p.runtime.quota.tokens(key, now, n, &p.config.limits);
        if n > 0 {
            self.shared.quota(p, key, 0, n, now);
        }
    }
}
