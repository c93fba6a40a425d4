//! The bad-request throttle pauses a client only for requests it malformed: unknown models,
//! uploads that broke off and upstream verdicts relayed as they came do not count, and the key
//! Baton generated for local tools is never paused (one buggy tool would lock out the others).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;

use crate::common::*;
use baton::clients::limiter::BAD_REQUEST_LIMIT;
use reqwest::Method;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

async fn make_key(b: &Baton, label: &str) -> String {
    let (st, v) = Admin(b)
        .send(Method::POST, "/admin/keys", Some(json!({"label": label})))
        .await;
    assert_eq!(st, 201, "{v}");
    v["key"].as_str().unwrap().to_string()
}

async fn malformed(b: &Baton, key: &str) -> u16 {
    b.http
        .post(format!("{}/v1/chat/completions", b.url))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Sends headers announcing 1,000 bytes, then 10, then hangs up.
fn aborted_upload(url: &str, key: &str) {
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"model\":"
    )
    .unwrap();
    s.flush().unwrap();
    drop(s);
}

#[tokio::test]
async fn only_malformed_requests_pause_a_client_and_never_the_local_key() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let mut sub = provider("sub", &up.base_url(), 2);
    sub["kind"] = json!("anthropic");
    sub["credentials"] = json!("client");
    sub["models"] = json!(["claude-sub"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1), sub]}),
    )
    .await;
    let key = make_key(&baton, "tool").await;
    let n = BAD_REQUEST_LIMIT + 5;

    // Unknown models: a 404 each, no pause.
    for _ in 0..n {
        assert_eq!(
            baton.chat_as(&key, "claude-opus-4-1[1m]").await.status(),
            404
        );
    }
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);

    // Uploads that break off: no pause.
    for _ in 0..n {
        aborted_upload(&baton.url, &key);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);

    // The upstream's own 400s, relayed: no pause.
    up.always(Behavior::status(400));
    for _ in 0..n {
        assert_eq!(baton.chat_as(&key, "auto").await.status(), 400);
    }
    up.always(Behavior::Ok);
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);

    // Well-formed requests no provider here can take (a subscription model without the
    // client's own login): a 400 unsupported_request each, not the client's malformed JSON.
    for _ in 0..n {
        let r = baton.chat_as(&key, "sub/claude-sub").await;
        assert_eq!(r.status(), 400);
        let v: serde_json::Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "unsupported_request", "{v}");
    }
    assert_eq!(baton.chat_as(&key, "auto").await.status(), 200);

    // The generated local key sending malformed JSON: answered 400 each time, never paused.
    for _ in 0..n {
        assert_eq!(malformed(&baton, &baton.key).await, 400);
    }
    assert_eq!(baton.chat_as(&baton.key, "auto").await.status(), 200);

    // A made key sending malformed JSON is paused, as before.
    for _ in 0..BAD_REQUEST_LIMIT {
        assert_eq!(malformed(&baton, &key).await, 400);
    }
    let r = baton.chat_as(&key, "auto").await;
    assert_eq!(r.status(), 429);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "too_many_bad_requests", "{v}");
    baton.stop().await;
}
