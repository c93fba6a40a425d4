//! `baton keys`: which catalog providers have a key in the environment, which subscription CLIs
//! are installed, and for the rest where to sign up and what their free tier gives.

use serde::Serialize;

use crate::catalog::{Catalog, CatalogEntry};

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KeyStatus {
    pub id: String,
    pub name: String,
    /// `key-found`, `no-key-needed`, `cli-logged-in`, `cli-logged-out`, `cli-installed`
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
                        let state = login_state(cli, &path, env);
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

fn login_hint(cli: &str) -> &'static str {
    match cli {
        "claude" => "run `claude` and log in with /login (or set ANTHROPIC_API_KEY)",
        "codex" => "run `codex login`",
        "gemini" => "run `gemini` once in a terminal to log in (or set GEMINI_API_KEY)",
        _ => "log the CLI in",
    }
}

/// Whether a subscription CLI is logged in: `claude auth status` (JSON `loggedIn`),
/// `codex login status`, Gemini's key variables or stored OAuth credentials. `None` when unknown.
fn login_state(
    cli: &str,
    path: &std::path::Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<bool> {
    match cli {
        "claude" => {
            let (_, out) = run_quietly(path, &["auth", "status"])?;
            serde_json::from_str::<serde_json::Value>(&out)
                .ok()?
                .get("loggedIn")?
                .as_bool()
        }
        "codex" => {
            let (ok, out) = run_quietly(path, &["login", "status"])?;
            Some(ok && !out.to_ascii_lowercase().contains("not logged in"))
        }
        "gemini" => {
            let key = [
                "GEMINI_API_KEY",
                "GOOGLE_API_KEY",
                "GOOGLE_GENAI_USE_VERTEXAI",
                "GOOGLE_GENAI_USE_GCA",
            ]
            .iter()
            .any(|v| env(v).is_some_and(|x| !x.trim().is_empty()));
            let creds = env("HOME")
                .map(|h| {
                    std::path::Path::new(&h)
                        .join(".gemini/oauth_creds.json")
                        .is_file()
                })
                .unwrap_or(false);
            Some(key || creds)
        }
        _ => None,
    }
}

/// Runs a status command directly (no shell), stdin closed, for at most ten seconds.
/// Returns (exit success, stdout + stderr).
fn run_quietly(path: &std::path::Path, args: &[&str]) -> Option<(bool, String)> {
    use std::process::{Command, Stdio};
    let mut child = Command::new(path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), text))
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

pub fn render(rows: &[KeyStatus], color: bool) -> String {
    let mut table = vec![vec![
        "PROVIDER".to_string(),
        "STATUS".into(),
        "FREE TIER".into(),
        "WHERE / SIGN UP".into(),
    ]];
    for r in rows {
        let where_ = match (&r.found, r.status.as_str()) {
            (Some(f), _) if r.hint.is_some() => {
                format!("{f} — {}", r.hint.clone().unwrap_or_default())
            }
            (Some(f), _) => f.clone(),
            (None, "missing") => r.signup.clone(),
            _ => String::new(),
        };
        let mut tier = r.free_tier.clone().unwrap_or_else(|| "-".into());
        if tier.chars().count() > 60 {
            tier = tier.chars().take(59).collect::<String>() + "…";
        }
        if !r.flags.is_empty() {
            tier.push_str(&format!(" [{}]", r.flags.join(", ")));
        }
        table.push(vec![r.id.clone(), r.status.clone(), tier, where_]);
    }
    let code = |row: usize| match rows[row].status.as_str() {
        "missing" => "90",
        "cli-logged-out" => "33",
        _ => "32",
    };
    super::table::render(
        &table,
        color.then_some((1, &code as &dyn Fn(usize) -> &'static str)),
    )
}
