//! The background side of shared state: the ordered writer, the reachability check with
//! reconciliation, the subscription that applies other instances' changes, and the message they
//! exchange.

use super::reconcile::adopt_keys;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use futures_util::StreamExt;
use redis::AsyncCommands;
use tokio::sync::mpsc;

use super::msg::{cooldown_field, Change, SharedMsg};
use super::types::PeriodKind;
use super::types::{Host, Op, Redis, HEALTH_EVERY, OP_TIMEOUT};
use crate::clients::limiter::Spend;
use crate::clients::{utc_day, utc_month, Client};
use crate::limits::quota::SharedCounts;
use crate::limits::Scope;

impl Redis {
    /// Sends an operation whose order does not matter (spending, lease release, quota counts)
    /// on its own task: the multiplexed connection pipelines them, and they never wait behind
    /// each other or behind the ordered cooldown queue.
    pub(super) fn send_unordered(self: Arc<Self>, op: Op) {
        if !self.up.load(Ordering::Relaxed) {
            self.keep_unconfirmed(op);
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            let _ = self.ops.send(op);
            return;
        };
        rt.spawn(async move {
            if let Err(e) = self.write(&op).await {
                self.down(&e.to_string());
                self.keep_unconfirmed(op);
            }
        });
    }

    /// A spending write, under an id of its own (Redis applies each id once).
    pub(super) fn spend_op(&self, client: Arc<Client>, spend: Spend, now: i64) -> Op {
        Op::Spend {
            client,
            spend,
            now,
            id: self.leases.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Writes the spending gathered so far (`gather`), one operation per client and day.
    pub(super) fn write_gathered(self: &Arc<Self>) {
        for p in self.gathered.take() {
            let op = self.spend_op(p.client, p.spend, p.now);
            self.clone().send_unordered(op);
        }
    }

    /// An operation Redis did not confirm: spending is kept for the reconnection to replay
    /// (under its own id); the rest is state the reconciliation rebuilds anyway.
    pub(super) fn keep_unconfirmed(&self, op: Op) {
        match op {
            Op::Spend {
                client,
                spend,
                now,
                id,
            } => self.remember_spend(client, spend, now, Some(id)),
            Op::Release { provider, lease } => self.forget_lease(&provider, lease),
            _ => {}
        }
    }

    /// Removes a concurrency lease from Redis (in the background; once it answers again when
    /// it is away).
    pub(super) fn give_back(self: &Arc<Self>, provider: String, lease: String) {
        self.clone().send_unordered(Op::Release { provider, lease });
    }

    /// A grant whose answer never came: its first lease and the `ask - 1` more it may have
    /// granted, removed from Redis once it answers again.
    pub(super) fn forget_granted(&self, provider: &str, id: &str, ask: i64) {
        self.forget_lease(provider, id.to_string());
        for i in 2..=ask {
            self.forget_lease(provider, format!("{id}.{i}"));
        }
    }

    /// A lease to remove from Redis once it answers again (see `released`).
    pub(super) fn forget_lease(&self, provider: &str, lease: String) {
        if let Ok(mut r) = self.released.lock() {
            if r.len() < super::types::MAX_UNSYNCED {
                r.push((provider.to_string(), lease));
            }
        }
    }

    pub(super) fn key(&self, parts: &[&str]) -> String {
        let mut k = self.prefix.clone();
        for p in parts {
            k.push(':');
            k.push_str(p);
        }
        k
    }

    /// A client's spending in one budget period: `budget:{client}:day:{start}` or
    /// `budget:{client}:month:{start}`. The kind is part of the key because on the 1st of a
    /// month the day and the month start at the same instant (keys named by the start alone
    /// were one hash there, and every request was counted twice).
    pub(super) fn budget_key(&self, client: &str, period: PeriodKind, start: i64) -> String {
        self.key(&["budget", client, period.name(), &start.to_string()])
    }

    /// A provider key's request count in one quota window: `quota:{provider}:{key}:minute:{start}`
    /// or `…:day:{start}` (the first minute of a day starts with the day).
    pub(super) fn quota_key(
        &self,
        provider: &str,
        key: &str,
        period: PeriodKind,
        start: i64,
    ) -> String {
        self.key(&["quota", provider, key, period.name(), &start.to_string()])
    }

    pub(super) fn down(&self, why: &str) {
        self.permits.clear();
        // Idle slots: removed from Redis once it answers again.
        for (provider, lease) in self.slots.drain() {
            self.forget_lease(&provider, lease);
        }
        if self.up.swap(false, Ordering::Relaxed) {
            tracing::warn!(error = %why, "shared state (Redis) unreachable: serving on this instance's local state until it returns");
        }
    }

    pub(super) async fn write(&self, op: &Op) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        match op {
            Op::SetCooldown(e) => {
                let field = cooldown_field(&e.scope);
                let msg = SharedMsg::new(&self.origin, Change::set(e));
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
                let msg = SharedMsg::new(
                    &self.origin,
                    Change::Clear {
                        provider: s.provider.clone(),
                        key: s.key.clone(),
                        model: s.model.clone(),
                    },
                );
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
            Op::Spend {
                client,
                spend,
                now,
                id,
            } => self.write_spend(client, *spend, *now, *id).await,
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
                day,
            } => {
                self.write_quota(runtime, provider, key, (*requests, *tokens), *now, *day)
                    .await
            }
            Op::Key(k) => {
                let msg = SharedMsg::new(
                    &self.origin,
                    Change::Key {
                        client_key: k.clone(),
                    },
                );
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

    /// Counts requests and tokens on a provider key's shared minute and day counters; the
    /// totals come back into this instance's quota score and go out to the others.
    async fn write_quota(
        &self,
        runtime: &crate::providers::ProviderRuntime,
        provider: &str,
        key: &str,
        (requests, tokens): (u64, u64),
        now: i64,
        day: (i64, i64),
    ) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        let minute = crate::clock::minute_start(now);
        let (day, day_end) = day;
        let mut inv = self.quota.prepare_invoke();
        inv.key(self.quota_key(provider, key, PeriodKind::Minute, minute))
            .key(self.quota_key(provider, key, PeriodKind::Day, day))
            .arg(requests)
            .arg(tokens)
            // Kept a day past the day's end (a DST day is 25 hours long).
            .arg(day_end - now + 86_400_000);
        let v: Vec<u64> = inv.invoke_async(&mut conn).await?;
        if let [m, t, d] = v.as_slice() {
            let counts = SharedCounts {
                minute_start: minute,
                minute_requests: *m,
                minute_tokens: *t,
                day_start: day,
                day_requests: *d,
            };
            runtime.quota.shared(key, counts);
            // The other instances learn the totals too, without asking.
            let msg = SharedMsg::new(
                &self.origin,
                Change::Quota {
                    provider: provider.to_string(),
                    key: key.to_string(),
                    counts,
                },
            );
            let json = serde_json::to_string(&msg).unwrap_or_default();
            conn.publish::<_, _, ()>(self.key(&["events"]), json)
                .await?;
        }
        Ok(())
    }

    /// Adds one request's spending, once: a write Redis applied but whose answer was lost (a
    /// timeout, a connection that broke) is replayed under the same id and skipped.
    pub(super) async fn write_spend(
        &self,
        c: &Client,
        spend: Spend,
        now: i64,
        id: u64,
    ) -> redis::RedisResult<()> {
        let (day, next_day) = utc_day(now);
        let (month, next_month) = utc_month(now);
        let mut inv = self.spend.prepare_invoke();
        inv.key(self.key(&["tpm", &c.id]))
            .key(self.budget_key(&c.id, PeriodKind::Day, day))
            .key(self.budget_key(&c.id, PeriodKind::Month, month))
            .key(self.key(&["spent", &self.origin, &id.to_string()]))
            .arg(now)
            .arg(c.policy.tpm.unwrap_or(0))
            .arg(spend.tokens)
            .arg(spend.micro_usd)
            // Kept a day past the period's end.
            .arg(next_day - now + 86_400_000)
            .arg(next_month - now + 86_400_000)
            .arg(super::types::SPENT_MARKER_MS);
        let mut conn = self.conn.clone();
        inv.invoke_async::<i64>(&mut conn).await.map(|_| ())
    }
}

pub(super) async fn worker(redis: Weak<Redis>, mut rx: mpsc::UnboundedReceiver<Op>) {
    while let Some(op) = rx.recv().await {
        let Some(r) = redis.upgrade() else {
            return;
        };
        if let Op::Barrier(tx) = op {
            let _ = tx.send(());
            continue;
        }
        if !r.up.load(Ordering::Relaxed) {
            r.keep_unconfirmed(op);
            continue;
        }
        if let Err(e) = r.write(&op).await {
            r.down(&e.to_string());
            r.keep_unconfirmed(op);
        }
    }
}

pub(super) async fn health(r: Arc<Redis>, core: Weak<dyn Host>) {
    let mut announced_start = false;
    loop {
        let Some(core) = core.upgrade() else {
            return;
        };
        if core.stopping().is_cancelled() {
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
                    match r.reconcile(&*core).await {
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
        // Slots held ahead that nobody took within their lifetime go back.
        for (provider, lease) in r.slots.sweep(crate::clock::unix_ms()) {
            r.give_back(provider, lease);
        }
        tokio::time::sleep(HEALTH_EVERY).await;
    }
}

/// Applies the other instances' cooldown changes as they are published.
/// Long because it is one reconnecting loop with a `select!` over messages and shutdown.
pub(super) async fn subscribe(r: Arc<Redis>, core: Weak<dyn Host>) {
    let channel = r.key(&["events"]);
    loop {
        if core.upgrade().is_none_or(|c| c.stopping().is_cancelled()) {
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
            if let Err(e) = r.pull_keys(&*c).await {
                tracing::debug!(error = %e, "reading shared client keys failed");
            }
            if let Err(e) = r.pull_cooldowns(&*c).await {
                tracing::debug!(error = %e, "reading shared cooldowns failed");
            }
        }
        let mut stream = pubsub.into_on_message();
        loop {
            let stopping = core.upgrade().map(|c| c.stopping().clone());
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
            let Ok(m) = serde_json::from_str::<SharedMsg>(&payload) else {
                continue;
            };
            if m.origin == r.origin {
                continue;
            }
            let Some(core) = core.upgrade() else {
                return;
            };
            match m.change {
                Change::Key { client_key } => adopt_keys(&*core, [client_key.as_ref()]),
                Change::Quota {
                    provider,
                    key,
                    counts,
                } => {
                    if let Some(p) = core.provider(&provider) {
                        p.runtime.quota.shared(&key, counts);
                    }
                }
                set @ Change::Set { .. } => {
                    if let Some(entry) = set.cooldown() {
                        core.cooldowns().apply_remote(entry);
                    }
                }
                Change::Clear {
                    provider,
                    key,
                    model,
                } => core.cooldowns().remove_remote(&Scope {
                    provider,
                    key,
                    model,
                }),
            }
        }
        // The subscription dropped (Redis went away): the health loop reconciles on return.
        tokio::time::sleep(HEALTH_EVERY).await;
    }
}
