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

/// Every candidate out for an hour is a usage limit to the user: each API's answer takes the
/// form its agent shows at once with the reset time (Claude Code reads Anthropic's unified
/// headers of a spent window, Codex the ChatGPT backend's `usage_limit_reached` with
/// `resets_at`, which the WebSocket relays as it is); a short wait stays a rate limit the
/// client retries by itself. (The real CLIs showing it: tests/e2e/test_limit_messages.py.)
#[tokio::test]
async fn a_long_wait_is_answered_as_a_usage_limit_with_its_reset() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    let messages = || async {
        baton
            .messages(json!({"model": "auto", "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap()
    };
    let responses = || async {
        let r = baton
            .http
            .post(format!("{}/v1/responses", baton.url))
            .bearer_auth(&baton.key)
            .json(&json!({"model": "auto", "input": "hi"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 429);
        r.json::<serde_json::Value>().await.unwrap()
    };
    // A short wait: a rate limit, as before.
    up.script([Behavior::rate_limited(Some(60))]);
    let r = messages().await;
    assert_eq!(r.status(), 429);
    assert!(r
        .headers()
        .get("anthropic-ratelimit-unified-status")
        .is_none());
    let v = responses().await;
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    let cleared = baton
        .http
        .delete(format!("{}/admin/cooldowns?provider=a", baton.url))
        .header("x-admin-key", &baton.admin_key)
        .send()
        .await
        .unwrap();
    assert!(cleared.status().is_success(), "{}", cleared.status());

    // An hour.
    up.script([Behavior::rate_limited(Some(3600))]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let r = messages().await;
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "anthropic-ratelimit-unified-status"), "rejected");
    assert_eq!(
        header(&r, "anthropic-ratelimit-unified-representative-claim"),
        "five_hour"
    );
    let reset: i64 = header(&r, "anthropic-ratelimit-unified-reset")
        .parse()
        .unwrap();
    assert!(
        (now + 3590..=now + 3602).contains(&reset),
        "{reset} vs {now}"
    );
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");

    let v = responses().await;
    assert_eq!(v["error"]["type"], "usage_limit_reached", "{v}");
    assert_eq!(v["error"]["resets_at"], reset);
    assert!(v["error"]["resets_in_seconds"].as_u64().unwrap() > 3500);
    assert!(v["error"].get("plan_type").is_none());
    assert_eq!(up.hits(), 2, "the cooling provider is not asked again");
    baton.stop().await;
}
