//! A stream that breaks after content has reached the client is the provider's failure: it is
//! logged as one (not `ok`), counts against the provider's health and breaker — so a provider
//! that cuts every stream stops being first in line — and its tokens still count. An event that
//! is not JSON after content ends the stream with the explicit `stream_interrupted` error,
//! never passed through to crash the client's parser.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn stream(b: &Baton) -> (String, Vec<String>) {
    let r = b
        .post(chat_body("auto", "hello there friend", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let served = header(&r, "x-gateway-provider").to_string();
    let text = r.text().await.unwrap();
    (served, sse_data(&text))
}

fn interrupted(events: &[String]) -> bool {
    events.iter().any(|e| {
        serde_json::from_str::<Value>(e)
            .ok()
            .is_some_and(|v| v["error"]["code"] == "stream_interrupted")
    })
}

#[tokio::test]
async fn a_provider_that_cuts_every_stream_is_counted_and_benched() {
    let cuts = FakeUpstream::start("cuts").await;
    let steady = FakeUpstream::start("steady").await;
    cuts.always(Behavior::StreamDies(2));
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("cuts", &cuts.base_url(), 1), provider("steady", &steady.base_url(), 2)]}),
    )
    .await;
    for i in 0..5 {
        let (served, events) = stream(&baton).await;
        assert_eq!(served, "cuts", "stream {i}");
        assert!(!stream_text(&events).is_empty(), "content arrived first");
        assert!(interrupted(&events), "then the explicit error: {events:?}");
        assert_ne!(events.last().map(String::as_str), Some("[DONE]"));
    }
    // The log says each was a failure of that provider, with the tokens it streamed.
    let log = baton.log().await;
    for row in log.iter().take(5) {
        let a = row.attempts.last().unwrap();
        assert_eq!(
            (a.provider.as_str(), a.class.as_str()),
            ("cuts", "transient"),
            "{row:?}"
        );
        assert!(a.streamed);
        assert!(a
            .reason
            .as_deref()
            .unwrap()
            .contains("stream broke after content"));
        assert_eq!(row.status, 502);
    }
    // Health: five calls, no success.
    let h = baton.handle.core.stats.health("cuts", None, None);
    assert_eq!((h.calls, h.successes), (5, 0), "{h:?}");
    // The breaker opened: the next stream goes straight to the steady provider.
    let hits = cuts.hits();
    let (served, events) = stream(&baton).await;
    assert_eq!(served, "steady");
    assert!(!interrupted(&events));
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(cuts.hits(), hits);
    baton.stop().await;
}

#[tokio::test]
async fn a_malformed_event_after_content_ends_the_stream_explicitly() {
    let bad = FakeUpstream::start("bad").await;
    bad.always(Behavior::StreamMalformed(2));
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("bad", &bad.base_url(), 1)]}),
    )
    .await;
    let (_, events) = stream(&baton).await;
    assert!(!stream_text(&events).is_empty());
    assert!(interrupted(&events), "{events:?}");
    // Every event the client got is JSON: nothing for its parser to choke on.
    for e in &events {
        assert!(serde_json::from_str::<Value>(e).is_ok(), "not JSON: {e}");
    }
    // The same through the Anthropic API: an error event, not garbage.
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .json(
            &json!({"model": "bad-model", "max_tokens": 16, "stream": true,
            "messages": [{"role": "user", "content": "hello there friend"}]}),
        )
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("event: error"), "{text}");
    for e in sse_data(&text) {
        assert!(serde_json::from_str::<Value>(&e).is_ok(), "not JSON: {e}");
    }
    baton.stop().await;
}
