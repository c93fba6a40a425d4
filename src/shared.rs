//! State several Baton instances share through Redis (`state.backend: "redis"`): cooldowns and
//! breaker openings (one instance's 429 cools that key for all), client token buckets and
//! budgets (Lua scripts, atomic), and per-provider concurrency leases (so `maxConcurrency` holds
//! across instances).
//!
//! Reads on the request path stay local where they can: cooldowns are mirrored into each
//! instance's table through pub/sub, so choosing a candidate never waits on Redis. Admission and
//! leases ask Redis with a short timeout. When Redis is unreachable every instance carries on
//! with its local state and logs one warning; when it returns, the instance pushes what it
//! learned meanwhile (cooldowns, spending) and pulls what the others did, then uses Redis again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use redis::{AsyncCommands, Script};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::clients::{utc_day, utc_month, Client, Deny, Period, Spend};
use crate::config::RedisConfig;
use crate::limits::{CooldownEntry, Scope};

/// Longest a request waits on Redis before using local state instead.
const OP_TIMEOUT: Duration = Duration::from_millis(250);
/// How often reachability is checked.
const HEALTH_EVERY: Duration = Duration::from_millis(500);

const ADMIT: &str = r#"
local now = tonumber(ARGV[1])
local rpm = tonumber(ARGV[2])
local tpm = tonumber(ARGV[3])
local dt = tonumber(redis.call('HGET', KEYS[3], 't') or '0')
local du = tonumber(redis.call('HGET', KEYS[3], 'u') or '0')
local mt = tonumber(redis.call('HGET', KEYS[4], 't') or '0')
local mu = tonumber(redis.call('HGET', KEYS[4], 'u') or '0')
local function over(limit, used) return limit > 0 and used >= limit end
if over(tonumber(ARGV[4]), dt) or over(tonumber(ARGV[5]), du)
  or over(tonumber(ARGV[6]), mt) or over(tonumber(ARGV[7]), mu) then
  return {3, 0, dt, du, mt, mu}
end
local function level(key, rate)
  local l = tonumber(redis.call('HGET', key, 'l') or tostring(rate))
  local at = tonumber(redis.call('HGET', key, 'a') or tostring(now))
  if now > at then l = math.min(rate, l + (now - at) * rate / 60000) end
  return l
end
if tpm > 0 then
  local l = level(KEYS[2], tpm)
  redis.call('HSET', KEYS[2], 'l', tostring(l), 'a', tostring(now))
  redis.call('PEXPIRE', KEYS[2], 120000)
  if l <= 0 then return {2, math.ceil((1 - l) * 60000 / tpm), dt, du, mt, mu} end
end
if rpm > 0 then
  local l = level(KEYS[1], rpm)
  if l < 1 then
    redis.call('HSET', KEYS[1], 'l', tostring(l), 'a', tostring(now))
    return {1, math.ceil((1 - l) * 60000 / rpm), dt, du, mt, mu}
  end
  redis.call('HSET', KEYS[1], 'l', tostring(l - 1), 'a', tostring(now))
  redis.call('PEXPIRE', KEYS[1], 120000)
end
return {0, 0, dt, du, mt, mu}
"#;

const SPEND: &str = r#"
local now = tonumber(ARGV[1])
local tpm = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
if tpm > 0 then
  local l = tonumber(redis.call('HGET', KEYS[1], 'l') or tostring(tpm))
  local at = tonumber(redis.call('HGET', KEYS[1], 'a') or tostring(now))
  if now > at then l = math.min(tpm, l + (now - at) * tpm / 60000) end
  redis.call('HSET', KEYS[1], 'l', tostring(l - tokens), 'a', tostring(math.max(now, at)))
  redis.call('PEXPIRE', KEYS[1], 120000)
