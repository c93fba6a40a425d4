//! The `openai-responses` upstream kind: Responses clients pass through unchanged (but for the
//! model), Chat Completions and Anthropic clients are translated both ways, streams included;
//! its usage limit fails over like any other.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup(extra: Vec<Value>) -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("resp").await;
    up.strict_auth();
    std::env::set_var("BT_RESPONSES_UP_KEY", "sk-responses-upstream");
    let mut providers = vec![json!({"id": "resp", "kind": "openai-responses",
        "baseUrl": up.base_url(), "keys": [{"env": "BT_RESPONSES_UP_KEY"}],
        "models": ["gpt-real"], "priority": 1})];
    providers.extend(extra);
    let baton = Baton::start(dir.path(), json!({"providers": providers})).await;
    (dir, up, baton)
}

fn responses_post(baton: &Baton, body: Value) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .json(&body)
}

#[tokio::test]
async fn chat_clients_are_translated_to_responses_and_back() {
    let (_d, up, baton) = setup(vec![]).await;
    let body = json!({"model": "auto", "max_tokens": 40, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]});
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "resp: hello");
    assert_eq!(v["usage"]["prompt_tokens"], 11);
    let got = &up.received()[0];
    assert_eq!(got.headers["authorization"], "Bearer sk-responses-upstream");
    assert_eq!(got.body["model"], "gpt-real");
    assert_eq!(got.body["instructions"], "Be brief.");
    assert_eq!(got.body["max_output_tokens"], 40);
    assert_eq!(got.body["store"], false);
    assert_eq!(
        got.body["input"],
        json!([{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}])
    );
    // Streamed: the text as it comes, then the usage the client asked for.
    let r = baton
        .post(
            json!({"model": "auto", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "one two three"}]}),
        )
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    assert_eq!(stream_text(&events), "resp: one two three");
    assert_eq!(events.last().unwrap(), "[DONE]");
    let usage: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
    baton.stop().await;
}

#[tokio::test]
async fn tool_calls_come_back_as_the_clients_own() {
    let (_d, up, baton) = setup(vec![]).await;
    up.script([Behavior::ToolCall {
        name: "get_weather".into(),
        arguments: "{\"city\":\"Paris\"}".into(),
    }]);
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let r = baton
        .post(json!({"model": "auto", "stream": true, "tools": tools,
            "messages": [{"role": "user", "content": "weather?"}]}))
        .send()
        .await
        .unwrap();
    let events = sse_data(&r.text().await.unwrap());
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let args: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(args, "{\"city\":\"Paris\"}");
    assert!(chunks
        .iter()
        .any(|c| c["choices"][0]["finish_reason"] == "tool_calls"));
    let sent = &up.received()[0].body;
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(sent["tools"][0]["type"], "function");
    baton.stop().await;
}

#[tokio::test]
async fn responses_clients_pass_through_unchanged_but_for_the_model() {
    let (_d, up, baton) = setup(vec![]).await;
    let body = json!({"model": "gpt-real", "input": "hello", "prompt_cache_key": "k1",
        "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"], "store": false});
    let r = responses_post(&baton, body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["id"], "resp_fake", "the upstream's own answer");
    assert_eq!(v["output"][0]["content"][0]["text"], "resp: hello");
    assert_eq!(up.received()[0].body, body);
    // Streamed: the upstream's events as they came.
    let r = responses_post(
        &baton,
        json!({"model": "gpt-real", "input": "a b", "stream": true}),
    )
    .send()
    .await
    .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("\"resp_fake\""), "{text}");
    let deltas: String = sse_data(&text)
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(deltas, "resp: a b");
    let kinds: Vec<String> = sse_data(&text)
        .iter()
        .map(|d| {
            serde_json::from_str::<Value>(d).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.first().unwrap(), "response.created");
    assert_eq!(kinds.last().unwrap(), "response.completed");
    assert_eq!(
        kinds.iter().filter(|k| k.starts_with("response.c")).count(),
        4,
        "one lifecycle, the upstream's (created, content_part, content_part.done, completed): {kinds:?}"
    );
    // A break mid-stream: an error event after the upstream's own events, no second lifecycle.
    up.script([Behavior::StreamDies(2)]);
    let r = responses_post(
        &baton,
        json!({"model": "gpt-real", "input": "a b c", "stream": true}),
    )
    .send()
    .await
    .unwrap();
    let events: Vec<Value> = sse_data(&r.text().await.unwrap())
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "error", "{events:?}");
    assert!(last["message"]
        .as_str()
        .unwrap()
        .contains("stopped mid-answer"));
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "response.created")
            .count(),
        1
    );
    baton.stop().await;
}

