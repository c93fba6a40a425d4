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