end
redis.call('HINCRBY', KEYS[2], 't', tokens)
redis.call('HINCRBY', KEYS[2], 'u', ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('HINCRBY', KEYS[3], 't', tokens)
redis.call('HINCRBY', KEYS[3], 'u', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return 1
"#;

const LEASE: &str = r#"
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[4])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
return 0
"#;

/// Counts requests (this minute, this UTC day) and tokens (this minute) for one provider key.
const QUOTA: &str = r#"
local m = redis.call('HINCRBY', KEYS[1], 'r', ARGV[1])
local t = redis.call('HINCRBY', KEYS[1], 't', ARGV[2])
redis.call('PEXPIRE', KEYS[1], 120000)
local d = redis.call('HINCRBY', KEYS[2], 'r', ARGV[1])
redis.call('PEXPIRE', KEYS[2], 172800000)
return {m, t, d}
"#;

/// Raises a budget hash to at least this instance's own view (after Redis lost data).
const RAISE: &str = r#"
for i, f in ipairs({'t', 'u'}) do
  local cur = tonumber(redis.call('HGET', KEYS[1], f) or '0')
  if tonumber(ARGV[i]) > cur then redis.call('HSET', KEYS[1], f, ARGV[i]) end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;

/// A cooldown change as published to the other instances.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CooldownMsg {
    origin: String,
    op: String,
    provider: String,
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    until_ms: i64,
    #[serde(default)]
    class: String,
    #[serde(default)]
    reason: String,
    /// `quota`: (minute start, requests, tokens, day start, requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    counts: Option<(i64, u64, u64, i64, u64)>,
    /// `key`: a client key made, changed or revoked through the admin API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key: Option<Box<crate::store::SyncedKey>>,
}

impl CooldownMsg {
    fn new(origin: &str, op: &str, provider: &str) -> Self {
        Self {
            origin: origin.to_string(),
            op: op.to_string(),
            provider: provider.to_string(),
            key: None,
            model: None,
            until_ms: 0,
            class: String::new(),
            reason: String::new(),
            counts: None,
            client_key: None,
        }
    }
}

/// Spending not yet written to Redis: the client, the amount, and when it was last added.
type Unsynced = (Arc<Client>, Spend, i64);

/// What the background worker sends to Redis, in order.
enum Op {
    SetCooldown(CooldownEntry),
    ClearCooldown(Scope),
    Spend {
        client: Arc<Client>,
        spend: Spend,
        now: i64,
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
    },
    /// A client key's current version, for the other instances.
    Key(Box<crate::store::SyncedKey>),
    /// Answered once everything sent before it has been written.
    Barrier(oneshot::Sender<()>),
}

/// Where shared state goes; `Shared::local()` when there is no Redis.
#[derive(Default, Clone)]
pub struct Shared {
    inner: Option<Arc<Redis>>,
}

pub struct Redis {
    conn: ConnectionManager,
    client: redis::Client,
    prefix: String,
    /// Distinguishes this instance's own messages.
    origin: String,
    up: AtomicBool,
    ops: mpsc::UnboundedSender<Op>,
    /// Spending that could not be written while Redis was away, by client.
    unsynced: Mutex<HashMap<String, Unsynced>>,
    /// Cooldowns cleared while Redis was away (cleared there on return).
    cleared: Mutex<Vec<Scope>>,
    leases: AtomicU64,
    admit: Script,
    spend: Script,
    lease: Script,
    raise: Script,
    quota: Script,
}

/// What the router holds while a provider's shared concurrency slot is taken.
pub struct Lease {
    redis: Arc<Redis>,
    provider: String,
    id: String,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.redis.clone().send_unordered(Op::Release {
            provider: std::mem::take(&mut self.provider),
            lease: std::mem::take(&mut self.id),
        });
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

fn cooldown_field(s: &Scope) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}",
        s.provider,
        s.key.as_deref().unwrap_or(""),
        s.model.as_deref().unwrap_or("")
    )
}

