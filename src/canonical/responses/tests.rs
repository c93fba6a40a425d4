use serde_json::{json, Map, Value};

use super::*;
use crate::canonical::StreamEvent;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn codex_like() -> Map<String, Value> {
    obj(json!({
        "model": "gpt-5", "instructions": "You are Codex.", "stream": true, "store": false,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix it"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA…"},
            {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch\n"},
            {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done"},
            {"role": "user", "content": "and now?"}
        ],
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
            {"type": "custom", "name": "apply_patch", "description": "Edit files.",
             "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
            {"type": "web_search"}
        ],
        "tool_choice": "auto", "parallel_tool_calls": false, "max_output_tokens": 500
    }))
}

#[test]
fn codex_input_items_become_one_canonical_conversation() {
    let r = request_from_responses(&codex_like()).unwrap();
    assert_eq!(r.system, ["You are Codex.", "Sandbox: read-only."]);
    let roles: Vec<Role> = r.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool,
            Role::User
        ]
    );
    assert_eq!(
        r.messages[3].content,
        [Part::ToolCall {
            id: "call_2".into(),
            name: "apply_patch".into(),
            arguments: json!({"input": "*** Begin Patch\n*** End Patch\n"}).to_string(),
        }]
    );
    // The hosted tool is left out; the freeform one is a function with one string parameter
    // whose description carries the grammar.
    assert_eq!(r.tools.len(), 2);
    let patch = &r.tools[1];
    assert_eq!(patch.parameters["required"], json!(["input"]));
    assert!(patch.parameters["properties"]["input"]["description"]
        .as_str()
        .unwrap()
        .contains("start: begin_patch hunk+ end_patch"));
    assert_eq!(r.max_tokens, Some(500));
    assert_eq!(r.extra["parallel_tool_calls"], false);
    assert!(r.stream);
}

#[test]
fn bad_requests_say_what_to_fix() {
    let e = request_from_responses(&obj(json!({"model": "m", "input": "hi",
        "previous_response_id": "resp_1"})))
    .unwrap_err();
    assert_eq!(e.param, "previous_response_id");
    assert!(e.message.contains("whole conversation"), "{}", e.message);
    let e = request_from_responses(&obj(json!({"model": "m", "input": 3}))).unwrap_err();
    assert_eq!(e.param, "input");
    let e = request_from_responses(&obj(json!({"input": "hi"}))).unwrap_err();
    assert_eq!(e.param, "model");
}

fn frames(out: &str) -> Vec<Value> {
    out.split("\n\n")
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn a_stream_with_text_a_function_and_a_freeform_call_reads_as_openai_sends_it() {
    let echo = Echo::new(&codex_like(), "req1", "gpt-5", 1_800_000_000);
    let mut enc = StreamEncoder::new(echo);
    let mut out = String::new();
    for ev in [
        StreamEvent::TextDelta("Let me ".into()),
        StreamEvent::TextDelta("look.".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "call_9".into(),
            name: "exec_command".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{\"cmd\":".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "\"ls\"}".into(),
        },
        StreamEvent::ToolCallStart {
            index: 1,
            id: "call_10".into(),
            name: "apply_patch".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 1,
            arguments: json!({"input": "*** Begin Patch\n"}).to_string(),
        },
        StreamEvent::Finish(StopReason::ToolCalls),
        StreamEvent::Usage(Usage {
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: 4,
        }),
    ] {
        enc.push(&ev, &mut out);
    }
    enc.finish(&mut out);
    let f = frames(&out);
    let types: Vec<&str> = f.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.output_item.added",
            "response.function_call_arguments.done",
            "response.output_item.done",
            "response.custom_tool_call_input.delta",
            "response.custom_tool_call_input.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let seqs: Vec<u64> = f
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..f.len() as u64).collect::<Vec<_>>());
    let done = &f.last().unwrap()["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["content"][0]["text"], "Let me look.");
    assert_eq!(done["output"][1]["type"], "function_call");
    assert_eq!(done["output"][1]["arguments"], "{\"cmd\":\"ls\"}");
    assert_eq!(done["output"][2]["type"], "custom_tool_call");
    assert_eq!(done["output"][2]["input"], "*** Begin Patch\n");
    assert_eq!(done["usage"]["input_tokens_details"]["cached_tokens"], 4);
    assert_eq!(done["usage"]["total_tokens"], 15);
    assert_eq!(
        done["tools"][1]["type"], "custom",
        "the request's tools echoed"
    );
}

#[test]
fn a_complete_answer_and_a_cut_one() {
    let echo = Echo::new(&codex_like(), "req2", "gpt-5", 1);
    let answer = ChatResponse {
        id: "x".into(),
        model: "gpt-5".into(),
        created: 1,
        content: vec![
            Part::Text("ok".into()),
            Part::ToolCall {
                id: "call_3".into(),
                name: "apply_patch".into(),
                arguments: json!({"input": "P"}).to_string(),
            },
        ],
        stop: Some(StopReason::Length),
        usage: None,
    };
    let r = response_to_responses(&answer, &echo);
    assert_eq!(r["object"], "response");
    assert_eq!(r["status"], "incomplete");
    assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(r["output"][1]["type"], "custom_tool_call");
    assert_eq!(r["output"][1]["input"], "P");
    assert_eq!(r["output"][1]["call_id"], "call_3");
}
