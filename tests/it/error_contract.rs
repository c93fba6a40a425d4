//! Edges of the error contract: `count_tokens` accepts what `/v1/messages` accepts (a large
//! Claude Code context can be counted), answers a body over the limit with a 413 in Anthropic's
//! error shape, and checks the key before it reads any body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

async fn count(b: &Baton, key: &str, body: String) -> (u16, Value) {
    let r = b
        .http
        .post(format!("{}/v1/messages/count_tokens", b.url))
        .header("x-api-key", key)
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    let text = r.text().await.unwrap();
    (
        st,
        serde_json::from_str(&text).unwrap_or(json!({"raw": text})),
    )
}

fn messages_of(len: usize) -> String {
    json!({"model": "a-model", "max_tokens": 1,
        "messages": [{"role": "user", "content": "x".repeat(len)}]})
    .to_string()
}

#[tokio::test]
async fn count_tokens_takes_the_same_bodies_as_messages() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = json!({"providers": [provider("a", &up.base_url(), 1)]});
    cfg["server"] = json!({"maxBodyBytes": 4_000_000});
    let baton = Baton::start(dir.path(), cfg).await;

    // 3 MB: over axum's 2 MB default, under the gateway's limit.
    let (st, v) = count(&baton, &baton.key, messages_of(3_000_000)).await;
    assert_eq!(st, 200, "{v}");
    assert!(v["input_tokens"].as_u64().unwrap() > 500_000, "{v}");

    // Over the limit: 413 in Anthropic's shape, naming the setting.
    let (st, v) = count(&baton, &baton.key, messages_of(4_100_000)).await;
    assert_eq!(st, 413, "{v}");
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "request_too_large", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server.maxBodyBytes"),
        "{v}"
    );
    // The same body to /v1/messages gets the same answer.
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("content-type", "application/json")
        .body(messages_of(4_100_000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);

    // Authentication first: a wrong key is told so, whatever the body's size.
    let (st, v) = count(&baton, "wrong-key", messages_of(4_100_000)).await;
    assert_eq!(st, 401, "{v}");
    assert_eq!(v["error"]["type"], "authentication_error", "{v}");
    baton.stop().await;
}

fn is_json(r: &reqwest::Response) -> bool {
    header(r, "content-type").starts_with("application/json")
}

#[tokio::test]
async fn every_rejection_is_json_in_its_api_shape_and_the_admin_key_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": []})).await;
    let get = |path: &str| baton.http.get(format!("{}{path}", baton.url));

    // A query that does not parse, without the admin key: the key is what is missing.
    let r = get("/admin/usage?sinceMs=yesterday").send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert!(is_json(&r));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_admin_key", "{v}");
    // With the key: a 400 in OpenAI's shape that says what is wrong.
    let r = Admin(&baton)
        .req(reqwest::Method::GET, "/admin/usage?sinceMs=yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(is_json(&r), "{:?}", r.headers());
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("sinceMs"),
        "{v}"
    );
    // A body over an admin route's limit: 413 as JSON, after the key was checked.
    let big = "x".repeat(3_000_000);
    let r = baton
        .http
        .post(format!("{}/admin/import", baton.url))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = Admin(&baton)
        .req(reqwest::Method::POST, "/admin/import")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    assert!(is_json(&r));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "request_too_large", "{v}");

    // The Anthropic API answers a wrong method and an unknown path in its own shape.
    let r = get("/v1/messages").send().await.unwrap();
    assert_eq!(r.status(), 405);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error", "{v}");
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    let r = baton
        .http
        .post(format!("{}/v1/messages/batches", baton.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "not_found_error", "{v}");
    // The OpenAI API keeps OpenAI's shape.
    let r = get("/v1/chat/completions").send().await.unwrap();
    assert_eq!(r.status(), 405);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "method_not_allowed", "{v}");
    baton.stop().await;
}

#[tokio::test]
async fn a_long_uri_and_huge_headers_are_refused_in_the_api_shape() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": []})).await;
    let long = "x".repeat(20_000);
    let r = baton
        .http
        .get(format!("{}/v1/models?q={long}", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 414);
    assert!(is_json(&r));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "uri_too_long", "{v}");

    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("x-padding", "y".repeat(70_000))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 431);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error", "Anthropic's shape: {v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("headers"),
        "{v}"
    );
    // Still serving on the next request.
    let r = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    baton.stop().await;
}

#[tokio::test]
async fn refused_requests_are_in_the_request_log_too() {
    let up = testkit::FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    // Claude Code's model name with nothing mapped: 404, and Activity shows it.
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .json(
            &json!({"model": "claude-sonnet-4-5-20250929", "max_tokens": 8, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Not JSON at all: 400.
    let r = baton
        .http
        .post(format!("{}/v1/chat/completions", baton.url))
        .bearer_auth(&baton.key)
        .header("content-type", "application/json")
        .body("{\"model\": \"auto\", ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let log = baton.log().await;
    assert_eq!(log.len(), 2, "{log:?}");
    let bad_json = &log[0];
    assert_eq!(bad_json.status, 400);
    assert!(
        bad_json
            .error
            .as_deref()
            .unwrap()
            .contains("not valid JSON"),
        "{bad_json:?}"
    );
    let unknown = &log[1];
    assert_eq!(
        (
            unknown.status,
            unknown.requested_model.as_str(),
            unknown.stream
        ),
        (404, "claude-sonnet-4-5-20250929", true)
    );
    assert!(
        unknown.error.as_deref().unwrap().contains("does not exist"),
        "{unknown:?}"
    );
    assert!(unknown.attempts.is_empty() && unknown.provider.is_none());
    // A model name of 100,000 characters is kept short in the log.
    let r = baton.chat(&"m".repeat(100_000), "hi").await;
    assert_eq!(r.status(), 404);
    let log = baton.log().await;
    assert!(log[0].requested_model.len() <= 200);
    assert!(log[0].error.as_deref().unwrap().len() <= 1000);
    baton.stop().await;
}
