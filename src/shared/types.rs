//! What the shared-state worker, the sync loop and the reconciliation all speak (a leaf): the
//! Redis connection and its scripts, the operations queued for it, what they reach in the
//! gateway (`Host`), and their timing.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;
use tokio::sync::{mpsc, oneshot};

use crate::clients::limiter::Spend;
use crate::clients::Client;
use crate::limits::{CooldownEntry, Scope};

/// Longest a request waits on Redis before using local state instead.
pub(super) const OP_TIMEOUT: Duration = Duration::from_millis(250);
/// How often reachability is checked.
pub(super) const HEALTH_EVERY: Duration = Duration::from_millis(500);

/// Which period a shared counter covers; named in its Redis key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeriodKind {
    Minute,
    Day,
    Month,
}

impl PeriodKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            PeriodKind::Minute => "minute",
            PeriodKind::Day => "day",
            PeriodKind::Month => "month",
        }
    }
}

/// Spending not yet written to Redis: the client, the amount, and when it was last added.
/// Spending Redis has not confirmed: the client, the amount, when, and the write's id (`None`
/// once too many are waiting and the rest are summed up).
pub(super) type Unsynced = (Arc<Client>, Spend, i64, Option<u64>);

/// Unconfirmed writes kept one by one (each replayed under its own id, so one Redis applied
/// after all is not counted twice); past this many, the rest are summed per client.
pub(super) const MAX_UNSYNCED: usize = 10_000;

/// How long Redis remembers that a spending write was applied: replays within a day of an
/// outage are recognised.
pub(super) const SPENT_MARKER_MS: i64 = 86_400_000;

/// What the background worker sends to Redis, in order.
pub(super) enum Op {
    SetCooldown(CooldownEntry),
    ClearCooldown(Scope),
    Spend {
        client: Arc<Client>,
        spend: Spend,
        now: i64,
        /// This instance's id for the write: Redis applies each id once.
        id: u64,
    },
    Release {
        provider: String,
        lease: String,
    },
    Quota {
        runtime: Arc<crate::providers::ProviderRuntime>,
        provider: String,
        key: String,
        requests: u64,
        tokens: u64,
        now: i64,
        /// The provider's quota day (in its `dayReset` zone): start and end.
        day: (i64, i64),
    },
    /// A client key's current version, for the other instances.
    Key(Box<crate::store::SyncedKey>),
    /// Answered once everything sent before it has been written.
    Barrier(oneshot::Sender<()>),
}

/// What the shared-state loops reach in the gateway that runs them. The composition root
/// implements it, so this module does not depend on the gateway.
pub(crate) trait Host: Send + Sync {
    fn now_ms(&self) -> i64;
    fn provider(&self, id: &str) -> Option<Arc<crate::providers::ProviderEntry>>;
    fn cooldowns(&self) -> &crate::limits::Cooldowns;
    fn store(&self) -> &crate::store::Store;
    fn clients(&self) -> &crate::clients::limiter::Limiter;
    /// Loads the client keys again after another instance changed one.
    fn reload_keys(&self) -> Result<(), crate::store::StoreError>;
    /// Cancelled when this gateway shuts down.
    fn stopping(&self) -> &tokio_util::sync::CancellationToken;
}

pub struct Redis {
    pub(super) conn: ConnectionManager,
    pub(super) client: redis::Client,
    pub(super) prefix: String,
    /// Distinguishes this instance's own messages.
    pub(super) origin: String,
    pub(super) up: AtomicBool,
    pub(super) ops: mpsc::UnboundedSender<Op>,
    /// Spending that could not be written (or whose write was not confirmed) while Redis was
    /// away, oldest first.
    pub(super) unsynced: Mutex<Vec<Unsynced>>,
    /// Cooldowns cleared while Redis was away (cleared there on return).
    pub(super) cleared: Mutex<Vec<Scope>>,
    /// Concurrency leases (provider, lease id) whose release Redis did not confirm, or whose
    /// grant went unanswered: removed there on return. Left behind, one would hold a slot for
    /// every instance until its TTL, and their requests would queue for nothing.
    pub(super) released: Mutex<Vec<(String, String)>>,
    pub(super) leases: AtomicU64,
    /// Requests taken from the shared rate bucket ahead, per client.
    pub(super) permits: super::permits::Permits,
    /// Spending of clients far from their limits, written every `gather::GATHER_MS`.
    pub(super) gathered: super::gather::Gathered,
    /// Concurrency slots leased ahead and not in use, per provider.
    pub(super) slots: super::slots::Slots,
    pub(super) admit: Script,
    pub(super) spend: Script,
    pub(super) lease: Script,
    pub(super) raise: Script,
    pub(super) quota: Script,
    pub(super) migrate: Script,
}
