//! `baton probe` against fake upstreams (healthy, rate-limited, rejected key): printed
//! classification, JSON and exit status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_classifies_each_target_and_exits_nonzero_on_failure() {
    let (a, b, c) = (
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
        FakeUpstream::start("c").await,
    );
    b.always(Behavior::rate_limited(Some(30)));
    c.always(Behavior::Status { status: 401, body: json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}), headers: vec![] });
    let mut pc = provider("c", &c.base_url(), 30);
    pc["keys"] = json!([{"env": "BT_PROBE_C_KEY"}]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20), pc]}).to_string()).unwrap();
    let cfg = cfg.display().to_string();
    let env = vec![("BT_PROBE_C_KEY", "sk-probe-secret-9999")];

    let (code, out, err) = run_baton(
        vec![
            "probe".into(),
            "--config".into(),
            cfg.clone(),
            "--json".into(),
        ],
        env.clone(),
    )
    .await;
    assert_eq!(
        code, 1,
        "a failing target makes the exit status non-zero: {err}"
    );
    let results: Value = serde_json::from_str(&out).unwrap();
    let classes: Vec<(&str, &str)> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap(),
                r["class"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(classes, [("a", "ok"), ("b", "rate"), ("c", "auth")]);
    assert!(
        results[1]["resetAtMs"].as_i64().unwrap() > baton::clock::unix_ms() + 25_000,
        "reset instant from Retry-After"
    );
    assert_eq!(results[2]["key"], "env:BT_PROBE_C_KEY");
    assert_eq!(a.received()[0].body["max_tokens"], 1, "a cheap request");
    assert_eq!(
        c.received()[0].headers["authorization"],
        "Bearer sk-probe-secret-9999"
    );

    let (code, out, _) = run_baton(
        vec!["probe".into(), "--config".into(), cfg.clone()],
        env.clone(),
    )
    .await;
    assert_eq!(code, 1);
    assert!(out.starts_with("TARGET"));
    let row = |id: &str| out.lines().find(|l| l.starts_with(id)).unwrap().to_string();
    assert!(row("a/a-model").contains(" ok "));
    assert!(row("b/b-model").contains("rate") && row("b/b-model").contains("HTTP 429"));
    assert!(row("c/c-model").contains("auth"));
    assert!(!out.contains("sk-probe-secret"));

    let (code, _, _) = run_baton(
        vec![
            "probe".into(),
            "--config".into(),
            cfg.clone(),
            "--provider".into(),
            "a".into(),
        ],
        env.clone(),
    )
    .await;
    assert_eq!(code, 0, "only the healthy provider");
    let (code, _, err) = run_baton(
        vec![
            "probe".into(),
            "--config".into(),
            cfg,
            "--provider".into(),
            "zzz".into(),
        ],
        env,
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("unknown provider"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_reads_the_live_providers_from_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10)]}),
    )
    .await;
    let (code, out, err) = run_baton(
        vec![
            "probe".into(),
            "--data-dir".into(),
            dir.path().display().to_string(),
            "--json".into(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()[0]["class"],
        "ok"
    );
    assert!(
        baton.handle.core.routing.cooldowns.active().is_empty(),
        "probing changes no cooldowns"
    );
    baton.stop().await;
    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = run_baton(
        vec![
            "probe".into(),
            "--data-dir".into(),
            empty.path().display().to_string(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("no configuration"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_apply_cools_failed_targets_in_the_running_baton() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    b.always(Behavior::rate_limited(Some(300)));
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    let d = dir.path().display().to_string();
    let (code, _, err) = run_baton(
        vec![
            "probe".into(),
            "--data-dir".into(),
            d.clone(),
            "--apply".into(),
            "--url".into(),
            baton.url.clone(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 1, "b failed: {err}");
    assert!(err.contains("applied 1 cooldown(s)"), "{err}");
    // The healthy one's answer time went to the speed book (routing by speed, a hedge's
    // p95), as a live answer's would.
    let speed = baton.handle.core.routing.speeds.of("a", "a-model").unwrap();
    assert_eq!(speed.samples, 1);
    assert!(baton
        .handle
        .core
        .routing
        .speeds
        .of("b", "b-model")
        .is_none());
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd.len(), 1);
    assert_eq!(
        (cd[0].scope.provider.as_str(), cd[0].class.as_str()),
        ("b", "rate")
    );
    assert!(
        cd[0].until_ms > baton::clock::unix_ms() + 290_000,
        "the provider's own reset"
    );
    // The admin endpoint validates what it is given.
    let r = baton.http.post(format!("{}/admin/cooldowns", baton.url)).bearer_auth(&baton.admin_key)
        .json(&json!({"provider": "nope", "untilMs": baton::clock::unix_ms() + 1000, "class": "rate", "reason": "x"})).send().await.unwrap();
    assert_eq!(r.status(), 404);
    let r = baton
        .http
        .post(format!("{}/admin/cooldowns", baton.url))
        .bearer_auth(&baton.admin_key)
        .json(&json!({"provider": "a", "untilMs": 1, "class": "rate", "reason": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    for (body, status) in [
        (json!({"provider": "nope", "model": "m", "ttftMs": 5}), 404),
        (
            json!({"provider": "a", "model": "m", "ttftMs": 700_000}),
            400,
        ),
        (json!({"provider": "a", "model": "m"}), 400),
    ] {
        let r = baton
            .http
            .post(format!("{}/admin/speeds", baton.url))
            .bearer_auth(&baton.admin_key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{body}");
    }
    baton.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_speaks_each_upstream_kinds_own_api_and_apply_leaves_healthy_keys_alone() {
    // Fakes that refuse anything but the real APIs' authentication.
    let (oa, an, ge) = (
        FakeUpstream::start("openai").await,
        FakeUpstream::start("claude").await,
        FakeUpstream::start("gemini").await,
    );
    for f in [&oa, &an, &ge] {
        f.strict_auth();
    }
    std::env::set_var("BT_PROBE_OA_KEY", "sk-probe-openai-1111");
    std::env::set_var("BT_PROBE_AN_KEY", "sk-ant-probe-2222");
    std::env::set_var("BT_PROBE_GE_KEY", "gemini-probe-3333");
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "oa", "kind": "openai-compatible", "baseUrl": oa.base_url(),
             "keys": [{"env": "BT_PROBE_OA_KEY"}], "models": ["gpt-x"]},
            {"id": "an", "kind": "anthropic", "baseUrl": an.base_url(),
             "keys": [{"env": "BT_PROBE_AN_KEY"}], "models": ["claude-x"]},
            {"id": "ge", "kind": "gemini", "baseUrl": ge.gemini_base_url(),
             "keys": [{"env": "BT_PROBE_GE_KEY"}], "models": ["gemini-x"]}]}),
    )
    .await;
    let (code, out, err) = probe_json_apply(dir.path(), &baton.url).await;
    let results: Value = serde_json::from_str(&out).unwrap();
    let classes: Vec<(&str, &str)> = results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["provider"].as_str().unwrap(),
                r["class"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        classes,
        [("an", "ok"), ("ge", "ok"), ("oa", "ok")],
        "{out}{err}"
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("applied 0 cooldown(s)"), "{err}");
    assert!(
        baton.handle.core.routing.cooldowns.active().is_empty(),
        "healthy keys are left alone"
    );
    // Each got its own API: Anthropic's headers and body, Gemini's path and key header.
    let a = &an.received()[0];
    assert_eq!(a.headers["x-api-key"], "sk-ant-probe-2222");
    assert!(a.headers.contains_key("anthropic-version"));
    assert!(!a.headers.contains_key("authorization"));
    assert_eq!(a.body["max_tokens"], 1);
    assert_eq!(a.body["messages"][0]["role"], "user");
    let g = &ge.received()[0];
    assert_eq!(g.body["path"], "gemini-x:generateContent");
    assert_eq!(g.headers["x-goog-api-key"], "gemini-probe-3333");
    assert_eq!(g.body["body"]["generationConfig"]["maxOutputTokens"], 1);
    assert!(g.body["body"]["contents"].is_array());
    assert_eq!(
        oa.received()[0].headers["authorization"],
        "Bearer sk-probe-openai-1111"
    );
    // Model discovery speaks each kind's API too: every list is read, none refused.
    let r = baton
        .http
        .post(format!("{}/admin/discover", baton.url))
        .bearer_auth(&baton.admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let found: Value = r.json().await.unwrap();
    for (id, model) in [
        ("oa", "openai-model"),
        ("an", "claude-model"),
        ("ge", "gemini-model"),
    ] {
        assert_eq!(found[id]["error"], Value::Null, "{id}: {found}");
        assert_eq!(found[id]["models"], json!([model]), "{id}: {found}");
    }
    let lists = an.model_list_requests();
    assert!(!lists.is_empty());
    for h in &lists {
        assert_eq!(h["x-api-key"], "sk-ant-probe-2222");
        assert!(h.contains_key("anthropic-version"));
        assert!(
            !h.contains_key("authorization"),
            "no Bearer token to Anthropic"
        );
    }
    baton.stop().await;
}

/// A login-only provider (`credentials: "client"`, a subscription passed through) cannot be
/// tested by Baton, which never holds the login: the probe says so, sends it nothing, exits 0
/// for it, and `--apply` cools nothing (it once wrote an eight-day `auth` cooldown from the 401
/// its login-less request got, and real Claude Code requests were skipped for a week).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_only_provider_is_said_so_and_never_cooled() {
    let dir = tempfile::tempdir().unwrap();
    let sub = FakeUpstream::start("claude").await;
    sub.only_subscription("sk-ant-oat01-someone-elses-login");
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            login_only(&sub),
            provider("a", &a.base_url(), 10)]}),
    )
    .await;
    let (code, out, err) = probe_json_apply(dir.path(), &baton.url).await;
    assert_eq!(code, 0, "{out}{err}");
    let results: Value = serde_json::from_str(&out).unwrap();
    let sub_row = results
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["provider"] == "claude-sub")
        .unwrap();
    assert_eq!(sub_row["class"], "login-only", "{sub_row}");
    assert!(sub_row["reason"].as_str().unwrap().contains("never holds"));
    assert!(sub.received().is_empty(), "nothing sent without a login");
    assert!(err.contains("applied 0 cooldown(s)"), "{err}");
    assert!(baton.handle.core.routing.cooldowns.active().is_empty());
    // The table says it too.
    let (_, table, _) = run_baton(
        vec![
            "probe".into(),
            "--data-dir".into(),
            dir.path().display().to_string(),
        ],
        vec![],
    )
    .await;
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("claude-sub/*") && l.contains("login-only")),
        "{table}"
    );
    baton.stop().await;
}

