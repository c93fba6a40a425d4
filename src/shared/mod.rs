//! State several Baton instances share through Redis (`state.backend: "redis"`): cooldowns and
//! breaker openings (one instance's 429 cools that key for all), client keys, client token
//! buckets and budgets (Lua scripts, atomic), declared provider quota counts, and per-provider
//! concurrency leases (so `maxConcurrency` holds across instances). This file is the request
//! path's side; `sync` runs in the background; `scripts` holds the Lua.
//!
//! Reads on the request path stay local where they can: cooldowns are mirrored into each
//! instance's table through pub/sub, so choosing a candidate never waits on Redis. Admission and
//! leases ask Redis with a short timeout. When Redis is unreachable every instance carries on
//! with its local state and logs one warning; when it returns, the instance pushes what it
//! learned meanwhile (cooldowns, spending) and pulls what the others did, then uses Redis again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::Script;
use tokio::sync::{mpsc, oneshot};

use crate::clients::limiter::{Deny, Period, Spend};
use crate::clients::{utc_day, utc_month, Client};
use crate::config::RedisConfig;
use crate::limits::{CooldownEntry, Scope};

mod gather;
mod migrate;
mod msg;
mod permits;
mod reconcile;
mod scripts;
mod slots;
mod sync;
mod types;

use scripts::{ADMIT, LEASE, MIGRATE, QUOTA, RAISE, SPEND};
pub use types::Redis;
pub(crate) use types::{Host, PeriodKind};
use types::{Op, OP_TIMEOUT};

/// Where shared state goes; `Shared::local()` when there is no Redis.
#[derive(Default, Clone)]
pub struct Shared {
    inner: Option<Arc<Redis>>,
}

/// What the router holds while a provider's shared concurrency slot is taken.
pub struct Lease {
    redis: Arc<Redis>,
    provider: String,
    id: String,
    granted_ms: i64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Reused by the next request while it may be (`slots`), else given back.
        let now = crate::clock::unix_ms();
        let up = self.redis.up.load(Ordering::Relaxed);
        if up
            && self
                .redis
                .slots
                .put_back(&self.provider, &self.id, self.granted_ms, now)
        {
            return;
        }
        self.redis.give_back(
            std::mem::take(&mut self.provider),
            std::mem::take(&mut self.id),
        );
    }
}

/// The answer to a lease request.
pub enum LeaseResult {
    /// No shared limit applies (no Redis, Redis away, or no `maxConcurrency`).
    Local,
    Held(Lease),
    /// Every instance together already uses `maxConcurrency` slots.
    Full,
}

