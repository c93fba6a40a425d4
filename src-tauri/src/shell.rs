//! The app's life cycle: start the gateway on Tauri's async runtime, the hidden window with the
//! web UI (already authorised), single instance, start at login, and a graceful Quit.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use baton::i18n::tr;
use baton::{Core, DesktopLink};
use tauri::{AppHandle, Manager, RunEvent, WebviewUrl, WebviewWindowBuilder, WindowEvent};
use tauri_plugin_autostart::{MacosLauncher, ManagerExt};

use crate::login::{autostart_args, starts_at_login};
use crate::state::{ports, show_window, Actions, Running, Shell, WINDOW};

/// Keys the enabled providers name but this start cannot see (a start at login runs no shell
/// exports): said once per start with what to do, not only written in the log — the provider
/// is skipped until the key is there.
fn missing_keys(app: &AppHandle, core: &Core) {
    let snap = core.routing.snapshot.load();
    let missing: Vec<String> = snap
        .providers
        .iter()
        .filter(|p| p.config.enabled && !p.missing_keys.is_empty())
        .map(|p| {
            format!(
                "{} ({})",
                p.missing_keys.join(", "),
                p.config.display_name()
            )
        })
        .collect();
    if missing.is_empty() {
        return;
    }
    let l = core.locale().lang;
    let file = baton::config::env_file::path()
        .map_or("~/.config/baton/env".into(), |p| p.display().to_string());
    tracing::warn!(keys = %missing.join("; "), "keys missing at start");
    crate::notify::show_on(
        app,
        &tr(l, "Baton started without some keys", &[]),
        &tr(
            l,
            "Not set in this session: {keys}. Those providers are skipped. Put NAME=value lines in {file} (read at every start, even at login), or paste the key into Baton.",
            &[("keys", &missing.join("; ")), ("file", &file)],
        ),
        "providers",
    );
}

/// A second launch for another data directory (another setup) cannot start beside this one
/// (one app, one tray): it is not silently dropped but said, with what to do instead.
fn second_launch(app: &AppHandle, args: &[String], cwd: &str) {
    let ours = app.state::<Shell>().data_dir.clone();
    let Some(theirs) = other_data_dir(args, cwd, &ours) else {
        return;
    };
    tracing::info!(ours = %ours.display(), theirs = %theirs.display(), "second launch for another data directory");
    let l = app.state::<Shell>().locale().lang;
    let (ours, theirs) = (ours.display().to_string(), theirs.display().to_string());
    crate::notify::show(
        &tr(l, "Baton is already running", &[]),
        &tr(
            l,
            "It keeps its data in {ours}; this launch asked for {theirs}. Quit Baton from the tray first to start that one, or run `baton serve --data-dir {theirs} --port 8788` beside it.",
            &[("ours", &ours), ("theirs", &theirs)],
        ),
    );
}

/// The data directory a second launch's arguments ask for (`--data-dir`, relative to its
/// working directory; the default without one), when it is not `ours`.
fn other_data_dir(
    args: &[String],
    cwd: &str,
    ours: &std::path::Path,
) -> Option<std::path::PathBuf> {
    let mut asked = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--data-dir" {
            asked = it.next().map(std::path::PathBuf::from);
        } else if let Some(v) = a.strip_prefix("--data-dir=") {
            asked = Some(std::path::PathBuf::from(v));
        }
    }
    let asked = match asked {
        Some(p) if p.is_absolute() => p,
        Some(p) => std::path::Path::new(cwd).join(p),
        None => baton::default_data_dir(),
    };
    let real = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    (real(&asked) != real(ours)).then_some(asked)
}

