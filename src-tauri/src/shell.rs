//! The app's life cycle: start the gateway on Tauri's async runtime, the hidden window with the
//! web UI (already authorised), single instance, start at login, and a graceful Quit.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use baton::{Core, DesktopLink, GatewayHandle};
use tauri::{AppHandle, Manager, RunEvent, WebviewUrl, WebviewWindowBuilder, WindowEvent};
use tauri_plugin_autostart::{MacosLauncher, ManagerExt};

pub const WINDOW: &str = "main";

/// What the tray and menu handlers need. The gateway part changes when it is restarted (tray:
/// Restart gateway) or started again after it could not start (tray: Retry).
pub struct Shell {
    pub data_dir: PathBuf,
    opts: baton::serve::ServeOptions,
    /// What start at login runs after the binary (`autostart_args`).
    at_login: Vec<&'static str>,
    run: Mutex<Running>,
}

#[derive(Default)]
struct Running {
    handle: Option<GatewayHandle>,
    core: Option<Arc<Core>>,
    /// `http://127.0.0.1:8787`.
    origin: String,
    /// Why the gateway is not running (port taken), if so.
    failed: Option<String>,
    /// Bumped at every start: tasks that follow an older gateway stop.
    generation: u64,
    /// Whether the window shows the web UI (else the page that says why it is not running).
    window_on_ui: bool,
    /// Whether the command line's address was kept as the listen setting (at a first start).
    remembered: bool,
    /// The port chosen in the tray after the one asked for was taken ("Start on port N"): the
    /// next start uses it and, once it listens, keeps it as the listen setting.
    chosen_port: Option<u16>,
}

impl Shell {
    fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        self.run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    pub fn core(&self) -> Option<Arc<Core>> {
        self.lock().core.clone()
    }
    pub fn origin(&self) -> String {
        self.lock().origin.clone()
    }
    pub fn failed(&self) -> Option<String> {
        self.lock().failed.clone()
    }
    pub fn generation(&self) -> u64 {
        self.lock().generation
    }
}

/// What start-at-login runs: this app with the same setup it was started with (config file and
/// data directory), as absolute paths — a bare binary would start empty, on another data
/// directory, with a new gateway key. The address is not on the line: it is kept in the data
/// directory (`--host`/`--port` given to the app are stored there, and Settings changes it), so
/// a change in Settings needs no new autostart entry. Quoted for the desktop entry's Exec line,
/// which the autostart crate joins with spaces.
fn autostart_args(opts: &baton::serve::ServeOptions, data_dir: &Path) -> Vec<&'static str> {
    let abs = |p: &Path| {
        std::path::absolute(p)
            .unwrap_or_else(|_| p.to_path_buf())
            .display()
            .to_string()
    };
    let mut args: Vec<String> = Vec::new();
    if let Some(c) = &opts.config {
        args.extend(["--config".into(), exec_quote(&abs(c))]);
    }
    args.extend(["--data-dir".into(), exec_quote(&abs(data_dir))]);
    // The plugin keeps them for the app's life; this runs once.
    args.into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect()
}

/// Start at login as it stands for this setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtLogin {
    Off,
    /// The entry starts this binary with this config file and data directory.
    ThisSetup,
    /// An entry left by a start with another config file or data directory: shown as off
    /// (turning it on rewrites it for this setup).
    OtherSetup,
}

/// Whether start at login is on, and for which setup. Checked on Linux, where the entry is a
/// file to read; elsewhere the entry's presence is what is known.
pub fn at_login(app: &AppHandle) -> AtLogin {
    if !app.autolaunch().is_enabled().unwrap_or(false) {
        return AtLogin::Off;
    }
    #[cfg(target_os = "linux")]
    {
        let shell = app.state::<Shell>();
        let exe = std::env::var("APPIMAGE").ok().or_else(|| {
            std::env::current_exe()
                .ok()
                .map(|p| p.display().to_string())
        });
        let entry = std::env::var_os("HOME")
            .map(PathBuf::from)
            .map(|h| h.join(".config/autostart/Baton.desktop"))
            .and_then(|p| std::fs::read_to_string(p).ok());
        if let (Some(exe), Some(entry)) = (exe, entry) {
            let want = format!("Exec={exe} {}", shell.at_login.join(" "));
            if !entry.lines().any(|l| l.trim_end() == want) {
                return AtLogin::OtherSetup;
            }
        }
    }
    AtLogin::ThisSetup
}

/// Whether start at login is on *for this setup* (what the tray's tick and Settings show).
pub fn starts_at_login(app: &AppHandle) -> bool {
    at_login(app) == AtLogin::ThisSetup
}

