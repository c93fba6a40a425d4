//! Baton's exact invocation against the real CLIs from npm (`scripts/test` installs them, sets
//! CLAUDE_BIN, CODEX_BIN, GEMINI_BIN and runs these ignored tests): with an empty HOME and no login, each must get past
//! its argument parser and end in its "no auth" outcome, which Baton classifies as auth — never
//! in an unknown-option error. And the real Codex as a client of Baton's Responses API.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton::canonical::{ChatRequest, Message, Part, Role};
use baton::config::ProviderKind;
use baton::limits::{ErrorClass, ResetContext};
use baton::providers::cli::{self, run, CliItem};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The real CLI named by `var` (`scripts/test` installs them and sets it).
fn bin(var: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) => PathBuf::from(p),
        None => panic!("{var} is not set: run through scripts/test, which installs the real CLIs"),
    }
}

/// Answers every HTTP request with OpenAI's 401 (a key that does not work).
async fn unauthorized_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let _ = tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await;
                let body = r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
                let resp = format!("HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = s.write_all(resp.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/v1")
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        system: vec!["--help; be brief".into()],
        messages: vec![Message {
            role: Role::User,
            content: vec![Part::Text("-x say hi".into())],
            name: None,
        }],
        ..ChatRequest::default()
    }
}

/// Runs `exe` exactly as Baton would and returns how the call ended.
async fn run_like_baton(
    kind: ProviderKind,
    exe: PathBuf,
    model: &str,
    extra: BTreeMap<String, String>,
) -> baton::limits::Classified {
    let req = request();
    let (stdin, system) = cli::stdin_and_system(kind, &req);
    let spec = run::Spawn {
        kind,
        program: cli::resolve_executable(exe.to_str().unwrap(), None).expect("a runnable CLI"),
        args: cli::command_args(kind, model, system.as_deref()),
        env: cli::environment(kind, &vars(&extra), &|k| std::env::var_os(k)),
        stdin,
        ctx: ResetContext::new(baton::clock::unix_ms()),
    };
    let mut call = run::start(spec, Arc::new(run::CliProcesses::default())).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(90), async {
        match call.next().await {
            Some(CliItem::Failed(c)) => c,
            Some(other) => panic!("{kind:?} answered without a login: {other:?}"),
            None => panic!("{kind:?} ended without a verdict"),
        }
    })
    .await;
    ended.unwrap_or_else(|_| panic!("{kind:?} neither answered nor failed within 90 s"))
}

fn home(extra: &mut BTreeMap<String, String>) -> tempfile::TempDir {
    let h = tempfile::tempdir().unwrap();
    extra.insert("HOME".into(), h.path().display().to_string());
    h
}

fn assert_auth(kind: ProviderKind, c: &baton::limits::Classified) {
    let lower = c.reason.to_ascii_lowercase();
    for parser_error in [
        "unknown option",
        "unexpected argument",
        "unknown argument",
        "not enough arguments",
        "usage:",
    ] {
        assert!(
            !lower.contains(parser_error),
            "{kind:?} rejected Baton's arguments: {}",
            c.reason
        );
    }
    assert_eq!(c.class, ErrorClass::Auth, "{kind:?}: {}", c.reason);
}

#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn claude_accepts_batons_invocation() {
    let exe = bin("CLAUDE_BIN");
    let mut extra = BTreeMap::new();
    let _h = home(&mut extra);
    let c = run_like_baton(
        baton::providers::cli::claude::KIND,
        exe.clone(),
        "sonnet",
        extra.clone(),
    )
    .await;
    assert_auth(baton::providers::cli::claude::KIND, &c);
    assert!(c.reason.contains("Not logged in"), "{}", c.reason);
    status_says_logged_out(baton::providers::cli::claude::KIND, exe, extra, "/login");
}

#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn codex_accepts_batons_invocation() {
    let exe = bin("CODEX_BIN");
    let mut extra = BTreeMap::new();
    let h = home(&mut extra);
    // No network here: point Codex at a local server that refuses the (dummy) key.
    let base = unauthorized_server().await;
    std::fs::create_dir_all(h.path().join(".codex")).unwrap();
    std::fs::write(
        h.path().join(".codex/config.toml"),
        format!("model_provider = \"local\"\n[model_providers.local]\nname = \"local\"\nbase_url = \"{base}\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n"),
    )
    .unwrap();
    let mut with_key = extra.clone();
    with_key.insert("OPENAI_API_KEY".into(), "sk-test-not-a-real-key".into());
    let c = run_like_baton(
        baton::providers::cli::codex::KIND,
        exe.clone(),
        "gpt-5",
        with_key,
    )
    .await;
    assert_auth(baton::providers::cli::codex::KIND, &c);
    status_says_logged_out(
        baton::providers::cli::codex::KIND,
        exe,
        extra,
        "codex login",
    );
}

