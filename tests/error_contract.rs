//! Edges of the error contract: `count_tokens` accepts what `/v1/messages` accepts (a large
//! Claude Code context can be counted), answers a body over the limit with a 413 in Anthropic's
//! error shape, and checks the key before it reads any body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
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
