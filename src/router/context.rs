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
    /// The user's language and clock, for the lines people read (failover, usage).
    pub locale: crate::i18n::LocaleCell,
    /// Who signed the thinking blocks Baton relayed (`providers::thinking`).
    pub thinking: crate::providers::thinking::ThinkingBook,
    /// Where each conversation was last served (`router::affinity`).
    pub affinity: super::affinity::Affinity,
    /// Every account's limit windows (`limits::usage`).
    pub usage: crate::limits::usage::UsageBook,
    /// How fast each provider answers each model now (`router::speed`).
    pub speeds: super::speed::Speeds,
    /// The hedges `routing.hedge` lets requests send now (`fallback::hedge`).
    pub(crate) hedges: super::types::HedgeBudget,
    /// Slots, quotas and cooldowns shared with other instances (Redis), when configured.
    pub shared: Shared,
    /// OpenTelemetry traces of the requests, when turned on (`telemetry`).
    pub telemetry: crate::telemetry::Telemetry,
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
            usage: Default::default(),
            speeds: Default::default(),
            hedges: Default::default(),
            local_tz: jiff::tz::TimeZone::system(),
            locale: Default::default(),
            telemetry: Default::default(),
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
        self.speeds.observe(&row);
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

    /// A reading of an account's limit windows (from an answer's headers or a CLI's event):
    /// recorded, told as events, and — when it shows room — the end of any rate cooldown the
    /// account still has (the provider reset early: a stale cooldown must not keep it out).
    pub fn usage_signal(
        &self,
        p: &ProviderEntry,
        account: &str,
        windows: Vec<crate::limits::windows::Window>,
    ) {
        if windows.is_empty() {
            return;
        }
        let now = self.clock.now_ms();
        let room = crate::limits::windows::binding(&windows).is_some_and(|w| {
            w.status != crate::limits::windows::WindowStatus::Rejected && w.used_or_status() < 1.0
        });
        let notices = self.usage.observe(p.id(), account, windows, now);
        if room {
            let key = (!account.is_empty()).then_some(account);
            self.cooldowns.clear_limits(p.id(), key, now);
        }
        self.tell(p, account, notices);
    }

    /// A cap announced by an error: the account's window is spent until `reset_at_ms`.
    pub fn usage_capped(&self, p: &ProviderEntry, account: &str, reset_at_ms: Option<i64>) {
        let notices = self
            .usage
            .capped(p.id(), account, reset_at_ms, self.clock.now_ms());
        self.tell(p, account, notices);
    }

    /// A subscription answered from paid extra usage (its window spent) and the provider says
    /// `overage: avoid`: the account cools until the window resets, so later requests go to
    /// the other providers, and the user is told once. The answer that showed it is served
    /// (it is already billed).
    pub fn overage_spent(&self, p: &ProviderEntry, account: &str, reset_ms: Option<i64>) {
        let now = self.clock.now_ms();
        // No reset stated: an hour, then the next answer says again.
        let until = reset_ms.filter(|r| *r > now).unwrap_or(now + 3_600_000);
        let scope = crate::limits::Scope {
            provider: p.id().to_string(),
            key: (!account.is_empty()).then(|| account.to_string()),
            model: None,
        };
        let reason = "subscription window spent: not drawing paid extra usage (set \"overage\": \"allow\" on the provider to keep using it)";
        if !self.cooldowns.start_after_answer(
            scope,
            until,
            crate::limits::ErrorClass::Rate.into(),
            reason,
        ) {
            return;
        }
        let loc = self.locale.get();
        let back = crate::limits::clock_time(until, &self.local_tz, now, loc);
        let message = crate::i18n::tr(
            loc.lang,
            "{name}: window spent — moving to your other providers instead of paid extra usage until {when}",
            &[("name", p.config.display_name()), ("when", &back)],
        );
        tracing::warn!(provider = p.id(), account, until_ms = until, "{message}");
        self.events.emit(crate::events::Event::Quota {
            provider: p.id().to_string(),
            account: account.to_string(),
            window: "overage".into(),
            label: "extra usage".into(),
            kind: crate::events::QuotaKind::Overage,
            percent: None,
            resets_at_ms: Some(until),
            message,
        });
    }

    /// Usage notices as events (the tray and the UI decide what to show).
    pub fn tell(
        &self,
        p: &ProviderEntry,
        account: &str,
        notices: Vec<crate::limits::usage::Notice>,
    ) {
        use crate::limits::usage::Notice;
        let now = self.clock.now_ms();
        for n in notices {
            let message = crate::limits::quota_message(
                p.config.display_name(),
                &n,
                &self.local_tz,
                now,
                self.locale.get(),
            );
            use crate::events::QuotaKind;
            let (kind, percent, w) = match &n {
                Notice::Threshold { window, percent } => {
                    (QuotaKind::Threshold, Some(*percent), window)
                }
                Notice::Capped { window } => (QuotaKind::Capped, None, window),
                Notice::Back { window } => (QuotaKind::Back, None, window),
            };
            tracing::info!(provider = p.id(), account, window = %w.id, ?kind, %message, "usage window");
            self.events.emit(crate::events::Event::Quota {
                provider: p.id().to_string(),
                account: account.to_string(),
                window: w.id.clone(),
                label: w.label.clone(),
                kind,
                percent,
                resets_at_ms: w.resets_at_ms,
                message,
            });
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

/// Conversation affinity: where a conversation was served, here and in Redis.
impl Routing {
    /// Where this request's conversation was last served, if affinity is on and it was lately: from
    /// Redis when state is shared (every instance agrees), else from this instance's memory.
    pub(crate) async fn stuck(
        &self,
        cfg: &crate::config::AffinityConfig,
        conversation: Option<&super::affinity::Conversation>,
    ) -> Option<super::affinity::Stick> {
        let c = conversation.filter(|_| cfg.enabled)?;
        if self.shared.is_up() == Some(true) {
            if let Some(s) = self.shared.affinity(&c.hex()).await {
                return super::affinity::Stick::decode(&s);
            }
        }
        self.affinity.get(c, self.clock.now_ms(), cfg.ttl_ms)
    }

    /// Notes where the conversation was served (here and, when state is shared, in Redis).
    pub(crate) fn remember(
        &self,
        cfg: &crate::config::AffinityConfig,
        conversation: Option<&super::affinity::Conversation>,
        stick: super::affinity::Stick,
    ) {
        let Some(c) = conversation.filter(|_| cfg.enabled) else {
            return;
        };
        if self.shared.is_up() == Some(true) {
            self.shared
                .set_affinity(&c.hex(), stick.encode(), cfg.ttl_ms);
        }
        self.affinity.set(*c, stick, self.clock.now_ms());
    }
}
