//! Native notifications from the core's events: one per limit episode ("Claude Code session limit
//! reached — back at 01:19; now using Codex"), when nothing is left, and (a setting) when a
//! provider is back. A burst of events becomes one notification.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use baton::api::settings::NotifyPrefs;
use baton::events::{Event, Notification, QuotaKind};
use baton::i18n::{tr, Locale};
use baton::limits::ErrorClass;
use baton::Core;
use tauri::{AppHandle, Manager};
use tokio::sync::broadcast::error::RecvError;

/// The app's icon as a file, for the notification daemon (set once at start).
static ICON: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();

/// Writes the app icon into the data directory so notifications show it instead of a generic
/// one.
pub fn install_icon(data_dir: &std::path::Path) {
    // At a first start the data directory does not exist yet (the gateway makes it later):
    // made here, private, so that the first notification already carries the icon.
    if let Err(e) = std::fs::create_dir_all(data_dir) {
        tracing::warn!(dir = %data_dir.display(), error = %e, "cannot make the data directory for the notification icon");
        return;
    }
    baton::store::make_private(data_dir);
    let path = data_dir.join(baton::store::ICON_FILE);
    let bytes: &[u8] = include_bytes!("../icons/128x128.png");
    if std::fs::read(&path).ok().as_deref() != Some(bytes) && std::fs::write(&path, bytes).is_err()
    {
        return;
    }
    let _ = ICON.set(path);
}

fn notification(summary: &str, body: &str) -> notify_rust::Notification {
    let mut n = notify_rust::Notification::new();
    n.appname("Baton").summary(summary).body(body);
    match ICON.get() {
        Some(p) => n.icon(&p.display().to_string()),
        None => n.icon("dialog-information"),
    };
    n
}

/// Shows one notification; failures (no notification daemon) are logged, not fatal.
pub fn show(summary: &str, body: &str) {
    match notification(summary, body).show() {
        Ok(_) => tracing::info!(%summary, %body, "notification shown"),
        Err(e) => tracing::warn!(error = %e, %summary, "cannot show a notification"),
    }
}

/// Shows a notification whose click opens Baton's window on `screen` (`activity`, `providers`).
pub fn show_on(app: &AppHandle, summary: &str, body: &str, screen: &'static str) {
    let mut n = notification(summary, body);
    let l = app.state::<crate::state::Shell>().locale().lang;
    n.action("default", &tr(l, "Open Baton", &[]));
    match n.show() {
        Ok(handle) => {
            tracing::info!(%summary, %body, screen, "notification shown");
            #[cfg(all(unix, not(target_os = "macos")))]
            {
                let app = app.clone();
                // Waits (off the async runtime) until the notification is clicked or closed.
                std::thread::spawn(move || {
                    handle.wait_for_action(|action| {
                        if action == "default" {
                            tracing::info!(screen, "notification clicked");
                            let a = app.clone();
                            let _ = app
                                .run_on_main_thread(move || crate::state::show_screen(&a, screen));
                        }
                    })
                });
            }
            #[cfg(not(all(unix, not(target_os = "macos"))))]
            let _ = (handle, app);
        }
        Err(e) => tracing::warn!(error = %e, %summary, "cannot show a notification"),
    }
}

/// Classes that mean a limit or an account problem, worth telling the user about.
fn is_limit(class: &ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::Rate | ErrorClass::Billing | ErrorClass::Auth
    )
}

/// What folding needs to know about the gateway now.
struct Ctx<'a> {
    now_ms: i64,
    /// Display name of a provider id ("Groq" for "groq").
    name: &'a dyn Fn(&str) -> String,
    /// Whether the provider still has any cooldown.
    cooling: &'a dyn Fn(&str) -> bool,
    /// Whether the provider is a subscription CLI (its caps always matter).
    subscription: &'a dyn Fn(&str) -> bool,
}