#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    #[error("state.redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("state.redis.{field}: environment variable {env} is not set")]
    MissingEnv { field: &'static str, env: String },
    #[error("state.redis.caFile: cannot read {path}: {source}")]
    CaFile {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl Shared {
    pub fn local() -> Self {
        Self::default()
    }

    /// Connects lazily: Baton starts and serves even when Redis is not there yet.
    pub fn redis(cfg: &RedisConfig) -> Result<Self, SharedError> {
        let mut info = redis::IntoConnectionInfo::into_connection_info(cfg.url.as_str())?;
        let mut settings = info.redis_settings().clone();
        if let Some(env) = &cfg.password_env {
            let v = std::env::var(env).map_err(|_| SharedError::MissingEnv {
                field: "passwordEnv",
                env: env.clone(),
            })?;
            settings = settings.set_password(v);
        }
        if let Some(env) = &cfg.username_env {
            let v = std::env::var(env).map_err(|_| SharedError::MissingEnv {
                field: "usernameEnv",
                env: env.clone(),
            })?;
            settings = settings.set_username(v);
        }
        info = info.set_redis_settings(settings);
        let client = match &cfg.ca_file {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|source| SharedError::CaFile {
                    path: path.clone(),
                    source,
                })?;
                redis::Client::build_with_tls(
                    info,
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(pem),
                    },
                )?
            }
            None => redis::Client::open(info)?,
        };
        let conn = client.get_connection_manager_lazy(
            redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(Duration::from_millis(500)))
                .set_response_timeout(Some(OP_TIMEOUT))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(500)),
        )?;
        let (tx, rx) = mpsc::unbounded_channel();
        let redis = Arc::new(Redis {
            conn,
            client,
            prefix: cfg.prefix.clone(),
            origin: crate::auth::new_gateway_key()[3..19].to_string(),
            up: AtomicBool::new(false),
            ops: tx,
            unsynced: Mutex::new(Vec::new()),
            cleared: Mutex::new(Vec::new()),
            released: Mutex::new(Vec::new()),
            leases: AtomicU64::new(0),
            permits: Default::default(),
            gathered: Default::default(),
            slots: Default::default(),
            admit: Script::new(ADMIT),
            spend: Script::new(SPEND),
            lease: Script::new(LEASE),
            raise: Script::new(RAISE),
            quota: Script::new(QUOTA),
            migrate: Script::new(MIGRATE),
        });
        tokio::spawn(sync::worker(Arc::downgrade(&redis), rx));
        Ok(Self { inner: Some(redis) })
    }

    /// None without Redis; otherwise whether it answers.
    pub fn is_up(&self) -> Option<bool> {
        self.inner.as_ref().map(|r| r.up.load(Ordering::Relaxed))
    }

    fn live(&self) -> Option<&Arc<Redis>> {
        self.inner.as_ref().filter(|r| r.up.load(Ordering::Relaxed))
    }

    /// Starts the health loop and the cooldown subscription (once the core exists).
    pub(crate) fn start(&self, core: Weak<dyn Host>) {
        if let Some(r) = &self.inner {
            tokio::spawn(sync::health(r.clone(), core.clone()));
            tokio::spawn(sync::subscribe(r.clone(), core));
        }
    }

    /// Rate limits and budgets on the shared counters. `None` when there are none to ask:
    /// the caller uses the local limiter.
    pub async fn admit(
        &self,
        c: &Client,
        now: i64,
        limiter: &crate::clients::limiter::Limiter,
    ) -> Option<Result<crate::clients::limiter::Headroom, Deny>> {
        let r = self.live()?;
        if let Some(room) = r.permits.take(c, now, limiter) {
            return Some(Ok(room));
        }
        let ask = r.permits.ask(c, now);
        let p = &c.policy;
        let (day, _) = utc_day(now);
        let (month, _) = utc_month(now);
        let out = admit_script(r, c, now, (day, month), ask).await?;
        let (code, retry_ms, dt, du, mt, mu) = match out.as_slice() {
            [c, r, dt, du, mt, mu, ..] => (c, r, dt, du, mt, mu),
            _ => return None,
        };
        // What is left, in thousandths (-1: no such limit; absent from an older script).
        let room = |at: usize, limit: Option<u64>| {
            let level = out.get(at).copied().filter(|l| *l >= 0)?;
            Some(crate::clients::limiter::Room::of(
                limit?,
                level as f64 / 1000.0,
            ))
        };
        let headroom = crate::clients::limiter::Headroom {
            requests: room(6, p.rpm.map(u64::from)),
            tokens: room(7, p.tpm),
        };
        let period = |start, t: &i64, u: &i64| Period {
            start,
            tokens: (*t).max(0) as u64,
            micro_usd: (*u).max(0) as u64,
        };
        let (d, m) = (period(day, dt, du), period(month, mt, mu));
        limiter.mirror(&c.id, d, m);
        Some(match code {
            1 => Err(Deny::Rate {
                limit: p.rpm.unwrap_or(0),
                retry_ms: *retry_ms,
            }),
            2 => Err(Deny::Tokens {
                limit: p.tpm.unwrap_or(0),
                retry_ms: *retry_ms,
            }),
            3 => Err(
                crate::clients::limiter::over_budget(p, &d, &m, now).unwrap_or(Deny::Budget {
                    period: "daily",
                    what: "limit reached".into(),
                    until_ms: utc_day(now).1,
                }),
            ),
            _ => {
                // Granted beyond this request: handed out here without asking again.
                let granted = out.get(8).copied().unwrap_or(1);
                r.permits.keep(c, now, ask, granted, &headroom);
                Ok(headroom)
            }
        })
    }

    /// Adds a finished request's spending to the shared counters (in the background): at
    /// once, or gathered for a moment while the client is far from its limits (`gather`).
    pub fn spend(&self, client: &Arc<Client>, spend: Spend, now: i64) {
        let Some(r) = &self.inner else {
            return;
        };
        if !client.policy.is_metered() {
            return;
        }
        let gathering = r.up.load(Ordering::Relaxed) && r.permits.roomy(client, now);
        match tokio::runtime::Handle::try_current() {
            Ok(rt) if gathering => {
                if r.gathered.add(client, spend, now) {
                    let r = r.clone();
                    rt.spawn(async move {
                        tokio::time::sleep(Duration::from_millis(gather::GATHER_MS)).await;
                        r.write_gathered();
                    });
                }
            }
            _ => {
                let op = r.spend_op(client.clone(), spend, now);
                r.clone().send_unordered(op);
            }
        }
    }

    /// A shared concurrency slot on `provider` (at most `max` across every instance): one
    /// held here from an earlier grant (`slots`), else leased from Redis, several at once while
    /// the provider is busy.
    pub async fn lease(&self, provider: &str, max: Option<u32>, ttl_ms: u64) -> LeaseResult {
        let (Some(r), Some(max)) = (self.live(), max) else {
            return LeaseResult::Local;
        };
        let now = crate::clock::unix_ms();
        let (idle, stale) = r.slots.reuse(provider, now);
        for lease in stale {
            r.give_back(provider.to_string(), lease);
        }
        let held = |id: String, granted_ms: i64| {
            LeaseResult::Held(Lease {
                redis: r.clone(),
                provider: provider.to_string(),
                id,
                granted_ms,
            })
        };
        if let Some((id, granted_ms)) = idle {
            return held(id, granted_ms);
        }
        let ask = r.slots.ask(provider, max, now);
        let id = format!("{}-{}", r.origin, r.leases.fetch_add(1, Ordering::Relaxed));
        let mut inv = r.lease.prepare_invoke();
        // A slot reused near the end of its lifetime still outlives the request given it.
        let ttl = ttl_ms.saturating_add(slots::LIFETIME_MS as u64);
        inv.key(r.key(&["inflight", provider]))
            .arg(now)
            .arg(max)
            .arg(ttl)
            .arg(&id)
            .arg(ask);
        let mut conn = r.conn.clone();
        match tokio::time::timeout(OP_TIMEOUT, inv.invoke_async::<i64>(&mut conn)).await {
            Ok(Ok(n)) if n >= 1 => {
                let more = (2..=n).map(|i| format!("{id}.{i}")).collect();
                r.slots.keep(provider, more, now);
                held(id, now)
            }
            Ok(Ok(_)) => LeaseResult::Full,
            // The grant may have happened without its answer: released on return, in case
            // (with the others it may have granted).
            Ok(Err(e)) => {
                r.down(&e.to_string());
                r.forget_granted(provider, &id, ask);
                LeaseResult::Local
            }
            Err(_) => {
                r.down("no answer in time");
                r.forget_granted(provider, &id, ask);
                LeaseResult::Local
            }
        }
    }

    /// Counts a request (or an answer's tokens) against a provider key's declared limits on
    /// the shared counters; the totals come back into the provider's quota score.
    pub fn quota(
        &self,
        p: &crate::providers::ProviderEntry,
        key: &str,
        requests: u64,
        tokens: u64,
        now: i64,
    ) {
        let Some(r) = self.live() else {
            return;
        };
        if !crate::limits::quota::Quota::counts(&p.config.limits) {
            return;
        }
        r.clone().send_unordered(Op::Quota {
            runtime: p.runtime.clone(),
            provider: p.id().to_string(),
            key: key.to_string(),
            requests,
            tokens,
            now,
            day: p.quota_day(now),
        });
    }

    /// Shares a client key made, changed or revoked here with the other instances.
    pub fn key_changed(&self, store: &crate::store::Store, id: &str) {
        let Some(r) = &self.inner else {
            return;
        };
        match store.synced_keys(Some(id)) {
            Ok(mut v) if !v.is_empty() => {
                let _ = r.ops.send(Op::Key(Box::new(v.remove(0))));
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot read a client key to share"),
        }
    }

    /// Where a conversation was last served, as every instance knows it (`None` without Redis,
    /// when Redis does not answer in time, or when no instance served it lately).
    pub async fn affinity(&self, conversation: &str) -> Option<String> {
        let r = self.live()?;
        let mut conn = r.conn.clone();
        let mut get = redis::cmd("GET");
        get.arg(r.key(&["affinity", conversation]));
        let answer = get.query_async::<Option<String>>(&mut conn);
        tokio::time::timeout(OP_TIMEOUT, answer).await.ok()?.ok()?
    }

    /// Tells every instance where a conversation was served; forgotten after `ttl_ms` idle.
    pub fn set_affinity(&self, conversation: &str, stick: String, ttl_ms: u64) {
        let Some(r) = self.live() else {
            return;
        };
        let mut conn = r.conn.clone();
        let key = r.key(&["affinity", conversation]);
        tokio::spawn(async move {
            let mut set = redis::cmd("SET");
            set.arg(key).arg(stick).arg("PX").arg(ttl_ms.max(1));
            let _ = tokio::time::timeout(OP_TIMEOUT, set.query_async::<()>(&mut conn)).await;
        });
    }

    /// Writes the spending still gathered and waits (briefly) for Redis to take it: the last
    /// thing a stopping gateway asks of the shared state.
    pub async fn settle(&self) {
        let Some(r) = self.live() else {
            return;
        };
        for p in r.gathered.take() {
            let op = r.spend_op(p.client, p.spend, p.now);
            match tokio::time::timeout(OP_TIMEOUT, r.write(&op)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    r.down(&e.to_string());
                    r.keep_unconfirmed(op);
                }
                Err(_) => r.keep_unconfirmed(op),
            }
        }
    }

    /// Waits (briefly) until everything published so far has reached Redis, so another
    /// instance asked right after this one's answer already knows.
    pub async fn barrier(&self) {
        let Some(r) = self.live() else {
            return;
        };
        let (tx, rx) = oneshot::channel();
        if r.ops.send(Op::Barrier(tx)).is_ok() {
            let _ = tokio::time::timeout(OP_TIMEOUT, rx).await;
        }
    }
}

