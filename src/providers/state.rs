//! One provider's state — ready, cooling, breaker open, logged out, unavailable, disabled —
//! computed once here. `/admin/state` serves it; `/health`, `baton status`, the tray and the
//! web UI read it instead of deriving it again (their rules had drifted apart).

use serde::Serialize;

use super::ProviderEntry;
use crate::limits::{Cause, CooldownEntry, ErrorClass};

/// The states, most blocking first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Disabled,
    /// A subscription CLI whose login is gone.
    LoggedOut,
    /// Cannot be used at all (missing executable or key, every key rejected, bad URL).
    Unavailable,
    /// Too many transient failures in a row: out until a trial after `until_ms`.
    BreakerOpen,
    /// Out until `until_ms`: the provider, every key or every model is cooling.
    Cooling,
    Ready,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Disabled => "disabled",
            State::LoggedOut => "logged-out",
            State::Unavailable => "unavailable",
            State::BreakerOpen => "breaker-open",
            State::Cooling => "cooling",
            State::Ready => "ready",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderState {
    pub state: State,
    /// When it is back (cooling, breaker open).
    pub until_ms: Option<i64>,
    /// The error class that put it there (`rate`, `billing`, `auth`, `breaker`…).
    pub class: Option<Cause>,
    /// Why, in the provider's or Baton's words.
    pub reason: Option<String>,
    /// Ready, but a key or a model is out.
    pub partial: bool,
    /// It calls with the client's own login (`credentials: "client"`): it serves only clients
    /// that bring theirs, never a request on a gateway key alone.
    #[serde(default)]
    pub login_only: bool,
}

impl ProviderState {
    fn new(state: State) -> Self {
        Self {
            state,
            until_ms: None,
            class: None,
            reason: None,
            partial: false,
            login_only: false,
        }
    }

    fn out(state: State, c: &CooldownEntry) -> Self {
        Self {
            state,
            until_ms: Some(c.until_ms),
            class: Some(c.class),
            reason: Some(c.reason.clone()),
            partial: false,
            login_only: false,
        }
    }

    /// Whether routing can send it requests now.
    pub fn usable(&self) -> bool {
        self.state == State::Ready
    }
}

fn soonest<'a>(list: &[&'a CooldownEntry]) -> Option<&'a CooldownEntry> {
    list.iter().min_by_key(|c| c.until_ms).copied()
}

/// The state of `p` at `now`, from the active cooldowns (any provider's; others are ignored),
/// and whether it serves only clients that bring their own login.
pub fn state_of(p: &ProviderEntry, cooldowns: &[CooldownEntry], now: i64) -> ProviderState {
    let mut s = state_now(p, cooldowns, now);
    s.login_only = !p.config.credentials.is_baton();
    s
}

