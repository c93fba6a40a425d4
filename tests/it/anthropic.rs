//! The Anthropic Messages endpoint served by OpenAI-compatible upstreams: translation both
//! ways, streaming event sequence, tool use, failover, errors in Anthropic's shape.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup() -> (tempfile::TempDir, FakeUpstream, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut pa = provider("a", &a.base_url(), 10);
    pa["timeouts"]["idleMs"] = json!(500);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa, provider("b", &b.base_url(), 20)],
            "routes": {"fast": ["b"]},
            "modelMap": {"claude-*": "auto", "claude-haiku-*": "fast"}}),
    )
    .await;
    (dir, a, b, baton)
}

fn messages(baton: &Baton, body: Value) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!("{}/v1/messages?beta=true", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
}

fn ask(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 256, "stream": stream,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
}

/// `(event, data)` pairs of an Anthropic stream.
fn events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .map(|f| {
            let ev = f
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or("")
                .to_string();
            let data = f
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str(d).unwrap())
                .unwrap_or(Value::Null);
            (ev, data)
        })
        .collect()
}

#[tokio::test]
async fn a_message_is_translated_both_ways() {
    let (_d, a, b, baton) = setup().await;
    let r = messages(&baton, ask("claude-sonnet-4-5-20250929", "hello", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "a");
    assert_eq!(
        header(&r, "x-gateway-model"),
        "a-model",
        "the model that served"
    );
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(
        v["model"], "claude-sonnet-4-5-20250929",
        "the name the client asked for: Claude Code drops thinking under another name"
    );
    assert_eq!(v["content"], json!([{"type": "text", "text": "a: hello"}]));
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(
        (
            v["usage"]["input_tokens"].as_u64(),
            v["usage"]["output_tokens"].as_u64()
        ),
        (Some(11), Some(7))
    );
    let sent = &a.received()[0].body;
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(
        sent["messages"][1],
        json!({"role": "user", "content": "hello"})
    );
    assert_eq!(sent["max_tokens"], 256);
    // The most specific modelMap pattern wins.
    let r = messages(&baton, ask("claude-haiku-4-5", "hi", false))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(b.hits(), 1);
    baton.stop().await;
}

#[tokio::test]
async fn streams_use_anthropics_event_sequence() {
    let (_d, _a, _b, baton) = setup().await;
    let r = messages(&baton, ask("claude-opus-4-1", "one two three", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let evs = events(&r.text().await.unwrap());
    let names: Vec<&str> = evs.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(
        &names[names.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    let text: String = evs
        .iter()
        .filter(|(e, d)| e == "content_block_delta" && d["delta"]["type"] == "text_delta")
        .map(|(_, d)| d["delta"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "a: one two three");
    let delta = &evs.iter().find(|(e, _)| e == "message_delta").unwrap().1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(
        delta["usage"]["output_tokens"], 7,
        "usage requested from the upstream"
    );
    assert_eq!(
        evs[0].1["message"]["model"], "claude-opus-4-1",
        "the name asked for"
    );
    assert!(
        evs[0].1["message"]["usage"]["input_tokens"]
            .as_u64()
            .unwrap()
            > 0,
        "message_start names the prompt's tokens, not 0"
    );
    baton.stop().await;
}

#[tokio::test]
async fn tool_use_round_trip() {
    let (_d, a, _b, baton) = setup().await;
    a.script([
        Behavior::ToolCall {
            name: "get_weather".into(),
            arguments: "{\"city\":\"Paris\"}".into(),
        },
        Behavior::ToolCall {
            name: "get_weather".into(),
            arguments: "{\"city\":\"Paris\"}".into(),
        },
    ]);
    let tools = json!([{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let mut body = ask("claude-sonnet-4-5", "weather in Paris?", false);
    body["tools"] = tools.clone();
    let v: Value = messages(&baton, body.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["stop_reason"], "tool_use");
    let call = &v["content"][0];
    assert_eq!(
        (call["type"].as_str(), call["name"].as_str()),
        (Some("tool_use"), Some("get_weather"))
    );
    assert_eq!(call["input"], json!({"city": "Paris"}));
    assert_eq!(
        a.received()[0].body["tools"][0]["function"]["name"],
        "get_weather"
    );

    // Streamed: the arguments arrive as input_json_delta on a tool_use block.
    body["stream"] = json!(true);
    let evs = events(
        &messages(&baton, body)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    let start = evs
        .iter()
        .find(|(e, d)| e == "content_block_start" && d["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(start.1["content_block"]["name"], "get_weather");
    let json_text: String = evs
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(json_text, "{\"city\":\"Paris\"}");

    // The tool result goes back as an OpenAI tool message.
    let follow = json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": tools, "messages": [
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call["id"], "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "18 C"}]}]});
    let v: Value = messages(&baton, follow)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["content"][0]["type"], "text");
    let received = a.received();
    let sent = &received.last().unwrap().body;
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(
        msgs[2],
        json!({"role": "tool", "tool_call_id": call["id"], "content": "18 C"})
    );
    baton.stop().await;
}

#[tokio::test]
async fn failover_and_errors_in_anthropic_shape() {
    let (_d, a, b, baton) = setup().await;
    a.script([Behavior::rate_limited(Some(60))]);
    let r = messages(&baton, ask("claude-sonnet-4-5", "x", true))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert!(r.text().await.unwrap().contains("message_stop"));

    let err = |v: &Value| {
        (
            v["type"].as_str().map(str::to_string),
            v["error"]["type"].as_str().map(str::to_string),
        )
    };
    let r = messages(&baton, ask("gpt-nope", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(
        err(&r.json().await.unwrap()),
        (Some("error".into()), Some("not_found_error".into()))
    );
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .json(&ask("claude-x", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        err(&r.json().await.unwrap()).1.as_deref(),
        Some("authentication_error")
    );
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("authorization", format!("Bearer {}", baton.key))
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "Bearer accepted too; bad JSON is a 400");
    assert_eq!(
        err(&r.json().await.unwrap()).1.as_deref(),
        Some("invalid_request_error")
    );
    b.script([Behavior::rate_limited(Some(45))]);
    let r = messages(&baton, ask("claude-sonnet-4-5", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").parse::<u64>().unwrap() >= 44);
    assert_eq!(
        err(&r.json().await.unwrap()).1.as_deref(),
        Some("rate_limit_error")
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_stream_breaking_mid_answer_ends_with_an_error_event() {
    let (_d, a, b, baton) = setup().await;
    a.script([Behavior::StreamDies(2)]);
    let r = messages(&baton, ask("claude-sonnet-4-5", "one two three four", true))
        .send()
        .await
        .unwrap();
    let evs = events(&r.text().await.unwrap());
    let (last, data) = evs.last().unwrap();
    assert_eq!(last, "error");
    assert_eq!(data["error"]["type"], "api_error");
    assert!(
        !evs.iter().any(|(e, _)| e == "message_stop"),
        "never looks complete"
    );
    assert_eq!(b.hits(), 0);
    baton.stop().await;
}

#[tokio::test]
async fn count_tokens_models_and_probes() {
    let (_d, _a, _b, baton) = setup().await;
    let r = baton.count_tokens(json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "x".repeat(400)}]}))
        .send().await.unwrap();
    assert_eq!(header(&r, "x-baton-token-count"), "estimate");
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["input_tokens"], 107,
        "the stated estimate: four characters a token, and the message's own tokens"
    );
    let v: Value = baton
        .http
        .get(format!("{}/v1/models", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        v["data"][0],
        json!({"type": "model", "id": "auto", "display_name": "auto", "created_at": "1970-01-01T00:00:00Z"})
    );
    assert_eq!(v["has_more"], false);
    for method in [reqwest::Method::HEAD, reqwest::Method::GET] {
        assert_eq!(
            baton
                .http
                .request(method, format!("{}/", baton.url))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    baton.stop().await;
}

#[tokio::test]
async fn claude_codes_large_max_tokens_is_capped_to_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let mut pa = provider("a", &a.base_url(), 10);
    pa["models"] = json!([{"id": "small", "contextWindow": 32768, "maxOutputTokens": 8192}]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [pa], "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let mut body = ask("claude-opus-4-8", "hi", false);
    body["max_tokens"] = json!(64000);
    let r = messages(&baton, body).send().await.unwrap();
    assert_eq!(
        r.status(),
        200,
        "not filtered out for a window smaller than the asked max_tokens"
    );
    assert_eq!(a.received()[0].body["max_tokens"], 8192);
    baton.stop().await;
}

/// The anthropic SDKs' tool runners continue a message thread with only the new turn; on a
/// translated path Baton has no thread to continue and says so the way the SDKs recover from
/// (`error.details.error_code: thread_not_found`), and their full replay is served.
#[tokio::test]
async fn a_message_thread_on_a_translated_path_is_replayed_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)], "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let send = |body: Value| {
        baton
            .http
            .post(format!("{}/v1/messages", baton.url))
            .header("x-api-key", &baton.key)
            .header("anthropic-version", "2023-06-01")
            .header("anthropic-beta", "message-threads-2026-08-12")
            .json(&body)
            .send()
    };
    let r = send(json!({"model": "claude-sonnet-4-5", "max_tokens": 50,
        "thread": {"type": "continue", "previous_message_id": "msg_01abc"},
        "messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]}]}))
    .await
    .unwrap();
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "not_found_error");
    assert_eq!(v["error"]["details"]["error_code"], "thread_not_found");
    assert_eq!(up.hits(), 0, "the fragment never went upstream");
    let r = send(json!({"model": "claude-sonnet-4-5", "max_tokens": 50,
        "thread": {"type": "create"}, "system": "be brief",
        "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]}]}))
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let sent = &up.received()[0].body;
    assert!(sent.get("thread").is_none());
    assert_eq!(sent["messages"][0]["content"], "be brief");
    baton.stop().await;
}

/// Structured output asked the Messages way (`output_config.format`, as `messages.parse`
/// sends it) reaches a Chat Completions upstream as its `response_format`, and the beta's
/// `output_format` too.
#[tokio::test]
async fn structured_output_reaches_a_translated_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)], "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
        "required": ["city"], "additionalProperties": false});
    for (field, value) in [
        (
            "output_config",
            json!({"format": {"type": "json_schema", "schema": schema}}),
        ),
        (
            "output_format",
            json!({"type": "json_schema", "schema": schema}),
        ),
    ] {
        let mut body = json!({"model": "claude-sonnet-4-5", "max_tokens": 50,
            "messages": [{"role": "user", "content": "where?"}]});
        body[field] = value;
        let r = baton.messages(body.clone()).send().await.unwrap();
        assert_eq!(r.status(), 200, "{field}");
        let sent = up.received().last().unwrap().body.clone();
        assert_eq!(sent["response_format"]["type"], "json_schema", "{field}");
        assert_eq!(sent["response_format"]["json_schema"]["schema"], schema);
    }
    baton.stop().await;
}

/// A server that numbers its calls per answer (as the OpenAI-compatible fake does: `call_fake1`
/// every time) answers the second turn of a tool loop with the id of the first call again.
/// Claude Code would take that call for the one it already ran ("[Tool use interrupted]") and go
/// round in circles: Baton gives the new call an id the conversation does not hold, streamed
/// and complete, and the client's next turn with that id goes on as usual.
#[tokio::test]
async fn a_new_call_never_repeats_an_id_the_conversation_holds() {
    let (_d, a, _b, baton) = setup().await;
    let tools = json!([{"name": "Bash", "input_schema": {"type": "object",
        "properties": {"command": {"type": "string"}}}}]);
    let history = json!([{"role": "user", "content": "run two things"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_fake1", "name": "Bash",
            "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_fake1",
            "content": "a.txt"}]}]);
    for stream in [false, true] {
        a.script([Behavior::ToolCall {
            name: "Bash".into(),
            arguments: "{\"command\":\"pwd\"}".into(),
        }]);
        let r = messages(
            &baton,
            json!({"model": "claude-x", "max_tokens": 100,
            "stream": stream, "tools": tools, "messages": history}),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        let id = if stream {
            sse_data(&text)
                .iter()
                .map(|d| serde_json::from_str::<Value>(d).unwrap())
                .find(|e| e["type"] == "content_block_start")
                .unwrap()["content_block"]["id"]
                .clone()
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["content"][0]["id"].clone()
        };
        let id = id.as_str().unwrap();
        assert!(id != "call_fake1" && id.starts_with("call_"), "{text}");
        assert_eq!(
            a.received().last().unwrap().body["messages"][1]["tool_calls"][0]["id"],
            "call_fake1"
        );
    }
    baton.stop().await;
}
