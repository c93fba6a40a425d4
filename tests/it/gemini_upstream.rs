//! The native `gemini` upstream kind behind both endpoints: translation, streaming, tool calls,
//! and Gemini's structured errors reaching the limit logic.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup() -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("gemini").await;
    std::env::set_var("BT_GEMINI_UP_KEY", "gemini-upstream-secret");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "gemini", "kind": "gemini", "baseUrl": up.gemini_base_url(),
            "keys": [{"env": "BT_GEMINI_UP_KEY"}], "models": ["gemini-2.5-flash"],
            "dayReset": "America/Los_Angeles"}], "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    (dir, up, baton)
}

#[tokio::test]
async fn openai_clients_get_gemini_answers() {
    let (_d, up, baton) = setup().await;
    let r = baton
        .post(json!({"model": "auto", "max_tokens": 40, "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "gemini: hello");
    assert_eq!(v["usage"]["completion_tokens"], 7);
    let got = &up.received()[0];
    assert_eq!(got.body["path"], "gemini-2.5-flash:generateContent");
    assert_eq!(got.headers["x-goog-api-key"], "gemini-upstream-secret");
    assert_eq!(
        got.body["body"]["systemInstruction"],
        json!({"parts": [{"text": "be brief"}]})
    );
    assert_eq!(got.body["body"]["generationConfig"]["maxOutputTokens"], 40);

    let events = sse_data(
        &baton
            .post(chat_body("auto", "one two three", true))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(stream_text(&events), "gemini: one two three");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(
        up.received()[1].body["path"],
        "gemini-2.5-flash:streamGenerateContent"
    );

    up.script([Behavior::ToolCall {
        name: "get_weather".into(),
        arguments: "{\"city\":\"Paris\"}".into(),
    }]);
    let mut body = chat_body("auto", "weather?", false);
    body["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let v: Value = baton.post(body).send().await.unwrap().json().await.unwrap();
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["name"],
        "get_weather"
    );
    assert_eq!(
        up.received()[2].body["body"]["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    baton.stop().await;
}

#[tokio::test]
async fn anthropic_clients_stream_from_gemini() {
    let (_d, _up, baton) = setup().await;
    let r = baton.http.post(format!("{}/v1/messages", baton.url)).header("x-api-key", &baton.key)
        .json(&json!({"model": "claude-opus-4-8", "max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "one two"}]}))
        .send().await.unwrap();
    let text = r.text().await.unwrap();
    assert!(
        text.contains("event: message_start")
            && text
                .trim_end()
                .ends_with(r#"data: {"type":"message_stop"}"#),
        "{text}"
    );
    let deltas: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v.pointer("/delta/text")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    assert_eq!(deltas, "gemini: one two");
    baton.stop().await;
}

#[tokio::test]
async fn daily_quota_errors_cool_until_pacific_midnight() {
    let (_d, up, baton) = setup().await;
    up.script([Behavior::Status { status: 429, body: json!({"error": {"code": 429, "message": "You exceeded your current quota",
        "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}), headers: vec![] }]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(r.status(), 429);
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd[0].class.as_str(), "rate");
    assert_eq!(
        cd[0].scope.model.as_deref(),
        Some("gemini-2.5-flash"),
        "per-model quota"
    );
    let until = jiff::Timestamp::from_millisecond(cd[0].until_ms)
        .unwrap()
        .to_zoned_datetime(jiff::tz::TimeZone::get("America/Los_Angeles").unwrap());
    assert_eq!(
        (until.hour(), until.minute()),
        (0, 0),
        "next midnight in Los Angeles: {until}"
    );
    baton.stop().await;
}

/// The schema keywords peers' users found Gemini refusing one at a time, each in a tool's
/// parameters and in the answer's schema of a Chat client's request: the strict fake (which
/// refuses every keyword Google's reference does not list, and anything beside a `$ref`) takes
/// each translated request; a constraint's meaning is kept in the description.
#[tokio::test]
async fn schema_keywords_gemini_refuses_never_reach_it() {
    let (_d, up, baton) = setup().await;
    let cases = [
        (
            "$schema",
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema"}),
        ),
        (
            "$ref with siblings",
            json!({"properties": {"n": {"$ref": "#/$defs/n",
            "description": "a node"}}, "$defs": {"n": {"type": "string"}}}),
        ),
        ("$comment", json!({"$comment": "made by a tool"})),
        (
            "enumDescriptions",
            json!({"properties": {"m": {"type": "string", "enum": ["a", "b"],
            "enumDescriptions": ["first", "second"]}}}),
        ),
        (
            "uniqueItems",
            json!({"properties": {"t": {"type": "array",
            "items": {"type": "string"}, "uniqueItems": true}}}),
        ),
        (
            "multipleOf",
            json!({"properties": {"s": {"type": "number", "multipleOf": 5}}}),
        ),
        (
            "propertyNames",
            json!({"properties": {"e": {"type": "object",
            "propertyNames": {"pattern": "^[A-Z]+$"}}}}),
        ),
        (
            "patternProperties",
            json!({"properties": {"e": {"type": "object",
            "patternProperties": {"^x-": {"type": "string"}}}}}),
        ),
        ("defer_loading", json!({"defer_loading": true})),
    ];
    for (name, extra) in cases {
        let mut schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        for (k, v) in extra.as_object().unwrap() {
            match (k.as_str(), schema.get_mut(k)) {
                ("properties", Some(Value::Object(p))) => {
                    p.extend(v.as_object().unwrap().clone());
                }
                _ => {
                    schema[k] = v.clone();
                }
            }
        }
        let body = json!({"model": "auto", "messages": [{"role": "user", "content": "go"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "out",
                "schema": schema}}});
        let r = baton.post(body).send().await.unwrap();
        assert_eq!(r.status(), 200, "{name}: {:?}", up.refusals());
        let sent = up.received().last().unwrap().body["body"].clone();
        let params =
            sent["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"].to_string();
        let key = name.split(' ').next().unwrap();
        assert!(
            !params.contains(&format!("\"{key}\"")) || key == "$ref",
            "{name}: {params}"
        );
        assert!(up.refusals().is_empty(), "{name}: {:?}", up.refusals());
    }
    let sent = up.received();
    let unique = sent[4].body["body"]["tools"][0]["functionDeclarations"][0]
        ["parametersJsonSchema"]["properties"]["t"]["description"]
        .clone();
    assert!(unique.as_str().unwrap().contains("unique"), "{unique}");
    baton.stop().await;
}
