//! What a subscription CLI says about its login's limits without spending a request: Codex's
//! app server answers `account/rateLimits/read` (it asks the ChatGPT backend with the login it
//! holds — Baton never sees the credential) with the same 5-hour and weekly windows its answers'
//! headers carry. Claude reports its windows only with an answer (`rate_limit_event`), and the
//! Gemini CLI not at all.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::limits::windows::{length_id, length_label, Window, WindowStatus};

/// The whole exchange may take this long (the app server asks the backend once).
const READ_LIMIT: Duration = Duration::from_secs(10);

/// Codex's windows through `codex app-server` (JSON-RPC lines on stdin/stdout), started
/// directly (no shell) with `env` only; empty when it cannot tell.
pub fn codex_windows(path: &Path, env: &[(OsString, OsString)]) -> Vec<Window> {
    let Ok(mut child) = Command::new(path)
        .arg("app-server")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
    else {
        return Vec::new();
    };
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        let _ = child.wait();
        return Vec::new();
    };
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        // Bounded lines: a runaway program cannot fill memory.
        let mut r = BufReader::new(stdout.take(4 << 20));
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if tx.send(std::mem::take(&mut line)).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + READ_LIMIT;
    let mut send = |v: Value| writeln!(stdin, "{v}").and_then(|_| stdin.flush()).is_ok();
    let wait_for = |id: i64| -> Option<Value> {
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = rx.recv_timeout(left).ok()?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v.get("id").and_then(Value::as_i64) == Some(id) {
                return Some(v);
            }
        }
    };
    let init = json!({"id": 1, "method": "initialize",
        "params": {"clientInfo": {"name": "baton", "version": env!("CARGO_PKG_VERSION")}}});
    let answer = if send(init) && wait_for(1).is_some() {
        let asked = send(json!({"method": "initialized"}))
            && send(json!({"id": 2, "method": "account/rateLimits/read"}));
        if asked {
            wait_for(2)
        } else {
            None
        }
    } else {
        None
    };
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    answer.map(|v| from_app_server(&v)).unwrap_or_default()
}

/// The windows in an `account/rateLimits/read` answer (`result.rateLimits.primary` /
/// `secondary`: `usedPercent`, `windowDurationMins`, `resetsAt` in Unix seconds).
pub fn from_app_server(v: &Value) -> Vec<Window> {
    let Some(limits) = v.pointer("/result/rateLimits") else {
        return Vec::new();
    };
    ["primary", "secondary"]
        .iter()
        .filter_map(|slot| {
            let w = limits.get(slot)?;
            let pct = w.get("usedPercent")?.as_f64()?;
            let len = w
                .get("windowDurationMins")
                .and_then(Value::as_i64)
                .filter(|m| *m > 0)
                .map(|m| m * 60_000);
            let used = (pct / 100.0).clamp(0.0, 1.0);
            Some(Window {
                id: len.map(length_id).unwrap_or_else(|| slot.to_string()),
                label: len.map(length_label).unwrap_or_else(|| slot.to_string()),
                length_ms: len,
                used: Some(used),
                resets_at_ms: w
                    .get("resetsAt")
                    .and_then(Value::as_i64)
                    .map(|s| s.saturating_mul(1000)),
                status: WindowStatus::of_share(used),
                source: "codex-cli".into(),
            })
        })
        .collect()
}
