//! Unit tests of the Gemini dialect: no HTTP server.

use serde_json::{json, Map, Value};

use super::*;
use crate::canonical::{Part, Role, StopReason, StreamEvent, ToolChoice, Usage};

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Gemini CLI's shape of a tool turn: the model's call without an id, the user's response
/// naming the function only.
#[test]
fn a_tool_turn_pairs_calls_and_responses_without_ids() {
    let body = obj(json!({
        "systemInstruction": {"role": "user", "parts": [{"text": "be brief"}, {"text": "use tools"}]},
        "contents": [
            {"role": "user", "parts": [{"text": "list files"}]},
            {"role": "model", "parts": [
                {"text": "Looking.", "thought": true},
                {"functionCall": {"name": "ls", "args": {"path": "."}}, "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "ls", "args": {"path": "src"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "ls", "response": {"output": "a.txt"}}},
                {"functionResponse": {"name": "ls", "response": {"files": ["b.rs"]}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "ls", "description": "list",
            "parameters": {"type": "OBJECT", "properties": {"path": {"type": "STRING", "nullable": true}}, "required": ["path"]}}]},
            {"googleSearch": {}}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["ls"]}},
        "generationConfig": {"maxOutputTokens": 100, "temperature": 0.2, "stopSequences": ["END"],
            "thinkingConfig": {"thinkingBudget": 4096, "includeThoughts": true}},
    }));
    let r = request_from_gemini(&body, "gemini-2.5-pro", true).expect("parses");
    assert_eq!(r.model, "gemini-2.5-pro");
    assert!(r.stream && r.stream_usage);
    assert_eq!(r.system, ["be brief", "use tools"]);
    assert_eq!(r.messages.len(), 3);
    let Part::ToolCall { id: first, .. } = &r.messages[1].content[0] else {
        panic!(
            "a call first (the thought is the model's own): {:?}",
            r.messages[1]
        );
    };
    let Part::ToolCall { id: second, .. } = &r.messages[1].content[1] else {
        panic!("{:?}", r.messages[1]);
    };
    assert_ne!(first, second, "two calls of one function get two ids");
    assert_eq!(r.messages[2].role, Role::Tool);
    assert_eq!(
        r.messages[2].content,
        vec![
            Part::ToolResult {
                call_id: first.clone(),
                content: "a.txt".into()
            },
            Part::ToolResult {
                call_id: second.clone(),
                content: r#"{"files":["b.rs"]}"#.into()
            },
        ],
        "each response answers the oldest open call of its name"
    );
    // The same request read twice names its calls the same way: the prompt stays cacheable.
    let again = request_from_gemini(&body, "gemini-2.5-pro", true).expect("parses");
    assert_eq!(again.messages, r.messages);
    assert_eq!(
        r.tools.len(),
        1,
        "Google's own tools are for Gemini upstreams only"
    );
    assert_eq!(
        r.tools[0].parameters,
        json!({"type": "object", "properties": {"path": {"type": ["string", "null"]}}, "required": ["path"]})
    );
    assert_eq!(r.tool_choice, Some(ToolChoice::Tool("ls".into())));
    assert_eq!(r.max_tokens, Some(100));
    assert_eq!(r.temperature, Some(0.2));
    assert_eq!(r.stop, ["END"]);
    assert_eq!(r.effort.as_deref(), Some("medium"));
}

/// Google's own REST examples write the proto's snake_case names; both spellings read the same.
#[test]
fn snake_case_field_names_read_as_camel_case() {
    let camel = obj(json!({"systemInstruction": {"parts": [{"text": "s"}]},
        "contents": [{"parts": [{"inlineData": {"mimeType": "image/png", "data": "AAAA"}}, {"text": "what?"}]}],
        "generationConfig": {"maxOutputTokens": 5, "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"}}}));
    let snake = obj(json!({"system_instruction": {"parts": [{"text": "s"}]},
        "contents": [{"parts": [{"inline_data": {"mime_type": "image/png", "data": "AAAA"}}, {"text": "what?"}]}],
        "generation_config": {"max_output_tokens": 5, "response_mime_type": "application/json",
            "response_json_schema": {"type": "object"}}}));
    let a = request_from_gemini(&camel, "m", false).expect("camel");
    let b = request_from_gemini(&snake, "m", false).expect("snake");
    assert_eq!(a, b);
    assert_eq!(
        a.messages[0].content[0],
        Part::Image {
            url: "data:image/png;base64,AAAA".into(),
            detail: None
        }
    );
    assert!(matches!(
        a.output,
        Some(crate::canonical::OutputFormat::JsonSchema { .. })
    ));
}

