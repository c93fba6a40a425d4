//! One state, every surface: what Baton can do right now — paused or not, whether a request on
//! a gateway key alone can be served, where it goes, and each provider's state with its
//! usage windows — computed once here. `/admin/state` serves it (the UI's cards and Settings →
//! Routing read it); `baton status` prints it and exits by it; the tray, the status line and the
//! probe render it. None of them derives a state of its own.

use serde::{Deserialize, Serialize};

use super::Core;
use crate::limits::usage::AccountUsage;
use crate::limits::CooldownEntry;
use crate::providers::state::{state_of, ProviderState, State};
use crate::providers::ProviderEntry;

/// The tray's look: all good, some out, nothing usable, paused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Look {
    Ok,
    Cooling,
    Down,
    Paused,
}

impl Look {
    pub fn as_str(self) -> &'static str {
        match self {
            Look::Ok => "ok",
            Look::Cooling => "cooling",
            Look::Down => "down",
            Look::Paused => "paused",
        }
    }
}

/// What every surface calls a provider's state: the gateway's [`State`], with a ready
/// provider that calls with the client's own login told apart (it serves only clients that
/// bring their login).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shown {
    Ready,
    LoginOnly,
    Cooling,
    BreakerOpen,
    LoggedOut,
    Unavailable,
    Disabled,
}

impl Shown {
    pub fn of(st: &ProviderState) -> Shown {
        match st.state {
            State::Ready if st.login_only => Shown::LoginOnly,
            State::Ready => Shown::Ready,
            State::Cooling => Shown::Cooling,
            State::BreakerOpen => Shown::BreakerOpen,
            State::LoggedOut => Shown::LoggedOut,
            State::Unavailable => Shown::Unavailable,
            State::Disabled => Shown::Disabled,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Shown::Ready => "ready",
            Shown::LoginOnly => "login-only",
            Shown::Cooling => "cooling",
            Shown::BreakerOpen => "breaker-open",
            Shown::LoggedOut => "logged-out",
            Shown::Unavailable => "unavailable",
            Shown::Disabled => "disabled",
        }
    }
}

/// Whose words a reason is: the provider's (an error it sent), Baton's own finding (no
/// answer, a broken connection, failures in a row, a missing key), or a probe's verdict
/// (`baton probe --apply`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SaidBy {
    Provider,
    Baton,
    Probe,
}

/// The openings of the reasons Baton writes itself (the rest quote the provider).
const BATON_FINDINGS: [&str; 9] = [
    "connection failed",
    "upstream connection failed",
    "timed out",
    "response body broke off",
    "request failed",
    "no api key",
    "no model configured",
    "no response within",
    "environment variable",
];

impl SaidBy {
    pub fn of(reason: &str, class: Option<crate::limits::Cause>) -> SaidBy {
        let lower = reason.trim_start().to_ascii_lowercase();
        if lower.starts_with("probe:") {
            SaidBy::Probe
        } else if class == Some(crate::limits::Cause::Breaker)
            || BATON_FINDINGS.iter().any(|f| lower.starts_with(f))
        {
            SaidBy::Baton
        } else {
            SaidBy::Provider
        }
    }
}

/// One provider as every surface shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderSummary {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub enabled: bool,
    /// Its state as shown: ready, login-only, cooling, breaker-open, logged-out, unavailable,
    /// disabled.
    pub shown: Shown,
    /// The gateway's state in full: until when, the class, the reason, a key or model out.
    pub status: ProviderState,
    /// Whose words `status.reason` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub said_by: Option<SaidBy>,
    /// Each account's limit windows, a window whose reset has passed left out (its new period
    /// is not known until the provider reports it).
    pub windows: Vec<AccountUsage>,
    /// How much of its limit is used, 0..=1: the binding window's share, else the best key's
    /// quota spent. One measure in one direction for every surface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<f64>,
}

impl ProviderSummary {
    /// It can take a request now (a login-only one: from a client that brings its login).
    pub fn usable(&self) -> bool {
        self.status.usable()
    }

    /// Its windows named in `lang` (the gateway labels them in English).
    pub fn name_windows(&mut self, lang: crate::i18n::Lang) {
        for w in self.windows.iter_mut().flat_map(|a| a.windows.iter_mut()) {
            w.label = crate::limits::window_label::label_in(&w.label, lang);
        }
    }
}

