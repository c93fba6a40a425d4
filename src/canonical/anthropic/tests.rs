use super::stream::{StreamDecoder, StreamEncoder};
use super::*;
use crate::canonical::StreamEvent;
use serde_json::json;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The request bodies the real Claude Code CLI sent (tests/fixtures/claude-code).
fn claude_code_bodies() -> Vec<Map<String, Value>> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/claude-code");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("fixtures") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).expect("json line");
            if let Value::Object(b) = &v["body"] {
                out.push(b.clone());
            }
        }
    }
    out
}

#[test]
fn real_claude_code_requests_translate_to_openai_and_back() {
    let bodies = claude_code_bodies();
    assert!(bodies.len() >= 3);
    for body in bodies {
        let req = request_from_anthropic(&body).expect("Claude Code's request is accepted");
        assert!(req.stream, "Claude Code streams");
        assert!(!req.system.is_empty(), "system prompt kept");
        assert_eq!(
            req.tools.len(),
            body.get("tools")
                .and_then(Value::as_array)
                .map_or(0, Vec::len)
        );
        assert!(
            req.extra.is_empty(),
            "the client's own fields stay in its body, which only Anthropic upstreams get"
        );
        let openai = crate::canonical::openai::request_to_openai(&req);
        let again =
            crate::canonical::openai::request_from_openai(&openai).expect("valid OpenAI body");
        assert_eq!(
            again.messages, req.messages,
            "messages survive the OpenAI hop"
        );
        assert_eq!(again.tools, req.tools);
        assert_eq!(openai["stream_options"], json!({"include_usage": true}));
    }
}

#[test]
fn blocks_map_to_canonical_parts() {
    let body = obj(json!({
        "model": "claude-sonnet-4-5", "max_tokens": 100, "stop_sequences": ["X"],
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "18 C"}]}]},
            {"role": "system", "content": "mid-conversation note"}
        ],
        "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "any"}
    }));
    let req = request_from_anthropic(&body).expect("valid");
    assert_eq!(
        req.system,
        vec!["be brief".to_string(), "mid-conversation note".to_string()]
    );
    assert_eq!(req.messages.len(), 3);
    assert_eq!(
        req.messages[0].content[1],
        Part::Image {
            url: "data:image/png;base64,AAAA".into(),
            detail: None
        }
    );
    assert_eq!(
        req.messages[1].content,
        vec![Part::ToolCall {
            id: "toolu_1".into(),
            name: "get".into(),
            arguments: "{\"city\":\"Paris\"}".into()
        }]
    );
    assert_eq!(req.messages[2].role, Role::Tool);
    assert_eq!(
        req.tool_choice,
        Some(crate::canonical::ToolChoice::Required)
    );
    assert_eq!(
        (req.max_tokens, req.stop.clone()),
        (Some(100), vec!["X".to_string()])
    );
    let e = request_from_anthropic(&obj(
        json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
    ))
    .expect_err("bad role");
    assert_eq!(e.param, "messages.0.role");
}

