//! Structured output an application can build on: when the client asks for JSON (any API's
//! form), the answer is checked before it is relayed. A fence, prose or a byte-order mark
//! around the one value is taken off and said (`x-baton-output: repaired`); an answer that is
//! not the JSON asked for (no value, one the schema refuses, one cut at the token limit) fails
//! over to the next candidate as `invalid_output`, cooling nothing; when every candidate fails
//! so, the client is told why in its API's shape. A tool call is the model's choice: unchecked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

fn schema() -> Value {
    json!({"type": "object", "properties": {"total": {"type": "number"}},
        "required": ["total"], "additionalProperties": false})
}

fn chat(text: &str) -> Value {
    json!({"model": "auto", "messages": [{"role": "user", "content": text}],
        "response_format": {"type": "json_schema",
            "json_schema": {"name": "estimate", "schema": schema(), "strict": true}}})
}

fn says(text: &str) -> Behavior {
    Behavior::Text(text.into())
}

/// Two providers in order, `first` and `second`, and Baton in front of them.
async fn setup() -> (FakeUpstream, FakeUpstream, tempfile::TempDir, Baton) {
    setup_routing(json!({})).await
}

/// The same, with these `routing` settings.
async fn setup_routing(routing: Value) -> (FakeUpstream, FakeUpstream, tempfile::TempDir, Baton) {
    let (first, second) = (
        FakeUpstream::start("first").await,
        FakeUpstream::start("second").await,
    );
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("first", &first.base_url(), 1),
            provider("second", &second.base_url(), 2)], "routing": routing}),
    )
    .await;
    (first, second, dir, baton)
}

#[tokio::test]
async fn a_fenced_or_prosy_answer_is_repaired_and_says_so() {
    let (first, second, _dir, baton) = setup().await;
    first.script([
        says("Sure! Here is the estimate:\n```json\n{\"total\": 12.5}\n```"),
        says("The total is {\"total\": 3} as asked."),
        says("{\"total\": 7}"),
    ]);
    for (want, how) in [
        ("{\"total\": 12.5}", "repaired"),
        ("{\"total\": 3}", "repaired"),
        ("{\"total\": 7}", "valid"),
    ] {
        let r = baton.post(chat("estimate")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-baton-output"), how);
        assert_eq!(header(&r, "x-gateway-provider"), "first");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], want, "{v}");
        assert_eq!(v["object"], "chat.completion");
    }
    assert!(second.received().is_empty());
    // A request that asked for no JSON is not checked, and says nothing.
    first.script([says("just prose")]);
    let r = baton.chat("auto", "hello").await;
    assert_eq!(header(&r, "x-baton-output"), "");
    baton.stop().await;
}