#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn gemini_accepts_batons_invocation() {
    let exe = bin("GEMINI_BIN");
    let mut extra = BTreeMap::new();
    let _h = home(&mut extra);
    let c = run_like_baton(
        baton::providers::cli::gemini::KIND,
        exe.clone(),
        "gemini-2.5-pro",
        extra.clone(),
    )
    .await;
    assert_auth(baton::providers::cli::gemini::KIND, &c);
    status_says_logged_out(baton::providers::cli::gemini::KIND, exe, extra, "gemini");
}

/// A CLI's extra variables as Baton passes them.
fn vars(extra: &BTreeMap<String, String>) -> Vec<(String, baton::providers::Secret)> {
    extra
        .iter()
        .map(|(k, v)| (k.clone(), baton::providers::Secret::new(v.clone())))
        .collect()
}

/// Baton's start-up check finds the version and that nobody is logged in.
fn status_says_logged_out(
    kind: ProviderKind,
    exe: PathBuf,
    env: BTreeMap<String, String>,
    hint: &str,
) {
    let vars = vars(&env);
    let config = baton::config::ProviderConfig {
        proxy_login: None,
        kind,
        executable: Some(exe.display().to_string()),
        env: env
            .into_iter()
            .map(|(k, v)| (k, baton::config::HeaderValue::Text(v)))
            .collect(),
        ..serde_json::from_value(
            serde_json::json!({"id": "x", "kind": kind.as_str(), "models": ["m"]}),
        )
        .unwrap()
    };
    let st = cli::check_status(&config, &vars, 0);
    assert!(
        st.version
            .as_deref()
            .is_some_and(|v| v.chars().any(|c| c.is_ascii_digit())),
        "{st:?}"
    );
    assert_eq!(st.logged_in, Some(false), "{st:?}");
    assert!(
        st.problem.as_deref().unwrap_or_default().contains(hint),
        "{st:?}"
    );
}

/// The real Codex as a *client*: a `model_providers` entry with `wire_api = "responses"` and the
/// gateway key in `env_key` (the Connect screen's set-up), its own model name mapped to an
/// OpenAI-compatible fake. `codex exec` must print the fake's answer, with nothing refused.
#[tokio::test]
#[ignore = "needs the real CLIs from npm: scripts/test runs it with --ignored"]
async fn codex_runs_through_batons_responses_api() {
    let up = testkit::FakeUpstream::start("up").await;
    up.always(testkit::Behavior::Ok);
    let dir = tempfile::tempdir().unwrap();
    let baton = crate::common::Baton::start(
        dir.path(),
        serde_json::json!({"providers": [{"id": "up", "kind": "openai-compatible",
            "baseUrl": up.base_url(), "models": ["up-model"]}],
            "modelMap": {"gpt-*": "up", "codex-*": "up"}}),
    )
    .await;
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join("codex");
    let work = home.path().join("work");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model_provider = \"baton\"\n\n[model_providers.baton]\nname = \"Baton\"\nbase_url = \"{}/v1\"\nenv_key = \"BATON_KEY\"\nwire_api = \"responses\"\n",
            baton.url
        ),
    )
    .unwrap();
    let out = tokio::process::Command::new(bin("CODEX_BIN"))
        .args(["exec", "--skip-git-repo-check", "say hi"])
        .current_dir(&work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("CODEX_HOME", &codex_home)
        .env("BATON_KEY", &baton.key)
        .env("SHELL", "/bin/bash")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("codex exec finished")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("up: say hi"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("ERROR"), "{stderr}");
    // Codex's turn arrived whole: its instructions as system text, then the prompt. (With a
    // fresh HOME this Codex sends no tools; tool calls are covered with the SDK.)
    let got = up.received();
    let turn = &got.last().expect("Codex called the upstream").body;
    assert_eq!(turn["model"], "up-model");
    assert_eq!(turn["messages"][0]["role"], "system");
    let last = turn["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], "say hi");
    baton.stop().await;
}