#[test]
fn answers_and_streams_encode_in_anthropic_shape() {
    let r = ChatResponse {
        id: "chatcmpl-1".into(),
        model: "m".into(),
        created: 0,
        content: vec![
            Part::Text("hi".into()),
            Part::ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: "{\"a\":1}".into(),
            },
        ],
        stop: Some(StopReason::ToolCalls),
        usage: Some(Usage {
            input_tokens: 12,
            output_tokens: 3,
            cached_input_tokens: 4,
            cache_write_tokens: 2,
        }),
    };
    let v = response_to_anthropic(&r, "served-model", false);
    assert_eq!(v["id"], "msg_1");
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(
        v["content"][1],
        json!({"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}})
    );
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 6, "output_tokens": 3, "cache_read_input_tokens": 4,
            "cache_creation_input_tokens": 2}),
        "only the uncached part is input_tokens"
    );
    let back = usage_from_anthropic(&v["usage"]);
    assert_eq!(back, r.usage.unwrap(), "and it reads back whole");

    let mut enc = StreamEncoder::new("chatcmpl-2", "m");
    let mut out = String::new();
    for ev in [
        StreamEvent::TextDelta("Hel".into()),
        StreamEvent::TextDelta("lo".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "f".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{\"a\"".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: ":1}".into(),
        },
        StreamEvent::Finish(StopReason::ToolCalls),
        StreamEvent::Usage(Usage {
            input_tokens: 5,
            output_tokens: 2,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
        }),
    ] {
        enc.push(&ev, &mut out);
    }
    enc.finish(&mut out);
    let events: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert!(
        out.contains(r#""delta":{"partial_json":"{\"a\"","type":"input_json_delta"}"#),
        "{out}"
    );
    assert!(out.contains(r#""stop_reason":"tool_use""#));
}

#[test]
fn parallel_tool_calls_and_every_stop_reason_translate() {
    // Two tool calls interleaved in OpenAI chunks become two tool_use blocks.
    let chunks = [
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": ""}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"x\":1}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{\"y\":2}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ];
    let mut enc = StreamEncoder::new("id", "m");
    let mut out = String::new();
    for c in &chunks {
        for ev in crate::canonical::openai::chunk_events(c) {
            enc.push(&ev, &mut out);
        }
    }
    enc.finish(&mut out);
    let frames: Vec<Value> = out
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("json"))
        .collect();
    let starts: Vec<(u64, &str)> = frames
        .iter()
        .filter(|f| f["type"] == "content_block_start")
        .map(|f| {
            (
                f["index"].as_u64().unwrap_or(99),
                f["content_block"]["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(starts, [(0, "f"), (1, "g")]);
    let deltas: Vec<(u64, &str)> = frames
        .iter()
        .filter(|f| f["type"] == "content_block_delta")
        .map(|f| {
            (
                f["index"].as_u64().unwrap_or(99),
                f["delta"]["partial_json"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        deltas,
        [(0, "{\"x\":1}"), (1, "{\"y\":2}")],
        "each argument stream reaches its own block"
    );

    // Anthropic -> canonical -> OpenAI: parallel tool_use blocks keep separate indices.
    let mut dec = StreamDecoder::default();
    let mut events = Vec::new();
    for f in [
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "a", "name": "f", "input": {}}}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "b", "name": "g", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 3}}),
    ] {
        events.extend(dec.push(&f));
    }
    assert!(events.contains(&StreamEvent::ToolCallDelta {
        index: 1,
        arguments: "{}".into()
    }));
    assert!(events.contains(&StreamEvent::Finish(StopReason::Length)));

    // Stop reasons both ways.
    for (openai, anthropic) in [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
    ] {
        assert_eq!(stop_reason(&StopReason::from_openai(openai)), anthropic);
        let back = response_from_anthropic(
            &json!({"type": "message", "content": [], "stop_reason": anthropic}),
        )
        .and_then(|r| r.stop)
        .map(|s| s.as_openai().to_string());
        assert_eq!(back.as_deref(), Some(openai));
    }
}

#[test]
fn thinking_reads_as_reasoning_without_its_signature() {
    let mut dec = StreamDecoder::default();
    let mut events = Vec::new();
    for f in [
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Check the file."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Done."}}),
    ] {
        events.extend(dec.push(&f));
    }
    assert_eq!(
        events,
        [
            StreamEvent::ReasoningDelta("Check the file.".into()),
            StreamEvent::TextDelta("Done.".into())
        ]
    );
    let r = response_from_anthropic(&json!({"type": "message", "stop_reason": "end_turn",
        "content": [{"type": "thinking", "thinking": "Hmm.", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "text", "text": "Yes."}]}))
    .unwrap();
    assert_eq!(
        r.content,
        [Part::Reasoning("Hmm.".into()), Part::Text("Yes.".into())]
    );
    // An Anthropic client that did not ask for thinking gets none.
    let mut enc = StreamEncoder::new("m1", "claude");
    let mut out = String::new();
    enc.push(&StreamEvent::ReasoningDelta("private".into()), &mut out);
    assert!(!out.contains("private"), "{out}");
}

#[test]
fn reasoning_from_elsewhere_reaches_a_thinking_client_as_unsigned_thinking() {
    let mut enc = StreamEncoder::new("m2", "deepseek").with_thinking(true);
    let mut out = String::new();
    for ev in [
        StreamEvent::ReasoningDelta("Weigh ".into()),
        StreamEvent::ReasoningDelta("it.".into()),
        StreamEvent::TextDelta("Yes.".into()),
        StreamEvent::Finish(StopReason::Stop),
    ] {
        enc.push(&ev, &mut out);
    }
    enc.finish(&mut out);
    let frames: Vec<Value> = out
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let starts: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "content_block_start")
        .collect();
    assert_eq!(starts[0]["content_block"]["type"], "thinking");
    assert_eq!(starts[0]["content_block"]["signature"], "");
    assert_eq!(starts[1]["content_block"]["type"], "text");
    assert_eq!(starts[1]["index"], 1);
    let thought: String = frames
        .iter()
        .filter(|f| f["delta"]["type"] == "thinking_delta")
        .map(|f| f["delta"]["thinking"].as_str().unwrap())
        .collect();
    assert_eq!(thought, "Weigh it.");
    let r = ChatResponse {
        id: "x".into(),
        model: "m".into(),
        created: 0,
        content: vec![Part::Reasoning("Hmm.".into()), Part::Text("Yes.".into())],
        stop: Some(StopReason::Stop),
        usage: None,
    };
    let v = response_to_anthropic(&r, "m", true);
    assert_eq!(
        v["content"][0],
        json!({"type": "thinking", "thinking": "Hmm.", "signature": ""})
    );
    assert_eq!(
        response_to_anthropic(&r, "m", false)["content"][0]["type"],
        "text"
    );
}

#[test]
fn a_relayed_answer_names_the_model_the_client_asked_for() {
    use super::stream::{named_as, Framing};
    let start = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-served-1\",\"content\":[]}}\n\n";
    let renamed = named_as(start, "claude-sonnet-4-5", Framing::Event).unwrap_or_default();
    let text = String::from_utf8(renamed).unwrap_or_default();
    assert!(text.starts_with("event: message_start\ndata: {"), "{text}");
    assert!(text.ends_with("}\n\n"), "{text}");
    let data: Value =
        serde_json::from_str(&text["event: message_start\ndata: ".len()..]).unwrap_or_default();
    assert_eq!(data["message"]["model"], "claude-sonnet-4-5");
    assert_eq!(data["message"]["id"], "msg_1");
    // Already named so, another event, or no name to give: left as it is.
    assert_eq!(named_as(start, "claude-served-1", Framing::Event), None);
    let delta =
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"model\":\"x\"}\n\n";
    assert_eq!(named_as(delta, "claude-sonnet-4-5", Framing::Event), None);
    assert_eq!(named_as(start, "", Framing::Event), None);
    let body = br#"{"id":"msg_1","type":"message","model":"claude-served-1","content":[]}"#;
    let renamed: Value = serde_json::from_slice(
        &named_as(body, "claude-sonnet-4-5", Framing::Body).unwrap_or_default(),
    )
    .unwrap_or_default();
    assert_eq!(renamed["model"], "claude-sonnet-4-5");
    assert_eq!(named_as(body, "claude-served-1", Framing::Body), None);
}
