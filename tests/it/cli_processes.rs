//! Subscription-CLI processes: hung and stalled CLIs killed with their whole group, client
//! disconnects and shutdown, huge output, refused shell wrappers, and `baton probe` running CLIs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::cli;

use std::time::{Duration, Instant};

use crate::common::*;
use cli::*;
use serde_json::{json, Value};

#[tokio::test]
async fn hung_clis_are_killed_and_the_request_moves_on() {
    let clis = FakeClis::new();
    clis.modes("claude", &["hang"]);
    clis.modes("codex", &["netfail"]);
    let mut claude = clis.provider("claude", 1);
    claude["timeouts"]["firstByteMs"] = json!(600);
    let (_d, baton, _c) = start(
        &clis,
        vec![
            claude,
            clis.provider("codex", 2),
            clis.provider("gemini", 3),
        ],
    )
    .await;
    let started = Instant::now();
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "gemini");
    // Codex "waiting for network" is given up at once, not after its 5 s timeout.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    for cli in ["claude", "codex"] {
        let call = &clis.calls(cli)[0];
        let pid = call["pid"].as_u64().unwrap();
        let grandchild = call["grandchild"].as_u64().unwrap();
        assert!(
            eventually(5, || process_reaped(pid) && process_gone(grandchild)).await,
            "{cli}"
        );
    }
    let log = baton.log().await;
    let classes: Vec<&str> = log[0].attempts.iter().map(|a| a.class.as_str()).collect();
    assert_eq!(classes, ["transient", "transient", "ok"]);
    baton.stop().await;
}

#[tokio::test]
async fn a_cli_that_stalls_mid_answer_ends_the_stream_with_an_error() {
    let clis = FakeClis::new();
    clis.modes("claude", &["print-then-hang"]);
    let mut claude = clis.provider("claude", 1);
    claude["timeouts"]["idleMs"] = json!(500);
    let (_d, baton, _c) = start(&clis, vec![claude]).await;
    let r = baton
        .post(chat_body("auto", "hi", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body = r.text().await.unwrap();
    let events = sse_data(&body);
    assert_eq!(stream_text(&events), "The first words");
    assert!(body.contains("\"error\""), "explicit error event: {body}");
    let call = &clis.calls("claude")[0];
    let pid = call["pid"].as_u64().unwrap();
    assert!(eventually(5, || process_reaped(pid)).await);
    baton.stop().await;
}

#[tokio::test]
async fn client_disconnect_and_shutdown_kill_the_cli() {
    let clis = FakeClis::new();
    clis.modes("claude", &["print-then-hang", "hang"]);
    let (_d, baton, _c) = start(&clis, vec![clis.provider("claude", 1)]).await;
    let mut r = baton
        .post(chat_body("auto", "hi", true))
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("The first words"));
    drop(r);
    let call = clis.wait_calls("claude", 1).await[0].clone();
    let (pid, grandchild) = (
        call["pid"].as_u64().unwrap(),
        call["grandchild"].as_u64().unwrap(),
    );
    assert!(
        eventually(5, || process_reaped(pid) && process_gone(grandchild)).await,
        "client gone: CLI killed"
    );

    // A call still running at shutdown is killed with the gateway.
    let post = baton.post(chat_body("auto", "hi", false));
    let pending = tokio::spawn(async move { post.send().await });
    let call = clis.wait_calls("claude", 2).await[1].clone();
    let pid = call["pid"].as_u64().unwrap();
    assert!(!process_gone(pid));
    baton.stop().await;
    assert!(
        eventually(5, || process_gone(pid)).await,
        "shutdown: CLI killed"
    );
    let _ = pending.await;
}

#[tokio::test]
async fn huge_answers_pass_through() {
    let clis = FakeClis::new();
    clis.modes("claude", &["huge"]);
    let (_d, baton, _c) = start(&clis, vec![clis.provider("claude", 1)]).await;
    let r = baton.chat("auto", "hi").await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .len(),
        4096 * 512
    );
    let r = baton
        .post(chat_body("auto", "hi", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(stream_text(&events).len(), 4096 * 512);
    baton.stop().await;
}

#[tokio::test]
async fn shell_wrappers_are_refused() {
    let clis = FakeClis::new();
    // Named as the CLI (only the CLI may be configured), but a shell script.
    std::fs::create_dir_all(clis.dir.path().join("wrap")).unwrap();
    let wrapper = clis.dir.path().join("wrap/claude");
    std::fs::write(&wrapper, "#!/bin/sh\nexec claude \"$@\"\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut p = clis.provider("claude", 1);
    p["executable"] = json!(wrapper.display().to_string());
    let (_d, baton, _c) = start(&clis, vec![p]).await;
    let st = baton.admin_state().await;
    let why = st["providers"][0]["unavailable"].as_str().unwrap();
    assert!(why.contains("`sh` script"), "{why}");
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 502);
    baton.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_tries_cli_providers_the_way_routing_runs_them() {
    let clis = FakeClis::new();
    clis.modes("claude", &["limit-soon"]);
    clis.modes("codex", &["ok"]);
    clis.modes("gemini", &["nologin"]);
    std::fs::remove_file(clis.dir.path().join("gemini-home/.gemini/oauth_creds.json")).unwrap();
    let cfg = clis.dir.path().join("config.json");
    std::fs::write(
        &cfg,
        json!({"providers": [clis.provider("claude", 1), clis.provider("codex", 2), clis.provider("gemini", 3)]}).to_string(),
    )
    .unwrap();
    let (code, out, err) = run_baton(
        vec![
            "probe".into(),
            "--config".into(),
            cfg.display().to_string(),
            "--json".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 1, "a failing target: {err}");
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    let by = |id: &str| rows.iter().find(|r| r["provider"] == id).unwrap().clone();
    let claude = by("claude");
    assert_eq!(claude["class"], "rate", "{claude}");
    let reset = claude["resetAtMs"].as_i64().unwrap();
    let in_an_hour = baton::clock::unix_ms() + 3_600_000;
    assert!(
        (reset - in_an_hour).abs() < 120_000,
        "reset about an hour from now: {reset}"
    );
    assert_eq!(by("codex")["class"], "ok");
    let gemini = by("gemini");
    assert_eq!(
        gemini["class"], "logged-out",
        "its own check, not a provider's 401"
    );
    assert!(
        gemini["reason"].as_str().unwrap().contains("not logged in"),
        "{gemini}"
    );
    assert_eq!(
        clis.calls("gemini").len(),
        0,
        "a logged-out CLI is not started"
    );
}
