//! The `bedrock-converse` kind against a fake as strict as AWS: the body checked against
//! botocore's service model of Bedrock's Converse API (unknown members, one member per union,
//! lengths, ranges, the tool name and id patterns) and AWS's conversation rules, a SigV4
//! signature checked by the fake's own code, and the answer in Converse's shapes, streamed as
//! typed event-stream events. A Chat Completions client reaches a Llama on Bedrock whole and
//! streamed; a tool loop keeps its ids through every turn; Bedrock's throttling, whole or
//! mid-stream, fails over; the same Claude model on Converse takes over from an Anthropic
//! account at its limit; `count_tokens` is CountTokens' `converse` input.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const ID: &str = "AKIAIOSFODNN7EXAMPLE";
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const LLAMA: &str = "us.meta.llama3-3-70b-instruct-v1:0";
const CLAUDE: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

fn fake_account(up: &FakeUpstream) {
    up.bedrock_account(ID, SECRET, None, "us-west-2", &[LLAMA, CLAUDE]);
}

/// A Converse provider on `up`, signing with the account's access key.
fn converse(id: &str, up: &FakeUpstream, priority: i64) -> Value {
    let var = format!("BT_CONVERSE_{}", id.to_uppercase().replace('-', "_"));
    std::env::set_var(&var, format!("{ID}:{SECRET}"));
    json!({"id": id, "kind": "bedrock-converse", "baseUrl": format!("http://{}", up.addr),
        "region": "us-west-2", "models": [LLAMA, CLAUDE], "keys": [{"env": var}],
        "priority": priority,
        "timeouts": {"connectMs": 2000, "firstByteMs": 3000, "idleMs": 3000}})
}

fn sent(up: &FakeUpstream, i: usize) -> (String, Value, Value) {
    let call = up.bedrock_calls()[i].clone();
    let body = serde_json::from_str(call["body"].as_str().unwrap()).unwrap();
    (
        call["path"].as_str().unwrap().to_string(),
        body,
        call["headers"].clone(),
    )
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "read_file", "description": "read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}])
}

#[tokio::test]
async fn a_chat_client_reaches_a_llama_on_bedrock_through_converse_whole_and_streamed() {
    let up = FakeUpstream::start("bc").await;
    fake_account(&up);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": [converse("bc", &up, 1)]})).await;
    let body = json!({"model": LLAMA, "max_tokens": 300, "temperature": 1.5,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}],
        "tools": tools()});
    let r = baton.post(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bc");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "bc: hello", "{v}");
    assert_eq!(v["model"], LLAMA);
    assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0, "{v}");

    let (path, b, headers) = sent(&up, 0);
    assert_eq!(path, format!("/model/{LLAMA}/converse"));
    assert_eq!(
        b,
        json!({"system": [{"text": "Be brief."}],
            "messages": [{"role": "user", "content": [{"text": "hello"}]}],
            "inferenceConfig": {"maxTokens": 300, "temperature": 1.0},
            "toolConfig": {"tools": [{"toolSpec": {"name": "read_file", "description": "read a file",
                "inputSchema": {"json": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}}]}}),
        "the turn in Converse's shapes, the model in the path"
    );
    let auth = headers["authorization"].as_str().unwrap();
    assert!(
        auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={ID}/"))
            && auth.contains("/us-west-2/bedrock/aws4_request"),
        "{auth}"
    );

    let mut streamed = body;
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let r = baton.post(streamed).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(stream_text(&events), "bc: hello", "{events:?}");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let usage = events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .find(|v| v["usage"].is_object())
        .expect("a usage chunk");
    assert!(usage["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    assert_eq!(sent(&up, 1).0, format!("/model/{LLAMA}/converse-stream"));
    assert!(up.refusals().is_empty(), "{:?}", up.refusals());
    baton.stop().await;
}

#[tokio::test]
async fn a_tool_loop_through_converse_keeps_its_ids_and_every_turn_is_one_aws_takes() {
    let up = FakeUpstream::start("bc").await;
    fake_account(&up);
    up.script([
        Behavior::ToolCall {
            name: "read_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
        },
        Behavior::Ok,
    ]);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": [converse("bc", &up, 1)]})).await;
    let mut turn = json!({"model": LLAMA, "stream": true, "tools": tools(),
        "messages": [{"role": "user", "content": "read a.txt"}]});
    let r = baton.post(turn.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let events: Vec<Value> = sse_data(&r.text().await.unwrap())
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect();
    let call = events
        .iter()
        .find_map(|v| v.pointer("/choices/0/delta/tool_calls/0/id"))
        .and_then(Value::as_str)
        .expect("a tool call")
        .to_string();
    let args: String = events
        .iter()
        .filter_map(|v| v.pointer("/choices/0/delta/tool_calls/0/function/arguments"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"path": "a.txt"})
    );
    assert!(events
        .iter()
        .any(|v| v.pointer("/choices/0/finish_reason") == Some(&json!("tool_calls"))));

    turn["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "type": "function",
            "function": {"name": "read_file", "arguments": args}}]}),
        json!({"role": "tool", "tool_call_id": call, "content": "the file's text"}),
    ]);
    turn["stream"] = json!(false);
    let r = baton.post(turn).send().await.unwrap();
    let v: Value = r.json().await.unwrap();
    assert!(up.refusals().is_empty(), "{:?}", up.refusals());
    assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");
    let (_, b, _) = sent(&up, 1);
    assert_eq!(
        b["messages"][1]["content"][0]["toolUse"]["toolUseId"], call,
        "{b}"
    );
    assert_eq!(
        b["messages"][2]["content"],
        json!([{"toolResult": {"toolUseId": call, "content": [{"text": "the file's text"}]}}])
    );
    baton.stop().await;
}

