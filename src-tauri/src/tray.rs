//! The tray icon: its look and tooltip follow the gateway's state (all good / some providers
//! cooling / nothing available / paused), and its menu follows a state snapshot whenever
//! something changes (written into the open menu when it has the same items: `menu_model`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use baton::Core;
use tauri::image::Image;
use tauri::menu::Menu;
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager};
use tauri_plugin_autostart::ManagerExt;
use tauri_plugin_clipboard_manager::ClipboardExt;

use baton::i18n::{n_, tr};

use crate::login::AtLogin;
use crate::menu_model::{self, Entry};
use crate::state::Shell;
use crate::status::{line_of, provider_state, usage_line, Look};

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

fn icon(look: Look) -> Option<Image<'static>> {
    let bytes: &'static [u8] = match look {
        Look::Ok => include_bytes!("../icons/tray-ok.png"),
        Look::Cooling => include_bytes!("../icons/tray-cooling.png"),
        Look::Down => include_bytes!("../icons/tray-down.png"),
        Look::Paused => include_bytes!("../icons/tray-paused.png"),
    };
    Image::from_bytes(bytes).ok()
}

/// The running gateway and its one summary, computed once for everything a refresh shows
/// (the state line, the usage line, the menu, the record of what is shown).
struct Now {
    running: Option<(Arc<Core>, baton::summary::Summary)>,
}

impl Now {
    fn of(app: &AppHandle) -> Now {
        let core = app.try_state::<Shell>().and_then(|s| s.core());
        Now {
            running: core.map(|c| {
                let s = c.summary();
                (c, s)
            }),
        }
    }

    fn core(&self) -> Option<&Arc<Core>> {
        self.running.as_ref().map(|(c, _)| c)
    }
}

/// The Providers submenu: each provider with its state, and what can be done to it from here.
fn providers_entry(core: &Core, summary: &baton::summary::Summary) -> Entry {
    let snap = core.routing.snapshot.load();
    let loc = core.locale();
    let l = loc.lang;
    let mut items = Vec::new();
    if snap.providers.is_empty() {
        items.push(Entry::item(
            "prov-none",
            tr(l, "None yet — add one in Baton", &[]),
            false,
        ));
    }
    for (i, p) in snap.providers.iter().enumerate() {
        let Some(row) = summary.provider(p.id()) else {
            continue;
        };
        let (state, cooling) = provider_state(row, summary.now_ms, loc);
        let id = p.id();
        let detected = id == baton::config::LOCAL_PROVIDER_ID;
        items.push(Entry::sub(
            format!("{PROV}menu:{id}"),
            truncate(&format!("{} — {state}", p.config.display_name()), 60),
            vec![
                Entry::check(
                    format!("{PROV}toggle:{id}"),
                    tr(l, "Enabled", &[]),
                    true,
                    p.config.enabled,
                ),
                Entry::item(
                    format!("{PROV}first:{id}"),
                    tr(l, "Use first (move to the top)", &[]),
                    i > 0 && !detected,
                ),
                Entry::item(
                    format!("{PROV}clear:{id}"),
                    tr(l, "Clear cooldown", &[]),
                    cooling,
                ),
            ],
        ));
    }
    Entry::sub("providers", tr(l, "Providers", &[]), items)
}

/// The tray's look and state line, from the gateway (or why it is not running).
fn status_line(app: &AppHandle, now: &Now) -> (Look, String) {
    let shell = app.state::<Shell>();
    let l = shell.locale().lang;
    match (&now.running, shell.failed()) {
        (Some((core, summary)), _) => line_of(summary, core.locale()),
        (None, Some(why)) if why == "restarting" => (Look::Down, tr(l, "Restarting…", &[])),
        (None, Some(why)) if why.contains("in use") => (
            Look::Down,
            tr(
                l,
                "Not running: port {port} is taken",
                &[("port", &crate::state::ports(&shell.origin()).0.to_string())],
            ),
        ),
        (None, Some(why)) => (Look::Down, tr(l, "Not running: {why}", &[("why", &why)])),
        (None, None) => (Look::Down, tr(l, "Not running", &[])),
    }
}