#[tokio::test]
async fn an_answer_the_schema_refuses_falls_over_and_cools_nothing() {
    let (first, second, _dir, baton) = setup().await;
    first.script([says("{\"sum\": 3}"), says("{\"total\": 1}")]);
    second.script([says("{\"total\": 4}")]);
    let r = baton.post(chat("estimate")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    assert_eq!(header(&r, "x-baton-output"), "valid");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "{\"total\": 4}");
    let log = baton.log().await;
    let first_try = &log[0].attempts[0];
    assert_eq!(first_try.class.as_str(), "invalid_output", "{first_try:?}");
    let reason = first_try.reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("does not fit the schema") && reason.contains("sum"),
        "{first_try:?}"
    );
    // The provider is well: nothing cools, and the next request goes to it first again.
    let state = baton.admin_state().await;
    for p in state["providers"].as_array().unwrap() {
        assert_eq!(p["cooldowns"], json!([]), "{p}");
    }
    let r = baton.post(chat("again")).send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "first");
    let metrics = baton.metrics().await;
    assert!(
        metrics.contains("invalid_output"),
        "the class is counted: {metrics}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn when_every_answer_is_invalid_the_client_is_told_why_in_its_apis_shape() {
    let (first, second, _dir, baton) = setup().await;
    first.script([says("I cannot give an estimate.")]);
    second.script([says("{\"total\": \"twelve\"}")]);
    let r = baton.post(chat("estimate")).send().await.unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert!(status.is_server_error(), "{status}: {v}");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("first") && message.contains("no JSON value"),
        "{message}"
    );
    assert!(
        message.contains("second") && message.contains("/total"),
        "{message}"
    );
    // The same in the Messages API's shape.
    first.script([says("no")]);
    second.script([says("nope")]);
    let r = baton
        .messages(json!({"model": "auto", "max_tokens": 100,
            "messages": [{"role": "user", "content": "estimate"}],
            "output_config": {"format": {"type": "json_schema", "schema": schema()}}}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error", "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no JSON value"));
    baton.stop().await;
}

#[tokio::test]
async fn a_value_cut_at_the_token_limit_is_not_repaired() {
    let (first, second, _dir, baton) = setup().await;
    first.script([says(
        "{\"total\": 3, \"lines\": [\"one\", \"two\", \"three\"]}",
    )]);
    second.script([says("{\"total\": 3}")]);
    let mut body = chat("estimate");
    body["response_format"] = json!({"type": "json_object"});
    body["max_tokens"] = json!(3);
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    let log = baton.log().await;
    assert!(
        log[0].attempts[0]
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("token limit"),
        "{:?}",
        log[0].attempts[0]
    );
    baton.stop().await;
}

/// Every API's way of asking for JSON is checked: Messages' `output_config.format`, Responses'
/// `text.format`, Gemini's `responseJsonSchema`; and a tool call is never checked.
#[tokio::test]
async fn every_apis_json_request_is_checked_and_a_tool_call_is_not() {
    let (first, second, _dir, baton) = setup().await;

    first.script([says("```\n{\"total\": 1}\n```")]);
    let r = baton
        .messages(json!({"model": "auto", "max_tokens": 100,
            "messages": [{"role": "user", "content": "estimate"}],
            "output_config": {"format": {"type": "json_schema", "schema": schema()}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-baton-output"), "repaired");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["content"][0]["text"], "{\"total\": 1}", "{v}");

    first.script([says("{\"sum\": 1}")]);
    second.script([says("{\"total\": 2}")]);
    let r = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .json(&json!({"model": "auto", "input": "estimate",
            "text": {"format": {"type": "json_schema", "name": "estimate", "schema": schema(), "strict": true}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    assert_eq!(header(&r, "x-baton-output"), "valid");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["output"][0]["content"][0]["text"], "{\"total\": 2}",
        "{v}"
    );

    first.script([says("Here: {\"total\": 5}")]);
    let r = baton
        .http
        .post(format!("{}/v1beta/models/auto:generateContent", baton.url))
        .header("x-goog-api-key", &baton.key)
        .json(&json!({"contents": [{"role": "user", "parts": [{"text": "estimate"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema()}}))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-baton-output"), "repaired");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"], "{\"total\": 5}",
        "{v}"
    );

    first.script([Behavior::ToolCall {
        name: "lookup".into(),
        arguments: "{\"q\": \"prices\"}".into(),
    }]);
    let mut body = chat("estimate");
    body["tools"] = json!([{"type": "function", "function": {"name": "lookup",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]);
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "first");
    assert_eq!(header(&r, "x-baton-output"), "");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "lookup"
    );
    baton.stop().await;
}

/// The log says how each JSON answer turned out (Activity shows it): a whole answer valid or
/// repaired, a stream checked at its end (it went out as it came, so anything around the value
/// is `invalid` there), and a request whose every answer was invalid.
#[tokio::test]
async fn the_log_says_how_each_json_answer_turned_out_streams_checked_at_their_end() {
    let (first, second, _dir, baton) = setup().await;
    first.script([says("```json\n{\"total\": 1}\n```")]);
    baton.post(chat("a")).send().await.unwrap();
    let mut streamed = chat("b");
    streamed["stream"] = json!(true);
    first.script([says("{\"total\": 2}")]);
    let r = baton.post(streamed.clone()).send().await.unwrap();
    assert_eq!(
        stream_text(&sse_data(&r.text().await.unwrap())),
        "{\"total\": 2}"
    );
    first.script([says("Here: {\"total\": 3}")]);
    let r = baton.post(streamed).send().await.unwrap();
    let raw = r.text().await.unwrap();
    assert_eq!(
        stream_text(&sse_data(&raw)),
        "Here: {\"total\": 3}",
        "a stream goes out as it came"
    );
    // Its verdict is the stream's last word before its end, a comment every client skips.
    let tail = raw.split(": baton-output: ").nth(1).unwrap_or_default();
    assert!(
        tail.starts_with("invalid (prose around the JSON value)\n\ndata: [DONE]"),
        "{raw}"
    );
    first.script([says("no")]);
    second.script([says("nope")]);
    let r = baton.post(chat("c")).send().await.unwrap();
    assert_eq!(header(&r, "x-baton-output"), "invalid");
    baton.chat("auto", "no json asked").await;
    let log = baton.log().await;
    let words: Vec<Option<&str>> = log.iter().rev().map(|r| r.output.as_deref()).collect();
    assert_eq!(
        words,
        [
            Some("repaired"),
            Some("valid"),
            Some("invalid"),
            Some("invalid"),
            None
        ]
    );
    baton.stop().await;
}

/// `routing.validateStreams`: a stream asking for JSON is read whole before it goes out, so one
/// that is not the JSON asked for still fails over, and one with a fence comes without it; the
/// verdict is a header, as for a whole answer. Every API's stream is covered.
#[tokio::test]
async fn validated_streams_fail_over_and_come_repaired_in_every_api() {
    let (first, second, _dir, baton) = setup_routing(json!({"validateStreams": true})).await;
    // Chat Completions: prose only, then the next provider's fenced value.
    first.script([says("I cannot do that")]);
    second.script([says("```json\n{\"total\": 9}\n```")]);
    let mut body = chat("estimate");
    body["stream"] = json!(true);
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    assert_eq!(header(&r, "x-baton-output"), "repaired");
    let raw = r.text().await.unwrap();
    assert_eq!(stream_text(&sse_data(&raw)), "{\"total\": 9}", "{raw}");
    assert!(raw.ends_with("data: [DONE]\n\n"), "{raw}");
    let row = &baton.log().await[0];
    let classes: Vec<_> = row.attempts.iter().map(|a| a.class.as_str()).collect();
    assert_eq!(classes, ["invalid_output", "ok"]);
    assert_eq!(row.output.as_deref(), Some("repaired"));

    // Messages: the schema refuses the first answer; the second one's events come as they were.
    first.script([says("{\"sum\": 1}")]);
    second.script([says("{\"total\": 2}")]);
    let r = baton
        .messages(json!({"model": "auto", "max_tokens": 100, "stream": true,
            "messages": [{"role": "user", "content": "estimate"}],
            "output_config": {"format": {"type": "json_schema", "schema": schema()}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    assert_eq!(header(&r, "x-baton-output"), "valid");
    let raw = r.text().await.unwrap();
    assert!(raw.contains("event: message_stop"), "{raw}");
    assert!(
        raw.contains("{\\\"total\\\": 2}") || raw.contains("total"),
        "{raw}"
    );

    // Responses and Gemini: a valid first answer streams from the first provider.
    for (path, body) in [
        (
            "/v1/responses",
            json!({"model": "auto", "input": "estimate", "stream": true,
            "text": {"format": {"type": "json_schema", "name": "e", "schema": schema(), "strict": true}}}),
        ),
        (
            "/v1beta/models/auto:streamGenerateContent?alt=sse",
            json!({
            "contents": [{"role": "user", "parts": [{"text": "estimate"}]}],
            "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": schema()}}),
        ),
    ] {
        first.script([says("{\"total\": 3}")]);
        let r = baton
            .http
            .post(format!("{}{path}", baton.url))
            .bearer_auth(&baton.key)
            .header("x-goog-api-key", &baton.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(header(&r, "x-gateway-provider"), "first", "{path}");
        assert_eq!(header(&r, "x-baton-output"), "valid", "{path}");
        let raw = r.text().await.unwrap();
        assert!(raw.contains("total"), "{path}: {raw}");
    }
    // Every candidate streaming something else: the client gets the error, nothing streamed.
    first.script([says("no")]);
    second.script([says("nope")]);
    let mut body = chat("estimate");
    body["stream"] = json!(true);
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status().as_u16() / 100, 5);
    assert_eq!(header(&r, "x-baton-output"), "invalid");
    baton.stop().await;
}

/// A model without structured output (`capabilities.structuredOutput: false`, or the model's
/// own `structuredOutput`) is told the schema in its system prompt instead of being sent the
/// format it would refuse or ignore; its answer is checked all the same, and a same-API
/// client's body is translated for it rather than relayed with the format in it.
#[tokio::test]
async fn a_model_without_structured_output_is_told_the_schema() {
    let small = FakeUpstream::start("small").await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = provider("small", &small.base_url(), 1);
    p["capabilities"] = json!({"structuredOutput": false});
    let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;
    small.script([says("Sure: {\"total\": 4}")]);
    let r = baton.post(chat("estimate")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-baton-output"), "repaired");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "{\"total\": 4}");
    let sent = &small.received()[0].body;
    assert!(sent.get("response_format").is_none(), "{sent}");
    let system = sent["messages"][0]["content"].as_str().unwrap_or_default();
    assert_eq!(sent["messages"][0]["role"], "system", "{sent}");
    assert!(
        system.starts_with("Answer with exactly one JSON value and nothing else")
            && system.contains("\"required\":[\"total\"]"),
        "{system}"
    );
    baton.stop().await;
}
