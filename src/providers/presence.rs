//! What this machine already has for each catalog provider: a key in the environment, an
//! installed (and logged-in) subscription CLI, or nothing yet (then where to sign up and what the
//! free tier gives). `baton keys` prints it; the UI's setup guide shows it.

use serde::Serialize;

use super::cli::{login_hint, login_state};
use crate::catalog::{Catalog, CatalogEntry};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KeyStatus {
    pub id: String,
    pub name: String,
    /// `key-found`, `no-key-needed`, `client-login` (the caller's own subscription is
    /// forwarded), `cli-logged-in`, `cli-logged-out`, `cli-installed`
    /// (login state unknown), `missing`.
    pub status: String,
    /// Where the key or executable was found.
    pub found: Option<String>,
    pub signup: String,
    pub free_tier: Option<String>,
    pub flags: Vec<String>,
    /// What to run to log a subscription CLI in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

fn free_tier(p: &CatalogEntry) -> Option<String> {
    let t = p.free_tier.as_ref()?;
    let mut parts = Vec::new();
    for (n, unit) in [
        (t.rpm, "req/min"),
        (t.rpd, "req/day"),
        (t.tpm, "tokens/min"),
        (t.tpd, "tokens/day"),
    ] {
        if let Some(n) = n {
            parts.push(format!("{n} {unit}"));
        }
    }
    if parts.is_empty() {
        t.note.clone()
    } else {
        Some(format!("{} (per {})", parts.join(", "), t.scope))
    }
}

/// Looks each catalog entry up in `env` (variables) and `path` (executable search).
pub fn check(
    catalog: &Catalog,
    env: &dyn Fn(&str) -> Option<String>,
    which: &dyn Fn(&str) -> Option<std::path::PathBuf>,
) -> Vec<KeyStatus> {
    catalog
        .providers
        .iter()
        .map(|p| {
            let mut hint = None;
            let (status, found) = if let Some(cli) = &p.cli {
                match which(cli) {
                    Some(path) => {
                        // `baton keys` asks as the user would in their shell: full environment.
                        let full: Vec<_> = std::env::vars_os().collect();
                        let state = login_state(cli, &path, &full, env);
                        if state == Some(false) {
                            hint = Some(login_hint(cli).to_string());
                        }
                        let status = match state {
                            Some(true) => "cli-logged-in",
                            Some(false) => "cli-logged-out",
                            None => "cli-installed",
                        };
                        (status, Some(path.display().to_string()))
                    }
                    None => ("missing", None),
                }
            } else if let Some(var) = &p.key_env {
                match env(var).filter(|v| !v.trim().is_empty()) {
                    Some(_) => ("key-found", Some(format!("${var}"))),
                    None => ("missing", None),
                }
            } else if p.credentials.as_deref() == Some("client") {
                ("client-login", None)
            } else {
                ("no-key-needed", None)
            };
            KeyStatus {
                id: p.id.clone(),
                name: p.name.clone(),
                status: status.into(),
                found,
                signup: p.signup.clone(),
                free_tier: free_tier(p),
                flags: p.flags.clone(),
                hint,
            }
        })
        .collect()
}

/// Finds an executable on `PATH` (no shell involved).
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                p.metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            }
            #[cfg(not(unix))]
            {
                p.is_file()
            }
        })
}