/// Restart (or Retry after a failed start) and, while the port asked for is taken, "Start on
/// port N": one click starts on the next port, which is kept for later starts.
fn gateway_items(app: &AppHandle, running: bool) -> Vec<Entry> {
    let l = app.state::<Shell>().locale().lang;
    let restart = if running {
        tr(l, "Restart gateway", &[])
    } else {
        tr(l, "Retry starting the gateway", &[])
    };
    let mut items = vec![Entry::item(RESTART, restart, true)];
    let shell = app.state::<Shell>();
    if !running && shell.failed().is_some_and(|why| why.contains("in use")) {
        let other = crate::state::ports(&shell.origin()).1;
        items.push(Entry::item(
            OTHER_PORT,
            tr(l, "Start on port {port}", &[("port", &other.to_string())]),
            true,
        ));
    }
    items
}

/// What the menu shows now, top to bottom.
fn entries(app: &AppHandle, line: &str, now: &Now) -> Vec<Entry> {
    let core = now.core().cloned();
    let running = core.is_some();
    let paused = core
        .as_ref()
        .is_some_and(|c| c.paused.load(Ordering::Relaxed));
    let l = app.state::<Shell>().locale().lang;
    let item = |id: &str, key: &str, on: bool| Entry::item(id, tr(l, key, &[]), on);
    let mut menu = vec![Entry::item("status", truncate(line, 80), false)];
    // The serving provider's binding usage window, on its own line (the menu stays narrow).
    if let Some(line) = now.running.as_ref().and_then(|(c, s)| usage_line(c, s)) {
        menu.push(Entry::item("usage", truncate(&line, 60), false));
    }
    let at_login = crate::login::at_login(app);
    menu.extend([
        Entry::separator(),
        item(OPEN, n_("Open Baton"), true),
        item(COPY_URL, n_("Copy base URL"), running),
        item(COPY_KEY, n_("Copy gateway key"), running),
        if paused {
            item(PAUSE, n_("Resume routing"), running)
        } else {
            item(PAUSE, n_("Pause routing"), running)
        },
        Entry::check(
            AUTOSTART,
            match at_login {
                AtLogin::OtherSetup => tr(l, "Start at login (now set for another setup)", &[]),
                AtLogin::Off | AtLogin::ThisSetup => tr(l, "Start at login", &[]),
            },
            true,
            at_login == AtLogin::ThisSetup,
        ),
        Entry::separator(),
    ]);
    if let Some((core, summary)) = &now.running {
        menu.push(providers_entry(core, summary));
    }
    menu.push(connect_item(app, core.as_deref()));
    menu.push(item(ACTIVITY, n_("Request log (Activity)"), running));
    menu.extend(gateway_items(app, running));
    menu.extend([
        Entry::separator(),
        Entry::item("version", format!("Baton {}", baton::version()), false),
        item(QUIT, n_("Quit Baton"), true),
    ]);
    menu
}

