//! Streaming safety: commit only after the first content, explicit error events after it,
//! cancellation when the client goes away.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use futures_util::StreamExt;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn two() -> (tempfile::TempDir, FakeUpstream, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pa = provider("a", &a.base_url(), 10);
    pa["timeouts"]["idleMs"] = json!(500);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    (dir, a, b, baton)
}

#[tokio::test]
async fn streams_pass_through_with_done_and_usage() {
    let (_d, _a, _b, baton) = two().await;
    let mut body = chat_body("auto", "one two three", true);
    body["stream_options"] = json!({"include_usage": true});
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "content-type"), "text/event-stream");
    assert_eq!(header(&r, "x-gateway-provider"), "a");
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(stream_text(&events), "a: one two three");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let usage: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(usage["usage"]["completion_tokens"], 7);
    let log = baton.log().await;
    assert_eq!((log[0].status, log[0].output_tokens), (200, Some(7)));
    baton.stop().await;
}

#[tokio::test]
async fn failure_before_first_content_falls_over_cleanly() {
    let (_d, a, b, baton) = two().await;
    // Role chunk only, then the connection closes: nothing was committed, so after the one
    // same-target retry (which dies the same way) b answers.
    a.script([Behavior::StreamDies(0), Behavior::StreamDies(0)]);
    let r = baton
        .post(chat_body("auto", "hi", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(
        stream_text(&events),
        "b: hi",
        "no trace of a's aborted attempt"
    );
    assert_eq!(b.hits(), 1);
    baton.stop().await;
}

#[tokio::test]
async fn stream_breaking_after_content_ends_with_an_error_event() {
    let (_d, a, b, baton) = two().await;
    a.script([Behavior::StreamDies(2)]);
    let r = baton
        .post(chat_body("auto", "one two three four", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let events = sse_data(&r.text().await.unwrap());
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "stream_interrupted");
    assert!(last["error"]["message"]
        .as_str()
        .unwrap()
        .contains("incomplete"));
    assert!(
        !events.iter().any(|e| e == "[DONE]"),
        "a broken answer never looks complete"
    );
    assert_eq!(stream_text(&events), "a: one ");
    assert_eq!(b.hits(), 0, "no fallback after the first byte");
    let log = baton.log().await;
    assert_eq!(log[0].status, 502);
    baton.stop().await;
}

#[tokio::test]
async fn stalled_stream_hits_the_idle_timeout() {
    let (_d, a, _b, baton) = two().await;
    a.script([Behavior::StreamStalls(2)]);
    let r = baton
        .post(chat_body("auto", "one two three", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    let last: Value = serde_json::from_str(events.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "stream_interrupted");
    assert!(last["error"]["message"]
        .as_str()
        .unwrap()
        .contains("500 ms"));
    baton.stop().await;
}

#[tokio::test]
async fn missing_done_after_a_finish_is_completed_but_missing_finish_is_an_error() {
    let (_d, a, _b, baton) = two().await;
    a.script([Behavior::StreamNoDone]);
    let r = baton
        .post(chat_body("auto", "x y", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "finished answer gets its terminator"
    );
    assert_eq!(stream_text(&events), "a: x y");
    // Ends before any finish reason and without [DONE]: explicit error.
    a.script([Behavior::StreamDies(3)]);
    let r = baton
        .post(chat_body("auto", "x y z", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert!(events.last().unwrap().contains("stream_interrupted"));
    baton.stop().await;
}

#[tokio::test]
async fn client_disconnect_cancels_the_upstream() {
    let (_d, a, _b, baton) = two().await;
    a.script([Behavior::SlowStream {
        chunks: 200,
        delay_ms: 50,
    }]);
    let r = baton
        .post(chat_body("auto", "x", true))
        .send()
        .await
        .unwrap();
    let mut body = r.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    drop(body);
    assert!(
        eventually(5, || a.abandoned() == 1).await,
        "upstream stream dropped when the client left"
    );
    assert!(eventually(5, || a.in_flight() == 0).await);
    let core = baton.handle.core.clone();
    let mut status = 0;
    for _ in 0..100 {
        core.store.writer().flush().await;
        if let Some(row) = core.store.recent_requests(1).unwrap().first() {
            status = row.status;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, 499, "recorded as cancelled by the client");
    baton.stop().await;
}

#[tokio::test]
async fn client_disconnect_cancels_a_pending_non_streamed_request() {
    let (_d, a, _b, baton) = two().await;
    a.script([Behavior::Hang]);
    let req = baton
        .post(chat_body("auto", "x", false))
        .timeout(std::time::Duration::from_millis(300));
    assert!(req.send().await.is_err(), "client gave up");
    assert!(
        eventually(5, || a.in_flight() == 0).await,
        "upstream request cancelled"
    );
    baton.stop().await;
}

#[tokio::test]
async fn streamed_tool_calls_pass_through() {
    let (_d, a, _b, baton) = two().await;
    a.script([Behavior::ToolCall {
        name: "get_weather".into(),
        arguments: "{\"city\":\"Paris\"}".into(),
    }]);
    let r = baton
        .post(chat_body("auto", "weather?", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    let args: String = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|v| {
            v.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    assert_eq!(args, "{\"city\":\"Paris\"}");
    assert!(events
        .iter()
        .any(|e| e.contains("\"finish_reason\":\"tool_calls\"")));
    baton.stop().await;
}

#[tokio::test]
async fn resume_on_break_continues_on_a_prefill_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
        FakeUpstream::start("c").await,
    );
    let mut pb = provider("b", &b.base_url(), 20);
    pb["capabilities"] = json!({"prefill": true});
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), pb, provider("c", &c.base_url(), 30)],
            "routes": {"resilient": {"targets": ["a", "c", "b"], "resumeOnBreak": true}, "plain": ["a", "b"]},
            "modelMap": {"claude-*": "resilient"}}),
    )
    .await;
    let mut rx = baton.handle.events().subscribe();
    a.script([Behavior::StreamDies(2)]);
    b.script([Behavior::Text("three four".into())]);
    let r = baton
        .post(chat_body("resilient", "one two three four", true))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "a");
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "completed, no error event"
    );
    assert!(!events.iter().any(|e| e.contains("stream_interrupted")));
    assert_eq!(
        stream_text(&events),
        "a: one three four",
        "a's part, then b's continuation"
    );
    assert_eq!(c.hits(), 0, "c declares no prefill support");
    let sent = &b.received()[0].body["messages"];
    assert_eq!(
        sent.as_array().unwrap().last().unwrap(),
        &json!({"role": "assistant", "content": "a: one "})
    );
    let log = baton.log().await;
    assert_eq!(
        (log[0].status, log[0].provider.as_deref()),
        (200, Some("b"))
    );
    let mut resumed = false;
    while let Ok(ev) = rx.try_recv() {
        resumed |= matches!(ev, baton::events::Event::Failover { ref from, ref to, .. } if from == "a/a-model" && to == "b/b-model");
    }
    assert!(resumed);

    // A client model name that modelMap sends to the route resumes the same way.
    a.script([Behavior::StreamDies(2)]);
    b.script([Behavior::Text("three four".into())]);
    let r = baton
        .post(chat_body("claude-sonnet-4-5", "one two three four", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(stream_text(&events), "a: one three four");

    // Without resumeOnBreak on the route, the break ends with the explicit error event.
    a.script([Behavior::StreamDies(2)]);
    let r = baton
        .post(chat_body("plain", "one two three", true))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert!(events.last().unwrap().contains("stream_interrupted"));
    assert_eq!(b.hits(), 2);
    baton.stop().await;
}

#[tokio::test]
async fn a_twice_resumed_stream_reads_as_one_answer_and_counts_every_part() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
        FakeUpstream::start("c").await,
    );
    let prefill = |id: &str, up: &FakeUpstream, prio: i64| {
        let mut p = provider(id, &up.base_url(), prio);
        p["capabilities"] = json!({"prefill": true});
        p
    };
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), prefill("b", &b, 20), prefill("c", &c, 30)],
            "routes": {"resilient": {"targets": ["a", "b", "c"], "resumeOnBreak": true}}}),
    )
    .await;
    // a breaks after "a: one ", b continues with three chunks and breaks too, c finishes.
    a.script([Behavior::StreamDies(2)]);
    b.script([Behavior::StreamDies(3)]);
    c.always(Behavior::Text("five six".into()));
    let mut body = chat_body("resilient", "one two three four", true);
    body["stream_options"] = json!({"include_usage": true});
    let r = baton.post(body).send().await.unwrap();
    let text = r.text().await.unwrap();
    let events = sse_data(&text);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{text}");
    assert_eq!(stream_text(&events), "a: one b: one two five six", "{text}");

    // The second continuation's prefill holds both earlier parts, including the first chunk
    // of b's continuation.
    let sent = &c.received()[0].body["messages"];
    assert_eq!(
        sent.as_array().unwrap().last().unwrap(),
        &json!({"role": "assistant", "content": "a: one b: one two "}),
    );

    // One answer: one id, one role chunk.
    let chunks: Vec<Value> = events
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let ids: std::collections::BTreeSet<&str> =
        chunks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let roles = chunks
        .iter()
        .filter(|c| c.pointer("/choices/0/delta/role").is_some())
        .count();
    assert_eq!(roles, 1, "{text}");

    // The serving chain, since the headers named only a.
    assert!(
        text.contains(": baton: answer served by a/a-model then b/b-model then c/c-model"),
        "{text}"
    );

    // Every part counts: a and b broke without usage (estimated: the prompt, plus each
    // prefill, and the words each streamed), c reported 11 + 7.
    let usage = chunks.iter().rev().find_map(|c| c.get("usage")).unwrap();
    let log = baton.log().await;
    let (input, output) = (log[0].input_tokens.unwrap(), log[0].output_tokens.unwrap());
    assert!(
        output > 7 + 2,
        "the broken parts' output counts too: {output}"
    );
    assert!(input > 11 + 2, "each attempt read the prompt: {input}");
    assert_eq!(usage["prompt_tokens"], input, "{usage}");
    assert_eq!(usage["completion_tokens"], output, "{usage}");
    assert_eq!(log[0].provider.as_deref(), Some("c"));
    let classes: Vec<&str> = log[0].attempts.iter().map(|a| a.class.as_str()).collect();
    assert_eq!(
        classes,
        ["transient", "transient", "ok"],
        "{:?}",
        log[0].attempts
    );
    baton.stop().await;
}