/// A limit worth a notification: the gateway's one rule (the web UI toasts by it too).
fn worth_telling(class: ErrorClass, provider: &str, reset_at_ms: Option<i64>, ctx: &Ctx) -> bool {
    baton::events::worth_telling(class, (ctx.subscription)(provider), reset_at_ms, ctx.now_ms)
}

/// One notification to show, built from a burst of events.
#[derive(Debug, Default, PartialEq)]
struct Batch {
    failovers: Vec<String>,
    exhausted: bool,
    /// When the first provider is back, if that is known.
    back_at_ms: Option<i64>,
    back: Vec<String>,
    /// Usage windows: a threshold crossed, a window back.
    quota: Vec<String>,
}

/// Folds a burst of events into at most one notification, remembering which providers already
/// had their limit announced in this episode (until their cooldown ends).
fn fold(
    events: &[Event],
    announced: &mut HashSet<String>,
    prefs: &NotifyPrefs,
    ctx: &Ctx,
) -> Batch {
    let on = |n: Notification| prefs.wants(n);
    let mut b = Batch::default();
    for ev in events {
        match ev {
            Event::Failover {
                from,
                class,
                message,
                reset_at_ms,
                ..
            } if is_limit(class) => {
                let provider = from.split('/').next().unwrap_or(from).to_string();
                if !worth_telling(*class, &provider, *reset_at_ms, ctx) {
                    continue; // short: the tray's status line shows it
                }
                if announced.insert(provider) && on(Notification::Failover) {
                    b.failovers.push(message.clone());
                }
            }
            Event::AllExhausted { retry_at_ms, .. }
                if on(Notification::AllExhausted) && !announced.contains("*all*") =>
            {
                announced.insert("*all*".into());
                b.exhausted = true;
                b.back_at_ms = *retry_at_ms;
            }
            Event::Request { status, .. } if *status < 400 => {
                announced.remove("*all*");
            }
            // A subscription moved off paid extra usage is a failover the user should hear of.
            Event::Quota { kind, message, .. }
                if (*kind == QuotaKind::Threshold && on(Notification::QuotaWarning))
                    || (*kind == QuotaKind::Back && on(Notification::QuotaBack))
                    || (*kind == QuotaKind::Overage && on(Notification::Failover)) =>
            {
                b.quota.push(message.clone());
            }
            // The episode ends with the provider's last cooldown, by time or by hand (whether
            // or not that is announced).
            Event::CooldownEnded { provider, .. }
                if !(ctx.cooling)(provider)
                    && announced.remove(provider)
                    && on(Notification::CooldownEnded) =>
            {
                b.back.push((ctx.name)(provider));
            }
            _ => {}
        }
    }
    b
}

/// Providers whose announced limit is over (no cooldown left): the episode ends, and they are
/// reported back when the user asked for that.
fn ended(announced: &mut HashSet<String>, ctx: &Ctx) -> Vec<String> {
    let over: Vec<String> = announced
        .iter()
        .filter(|p| p.as_str() != "*all*" && !(ctx.cooling)(p))
        .cloned()
        .collect();
    for p in &over {
        announced.remove(p);
    }
    over.iter().map(|p| (ctx.name)(p)).collect()
}

/// The "nothing left" line, with the time the first provider is back when that is known (the
/// tray menu already knows it; "open Baton to see when" made the user go and look).
fn exhausted_message(back_at_ms: Option<i64>, tz: &jiff::tz::TimeZone, loc: Locale) -> String {
    let at = back_at_ms
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| loc.clock(&t.to_zoned_datetime(tz.clone())));
    match at {
        Some(when) => tr(loc.lang,
            "Every provider is rate-limited, out or unavailable; the first is back at {when}. Requests fail until then.",
            &[("when", &when)],
        ),
        None => tr(loc.lang, "Every provider is out or unavailable, with no known time it is back; requests fail until one is. The tray menu shows each one's state.", &[]),
    }
}