/// What Google refuses, Baton refuses, in Google's words and naming the field.
#[test]
fn bad_requests_are_refused_as_google_refuses_them() {
    let cases = [
        (
            json!({"contents": [{"parts": [{"text": "hi"}]}], "temprature": 1}),
            "temprature",
            "Unknown name \"temprature\"",
        ),
        (
            json!({"contents": [{"parts": [{"text": "hi"}]}], "generationConfig": {"max_tokens": 5}}),
            "generation_config.max_tokens",
            "Unknown name \"max_tokens\" at 'generation_config'",
        ),
        (
            json!({"contents": [{"parts": [{"text": "hi", "cache_control": {}}]}]}),
            "contents[0].parts[0].cache_control",
            "Unknown name",
        ),
        (json!({}), "contents", "contents is not specified"),
        (
            json!({"contents": []}),
            "contents",
            "contents is not specified",
        ),
        (json!({"contents": "hi"}), "contents", "expected a list"),
        (
            json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}),
            "contents[0].role",
            "valid role",
        ),
        (
            json!({"contents": [{"parts": [{"text": 5}]}]}),
            "contents[0].parts[0].text",
            "TYPE_STRING",
        ),
        (
            json!({"contents": [{"parts": [{"blob": 1}]}]}),
            "contents[0].parts[0].blob",
            "Unknown name \"blob\"",
        ),
        (
            json!({"contents": [{"parts": [{"videoMetadata": {}}]}]}),
            "contents[0].parts[0]",
            "one of text",
        ),
        (
            json!({"contents": [{"parts": [{"functionCall": {"args": {}}}]}]}),
            "contents[0].parts[0].function_call.name",
            "Name cannot be empty",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"temperature": "hot"}}),
            "generation_config.temperature",
            "TYPE_FLOAT",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}}),
            "tool_config.function_calling_config.mode",
            "SOMETIMES",
        ),
    ];
    for (body, param, words) in cases {
        let e = request_from_gemini(&obj(body.clone()), "m", false)
            .expect_err(&format!("refused: {body}"));
        assert_eq!(e.param, param, "{body}");
        assert!(e.message.contains(words), "{body}: {}", e.message);
    }
}

fn answer(content: Vec<Part>, stop: StopReason) -> crate::canonical::ChatResponse {
    crate::canonical::ChatResponse {
        id: "x".into(),
        model: "m".into(),
        created: 0,
        content,
        stop: Some(stop),
        usage: Some(Usage {
            input_tokens: 10,
            output_tokens: 4,
            cached_input_tokens: 6,
            cache_write_tokens: 0,
        }),
    }
}

