//! The cooldown table: which provider / key / model scopes are out of rotation until when.
//! Lives in memory for the request path; every change is also written to SQLite so cooldowns
//! survive a restart.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::clock::Clock;
use crate::events::{Event, Events};
use crate::verdict::Cause;

/// What a cooldown covers. `None` means every key / every model of the provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    pub provider: String,
    pub key: Option<String>,
    pub model: Option<String>,
}

impl Scope {
    fn covers(&self, key: Option<&str>, model: &str) -> bool {
        self.key.as_deref().is_none_or(|k| Some(k) == key)
            && self.model.as_deref().is_none_or(|m| m == model)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CooldownEntry {
    pub scope: Scope,
    pub until_ms: i64,
    pub class: crate::verdict::Cause,
    pub reason: String,
    /// When this instance learned of it: a request sent before then that succeeds does not
    /// prove the scope healthy again (it was on its way before the limit was hit).
    pub since_ms: i64,
}

/// Cooling scopes (keys, models, accounts) one provider keeps at most.
pub const MAX_SCOPES: usize = 256;

/// Cooldowns by provider; each provider holds a short list, scanned without allocation.
pub struct Cooldowns {
    map: RwLock<HashMap<String, Vec<CooldownEntry>>>,
    clock: Arc<dyn Clock>,
    writer: Option<Box<dyn Persist>>,
    events: Events,
    /// Other instances, when state is shared through Redis.
    shared: std::sync::OnceLock<Box<dyn Mirror>>,
    /// When each long cooldown was last re-checked.
    rechecks: std::sync::Mutex<HashMap<Scope, i64>>,
    /// When this run began: a cooldown restored from disk is first re-checked a while after.
    started_ms: i64,
}

/// A cooldown at least this long is re-checked now and then (see `recheck_due`).
pub const LONG_COOLDOWN_MS: i64 = 15 * 60_000;
/// How often a long cooldown is re-checked with one real request.
pub const RECHECK_EVERY_MS: i64 = 5 * 60_000;

/// Where cooldowns outlive a restart. The store's writer implements it; limits does not know
/// how they are kept.
pub trait Persist: Send + Sync {
    fn save(&self, entry: &CooldownEntry);
    fn forget(&self, scope: &Scope);
    /// Resolves once everything saved or forgotten so far is on disk.
    fn flush(&self) -> futures_util::future::BoxFuture<'_, ()>;
}

/// Where this instance's cooldown changes go so other instances see them (the shared state
/// implements it; limits does not know how it is shared).
pub trait Mirror: Send + Sync {
    fn cooldown_started(&self, entry: &CooldownEntry);
    fn cooldown_cleared(&self, scope: &Scope);
}

impl Cooldowns {
    pub fn new(clock: Arc<dyn Clock>, writer: Option<Box<dyn Persist>>, events: Events) -> Self {
        Self {
            map: RwLock::new(HashMap::new()),
            writer,
            events,
            shared: std::sync::OnceLock::new(),
            rechecks: Default::default(),
            started_ms: clock.now_ms(),
            clock,
        }
    }

    /// Publishes this instance's cooldown changes to the others from now on.
    pub fn share(&self, shared: Box<dyn Mirror>) {
        let _ = self.shared.set(shared);
    }

    /// Waits until the cooldowns changed so far are on disk.
    pub async fn flush(&self) {
        if let Some(w) = &self.writer {
            w.flush().await;
        }
    }

    /// Applies a cooldown another instance started (not published again).
    pub fn apply_remote(&self, mut entry: CooldownEntry) {
        entry.since_ms = self.clock.now_ms();
        if entry.until_ms <= entry.since_ms {
            return;
        }
        let known = self.map.read().is_ok_and(|m| {
            m.get(&entry.scope.provider).is_some_and(|l| {
                l.iter()
                    .any(|e| e.scope == entry.scope && e.until_ms >= entry.until_ms)
            })
        });
        if known {
            return;
        }
        let scope = entry.scope.clone();
        let fresh = self.insert(entry.clone());
        self.persist(&entry);
        if fresh {
            tracing::info!(provider = %scope.provider, key = ?scope.key, model = ?scope.model, until_ms = entry.until_ms, "cooldown started by another instance");
            self.events.emit(Event::CooldownStarted {
                provider: scope.provider,
                key: scope.key,
                model: scope.model,
                class: entry.class,
                reason: entry.reason,
                until_ms: entry.until_ms,
            });
        }
    }

    /// Removes a cooldown another instance cleared (not published again).
    pub fn remove_remote(&self, scope: &Scope) {
        if self.remove(scope) {
            self.unpersist(scope);
            self.events.emit(Event::CooldownEnded {
                provider: scope.provider.clone(),
                key: scope.key.clone(),
                model: scope.model.clone(),
            });
        }
    }

    /// Takes exactly this scope out of the table; true when it was there.
    fn remove(&self, scope: &Scope) -> bool {
        match self.map.write() {
            Ok(mut map) => map.get_mut(&scope.provider).is_some_and(|list| {
                let before = list.len();
                list.retain(|e| &e.scope != scope);
                list.len() != before
            }),
            Err(_) => false,
        }
    }

    /// Puts `entry` in the table; true when its scope (or the whole provider) was not
    /// already cooling. A provider keeps at most [`MAX_SCOPES`] cooling scopes: past that the
    /// one that ends soonest goes (model names and logins are the client's to invent, and each
    /// unknown one an upstream refuses would otherwise add a row for good).
    fn insert(&self, entry: CooldownEntry) -> bool {
        let (fresh, evicted) = self.insert_bounded(entry);
        for scope in evicted {
            self.unpersist(&scope);
        }
        fresh
    }

    fn insert_bounded(&self, entry: CooldownEntry) -> (bool, Vec<Scope>) {
        let Ok(mut map) = self.map.write() else {
            return (false, Vec::new());
        };
        let scope = &entry.scope;
        let list = map.entry(scope.provider.clone()).or_default();
        let now = self.clock.now_ms();
        let fresh = !list.iter().any(|e| {
            e.until_ms > now
                && (e.scope == *scope || e.scope.key.is_none() && e.scope.model.is_none())
        });
        list.retain(|e| e.scope != *scope && e.until_ms > now);
        list.push(entry);
        let mut evicted = Vec::new();
        while list.len() > MAX_SCOPES {
            let Some(i) = list
                .iter()
                .enumerate()
                .filter(|(_, e)| e.scope.key.is_some() || e.scope.model.is_some())
                .min_by_key(|(_, e)| e.until_ms)
                .map(|(i, _)| i)
            else {
                break;
            };
            evicted.push(list.remove(i).scope);
        }
        (fresh, evicted)
    }

    fn persist(&self, e: &CooldownEntry) {
        if let Some(w) = &self.writer {
            w.save(e);
        }
    }

    fn unpersist(&self, scope: &Scope) {
        if let Some(w) = &self.writer {
            w.forget(scope);
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Restores persisted cooldowns (already filtered to unexpired ones).
    pub fn load(&self, entries: Vec<CooldownEntry>) {
        let Ok(mut map) = self.map.write() else {
            return;
        };
        for mut entry in entries {
            // A rejected key stays out until the user changes it — and a restart is when a
            // changed environment variable takes effect, so auth verdicts are not restored.
            if entry.class == crate::verdict::ErrorClass::Auth {
                continue;
            }
            // Before anything this run sends.
            entry.since_ms = i64::MIN;
            map.entry(entry.scope.provider.clone())
                .or_default()
                .push(entry);
        }
    }

    /// The cooldown that blocks this key/model now, if any (the one lasting longest).
    pub fn blocking(
        &self,
        provider: &str,
        key: Option<&str>,
        model: &str,
    ) -> Option<CooldownEntry> {
        let now = self.clock.now_ms();
        let map = self.map.read().ok()?;
        map.get(provider)?
            .iter()
            .filter(|e| e.until_ms > now && e.scope.covers(key, model))
            .max_by_key(|e| e.until_ms)
            .cloned()
    }

    /// Starts (or replaces) a cooldown on exactly this scope.
    /// Cools `scope` until `until_ms`. Returns false (and tells no one) when the scope, or the
    /// whole provider, was already cooling: a repeat of a limit already reported.
    pub fn start(&self, scope: Scope, until_ms: i64, class: Cause, reason: &str) -> bool {
        self.start_since(scope, until_ms, class, reason, self.clock.now_ms())
    }

    /// A cooldown that a successful answer itself calls for (a subscription that served it
    /// from paid extra usage): it counts from just after that answer, so the success that
    /// follows (`clear_covering` for a request sent no later than now) does not end it.
    pub fn start_after_answer(
        &self,
        scope: Scope,
        until_ms: i64,
        class: Cause,
        reason: &str,
    ) -> bool {
        self.start_since(scope, until_ms, class, reason, self.clock.now_ms() + 1)
    }

    fn start_since(
        &self,
        scope: Scope,
        until_ms: i64,
        class: Cause,
        reason: &str,
        since_ms: i64,
    ) -> bool {
        let entry = CooldownEntry {
            scope: scope.clone(),
            until_ms,
            class,
            reason: reason.to_string(),
            since_ms,
        };
        let fresh = self.insert(entry.clone());
        self.persist(&entry);
        if let Some(s) = self.shared.get() {
            s.cooldown_started(&entry);
        }
        if !fresh {
            tracing::debug!(provider = %scope.provider, key = ?scope.key, model = ?scope.model, until_ms, "cooldown extended");
            return false;
        }
        tracing::info!(provider = %scope.provider, key = ?scope.key, model = ?scope.model, %class, until_ms, %reason, "cooldown started");
        self.events.emit(Event::CooldownStarted {
            provider: scope.provider,
            key: scope.key,
            model: scope.model,
            class,
            reason: reason.to_string(),
            until_ms,
        });
        true
    }

    /// A success proves the scope healthy: drop cooldowns that covered it — those started
    /// before the successful request was sent (`sent_ms`). A request already on its way when a
    /// concurrent one hit the limit proves nothing about the limit.
    pub fn clear_covering(&self, provider: &str, key: Option<&str>, model: &str, sent_ms: i64) {
        for e in self.remove_where(provider, |e| {
            e.scope.covers(key, model) && e.since_ms <= sent_ms
        }) {
            self.forget(e.scope);
        }
    }

    /// A fresh reading shows the account has room again: its rate cooldowns (any model) that
    /// began before `seen_ms` are stale and end now. `key`: the account's key id, or `None`
    /// for a keyless provider (then only provider-wide cooldowns).
    pub fn clear_limits(&self, provider: &str, key: Option<&str>, seen_ms: i64) {
        for e in self.remove_where(provider, |e| {
            e.class == crate::verdict::ErrorClass::Rate
                && e.scope.key.as_deref() == key
                && e.since_ms < seen_ms
        }) {
            tracing::info!(provider, key = ?e.scope.key, "the provider reports room again: cooldown ended early");
            self.forget(e.scope);
        }
    }

    /// Takes the provider's cooldowns that match `stale` out of the table (a read lock first:
    /// the common case, nothing to remove, never waits for the write lock).
    fn remove_where(
        &self,
        provider: &str,
        stale: impl Fn(&CooldownEntry) -> bool,
    ) -> Vec<CooldownEntry> {
        let any = self
            .map
            .read()
            .ok()
            .and_then(|m| m.get(provider).map(|l| l.iter().any(&stale)))
            .unwrap_or(false);
        if !any {
            return Vec::new();
        }
        match self.map.write() {
            Ok(mut map) => match map.get_mut(provider) {
                Some(list) => {
                    let (gone, kept) = std::mem::take(list).into_iter().partition(|e| stale(e));
                    *list = kept;
                    gone
                }
                None => Vec::new(),
            },
            Err(_) => Vec::new(),
        }
    }

    /// A long cooldown (a subscription cap, a daily quota) may be re-checked with one request
    /// every few minutes: providers reset early, and a stale cooldown would keep a usable
    /// account out for hours. True (and the check taken) when `e` is due one now.
    pub fn recheck_due(&self, e: &CooldownEntry) -> bool {
        let now = self.clock.now_ms();
        let since = e.since_ms.max(self.started_ms);
        if e.until_ms.saturating_sub(since) < LONG_COOLDOWN_MS || e.until_ms <= now {
            return false;
        }
        let Ok(mut checks) = self.rechecks.lock() else {
            return false;
        };
        let last = checks.get(&e.scope).copied().unwrap_or(since).max(since);
        if now.saturating_sub(last) < RECHECK_EVERY_MS {
            return false;
        }
        checks.retain(|_, at| now.saturating_sub(*at) < LONG_COOLDOWN_MS * 100);
        checks.insert(e.scope.clone(), now);
        true
    }

    /// Clears one scope by hand.
    pub fn clear(&self, scope: &Scope) -> bool {
        let found = self.remove(scope);
        if found {
            self.forget(scope.clone());
        }
        found
    }

    fn forget(&self, scope: Scope) {
        self.unpersist(&scope);
        if let Some(s) = self.shared.get() {
            s.cooldown_cleared(&scope);
        }
        self.events.emit(Event::CooldownEnded {
            provider: scope.provider,
            key: scope.key,
            model: scope.model,
        });
    }

    /// Every unexpired cooldown, for the admin API and tests.
    pub fn active(&self) -> Vec<CooldownEntry> {
        let now = self.clock.now_ms();
        self.map
            .read()
            .map(|m| {
                m.values()
                    .flatten()
                    .filter(|e| e.until_ms > now)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::verdict::ErrorClass;

    #[test]
    fn scopes_cover_and_expire() {
        let clock = Arc::new(ManualClock::new(1_000));
        let c = Cooldowns::new(clock.clone(), None, Events::default());
        let scope = Scope {
            provider: "p".into(),
            key: Some("k1".into()),
            model: None,
        };
        c.start(scope.clone(), 5_000, ErrorClass::Rate.into(), "429");
        assert!(c.blocking("p", Some("k1"), "m").is_some());
        assert!(
            c.blocking("p", Some("k2"), "m").is_none(),
            "other key unaffected"
        );
        assert!(
            c.blocking("q", Some("k1"), "m").is_none(),
            "other provider unaffected"
        );
        clock.set(5_000);
        assert!(
            c.blocking("p", Some("k1"), "m").is_none(),
            "expired at the reset instant"
        );
        clock.set(1_000);
        c.clear_covering("p", Some("k1"), "m", 999);
        assert!(
            c.blocking("p", Some("k1"), "m").is_some(),
            "a success sent before the cooldown started does not clear it"
        );
        c.clear_covering("p", Some("k1"), "m", 1_000);
        assert!(c.blocking("p", Some("k1"), "m").is_none(), "success clears");
        c.start(scope.clone(), 9_000, ErrorClass::Rate.into(), "again");
        assert!(c.clear(&scope));
        assert!(c.active().is_empty());
    }
}