#[tokio::test]
async fn anthropic_clients_stream_from_a_responses_upstream() {
    let (_d, _up, baton) = setup(vec![]).await;
    let r = baton
        .messages(
            json!({"model": "resp/gpt-real", "max_tokens": 50, "stream": true,
            "messages": [{"role": "user", "content": "hi there"}]}),
        )
        .send()
        .await
        .unwrap();
    let body = r.text().await.unwrap();
    let text: String = sse_data(&body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == "content_block_delta")
        .map(|v| v["delta"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "resp: hi there");
    assert!(body.contains("event: message_stop"), "{body}");
    baton.stop().await;
}

#[tokio::test]
async fn a_usage_limit_fails_over_and_cools_until_the_stated_reset() {
    let other = FakeUpstream::start("other").await;
    let (_d, up, baton) = setup(vec![json!({"id": "other", "kind": "openai-compatible",
        "baseUrl": other.base_url(), "models": ["other-model"], "priority": 2})])
    .await;
    up.script([Behavior::Status {
        status: 429,
        body: json!({"error": {"type": "usage_limit_reached",
            "message": "The usage limit has been reached", "resets_in_seconds": 3600}}),
        headers: vec![],
    }]);
    let r = responses_post(&baton, json!({"model": "auto", "input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["object"], "response");
    assert_eq!(v["output"][0]["content"][0]["text"], "other: hello");
    let cooling = baton.handle.core.routing.cooldowns.active();
    let c = cooling.iter().find(|c| c.scope.provider == "resp").unwrap();
    let now = baton::clock::unix_ms();
    assert!(
        (c.until_ms - now - 3_600_000).abs() < 60_000,
        "cools for the hour it said: {}",
        c.until_ms - now
    );
    baton.stop().await;
}

/// Reasoning an upstream gives reaches a Responses client as a reasoning summary (before the
/// answer, streamed and not); when the client sends that item back, it is not passed on to a
/// Responses server, which could not resolve it.
#[tokio::test]
async fn reasoning_from_another_upstream_is_a_summary_that_stays_with_the_client() {
    let thinker = FakeUpstream::start("thinker").await;
    let (_d, up, baton) = setup(vec![json!({"id": "thinker", "kind": "openai-compatible",
        "baseUrl": thinker.base_url(), "models": ["thinker-model"], "priority": 2})])
    .await;
    thinker.script([Behavior::Thinks(250)]);
    let r = responses_post(
        &baton,
        json!({"model": "thinker/thinker-model", "input": "why?", "stream": true}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let events: Vec<Value> = sse_data(&r.text().await.unwrap())
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let summary: String = events
        .iter()
        .filter(|e| e["type"] == "response.reasoning_summary_text.delta")
        .map(|e| e["delta"].as_str().unwrap().to_string())
        .collect();
    assert!(summary.starts_with("step 0. step 1."), "{summary}");
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["type"], "reasoning");
    assert_eq!(done["output"][1]["content"][0]["text"], "thinker: why?");
    let rs_id = done["output"][0]["id"].as_str().unwrap().to_string();

    // The next turn, with that item in its history, on the Responses upstream.
    let history = json!({"model": "gpt-real", "store": false, "input": [
        {"role": "user", "content": "why?"},
        {"type": "reasoning", "id": rs_id, "summary": done["output"][0]["summary"],
         "encrypted_content": null},
        {"type": "reasoning", "id": "rs_openai_own", "summary": [], "encrypted_content": "gAAA"},
        {"role": "assistant", "content": "thinker: why?"},
        {"role": "user", "content": "and?"}]});
    let r = responses_post(&baton, history).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let sent = &up.received()[0].body["input"];
    let ids: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["rs_openai_own"],
        "only the server's own reasoning goes to it"
    );
    assert_eq!(sent.as_array().unwrap().len(), 4);
    baton.stop().await;
}

/// `previous_response_id` continues a conversation only a Responses server has: it goes there
/// (passed through), past providers of other kinds, and is refused, naming the field, when
/// there is none to go to.
#[tokio::test]
async fn a_stored_conversation_continues_only_on_a_responses_upstream() {
    let other = FakeUpstream::start("other").await;
    let (_d, up, baton) = setup(vec![json!({"id": "other", "kind": "openai-compatible",
        "baseUrl": other.base_url(), "models": ["other-model"], "priority": 0})])
    .await;
    let body = json!({"model": "auto", "input": "and then?", "previous_response_id": "resp_9"});
    let r = responses_post(&baton, body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "resp");
    assert_eq!(up.received()[0].body["previous_response_id"], "resp_9");
    assert_eq!(
        other.hits(),
        0,
        "first by priority, but it cannot continue the conversation"
    );
    let r = responses_post(
        &baton,
        json!({"model": "other/other-model", "input": "and then?",
            "previous_response_id": "resp_9"}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["param"], "previous_response_id");
    assert_eq!(v["error"]["code"], "previous_response_not_found", "{v}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("whole conversation"));
    assert_eq!(other.hits(), 0);
    baton.stop().await;
}

/// Codex's body, written for the ChatGPT backend (ids on its own messages, client_metadata),
/// reaches a public Responses API on a key in the shapes that API takes.
#[tokio::test]
async fn a_codex_body_reaches_the_public_api_in_its_shapes() {
    let (_d, up, baton) = setup(vec![]).await;
    let body = json!({"model": "gpt-real", "stream": false, "store": false,
        "client_metadata": {"session": "s1"}, "instructions": "be brief",
        "input": [{"type": "message", "role": "developer", "id": "msg_01a",
            "content": [{"type": "input_text", "text": "rules"}]},
            {"type": "message", "role": "user", "id": "msg_01b",
            "content": [{"type": "input_text", "text": "hi"}]}]});
    let r = responses_post(&baton, body).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let sent = &up.received()[0].body;
    assert!(sent.get("client_metadata").is_none());
    assert!(sent["input"][1].get("id").is_none());
    baton.stop().await;
}

/// Codex closes as soon as it has `response.completed`; a server that keeps the connection
/// open a moment longer must not turn a served turn into a 499 in the log.
#[tokio::test]
async fn a_client_that_leaves_after_response_completed_was_served() {
    let (_d, up, baton) = setup(vec![]).await;
    up.script([Behavior::StreamNoDone]);
    let mut r = responses_post(
        &baton,
        json!({"model": "gpt-real", "stream": true, "input": "hi"}),
    )
    .send()
    .await
    .unwrap();
    let mut seen = String::new();
    while !seen.contains("response.completed") {
        let chunk = r
            .chunk()
            .await
            .unwrap()
            .expect("the stream goes on until completed");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(r);
    let mut status = None;
    for _ in 0..50 {
        if let Some(row) = baton.log().await.first() {
            status = Some(row.status);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, Some(200), "a served turn, not a 499");
    let row = &baton.log().await[0];
    assert_eq!((row.input_tokens, row.output_tokens), (Some(11), Some(7)));
    baton.stop().await;
}

/// Codex 0.171 on its default model through a public Responses API on Baton's key (the most
/// common Codex-with-an-API-key set-up): its tools, declared in an `additional_tools` item with
/// `exec` freeform, reach the upstream in `tools` as declared, so the model's call to `exec`
/// comes back as the `custom_tool_call` Codex runs; `reasoning`, `include` and
/// `prompt_cache_key` arrive as Codex sent them; the next turn, carrying that call and its
/// output, is taken as it is (the fake refuses a call of another type than its tool's).
#[tokio::test]
async fn codex_default_model_keeps_its_freeform_tools_and_reasoning_on_a_public_api() {
    let (_d, up, baton) = setup(vec![]).await;
    let mut body: Value = serde_json::from_str(include_str!(
        "../fixtures/codex/0.171-default-model-request.json"
    ))
    .unwrap();
    body["model"] = json!("gpt-real");
    let script = "await tools.apply_patch('*** Begin Patch\\n*** End Patch\\n'); text('done');";
    up.script([Behavior::ToolCall {
        name: "exec".into(),
        arguments: json!({ "input": script }).to_string(),
    }]);
    let r = responses_post(&baton, body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let events: Vec<Value> = sse_data(&r.text().await.unwrap())
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let done = events
        .iter()
        .find(|e| e["type"] == "response.output_item.done")
        .expect("an output item");
    assert_eq!(done["item"]["type"], "custom_tool_call", "{done}");
    assert_eq!(done["item"]["name"], "exec");
    assert_eq!(done["item"]["input"], script, "the raw input, not JSON");
    assert!(events
        .iter()
        .all(|e| e["type"] != "response.function_call_arguments.delta"));

    let sent = &up.received()[0].body;
    for k in ["reasoning", "include", "prompt_cache_key", "text"] {
        assert_eq!(sent[k], body[k], "{k} as Codex sent it");
    }
    let exec = sent["tools"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "exec")
        .unwrap()
        .clone();
    assert_eq!(exec["type"], "custom");

    // The next turn: Codex sends the call back with what `exec` printed.
    let mut next = body.clone();
    let input = next["input"].as_array_mut().unwrap();
    input.push(done["item"].clone());
    input.push(
        json!({"type": "custom_tool_call_output", "call_id": done["item"]["call_id"],
        "output": "done"}),
    );
    let r = responses_post(&baton, next).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    r.text().await.unwrap();
    assert!(up.refusals().is_empty(), "{:?}", up.refusals());
    baton.stop().await;
}

/// The fields Baton keeps on each input item for the public API are the ones the vendor's
/// request types define (`testkit/contract/openai-responses.json`, generated from the pinned
/// SDK): regenerating the contract after an API change fails here until the table follows.
#[test]
fn the_public_input_item_fields_are_the_sdks() {
    let schema: Value =
        serde_json::from_str(include_str!("../../testkit/contract/openai-responses.json")).unwrap();
    let defs = &schema["$defs"];
    let input = &defs["response_create_params.ResponseCreateParamsStreaming"]["properties"]
        ["input"]["anyOf"];
    let items = input
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["type"] == "array")
        .unwrap();
    let mut sdk: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for variant in items["items"]["anyOf"].as_array().unwrap() {
        let name = variant["$ref"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap();
        let props = defs[name]["properties"].as_object().unwrap();
        for kind in props
            .get("type")
            .and_then(|t| t["enum"].as_array())
            .into_iter()
            .flatten()
        {
            sdk.entry(kind.as_str().unwrap().to_string())
                .or_default()
                .extend(props.keys().cloned());
        }
    }
    let ours: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        baton::providers::kinds::openai_responses::public::INPUT_ITEM_FIELDS
            .iter()
            .map(|(k, f)| (k.to_string(), f.iter().map(|f| f.to_string()).collect()))
            .collect();
    assert_eq!(ours, sdk);
}

/// An earlier answer in the conversation (Claude Code's text beside its tool call, translated)
/// reaches a public Responses API as an input message it takes: text as a string, not the
/// `output_text` parts only a server-made output message may carry.
#[tokio::test]
async fn earlier_answers_are_input_messages_the_public_api_takes() {
    let (_d, up, baton) = setup(vec![]).await;
    let body = json!({"model": "auto", "messages": [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "I will look.", "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "assistant", "content": "One file."},
        {"role": "user", "content": "thanks"}],
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]});
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", up.refusals());
    let input = up.received()[0].body["input"].clone();
    assert_eq!(
        input[1],
        json!({"type": "message", "role": "assistant", "content": "I will look."})
    );
    assert_eq!(input[4]["content"], "One file.");
    baton.stop().await;
}