#[tokio::test]
async fn throttling_whole_or_inside_the_stream_fails_over_and_the_client_never_sees_it() {
    let up = FakeUpstream::start("bc-one").await;
    fake_account(&up);
    up.script([Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Too many requests, please wait before trying again."}}),
        headers: vec![],
    }]);
    let backup = FakeUpstream::start("bc-two").await;
    fake_account(&backup);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [converse("bc-one", &up, 1), converse("bc-two", &backup, 2)]}),
    )
    .await;
    let r = baton.chat(LLAMA, "hello").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bc-two");
    let log = baton.log().await;
    assert_eq!(log[0].attempts[0].class.as_str(), "rate", "{:?}", log[0]);
    assert!(
        serde_json::to_string(&log[0].attempts)
            .unwrap()
            .contains("Too many requests"),
        "{:?}",
        log[0].attempts
    );
    baton.stop().await;

    let up = FakeUpstream::start("bc-one").await;
    fake_account(&up);
    up.bedrock_throttle_streams(1);
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [converse("bc-one", &up, 1), converse("bc-two", &backup, 2)]}),
    )
    .await;
    let r = baton
        .post(chat_body(LLAMA, "hello", true))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "bc-two");
    let text = r.text().await.unwrap();
    assert_eq!(stream_text(&sse_data(&text)), "bc-two: hello", "{text}");
    assert!(!text.contains("Too many tokens"), "{text}");
    let log = baton.log().await;
    assert_eq!(log[0].attempts[0].class.as_str(), "rate");
    baton.stop().await;
}

#[tokio::test]
async fn the_same_claude_on_converse_takes_over_from_an_anthropic_account_and_counts_its_tokens() {
    let anthropic = FakeUpstream::start("anthropic").await;
    anthropic.script([Behavior::Status {
        status: 429,
        body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your per-minute rate limit"}}),
        headers: vec![("retry-after".into(), "60".into())],
    }]);
    let up = FakeUpstream::start("bc").await;
    fake_account(&up);
    std::env::set_var("BT_CONVERSE_ANTHROPIC_KEY", "sk-ant-api03-test");
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "anthropic", "kind": "anthropic", "baseUrl": format!("http://{}/v1", anthropic.addr),
             "models": ["claude-sonnet-4-5"], "keys": [{"env": "BT_CONVERSE_ANTHROPIC_KEY"}], "priority": 1},
            converse("bc", &up, 5)]}),
    )
    .await;
    let turn = json!({"model": "claude-sonnet-4-5", "max_tokens": 500, "stream": true,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hello"}]});
    let r = baton.messages(turn).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "bc");
    let text = r.text().await.unwrap();
    assert!(text.contains("event: message_start"), "{text}");
    let said: String = sse_data(&text)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v.pointer("/delta/text")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    assert_eq!(said, "bc: hello", "{text}");
    assert!(
        text.trim_end()
            .ends_with("data: {\"type\":\"message_stop\"}"),
        "{text}"
    );
    assert_eq!(sent(&up, 0).0, format!("/model/{CLAUDE}/converse-stream"));

    let r = baton
        .count_tokens(
            json!({"model": format!("bc/{CLAUDE}"), "system": "Be brief.",
            "messages": [{"role": "user", "content": "hello"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(v["input_tokens"].as_u64().unwrap() > 0, "{v}");
    let calls = up.bedrock_calls();
    let count = calls.last().unwrap();
    assert_eq!(
        count["path"], "/model/anthropic.claude-sonnet-4-5-20250929-v1:0/count-tokens",
        "the inference profile's foundation model is counted"
    );
    let body: Value = serde_json::from_str(count["body"].as_str().unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"input": {"converse": {"system": [{"text": "Be brief."}],
            "messages": [{"role": "user", "content": [{"text": "hello"}]}]}}})
    );
    assert!(up.refusals().is_empty(), "{:?}", up.refusals());
    baton.stop().await;
}

/// The fake is as strict as AWS: what Bedrock refuses is refused here in AWS's words, and Baton
/// relays the refusal as the client's own API's error.
#[tokio::test]
async fn what_aws_refuses_is_refused_in_its_words() {
    let up = FakeUpstream::start("bc").await;
    fake_account(&up);
    up.expect_refusals();
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": [converse("bc", &up, 1)]})).await;
    // Bedrock's tool names are `[a-zA-Z0-9_-]+`, at most 64 characters.
    let mut body = chat_body(LLAMA, "hello", false);
    body["tools"] = json!([{"type": "function", "function": {"name": "files.read",
        "parameters": {"type": "object"}}}]);
    let r = baton.post(body).send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_-]+"),
        "{message}"
    );
    assert!(
        message.contains("toolConfig.tools.1.member.toolSpec.name"),
        "{message}"
    );
    baton.stop().await;
}
