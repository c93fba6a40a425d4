//! Timeout defaults that fail over from a silent upstream quickly while a reasoning model that
//! streams its thinking keeps going: the wait before the first content is bounded by silence
//! between chunks (`idleMs`), not by a deadline, so reasoning deltas and keep-alives count as
//! activity.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[test]
fn defaults_fail_over_from_silence_within_thirty_seconds() {
    let cfg = baton::config::parse_str(
        r#"{"providers": [{"id": "a", "kind": "openai-compatible", "baseUrl": "https://a.example/v1", "models": ["m"]}]}"#,
        std::path::Path::new("t.json"),
    )
    .unwrap();
    let t = &cfg.providers[0].timeouts;
    assert_eq!((t.first_byte_ms, t.idle_ms), (30_000, 30_000));
    assert_eq!(
        t.answer_ms, 300_000,
        "a whole non-streamed answer may take longer"
    );
    assert_eq!((t.headers_ms(true), t.headers_ms(false)), (30_000, 300_000));
    // A provider that sets firstByteMs gets it for both.
    let set = baton::config::Timeouts {
        first_byte_ms: 5_000,
        ..t.clone()
    };
    assert_eq!(
        (set.headers_ms(true), set.headers_ms(false)),
        (5_000, 5_000)
    );
}

fn with_timeouts(id: &str, url: &str, priority: i64) -> Value {
    let mut p = provider(id, url, priority);
    p["timeouts"] = json!({"connectMs": 2000, "firstByteMs": 400, "idleMs": 500});
    p
}

#[tokio::test]
async fn a_model_that_thinks_longer_than_first_byte_keeps_streaming_and_silence_fails_over() {
    let thinker = FakeUpstream::start("thinker").await;
    let spare = FakeUpstream::start("spare").await;
    // Two seconds of reasoning deltas, 100 ms apart, before any content: five times
    // firstByteMs, but never silent for idleMs.
    thinker.script([Behavior::Thinks(2_000)]);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [with_timeouts("thinker", &thinker.base_url(), 1),
                             with_timeouts("spare", &spare.base_url(), 2)]}),
    )
    .await;
    let r = baton
        .post(chat_body("auto", "ponder this", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "thinker");
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(stream_text(&events), "thinker: ponder this");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(spare.hits(), 0);

    // Headers, then silence before any content: over after idleMs, to the next provider.
    thinker.script([Behavior::StreamStalls(0)]);
    let r = baton
        .post(chat_body("auto", "hello", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "spare");
    // A stream's log row is written when it ends: read the answer first.
    assert_eq!(
        stream_text(&sse_data(&r.text().await.unwrap())),
        "spare: hello"
    );
    let log = baton.log().await;
    let a = &log[0].attempts[0];
    assert_eq!(
        (a.provider.as_str(), a.class.as_str()),
        ("thinker", "transient")
    );
    assert!(
        a.reason.as_deref().unwrap().contains("500 ms"),
        "failed over on idleMs of silence: {a:?}"
    );
    baton.stop().await;
}
