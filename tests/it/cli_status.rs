//! `baton status` against a running gateway in front of a healthy, a rate-limited and a
//! rejected-key provider: what it prints, its JSON, and its exit status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_each_provider_state_and_exits_by_readiness() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
        FakeUpstream::start("c").await,
    );
    std::env::set_var("BT_STATUS_C_KEY", "sk-status-c-secret-1234");
    let mut pc = provider("c", &c.base_url(), 30);
    pc["keys"] = json!([{"env": "BT_STATUS_C_KEY"}]);
    let mut pd = provider("d", &a.base_url(), 40);
    pd["enabled"] = json!(false);
    let baton = Baton::start(dir.path(), json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20), pc, pd]})).await;
    b.script([Behavior::rate_limited(Some(600))]);
    c.script([Behavior::Status { status: 401, body: json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}), headers: vec![] }]);
    assert_eq!(baton.chat("b", "x").await.status(), 429);
    assert_eq!(baton.chat("c", "x").await.status(), 502);
    assert_eq!(baton.chat("a", "x").await.status(), 200);

    let base = baton.status_args(dir.path());
    let (code, out, err) = run_baton(base.clone(), vec![]).await;
    assert_eq!(code, 0, "a provider is ready: {err}");
    assert!(!out.contains('\x1b'), "no colour when piped");
    let line = |id: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("no row for {id}:\n{out}"))
            .to_string()
    };
    assert!(out.lines().next().unwrap().starts_with("PROVIDER"));
    assert!(line("a").contains("ready"));
    let b_line = line("b");
    assert!(
        b_line.contains("cooling until") && b_line.contains("rate"),
        "{b_line}"
    );
    let c_line = line("c");
    assert!(
        c_line.contains("unavailable") && c_line.contains("auth"),
        "{c_line}"
    );
    assert!(line("d").contains("disabled"));
    assert!(!out.contains("sk-status-c-secret"), "no secrets printed");

    let mut json_args = base.clone();
    json_args.push("--json".into());
    let (code, out, _) = run_baton(json_args, vec![]).await;
    assert_eq!(code, 0);
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (summary["paused"].as_bool(), summary["servable"].as_bool()),
        (Some(false), Some(true))
    );
    let rows = &summary["providers"];
    let states: Vec<(&str, &str)> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("a", "ready"),
            ("b", "cooling"),
            ("c", "unavailable"),
            ("d", "disabled")
        ]
    );
    assert!(rows[1]["resetAtMs"].as_i64().unwrap() > baton::clock::unix_ms() + 590_000);

    // Wrong key and nothing listening: exit 2 with a message saying what to do.
    let (code, _, err) = run_baton(
        vec![
            "status".into(),
            "--url".into(),
            baton.url.clone(),
            "--admin-key".into(),
            "bta-wrong".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("refused the admin key"), "{err}");
    let (code, _, err) = run_baton(
        vec![
            "status".into(),
            "--url".into(),
            "http://127.0.0.1:9".into(),
            "--admin-key".into(),
            "x".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("cannot reach Baton"), "{err}");
    baton.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_exits_1_when_nothing_is_ready() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10)]}),
    )
    .await;
    a.script([Behavior::rate_limited(Some(600))]);
    assert_eq!(baton.chat("auto", "x").await.status(), 429);
    let (code, out, _) = run_baton(baton.status_args(dir.path()), vec![]).await;
    assert_eq!(code, 1, "{out}");
    baton.stop().await;
}

/// One state, every surface: while routing is paused every request gets 503, and `status`
/// says so first, in its JSON, and in its exit status; a provider that serves only clients
/// bringing their own login is `login-only`, not `ready`, and alone it serves no request on a
/// gateway key (exit 1), as the gateway's own 429 says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_says_paused_and_login_only_as_requests_find_them() {
    let dir = tempfile::tempdir().unwrap();
    let (sub, a) = (
        FakeUpstream::start("claude").await,
        FakeUpstream::start("a").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            login_only(&sub),
            provider("a", &a.base_url(), 10)]}),
    )
    .await;
    let admin = |method: reqwest::Method, path: &str| {
        baton
            .http
            .request(method, format!("{}{path}", baton.url))
            .bearer_auth(&baton.admin_key)
    };
    let r = admin(reqwest::Method::PUT, "/admin/pause")
        .json(&json!({"paused": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(baton.chat("auto", "x").await.status(), 503);
    let base = baton.status_args(dir.path());
    let (code, out, _) = run_baton(base.clone(), vec![]).await;
    assert_eq!(code, 1, "nothing can be served while paused:\n{out}");
    assert!(out.starts_with("Routing is paused"), "{out}");
    let mut json_args = base.clone();
    json_args.push("--json".into());
    let (code, out, _) = run_baton(json_args.clone(), vec![]).await;
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 1);
    assert_eq!(summary["paused"], true);
    assert_eq!(summary["servable"], false);
    let states: Vec<&str> = summary["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["login-only", "ready"]);

    // Resumed, with the keyed provider cooling: only the login-only one is left.
    admin(reqwest::Method::PUT, "/admin/pause")
        .json(&json!({"paused": false}))
        .send()
        .await
        .unwrap();
    a.script([Behavior::rate_limited(Some(600))]);
    assert_eq!(baton.chat("auto", "x").await.status(), 429);
    let (code, out, _) = run_baton(json_args, vec![]).await;
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(code, 1, "{out}");
    assert_eq!(summary["servable"], false);
    assert_eq!(summary["providers"][0]["state"], "login-only");
    assert!(summary["providers"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("their own login"));
    let (_, out, _) = run_baton(base, vec![]).await;
    assert!(
        out.starts_with("No provider can take a request on a gateway key now."),
        "{out}"
    );
    // …and says who still serves a client's own login, and when the soonest is back.
    let head = out.lines().next().unwrap();
    assert!(
        head.contains("Only clients that bring their own login are served (by claude-sub).")
            && head.contains("a is back in 10 min"),
        "{head}"
    );
    assert_eq!(summary["servingLogin"], "claude-sub");
    assert_eq!(summary["serving"], Value::Null);
    // The status line renders the same summary: the login-only provider, not "ready for all".
    let (_, line) = Admin(&baton)
        .send(reqwest::Method::GET, "/admin/statusline", None)
        .await;
    assert_eq!(
        (&line["provider"], &line["state"], &line["servable"]),
        (&json!("claude-sub"), &json!("login-only"), &json!(false)),
        "{line}"
    );
    // A cooldown is said with how long it lasts, as a duration.
    assert!(
        out.lines().any(|l| l.starts_with("a ")
            && l.contains("cooling until")
            && l.contains("(in 10 min)")),
        "{out}"
    );
    baton.stop().await;
}
