//! Native notifications from the core's events: one per limit episode ("Claude Code session limit
//! reached — back at 01:19; now using Codex"), when nothing is left, and (a setting) when a
//! provider is back. A burst of events becomes one notification.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use baton::events::Event;
use baton::Core;
use tauri::AppHandle;
use tokio::sync::broadcast::error::RecvError;

/// Shows one notification; failures (no notification daemon) are logged, not fatal.
pub fn show(summary: &str, body: &str) {
    let r = notify_rust::Notification::new()
        .appname("Baton")
        .summary(summary)
        .body(body)
        .icon("dialog-information")
        .show();
    match r {
        Ok(_) => tracing::info!(%summary, %body, "notification shown"),
        Err(e) => tracing::warn!(error = %e, %summary, "cannot show a notification"),
    }
}

/// Classes that mean a limit or an account problem, worth telling the user about.
fn is_limit(class: &str) -> bool {
    matches!(class, "rate" | "billing" | "auth")
}

/// One notification to show, built from a burst of events.
#[derive(Debug, Default, PartialEq)]
struct Batch {
    failovers: Vec<String>,
    exhausted: bool,
    back: Vec<String>,
}

/// Folds a burst of events into at most one notification, remembering which providers already
/// had their limit announced in this episode (until their cooldown ends).
fn fold(
    events: &[Event],
    announced: &mut HashSet<String>,
    prefs: &serde_json::Map<String, serde_json::Value>,
) -> Batch {
    let on = |k: &str| prefs.get(k).and_then(|v| v.as_bool()).unwrap_or(true);
    let mut b = Batch::default();
    for ev in events {
        match ev {
            Event::Failover {
                from,
                class,
                message,
                ..
            } if is_limit(class) => {
                let provider = from.split('/').next().unwrap_or(from).to_string();
                if announced.insert(provider) && on("failover") {
                    b.failovers.push(message.clone());
                }
            }
            Event::AllExhausted { .. } if on("allExhausted") && !announced.contains("*all*") => {
                announced.insert("*all*".into());
                b.exhausted = true;
            }
            Event::Request { status, .. } if *status < 400 => {
                announced.remove("*all*");
            }
            // The episode ends with the cooldown (whether or not that is announced).
            Event::CooldownEnded {
                provider,
                key: None,
                model: None,
            } if announced.remove(provider)
                && prefs
                    .get("cooldownEnded")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(true) =>
            {
                b.back.push(provider.clone());
            }
            _ => {}
        }
    }
    b
}

/// Providers whose announced limit is over (no cooldown left): the episode ends, and they are
/// reported back when the user asked for that.
fn ended(announced: &mut HashSet<String>, cooling: &dyn Fn(&str) -> bool) -> Vec<String> {
    let over: Vec<String> = announced
        .iter()
        .filter(|p| p.as_str() != "*all*" && !cooling(p))
        .cloned()
        .collect();
    for p in &over {
        announced.remove(p);
    }
    over
}

pub fn spawn(_app: AppHandle, core: Arc<Core>) {
    // Subscribed before returning, so no event after start-up is missed.
    let mut rx = core.events.subscribe();
    tauri::async_runtime::spawn(async move {
        let mut announced: HashSet<String> = HashSet::new();
        let mut logged_out: HashSet<String> = HashSet::new();
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            let first = tokio::select! {
                r = rx.recv() => match r {
                    Ok(ev) => ev,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                },
                _ = tick.tick() => {
                    // Cooldowns that simply run out send no event.
                    let active = core.cooldowns.active();
                    let back = ended(&mut announced, &|p| active.iter().any(|c| c.scope.provider == p));
                    let prefs = baton::api::settings::notifications(&core);
                    let wanted = prefs.get("cooldownEnded").and_then(|v| v.as_bool()).unwrap_or(true);
                    if wanted && !back.is_empty() {
                        show("Baton", &format!("{} back in rotation", back.join(", ")));
                    }
                    // A subscription CLI found logged out (at a check or by a failed call).
                    let snap = core.snapshot.load();
                    for p in snap.providers.iter().filter(|p| p.config.enabled) {
                        let out = p.runtime.cli_status.load().as_ref().is_some_and(|s| s.logged_in == Some(false));
                        let name = p.config.display_name().to_string();
                        if out && logged_out.insert(name.clone()) {
                            if prefs.get("loggedOut").and_then(|v| v.as_bool()).unwrap_or(true) {
                                let why = p.unavailable().unwrap_or_default();
                                show(&format!("{name} is logged out"), &format!("Baton skips it until you log in again: {why}"));
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
                    Event::AllExhausted { .. } | Event::CooldownEnded { .. }
                );
            let mut burst = vec![first];
            if interesting {
                // Let the rest of a burst arrive, then say it once.
                tokio::time::sleep(Duration::from_millis(800)).await;
                while let Ok(ev) = rx.try_recv() {
                    burst.push(ev);
                }
            }
            let prefs = baton::api::settings::notifications(&core);
            let b = fold(&burst, &mut announced, &prefs);
            if b.exhausted {
                show(
                    "Baton: no provider available",
                    "Every provider is rate-limited, out or unavailable; requests fail until one is back. Open Baton to see when.",
                );
            } else if let [one] = b.failovers.as_slice() {
                show("Baton switched providers", one);
            } else if !b.failovers.is_empty() {
                show("Baton switched providers", &b.failovers.join("\n"));
            }
            if !b.back.is_empty() {
                show("Baton", &format!("{} back in rotation", b.back.join(", ")));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failover(from: &str, class: &str) -> Event {
        Event::Failover {
            request_id: "r".into(),
            from: format!("{from}/m"),
            to: "codex/gpt-5".into(),
            class: class.into(),
            reason: "limit".into(),
            reset_at_ms: Some(1),
            message: format!("{from} session limit reached — back at 01:19; now using Codex"),
        }
    }

    #[test]
    fn one_notification_per_episode() {
        let prefs = serde_json::Map::new();
        let mut seen = HashSet::new();
        let b = fold(
            &[failover("claude", "rate"), failover("claude", "rate")],
            &mut seen,
            &prefs,
        );
        assert_eq!(b.failovers.len(), 1);
        assert!(fold(&[failover("claude", "rate")], &mut seen, &prefs)
            .failovers
            .is_empty());
        assert!(fold(&[failover("x", "transient")], &mut seen, &prefs)
            .failovers
            .is_empty());
        let ended = Event::CooldownEnded {
            provider: "claude".into(),
            key: None,
            model: None,
        };
        fold(&[ended], &mut seen, &prefs);
        assert_eq!(
            fold(&[failover("claude", "rate")], &mut seen, &prefs)
                .failovers
                .len(),
            1
        );
    }

    #[test]
    fn an_episode_ends_when_its_cooldown_runs_out() {
        let prefs = serde_json::Map::new();
        let mut seen = HashSet::new();
        fold(&[failover("claude", "rate")], &mut seen, &prefs);
        assert!(
            ended(&mut seen, &|p| p == "claude").is_empty(),
            "still cooling"
        );
        assert_eq!(ended(&mut seen, &|_| false), ["claude"]);
        assert_eq!(
            fold(&[failover("claude", "rate")], &mut seen, &prefs)
                .failovers
                .len(),
            1,
            "a new episode is announced"
        );
    }

    #[test]
    fn preferences_silence_kinds() {
        let mut prefs = serde_json::Map::new();
        prefs.insert("failover".into(), serde_json::Value::Bool(false));
        let mut seen = HashSet::new();
        assert!(fold(&[failover("claude", "rate")], &mut seen, &prefs)
            .failovers
            .is_empty());
    }
}
