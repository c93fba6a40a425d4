//! Gemini on the wire as the real API wants it, through the strict fake: JSON Schema tools in
//! `parametersJsonSchema`, Gemini 3's thought signatures sent back on the next turn, tool call
//! ids that never repeat, the tool choice, one usage chunk per stream, and thoughts asked for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup(model: &str) -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("gemini").await;
    std::env::set_var("BT_GEMINI_WIRE_KEY", "gemini-wire-secret");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "gemini", "kind": "gemini", "baseUrl": up.gemini_base_url(),
            "keys": [{"env": "BT_GEMINI_WIRE_KEY"}], "models": [model]}],
            "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    (dir, up, baton)
}

/// A tool schema as pydantic, zod and strict tools write it.
fn strict_tool() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "strict": true,
        "parameters": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"city": {"type": "string", "const": "Paris"},
                "days": {"type": "integer", "exclusiveMinimum": 0}},
            "required": ["city", "days"], "additionalProperties": false}}})
}

fn call(name: &str) -> Behavior {
    Behavior::ToolCall {
        name: name.into(),
        arguments: "{\"city\":\"Paris\",\"days\":1}".into(),
    }
}

#[tokio::test]
async fn json_schema_tools_go_in_parameters_json_schema_with_the_tool_choice() {
    let (_d, up, baton) = setup("gemini-2.5-flash").await;
    let r = baton
        .post(json!({"model": "auto", "tools": [strict_tool()],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "messages": [{"role": "user", "content": "weather?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let sent = &up.received()[0].body["body"];
    let decl = &sent["tools"][0]["functionDeclarations"][0];
    assert_eq!(
        decl["parametersJsonSchema"]["additionalProperties"], false,
        "the client's JSON Schema, whole"
    );
    assert!(decl.get("parameters").is_none());
    assert_eq!(
        sent["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}})
    );
    let r = baton
        .post(
            json!({"model": "auto", "tools": [strict_tool()], "tool_choice": "none",
            "messages": [{"role": "user", "content": "weather?"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        up.received()[1].body["body"]["toolConfig"]["functionCallingConfig"]["mode"],
        "NONE"
    );
    baton.stop().await;
}

/// Gemini 3 refuses a tool loop's next turn without the signature it put on its call: the
/// loop must survive turn 2 (and a turn another provider made gets the documented stand-in).
#[tokio::test]
async fn gemini_3_tool_loops_carry_their_thought_signatures() {
    let (_d, up, baton) = setup("gemini-3-pro-preview").await;
    up.script([call("get_weather"), call("get_weather")]);
    let mut messages = vec![json!({"role": "user", "content": "weather for two days?"})];
    let mut ids = Vec::new();
    for turn in 0..2 {
        let r = baton
            .post(json!({"model": "auto", "tools": [strict_tool()], "messages": messages}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "turn {turn}: {:?}", up.refusals());
        let v: Value = r.json().await.unwrap();
        let msg = v["choices"][0]["message"].clone();
        let id = msg["tool_calls"][0]["id"].as_str().unwrap().to_string();
        ids.push(id.clone());
        messages.push(msg);
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "18 C"}));
    }
    let r = baton
        .post(json!({"model": "auto", "tools": [strict_tool()], "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    assert_ne!(ids[0], ids[1], "tool call ids never repeat");
    let sent = &up.received()[2].body["body"]["contents"];
    let sig = sent[1]["parts"][0]["thoughtSignature"].as_str().unwrap();
    assert!(
        sig.starts_with("CiQB"),
        "Gemini's own signature went back: {sig}"
    );
    // A history another provider made: its calls carry no signature Gemini made.
    let foreign = json!([{"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "toolu_01", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":1}"}}]},
        {"role": "tool", "tool_call_id": "toolu_01", "content": "18 C"}]);
    let r = baton
        .post(json!({"model": "auto", "tools": [strict_tool()], "messages": foreign}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    assert_eq!(
        up.received()[3].body["body"]["contents"][1]["parts"][0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    baton.stop().await;
}

/// Claude Code streams every turn: two calls on two turns must have two ids, or it drops the
/// second and loops; a later result must go back under its own call's name.
#[tokio::test]
async fn streamed_tool_calls_get_ids_that_never_repeat() {
    let (_d, up, baton) = setup("gemini-2.5-flash").await;
    up.script([call("get_weather"), call("get_time")]);
    let tools = json!([{"name": "get_weather", "input_schema": {"type": "object"}},
        {"name": "get_time", "input_schema": {"type": "object"}}]);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = baton
            .messages(
                json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": true,
                "tools": tools, "messages": [{"role": "user", "content": "go"}]}),
            )
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        let start = sse_data(&text)
            .into_iter()
            .map(|d| serde_json::from_str::<Value>(&d).unwrap())
            .find(|v| v["content_block"]["type"] == "tool_use")
            .unwrap();
        ids.push(start["content_block"]["id"].as_str().unwrap().to_string());
    }
    assert_ne!(ids[0], ids[1]);
    baton.stop().await;
}

/// Gemini repeats usage on every chunk; a Chat Completions client that asked for usage gets
/// one usage chunk (LangChain sums them), and an Anthropic client's `message_start` names the
/// prompt's tokens.
#[tokio::test]
async fn a_stream_reports_its_usage_once() {
    let (_d, _up, baton) = setup("gemini-2.5-flash").await;
    let mut body = chat_body("auto", "one two three four", true);
    body["stream_options"] = json!({"include_usage": true});
    let text = baton.post(body).send().await.unwrap().text().await.unwrap();
    let usage: Vec<Value> = sse_data(&text)
        .iter()
        .filter(|d| d.as_str() != "[DONE]")
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter(|v| !v["usage"].is_null())
        .collect();
    assert_eq!(usage.len(), 1, "{usage:?}");
    assert_eq!(usage[0]["usage"]["prompt_tokens"], 11);
    assert_eq!(usage[0]["usage"]["completion_tokens"], 7);
    let r = baton
        .messages(
            json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "stream": true,
            "messages": [{"role": "user", "content": "a question of some length, to count"}]}),
        )
        .send()
        .await
        .unwrap();
    let events: Vec<Value> = sse_data(&r.text().await.unwrap())
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let start = events
        .iter()
        .find(|e| e["type"] == "message_start")
        .unwrap();
    assert!(
        start["message"]["usage"]["input_tokens"].as_u64().unwrap() > 0,
        "{start}"
    );
    assert_eq!(
        start["message"]["model"], "claude-sonnet-4-5",
        "the name the client asked for"
    );
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["usage"]["input_tokens"], 11);
    assert_eq!(delta["usage"]["output_tokens"], 7);
    baton.stop().await;
}

/// With thinking asked for, Gemini is asked for its thoughts, which reach the client as
/// thinking.
#[tokio::test]
async fn gemini_thoughts_reach_anthropic_clients_as_thinking() {
    let (_d, up, baton) = setup("gemini-2.5-pro").await;
    let r = baton
        .messages(json!({"model": "claude-sonnet-4-5", "max_tokens": 4000,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [{"role": "user", "content": "think"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        up.received()[0].body["body"]["generationConfig"]["thinkingConfig"]["includeThoughts"],
        true
    );
    assert_eq!(v["content"][0]["type"], "thinking", "{v}");
    assert_eq!(v["content"][0]["thinking"], "gemini thinks.");
    assert_eq!(v["model"], "claude-sonnet-4-5");
    baton.stop().await;
}

/// What the strict fake refuses, it refuses as Gemini does: a bare JSON Schema in `parameters`
/// is `400 INVALID_ARGUMENT` naming the unknown field.
#[tokio::test]
async fn the_fake_refuses_json_schema_in_parameters_as_gemini_does() {
    let up = FakeUpstream::start("gemini").await;
    up.expect_refusals();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let r = reqwest::Client::new()
        .post(format!(
            "{}/models/gemini-2.5-flash:generateContent",
            up.gemini_base_url()
        ))
        .json(
            &json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "f",
                "parameters": {"type": "object", "additionalProperties": false}}]}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(
        v["error"]["message"],
        "Invalid JSON payload received. Unknown name \"additionalProperties\" at 'tools[0].function_declarations[0].parameters': Cannot find field."
    );
}

/// A thought signature goes back only to the model that made it: when a Gemini 3 tool loop
/// fails over to another Gemini 3 model, that one gets the documented stand-in, not a signature
/// it would call corrupted.
#[tokio::test]
async fn a_signature_goes_back_only_to_the_model_that_made_it() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (
        FakeUpstream::start("g-one").await,
        FakeUpstream::start("g-two").await,
    );
    std::env::set_var("BT_GEMINI_WIRE_KEY", "gemini-wire-secret");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "one", "kind": "gemini", "baseUrl": one.gemini_base_url(),
             "keys": [{"env": "BT_GEMINI_WIRE_KEY"}], "models": ["gemini-3-pro-preview"], "priority": 1},
            {"id": "two", "kind": "gemini", "baseUrl": two.gemini_base_url(),
             "keys": [{"env": "BT_GEMINI_WIRE_KEY"}], "models": ["gemini-3-flash-preview"], "priority": 2}]}),
    )
    .await;
    one.script([call("get_weather")]);
    let mut messages = vec![json!({"role": "user", "content": "weather?"})];
    let r = baton
        .post(json!({"model": "auto", "tools": [strict_tool()], "messages": messages}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    let msg = v["choices"][0]["message"].clone();
    let id = msg["tool_calls"][0]["id"].as_str().unwrap().to_string();
    messages.push(msg);
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": "18 C"}));
    one.script([Behavior::rate_limited(Some(3600))]);
    let r = baton
        .post(json!({"model": "auto", "tools": [strict_tool()], "messages": messages}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", two.refusals());
    assert_eq!(header(&r, "x-gateway-provider"), "two");
    assert_eq!(
        two.received()[0].body["body"]["contents"][1]["parts"][0]["thoughtSignature"],
        "skip_thought_signature_validator"
    );
    baton.stop().await;
}
