//! What the tray says: its look and state line, the serving provider's usage line, and each
//! provider's state for its menu line — from the gateway's own state (the one `/admin/state`,
//! the UI and `baton status` show), in the user's language and clock.

use baton::i18n::{tr, Locale};
use baton::Core;

pub use baton::summary::Look;
use baton::summary::{ProviderSummary, Shown, Summary};

/// The look and line of `s`: paused; what serves a gateway key, or only a client's own login;
/// and the soonest provider back.
pub fn line_of(s: &Summary, loc: Locale) -> (Look, String) {
    let l = loc.lang;
    if s.paused {
        return (
            s.look,
            tr(l, "Paused — requests get 503 until you resume", &[]),
        );
    }
    let back = s.back.as_ref().map(|b| {
        tr(
            l,
            "{name} back at {when}",
            &[
                ("name", &b.name),
                ("when", &clock(b.until_ms, s.now_ms, loc)),
            ],
        )
    });
    let name = |id: &String| s.provider(id).map(|p| p.name.clone()).unwrap_or_default();
    let line = match (&s.serving, &s.serving_login) {
        (Some(id), _) => match back {
            Some(b) => tr(
                l,
                "Serving via {name} · {back}",
                &[("name", &name(id)), ("back", &b)],
            ),
            None => tr(l, "Serving via {name}", &[("name", &name(id))]),
        },
        // Only a provider that calls with the client's own login is left: a request on a
        // gateway key alone gets nothing.
        (None, Some(id)) => {
            let only = tr(
                l,
                "Only clients with their own login: {name}",
                &[("name", &name(id))],
            );
            match back {
                Some(b) => format!("{only} · {b}"),
                None => only,
            }
        }
        (None, None) if !s.providers.iter().any(|p| p.enabled) => tr(l, "No provider enabled", &[]),
        (None, None) => match back {
            Some(b) => tr(l, "Nothing available · {back}", &[("back", &b)]),
            None => tr(l, "Nothing available", &[]),
        },
    };
    (s.look, line)
}

/// The serving provider's binding usage window, for the line under the state: "Claude Max ·
/// 5 h 72 % · resets 15:00" (`None` when it reports no windows).
pub fn usage_line(core: &Core, s: &Summary) -> Option<String> {
    let p = s.serving_any()?;
    let w = core
        .routing
        .usage
        .headline(&p.id, s.now_ms, &core.routing.local_tz, core.locale())?;
    Some(format!("{} · {w}", p.name))
}

/// A time as the tray writes it: the clock time today, with its date another day (as the
/// window's UI does, in the same 12- or 24-hour clock).
fn clock(ms: i64, now: i64, loc: Locale) -> String {
    baton::i18n::clock_time(ms, &jiff::tz::TimeZone::system(), now, loc)
}

/// One provider's state for its menu line ("cooling until 15:02"), from its line of the
/// gateway's summary, and whether there is a cooldown to clear.
pub fn provider_state(p: &ProviderSummary, now: i64, loc: Locale) -> (String, bool) {
    let l = loc.lang;
    let st = &p.status;
    let until = st.until_ms.map(|u| clock(u, now, loc)).unwrap_or_default();
    match p.shown {
        Shown::Disabled => (tr(l, "disabled", &[]), false),
        Shown::LoggedOut => (tr(l, "logged out", &[]), false),
        Shown::Unavailable => (tr(l, "unavailable", &[]), st.class.is_some()),
        Shown::BreakerOpen => (
            tr(l, "breaker open until {when}", &[("when", &until)]),
            true,
        ),
        Shown::Cooling => (tr(l, "cooling until {when}", &[("when", &until)]), true),
        Shown::LoginOnly => (tr(l, "login-only", &[]), st.partial),
        Shown::Ready if st.partial => (tr(l, "ready (a key or model cooling)", &[]), true),
        Shown::Ready => (tr(l, "ready", &[]), false),
    }
}
