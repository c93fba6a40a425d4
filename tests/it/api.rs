//! The HTTP surface: every error status in OpenAI's shape, auth, the Host guard, models, health.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

async fn one() -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"server": {"maxBodyBytes": 4096}, "providers": [provider("a", &a.base_url(), 10)],
            "routes": {"fast": ["a"]}}),
    )
    .await;
    (dir, a, baton)
}

async fn error_of(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    let v: Value = r.json().await.expect("JSON error body");
    let e = &v["error"];
    assert!(
        e["message"].is_string()
            && e.get("type").is_some()
            && e.get("param").is_some()
            && e.get("code").is_some(),
        "OpenAI error shape: {v}"
    );
    (status, v)
}

#[tokio::test]
async fn bad_requests_get_clear_openai_errors() {
    let (_d, a, baton) = one().await;
    let url = format!("{}/v1/chat/completions", baton.url);
    let send = |body: &'static str| {
        baton
            .http
            .post(&url)
            .bearer_auth(&baton.key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };

    let (s, v) = error_of(send("{not json").await.unwrap()).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("invalid_json"))
    );
    let (s, v) = error_of(send(r#"{"model":"auto"}"#).await.unwrap()).await;
    assert_eq!((s, v["error"]["param"].as_str()), (400, Some("messages")));
    let (s, v) = error_of(send(r#"{"model":"auto","messages":[]}"#).await.unwrap()).await;
    assert_eq!((s, v["error"]["param"].as_str()), (400, Some("messages")));
    let (s, _) = error_of(send("[1,2]").await.unwrap()).await;
    assert_eq!(s, 400);
    let (s, v) = error_of(
        send(r#"{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 404);
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("gpt-9")
            && msg.contains("auto")
            && msg.contains("a/a-model")
            && msg.contains("fast"),
        "{msg}"
    );

    let big =
        json!({"model": "auto", "messages": [{"role": "user", "content": "x".repeat(10_000)}]});
    let (s, v) = error_of(baton.post(big).send().await.unwrap()).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (413, Some("request_too_large"))
    );
    assert_eq!(a.hits(), 0, "nothing reached the upstream");
    baton.stop().await;
}

#[tokio::test]
async fn gateway_key_is_required_and_checked() {
    let (_d, a, baton) = one().await;
    let url = format!("{}/v1/chat/completions", baton.url);
    let body = chat_body("auto", "x", false);
    let (s, v) = error_of(baton.http.post(&url).json(&body).send().await.unwrap()).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (401, Some("invalid_api_key"))
    );
    let (s, _) = error_of(
        baton
            .http
            .post(&url)
            .bearer_auth("bt-wrong")
            .json(&body)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 401);
    let r = baton
        .http
        .post(&url)
        .header("x-api-key", &baton.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "x-api-key accepted too");
    let r = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(a.hits(), 1);
    // The upstream never sees the gateway key.
    let auth = a.received()[0]
        .headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_string());
    assert_eq!(auth, None, "keyless provider gets no Authorization header");
    baton.stop().await;
}

#[tokio::test]
async fn foreign_host_headers_are_refused() {
    let (_d, _a, baton) = one().await;
    for (host, ok) in [
        ("evil.example", false),
        ("evil.example:8787", false),
        ("localhost:8787", true),
        ("127.0.0.1", true),
    ] {
        let r = baton
            .http
            .get(format!("{}/health", baton.url))
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status() == 200, ok, "host {host}");
        if !ok {
            let (s, v) = error_of(r).await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (403, Some("host_not_allowed"))
            );
        }
    }
    baton.stop().await;
}

#[tokio::test]
async fn models_health_and_unknown_paths() {
    let (_d, _a, baton) = one().await;
    let r = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["auto", "fast", "a", "a/a-model"]);
    let v: Value = baton
        .http
        .get(format!("{}/health", baton.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["status"], "ok");
    assert_eq!(
        v["summary"],
        "1 provider enabled: 1 ready, 0 cooling, 0 unavailable"
    );
    let (s, _) = error_of(
        baton
            .http
            .get(format!("{}/v2/nothing", baton.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 404);
    let (s, _) = error_of(
        baton
            .http
            .get(format!("{}/v1/chat/completions", baton.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 405);
    baton.stop().await;
}

#[tokio::test]
async fn no_provider_configured_is_503() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({})).await;
    let (s, v) = error_of(baton.chat("auto", "x").await).await;
    assert_eq!(s, 503);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("No provider is configured"));
    baton.stop().await;
}

#[tokio::test]
async fn missing_provider_key_makes_it_unavailable_not_an_error_storm() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pa = provider("a", &a.base_url(), 10);
    pa["keys"] = json!([{"env": "BATON_TEST_SURELY_UNSET_KEY"}]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    let r = baton.chat("auto", "x").await;
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(header(&r, "x-gateway-attempts"), "1");
    assert_eq!(a.hits(), 0);
    let v: Value = baton
        .http
        .get(format!("{}/health", baton.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(v["summary"].as_str().unwrap().contains("1 unavailable"));
    baton.stop().await;
}

#[tokio::test]
async fn provider_keys_are_sent_upstream_and_never_logged() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    // Unique variable name: tests in this binary run in parallel threads.
    std::env::set_var("BATON_TEST_KEY_SENT", "sk-test-secret-value-1234");
    let mut pa = provider("a", &a.base_url(), 10);
    pa["keys"] = json!([{"env": "BATON_TEST_KEY_SENT"}]);
    pa["headers"] = json!({"HTTP-Referer": "https://baton.local"});
    let baton = Baton::start(dir.path(), json!({"providers": [pa]})).await;
    a.script([testkit::Behavior::rate_limited(Some(5))]);
    let _ = baton.chat("auto", "x").await;
    let got = a.received();
    assert_eq!(
        got[0].headers["authorization"],
        "Bearer sk-test-secret-value-1234"
    );
    assert_eq!(got[0].headers["http-referer"], "https://baton.local");
    let log = baton.log().await;
    let text = serde_json::to_string(&log).unwrap();
    assert!(
        !text.contains("sk-test-secret"),
        "secret absent from the request log"
    );
    assert!(
        text.contains("env:BATON_TEST_KEY_SENT"),
        "key referred to by its label"
    );
    let db = std::fs::read(dir.path().join("baton.db")).unwrap();
    assert!(!String::from_utf8_lossy(&db).contains("sk-test-secret"));
    baton.stop().await;
}
