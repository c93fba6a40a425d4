//! Unit tests of the `openai-responses` kind, with no server.

use super::*;

#[test]
fn a_stream_reads_as_canonical_events_with_its_usage_and_errors() {
    let mut d = StreamDecoder::default();
    let mut ev = |s: &str| decode(&mut d, s.as_bytes()).unwrap();
    assert!(!ev(r#"{"type":"response.created","response":{}}"#).content);
    let t = ev(r#"{"type":"response.output_text.delta","output_index":0,"delta":"Hi"}"#);
    assert!(t.content);
    assert_eq!(t.text_bytes, 2);
    let c = ev(
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":""}}"#,
    );
    assert!(c.content);
    let i = ev(
        r#"{"type":"response.custom_tool_call_input.done","output_index":1,"input":"*** Begin Patch"}"#,
    );
    assert_eq!(
        i.events,
        [crate::canonical::StreamEvent::ToolCallDelta {
            index: 0,
            arguments: json!({"input": "*** Begin Patch"}).to_string()
        }]
    );
    let done = ev(
        r#"{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":5,"output_tokens":2,"input_tokens_details":{"cached_tokens":1}}}}"#,
    );
    assert!(done.finish);
    assert_eq!(done.usage.map(|u| u.cached_input_tokens), Some(1));
    let e = ev(r#"{"type":"error","code":"rate_limit_exceeded","message":"slow down"}"#);
    assert_eq!(e.error.map(|e| e.status), Some(429));
}

#[test]
fn complete_bodies_are_answers_errors_or_neither() {
    assert!(matches!(
        complete(
            br#"{"object":"response","output":[],"usage":{"input_tokens":1,"output_tokens":1}}"#
        ),
        Complete::Answer(Some(_))
    ));
    assert!(matches!(
        complete(br#"{"error":{"code":"usage_limit_reached","message":"The usage limit has been reached"}}"#),
        Complete::Error(UpstreamError { status: 429, .. })
    ));
    assert!(matches!(complete(b"[]"), Complete::NotAnswer(_)));
}

/// The body Codex 0.171 sends on its default model (captured from the real CLI, long texts
/// trimmed): tools in an `additional_tools` item, in namespaces, `exec` freeform with a grammar.
fn codex_default_body() -> Map<String, Value> {
    serde_json::from_str(include_str!(
        "../../../../tests/fixtures/codex/0.171-default-model-request.json"
    ))
    .expect("the fixture is a JSON object")
}

fn model(id: &str) -> ModelInfo {
    ModelInfo {
        id: id.into(),
        context_window: None,
        tools: true,
        images: false,
        structured_output: true,
        max_output_tokens: None,
        price: None,
        tier: None,
        serves: Vec::new(),
    }
}

fn built(own: &Map<String, Value>, public: bool) -> Value {
    built_for(own, &model("gpt-real"), public)
}

fn built_for(own: &Map<String, Value>, model: &ModelInfo, public: bool) -> Value {
    let canonical = crate::canonical::ChatRequest::default();
    let openai = Map::new().into();
    let o = Outbound {
        openai: &openai,
        original: Some((Wire::Responses, own)),
        verbatim: None,
        client: None,
        anthropic_beta: None,
        canonical: &canonical,
        stream: true,
        request_id: "req_1",
        thinking: crate::providers::thinking::Keep::None,
        now_ms: 0,
    };
    serde_json::from_slice(&body(&o, model, public)).expect("JSON")
}

#[test]
fn codex_default_model_body_keeps_everything_but_the_backends_own_fields_on_a_public_api() {
    let own = codex_default_body();
    let sent = built(&own, true);
    // What Codex asked for goes on as it came.
    for k in [
        "reasoning",
        "include",
        "prompt_cache_key",
        "text",
        "tool_choice",
        "parallel_tool_calls",
        "store",
        "stream",
    ] {
        assert_eq!(sent[k], own[k], "{k}");
    }
    assert_eq!(sent["model"], "gpt-real");
    assert!(sent.get("client_metadata").is_none());
    // Its tools are declared in `tools`, as declared: namespaces, and `exec` still freeform
    // with its grammar.
    let declared = own["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "additional_tools")
        .unwrap()["tools"]
        .clone();
    assert_eq!(sent["tools"], declared);
    let exec = sent["tools"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "exec")
        .unwrap();
    assert_eq!(exec["type"], "custom");
    assert_eq!(exec["format"]["syntax"], "lark");
    let items = sent["input"].as_array().unwrap();
    assert!(items.iter().all(|i| i["type"] != "additional_tools"));
    assert_eq!(
        items.len(),
        own["input"].as_array().unwrap().len() - 1,
        "every other item stays"
    );
    // Messages carry only the public API's fields.
    for m in items.iter().filter(|i| i["type"] == "message") {
        let keys: Vec<&String> = m.as_object().unwrap().keys().collect();
        assert!(
            keys.iter()
                .all(|k| ["type", "role", "content"].contains(&k.as_str())),
            "{keys:?}"
        );
    }
}

#[test]
fn the_chatgpt_backend_gets_codexs_body_untouched_but_for_the_model() {
    let own = codex_default_body();
    let mut sent = built(&own, false);
    sent["model"] = own["model"].clone();
    assert_eq!(sent, Value::Object(own));
}

#[test]
fn tools_already_in_tools_are_not_declared_twice() {
    let own: Map<String, Value> = serde_json::from_value(json!({"model": "m", "input": [
        {"type": "additional_tools", "role": "developer", "tools": [
            {"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "shell"}]},
        {"type": "message", "role": "user", "content": "hi"}],
        "tools": [{"type": "custom", "name": "apply_patch"}]}))
    .unwrap();
    let sent = built(&own, true);
    assert_eq!(
        sent["tools"],
        json!([{"type": "custom", "name": "apply_patch"}, {"type": "function", "name": "shell"}])
    );
    assert_eq!(
        sent["input"],
        json!([{"type": "message", "role": "user", "content": "hi"}])
    );
}

/// `fits` is what lets a Responses body go as it came: it must say no whenever `body` would
/// change more than the model, and yes when it would not.
#[test]
fn fits_says_whether_the_body_would_change_but_for_its_model() {
    let codex = codex_default_body();
    let with = |extra: Value| -> Map<String, Value> {
        let mut b: Map<String, Value> = serde_json::from_value(
            json!({"model": "m", "input": [{"type": "message", "role": "user", "content": "hi"}]}),
        )
        .unwrap();
        for (k, v) in extra.as_object().unwrap() {
            b.insert(k.clone(), v.clone());
        }
        b
    };
    let bodies = [
        codex.clone(),
        with(json!({})),
        with(json!({"input": "hi", "max_output_tokens": 500})),
        with(json!({"max_output_tokens": 8})),
        with(json!({"max_output_tokens": 5000})),
        with(json!({"client_metadata": {"x": 1}})),
        with(
            json!({"input": [{"type": "message", "role": "user", "content": "hi", "id": "msg_1"}]}),
        ),
        with(
            json!({"input": [{"type": "message", "role": "assistant", "content": [], "id": "msg_1", "status": "completed"}]}),
        ),
        with(
            json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "x", "internal_note": 1}]}),
        ),
        with(json!({"input": [{"type": "some_future_item", "x": 1}]})),
        with(json!({"input": [{"type": "some_future_item", "internal_x": 1}]})),
        with(json!({"input": [crate::canonical::responses::compaction::item("r1", "did things")]})),
        with(json!({"input": [{"type": "compaction", "encrypted_content": "gAAAA"}]})),
        with(json!({"input": [{"type": "reasoning", "id": "rs_baton_x_0", "summary": []}]})),
        with(
            json!({"input": [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"}]}),
        ),
    ];
    let mut capped = model("gpt-real");
    capped.max_output_tokens = Some(1000);
    let mut seen = [0; 2];
    for b in &bodies {
        for m in [&model("gpt-real"), &capped] {
            for public in [false, true] {
                let mut expected = b.clone();
                expected.insert("model".into(), json!(m.id));
                let same = built_for(b, m, public) == Value::Object(expected);
                assert_eq!(
                    fits(b, m, public),
                    same,
                    "{b:?} public {public} cap {:?}",
                    m.max_output_tokens
                );
                seen[usize::from(same)] += 1;
            }
        }
    }
    assert!(
        seen[0] >= 10 && seen[1] >= 10,
        "both answers are tried: {seen:?}"
    );
    assert!(
        fits(&codex, &model("gpt-real"), false),
        "Codex's turn to its own backend"
    );
    assert!(
        !fits(&codex, &model("gpt-real"), true),
        "its tools move for a public API"
    );
}
