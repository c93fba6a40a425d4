//! What the tray says: its look and state line, the serving provider's usage line, and each
//! provider's state for its menu line — from the gateway's own state (the one `/admin/state`,
//! the UI and `baton status` show), in the user's language and clock.

use std::sync::atomic::Ordering;

use baton::i18n::{tr, Locale};
use baton::Core;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    Ok,
    Cooling,
    Down,
    Paused,
}

impl Look {
    /// Its name in the log (`tray shows`), which the desktop tests compare with `/admin/state`.
    pub fn as_str(self) -> &'static str {
        match self {
            Look::Ok => "ok",
            Look::Cooling => "cooling",
            Look::Down => "down",
            Look::Paused => "paused",
        }
    }
}

/// The tray's state line and look, from the routing snapshot.
pub fn summary(core: &Core) -> (Look, String) {
    let loc = core.locale();
    let l = loc.lang;
    if core.paused.load(Ordering::Relaxed) {
        return (
            Look::Paused,
            tr(l, "Paused — requests get 503 until you resume", &[]),
        );
    }
    let snap = core.routing.snapshot.load();
    let now = core.routing.clock.now_ms();
    let cooldowns = core.routing.cooldowns.active();
    let mut serving = None;
    let mut out: Vec<(String, Option<i64>)> = Vec::new();
    for p in snap.enabled() {
        // The gateway's own state for it (the one the UI and `baton status` show).
        let st = baton::providers::state::state_of(p, &cooldowns, now);
        if st.usable() {
            serving.get_or_insert_with(|| p.config.display_name().to_string());
        } else {
            out.push((p.config.display_name().to_string(), st.until_ms));
        }
    }
    let back = out
        .iter()
        .filter_map(|(n, u)| u.map(|u| (n.clone(), u)))
        .min_by_key(|(_, u)| *u)
        .map(|(n, u)| {
            tr(
                l,
                "{name} back at {when}",
                &[("name", &n), ("when", &clock(u, loc))],
            )
        });
    match serving {
        None if snap.enabled().next().is_none() => (Look::Down, tr(l, "No provider enabled", &[])),
        None => (
            Look::Down,
            match back {
                Some(b) => tr(l, "Nothing available · {back}", &[("back", &b)]),
                None => tr(l, "Nothing available", &[]),
            },
        ),
        Some(name) => {
            let line = match back {
                Some(b) => tr(
                    l,
                    "Serving via {name} · {back}",
                    &[("name", &name), ("back", &b)],
                ),
                None => tr(l, "Serving via {name}", &[("name", &name)]),
            };
            (
                if out.is_empty() {
                    Look::Ok
                } else {
                    Look::Cooling
                },
                line,
            )
        }
    }
}

/// The serving provider's binding usage window, for the line under the state: "Claude Max ·
/// 5 h 72 % · resets 15:00" (`None` when it reports no windows).
pub fn usage_line(core: &Core) -> Option<String> {
    let snap = core.routing.snapshot.load();
    let now = core.routing.clock.now_ms();
    let cooldowns = core.routing.cooldowns.active();
    let p = snap
        .enabled()
        .find(|p| baton::providers::state::state_of(p, &cooldowns, now).usable())?;
    let w = core
        .routing
        .usage
        .headline(p.id(), now, &core.routing.local_tz, core.locale())?;
    Some(format!("{} · {w}", p.config.display_name()))
}

fn clock(ms: i64, loc: Locale) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| loc.clock(&t.to_zoned_datetime(jiff::tz::TimeZone::system())))
        .unwrap_or_default()
}

/// One provider's state for its menu line ("cooling until 15:02"), from the gateway's own
/// state, and whether there is a cooldown to clear.
pub fn provider_state(
    p: &baton::providers::ProviderEntry,
    cooldowns: &[baton::limits::CooldownEntry],
    now: i64,
    loc: Locale,
) -> (String, bool) {
    use baton::providers::state::{state_of, State};
    let l = loc.lang;
    let st = state_of(p, cooldowns, now);
    let until = st.until_ms.map(|u| clock(u, loc)).unwrap_or_default();
    match st.state {
        State::Disabled => (tr(l, "disabled", &[]), false),
        State::LoggedOut => (tr(l, "logged out", &[]), false),
        State::Unavailable => (tr(l, "unavailable", &[]), st.class.is_some()),
        State::BreakerOpen => (
            tr(l, "breaker open until {when}", &[("when", &until)]),
            true,
        ),
        State::Cooling => (tr(l, "cooling until {when}", &[("when", &until)]), true),
        State::Ready if st.login_only => (tr(l, "login-only", &[]), st.partial),
        State::Ready if st.partial => (tr(l, "ready (a key or model cooling)", &[]), true),
        State::Ready => (tr(l, "ready", &[]), false),
    }
}