/// Runs `f` with the gateway's state now.
fn with_ctx<T>(core: &Core, f: impl FnOnce(&Ctx) -> T) -> T {
    let active = core.routing.cooldowns.active();
    let snap = core.routing.snapshot.load();
    let name = |id: &str| {
        snap.provider(id)
            .map(|p| p.config.display_name().to_string())
            .unwrap_or_else(|| id.to_string())
    };
    let cooling = |id: &str| active.iter().any(|c| c.scope.provider == id);
    let subscription = |id: &str| {
        snap.provider(id)
            .is_some_and(|p| p.config.is_subscription())
    };
    f(&Ctx {
        now_ms: core.routing.clock.now_ms(),
        name: &name,
        cooling: &cooling,
        subscription: &subscription,
    })
}

/// Long because it is one event loop with an arm per event kind, sharing the fold state.
pub fn spawn(app: AppHandle, core: Arc<Core>, generation: u64) {
    // Subscribed before returning, so no event after start-up is missed.
    let mut rx = core.routing.events.subscribe();
    tauri::async_runtime::spawn(async move {
        let mut announced: HashSet<String> = HashSet::new();
        let mut logged_out: HashSet<String> = HashSet::new();
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            // A restarted gateway has its own notifier.
            if app.state::<crate::state::Shell>().generation() != generation {
                return;
            }
            let first = tokio::select! {
                r = rx.recv() => match r {
                    Ok(ev) => ev,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => {
                    let l = core.locale().lang;
                    // Cooldowns that simply run out send no event.
                    let back = with_ctx(&core, |ctx| ended(&mut announced, ctx));
                    let prefs = baton::api::settings::notify_prefs(&core);
                    let wanted = prefs.wants(Notification::CooldownEnded);
                    if wanted && !back.is_empty() {
                        show_on(&app, "Baton", &tr(l, "{names} back in rotation", &[("names", &back.join(", "))]), "providers");
                    }
                    // A subscription CLI found logged out (at a check or by a failed call).
                    let snap = core.routing.snapshot.load();
                    for p in snap.providers.iter().filter(|p| p.config.enabled) {
                        let out = p.runtime.cli_status.load().as_ref().is_some_and(|s| s.logged_in == Some(false));
                        let name = p.config.display_name().to_string();
                        if out && logged_out.insert(name.clone()) {
                            if prefs.wants(Notification::LoggedOut) {
                                let why = p.unavailable().unwrap_or_default();
                                show_on(&app, &tr(l, "{name} is logged out", &[("name", &name)]), &tr(l, "Baton skips it until you log in again: {why}", &[("why", &why)]), "providers");
                            }
                        } else if !out {
                            logged_out.remove(&name);
                        }
                    }
                    continue;
                }
            };
            let interesting = matches!(&first, Event::Failover { class, .. } if is_limit(class))
                || matches!(
                    first,
                    Event::AllExhausted { .. } | Event::CooldownEnded { .. } | Event::Quota { .. }
                );
            let mut burst = vec![first];
            if interesting {
                // Let the rest of a burst arrive, then say it once.
                tokio::time::sleep(Duration::from_millis(800)).await;
                while let Ok(ev) = rx.try_recv() {
                    burst.push(ev);
                }
            }
            let prefs = baton::api::settings::notify_prefs(&core);
            let loc = core.locale();
            let l = loc.lang;
            let b = with_ctx(&core, |ctx| fold(&burst, &mut announced, &prefs, ctx));
            if b.exhausted {
                show_on(
                    &app,
                    &tr(l, "Baton: no provider available", &[]),
                    &exhausted_message(b.back_at_ms, &core.routing.local_tz, loc),
                    "providers",
                );
            } else if !b.failovers.is_empty() {
                show_on(
                    &app,
                    &tr(l, "Baton switched providers", &[]),
                    &b.failovers.join("\n"),
                    "activity",
                );
            }
            if !b.quota.is_empty() {
                show_on(
                    &app,
                    &tr(l, "Baton: usage", &[]),
                    &b.quota.join("\n"),
                    "providers",
                );
            }
            if !b.back.is_empty() {
                show_on(
                    &app,
                    "Baton",
                    &tr(
                        l,
                        "{names} back in rotation",
                        &[("names", &b.back.join(", "))],
                    ),
                    "providers",
                );
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failover_at(from: &str, class: &str, reset_at_ms: i64) -> Event {
        let class = ErrorClass::parse(class).expect("a class name");
        Event::Failover {
            request_id: "r".into(),
            from: format!("{from}/m"),
            to: "codex/gpt-5".into(),
            class,
            reason: "limit".into(),
            reset_at_ms: Some(reset_at_ms),
            message: format!("{from} session limit reached — back at 01:19; now using Codex"),
            notable: true,
        }
    }

    /// A limit an hour long.
    fn failover(from: &str, class: &str) -> Event {
        failover_at(from, class, 3_600_000)
    }

    fn ended_event(provider: &str) -> Event {
        Event::CooldownEnded {
            provider: provider.into(),
            key: None,
            model: None,
        }
    }

    fn title(id: &str) -> String {
        let mut c = id.chars();
        c.next()
            .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
            .unwrap_or_default()
    }
    fn never(_: &str) -> bool {
        false
    }
    fn is_cli(id: &str) -> bool {
        id.ends_with("-cli")
    }

    fn ctx(cooling: &dyn Fn(&str) -> bool) -> Ctx<'_> {
        Ctx {
            now_ms: 0,
            name: &title,
            cooling,
            subscription: &is_cli,
        }
    }

    fn quota(kind: &str, percent: Option<u8>) -> Event {
        let name = kind;
        let kind: QuotaKind =
            serde_json::from_value(serde_json::json!(name)).expect("a quota kind");
        Event::Quota {
            provider: "claude-max".into(),
            account: "client:1".into(),
            window: "5h".into(),
            label: "5 h".into(),
            kind,
            percent,
            resets_at_ms: Some(3_600_000),
            message: format!("Claude Max: {name}"),
        }
    }

    #[test]
    fn usage_windows_notify_by_their_preferences() {
        let mut seen = HashSet::new();
        let c = ctx(&never);
        let all = [
            quota("threshold", Some(80)),
            quota("capped", None),
            quota("overage", None),
            quota("back", None),
        ];
        let b = fold(&all, &mut seen, &NotifyPrefs::default(), &c);
        // The cap itself is told by its failover; thresholds and the way back are told here.
        assert_eq!(
            b.quota,
            [
                "Claude Max: threshold",
                "Claude Max: overage",
                "Claude Max: back"
            ]
        );
        let mut off = NotifyPrefs::default();
        off.off.push(Notification::QuotaWarning);
        let b = fold(&all, &mut seen, &off, &c);
        assert_eq!(b.quota, ["Claude Max: overage", "Claude Max: back"]);
        off.off
            .extend([Notification::QuotaBack, Notification::Failover]);
        assert!(fold(&all, &mut seen, &off, &c).quota.is_empty());
    }

    #[test]
    fn one_notification_per_episode() {
        let prefs = NotifyPrefs::default();
        let mut seen = HashSet::new();
        let c = ctx(&never);
        let b = fold(
            &[failover("claude", "rate"), failover("claude", "rate")],
            &mut seen,
            &prefs,
            &c,
        );
        assert_eq!(b.failovers.len(), 1);
        assert!(fold(&[failover("claude", "rate")], &mut seen, &prefs, &c)
            .failovers
            .is_empty());
        assert!(fold(&[failover("x", "transient")], &mut seen, &prefs, &c)
            .failovers
            .is_empty());
        let b = fold(&[ended_event("claude")], &mut seen, &prefs, &c);
        assert_eq!(b.back, ["Claude"], "the name, not the id");
        assert_eq!(
            fold(&[failover("claude", "rate")], &mut seen, &prefs, &c)
                .failovers
                .len(),
            1
        );
    }

    #[test]
    fn an_episode_ends_when_its_cooldown_runs_out() {
        let prefs = NotifyPrefs::default();
        let mut seen = HashSet::new();
        fold(
            &[failover("claude", "rate")],
            &mut seen,
            &prefs,
            &ctx(&never),
        );
        assert!(
            ended(&mut seen, &ctx(&|p| p == "claude")).is_empty(),
            "still cooling"
        );
        assert_eq!(ended(&mut seen, &ctx(&never)), ["Claude"]);
        assert_eq!(
            fold(
                &[failover("claude", "rate")],
                &mut seen,
                &prefs,
                &ctx(&never)
            )
            .failovers
            .len(),
            1,
            "a new episode is announced"
        );
    }

    #[test]
    fn short_limits_stay_in_the_tray_and_caps_always_notify() {
        let prefs = NotifyPrefs::default();
        let mut seen = HashSet::new();
        let c = ctx(&never);
        // A free tier's 25 s per-minute limit, again and again: no notification, no "back".
        for _ in 0..8 {
            let b = fold(
                &[failover_at("groq", "rate", 25_000), ended_event("groq")],
                &mut seen,
                &prefs,
                &c,
            );
            assert_eq!(b, Batch::default());
        }
        // A subscription's cap is news however soon it lifts; so is a key that stopped working.
        let b = fold(
            &[
                failover_at("claude-cli", "rate", 25_000),
                failover_at("groq", "auth", 0),
            ],
            &mut seen,
            &prefs,
            &c,
        );
        assert_eq!(b.failovers.len(), 2);
        // A wait of minutes is news too.
        assert_eq!(
            fold(
                &[failover_at("openai", "rate", 600_000)],
                &mut seen,
                &prefs,
                &c
            )
            .failovers
            .len(),
            1
        );
    }

    #[test]
    fn a_manual_clear_ends_the_episode_whatever_scope_it_cleared() {
        let prefs = NotifyPrefs::default();
        let mut seen = HashSet::new();
        fold(
            &[failover("claude", "rate")],
            &mut seen,
            &prefs,
            &ctx(&never),
        );
        // The key's cooldown is cleared by hand, and no other cooldown of the provider is left.
        let key_cleared = Event::CooldownEnded {
            provider: "claude".into(),
            key: Some("env:K".into()),
            model: None,
        };
        let b = fold(
            std::slice::from_ref(&key_cleared),
            &mut seen,
            &prefs,
            &ctx(&never),
        );
        assert_eq!(b.back, ["Claude"]);
        // While another of its cooldowns runs, it is not back yet.
        fold(
            &[failover("claude", "rate")],
            &mut seen,
            &prefs,
            &ctx(&never),
        );
        let b = fold(&[key_cleared], &mut seen, &prefs, &ctx(&|p| p == "claude"));
        assert!(b.back.is_empty());
    }

    #[test]
    fn nothing_left_says_when_the_first_is_back() {
        let prefs = NotifyPrefs::default();
        let mut seen = HashSet::new();
        let all = Event::AllExhausted {
            request_id: "r".into(),
            requested_model: "auto".into(),
            retry_at_ms: Some(1_767_230_340_000), // 2026-01-01T01:19:00Z
        };
        let b = fold(&[all], &mut seen, &prefs, &ctx(&never));
        assert!(b.exhausted);
        let line = exhausted_message(b.back_at_ms, &jiff::tz::TimeZone::UTC, Locale::ENGLISH);
        assert!(line.contains("back at 01:19"), "{line}");
        assert!(
            !exhausted_message(None, &jiff::tz::TimeZone::UTC, Locale::ENGLISH)
                .contains("Open Baton")
        );
    }

    #[test]
    fn preferences_silence_kinds() {
        let mut prefs = NotifyPrefs::default();
        prefs.off.push(Notification::Failover);
        let mut seen = HashSet::new();
        assert!(fold(
            &[failover("claude", "rate")],
            &mut seen,
            &prefs,
            &ctx(&never)
        )
        .failovers
        .is_empty());
    }
}
