//! What a service is, to each platform's manager: the command it runs ([`Spec`]) and what a
//! manager does with it ([`Manager`]). A leaf: `service/mod.rs` picks the manager and the
//! managers implement this.

use std::path::{Path, PathBuf};

/// What the service runs: `baton serve` with absolute paths, fixed at install time (a service
/// starts without the shell's working directory or exports).
#[derive(Debug, Clone)]
pub struct Spec {
    pub exe: PathBuf,
    pub config: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub host: Option<String>,
    pub port: Option<u16>,
    /// Environment variables for the service, one `NAME=value` per line (systemd's
    /// `EnvironmentFile`): where keys kept in environment variables go.
    pub env_file: Option<PathBuf>,
}

impl Spec {
    /// The command line after the executable.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["serve".to_string()];
        if let Some(c) = &self.config {
            a.extend(["--config".into(), c.display().to_string()]);
        }
        a.extend(["--data-dir".into(), self.data_dir.display().to_string()]);
        if let Some(h) = &self.host {
            a.extend(["--host".into(), h.clone()]);
        }
        if let Some(p) = self.port {
            a.extend(["--port".into(), p.to_string()]);
        }
        a
    }
}

/// One service manager: where its definition lives, its text, and how to (un)register it.
pub(super) trait Manager {
    fn name(&self) -> &'static str;
    fn path(&self) -> Result<PathBuf, String>;
    fn render(&self, spec: &Spec) -> String;
    /// Registers the written definition; starts it unless `no_start`.
    fn enable(&self, path: &Path, no_start: bool) -> Result<(), String>;
    /// Stops and unregisters (the definition file is removed by the caller).
    fn disable(&self, path: &Path) -> Result<(), String>;
    /// What the manager says: (registered to start, running), or why it cannot say.
    fn state(&self, path: &Path) -> Result<(bool, bool), String>;
    /// Whether the definition can name an environment file (`--env-file`).
    fn takes_env_file(&self) -> bool {
        true
    }
    /// How to read the service's log.
    fn logs_hint(&self) -> String;
    /// The command line an installed definition runs, for `status`.
    fn command_line(&self, text: &str) -> Option<String>;
}