pub fn run(opts: baton::serve::ServeOptions) -> ExitCode {
    let config = match opts.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let data_dir = opts.data_dir();
    let at_login = autostart_args(&opts, &data_dir);
    let shell = Shell {
        data_dir: data_dir.clone(),
        opts: opts.clone(),
        at_login: at_login.clone(),
        run: Mutex::new(Running::default()),
        actions: Actions {
            restart: restart_on,
            quit,
        },
    };
    let built = tauri::Builder::default()
        // First: a second launch hands over to this one and exits.
        .plugin(tauri_plugin_single_instance::init(|app, args, cwd| {
            tracing::info!("second launch: showing the running Baton");
            show_window(app);
            second_launch(app, &args, &cwd);
        }))
        .plugin(tauri_plugin_autostart::init(
            MacosLauncher::LaunchAgent,
            Some(at_login),
        ))
        .plugin(tauri_plugin_clipboard_manager::init())
        .manage(shell)
        .setup(move |app| {
            // Only the one instance that runs writes to its data directory (a second launch
            // hands over before this and creates nothing).
            crate::notify::install_icon(&app.state::<Shell>().data_dir);
            setup(app.handle(), config.clone());
            Ok(())
        })
        .on_window_event(|window, event| {
            // Closing the window hides it to the tray; Quit is in the tray menu. With no tray
            // to come back from, it is minimised instead.
            if let WindowEvent::CloseRequested { api, .. } = event {
                api.prevent_close();
                if window.app_handle().state::<Shell>().lock().no_tray {
                    let _ = window.minimize();
                } else {
                    let _ = window.hide();
                }
            }
        })
        .build(tauri::generate_context!());
    let app = match built {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: cannot start the desktop app: {e}");
            return ExitCode::FAILURE;
        }
    };
    app.run(|_app, event| {
        // The last window closing is not a reason to quit; only Quit (an explicit exit code) is.
        if let RunEvent::ExitRequested { api, code, .. } = event {
            if code.is_none() {
                api.prevent_exit();
            }
        }
    });
    ExitCode::SUCCESS
}

/// How long a start waits for a tray host before it decides there is none (a panel started at
/// login may come up a moment after the apps).
const TRAY_HOST_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Without a tray host the icon is invisible, and so would be the app: after a grace period the
/// window opens, closing it minimises instead of hiding, and a notification says why.
fn watch_for_a_tray_host(app: &AppHandle) {
    let app = app.clone();
    std::thread::spawn(move || {
        std::thread::sleep(TRAY_HOST_GRACE);
        if crate::host::tray_host() {
            return;
        }
        tracing::warn!("no tray host on this desktop: showing the window instead of a tray icon");
        app.state::<Shell>().lock().no_tray = true;
        let a = app.clone();
        let _ = app.run_on_main_thread(move || show_window(&a));
        let l = app.state::<Shell>().locale().lang;
        crate::notify::show(
            &tr(l, "Baton is running (no tray on this desktop)", &[]),
            &tr(l, "This desktop shows no tray icons, so Baton keeps its window open instead: closing it minimises it. Start Baton again to bring the window back.", &[]),
        );
    });
}

fn setup(app: &AppHandle, config: baton::config::ConfigFile) {
    let started = tauri::async_runtime::block_on(start_gateway(app, config));
    let shell = app.state::<Shell>();
    // The port page names the port asked for and a neighbour to try (also after a later Retry).
    let (port, other) = ports(&shell.origin());
    let lang = shell.locale().lang.tag();
    let init = format!(
        "window.BATON_PORT = {port}; window.BATON_OTHER_PORT = {other}; window.BATON_LANG = \"{lang}\";"
    );
    match started {
        Ok(first_run) => {
            // Nothing configured yet: the window opens on the welcome screen instead of leaving
            // the user with a red tray icon.
            make_window(app, ui_url(app), first_run, Some(init));
            shell.lock().window_on_ui = true;
        }
        Err(_) => make_window(
            app,
            WebviewUrl::App("port-busy.html".into()),
            true,
            Some(init),
        ),
    }
    crate::tray::create(app);
    watch_for_a_tray_host(app);
    quit_on_a_signal(app);
    // Last: scripts and tests take "listening on" to mean everything is ready.
    let run = shell.lock();
    if let Some(h) = run.handle.as_ref() {
        baton::serve::announce(h, &shell.data_dir);
    }
}

/// The web UI, unlocked with the admin key (the page takes it out of the address bar).
fn ui_url(app: &AppHandle) -> WebviewUrl {
    let shell = app.state::<Shell>();
    let key = std::fs::read_to_string(shell.data_dir.join(baton::auth::ADMIN_KEY_FILE))
        .unwrap_or_default();
    match format!("{}/ui/#admin={}", shell.origin(), key.trim()).parse() {
        Ok(u) => WebviewUrl::External(u),
        Err(_) => WebviewUrl::App("port-busy.html".into()),
    }
}

