//! `baton statusline`, as Claude Code's `statusLine` command runs it: its session's JSON on
//! stdin, one short line out — the provider serving that session (where Baton last served it),
//! its usage window, today's cost — and "Baton off", never an error, when Baton is not there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;

use crate::common::*;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

/// Runs the real binary with `stdin`; returns its exit code and stdout.
async fn statusline(args: Vec<String>, stdin: String) -> (i32, String) {
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .arg("statusline")
            .args(&args)
            .env_remove("BATON_ADMIN_KEY")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    })
    .await
    .unwrap()
}

fn session_turn(b: &Baton, session: &str) -> reqwest::RequestBuilder {
    b.messages(json!({"model": "auto", "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}]}))
        .header("x-claude-code-session-id", session)
}

#[tokio::test]
async fn the_status_line_names_the_sessions_provider_and_todays_cost() {
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let dir = tempfile::tempdir().unwrap();
    let priced = |id: &str, url: String, prio: i64| {
        json!({"id": id, "name": format!("Provider {}", id.to_uppercase()), "kind": "openai-compatible",
               "baseUrl": url, "priority": prio,
               "models": [{"id": format!("{id}-model"), "price": {"input": 1000, "output": 1000}}]})
    };
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [priced("a", a.base_url(), 1), priced("b", b.base_url(), 2)]}),
    )
    .await;
    // Session S1 is served by a; then a hits a long rate limit and S1 moves to b.
    assert_eq!(
        session_turn(&baton, "S1").send().await.unwrap().status(),
        200
    );
    a.script([Behavior::rate_limited(Some(3600))]);
    let r = session_turn(&baton, "S1").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    let args = vec![
        "--url".to_string(),
        baton.url.clone(),
        "--data-dir".to_string(),
        dir.path().display().to_string(),
    ];
    baton.handle.core.store.writer().flush().await;
    let input = |s: &str| {
        json!({"session_id": s, "model": {"id": "claude-opus-4-8"},
                                 "workspace": {"current_dir": "/tmp"}})
        .to_string()
    };
    let (code, line) = statusline(args.clone(), input("S1")).await;
    assert_eq!(code, 0);
    assert!(line.starts_with("Baton · Provider B"), "{line}");
    // Two requests of 11 + 7 tokens at $1,000 per million each way: $0.036.
    assert!(line.trim_end().ends_with("today $0.04"), "{line}");
    assert_eq!(line.lines().count(), 1, "{line}");
    // a is back (its cooldown cleared by hand): a new session would get a, S1 stays on b.
    let (st, v) = Admin(&baton)
        .send(reqwest::Method::DELETE, "/admin/cooldowns?provider=a", None)
        .await;
    assert_eq!(st, 200, "{v}");
    let (_, line) = statusline(args.clone(), input("never-seen")).await;
    assert!(line.starts_with("Baton · Provider A"), "{line}");
    let (_, line) = statusline(args.clone(), input("S1")).await;
    assert!(line.starts_with("Baton · Provider B"), "{line}");
    // Without --url it asks the listen address set in Settings (kept in the data directory).
    let port: u16 = baton.url.rsplit(':').next().unwrap().parse().unwrap();
    let (st, v) = Admin(&baton)
        .send(
            reqwest::Method::PUT,
            "/admin/settings",
            Some(json!({"listen": {"host": "127.0.0.1", "port": port}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let only_dir = vec!["--data-dir".to_string(), dir.path().display().to_string()];
    let (_, line) = statusline(only_dir, input("S1")).await;
    assert!(line.starts_with("Baton · Provider B"), "{line}");
    // Not Claude Code's JSON at all: the same, no error.
    let (code, line) = statusline(args.clone(), "not json".into()).await;
    assert_eq!(code, 0);
    assert!(line.starts_with("Baton · "), "{line}");
    baton.stop().await;

    // Baton is gone: a short line, exit 0, nothing on stdout but that line.
    let (code, line) = statusline(args, input("S1")).await;
    assert_eq!((code, line.as_str()), (0, "Baton off\n"));
}