#[test]
fn an_answer_is_a_generate_content_response() {
    let a = answer(
        vec![
            Part::Reasoning("hmm".into()),
            Part::Text("Here.".into()),
            Part::ToolCall {
                id: "call_1".into(),
                name: "ls".into(),
                arguments: r#"{"path":"."}"#.into(),
            },
        ],
        StopReason::ToolCalls,
    );
    let v = response_to_gemini(&a, "gpt-x", "req_1");
    assert_eq!(
        v,
        json!({"candidates": [{"content": {"role": "model", "parts": [
                {"text": "hmm", "thought": true}, {"text": "Here."},
                {"functionCall": {"id": "call_1", "name": "ls", "args": {"path": "."}}}]},
            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4, "totalTokenCount": 14, "cachedContentTokenCount": 6},
            "modelVersion": "gpt-x", "responseId": "req_1"})
    );
    let cut = response_to_gemini(
        &answer(vec![Part::Text("a".into())], StopReason::Length),
        "m",
        "r",
    );
    assert_eq!(cut["candidates"][0]["finishReason"], "MAX_TOKENS");
}

fn events() -> Vec<StreamEvent> {
    vec![
        StreamEvent::TextDelta("Hel".into()),
        StreamEvent::TextDelta("lo".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "call_1".into(),
            name: "ls".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: r#"{"pa"#.into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: r#"th":"."}"#.into(),
        },
        StreamEvent::Finish(StopReason::ToolCalls),
        StreamEvent::Usage(Usage {
            input_tokens: 3,
            output_tokens: 2,
            ..Default::default()
        }),
    ]
}

fn encode(sse: bool) -> String {
    let mut enc = StreamEncoder::new("m", "r", sse);
    let mut out = String::new();
    for e in events() {
        enc.push(&e, &mut out);
    }
    enc.finish(&mut out);
    out
}

/// A call goes out whole, after its arguments; the finish and the usage on the last chunk.
#[test]
fn a_stream_is_sse_chunks_with_whole_calls_and_usage_last() {
    let out = encode(true);
    let chunks: Vec<Value> = out
        .split("\r\n\r\n")
        .filter(|c| !c.is_empty())
        .map(|c| serde_json::from_str(c.strip_prefix("data: ").expect("data")).expect("json"))
        .collect();
    assert_eq!(chunks.len(), 3, "{out}");
    assert_eq!(
        chunks[0]["candidates"][0]["content"]["parts"][0]["text"],
        "Hel"
    );
    assert!(chunks[0].get("usageMetadata").is_none());
    let last = &chunks[2]["candidates"][0];
    assert_eq!(
        last["content"]["parts"][0]["functionCall"],
        json!({"id": "call_1", "name": "ls", "args": {"path": "."}})
    );
    assert_eq!(last["finishReason"], "STOP");
    assert_eq!(chunks[2]["usageMetadata"]["totalTokenCount"], 5);
}

/// Without `alt=sse` Google streams one JSON array, written as it grows.
#[test]
fn without_alt_sse_the_stream_is_one_json_array() {
    let out = encode(false);
    let v: Value = serde_json::from_str(&out).expect("one JSON array");
    assert_eq!(v.as_array().map(Vec::len), Some(3));
    assert!(out.starts_with("[{") && out.ends_with("}]"));
    // A break ends the array with Google's error object in place of the next chunk.
    let mut enc = StreamEncoder::new("m", "r", false);
    let mut out = String::new();
    enc.push(&StreamEvent::TextDelta("partial".into()), &mut out);
    crate::canonical::StreamEncode::error(&mut enc, "stopped mid-answer", false, &mut out);
    let v: Value = serde_json::from_str(&out).expect("still one JSON array");
    assert_eq!(v[1]["error"]["status"], "INTERNAL");
    assert_eq!(v[1]["error"]["code"], 502);
}

#[test]
fn errors_are_googles_with_a_retry_delay() {
    let v = error_body(429, "all rate-limited", Some(13));
    assert_eq!(
        v,
        json!({"error": {"code": 429, "message": "all rate-limited", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"}]}})
    );
    assert_eq!(
        error_body(401, "no key", None)["error"]["status"],
        "UNAUTHENTICATED"
    );
}

#[test]
fn gemini_schemas_become_json_schema() {
    let s = json_schema(
        &json!({"type": "ARRAY", "items": {"type": "INTEGER", "format": "int32"},
        "minItems": "1", "propertyOrdering": ["a"]}),
    );
    assert_eq!(
        s,
        json!({"type": "array", "items": {"type": "integer", "format": "int32"}, "minItems": 1})
    );
}
