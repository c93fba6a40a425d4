//! The fake upstreams refuse what the real APIs refuse, in their status, shape and words: a
//! fake that accepts what the real API refuses lets a regression through (a streamed Messages
//! request with `stream_options` once passed every test and broke every Claude client).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use testkit::FakeUpstream;

async fn post(url: String, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut rb = reqwest::Client::new().post(url).json(&body);
    for (k, v) in headers {
        rb = rb.header(*k, *v);
    }
    let r = rb.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

const ANTHROPIC: [(&str, &str); 2] = [("x-api-key", "k"), ("anthropic-version", "2023-06-01")];

#[tokio::test]
async fn the_messages_fake_refuses_unknown_fields_and_broken_tool_turns() {
    let up = FakeUpstream::start("claude").await;
    up.expect_refusals();
    let url = format!("{}/messages", up.base_url());
    let base = json!({"model": "claude-sonnet-4-5", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]});
    let (status, v) = post(url.clone(), &ANTHROPIC, base.clone()).await;
    assert_eq!(status, 200, "{v}");
    let mut bad = base.clone();
    bad["stream"] = json!(true);
    bad["stream_options"] = json!({"include_usage": true});
    let (status, v) = post(url.clone(), &ANTHROPIC, bad).await;
    assert_eq!(status, 400);
    assert_eq!(
        v,
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": "stream_options: Extra inputs are not permitted"},
            "request_id": "req_fake_contract"})
    );
    let mut no_max = base.clone();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let (_, v) = post(url.clone(), &ANTHROPIC, no_max).await;
    assert_eq!(v["error"]["message"], "max_tokens: Field required");
    // A repeated tool_use id (what position-made Gemini ids gave a failed-over history).
    let call = |id: &str| json!({"type": "tool_use", "id": id, "name": "f", "input": {}});
    let result = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"});
    let mut dup = base.clone();
    dup["messages"] = json!([{"role": "user", "content": "go"},
        {"role": "assistant", "content": [call("call_0")]}, {"role": "user", "content": [result("call_0")]},
        {"role": "assistant", "content": [call("call_0")]}, {"role": "user", "content": [result("call_0")]}]);
    let (status, v) = post(url.clone(), &ANTHROPIC, dup).await;
    assert_eq!(status, 400);
    assert_eq!(
        v["error"]["message"],
        "messages.3.content: `tool_use` ids must be unique"
    );
    let mut stray = base.clone();
    stray["messages"] = json!([{"role": "user", "content": [result("toolu_x")]}]);
    let (_, v) = post(url.clone(), &ANTHROPIC, stray).await;
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("unexpected `tool_use_id` found in `tool_result` blocks: toolu_x"));
    let mut unanswered = base;
    unanswered["messages"] = json!([{"role": "user", "content": "go"},
        {"role": "assistant", "content": [call("toolu_a")]}, {"role": "user", "content": "and?"}]);
    let (_, v) = post(url, &ANTHROPIC, unanswered).await;
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("messages.1: `tool_use` ids were found without `tool_result` blocks"));
    assert_eq!(up.refusals().len(), 5);
}

#[tokio::test]
async fn the_chat_and_responses_fakes_refuse_as_openai_does() {
    let up = FakeUpstream::start("openai").await;
    up.expect_refusals();
    let auth = [("authorization", "Bearer k")];
    let url = format!("{}/chat/completions", up.base_url());
    let (status, v) = post(
        url.clone(),
        &auth,
        json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}],
            "thinking": {"type": "enabled"}}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        v,
        json!({"error": {"message": "Unknown parameter: 'thinking'.",
            "type": "invalid_request_error", "param": "thinking", "code": "unknown_parameter"}})
    );
    let (_, v) = post(
        url.clone(),
        &auth,
        json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"},
            {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "and?"}]}),
    )
    .await;
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .ends_with("did not have response messages: call_1"));
    let (_, v) = post(
        url,
        &auth,
        json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi", "cache": 1}]}),
    )
    .await;
    assert_eq!(v["error"]["param"], "messages[0].cache");
    let url = format!("{}/responses", up.base_url());
    let (status, v) = post(
        url.clone(),
        &auth,
        json!({"model": "gpt-5", "input": [{"type": "function_call", "call_id": "c1",
            "name": "f", "arguments": "{}"}]}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        v["error"]["message"],
        "No tool output found for function call c1."
    );
    let (_, v) = post(
        url,
        &auth,
        json!({"model": "gpt-5", "input": "hi", "tools": [{"type": "function",
            "parameters": {"type": "object"}}]}),
    )
    .await;
    assert_eq!(
        v["error"]["message"],
        "Missing required parameter: 'tools[0].name'."
    );
    assert_eq!(up.refusals().len(), 5);
}

