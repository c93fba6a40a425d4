//! What Baton knows about an installed CLI: where it is, its version and whether it is logged
//! in. Checked at start-up and again every few minutes, never on the request path.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::state::CliStatus;
use crate::config::ProviderConfig;

/// What to run to log `program` in.
pub fn login_hint(program: &str) -> &'static str {
    super::program::running(program)
        .and_then(|(k, _)| k.spec().cli.as_ref().map(|c| c.login_hint))
        .unwrap_or("log the CLI in")
}

/// Only where a CLI provider's executable is, without running anything (what the Add form
/// shows until the user agrees to run it).
pub fn locate(config: &ProviderConfig, now_ms: i64) -> CliStatus {
    let Some(program) = config.kind.cli_program() else {
        return CliStatus::default();
    };
    let name = config.executable.as_deref().unwrap_or(program);
    let found = super::exec::resolve_executable(name, std::env::var_os("PATH").as_deref());
    CliStatus {
        checked_at_ms: now_ms,
        problem: found.as_ref().err().cloned(),
        executable: found.ok(),
        ..CliStatus::default()
    }
}

/// Resolves, versions and login-checks one CLI provider (blocking: run it off the runtime).
pub fn check(
    config: &ProviderConfig,
    vars: &[(String, crate::providers::Secret)],
    now_ms: i64,
) -> CliStatus {
    let kind = config.kind;
    let Some(program) = kind.cli_program() else {
        return CliStatus::default();
    };
    let mut st = CliStatus {
        checked_at_ms: now_ms,
        ..CliStatus::default()
    };
    let name = config.executable.as_deref().unwrap_or(program);
    let path = match super::exec::resolve_executable(name, std::env::var_os("PATH").as_deref()) {
        Ok(p) => p,
        Err(e) => {
            st.problem = Some(e);
            return st;
        }
    };
    let env = super::exec::environment(kind, vars, &|k| std::env::var_os(k));
    st.version = run_quietly(&path, &["--version"], &env)
        .and_then(|(_, out)| out.lines().next().map(|l| l.trim().to_string()))
        .filter(|v| !v.is_empty());
    let lookup = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .and_then(|(_, v)| v.to_str().map(str::to_string))
    };
    st.logged_in = login_state(program, &path, &env, &lookup);
    if st.logged_in == Some(false) {
        st.problem = Some(format!("not logged in: {}", login_hint(program)));
    }
    if st.logged_in == Some(true) {
        if let Some(p) = super::program::of(kind) {
            st.windows = p.windows(&path, &env);
        }
    }
    st.executable = Some(path);
    st
}

/// Whether the subscription CLI `program` is logged in, as its kind checks it. `None` when
/// unknown.
pub fn login_state(
    program: &str,
    path: &Path,
    env: &[(OsString, OsString)],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Option<bool> {
    let (_, p) = super::program::running(program)?;
    p.logged_in(path, env, lookup)
}

/// Runs a status command directly (no shell) with `env` only, stdin closed, for at most ten
/// seconds. Returns (exit success, stdout + stderr).
pub fn run_quietly(
    path: &Path,
    args: &[&str],
    env: &[(OsString, OsString)],
) -> Option<(bool, String)> {
    let mut cmd = Command::new(path);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().ok()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
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