/// Starts the gateway with `config` and wires it to notifications, the tray and the UI's
/// desktop settings. `Ok(true)` when nothing is configured yet (a first run). On failure the
/// reason is kept for the tray, and said in a notification.
async fn start_gateway(app: &AppHandle, config: baton::config::ConfigFile) -> Result<bool, String> {
    let shell = app.state::<Shell>();
    let addr = format!("{}:{}", config.server.host, config.server.port);
    let opts = baton::StartOptions {
        config,
        data_dir: shell.data_dir.clone(),
        clock: None,
    };
    let started = async {
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| format!("Baton could not listen on {addr}: {e}"))?;
        baton::start(opts, listener)
            .await
            .map_err(|e| e.to_string())
    }
    .await;
    match started {
        Ok(handle) => {
            let core = handle.core.clone();
            let chosen = shell.lock().chosen_port.take();
            if let Some(port) = chosen {
                // Chosen in the tray: it wins over the command line's, as Settings would.
                keep_address(&core, None, Some(port));
                shell.lock().remembered = true;
            } else if !shell.lock().remembered {
                remember_address(&shell.opts, &core);
                shell.lock().remembered = true;
            }
            link_desktop(app, &core);
            let first_run = core.routing.snapshot.load().providers.is_empty();
            let generation = {
                let mut run = shell.lock();
                run.generation += 1;
                run.origin = format!("http://{}", handle.addr);
                run.handle = Some(handle);
                run.core = Some(core.clone());
                run.failed = None;
                run.idle_locale = None;
                run.generation
            };
            crate::notify::spawn(app.clone(), core.clone(), generation);
            missing_keys(app, &core);
            crate::tray::follow(app.clone(), core, generation);
            Ok(first_run)
        }
        Err(why) => {
            let (port, other) = ports(&addr);
            let l = shell.locale().lang;
            let message = if why.contains("in use") {
                let help = tr(l, "Another program (or another Baton) uses port {port}. Quit it and choose Retry in Baton's tray menu, or choose \u{201c}Start on port {other}\u{201d} there: Baton keeps that port for later starts (point your tools at http://127.0.0.1:{other}/v1).",
                    &[("port", &port.to_string()), ("other", &other.to_string())]);
                format!("{why}. {help}")
            } else {
                why.clone()
            };
            tracing::error!("{message}");
            crate::notify::show(&tr(l, "Baton could not start", &[]), &message);
            let mut run = shell.lock();
            run.origin = format!("http://{addr}");
            run.failed = Some(message.clone());
            run.core = None;
            Err(message)
        }
    }
}

/// `--host` / `--port` given to the app are kept as the listen address, so a start at login
/// (whose command line has neither) listens where this one does.
fn remember_address(opts: &baton::serve::ServeOptions, core: &Core) {
    if opts.host.is_none() && opts.port.is_none() {
        return;
    }
    keep_address(core, opts.host.clone(), opts.port);
}

/// Stores the listen address a later start uses (what is not given stays as it is now).
fn keep_address(core: &Core, host: Option<String>, port: Option<u16>) {
    let mut v = core
        .store
        .setting(baton::serve::LISTEN_SETTING)
        .ok()
        .flatten()
        .unwrap_or_else(|| serde_json::json!({}));
    v["host"] = serde_json::json!(host.unwrap_or_else(|| core.server.host.clone()));
    v["port"] = serde_json::json!(port.unwrap_or(core.server.port));
    if let Err(e) = core.store.set_setting(baton::serve::LISTEN_SETTING, &v) {
        tracing::warn!(error = %e, "cannot keep the listen address for the next start");
    }
}

/// Tray: Restart gateway (the config file is read again) or Retry after a failed start. The
/// open UI sees the gateway go and come back; a window that showed why it could not start
/// moves to the UI.
pub fn restart(app: &AppHandle) {
    restart_on(app, None);
}

