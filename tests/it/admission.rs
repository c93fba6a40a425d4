//! What the one admission (`api/admit.rs`) and the rules around it hold on every route: a key
//! limited to some models counts and lists only those; a second gateway key sent where a login
//! goes never reaches a `credentials: "client"` upstream; a CLI provider's secret variables are
//! references like keys (never shown, exported or stored); and `baton config import` follows the
//! admin API's import rules; large bodies one after another each find the budget their
//! predecessor gave back. (The WebSocket's admission: tests/e2e/test_ws_attacks.py.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use reqwest::Method;
use serde_json::{json, Value};
use testkit::FakeUpstream;

use crate::cli::*;
use crate::common::*;

async fn make_key(b: &Baton, body: Value) -> (String, String) {
    let (st, v) = Admin(b).send(Method::POST, "/admin/keys", Some(body)).await;
    assert_eq!(st, 201, "{v}");
    (
        v["key"].as_str().unwrap().to_string(),
        v["id"].as_str().unwrap().to_string(),
    )
}

fn messages(model: &str) -> Value {
    json!({"model": model, "max_tokens": 10, "messages": [{"role": "user", "content": "hello there"}]})
}

#[tokio::test]
async fn a_key_limited_to_some_models_counts_and_lists_only_those() {
    let up = FakeUpstream::start("up").await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = provider("up", &up.base_url(), 1);
    p["models"] = json!(["m-a", "m-b"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [p], "modelMap": {"gem-a": "up/m-a", "gem-b": "up/m-b"}}),
    )
    .await;
    let (key, _) = make_key(&baton, json!({"label": "only-a", "allow": ["up/m-a"]})).await;
    let count = |model: &str| {
        baton
            .http
            .post(format!("{}/v1/messages/count_tokens", baton.url))
            .header("x-api-key", &key)
            .header("anthropic-version", "2023-06-01")
            .json(&messages(model))
            .send()
    };
    let r = count("up/m-b").await.unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "permission_error", "{v}");
    assert_eq!(count("up/m-a").await.unwrap().status(), 200);

    let gemini_count = |model: &str| {
        baton
            .http
            .post(format!("{}/v1beta/models/{model}:countTokens", baton.url))
            .header("x-goog-api-key", &key)
            .json(&json!({"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}))
            .send()
    };
    let r = gemini_count("gem-b").await.unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["status"], "PERMISSION_DENIED", "{v}");
    assert_eq!(gemini_count("gem-a").await.unwrap().status(), 200);

    // The model lists name only what the key may use.
    let v: Value = baton
        .http
        .get(format!("{}/v1beta/models", baton.url))
        .header("x-goog-api-key", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = v["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"models/up/m-a"), "{names:?}");
    assert!(!names.contains(&"models/up/m-b"), "{names:?}");
    baton.stop().await;
}

/// A client that presents its key in `x-baton-key` and puts *another* gateway key where its
/// own login goes: only a login ever reaches a `credentials: "client"` upstream.
#[tokio::test]
async fn a_second_gateway_key_never_reaches_a_client_credential_upstream() {
    let up = FakeUpstream::start("sub").await;
    let dir = tempfile::tempdir().unwrap();
    let sub = json!({"id": "sub", "kind": "anthropic", "baseUrl": up.base_url(),
        "credentials": "client", "models": ["claude-sub"], "priority": 1});
    let baton = Baton::start(dir.path(), json!({"providers": [sub]})).await;
    let (k1, _) = make_key(&baton, json!({"label": "one"})).await;
    let (k2, _) = make_key(&baton, json!({"label": "two"})).await;
    for (name, value) in [
        ("authorization", format!("Bearer {k2}")),
        ("x-api-key", k2.clone()),
        ("authorization", format!("Bearer {}", baton.key)),
    ] {
        let r = baton
            .http
            .post(format!("{}/v1/messages", baton.url))
            .header("x-baton-key", &k1)
            .header(name, &value)
            .header("anthropic-version", "2023-06-01")
            .json(&messages("claude-sub"))
            .send()
            .await
            .unwrap();
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{name}: {v}");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    }
    let seen = serde_json::to_string(
        &up.received()
            .iter()
            .map(|r| format!("{:?}", r.headers))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    for key in [&k2, &baton.key, &k1] {
        assert!(
            !seen.contains(key.as_str()),
            "a gateway key reached the upstream"
        );
    }
    // A real login beside the key goes through, as before.
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-baton-key", &k1)
        .header(
            "authorization",
            "Bearer sk-ant-oat01-the-users-own-login-0000",
        )
        .header("anthropic-version", "2023-06-01")
        .json(&messages("claude-sub"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(auths(&up).contains(&"sk-ant-oat01-the-users-own-login-0000".to_string()));
    baton.stop().await;
}

#[tokio::test]
async fn a_cli_providers_secret_variables_are_references_like_keys() {
    let clis = FakeClis::new();
    std::env::set_var("BT_CLI_SECRET_KEY", "sk-ant-api03-cli-secret-value-4242");
    let mut p = clis.provider("claude", 1);
    p["env"]["ANTHROPIC_API_KEY"] = json!({"env": "BT_CLI_SECRET_KEY"});
    let (dir, baton, _c) = start(&clis, vec![p.clone()]).await;
    let r = baton
        .post(chat_body("claude/sonnet", "hi", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let call = &clis.calls("claude")[0];
    assert_eq!(
        call["env"]["ANTHROPIC_API_KEY"], "sk-ant-api03-cli-secret-value-4242",
        "the CLI gets the variable's value"
    );
    for path in ["/admin/providers", "/admin/export", "/admin/state"] {
        let (st, v) = Admin(&baton).send(Method::GET, path, None).await;
        assert_eq!(st, 200);
        assert!(
            !v.to_string().contains("cli-secret-value"),
            "{path} shows it"
        );
    }
    // A literal secret is refused, naming the field and what to write instead.
    let mut literal = clis.provider("codex", 2);
    literal["env"]["OPENAI_API_KEY"] = json!("sk-proj-a-literal-secret-in-the-config-0000");
    let (st, v) = Admin(&baton)
        .send(Method::POST, "/admin/providers", Some(literal.clone()))
        .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"]["param"], "env.OPENAI_API_KEY", "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("{\"env\""));
    baton.stop().await;
    let db: Vec<u8> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("baton.db"))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .flatten()
        .collect();
    assert!(!db.is_empty());
    assert!(!String::from_utf8_lossy(&db).contains("cli-secret-value"));
    // The config file's rule is the same.
    let err = baton::config::parse_str(
        &json!({"providers": [literal]}).to_string(),
        std::path::Path::new("c.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("env.OPENAI_API_KEY"), "{err}");
}

/// `baton config import` writes live configuration: it is held to the admin API's import.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_import_follows_the_admin_imports_rules() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        &data,
        json!({"providers": [provider("a", &a.base_url(), 1)]}),
    )
    .await;
    baton.stop().await;
    let d = data.display().to_string();
    let file = dir.path().join("import.json");
    let run = |args: &[&str]| run_baton(args.iter().map(|a| a.to_string()).collect(), vec![]);
    let import = |providers: Value| {
        std::fs::write(&file, json!({"providers": providers}).to_string()).unwrap();
        run(&["config", "import", file.to_str().unwrap(), "--data-dir", &d])
    };

    // Baton's environment's cloud secret, pointed at a host of the file's choosing: refused.
    let mut evil = provider("evil", "https://collector.example/v1", 5);
    evil["keys"] = json!([{"env": "AWS_SECRET_ACCESS_KEY"}]);
    let (code, _, err) = import(json!([evil])).await;
    assert_ne!(code, 0);
    assert!(
        err.contains("providers[0].keys[0].env") && err.contains("nothing was imported"),
        "{err}"
    );
    // Baton's own keys never go anywhere.
    let mut own = provider("own", "https://collector.example/v1", 5);
    own["keys"] = json!([{"env": "BATON_ADMIN_KEY"}]);
    let (code, _, err) = import(json!([own])).await;
    assert_ne!(code, 0, "{err}");
    // A provider the config file owns is left alone; an existing one needs --replace.
    let (code, out, err) = import(json!([provider("a", "https://elsewhere.example/v1", 1)])).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("skipped a"), "{err}");
    assert!(out.contains("imported 0 provider(s)"), "{out}");
    let (code, _, _) = import(json!([provider("z", &a.base_url(), 3)])).await;
    assert_eq!(code, 0);
    let (code, _, err) = import(json!([provider("z", &a.base_url(), 4)])).await;
    assert_ne!(code, 0);
    assert!(err.contains("--replace"), "{err}");
    let (code, _, err) = run(&[
        "config",
        "import",
        file.to_str().unwrap(),
        "--data-dir",
        &d,
        "--replace",
    ])
    .await;
    assert_eq!(code, 0, "{err}");
}

/// A large request's parsed form is freed after its answer is out (`budget::free_later`), and
/// its memory charge with it: a client sending its next large body at once, under a budget
/// that holds one such body at a time, is served every time, never told the budget is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_back_to_back_each_find_the_budget_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("up").await;
    // ~1.1 MB, charged ~8.9 MB: the smallest budget allowed (16 MiB) holds one at a time.
    let text = "All work and no play. ".repeat(50_000);
    let baton = Baton::start(
        dir.path(),
        json!({"server": {"memoryBudgetBytes": 16 * 1024 * 1024},
            "providers": [provider("up", &up.base_url(), 1)]}),
    )
    .await;
    let body = json!({"model": "up-model", "messages": [{"role": "user", "content": text}]});
    let send = || {
        baton
            .http
            .post(format!("{}/v1/chat/completions", baton.url))
            .bearer_auth(&baton.key)
            .json(&body)
            .send()
    };
    for i in 0..20 {
        let r = send().await.unwrap();
        let status = r.status().as_u16();
        assert_eq!(status, 200, "request {i}: {}", r.text().await.unwrap());
    }
    // Two at once: one is served, and the other too (once the first is done) or told to come
    // back with a 503; neither is lost.
    let (a, b) = tokio::join!(send(), send());
    let mut statuses = [a.unwrap().status().as_u16(), b.unwrap().status().as_u16()];
    statuses.sort();
    assert!(
        statuses == [200, 200] || statuses == [200, 503],
        "{statuses:?}"
    );
}
