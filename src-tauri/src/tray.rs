//! The tray icon: its look and tooltip follow the gateway's state (all good / some providers
//! cooling / nothing available / paused), and its menu is rebuilt from a state snapshot whenever
//! something changes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use baton::Core;
use tauri::image::Image;
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem, Submenu};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager};
use tauri_plugin_autostart::ManagerExt;
use tauri_plugin_clipboard_manager::ClipboardExt;

use crate::login::AtLogin;
use crate::state::Shell;

pub const TRAY_ID: &str = "main";
const OPEN: &str = "open";
const COPY_URL: &str = "copy-url";
const COPY_KEY: &str = "copy-key";
const PAUSE: &str = "pause";
const AUTOSTART: &str = "autostart";
const RESTART: &str = "restart";
/// "Start on port N" when the port asked for is taken.
const OTHER_PORT: &str = "other-port";
const ACTIVITY: &str = "activity";
const CONNECT: &str = "connect";
const QUIT: &str = "quit";
/// Per-provider items: `prov:<action>:<id>`.
const PROV: &str = "prov:";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    Ok,
    Cooling,
    Down,
    Paused,
}

/// The tray's state line and look, from the routing snapshot.
pub fn summary(core: &Core) -> (Look, String) {
    if core.paused.load(Ordering::Relaxed) {
        return (
            Look::Paused,
            "Paused — requests get 503 until you resume".into(),
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
        .map(|(n, u)| format!("{n} back at {}", clock(u)));
    match serving {
        None if snap.enabled().next().is_none() => (Look::Down, "No provider enabled".into()),
        None => (
            Look::Down,
            match back {
                Some(b) => format!("Nothing available · {b}"),
                None => "Nothing available".into(),
            },
        ),
        Some(name) => {
            let line = match back {
                Some(b) => format!("Serving via {name} · {b}"),
                None => format!("Serving via {name}"),
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
        .headline(p.id(), now, &core.routing.local_tz)?;
    Some(format!("{} · {w}", p.config.display_name()))
}

fn clock(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| {
            t.to_zoned_datetime(jiff::tz::TimeZone::system())
                .strftime("%H:%M")
                .to_string()
        })
        .unwrap_or_default()
}

fn icon(look: Look) -> Option<Image<'static>> {
    let bytes: &'static [u8] = match look {
        Look::Ok => include_bytes!("../icons/tray-ok.png"),
        Look::Cooling => include_bytes!("../icons/tray-cooling.png"),
        Look::Down => include_bytes!("../icons/tray-down.png"),
        Look::Paused => include_bytes!("../icons/tray-paused.png"),
    };
    Image::from_bytes(bytes).ok()
}

/// One provider's state for its menu line ("cooling until 15:02"), from the gateway's own
/// state, and whether there is a cooldown to clear.
pub fn provider_state(
    p: &baton::providers::ProviderEntry,
    cooldowns: &[baton::limits::CooldownEntry],
    now: i64,
) -> (String, bool) {
    use baton::providers::state::{state_of, State};
    let st = state_of(p, cooldowns, now);
    let until = st.until_ms.map(clock).unwrap_or_default();
    match st.state {
        State::Disabled => ("disabled".into(), false),
        State::LoggedOut => ("logged out".into(), false),
        State::Unavailable => ("unavailable".into(), st.class.is_some()),
        State::BreakerOpen => (format!("breaker open until {until}"), true),
        State::Cooling => (format!("cooling until {until}"), true),
        State::Ready if st.partial => ("ready (a key or model cooling)".into(), true),
        State::Ready => ("ready".into(), false),
    }
}

/// The Providers submenu: each provider with its state, and what can be done to it from here.
fn providers_menu(app: &AppHandle, core: &Core) -> tauri::Result<Submenu<tauri::Wry>> {
    let snap = core.routing.snapshot.load();
    let sub = Submenu::with_id(app, "providers", "Providers", true)?;
    if snap.providers.is_empty() {
        sub.append(&MenuItem::with_id(
            app,
            "prov-none",
            "None yet — add one in Baton",
            false,
            None::<&str>,
        )?)?;
    }
    // One look at the cooldowns for every line.
    let (cooldowns, now) = (core.routing.cooldowns.active(), core.routing.clock.now_ms());
    for (i, p) in snap.providers.iter().enumerate() {
        let (state, cooling) = provider_state(p, &cooldowns, now);
        let id = p.id();
        let item = Submenu::with_id(
            app,
            format!("{PROV}menu:{id}"),
            truncate(&format!("{} — {state}", p.config.display_name()), 60),
            true,
        )?;
        item.append(&CheckMenuItem::with_id(
            app,
            format!("{PROV}toggle:{id}"),
            "Enabled",
            true,
            p.config.enabled,
            None::<&str>,
        )?)?;
        let detected = id == baton::config::LOCAL_PROVIDER_ID;
        item.append(&MenuItem::with_id(
            app,
            format!("{PROV}first:{id}"),
            "Use first (move to the top)",
            i > 0 && !detected,
            None::<&str>,
        )?)?;
        item.append(&MenuItem::with_id(
            app,
            format!("{PROV}clear:{id}"),
            "Clear cooldown",
            cooling,
            None::<&str>,
        )?)?;
        sub.append(&item)?;
    }
    Ok(sub)
}

/// The tray's look and state line, from the gateway (or why it is not running).
fn status_line(app: &AppHandle) -> (Look, String) {
    let shell = app.state::<Shell>();
    match (shell.core(), shell.failed()) {
        (Some(core), _) => summary(&core),
        (None, Some(why)) if why == "restarting" => (Look::Down, "Restarting…".into()),
        (None, Some(why)) if why.contains("in use") => (
            Look::Down,
            format!(
                "Not running: port {} is taken",
                crate::state::ports(&shell.origin()).0
            ),
        ),
        (None, Some(why)) => (Look::Down, format!("Not running: {why}")),
        (None, None) => (Look::Down, "Not running".into()),
    }
}

fn menu(app: &AppHandle) -> tauri::Result<(Menu<tauri::Wry>, Look, String)> {
    let (look, line) = status_line(app);
    Ok((build_menu(app, &line)?, look, line))
}

/// Restart (or Retry after a failed start) and, while the port asked for is taken, "Start on
/// port N": one click starts on the next port, which is kept for later starts.
fn gateway_items(app: &AppHandle, running: bool) -> tauri::Result<Vec<MenuItem<tauri::Wry>>> {
    let restart = if running {
        "Restart gateway"
    } else {
        "Retry starting the gateway"
    };
    let mut items = vec![MenuItem::with_id(
        app,
        RESTART,
        restart,
        true,
        None::<&str>,
    )?];
    let shell = app.state::<Shell>();
    if !running && shell.failed().is_some_and(|why| why.contains("in use")) {
        let other = crate::state::ports(&shell.origin()).1;
        items.push(MenuItem::with_id(
            app,
            OTHER_PORT,
            format!("Start on port {other}"),
            true,
            None::<&str>,
        )?);
    }
    Ok(items)
}

fn build_menu(app: &AppHandle, line: &str) -> tauri::Result<Menu<tauri::Wry>> {
    let core = app.state::<Shell>().core();
    let running = core.is_some();
    let paused = core
        .as_ref()
        .is_some_and(|c| c.paused.load(Ordering::Relaxed));
    let status = MenuItem::with_id(app, "status", truncate(line, 80), false, None::<&str>)?;
    let open = MenuItem::with_id(app, OPEN, "Open Baton", true, None::<&str>)?;
    let copy_url = MenuItem::with_id(app, COPY_URL, "Copy base URL", running, None::<&str>)?;
    let copy_key = MenuItem::with_id(app, COPY_KEY, "Copy gateway key", running, None::<&str>)?;
    let pause = MenuItem::with_id(
        app,
        PAUSE,
        if paused {
            "Resume routing"
        } else {
            "Pause routing"
        },
        running,
        None::<&str>,
    )?;
    let at_login = crate::login::at_login(app);
    let autostart = CheckMenuItem::with_id(
        app,
        AUTOSTART,
        match at_login {
            AtLogin::OtherSetup => "Start at login (now set for another setup)",
            AtLogin::Off | AtLogin::ThisSetup => "Start at login",
        },
        true,
        at_login == AtLogin::ThisSetup,
        None::<&str>,
    )?;
    let version = MenuItem::with_id(
        app,
        "version",
        format!("Baton {}", baton::version()),
        false,
        None::<&str>,
    )?;
    let quit = MenuItem::with_id(app, QUIT, "Quit Baton", true, None::<&str>)?;
    let sep1 = PredefinedMenuItem::separator(app)?;
    let sep2 = PredefinedMenuItem::separator(app)?;
    let sep3 = PredefinedMenuItem::separator(app)?;
    let menu = Menu::with_items(app, &[&status])?;
    // The serving provider's binding usage window, on its own line (the menu stays narrow).
    if let Some(line) = core.as_deref().and_then(usage_line) {
        menu.append(&MenuItem::with_id(
            app,
            "usage",
            truncate(&line, 60),
            false,
            None::<&str>,
        )?)?;
    }
    menu.append_items(&[
        &sep1, &open, &copy_url, &copy_key, &pause, &autostart, &sep2,
    ])?;
    if let Some(core) = &core {
        menu.append(&providers_menu(app, core)?)?;
    }
    menu.append(&connect_item(app, core.as_deref())?)?;
    let activity = MenuItem::with_id(
        app,
        ACTIVITY,
        "Request log (Activity)",
        running,
        None::<&str>,
    )?;
    menu.append(&activity)?;
    for item in gateway_items(app, running)? {
        menu.append(&item)?;
    }
    menu.append_items(&[&sep3, &version, &quit])?;
    Ok(menu)
}

/// Which tools Baton has pointed at itself (and that Connect is where to undo it); opens the
/// Connect screen.
fn connect_item(app: &AppHandle, core: Option<&Core>) -> tauri::Result<MenuItem<tauri::Wry>> {
    let connected = core
        .map(|c| baton::connect::connected_names(&c.data_dir.join("connect")))
        .unwrap_or_default();
    let label = if connected.is_empty() {
        "Connect Claude Code, Codex…".to_string()
    } else {
        format!("Connected: {} (undo in Connect)…", connected.join(", "))
    };
    MenuItem::with_id(
        app,
        CONNECT,
        truncate(&label, 60),
        core.is_some(),
        None::<&str>,
    )
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

pub fn create(app: &AppHandle) {
    let (menu, look, line) = match menu(app) {
        Ok(m) => m,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the tray menu");
            return;
        }
    };
    let mut b = TrayIconBuilder::with_id(TRAY_ID)
        .menu(&menu)
        .tooltip(format!("Baton — {line}"))
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu(app, event.id().as_ref()))
        .temp_dir_path(icon_dir(app));
    if let Some(i) = icon(look) {
        b = b.icon(i);
    }
    if let Err(e) = b.build(app) {
        tracing::error!(error = %e, "cannot create the tray icon");
    }
    let key = state_key(app, look, &line);
    app.manage(LastLook(std::sync::Mutex::new(Some(key))));
}

/// Where the tray library writes the icon image the tray host reads: this user's own runtime
/// directory, else the data directory. Its default without `XDG_RUNTIME_DIR` is a shared
/// `/tmp/tray-icon`, which the first user on the machine owns: every other user's tray icon then
/// came up empty.
fn icon_dir(app: &AppHandle) -> std::path::PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .map(|d| d.join("baton-tray"))
        .unwrap_or_else(|| app.state::<Shell>().data_dir.join("tray-icon"))
}

