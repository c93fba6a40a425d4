//! Coming back after an outage: what this instance learned while Redis was away (cooldowns,
//! client keys, spending it could not confirm) goes up, what the others did comes down.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use redis::AsyncCommands;

use super::msg::{cooldown_field, scope_of, SharedMsg};
use super::types::{Host, Op, PeriodKind, Redis};
use crate::clients::limiter::Spend;
use crate::clients::{utc_day, utc_month, Client};

impl Redis {
    /// Takes the other instances' client keys where theirs are newer; returns the versions
    /// Redis holds.
    pub(super) async fn pull_keys(
        &self,
        core: &dyn Host,
    ) -> redis::RedisResult<HashMap<String, i64>> {
        let mut conn = self.conn.clone();
        let theirs: HashMap<String, String> = conn.hgetall(self.key(&["keys"])).await?;
        let keys: Vec<crate::store::SyncedKey> = theirs
            .values()
            .filter_map(|json| serde_json::from_str(json).ok())
            .collect();
        adopt_keys(core, &keys);
        Ok(keys.into_iter().map(|k| (k.row.id, k.updated_ms)).collect())
    }

    /// Pushes what this instance learned while Redis was away and pulls what the others did.
    pub(super) async fn reconcile(&self, core: &dyn Host) -> redis::RedisResult<()> {
        self.migrate(core).await?;
        let cleared = self
            .cleared
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default();
        for s in &cleared {
            self.write(&Op::ClearCooldown(s.clone())).await?;
        }
        self.replay_releases().await?;
        let known_keys = self.pull_keys(core).await?;
        if let Ok(mine) = core.store().synced_keys(None) {
            for k in mine {
                if known_keys.get(&k.row.id).is_none_or(|u| *u < k.updated_ms) {
                    self.write(&Op::Key(Box::new(k))).await?;
                }
            }
        }
        let known = self.pull_cooldowns(core).await?;
        for e in core.cooldowns().active() {
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
        let mut floors: Vec<Arc<Client>> = Vec::new();
        let mut pending = pending.into_iter();
        while let Some((client, spend, at, id)) = pending.next() {
            // A summed-up entry never had one write: it gets a fresh id.
            let id = id.unwrap_or_else(|| self.leases.fetch_add(1, Ordering::Relaxed));
            if let Err(e) = self.write_spend(&client, spend, at, id).await {
                // This one and every one after it wait for the next reconnection.
                self.remember_spend(client, spend, at, Some(id));
                for (c, s, a, i) in pending {
                    self.remember_spend(c, s, a, i);
                }
                return Err(e);
            }
            if !floors.iter().any(|c| c.id == client.id) {
                floors.push(client);
            }
        }
        // If Redis lost its data (restarted without persistence), what this instance saw is
        // still a floor for the period's spending.
        for client in floors {
            if let Some((day, month)) = core.clients().periods(&client.id) {
                let now = core.now_ms();
                for (kind, p, end) in [
                    (PeriodKind::Day, day, utc_day(now).1),
                    (PeriodKind::Month, month, utc_month(now).1),
                ] {
                    let mut inv = self.raise.prepare_invoke();
                    inv.key(self.budget_key(&client.id, kind, p.start))
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
    pub(super) async fn pull_cooldowns(
        &self,
        core: &dyn Host,
    ) -> redis::RedisResult<HashMap<String, i64>> {
        let now = core.now_ms();
        let mut conn = self.conn.clone();
        let theirs: HashMap<String, String> = conn.hgetall(self.key(&["cooldowns"])).await?;
        let mut known: HashMap<String, i64> = HashMap::new();
        for (field, json) in &theirs {
            // A field that does not read as a cooldown (another version's, or damaged) is left.
            let Some(mut entry) = serde_json::from_str::<SharedMsg>(json)
                .ok()
                .and_then(|m| m.change.cooldown())
            else {
                continue;
            };
            if entry.until_ms <= now {
                conn.hdel::<_, _, ()>(self.key(&["cooldowns"]), field)
                    .await?;
                continue;
            }
            known.insert(field.clone(), entry.until_ms);
            // The field names the scope.
            if let Some(scope) = scope_of(field) {
                entry.scope = scope;
                core.cooldowns().apply_remote(entry);
            }
        }
        Ok(known)
    }

    /// Gives back the leases Redis missed the release (or the grant's answer) of.
    async fn replay_releases(&self) -> redis::RedisResult<()> {
        let released = self
            .released
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default();
        let mut released = released.into_iter();
        while let Some((provider, lease)) = released.next() {
            let op = Op::Release { provider, lease };
            if let Err(e) = self.write(&op).await {
                // This one and the rest wait for the next return.
                self.keep_unconfirmed(op);
                for (provider, lease) in released {
                    self.forget_lease(&provider, lease);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Keeps a spending write Redis has not confirmed, for the reconnection to replay.
    pub(super) fn remember_spend(
        &self,
        client: Arc<Client>,
        spend: Spend,
        now: i64,
        id: Option<u64>,
    ) {
        let Ok(mut u) = self.unsynced.lock() else {
            return;
        };
        if u.len() < super::types::MAX_UNSYNCED {
            u.push((client, spend, now, id));
            return;
        }
        // Too many to keep one by one: summed into this client's last summed-up entry.
        // A day or month that ended meanwhile is past enforcing; count it in the newest.
        match u
            .iter_mut()
            .rev()
            .find(|e| e.0.id == client.id && e.3.is_none())
        {
            Some(e) => {
                e.1.tokens += spend.tokens;
                e.1.micro_usd += spend.micro_usd;
                e.2 = e.2.max(now);
            }
            None => u.push((client, spend, now, None)),
        }
    }
}

/// Takes other instances' versions of client keys where they are newer, then reloads the
/// key checker once.
pub(super) fn adopt_keys<'a>(
    core: &dyn Host,
    keys: impl IntoIterator<Item = &'a crate::store::SyncedKey>,
) {
    let mut changed = false;
    for k in keys {
        match core.store().adopt_key(k) {
            Ok(c) => changed |= c,
            Err(e) => tracing::warn!(error = %e, "cannot take a shared client key"),
        }
    }
    if changed {
        if let Err(e) = core.reload_keys() {
            tracing::warn!(error = %e, "cannot reload client keys");
        }
    }
}