/// Tray: "Start on port N" after the port asked for was taken: a Retry on `port`, which is then
/// kept for later starts.
pub fn restart_on(app: &AppHandle, port: Option<u16>) {
    if port.is_some() {
        app.state::<Shell>().lock().chosen_port = port;
    }
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let shell = app.state::<Shell>();
        // The command line's --host/--port were kept as the listen address at the first start;
        // what Settings set since then is what a restart uses.
        let remembered = shell.lock().remembered;
        let opts = if remembered {
            baton::serve::ServeOptions {
                host: None,
                port: None,
                ..shell.opts.clone()
            }
        } else {
            // Never started (port taken): the command line still says where to listen.
            shell.opts.clone()
        };
        let mut config = match opts.load() {
            Ok(c) => c,
            Err(e) => {
                let l = shell.locale().lang;
                crate::notify::show(
                    &tr(l, "Baton kept running as it was", &[]),
                    &tr(
                        l,
                        "The config file has an error, so the gateway was not restarted: {error}",
                        &[("error", &e.to_string())],
                    ),
                );
                return;
            }
        };
        if let Some(p) = shell.lock().chosen_port {
            config.server.port = p;
        }
        // Port 0 means "any free port" at the first start; clients have that one now, so a
        // restart keeps it.
        if config.server.port == 0 {
            config.server.port = ports(&shell.origin()).0;
        }
        let before = shell.origin();
        let old = shell.lock().handle.take();
        if let Some(h) = old {
            tracing::info!("restarting: finishing in-flight requests");
            h.shutdown().await;
        }
        {
            let mut run = shell.lock();
            run.core = None;
            run.failed = Some("restarting".into());
        }
        let started = start_gateway(&app, config).await;
        let a = app.clone();
        let _ = app.run_on_main_thread(move || {
            let shell = a.state::<Shell>();
            if started.is_ok() {
                tracing::info!(origin = %shell.origin(), "gateway restarted");
                // A window on the port page, or on the old address, moves to the UI.
                let on_ui = shell.lock().window_on_ui && shell.origin() == before;
                if !on_ui {
                    if let (Some(w), WebviewUrl::External(url)) =
                        (a.get_webview_window(WINDOW), ui_url(&a))
                    {
                        let _ = w.navigate(url);
                        shell.lock().window_on_ui = true;
                    }
                }
            }
            crate::tray::refresh(&a);
        });
    });
}

fn make_window(app: &AppHandle, url: WebviewUrl, visible: bool, init: Option<String>) {
    let mut builder = WebviewWindowBuilder::new(app, WINDOW, url)
        .title("Baton")
        .inner_size(480.0, 760.0)
        .min_inner_size(380.0, 420.0)
        .visible(visible);
    if let Some(script) = init {
        builder = builder.initialization_script(&script);
    }
    let built = builder.build();
    if let Err(e) = built {
        tracing::error!(error = %e, "cannot create the window");
    }
}

/// Lets the web UI's Start-at-login toggle reach the autostart plugin; tray and UI read the same
/// state, so they agree.
fn link_desktop(app: &AppHandle, core: &Arc<Core>) {
    let get = app.clone();
    let set = app.clone();
    let again = app.clone();
    let again_after_update = app.clone();
    core.desktop.store(Some(Arc::new(DesktopLink {
        autostart: Box::new(move || starts_at_login(&get)),
        set_autostart: Box::new(move |on| {
            let r = if on {
                set.autolaunch().enable()
            } else {
                set.autolaunch().disable()
            };
            crate::tray::refresh(&set);
            r.map_err(|e| e.to_string())
        }),
        restart: Box::new(move || restart(&again)),
        relaunch: Box::new(move || crate::update::relaunch(&again_after_update)),
    })));
    crate::update::attach(app, core);
}

/// SIGTERM (a logout, `systemctl stop`, `kill`) or Ctrl-C quits as the tray's Quit does: the
/// in-flight requests finish and the request log is flushed before the exit (status 0).
fn quit_on_a_signal(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        baton::serve::shutdown_signal().await;
        tracing::info!("signal received: quitting");
        quit(&app);
    });
}

/// Quit: stop accepting, drain in-flight requests (bounded), flush the log, remove the tray.
pub fn quit(app: &AppHandle) {
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let handle = app
            .try_state::<Shell>()
            .and_then(|s| s.lock().handle.take());
        if let Some(h) = handle {
            tracing::info!("quitting: finishing in-flight requests");
            h.shutdown().await;
        }
        let _ = app.remove_tray_by_id(crate::tray::TRAY_ID);
        app.exit(0);
    });
}

#[cfg(test)]
mod tests {
    use super::other_data_dir;
    use std::path::Path;

    fn args(a: &[&str]) -> Vec<String> {
        std::iter::once("baton-desktop")
            .chain(a.iter().copied())
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_second_launch_names_the_data_directory_it_asked_for() {
        let ours = Path::new("/srv/baton-a");
        assert_eq!(
            other_data_dir(&args(&["--data-dir", "/srv/baton-a"]), "/", ours),
            None
        );
        assert_eq!(
            other_data_dir(&args(&["--data-dir=b"]), "/srv", ours).as_deref(),
            Some(Path::new("/srv/b"))
        );
        assert_eq!(
            other_data_dir(&args(&["--port", "9000"]), "/", ours),
            Some(baton::default_data_dir())
        );
        assert_eq!(
            other_data_dir(&args(&[]), "/", &baton::default_data_dir()),
            None
        );
    }
}