/// What the tray last showed; an unchanged state leaves the tray alone (replacing the menu
/// while it is open would close it under the user's pointer).
struct LastLook(std::sync::Mutex<Option<StateKey>>);

/// Look, line, paused, start at login, the providers' lines.
type StateKey = (Look, String, bool, AtLogin, Vec<String>);

fn state_key(app: &AppHandle, look: Look, line: &str) -> StateKey {
    let core = app.try_state::<Shell>().and_then(|s| s.core());
    let paused = core
        .as_ref()
        .is_some_and(|c| c.paused.load(Ordering::Relaxed));
    let autostart = crate::login::at_login(app);
    // The providers submenu: its lines and order.
    let providers = core
        .map(|c| {
            let (cooldowns, now) = (c.routing.cooldowns.active(), c.routing.clock.now_ms());
            c.routing
                .snapshot
                .load()
                .providers
                .iter()
                .map(|p| format!("{}:{}", p.id(), provider_state(p, &cooldowns, now).0))
                .collect()
        })
        .unwrap_or_default();
    let mut providers: Vec<String> = providers;
    if let Some(c) = app.try_state::<Shell>().and_then(|s| s.core()) {
        providers.extend(
            baton::connect::connected_names(&c.data_dir.join("connect"))
                .into_iter()
                .map(|n| format!("connected:{n}")),
        );
    }
    (look, line.to_string(), paused, autostart, providers)
}

