use serde_json::json;

use super::*;
use crate::canonical::{Message, OutputFormat, Tool, ToolChoice};

fn msg(role: Role, content: Vec<Part>) -> Message {
    Message {
        role,
        content,
        name: None,
    }
}

#[test]
fn a_tool_loop_becomes_alternating_turns_with_tool_use_and_results() {
    let req = ChatRequest {
        system: vec!["be brief".into(), String::new()],
        messages: vec![
            msg(
                Role::User,
                vec![
                    Part::Text("weather?".into()),
                    Part::Image {
                        url: "data:image/jpg;base64,AAAA".into(),
                        detail: None,
                    },
                    Part::Image {
                        url: "https://example.com/a.png".into(),
                        detail: None,
                    },
                ],
            ),
            msg(
                Role::Assistant,
                vec![
                    Part::Reasoning("thinking…".into()),
                    Part::ToolCall {
                        id: "c1".into(),
                        name: "get".into(),
                        arguments: "{\"city\":\"Paris\"}".into(),
                    },
                    Part::ToolCall {
                        id: "c2".into(),
                        name: "gone".into(),
                        arguments: "not json".into(),
                    },
                ],
            ),
            msg(
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "c1".into(),
                    content: "18 C".into(),
                }],
            ),
            msg(
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "c2".into(),
                    content: String::new(),
                }],
            ),
            msg(Role::User, vec![Part::Text("and tomorrow?".into())]),
        ],
        tools: vec![Tool {
            name: "get".into(),
            description: Some(String::new()),
            parameters: json!({"type": "object"}),
            freeform: None,
        }],
        tool_choice: Some(ToolChoice::Required),
        max_tokens: Some(9000),
        temperature: Some(1.7),
        stop: vec!["END".into(), String::new()],
        output: Some(OutputFormat::JsonSchema {
            name: "w".into(),
            schema: json!({"type": "object"}),
            strict: None,
        }),
        ..ChatRequest::default()
    };
    let b = Value::Object(request_to_converse(&req, Some(4096)));
    assert_eq!(b["system"], json!([{"text": "be brief"}]));
    let turns = b["messages"].as_array().unwrap();
    assert_eq!(
        turns
            .iter()
            .map(|t| t["role"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["user", "assistant", "user"],
        "the tool results and the next question are one user turn"
    );
    assert_eq!(
        turns[0]["content"],
        json!([{"text": "weather?"},
            {"image": {"format": "jpeg", "source": {"bytes": "AAAA"}}},
            {"text": "[image: https://example.com/a.png]"}])
    );
    assert_eq!(
        turns[1]["content"],
        json!([{"toolUse": {"toolUseId": "c1", "name": "get", "input": {"city": "Paris"}}},
            {"toolUse": {"toolUseId": "c2", "name": "gone", "input": {}}}]),
        "reasoning is not sent back; arguments that are not an object become one"
    );
    assert_eq!(
        turns[2]["content"],
        json!([{"toolResult": {"toolUseId": "c1", "content": [{"text": "18 C"}]}},
            {"toolResult": {"toolUseId": "c2", "content": []}},
            {"text": "and tomorrow?"}])
    );
    assert_eq!(
        b["inferenceConfig"],
        json!({"maxTokens": 4096, "temperature": 1.0, "stopSequences": ["END"]})
    );
    assert_eq!(
        b["toolConfig"],
        json!({"tools": [
            {"toolSpec": {"name": "get", "inputSchema": {"json": {"type": "object"}}}},
            {"toolSpec": {"name": "gone", "inputSchema": {"json": {"type": "object"}}}}],
            "toolChoice": {"any": {}}}),
        "a tool the history calls stays declared; an empty description is left out"
    );
    assert_eq!(
        b["outputConfig"],
        json!({"textFormat": {"type": "json_schema",
            "structure": {"jsonSchema": {"schema": "{\"type\":\"object\"}", "name": "w"}}}})
    );
}

#[test]
fn a_conversation_starting_with_the_assistant_gets_a_user_turn_first() {
    let req = ChatRequest {
        messages: vec![
            msg(Role::Assistant, vec![Part::Text("Hello!".into())]),
            msg(Role::User, vec![Part::Text("hi".into())]),
        ],
        ..ChatRequest::default()
    };
    let b = request_to_converse(&req, None);
    assert_eq!(b["messages"][0]["role"], "user");
    assert_eq!(b["messages"][1]["role"], "assistant");
    assert!(!b.contains_key("inferenceConfig") && !b.contains_key("toolConfig"));
}

#[test]
fn an_answer_reads_its_text_calls_reasoning_stop_and_usage() {
    let v = json!({"output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "sig"}}},
            {"text": "Looking."},
            {"toolUse": {"toolUseId": "t1", "name": "get", "input": {"a": 1}}}]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 5, "outputTokens": 7, "totalTokens": 14, "cacheWriteInputTokens": 2},
        "metrics": {"latencyMs": 4}});
    let r = response_from_converse(&v).unwrap();
    assert_eq!(
        r.content,
        vec![
            Part::Reasoning("hm".into()),
            Part::Text("Looking.".into()),
            Part::ToolCall {
                id: "t1".into(),
                name: "get".into(),
                arguments: "{\"a\":1}".into()
            }
        ]
    );
    assert_eq!(r.stop, Some(StopReason::ToolCalls));
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 7,
            output_tokens: 7,
            cached_input_tokens: 0,
            cache_write_tokens: 2
        })
    );
    for (reason, stop) in [
        ("max_tokens", StopReason::Length),
        ("guardrail_intervened", StopReason::ContentFilter),
        ("stop_sequence", StopReason::Stop),
    ] {
        let v = json!({"output": {"message": {"role": "assistant", "content": []}}, "stopReason": reason});
        assert_eq!(response_from_converse(&v).unwrap().stop, Some(stop));
    }
    assert!(response_from_converse(&json!({"message": "x"})).is_none());
}