/// One argument for a desktop entry's Exec line (quoted when it needs to be, per the spec).
fn exec_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=,@%".contains(c))
    {
        return s.to_string();
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
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
    crate::notify::install_icon(&data_dir);
    let at_login = autostart_args(&opts, &data_dir);
    let shell = Shell {
        data_dir: data_dir.clone(),
        opts: opts.clone(),
        at_login: at_login.clone(),
        run: Mutex::new(Running::default()),
    };
    let built = tauri::Builder::default()
        // First: a second launch hands over to this one and exits.
        .plugin(tauri_plugin_single_instance::init(|app, _args, _cwd| {
            tracing::info!("second launch: showing the running Baton");
            show_window(app);
        }))
        .plugin(tauri_plugin_autostart::init(
            MacosLauncher::LaunchAgent,
            Some(at_login),
        ))
        .plugin(tauri_plugin_clipboard_manager::init())
        .manage(shell)
        .setup(move |app| {
            setup(app.handle(), config.clone());
            Ok(())
        })
        .on_window_event(|window, event| {
            // Closing the window hides it to the tray; Quit is in the tray menu.
            if let WindowEvent::CloseRequested { api, .. } = event {
                api.prevent_close();
                let _ = window.hide();
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

fn setup(app: &AppHandle, config: baton::config::ConfigFile) {
    let started = tauri::async_runtime::block_on(start_gateway(app, config));
    let shell = app.state::<Shell>();
    // The port page names the port asked for and a neighbour to try (also after a later Retry).
    let (port, other) = ports(&shell.origin());
    let init = format!("window.BATON_PORT = {port}; window.BATON_OTHER_PORT = {other};");
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
    // Last: scripts and tests take "listening on" to mean everything is ready.
    let run = shell.lock();
    if let Some(h) = run.handle.as_ref() {
        baton::serve::announce(h, &shell.data_dir);
    }
}

/// The port in an address or origin, and a neighbour to suggest when it is taken.
pub(crate) fn ports(origin: &str) -> (u16, u16) {
    let port = origin
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(baton::config::DEFAULT_PORT);
    (port, if port == u16::MAX { port - 1 } else { port + 1 })
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
                run.generation
            };
            crate::notify::spawn(app.clone(), core.clone(), generation);
            crate::tray::follow(app.clone(), core, generation);
            Ok(first_run)
        }
        Err(why) => {
            let (port, other) = ports(&addr);
            let message = if why.contains("in use") {
                format!("{why}. Another program (or another Baton) uses port {port}. Quit it and choose Retry in Baton's tray menu, or choose \u{201c}Start on port {other}\u{201d} there: Baton keeps that port for later starts (point your tools at http://127.0.0.1:{other}/v1).")
            } else {
                why.clone()
            };
            tracing::error!("{message}");
            crate::notify::show("Baton could not start", &message);
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
                crate::notify::show(
                    "Baton kept running as it was",
                    &format!("The config file has an error, so the gateway was not restarted: {e}"),
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

pub fn show_window(app: &AppHandle) {
    if let Some(w) = app.get_webview_window(WINDOW) {
        let _ = w.show();
        let _ = w.unminimize();
        let _ = w.set_focus();
    }
}

/// Shows the window on one screen of the UI (`providers`, `activity`, …): where a click on a
/// notification leads.
pub fn show_screen(app: &AppHandle, screen: &'static str) {
    let on_ui = app.state::<Shell>().lock().window_on_ui;
    if let (true, Some(w)) = (on_ui, app.get_webview_window(WINDOW)) {
        let _ = w.eval(format!("location.hash = '#{screen}'"));
    }
    show_window(app);
}

/// Lets the web UI's Start-at-login toggle reach the autostart plugin; tray and UI read the same
/// state, so they agree.
fn link_desktop(app: &AppHandle, core: &Arc<Core>) {
    let get = app.clone();
    let set = app.clone();
    let again = app.clone();
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
    })));
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

/// The gateway key a client should use: the generated one in the data directory.
pub fn gateway_key(data_dir: &Path) -> Option<String> {
    std::fs::read_to_string(data_dir.join(baton::auth::GATEWAY_KEY_FILE))
        .ok()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autostart_keeps_the_setup_with_absolute_quoted_paths() {
        let opts = baton::serve::ServeOptions {
            config: Some(PathBuf::from("my configs/baton.json")),
            data_dir: None,
            host: None,
            port: Some(9000),
        };
        let args = autostart_args(&opts, Path::new("/home/u/.local/share/baton"));
        let cwd = std::env::current_dir().unwrap().display().to_string();
        // The port is kept in the data directory (see `remember_address`), not on the line.
        assert_eq!(
            args,
            [
                "--config",
                format!("\"{cwd}/my configs/baton.json\"").as_str(),
                "--data-dir",
                "/home/u/.local/share/baton",
            ]
        );
        assert_eq!(exec_quote(r#"a"b$c"#), r#""a\"b\$c""#);
        assert_eq!(exec_quote(""), r#""""#);
    }
}
