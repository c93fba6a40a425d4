//! What the tray, the notifications and the life cycle share: the app's state (`Shell`: the
//! running gateway, its address, why it is not running), the window, and the gateway key.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use baton::{Core, GatewayHandle};
use tauri::{AppHandle, Manager};

pub const WINDOW: &str = "main";

/// What the tray and menu handlers need. The gateway part changes when it is restarted (tray:
/// Restart gateway) or started again after it could not start (tray: Retry).
pub struct Shell {
    pub data_dir: PathBuf,
    pub(crate) opts: baton::serve::ServeOptions,
    /// What start at login runs after the binary (`login::autostart_args`).
    pub(crate) at_login: Vec<&'static str>,
    pub(crate) run: Mutex<Running>,
    /// The life cycle's own actions, for the tray (given by `shell` at start).
    pub actions: Actions,
}

/// What the tray asks of the app's life cycle, which `shell` owns: a restart (on a chosen port,
/// after the one asked for was taken) and Quit.
pub struct Actions {
    pub restart: fn(&AppHandle, Option<u16>),
    pub quit: fn(&AppHandle),
}

#[derive(Default)]
pub(crate) struct Running {
    pub(crate) handle: Option<GatewayHandle>,
    pub(crate) core: Option<Arc<Core>>,
    /// `http://127.0.0.1:8787`.
    pub(crate) origin: String,
    /// Why the gateway is not running (port taken), if so.
    pub(crate) failed: Option<String>,
    /// Bumped at every start: tasks that follow an older gateway stop.
    pub(crate) generation: u64,
    /// Whether the window shows the web UI (else the page that says why it is not running).
    pub(crate) window_on_ui: bool,
    /// Whether the command line's address was kept as the listen setting (at a first start).
    pub(crate) remembered: bool,
    /// The port chosen in the tray after the one asked for was taken ("Start on port N"): the
    /// next start uses it and, once it listens, keeps it as the listen setting.
    pub(crate) chosen_port: Option<u16>,
    /// No tray host on this desktop (`host`): the window stands in for the icon.
    pub(crate) no_tray: bool,
    /// The language read from the data directory while no gateway runs (`Shell::locale`);
    /// forgotten at every start.
    pub(crate) idle_locale: Option<baton::i18n::Locale>,
}

impl Shell {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Running> {
        self.run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    pub fn core(&self) -> Option<Arc<Core>> {
        self.lock().core.clone()
    }

    /// The language and clock the tray and notifications speak: the running gateway's, else
    /// the one chosen in this data directory (before a start, or after one failed).
    pub fn locale(&self) -> baton::i18n::Locale {
        let mut run = self.lock();
        match &run.core {
            Some(core) => core.locale(),
            // Read once while the gateway is down: only a running gateway can change it.
            None => *run.idle_locale.get_or_insert_with(|| {
                let stored = baton::store::Store::setting_at(&self.data_dir, baton::i18n::SETTING);
                baton::i18n::Locale::with_choice(&baton::i18n::choice_from(stored))
            }),
        }
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

/// The port in an address or origin, and a neighbour to suggest when it is taken.
pub fn ports(origin: &str) -> (u16, u16) {
    let port = origin
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(baton::config::DEFAULT_PORT);
    (port, if port == u16::MAX { port - 1 } else { port + 1 })
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

/// The gateway key a client should use: the generated one in the data directory.
pub fn gateway_key(data_dir: &Path) -> Option<String> {
    std::fs::read_to_string(data_dir.join(baton::auth::GATEWAY_KEY_FILE))
        .ok()
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
}