impl crate::limits::Mirror for Shared {
    /// Publishes a cooldown this instance started.
    fn cooldown_started(&self, e: &CooldownEntry) {
        if let Some(r) = &self.inner {
            let _ = r.ops.send(Op::SetCooldown(e.clone()));
        }
    }

    /// Publishes a cooldown this instance cleared.
    fn cooldown_cleared(&self, s: &Scope) {
        if let Some(r) = &self.inner {
            if r.up.load(Ordering::Relaxed) {
                let _ = r.ops.send(Op::ClearCooldown(s.clone()));
            } else if let Ok(mut c) = r.cleared.lock() {
                c.push(s.clone());
            }
        }
    }
}

/// Runs the admission script for `ask` requests of `c` (in the UTC day and month that start
/// at `periods`): its answer, or `None` (Redis marked away) when it gave none in time.
async fn admit_script(
    r: &Redis,
    c: &Client,
    now: i64,
    (day, month): (i64, i64),
    ask: i64,
) -> Option<Vec<i64>> {
    let p = &c.policy;
    let b = &p.budget;
    let micro = |v: Option<f64>| v.map(|v| (v * 1_000_000.0).round() as i64).unwrap_or(0);
    let mut inv = r.admit.prepare_invoke();
    inv.key(r.key(&["rpm", &c.id]))
        .key(r.key(&["tpm", &c.id]))
        .key(r.budget_key(&c.id, PeriodKind::Day, day))
        .key(r.budget_key(&c.id, PeriodKind::Month, month))
        .arg(now)
        .arg(p.rpm.unwrap_or(0))
        .arg(p.tpm.unwrap_or(0))
        .arg(b.day_tokens.unwrap_or(0))
        .arg(micro(b.day_usd))
        .arg(b.month_tokens.unwrap_or(0))
        .arg(micro(b.month_usd))
        .arg(ask);
    let mut conn = r.conn.clone();
    match tokio::time::timeout(OP_TIMEOUT, inv.invoke_async(&mut conn)).await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            r.down(&e.to_string());
            None
        }
        Err(_) => {
            r.down("no answer in time");
            None
        }
    }
}
