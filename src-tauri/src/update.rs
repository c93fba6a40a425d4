//! Updates in the desktop app: the core checks, verifies and replaces the binary (turned on in
//! Settings); here the app says which binary it is and restarts into the new one.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use baton::i18n::tr;
use baton::Core;
use tauri::{AppHandle, Manager};

/// Where this binary was when the process started: after an update replaced it, the running
/// process's own path reads "(deleted)".
static EXE: OnceLock<PathBuf> = OnceLock::new();

/// Called first thing in `main`.
pub fn remember_exe() {
    if let Ok(exe) = std::env::current_exe() {
        let _ = EXE.set(exe);
    }
}

/// The core's updater learns which app this is; the daily check runs while updates are on.
pub fn attach(app: &AppHandle, core: &Arc<Core>) {
    if let Some(exe) = EXE.get() {
        core.updates.attach(baton::update::App {
            name: "baton-desktop",
            exe: exe.clone(),
        });
    }
    let app = app.clone();
    tauri::async_runtime::spawn(baton::update::run_checks(core.clone(), move |offer| {
        let l = app.state::<crate::state::Shell>().locale().lang;
        let notes = offer.notes.lines().next().unwrap_or_default();
        crate::notify::show_on(
            &app,
            &tr(
                l,
                "Baton {version} is available",
                &[("version", &offer.version)],
            ),
            &tr(
                l,
                "{notes} Install it from Settings → Updates.",
                &[("notes", notes)],
            ),
            "settings",
        );
    }));
}

/// Starts the (new) binary with this process's arguments, told to wait until this process has
/// gone (its gateway port and single-instance name free), then quits as the tray's Quit does.
pub fn relaunch(app: &AppHandle) {
    let Some(exe) = EXE.get() else {
        return;
    };
    let mut args: Vec<String> = Vec::new();
    let mut given = std::env::args().skip(1);
    while let Some(a) = given.next() {
        if a == "--wait-pid" {
            given.next();
        } else if !a.starts_with("--wait-pid=") {
            args.push(a);
        }
    }
    args.extend(["--wait-pid".to_string(), std::process::id().to_string()]);
    match std::process::Command::new(exe).args(&args).spawn() {
        Ok(child) => {
            tracing::info!(pid = child.id(), "restarting into the updated binary");
            (app.state::<crate::state::Shell>().actions.quit)(app);
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot start the updated binary");
            let l = app.state::<crate::state::Shell>().locale().lang;
            crate::notify::show(
                &tr(l, "Baton was updated but could not restart", &[]),
                &tr(
                    l,
                    "Start Baton again to use the new version ({error}).",
                    &[("error", &e.to_string())],
                ),
            );
        }
    }
}

/// `--wait-pid PID`: a restart after an update waits (at most a minute) for the old process to
/// finish its in-flight requests and exit.
pub fn wait_for_exit(pid: u32) {
    let gone = || !std::path::Path::new(&format!("/proc/{pid}")).exists();
    if !cfg!(target_os = "linux") {
        std::thread::sleep(std::time::Duration::from_secs(3));
        return;
    }
    for _ in 0..600 {
        if gone() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    tracing::warn!(pid, "the previous Baton is still running after a minute");
}