/// A probe's own failure is never written as the provider's words: a key whose variable is
/// unset in the probe's shell (the running Baton has it) is `unavailable` — not an `auth`
/// verdict that `--apply` would turn into an eight-day cooldown — and each row says what the
/// running Baton says of the provider now, the state `baton status` shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_missing_in_the_probes_shell_is_not_the_providers_word() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [keyed("a", &a, 10, &[("BT_PROBE_SHELL_KEY", "sk-probe-shell-1234")])]}),
    )
    .await;
    let (code, out, err) =
        probe_json_apply_with(dir.path(), &baton.url, vec![("BT_PROBE_SHELL_KEY", " ")]).await;
    assert_eq!(code, 1, "not tested is not fine: {out}{err}");
    let results: Value = serde_json::from_str(&out).unwrap();
    let row = &results[0];
    assert_eq!(row["class"], "unavailable", "{row}");
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .contains("BT_PROBE_SHELL_KEY"),
        "{row}"
    );
    assert_eq!(
        row["gateway"]["state"], "ready",
        "the running Baton's word: {row}"
    );
    assert!(err.contains("applied 0 cooldown(s)"), "{err}");
    assert!(baton.handle.core.routing.cooldowns.active().is_empty());
    assert!(a.received().is_empty(), "nothing was sent without a key");
    baton.stop().await;
}

/// `baton probe --data-dir DIR --json --apply --url URL`: (exit code, stdout, stderr).
async fn probe_json_apply(dir: &std::path::Path, url: &str) -> (i32, String, String) {
    probe_json_apply_with(dir, url, vec![]).await
}

/// The same, with `envs` set for the probe (its own shell's variables).
async fn probe_json_apply_with(
    dir: &std::path::Path,
    url: &str,
    envs: Vec<(&'static str, &'static str)>,
) -> (i32, String, String) {
    run_baton(
        vec![
            "probe".into(),
            "--data-dir".into(),
            dir.display().to_string(),
            "--json".into(),
            "--apply".into(),
            "--url".into(),
            url.to_string(),
        ],
        envs,
    )
    .await
}
