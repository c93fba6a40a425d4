//! Fake subscription CLIs for the tests: copies of testkit's `fake-cli` binary named `claude`,
//! `codex` and `gemini` in a temp dir, each with its own state dir (modes and call log).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use std::sync::Arc;

use baton::clock::ManualClock;

use crate::common::Baton;

/// The `fake-cli` binary, built on first use if `cargo build --workspace --bins` has not run.
pub fn fake_cli_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let debug = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
    let bin = debug.join("fake-cli");
    if !bin.exists() {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "-p", "testkit", "--bin", "fake-cli"])
            .status()
            .unwrap();
        assert!(status.success(), "building fake-cli failed");
    }
    bin
}

pub struct FakeClis {
    pub dir: tempfile::TempDir,
}

impl FakeClis {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin = fake_cli_binary();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        for name in ["claude", "codex", "gemini"] {
            std::fs::copy(&bin, dir.path().join("bin").join(name)).unwrap();
            std::fs::create_dir_all(dir.path().join(name)).unwrap();
        }
        // Gemini CLI counts as logged in when its OAuth credentials exist.
        let gemini_home = dir.path().join("gemini-home/.gemini");
        std::fs::create_dir_all(&gemini_home).unwrap();
        std::fs::write(gemini_home.join("oauth_creds.json"), "{}").unwrap();
        FakeClis { dir }
    }

    pub fn exe(&self, cli: &str) -> String {
        self.dir.path().join("bin").join(cli).display().to_string()
    }

    /// One mode per call, the last one repeating.
    pub fn modes(&self, cli: &str, modes: &[&str]) {
        std::fs::write(self.dir.path().join(cli).join("modes"), modes.join("\n")).unwrap();
    }

    /// The invocations `cli` logged, oldest first.
    pub fn calls(&self, cli: &str) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join(cli).join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub async fn wait_calls(&self, cli: &str, n: usize) -> Vec<Value> {
        for _ in 0..200 {
            let c = self.calls(cli);
            if c.len() >= n {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{cli} was not called {n} times");
    }

    /// A provider entry for `cli` (`claude-cli`, …) at `priority`.
    pub fn provider(&self, cli: &str, priority: i64) -> Value {
        let (id, name, model) = match cli {
            "claude" => ("claude", "Claude Code", "sonnet"),
            "codex" => ("codex", "Codex", "gpt-5"),
            _ => ("gemini", "Gemini CLI", "gemini-2.5-pro"),
        };
        let mut p = json!({
            "id": id, "name": name, "kind": format!("{cli}-cli"), "executable": self.exe(cli),
            "models": [model], "priority": priority,
            "env": {},
            "timeouts": {"firstByteMs": 5000, "idleMs": 3000}
        });
        if cli == "gemini" {
            p["env"]["GEMINI_CLI_HOME"] =
                json!(self.dir.path().join("gemini-home").display().to_string());
        }
        p
    }
}

/// Whether a process is gone (or only a zombie nobody else can reap).
pub fn process_gone(pid: u64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .map(|rest| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
    }
}

/// Whether a process is gone entirely (not even a zombie).
pub fn process_reaped(pid: u64) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// 2026-11-29T23:00:00Z, when the fixtures were captured.
pub const NOW: i64 = 1_795_993_200_000;

pub fn ts(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

pub async fn start(
    _clis: &FakeClis,
    providers: Vec<Value>,
) -> (tempfile::TempDir, Baton, Arc<ManualClock>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": providers, "server": {"shutdownGraceMs": 300}}),
        Some(clock.clone()),
    )
    .await;
    // The start-up check (version, login) has run for every CLI provider.
    let ids: Vec<String> = providers_ids(&baton).await;
    for _ in 0..200 {
        let st = baton.admin_state().await;
        let done = st["providers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| ids.contains(&p["id"].as_str().unwrap().to_string()))
            .all(|p| !p["kind"].as_str().unwrap().ends_with("-cli") || !p["cli"].is_null());
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    (dir, baton, clock)
}

pub async fn providers_ids(b: &Baton) -> Vec<String> {
    b.admin_state().await["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

pub fn with_system(model: &str, system: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true},
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": text}]})
}
