//! `baton service install|uninstall|status`: the headless gateway as a per-user background
//! service that starts with the user's session (or at boot, with lingering) and restarts when it
//! fails. One file per service manager: a systemd user unit (Linux, tested here), a launchd
//! agent (macOS) and a Task Scheduler task (Windows), the last two written and unit-tested as
//! text but not run on this project's machines.

mod launchd;
mod spec;
mod systemd;
mod windows;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::json;

use super::commands::CmdResult;
use spec::Manager;
pub use spec::Spec;

/// The options of `baton service install`.
#[derive(clap::Args)]
pub struct InstallOptions {
    /// JSON configuration file for the service (kept as an absolute path).
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Data directory [default: the platform data dir, e.g. ~/.local/share/baton].
    #[arg(long, env = "BATON_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on (overrides server.host).
    #[arg(long)]
    pub host: Option<String>,
    /// Port to listen on (overrides server.port).
    #[arg(long)]
    pub port: Option<u16>,
    /// A file of NAME=value lines the service reads for its environment: where keys kept in
    /// environment variables go, since a service does not run your shell's exports (systemd).
    #[arg(long, value_name = "FILE")]
    pub env_file: Option<PathBuf>,
    /// Register it to start at the next login without starting it now.
    #[arg(long)]
    pub no_start: bool,
    /// Print the definition and where it would go; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

fn manager() -> Box<dyn Manager> {
    if cfg!(target_os = "macos") {
        Box::new(launchd::Launchd)
    } else if cfg!(windows) {
        Box::new(windows::TaskScheduler)
    } else {
        Box::new(systemd::Systemd)
    }
}

fn absolute(p: &Path) -> Result<PathBuf, String> {
    std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()))
}

/// Checks everything the service will need before anything is written: the configuration
/// loads, the env file exists, and paths are absolute.
fn spec_of(o: &InstallOptions, m: &dyn Manager) -> Result<Spec, String> {
    if o.env_file.is_some() && !m.takes_env_file() {
        return Err(format!(
            "--env-file works with systemd only; a {} cannot read one: paste the keys into Baton instead (they go to the credential store)",
            m.name()
        ));
    }
    let config = o.config.as_deref().map(absolute).transpose()?;
    if let Some(c) = &config {
        if !c.is_file() {
            return Err(format!("--config {}: no such file", c.display()));
        }
    }
    let data_dir = absolute(&o.data_dir.clone().unwrap_or_else(baton::default_data_dir))?;
    let env_file = o.env_file.as_deref().map(absolute).transpose()?;
    if let Some(f) = &env_file {
        if !f.is_file() {
            return Err(format!("--env-file {}: no such file", f.display()));
        }
    }
    // The same checks `baton serve` makes at start: a unit that cannot start is not installed.
    baton::serve::ServeOptions {
        config: config.clone(),
        data_dir: Some(data_dir.clone()),
        host: o.host.clone(),
        port: o.port,
    }
    .load()
    .map_err(|e| format!("the service would not start: {e}"))?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot tell where this baton binary is: {e}"))?;
    Ok(Spec {
        exe,
        config,
        data_dir,
        host: o.host.clone(),
        port: o.port,
        env_file,
    })
}

/// Variables named in `NAME=value` lines of an env file (comments and blanks skipped).
fn env_file_names(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.trim_start_matches("export ").split_once('='))
        .map(|(n, _)| n.trim().to_string())
        .collect()
}

/// Keys the service will not find: providers' keys read from environment variables that no env
/// file gives (a service does not run the shell's exports). Names only, never values.
fn missing_env(spec: &Spec) -> Vec<String> {
    let mut providers = Vec::new();
    if let Some(c) = &spec.config {
        if let Ok(f) = baton::config::load_file(c) {
            providers.extend(f.providers);
        }
    }
    if let Ok(live) = super::commands::live_providers(&spec.data_dir) {
        providers.extend(live);
    }
    // `baton serve` reads ~/.config/baton/env at every start, the service's too.
    let mut given = spec
        .env_file
        .as_deref()
        .map(env_file_names)
        .unwrap_or_default();
    given.extend(baton::config::env_file::names());
    let mut names: Vec<String> = Vec::new();
    for p in providers.iter().filter(|p| p.enabled) {
        for k in &p.keys {
            let from_env = k.stored.is_none() && !k.env.is_empty();
            if from_env && !given.contains(&k.env) && !names.contains(&k.env) {
                names.push(k.env.clone());
            }
        }
    }
    names
}