/// The soonest provider back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Back {
    pub provider: String,
    pub name: String,
    pub until_ms: i64,
}

/// What Baton can do right now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub now_ms: i64,
    pub paused: bool,
    /// A request on a gateway key alone can be served now: not paused, and a provider that is
    /// ready and holds its own credentials.
    pub servable: bool,
    /// Where such a request goes first (routing order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<String>,
    /// Where a client that brings its own login goes first (a login-only provider counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving_login: Option<String>,
    /// The soonest of the providers that are out and come back by themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub back: Option<Back>,
    pub look: Look,
    /// Whether the user's clock reads 12-hour: the tray and the UI write times alike.
    pub hour12: bool,
    /// In routing order.
    pub providers: Vec<ProviderSummary>,
}

impl Summary {
    /// The provider a surface names as serving: a gateway key's, else a login's.
    pub fn serving_any(&self) -> Option<&ProviderSummary> {
        let id = self.serving.as_ref().or(self.serving_login.as_ref())?;
        self.provider(id)
    }

    pub fn provider(&self, id: &str) -> Option<&ProviderSummary> {
        self.providers.iter().find(|p| p.id == id)
    }
}

impl Core {
    /// What Baton can do right now (see the module's doc).
    pub fn summary(&self) -> Summary {
        self.summary_of(&self.routing.snapshot.load(), self.routing.clock.now_ms())
    }

    /// The summary of the routing snapshot `snap` at `now` (a view that renders the snapshot's
    /// providers beside it takes both from the same one).
    pub fn summary_of(&self, snap: &crate::router::snapshot::Snapshot, now: i64) -> Summary {
        let cooldowns = self.routing.cooldowns.active();
        let providers = snap
            .providers
            .iter()
            .map(|p| self.provider_summary(p, &cooldowns, now))
            .collect();
        summarize(providers, self.is_paused(), now, self.locale().hour12)
    }

    /// One provider's line of the summary.
    pub fn provider_summary(
        &self,
        p: &ProviderEntry,
        cooldowns: &[CooldownEntry],
        now: i64,
    ) -> ProviderSummary {
        let status = state_of(p, cooldowns, now);
        let windows = usage_of(self, p, now);
        let day = p.quota_day(now).0;
        let used = binding_used(&windows).or_else(|| {
            p.keys
                .iter()
                .filter_map(|k| p.runtime.quota.score(&k.id, now, &p.config.limits, day))
                .fold(None, |best: Option<f64>, s| {
                    Some(best.map_or(s, |b| b.max(s)))
                })
                .map(|left| (1.0 - left).clamp(0.0, 1.0))
        });
        ProviderSummary {
            id: p.id().to_string(),
            name: p.config.display_name().to_string(),
            kind: p.config.kind.as_str().to_string(),
            enabled: p.config.enabled,
            shown: Shown::of(&status),
            said_by: status
                .reason
                .as_deref()
                .map(|r| SaidBy::of(r, status.class)),
            status,
            windows,
            used,
        }
    }
}

/// The summary of `providers` (in routing order).
pub fn summarize(
    providers: Vec<ProviderSummary>,
    paused: bool,
    now_ms: i64,
    hour12: bool,
) -> Summary {
    let enabled: Vec<&ProviderSummary> = providers.iter().filter(|p| p.enabled).collect();
    let serving = enabled
        .iter()
        .find(|p| p.usable() && !p.status.login_only)
        .map(|p| p.id.clone());
    let serving_login = enabled.iter().find(|p| p.usable()).map(|p| p.id.clone());
    let back = enabled
        .iter()
        .filter(|p| !p.usable())
        .filter_map(|p| p.status.until_ms.filter(|u| *u > now_ms).map(|u| (p, u)))
        .min_by_key(|(_, u)| *u)
        .map(|(p, u)| Back {
            provider: p.id.clone(),
            name: p.name.clone(),
            until_ms: u,
        });
    let usable = enabled.iter().filter(|p| p.usable()).count();
    let look = if paused {
        Look::Paused
    } else if usable == 0 {
        Look::Down
    } else if usable == enabled.len() {
        Look::Ok
    } else {
        Look::Cooling
    };
    Summary {
        now_ms,
        paused,
        servable: !paused && serving.is_some(),
        serving,
        serving_login,
        back,
        look,
        hour12,
        providers,
    }
}