/// Long because the order of its checks is the precedence of the states (disabled, then
/// unavailable or logged out, then the breaker, then cooldowns), best read in one place.
fn state_now(p: &ProviderEntry, cooldowns: &[CooldownEntry], now: i64) -> ProviderState {
    if !p.config.enabled {
        return ProviderState::new(State::Disabled);
    }
    let logged_out = p
        .runtime
        .cli_status
        .load()
        .as_ref()
        .is_some_and(|s| s.logged_in == Some(false));
    if let Some(why) = p.unavailable() {
        let mut s = ProviderState::new(if logged_out {
            State::LoggedOut
        } else {
            State::Unavailable
        });
        s.reason = Some(why);
        return s;
    }
    let mine: Vec<&CooldownEntry> = cooldowns
        .iter()
        .filter(|c| c.scope.provider == p.id() && c.until_ms > now)
        .collect();
    let (open_until, failures) = p.breaker_state();
    if let Some(until) = open_until.filter(|u| *u > now) {
        return ProviderState {
            state: State::BreakerOpen,
            until_ms: Some(until),
            class: Some(Cause::Breaker),
            reason: Some(format!("{failures} transient failures in a row")),
            partial: false,
            login_only: false,
        };
    }
    let wide: Vec<&CooldownEntry> = mine
        .iter()
        .copied()
        .filter(|c| c.scope.key.is_none() && c.scope.model.is_none())
        .collect();
    if let Some(c) = soonest(&wide) {
        return ProviderState::out(State::Cooling, c);
    }
    // Every key out: rejected keys make it unavailable, limits make it cool.
    let key_out: Vec<Option<&CooldownEntry>> = p
        .keys
        .iter()
        .map(|k| {
            mine.iter()
                .copied()
                .filter(|c| c.scope.key.as_deref() == Some(&k.id) && c.scope.model.is_none())
                .max_by_key(|c| c.until_ms)
        })
        .collect();
    if !key_out.is_empty() && key_out.iter().all(Option::is_some) {
        let outs: Vec<&CooldownEntry> = key_out.into_iter().flatten().collect();
        if outs.iter().all(|c| c.class == ErrorClass::Auth) {
            let mut s = ProviderState::out(State::Unavailable, outs[0]);
            s.until_ms = None;
            return s;
        }
        let limited: Vec<&CooldownEntry> = outs
            .iter()
            .copied()
            .filter(|c| c.class != ErrorClass::Auth)
            .collect();
        if let Some(c) = soonest(&limited) {
            return ProviderState::out(State::Cooling, c);
        }
    }
    // A provider that calls with the client's own login has no keys of Baton's: its accounts
    // (`client:…`) are what cools. An account out is the provider out for whoever uses it (on
    // a desktop: the one user), so it shows as cooling, not "ready" while every request goes
    // elsewhere.
    if p.config.credentials == crate::config::Credentials::Client {
        let accounts: Vec<&CooldownEntry> = mine
            .iter()
            .copied()
            .filter(|c| {
                c.scope.model.is_none()
                    && c.scope
                        .key
                        .as_deref()
                        .is_some_and(super::client::is_account)
            })
            .collect();
        if let Some(c) = soonest(&accounts) {
            return ProviderState::out(State::Cooling, c);
        }
    }
    // Every model out (per-model limits or overload).
    let model_out: Vec<Option<&CooldownEntry>> = p
        .models
        .iter()
        .map(|m| {
            mine.iter()
                .copied()
                .filter(|c| c.scope.key.is_none() && c.scope.model.as_deref() == Some(&m.id))
                .max_by_key(|c| c.until_ms)
        })
        .collect();
    if !model_out.is_empty() && model_out.iter().all(Option::is_some) {
        let outs: Vec<&CooldownEntry> = model_out.into_iter().flatten().collect();
        if let Some(c) = soonest(&outs) {
            return ProviderState::out(State::Cooling, c);
        }
    }
    let mut s = ProviderState::new(State::Ready);
    s.partial = !mine.is_empty()
        || p.runtime
            .breakers
            .tripped()
            .iter()
            .any(|(_, until, _)| *until > now);
    s
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::limits::Scope;
    use crate::providers::resolve::resolve;
    use crate::providers::ProviderRuntime;

    fn provider(extra: serde_json::Value) -> ProviderEntry {
        let mut v = serde_json::json!({"id": "p", "kind": "openai-compatible",
            "baseUrl": "https://api.example.com/v1", "models": ["m1", "m2"],
            "keys": [{"env": "K1"}, {"env": "K2"}]});
        for (k, x) in extra.as_object().cloned().unwrap_or_default() {
            if x.is_null() {
                v.as_object_mut().unwrap().remove(&k);
            } else {
                v[k] = x;
            }
        }
        let config = serde_json::from_value(v).unwrap();
        let env = |_: &str| Some("sk-test-key-123456".to_string());
        resolve(config, Arc::new(ProviderRuntime::new(None)), &env)
    }

    fn cd(key: Option<&str>, model: Option<&str>, until: i64, class: &str) -> CooldownEntry {
        CooldownEntry {
            scope: Scope {
                provider: "p".into(),
                key: key.map(str::to_string),
                model: model.map(str::to_string),
            },
            until_ms: until,
            class: Cause::parse(class).unwrap(),
            reason: format!("{class} reason"),
            since_ms: 0,
        }
    }

    #[test]
    fn one_set_of_rules_for_every_view() {
        let p = provider(serde_json::json!({}));
        let now = 1_000;
        assert_eq!(state_of(&p, &[], now).state, State::Ready);
        // A cooldown of another provider, or one that has ended, changes nothing.
        let mut other = cd(None, None, 9_000, "rate");
        other.scope.provider = "q".into();
        assert_eq!(
            state_of(&p, &[other, cd(None, None, 500, "rate")], now).state,
            State::Ready
        );
        // One key or one model out: ready, partly.
        let s = state_of(&p, &[cd(Some("env:K1"), None, 5_000, "rate")], now);
        assert_eq!((s.state, s.partial), (State::Ready, true));
        let s = state_of(&p, &[cd(None, Some("m1"), 5_000, "overloaded")], now);
        assert_eq!((s.state, s.partial), (State::Ready, true));
        // The whole provider: cooling until its reset, with its class and reason.
        let s = state_of(&p, &[cd(None, None, 7_000, "rate")], now);
        assert_eq!(
            (s.state, s.until_ms, s.class.map(Cause::as_str)),
            (State::Cooling, Some(7_000), Some("rate"))
        );
        // Every key: cooling until the first is back; every key rejected: unavailable.
        let s = state_of(
            &p,
            &[
                cd(Some("env:K1"), None, 8_000, "rate"),
                cd(Some("env:K2"), None, 6_000, "billing"),
            ],
            now,
        );
        assert_eq!((s.state, s.until_ms), (State::Cooling, Some(6_000)));
        let s = state_of(
            &p,
            &[
                cd(Some("env:K1"), None, 8_000, "auth"),
                cd(Some("env:K2"), None, 9_000, "auth"),
            ],
            now,
        );
        assert_eq!(
            (s.state, s.class.map(Cause::as_str), s.until_ms),
            (State::Unavailable, Some("auth"), None)
        );
        // Every model: cooling until the first is back.
        let s = state_of(
            &p,
            &[
                cd(None, Some("m1"), 4_000, "rate"),
                cd(None, Some("m2"), 3_000, "rate"),
            ],
            now,
        );
        assert_eq!((s.state, s.until_ms), (State::Cooling, Some(3_000)));
        // Disabled wins over everything.
        let off = provider(serde_json::json!({"enabled": false}));
        assert_eq!(
            state_of(&off, &[cd(None, None, 7_000, "rate")], now).state,
            State::Disabled
        );
    }

    #[test]
    fn a_capped_login_on_a_passthrough_provider_is_cooling_not_ready() {
        let p = provider(serde_json::json!({"kind": "anthropic", "keys": [],
            "credentials": "client", "baseUrl": "https://api.anthropic.com/v1"}));
        let now = 1_000;
        assert_eq!(state_of(&p, &[], now).state, State::Ready);
        let s = state_of(
            &p,
            &[cd(Some("client:16e89a16dc0f"), None, 9_000, "rate")],
            now,
        );
        assert_eq!(
            (s.state, s.until_ms, s.class.map(Cause::as_str)),
            (State::Cooling, Some(9_000), Some("rate"))
        );
        // One model of it cooling leaves it ready (partly), as for any provider.
        let s = state_of(
            &p,
            &[cd(Some("client:16e89a16dc0f"), Some("m1"), 9_000, "rate")],
            now,
        );
        assert_eq!((s.state, s.partial), (State::Ready, true));
        // A key-holding provider is unaffected by the rule.
        let keyed = provider(serde_json::json!({}));
        let s = state_of(&keyed, &[cd(Some("env:K1"), None, 9_000, "rate")], now);
        assert_eq!((s.state, s.partial), (State::Ready, true));
    }

    #[test]
    fn a_cli_without_its_login_is_logged_out_not_just_unavailable() {
        let p = provider(serde_json::json!({"kind": "claude-cli", "keys": [], "baseUrl": null}));
        p.runtime
            .cli_status
            .store(Some(Arc::new(crate::providers::cli::CliStatus {
                logged_in: Some(false),
                problem: Some("not logged in: run `claude`".into()),
                ..Default::default()
            })));
        let s = state_of(&p, &[], 0);
        assert_eq!(s.state, State::LoggedOut);
        assert!(s.reason.unwrap().contains("not logged in"));
        p.runtime
            .cli_status
            .store(Some(Arc::new(crate::providers::cli::CliStatus {
                problem: Some("`claude` is not installed".into()),
                ..Default::default()
            })));
        assert_eq!(state_of(&p, &[], 0).state, State::Unavailable);
    }
}