fn scope_of(field: &str) -> Option<Scope> {
    let mut it = field.split('\u{1f}');
    let provider = it.next()?.to_string();
    let key = it.next().filter(|s| !s.is_empty()).map(str::to_string);
    let model = it.next().filter(|s| !s.is_empty()).map(str::to_string);
    Some(Scope {
        provider,
        key,
        model,
    })
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
            unsynced: Mutex::new(HashMap::new()),
            cleared: Mutex::new(Vec::new()),
            leases: AtomicU64::new(0),
            admit: Script::new(ADMIT),
            spend: Script::new(SPEND),
            lease: Script::new(LEASE),
            raise: Script::new(RAISE),
            quota: Script::new(QUOTA),
        });
        tokio::spawn(worker(Arc::downgrade(&redis), rx));
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
    pub fn start(&self, core: Weak<crate::gateway::Core>) {
        if let Some(r) = &self.inner {
            tokio::spawn(health(r.clone(), core.clone()));
            tokio::spawn(subscribe(r.clone(), core));
        }
    }

    /// Rate limits and budgets on the shared counters. `None` when there are none to ask:
    /// the caller uses the local limiter.
    pub async fn admit(
        &self,
        c: &Client,
        now: i64,
        limiter: &crate::clients::Limiter,
    ) -> Option<Result<(), Deny>> {
        let r = self.live()?;
        let p = &c.policy;
        let (day, _) = utc_day(now);
        let (month, _) = utc_month(now);
        let b = &p.budget;
        let micro = |v: Option<f64>| v.map(|v| (v * 1_000_000.0).round() as i64).unwrap_or(0);
        let mut inv = r.admit.prepare_invoke();
        inv.key(r.key(&["rpm", &c.id]))
            .key(r.key(&["tpm", &c.id]))
            .key(r.key(&["budget", &c.id, &day.to_string()]))
            .key(r.key(&["budget", &c.id, &month.to_string()]))
            .arg(now)
            .arg(p.rpm.unwrap_or(0))
            .arg(p.tpm.unwrap_or(0))
            .arg(b.day_tokens.unwrap_or(0))
            .arg(micro(b.day_usd))
            .arg(b.month_tokens.unwrap_or(0))
            .arg(micro(b.month_usd));
        let mut conn = r.conn.clone();
        let out: Vec<i64> =
            match tokio::time::timeout(OP_TIMEOUT, inv.invoke_async(&mut conn)).await {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => {
                    r.down(&e.to_string());
                    return None;
                }
                Err(_) => {
                    r.down("no answer in time");
                    return None;
                }
            };
        let [code, retry_ms, dt, du, mt, mu] = out.as_slice() else {
            return None;
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
                crate::clients::limiter_over_budget(p, &d, &m, now).unwrap_or(Deny::Budget {
                    period: "daily",
                    what: "limit reached".into(),
                    until_ms: utc_day(now).1,
                }),
            ),
            _ => Ok(()),
        })
    }

    /// Adds a finished request's spending to the shared counters (in the background).
    pub fn spend(&self, client: &Arc<Client>, spend: Spend, now: i64) {
        if let Some(r) = &self.inner {
            if client.policy.is_metered() {
                r.clone().send_unordered(Op::Spend {
                    client: client.clone(),
                    spend,
                    now,
                });
            }
        }
    }

    /// A shared concurrency slot on `provider` (at most `max` across every instance).
    pub async fn lease(&self, provider: &str, max: Option<u32>, ttl_ms: u64) -> LeaseResult {
        let (Some(r), Some(max)) = (self.live(), max) else {
            return LeaseResult::Local;
        };
        let id = format!("{}-{}", r.origin, r.leases.fetch_add(1, Ordering::Relaxed));
        let now = crate::clock::unix_ms();
        let mut inv = r.lease.prepare_invoke();
        inv.key(r.key(&["inflight", provider]))
            .arg(now)
            .arg(max)
            .arg(ttl_ms)
            .arg(&id);
        let mut conn = r.conn.clone();
        match tokio::time::timeout(OP_TIMEOUT, inv.invoke_async::<i64>(&mut conn)).await {
            Ok(Ok(1)) => LeaseResult::Held(Lease {
                redis: r.clone(),
                provider: provider.to_string(),
                id,
            }),
            Ok(Ok(_)) => LeaseResult::Full,
            Ok(Err(e)) => {
                r.down(&e.to_string());
                LeaseResult::Local
            }
            Err(_) => {
                r.down("no answer in time");
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

    /// Publishes a cooldown this instance started.
    pub fn cooldown_started(&self, e: &CooldownEntry) {
        if let Some(r) = &self.inner {
            let _ = r.ops.send(Op::SetCooldown(e.clone()));
        }
    }

    /// Publishes a cooldown this instance cleared.
    pub fn cooldown_cleared(&self, s: &Scope) {
        if let Some(r) = &self.inner {
            if r.up.load(Ordering::Relaxed) {
                let _ = r.ops.send(Op::ClearCooldown(s.clone()));
            } else if let Ok(mut c) = r.cleared.lock() {
                c.push(s.clone());
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

impl Redis {
    /// Sends an operation whose order does not matter (spending, lease release, quota counts)
    /// on its own task: the multiplexed connection pipelines them, and they never wait behind
    /// each other or behind the ordered cooldown queue.
    fn send_unordered(self: Arc<Self>, op: Op) {
        if !self.up.load(Ordering::Relaxed) {
            if let Op::Spend { client, spend, now } = op {
                self.remember_spend(client, spend, now);
            }
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let _ = self.ops.send(op);
            return;
        };
        rt.spawn(async move {
            if let Err(e) = self.write(&op).await {
                self.down(&e.to_string());
                if let Op::Spend { client, spend, now } = op {
                    self.remember_spend(client, spend, now);
                }
            }
        });
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut k = self.prefix.clone();
        for p in parts {
            k.push(':');
            k.push_str(p);
        }
        k
    }

    fn down(&self, why: &str) {
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(error = %why, "shared state (Redis) unreachable: serving on this instance's local state until it returns");
        }
    }

    async fn write(&self, op: &Op) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        match op {
            Op::SetCooldown(e) => {
                let field = cooldown_field(&e.scope);
                let msg = CooldownMsg {
                    key: e.scope.key.clone(),
                    model: e.scope.model.clone(),
                    until_ms: e.until_ms,
                    class: e.class.clone(),
                    reason: e.reason.clone(),
                    ..CooldownMsg::new(&self.origin, "set", &e.scope.provider)
                };
                let json = serde_json::to_string(&msg).unwrap_or_default();
                redis::pipe()
                    .atomic()
                    .hset(self.key(&["cooldowns"]), field, &json)
                    .ignore()
                    .publish(self.key(&["events"]), &json)
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            }
            Op::ClearCooldown(s) => {
                let msg = CooldownMsg {
                    key: s.key.clone(),
                    model: s.model.clone(),
                    ..CooldownMsg::new(&self.origin, "clear", &s.provider)
                };
                let json = serde_json::to_string(&msg).unwrap_or_default();
                redis::pipe()
                    .atomic()
                    .hdel(self.key(&["cooldowns"]), cooldown_field(s))
                    .ignore()
                    .publish(self.key(&["events"]), &json)
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            }
            Op::Spend { client, spend, now } => self.write_spend(client, *spend, *now).await,
            Op::Release { provider, lease } => {
                conn.zrem::<_, _, ()>(self.key(&["inflight", provider]), lease)
                    .await
            }
            Op::Quota {
                runtime,
                provider,
                key,
                requests,
                tokens,
                now,
            } => {
                let minute = now.div_euclid(60_000) * 60_000;
                let day = now.div_euclid(86_400_000) * 86_400_000;
                let mut inv = self.quota.prepare_invoke();
                inv.key(self.key(&["quota", provider, key, &minute.to_string()]))
                    .key(self.key(&["quota", provider, key, &day.to_string()]))
                    .arg(requests)
                    .arg(tokens);
                let v: Vec<u64> = inv.invoke_async(&mut conn).await?;
                if let [m, t, d] = v.as_slice() {
                    runtime.quota.shared(
                        key,
                        crate::limits::quota::SharedCounts {
                            minute_start: minute,
                            minute_requests: *m,
                            minute_tokens: *t,
                            day_start: day,
                            day_requests: *d,
                        },
                    );
                    // The other instances learn the totals too, without asking.
                    let msg = CooldownMsg {
                        key: Some(key.clone()),
                        counts: Some((minute, *m, *t, day, *d)),
                        ..CooldownMsg::new(&self.origin, "quota", provider)
                    };
                    let json = serde_json::to_string(&msg).unwrap_or_default();
                    conn.publish::<_, _, ()>(self.key(&["events"]), json)
                        .await?;
                }
                Ok(())
            }
            Op::Key(k) => {
                let msg = CooldownMsg {
                    client_key: Some(k.clone()),
                    ..CooldownMsg::new(&self.origin, "key", "")
                };
                let json = serde_json::to_string(&msg).unwrap_or_default();
                let stored = serde_json::to_string(k).unwrap_or_default();
                redis::pipe()
                    .atomic()
                    .hset(self.key(&["keys"]), &k.row.id, stored)
                    .ignore()
                    .publish(self.key(&["events"]), &json)
                    .ignore()
                    .query_async::<()>(&mut conn)
                    .await
            }
            Op::Barrier(_) => Ok(()),
        }
    }

    /// Takes the other instances' client keys where theirs are newer; returns the versions
    /// Redis holds.
    async fn pull_keys(
        &self,
        core: &crate::gateway::Core,
    ) -> redis::RedisResult<HashMap<String, i64>> {
        let mut conn = self.conn.clone();
        let theirs: HashMap<String, String> = conn.hgetall(self.key(&["keys"])).await?;
        let mut known = HashMap::new();
        let mut changed = false;
        for json in theirs.values() {
            let Ok(k) = serde_json::from_str::<crate::store::SyncedKey>(json) else {
                continue;
            };
            known.insert(k.row.id.clone(), k.updated_ms);
            match core.store.adopt_key(&k) {
                Ok(c) => changed |= c,
                Err(e) => tracing::warn!(error = %e, "cannot take a shared client key"),
            }
        }
        if changed {
            if let Err(e) = core.load_ui_keys() {
                tracing::warn!(error = %e, "cannot reload client keys");
            }
        }
        Ok(known)
    }

    async fn write_spend(&self, c: &Client, spend: Spend, now: i64) -> redis::RedisResult<()> {
        let (day, next_day) = utc_day(now);
        let (month, next_month) = utc_month(now);
        let mut inv = self.spend.prepare_invoke();
        inv.key(self.key(&["tpm", &c.id]))
            .key(self.key(&["budget", &c.id, &day.to_string()]))
            .key(self.key(&["budget", &c.id, &month.to_string()]))
            .arg(now)
            .arg(c.policy.tpm.unwrap_or(0))
            .arg(spend.tokens)
            .arg(spend.micro_usd)
            // Kept a day past the period's end.
            .arg(next_day - now + 86_400_000)
            .arg(next_month - now + 86_400_000);
        let mut conn = self.conn.clone();
        inv.invoke_async::<i64>(&mut conn).await.map(|_| ())
    }

    /// Pushes what this instance learned while Redis was away and pulls what the others did.
    async fn reconcile(&self, core: &crate::gateway::Core) -> redis::RedisResult<()> {
        let cleared = self
            .cleared
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        for s in &cleared {
            self.write(&Op::ClearCooldown(s.clone())).await?;
        }
        let known_keys = self.pull_keys(core).await?;
        if let Ok(mine) = core.store.synced_keys(None) {
            for k in mine {
                if known_keys.get(&k.row.id).is_none_or(|u| *u < k.updated_ms) {
                    self.write(&Op::Key(Box::new(k))).await?;
                }
            }
        }
        let known = self.pull_cooldowns(core).await?;
        for e in core.cooldowns.active() {
            let field = cooldown_field(&e.scope);
            if known.get(&field).is_none_or(|u| *u < e.until_ms) {
                self.write(&Op::SetCooldown(e)).await?;
            }
        }
        let pending = self
            .unsynced
            .lock()
            .map(|mut u| std::mem::take(&mut *u))
            .unwrap_or_default();
        for (_, (client, spend, at)) in pending {
            if let Err(e) = self.write_spend(&client, spend, at).await {
                self.remember_spend(client, spend, at);
                return Err(e);
            }
            // If Redis lost its data (restarted without persistence), what this instance saw
            // is still a floor for the period's spending.
            if let Some((day, month)) = core.clients.periods(&client.id) {
                let now = core.clock.now_ms();
                for (p, end) in [(day, utc_day(now).1), (month, utc_month(now).1)] {
                    let mut inv = self.raise.prepare_invoke();
                    inv.key(self.key(&["budget", &client.id, &p.start.to_string()]))
                        .arg(p.tokens)
                        .arg(p.micro_usd)
                        .arg(end - now + 86_400_000);
                    let mut conn = self.conn.clone();
                    inv.invoke_async::<i64>(&mut conn).await?;
                }
            }
        }
        Ok(())
    }

    /// Takes every live cooldown in Redis into this instance's table; returns their ends.
    async fn pull_cooldowns(
        &self,
        core: &crate::gateway::Core,
    ) -> redis::RedisResult<HashMap<String, i64>> {
        let now = core.clock.now_ms();
        let mut conn = self.conn.clone();
        let theirs: HashMap<String, String> = conn.hgetall(self.key(&["cooldowns"])).await?;
        let mut known: HashMap<String, i64> = HashMap::new();
        for (field, json) in &theirs {
            let Ok(m) = serde_json::from_str::<CooldownMsg>(json) else {
                continue;
            };
            if m.until_ms <= now {
                conn.hdel::<_, _, ()>(self.key(&["cooldowns"]), field)
                    .await?;
                continue;
            }
            known.insert(field.clone(), m.until_ms);
            if let Some(scope) = scope_of(field) {
                core.cooldowns.apply_remote(CooldownEntry {
                    scope,
                    until_ms: m.until_ms,
                    class: m.class,
                    reason: m.reason,
                });
            }
        }
        Ok(known)
    }

    fn remember_spend(&self, client: Arc<Client>, spend: Spend, now: i64) {
        if let Ok(mut u) = self.unsynced.lock() {
            let e = u
                .entry(client.id.clone())
                .or_insert((client, Spend::default(), now));
            // A day or month that ended meanwhile is past enforcing; count it in the newest.
            e.1.tokens += spend.tokens;
            e.1.micro_usd += spend.micro_usd;
            e.2 = e.2.max(now);
        }
    }
}

async fn worker(redis: Weak<Redis>, mut rx: mpsc::UnboundedReceiver<Op>) {
    while let Some(op) = rx.recv().await {
        let Some(r) = redis.upgrade() else {
            return;
        };
        if let Op::Barrier(tx) = op {
            let _ = tx.send(());
            continue;
        }
        if !r.up.load(Ordering::Relaxed) {
            if let Op::Spend { client, spend, now } = op {
                r.remember_spend(client, spend, now);
            }
            continue;
        }
        if let Err(e) = r.write(&op).await {
            r.down(&e.to_string());
            if let Op::Spend { client, spend, now } = op {
                r.remember_spend(client, spend, now);
            }
        }
    }
}

async fn health(r: Arc<Redis>, core: Weak<crate::gateway::Core>) {
    let mut announced_start = false;
    loop {
        let Some(core) = core.upgrade() else {
            return;
        };
        if core.stopping.is_cancelled() {
            return;
        }
        let mut conn = r.conn.clone();
        let ping = tokio::time::timeout(
            OP_TIMEOUT,
            redis::cmd("PING").query_async::<String>(&mut conn),
        )
        .await;
        match ping {
            Ok(Ok(_)) => {
                if !r.up.load(Ordering::Relaxed) {
                    match r.reconcile(&core).await {
                        Ok(()) => {
                            r.up.store(true, Ordering::Relaxed);
                            tracing::info!(
                                "shared state (Redis) connected; cooldowns and spending reconciled"
                            );
                        }
                        Err(e) => tracing::debug!(error = %e, "reconciling with Redis failed"),
                    }
                }
            }
            Ok(Err(e)) => {
                if !announced_start && !r.up.load(Ordering::Relaxed) {
                    tracing::warn!(error = %e, "shared state (Redis) unreachable: serving on this instance's local state until it answers");
                }
                r.down(&e.to_string());
            }
            Err(_) => r.down("no answer in time"),
        }
        announced_start = true;
        drop(core);
        tokio::time::sleep(HEALTH_EVERY).await;
    }
}

/// Applies the other instances' cooldown changes as they are published.
async fn subscribe(r: Arc<Redis>, core: Weak<crate::gateway::Core>) {
    let channel = r.key(&["events"]);
    loop {
        if core.upgrade().is_none_or(|c| c.stopping.is_cancelled()) {
            return;
        }
        let mut pubsub = match r.client.get_async_pubsub().await {
            Ok(p) => p,
            Err(_) => {
                tokio::time::sleep(HEALTH_EVERY).await;
                continue;
            }
        };
        if pubsub.subscribe(&channel).await.is_err() {
            tokio::time::sleep(HEALTH_EVERY).await;
            continue;
        }
        // Whatever was published before this subscription is in the hashes already.
        if let Some(c) = core.upgrade() {
            if let Err(e) = r.pull_keys(&c).await {
                tracing::debug!(error = %e, "reading shared client keys failed");
            }
            if let Err(e) = r.pull_cooldowns(&c).await {
                tracing::debug!(error = %e, "reading shared cooldowns failed");
            }
        }
        let mut stream = pubsub.into_on_message();
        loop {
            let stopping = core.upgrade().map(|c| c.stopping.clone());
            let stopped = async move {
                if let Some(t) = stopping {
                    t.cancelled_owned().await;
                }
            };
            let msg = tokio::select! {
                m = stream.next() => m,
                _ = stopped => return,
            };
            let Some(msg) = msg else {
                break;
            };
            let Ok(payload) = msg.get_payload::<String>() else {
                continue;
            };
            let Ok(m) = serde_json::from_str::<CooldownMsg>(&payload) else {
                continue;
            };
            if m.origin == r.origin {
                continue;
            }
            let Some(core) = core.upgrade() else {
                return;
            };
            if let Some(k) = &m.client_key {
                match core.store.adopt_key(k) {
                    Ok(true) => {
                        if let Err(e) = core.load_ui_keys() {
                            tracing::warn!(error = %e, "cannot reload client keys");
                        }
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot take a shared client key"),
                }
                continue;
            }
            if let (Some((ms, mr, mt, ds, dr)), Some(key)) = (m.counts, &m.key) {
                let snap = core.snapshot.load();
                if let Some(p) = snap.providers.iter().find(|p| p.id() == m.provider) {
                    p.runtime.quota.shared(
                        key,
                        crate::limits::quota::SharedCounts {
                            minute_start: ms,
                            minute_requests: mr,
                            minute_tokens: mt,
                            day_start: ds,
                            day_requests: dr,
                        },
                    );
                }
                continue;
            }
            let scope = Scope {
                provider: m.provider,
                key: m.key,
                model: m.model,
            };
            match m.op.as_str() {
                "set" => core.cooldowns.apply_remote(CooldownEntry {
                    scope,
                    until_ms: m.until_ms,
                    class: m.class,
                    reason: m.reason,
                }),
                "clear" => core.cooldowns.remove_remote(&scope),
                _ => {}
            }
        }
        // The subscription dropped (Redis went away): the health loop reconciles on return.
        tokio::time::sleep(HEALTH_EVERY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooldown_fields_round_trip() {
        let s = Scope {
            provider: "groq".into(),
            key: Some("GROQ_API_KEY".into()),
            model: None,
        };
        assert_eq!(scope_of(&cooldown_field(&s)), Some(s));
    }
}