/// The binding window's share used, of the account heard from last.
fn binding_used(accounts: &[AccountUsage]) -> Option<f64> {
    let a = accounts
        .iter()
        .filter(|a| a.binding.is_some())
        .max_by_key(|a| a.updated_ms)?;
    let id = a.binding.as_ref()?;
    a.windows
        .iter()
        .find(|w| &w.id == id)
        .map(crate::limits::windows::Window::used_or_status)
}

/// Every account's usage windows at `p`: what the provider reported (windows past their reset
/// left out), and the local counts of its declared limits (per key).
fn usage_of(core: &Core, p: &ProviderEntry, now: i64) -> Vec<AccountUsage> {
    let mut out = core.routing.usage.accounts(p.id(), now);
    if crate::limits::quota::Quota::counts(&p.config.limits) {
        let day = p.quota_day(now);
        let keys: Vec<String> = if p.keys.is_empty() {
            vec![String::new()]
        } else {
            p.keys.iter().map(|k| k.id.clone()).collect()
        };
        for key in keys {
            let declared = p
                .runtime
                .quota
                .declared_windows(&key, now, &p.config.limits, day);
            match out.iter_mut().find(|a| a.account == key) {
                Some(a) => {
                    a.windows.extend(declared);
                    a.binding = crate::limits::windows::binding(&a.windows).map(|w| w.id.clone());
                }
                None => out.push(AccountUsage {
                    account: key,
                    binding: crate::limits::windows::binding(&declared).map(|w| w.id.clone()),
                    windows: declared,
                    caps_at_ms: None,
                    updated_ms: now,
                }),
            }
        }
    }
    out.retain(|a| !a.windows.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, state: State, login_only: bool, until: Option<i64>) -> ProviderSummary {
        let status = ProviderState {
            state,
            until_ms: until,
            class: None,
            reason: None,
            partial: false,
            login_only,
        };
        ProviderSummary {
            id: id.into(),
            name: id.into(),
            kind: "openai-compatible".into(),
            enabled: state != State::Disabled,
            shown: Shown::of(&status),
            said_by: None,
            status,
            windows: Vec::new(),
            used: None,
        }
    }

    /// Only a login-only provider ready: a client's login is served, a gateway key is not.
    #[test]
    fn a_login_only_provider_does_not_make_a_gateway_key_servable() {
        let s = summarize(
            vec![
                row("keys", State::Cooling, false, Some(5_000)),
                row("sub", State::Ready, true, None),
            ],
            false,
            1_000,
            false,
        );
        assert!(!s.servable);
        assert_eq!(s.serving, None);
        assert_eq!(s.serving_login.as_deref(), Some("sub"));
        assert_eq!(s.look, Look::Cooling);
        assert_eq!(s.back.map(|b| b.until_ms), Some(5_000));
        assert_eq!(s.providers[1].shown, Shown::LoginOnly);
    }

    /// Paused wins: nothing is servable, whatever the providers say.
    #[test]
    fn paused_is_never_servable() {
        let s = summarize(vec![row("a", State::Ready, false, None)], true, 0, false);
        assert!(!s.servable);
        assert_eq!(s.look, Look::Paused);
        let s = summarize(vec![row("a", State::Ready, false, None)], false, 0, false);
        assert!(s.servable);
        assert_eq!(s.look, Look::Ok);
        let s = summarize(
            vec![row("a", State::Disabled, false, None)],
            false,
            0,
            false,
        );
        assert_eq!((s.servable, s.look), (false, Look::Down));
    }

    #[test]
    fn whose_words() {
        use crate::limits::Cause;
        assert_eq!(SaidBy::of("probe: 401", None), SaidBy::Probe);
        assert_eq!(
            SaidBy::of("connection failed: refused", None),
            SaidBy::Baton
        );
        assert_eq!(
            SaidBy::of("5 transient failures in a row", Some(Cause::Breaker)),
            SaidBy::Baton
        );
        assert_eq!(
            SaidBy::of("Rate limit reached for requests", None),
            SaidBy::Provider
        );
    }
}