/// Which tools Baton has pointed at itself (and that Connect is where to undo it); opens the
/// Connect screen.
fn connect_item(app: &AppHandle, core: Option<&Core>) -> Entry {
    let connected = core
        .map(|c| baton::connect::connected_names(&c.data_dir.join("connect")))
        .unwrap_or_default();
    let l = app.state::<Shell>().locale().lang;
    let label = if connected.is_empty() {
        tr(l, "Connect Claude Code, Codex…", &[])
    } else {
        tr(
            l,
            "Connected: {tools} (undo in Connect)…",
            &[("tools", &connected.join(", "))],
        )
    };
    Entry::item(CONNECT, truncate(&label, 60), core.is_some())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

pub fn create(app: &AppHandle) {
    let now = Now::of(app);
    let (look, line) = status_line(app, &now);
    let items = entries(app, &line, &now);
    let menu = match menu_model::build(app, &items) {
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
    let key = state_key(app, look, &line, &now);
    shown(look, &line, &key);
    app.manage(LastLook(std::sync::Mutex::new(Some(Shown {
        key,
        items,
        menu,
    }))));
}

/// What the tray shows, once per change: the record of its state beside the gateway's.
fn shown(look: Look, line: &str, key: &StateKey) {
    tracing::info!(
        look = %look.as_str(),
        line = %line,
        providers = %key.4.join(" | "),
        "tray shows"
    );
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

/// What the tray last showed; an unchanged state leaves the tray alone, and a changed one is
/// written into the menu that is there when its items are the same (replacing the menu while it
/// is open would close it under the user's pointer).
struct LastLook(std::sync::Mutex<Option<Shown>>);

struct Shown {
    key: StateKey,
    items: Vec<Entry>,
    menu: Menu<tauri::Wry>,
}

/// Look, line, paused, start at login, the providers' lines.
type StateKey = (Look, String, bool, AtLogin, Vec<String>);

fn state_key(app: &AppHandle, look: Look, line: &str, now: &Now) -> StateKey {
    let paused = now.running.as_ref().is_some_and(|(_, s)| s.paused);
    let autostart = crate::login::at_login(app);
    // The providers submenu: its lines and order.
    let providers = now
        .running
        .as_ref()
        .map(|(c, summary)| {
            summary
                .providers
                .iter()
                .map(|p| {
                    let state = provider_state(p, summary.now_ms, c.locale()).0;
                    format!("{}:{state}", p.id)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut providers: Vec<String> = providers;
    // A new language rebuilds every item.
    if let Some(s) = app.try_state::<Shell>() {
        providers.push(format!("lang:{}", s.locale().lang.tag()));
    }
    if let Some(c) = app.try_state::<Shell>().and_then(|s| s.core()) {
        providers.extend(
            baton::connect::connected_names(&c.data_dir.join("connect"))
                .into_iter()
                .map(|n| format!("connected:{n}")),
        );
    }
    (look, line.to_string(), paused, autostart, providers)
}

/// Brings menu, icon and tooltip up to date when the state they show has changed.
pub fn refresh(app: &AppHandle) {
    let (Some(tray), Some(last)) = (app.tray_by_id(TRAY_ID), app.try_state::<LastLook>()) else {
        return;
    };
    let Ok(mut last) = last.0.lock() else {
        return;
    };
    let now = Now::of(app);
    let (look, line) = status_line(app, &now);
    let usage = now
        .running
        .as_ref()
        .and_then(|(c, s)| usage_line(c, s))
        .map(|u| format!("\n{u}"))
        .unwrap_or_default();
    let key = state_key(app, look, &format!("{line}{usage}"), &now);
    // The menu is looked at only when what it shows changed (it was built and thrown away on
    // every tick).
    if last.as_ref().is_some_and(|s| s.key == key) {
        return;
    }
    let items = entries(app, &line, &now);
    let kept = last.take().filter(|s| {
        menu_model::same_items(&s.items, &items)
            && s.menu
                .items()
                .is_ok_and(|shown| menu_model::update(shown, &s.items, &items))
    });
    let menu = match kept {
        Some(s) => s.menu,
        None => match menu_model::build(app, &items) {
            Ok(menu) => {
                let _ = tray.set_menu(Some(menu.clone()));
                menu
            }
            // Tried again at the next refresh.
            Err(_) => return,
        },
    };
    let _ = tray.set_icon(icon(look));
    shown(look, &line, &key);
    let _ = tray.set_tooltip(Some(format!("Baton — {line}{usage}")));
    *last = Some(Shown { key, items, menu });
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
        let l = core.locale().lang;
        crate::notify::show(&tr(l, "Baton could not change that", &[]), &e);
    }
    refresh(app);
}

fn on_menu(app: &AppHandle, id: &str) {
    tracing::info!(item = id, "tray menu");
    let shell = app.state::<Shell>();
    let l = shell.locale().lang;
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
                &tr(l, "No generated gateway key", &[]),
                &tr(l, "This Baton takes its gateway keys from environment variables (gatewayKeys in the config file); copy the key from there.", &[]),
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
                crate::notify::show(&tr(l, "Start at login failed", &[]), &e.to_string());
            } else if !on {
                let exe = std::env::current_exe().ok();
                if let Some(w) = exe.and_then(|e| baton::api::settings::build_dir_warning(&e, l)) {
                    crate::notify::show(&tr(l, "Baton starts at login — from a build directory", &[]), &w);
                }
                let keys = shell
                    .core()
                    .and_then(|c| baton::api::settings::login_env_warning(&c, l));
                if let Some(w) = keys {
                    crate::notify::show(&tr(l, "Baton starts at login — some keys may be missing", &[]), &w);
                }
            }
            refresh(app);
        }
        QUIT => (shell.actions.quit)(app),
        _ => {}
    }
}
