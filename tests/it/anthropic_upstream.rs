//! The `anthropic` upstream kind: Anthropic clients pass through unchanged (but for the model),
//! OpenAI clients are translated both ways, streaming included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup() -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("claude").await;
    std::env::set_var("BT_ANTHROPIC_UP_KEY", "sk-ant-upstream-secret");
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "anthropic", "kind": "anthropic", "baseUrl": up.base_url(),
            "keys": [{"env": "BT_ANTHROPIC_UP_KEY"}], "models": ["claude-real-model"]}],
            "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    (dir, up, baton)
}

#[tokio::test]
async fn anthropic_clients_pass_through_with_their_fields_and_headers() {
    let (_d, up, baton) = setup().await;
    let body = json!({"model": "claude-opus-4-8", "max_tokens": 50,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u1"},
        "messages": [{"role": "user", "content": "hello"}]});
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["content"][0]["type"], "thinking",
        "the upstream's signed thinking, passed through"
    );
    assert_eq!(v["content"][1]["text"], "claude: hello");
    let got = &up.received()[0];
    assert_eq!(got.headers["x-api-key"], "sk-ant-upstream-secret");
    assert_eq!(got.headers["anthropic-version"], "2023-06-01");
    assert_eq!(
        got.headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );
    let mut expected = body.clone();
    expected["model"] = json!("claude-real-model");
    assert_eq!(
        got.body, expected,
        "unchanged but for the model: thinking, cache_control, metadata kept"
    );
    baton.stop().await;
}

/// The regression that broke every streaming Claude client on an Anthropic provider: a streamed
/// Messages body must reach the upstream with Messages fields only (the real API refuses
/// `stream_options` with "Extra inputs are not permitted"); streamed usage comes from
/// `message_start` and `message_delta`.
#[tokio::test]
async fn a_streamed_messages_request_carries_only_messages_fields() {
    let (_d, up, baton) = setup().await;
    let body = json!({"model": "claude-opus-4-8", "max_tokens": 50, "stream": true,
        "messages": [{"role": "user", "content": "hello"}]});
    let r = baton.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(text.contains("event: message_stop"), "{text}");
    assert!(up.refusals().is_empty(), "{:?}", up.refusals());
    let mut expected = body.clone();
    expected["model"] = json!("claude-real-model");
    assert_eq!(
        up.received()[0].body,
        expected,
        "nothing added, nothing dropped"
    );
    let log = baton.log().await;
    assert_eq!(
        (log[0].input_tokens, log[0].output_tokens),
        (Some(11), Some(7))
    );
    baton.stop().await;
}

