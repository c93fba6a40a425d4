//! Signed thinking across failover: a conversation that began on one Anthropic account keeps
//! working when it moves to another (which refuses foreign signatures, as the real API does),
//! streamed and not; a signature Baton cannot place is retried once without thinking; an
//! OpenAI-compatible fallback gets the conversation without thinking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup(fallback_kind: &str) -> (tempfile::TempDir, FakeUpstream, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "a", "kind": "anthropic", "baseUrl": a.base_url(), "models": ["claude-a"],
             "priority": 1},
            {"id": "b", "kind": fallback_kind, "baseUrl": b.base_url(), "models": ["claude-b"],
             "priority": 2}],
         "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    (dir, a, b, baton)
}

fn messages(baton: &Baton, body: &Value) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .json(body)
}

fn ask(history: Vec<Value>, stream: bool) -> Value {
    json!({"model": "claude-sonnet", "max_tokens": 4000, "stream": stream,
        "thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": history})
}

/// The assistant turn of a whole answer, or rebuilt from a stream's events.
async fn assistant_turn(r: reqwest::Response, stream: bool) -> Value {
    assert_eq!(r.status(), 200);
    if !stream {
        let v: Value = r.json().await.unwrap();
        return json!({"role": "assistant", "content": v["content"]});
    }
    let mut blocks: Vec<Value> = Vec::new();
    for d in sse_data(&r.text().await.unwrap()) {
        let e: Value = serde_json::from_str(&d).unwrap();
        match e["type"].as_str().unwrap() {
            "content_block_start" => blocks.push(e["content_block"].clone()),
            "content_block_delta" => {
                let b = blocks.last_mut().unwrap();
                let d = &e["delta"];
                match d["type"].as_str().unwrap() {
                    "thinking_delta" => {
                        b["thinking"] = json!(format!(
                            "{}{}",
                            b["thinking"].as_str().unwrap(),
                            d["thinking"].as_str().unwrap()
                        ))
                    }
                    "signature_delta" => b["signature"] = d["signature"].clone(),
                    "input_json_delta" => {
                        b["input"] = serde_json::from_str(d["partial_json"].as_str().unwrap())
                            .unwrap_or(b["input"].clone())
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    json!({"role": "assistant", "content": blocks})
}

fn thinking_blocks(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "thinking")
        .count()
}

#[tokio::test]
async fn a_conversation_moves_to_another_account_without_the_first_ones_thinking() {
    for stream in [false, true] {
        let (_d, a, b, baton) = setup("anthropic").await;
        // Turn one on a: its answer thinks (signed by a) and calls a tool.
        a.script([Behavior::ToolCall {
            name: "Read".into(),
            arguments: json!({"file_path": "/tmp/x"}).to_string(),
        }]);
        let user = json!({"role": "user", "content": "read /tmp/x"});
        let r = messages(&baton, &ask(vec![user.clone()], stream))
            .send()
            .await
            .unwrap();
        let turn = assistant_turn(r, stream).await;
        assert_eq!(turn["content"][0]["type"], "thinking", "{turn}");
        let signature = turn["content"][0]["signature"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!signature.is_empty());
        // Turn two: a is at its limit; b takes the conversation, without a's thinking.
        a.script([Behavior::rate_limited(Some(60))]);
        let result = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_fake1", "content": "the file"}]});
        let r = messages(&baton, &ask(vec![user, turn, result], stream))
            .send()
            .await
            .unwrap();
        assert_eq!(header(&r, "x-gateway-provider"), "b", "stream={stream}");
        let answer = assistant_turn(r, stream).await;
        assert!(
            answer["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "text"),
            "{answer}"
        );
        let sent = &b.received()[0].body;
        assert_eq!(thinking_blocks(sent), 0, "a's signature never reached b");
        assert!(
            sent.get("thinking").is_none(),
            "thinking off: the last turn's tool call no longer begins with it"
        );
        assert_eq!(sent["messages"][1]["content"][0]["type"], "tool_use");
        assert_eq!(b.hits(), 1, "no refused attempt");
        baton.stop().await;
    }
}

#[tokio::test]
async fn a_signature_baton_cannot_place_is_retried_once_without_thinking() {
    let (_d, _a, b, baton) = setup("anthropic").await;
    // Signed by an account before Baton ever saw it, sent to b directly.
    let history = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "old", "signature": "EqQBCkYIBxgCKkBzb21ld2hlcmU"},
            {"type": "text", "text": "Hello."}]}),
        json!({"role": "user", "content": "again"}),
    ];
    let mut body = ask(history, false);
    body["model"] = json!("b/claude-b");
    let r = messages(&baton, &body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["content"].as_array().unwrap().last().unwrap()["text"],
        "b: again"
    );
    let got = b.received();
    assert_eq!(got.len(), 2, "refused once, then sent without thinking");
    assert_eq!(thinking_blocks(&got[0].body), 1);
    assert_eq!(thinking_blocks(&got[1].body), 0);
    assert_eq!(got[1].body["messages"][1]["content"][0]["text"], "Hello.");
    baton.stop().await;
}

#[tokio::test]
async fn an_openai_compatible_fallback_gets_the_tool_turn_without_thinking() {
    let (_d, a, b, baton) = setup("openai-compatible").await;
    a.script([Behavior::ToolCall {
        name: "Read".into(),
        arguments: json!({"file_path": "/tmp/x"}).to_string(),
    }]);
    let user = json!({"role": "user", "content": "read /tmp/x"});
    let r = messages(&baton, &ask(vec![user.clone()], false))
        .send()
        .await
        .unwrap();
    let turn = assistant_turn(r, false).await;
    a.script([Behavior::rate_limited(Some(60))]);
    let result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_fake1", "content": "the file"}]});
    let r = messages(&baton, &ask(vec![user, turn, result], false))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "message");
    let sent = &b.received()[0].body;
    let text = sent.to_string();
    assert!(!text.contains("a thinks"), "{text}");
    assert_eq!(
        sent["messages"].as_array().unwrap().last().unwrap()["role"],
        "tool"
    );
    baton.stop().await;
}