#[tokio::test]
async fn the_gemini_fake_wants_gemini_3_signatures_and_paired_responses() {
    let up = FakeUpstream::start("gemini").await;
    up.expect_refusals();
    let url = format!(
        "{}/models/gemini-3-pro:generateContent",
        up.gemini_base_url()
    );
    let key = [("x-goog-api-key", "k")];
    let turns = |call: Value| {
        json!({"contents": [{"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [call]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]})
    };
    let (status, v) = post(
        url.clone(),
        &key,
        turns(json!({"functionCall": {"name": "f", "args": {}}})),
    )
    .await;
    assert_eq!(status, 400);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Function call is missing a thought_signature in functionCall parts."));
    let (status, _) = post(
        url.clone(),
        &key,
        turns(json!({"functionCall": {"name": "f", "args": {}},
            "thoughtSignature": "skip_thought_signature_validator"})),
    )
    .await;
    assert_eq!(status, 200, "the documented stand-in is accepted");
    let (status, v) = post(
        url,
        &key,
        json!({"contents": [{"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}},
                "thoughtSignature": "skip_thought_signature_validator"},
                {"functionCall": {"name": "g", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}]}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(v["error"]["message"].as_str().unwrap().contains(
        "number of function response parts is equal to the number of function call parts"
    ));
    assert_eq!(up.refusals().len(), 2);
}

/// The contract check: a test whose fake refused a body fails when the fake is dropped, even if
/// the test itself never looked.
#[tokio::test]
async fn a_refusal_nobody_expected_fails_the_test() {
    let up = FakeUpstream::start("claude").await;
    let (status, _) = post(
        format!("{}/messages", up.base_url()),
        &ANTHROPIC,
        json!({"model": "m", "max_tokens": 1, "messages": [], "top_k": 3}),
    )
    .await;
    assert_eq!(status, 400);
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(up)));
    assert!(dropped.is_err(), "dropping the fake fails the test");
}

/// The Responses fake stands for what Codex does with a call of the wrong type: a
/// `function_call` to a tool declared `custom` is refused, so a gateway that turned a freeform
/// tool into a function fails at once rather than in a user's session.
#[tokio::test]
async fn the_responses_fake_refuses_a_function_call_to_a_freeform_tool() {
    let up = FakeUpstream::start("resp").await;
    up.expect_refusals();
    let body = json!({"model": "m", "stream": false,
        "tools": [{"type": "custom", "name": "exec"}],
        "input": [{"type": "message", "role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "exec", "arguments": "{\"input\":\"x\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "aborted"}]});
    let url = format!("{}/responses", up.base_url());
    let (status, _) = post(url, &[("authorization", "Bearer k")], body).await;
    assert_eq!(status, 400);
    let refusals = up.refusals();
    assert!(refusals[0].contains("incompatible payload"), "{refusals:?}");
}

/// The Gemini fake refuses a JSON Schema keyword Google's reference does not list for
/// `parametersJsonSchema`, naming it (tests/it/gemini_upstream.rs shows Baton never sends one).
#[tokio::test]
async fn the_gemini_fake_refuses_a_keyword_its_reference_does_not_list() {
    let up = FakeUpstream::start("gemini").await;
    up.expect_refusals();
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "parametersJsonSchema":
            {"type": "object", "properties": {"t": {"type": "array", "uniqueItems": true}}}}]}]});
    let url = format!("{}/models/m:generateContent", up.gemini_base_url());
    let (status, _) = post(url, &[("x-goog-api-key", "k")], body).await;
    assert_eq!(status, 400);
    let refusals = up.refusals();
    assert!(refusals[0].contains("'uniqueItems'"), "{refusals:?}");
}

/// Standing for Mistral, the Chat fake refuses a tool call id that is not nine letters and
/// digits, in Mistral's words (so tests/it/anthropic_upstream.rs proves Baton's rewrite, not a
/// lenient fake).
#[tokio::test]
async fn the_mistral_fake_refuses_ids_outside_its_rule() {
    let up = FakeUpstream::start("mistral").await;
    up.mistral_tool_ids();
    up.expect_refusals();
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]});
    let (status, _) = post(format!("{}/chat/completions", up.base_url()), &[], body).await;
    assert_eq!(status, 400);
    let refusals = up.refusals();
    assert!(
        refusals[0].contains("must be a-z, A-Z, 0-9, with a length of 9"),
        "{refusals:?}"
    );
}