#[tokio::test]
async fn openai_clients_are_translated_to_messages_and_back() {
    let (_d, up, baton) = setup().await;
    let r = baton
        .post(json!({"model": "auto", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"}, {"role": "user", "content": "there"}], "seed": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["content"], "claude: there");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 11);
    let sent = &up.received()[0].body;
    assert_eq!(sent["system"], "be brief");
    assert_eq!(
        sent["messages"].as_array().unwrap().len(),
        1,
        "same-role turns merged"
    );
    assert_eq!(sent["max_tokens"], 4096, "filled in: Anthropic requires it");
    assert!(
        sent.get("seed").is_none(),
        "OpenAI-only fields are not sent to Anthropic"
    );

    // Streamed, with a tool call.
    up.script([Behavior::ToolCall {
        name: "get_weather".into(),
        arguments: "{\"city\":\"Paris\"}".into(),
    }]);
    let mut body = chat_body("auto", "weather?", true);
    body["tools"] = json!([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]);
    let events = sse_data(&baton.post(body).send().await.unwrap().text().await.unwrap());
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
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
    let sent = &up.received()[1].body;
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(sent["tools"][0]["input_schema"], json!({"type": "object"}));
    // Plain text stream.
    let events = sse_data(
        &baton
            .post(chat_body("auto", "one two", true))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert_eq!(stream_text(&events), "claude: one two");
    baton.stop().await;
}

#[tokio::test]
async fn anthropic_errors_are_classified_and_breaks_end_explicitly() {
    let (_d, up, baton) = setup().await;
    up.script([Behavior::Status { status: 429, body: json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}),
        headers: vec![("retry-after".into(), "30".into())] }]);
    let r = baton.chat("auto", "x").await;
    assert_eq!(r.status(), 429);
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!((cd.len(), cd[0].class.as_str()), (1, "rate"));
    baton.handle.core.routing.cooldowns.clear(&cd[0].scope);
    up.script([Behavior::StreamDies(1)]);
    let r = baton.http.post(format!("{}/v1/messages", baton.url)).header("x-api-key", &baton.key)
        .json(&json!({"model": "claude-x", "max_tokens": 50, "stream": true, "messages": [{"role": "user", "content": "one two three"}]}))
        .send().await.unwrap();
    let text = r.text().await.unwrap();
    assert!(
        text.contains("event: error") && !text.contains("message_stop"),
        "{text}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn count_tokens_is_exact_through_an_anthropic_provider() {
    let (_d, up, baton) = setup().await;
    let r = baton
        .count_tokens(
            json!({"model": "claude-x", "messages": [{"role": "user", "content": "hello"}]}),
        )
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["input_tokens"], 4242, "the provider's own count");
    let got = up.received();
    assert_eq!(got[0].body["model"], "claude-real-model");
    assert_eq!(got[0].headers["x-api-key"], "sk-ant-upstream-secret");
    assert!(got[0].headers.contains_key("anthropic-version"));
    baton.stop().await;
}

/// A conversation several providers served carries the ids each made: two that both numbered
/// their calls `call_1`, and one whose ids hold characters the Messages API refuses. The strict
/// fake (unique `tool_use` ids, each result after its call) takes the translated request; the
/// ids it got are unique, in Anthropic's characters, each result beside its own call.
#[tokio::test]
async fn tool_ids_from_other_providers_are_made_valid_for_anthropic() {
    let (_d, up, baton) = setup().await;
    let call = |id: &str, cmd: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "shell", "arguments": json!({"cmd": cmd}).to_string()}}]})
    };
    let result = |id: &str, out: &str| json!({"role": "tool", "tool_call_id": id, "content": out});
    let body = json!({"model": "claude-x", "max_tokens": 50,
        "tools": [{"type": "function", "function": {"name": "shell",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}],
        "messages": [{"role": "user", "content": "go"},
            call("call_1", "ls"), result("call_1", "a.txt"),
            call("call_1", "cat a.txt"), result("call_1", "hello"),
            call("functions.shell:2", "pwd"), result("functions.shell:2", "/tmp")]});
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let sent = &up.received()[0].body;
    let blocks: Vec<(String, String)> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter_map(|b| match b["type"].as_str() {
            Some("tool_use") => Some(("use".into(), b["id"].as_str()?.into())),
            Some("tool_result") => Some(("result".into(), b["tool_use_id"].as_str()?.into())),
            _ => None,
        })
        .collect();
    let pairs: Vec<(&str, &str)> = blocks
        .iter()
        .map(|(k, id)| (k.as_str(), id.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("use", "call_1"),
            ("result", "call_1"),
            ("use", "call_1_2"),
            ("result", "call_1_2"),
            ("use", "functions_shell_2"),
            ("result", "functions_shell_2")
        ]
    );
    baton.stop().await;
}

/// An `openai-compatible` provider that declares Mistral's rule (`capabilities.toolCallIds`:
/// nine letters and digits; the catalog's Mistral entry does) gets a conversation another
/// provider served with ids it takes: the strict fake standing for Mistral refuses any other
/// id in Mistral's words. The ids are derived the same way every turn, and each result follows
/// its call; an id that already fits stays.
#[tokio::test]
async fn tool_ids_fit_a_provider_that_declares_mistrals_rule() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("mistral").await;
    up.mistral_tool_ids();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "mistral", "kind": "openai-compatible",
            "baseUrl": up.base_url(), "models": ["mistral-small-latest"],
            "capabilities": {"toolCallIds": "nine-alphanumerics"}}]}),
    )
    .await;
    // Claude Code's conversation (Anthropic ids), and one call whose id already fits.
    let body = json!({"model": "auto", "max_tokens": 50,
        "tools": [{"name": "Bash", "input_schema": {"type": "object",
            "properties": {"command": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "a.txt"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "abcDEF123",
                "name": "Bash", "input": {"command": "pwd"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "abcDEF123",
                "content": "/tmp"}]}]});
    for _ in 0..2 {
        let r = baton.messages(body.clone()).send().await.unwrap();
        assert_eq!(r.status(), 200, "{:?}", up.refusals());
    }
    let sent: Vec<Value> = up.received().iter().map(|r| r.body.clone()).collect();
    let ids = |b: &Value| -> Vec<String> {
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| {
                let calls = m["tool_calls"].as_array().cloned().unwrap_or_default();
                calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap().to_string())
                    .chain(m["tool_call_id"].as_str().map(str::to_string))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let first = ids(&sent[0]);
    assert_eq!(first.len(), 4, "{first:?}");
    assert_eq!(first[0], first[1], "the result follows its call");
    assert!(first[0].len() == 9 && first[0].bytes().all(|b| b.is_ascii_alphanumeric()));
    assert_eq!(
        &first[2..],
        ["abcDEF123", "abcDEF123"],
        "an id that fits stays"
    );
    assert_eq!(ids(&sent[1]), first, "the same ids on every turn");
    baton.stop().await;
}
