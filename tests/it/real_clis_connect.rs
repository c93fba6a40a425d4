//! `baton connect` with the real Claude Code and Codex from npm (`scripts/test` installs them
//! and runs these ignored tests): after `connect`, each reaches Baton from its own config file
//! alone (no ANTHROPIC_*/OPENAI_*/BATON_* variable in its environment), and after `--undo` the
//! files it had are byte-identical to before.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::common::Baton;

fn bin(var: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) => PathBuf::from(p),
        None => panic!("{var} is not set: run through scripts/test, which installs the real CLIs"),
    }
}

async fn gateway(dir: &Path) -> (Baton, testkit::FakeUpstream) {
    let up = testkit::FakeUpstream::start("up").await;
    up.always(testkit::Behavior::Ok);
    let b = Baton::start(
        dir,
        json!({"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": up.base_url(),
            "models": ["up-model"]}],
            "modelMap": {"claude-*": "up", "gpt-*": "up", "codex-*": "up"}}),
    )
    .await;
    (b, up)
}

/// `baton connect CLIENT --yes` (or `--undo`) for this Baton, as the user whose home is `home`.
async fn connect(b: &Baton, data: &Path, home: &Path, client: &str, undo: bool) {
    let extra: &[&str] = if undo {
        &["--yes", "--undo"]
    } else {
        &["--yes"]
    };
    let (code, out, err) = crate::connect::connect_cli(b, data, home, client, extra).await;
    assert_eq!(code, 0, "{out}{err}");
}

/// Runs a real CLI with only PATH, HOME and switches that keep it off the network; no variable
/// that says where the model is or what key to send.
async fn run_cli(exe: PathBuf, args: &[&str], home: &Path, work: &Path) -> (bool, String, String) {
    let out = tokio::process::Command::new(exe)
        .args(args)
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("SHELL", "/bin/bash")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("the CLI finished")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn claude_code_reaches_baton_after_connect_and_undo_gives_back_its_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (b, up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let settings = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let original =
        "{\n    \"includeCoAuthoredBy\": false,\n    \"env\": {\"MY_TOOL_FLAG\": \"1\"}\n}\n";
    std::fs::write(&settings, original).unwrap();

    connect(&b, dir.path(), home.path(), "claude-code", false).await;
    let (ok, stdout, stderr) = run_cli(
        bin("CLAUDE_BIN"),
        &["-p", "say hi", "--output-format", "json"],
        home.path(),
        &work,
    )
    .await;
    assert!(ok, "{stdout}\n{stderr}");
    let result: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["result"], "up: say hi", "{result}");
    assert!(
        !up.received().is_empty(),
        "Claude Code's turn reached the upstream through Baton"
    );

    connect(&b, dir.path(), home.path(), "claude-code", true).await;
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), original);
    b.stop().await;
}

#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn codex_reaches_baton_after_connect_and_undo_gives_back_its_config() {
    let dir = tempfile::tempdir().unwrap();
    let (b, up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let config = home.path().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let original = "# my Codex settings\napproval_policy = \"never\"   # no prompts in scripts\n\n[history]\npersistence = \"none\"\n";
    std::fs::write(&config, original).unwrap();

    connect(&b, dir.path(), home.path(), "codex", false).await;
    let (ok, stdout, stderr) = run_cli(
        bin("CODEX_BIN"),
        &["exec", "--skip-git-repo-check", "say hi"],
        home.path(),
        &work,
    )
    .await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("up: say hi"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
    assert!(!up.received().is_empty());

    connect(&b, dir.path(), home.path(), "codex", true).await;
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
    b.stop().await;
}
