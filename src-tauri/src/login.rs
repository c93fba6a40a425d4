//! Start at login: what the entry runs (this binary with this setup), and whether the entry
//! there is this setup's.

use std::path::{Path, PathBuf};

use tauri::{AppHandle, Manager};
use tauri_plugin_autostart::ManagerExt;

use crate::state::Shell;

/// What start-at-login runs: this app with the same setup it was started with (config file and
/// data directory), as absolute paths — a bare binary would start empty, on another data
/// directory, with a new gateway key. The address is not on the line: it is kept in the data
/// directory (`--host`/`--port` given to the app are stored there, and Settings changes it), so
/// a change in Settings needs no new autostart entry. Quoted for the desktop entry's Exec line,
/// which the autostart crate joins with spaces.
pub(crate) fn autostart_args(
    opts: &baton::serve::ServeOptions,
    data_dir: &Path,
) -> Vec<&'static str> {
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