/// Writes `text` to `path` through a temporary file in the same directory, so a crash never
/// leaves half a unit behind.
fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let dir = path
        .parent()
        .ok_or_else(|| format!("{}: no parent directory", path.display()))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".baton-service-{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

pub fn install(o: InstallOptions) -> CmdResult {
    let m = manager();
    let spec = spec_of(&o, m.as_ref())?;
    let path = m.path()?;
    let text = m.render(&spec);
    if o.dry_run {
        outln!(
            "# {} ({}), not written (--dry-run)",
            path.display(),
            m.name()
        );
        out!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(w) = baton::api::settings::build_dir_warning(&spec.exe, baton::i18n::Lang::En) {
        eprintln!("warning: {w}");
    }
    #[cfg(unix)]
    if let Some(f) = &spec.env_file {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(f)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o077 != 0 {
            eprintln!(
                "warning: {} holds keys and other users can read it: chmod 600 {}",
                f.display(),
                f.display()
            );
        }
    }
    let missing = missing_env(&spec);
    if !missing.is_empty() {
        eprintln!(
            "warning: the service does not run your shell's exports, so these keys will be missing: {}. Put NAME=value lines in {} (read at every start; chmod 600) or in a file given with --env-file, or paste the keys into Baton (they go to the credential store).",
            missing.join(", "),
            baton::config::env_file::path().map_or("~/.config/baton/env".into(), |p| p.display().to_string())
        );
    }
    write_atomically(&path, &text)?;
    outln!("wrote {} ({})", path.display(), m.name());
    m.enable(&path, o.no_start).map_err(|e| {
        format!(
            "{e}\nThe service definition is written; once the service manager can be reached, run `baton service install` again (or remove it with `baton service uninstall`)."
        )
    })?;
    if o.no_start {
        outln!("registered; it starts at your next login");
    } else {
        outln!(
            "started; it starts at every login and restarts if it fails. Logs: {}",
            m.logs_hint()
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn uninstall() -> CmdResult {
    let m = manager();
    let path = m.path()?;
    if !path.exists() {
        outln!(
            "no Baton service is installed ({} does not exist)",
            path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    // Stop it first; a manager that cannot be reached does not keep the file from going.
    if let Err(e) = m.disable(&path) {
        eprintln!("warning: {e}");
    }
    std::fs::remove_file(&path).map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
    outln!(
        "removed {}; Baton's data directory and configuration are kept",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `baton service status`: 0 when installed and running, 3 when installed but not running
/// (systemd's convention for `status`), 4 when not installed.
pub fn status(json_out: bool) -> CmdResult {
    let m = manager();
    let path = m.path()?;
    let installed = path.exists();
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let command = installed.then(|| m.command_line(&text)).flatten();
    let (enabled, active, note) = if installed {
        match m.state(&path) {
            Ok((e, a)) => (Some(e), Some(a), None),
            Err(e) => (None, None, Some(e)),
        }
    } else {
        (None, None, None)
    };
    if json_out {
        let v = json!({
            "manager": m.name(),
            "path": path.display().to_string(),
            "installed": installed,
            "enabled": enabled,
            "active": active,
            "command": command,
            "note": note,
        });
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else if !installed {
        outln!(
            "not installed ({} does not exist); add it with `baton service install`",
            path.display()
        );
    } else {
        outln!("installed: {} ({})", path.display(), m.name());
        if let Some(c) = &command {
            outln!("runs:      {c}");
        }
        match (enabled, active, &note) {
            (Some(e), Some(a), _) => {
                outln!("at login:  {}", if e { "yes" } else { "no" });
                outln!("running:   {}", if a { "yes" } else { "no" });
            }
            (_, _, Some(n)) => outln!("state:     unknown ({n})"),
            _ => {}
        }
        outln!("logs:      {}", m.logs_hint());
    }
    Ok(match (installed, active) {
        (false, _) => ExitCode::from(4),
        (true, Some(true)) => ExitCode::SUCCESS,
        _ => ExitCode::from(3),
    })
}