/// Rebuilds menu, icon and tooltip when the state they show has changed.
pub fn refresh(app: &AppHandle) {
    let Some(tray) = app.tray_by_id(TRAY_ID) else {
        return;
    };
    // The menu is built only when what it shows changed (it was built and thrown away on
    // every tick).
    let (look, line) = status_line(app);
    let usage = app
        .state::<Shell>()
        .core()
        .and_then(|c| usage_line(&c))
        .map(|u| format!("\n{u}"))
        .unwrap_or_default();
    let key = state_key(app, look, &format!("{line}{usage}"));
    let changed = app
        .try_state::<LastLook>()
        .and_then(|l| {
            l.0.lock().ok().map(|mut last| {
                let changed = last.as_ref() != Some(&key);
                *last = Some(key.clone());
                changed
            })
        })
        .unwrap_or(true);
    if !changed {
        return;
    }
    let Ok(menu) = build_menu(app, &line) else {
        // Try again at the next refresh.
        if let Some(l) = app.try_state::<LastLook>() {
            if let Ok(mut last) = l.0.lock() {
                *last = None;
            }
        }
        return;
    };
    let _ = tray.set_menu(Some(menu));
    let _ = tray.set_icon(icon(look));
    let _ = tray.set_tooltip(Some(format!("Baton — {line}{usage}")));
}

