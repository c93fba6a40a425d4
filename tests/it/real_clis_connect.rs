//! `baton connect` with the real Claude Code, Codex and Gemini CLI from npm (`scripts/test` installs them
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

/// The real Gemini CLI after `baton connect gemini-cli`, from its own files alone (in a folder
/// the user trusts, where it reads `~/.gemini/.env`): a tool task runs end to end — its
/// `list_directory` call comes back through Baton, Gemini CLI runs it, and the listing reaches
/// the upstream — on a Gemini provider (its body passed through) until the provider's daily
/// quota, then on the next provider without the user noticing; `--undo` gives back its files.
#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn gemini_cli_runs_a_tool_task_through_baton_and_fails_over_at_its_quota() {
    let dir = tempfile::tempdir().unwrap();
    let gem = testkit::FakeUpstream::start("gem").await;
    let up = testkit::FakeUpstream::start("up").await;
    gem.always(testkit::Behavior::Ok);
    up.always(testkit::Behavior::Ok);
    std::env::set_var("BT_REAL_GEMINI_KEY", "AIza-fake-upstream-key");
    let b = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "gem", "kind": "gemini", "baseUrl": gem.gemini_base_url(),
             "keys": [{"env": "BT_REAL_GEMINI_KEY"}], "models": ["gemini-2.5-flash"], "priority": 1},
            {"id": "up", "kind": "openai-compatible", "baseUrl": up.base_url(),
             "models": ["up-model"], "priority": 2}],
            "modelMap": {"gemini-*": "auto"}}),
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("marker-file.txt"), "hello").unwrap();
    let gemini_dir = home.path().join(".gemini");
    std::fs::create_dir_all(&gemini_dir).unwrap();
    let original = "{\n  \"ui\": {\"hideTips\": true}\n}\n";
    std::fs::write(gemini_dir.join("settings.json"), original).unwrap();
    // The user trusted the project folder (Gemini CLI asks the first time).
    std::fs::write(
        gemini_dir.join("trustedFolders.json"),
        json!({ work.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    connect(&b, dir.path(), home.path(), "gemini-cli", false).await;
    let (home_dir, work_dir) = (home.path().to_path_buf(), work.clone());
    let gemini = move |prompt: &'static str| {
        let (home_dir, work_dir) = (home_dir.clone(), work_dir.clone());
        async move {
            let args = ["-m", "gemini-2.5-pro", "-p", prompt];
            run_cli(bin("GEMINI_BIN"), &args, &home_dir, &work_dir).await
        }
    };

    gem.script([testkit::Behavior::ToolCall {
        name: "list_directory".into(),
        arguments: r#"{"dir_path":"."}"#.into(),
    }]);
    let (ok, stdout, stderr) = gemini("what files are here").await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(gem.refusals().is_empty(), "{:?}", gem.refusals());
    let sent: String = gem.received().iter().map(|r| r.body.to_string()).collect();
    assert!(
        sent.contains("functionResponse") && sent.contains("marker-file.txt (5 bytes)"),
        "Gemini CLI ran the call and its listing went back: {sent}"
    );
    assert!(stdout.contains("gem: "), "{stdout}\n{stderr}");
    let gem_hits = gem.hits();

    // The daily quota: the turn is served by the next provider, once asked of the capped one.
    gem.script([testkit::behavior_from_name("gemini-daily-quota").unwrap()]);
    let (ok, stdout, stderr) = gemini("say hi").await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("up: say hi"), "{stdout}\n{stderr}");
    assert_eq!(
        gem.hits(),
        gem_hits + 1,
        "the capped provider was asked once"
    );
    // While the quota lasts, turns go straight to the fallback.
    let (ok, stdout, _) = gemini("say hi again").await;
    assert!(ok && stdout.contains("up: say hi again"), "{stdout}");
    assert_eq!(gem.hits(), gem_hits + 1);
    let state = b.admin_state().await.to_string();
    assert!(!state.contains("AIza-fake-upstream-key"));

    connect(&b, dir.path(), home.path(), "gemini-cli", true).await;
    assert_eq!(
        std::fs::read_to_string(gemini_dir.join("settings.json")).unwrap(),
        original
    );
    assert!(
        !gemini_dir.join(".env").exists(),
        "Baton created it; undo took it away"
    );
    b.stop().await;
}

/// The real Gemini CLI's `google_web_search` on a translated route: the main model (an
/// OpenAI-compatible provider) calls it, Gemini CLI asks its `web-search` model with Google
/// Search grounding, Baton runs that search through its service (the fake's SearXNG) and answers
/// with `groundingMetadata`, which Gemini CLI turns into its "Sources:" list for the model.
#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn gemini_clis_web_search_is_grounded_by_batons_search_on_another_provider() {
    let dir = tempfile::tempdir().unwrap();
    let up = testkit::FakeUpstream::start("up").await;
    up.always(testkit::Behavior::Auto);
    let b = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": up.base_url(),
            "models": ["up-model"]}], "modelMap": {"gemini-*": "up"}}),
    )
    .await;
    let (s, v) = crate::common::Admin(&b)
        .send(
            reqwest::Method::PUT,
            "/admin/web-search",
            Some(json!({"backend": "searxng", "url": format!("http://{}", up.addr)})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let gemini_dir = home.path().join(".gemini");
    std::fs::create_dir_all(&gemini_dir).unwrap();
    std::fs::write(
        gemini_dir.join("trustedFolders.json"),
        json!({ work.display().to_string(): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    connect(&b, dir.path(), home.path(), "gemini-cli", false).await;
    up.script([testkit::Behavior::ToolCall {
        name: "google_web_search".into(),
        arguments: r#"{"query":"baton gateway"}"#.into(),
    }]);
    let args = [
        "-m",
        "gemini-2.5-pro",
        "-p",
        "search the web for baton gateway",
    ];
    let (ok, stdout, stderr) = run_cli(bin("GEMINI_BIN"), &args, home.path(), &work).await;
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(up.searches(), ["baton gateway"], "{stdout}\n{stderr}");
    let sent = up.received().last().unwrap().body.to_string();
    assert!(
        sent.contains("Web search results for")
            && sent.contains("Sources:")
            && sent.contains("https://docs.example.org/baton-gateway"),
        "Gemini CLI read Baton's grounding as Google's: {sent}"
    );
    b.stop().await;
}
