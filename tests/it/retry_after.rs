//! An overloaded provider that says when to come back: the client is told the same, in its
//! own API's "try again at" (503 and `Retry-After`), on the failing request and on the next
//! one that Baton answers without asking the provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn a_cooled_overloaded_provider_answers_503_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    let back = std::time::SystemTime::now() + std::time::Duration::from_secs(300);
    up.script([Behavior::Status {
        status: 503,
        body: json!({"error": {"message": "The server is overloaded", "type": "server_error",
            "code": "overloaded"}}),
        headers: vec![("retry-after".into(), httpdate::fmt_http_date(back))],
    }]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 503);
    let wait: u64 = header(&r, "retry-after").parse().unwrap();
    assert!((290..=301).contains(&wait), "{wait}");
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "all_providers_unavailable");
    // The next request is not sent upstream, and says the same.
    let r = baton.chat("auto", "again").await;
    assert_eq!(r.status(), 503);
    let wait: u64 = header(&r, "retry-after").parse().unwrap();
    assert!((280..=301).contains(&wait), "{wait}");
    assert_eq!(up.hits(), 1);
    // An Anthropic client too, in its own error shape.
    let r = baton
        .messages(json!({"model": "auto", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert!(!header(&r, "retry-after").is_empty());
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "overloaded_error");
    baton.stop().await;
}