/// Refreshes the tray on every gateway event (coalesced) and every few seconds (cooldowns end
/// without an event when nobody asks).
pub fn follow(app: AppHandle, core: Arc<Core>, generation: u64) {
    let mut rx = core.routing.events.subscribe();
    tauri::async_runtime::spawn(async move {
        loop {
            // A restarted gateway has its own follower.
            if app.state::<Shell>().generation() != generation {
                return;
            }
            tokio::select! {
                ev = rx.recv() => {
                    if matches!(ev, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return;
                    }
                    // A burst of events: one refresh.
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    while rx.try_recv().is_ok() {}
                }
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            let a = app.clone();
            let _ = app.run_on_main_thread(move || refresh(&a));
        }
    });
}

/// A provider's item: enable/disable, move to the top, clear its cooldown.
fn on_provider(app: &AppHandle, core: &Core, action: &str, id: &str) {
    let r = match action {
        "toggle" => {
            let on = core
                .routing
                .snapshot
                .load()
                .provider(id)
                .is_some_and(|p| p.config.enabled);
            core.set_enabled(id, !on).map_err(|e| e.to_string())
        }
        "first" => core.move_first(id).map_err(|e| e.to_string()),
        "clear" => {
            core.clear_cooldowns(id, None, None);
            Ok(())
        }
        _ => Ok(()),
    };
    if let Err(e) = r {
        crate::notify::show("Baton could not change that", &e);
    }
    refresh(app);
}

fn on_menu(app: &AppHandle, id: &str) {
    tracing::info!(item = id, "tray menu");
    let shell = app.state::<Shell>();
    if let Some((action, provider)) = id.strip_prefix(PROV).and_then(|r| r.split_once(':')) {
        if let Some(core) = shell.core() {
            on_provider(app, &core, action, provider);
        }
        return;
    }
    match id {
        OPEN => crate::state::show_window(app),
        ACTIVITY => crate::state::show_screen(app, "activity"),
        CONNECT => crate::state::show_screen(app, "connect"),
        RESTART => {
            (shell.actions.restart)(app, None);
            refresh(app);
        }
        OTHER_PORT => {
            let other = crate::state::ports(&shell.origin()).1;
            (shell.actions.restart)(app, Some(other));
            refresh(app);
        }
        COPY_URL => {
            let url = format!("{}/v1", shell.origin());
            let _ = app.clipboard().write_text(url);
        }
        COPY_KEY => match crate::state::gateway_key(&shell.data_dir) {
            Some(k) => {
                let _ = app.clipboard().write_text(k);
            }
            None => crate::notify::show(
                "No generated gateway key",
                "This Baton takes its gateway keys from environment variables (gatewayKeys in the config file); copy the key from there.",
            ),
        },
        PAUSE => {
            if let Some(core) = shell.core() {
                core.set_paused(!core.is_paused());
            }
            refresh(app);
        }
        AUTOSTART => {
            // An entry for another setup counts as off: choosing the item rewrites it for this one.
            let on = crate::login::starts_at_login(app);
            let r = if on {
                app.autolaunch().disable()
            } else {
                app.autolaunch().enable()
            };
            if let Err(e) = r {
                crate::notify::show("Start at login failed", &e.to_string());
            } else if !on {
                let exe = std::env::current_exe().ok();
                if let Some(w) = exe.and_then(|e| baton::api::settings::build_dir_warning(&e)) {
                    crate::notify::show("Baton starts at login — from a build directory", &w);
                }
                let keys = shell
                    .core()
                    .and_then(|c| baton::api::settings::login_env_warning(&c));
                if let Some(w) = keys {
                    crate::notify::show("Baton starts at login — some keys may be missing", &w);
                }
            }
            refresh(app);
        }
        QUIT => (shell.actions.quit)(app),
        _ => {}
    }
}
