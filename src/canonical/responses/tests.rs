use serde_json::{json, Map, Value};

use super::stream::StreamEncoder;
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
    assert_eq!(
        patch.freeform,
        Some(crate::canonical::Freeform::Grammar {
            syntax: "lark".into(),
            definition: "start: begin_patch hunk+ end_patch".into()
        }),
        "and stays a freeform tool"
    );
    assert_eq!(r.tools[0].freeform, None);
    assert_eq!(r.max_tokens, Some(500));
    assert_eq!(r.parallel_tool_calls, Some(false));
    assert!(r.stream);
}

/// A Responses upstream is given a freeform tool as one (`custom`, its grammar kept), and the
/// conversation's calls to it as `custom_tool_call` with their raw input: the model then
/// answers it with a `custom_tool_call` too, never a function call the client cannot run.
#[test]
fn freeform_tools_reach_a_responses_upstream_as_freeform_tools() {
    let mut r = request_from_responses(&codex_like()).unwrap();
    r.tool_choice = Some(crate::canonical::ToolChoice::Tool("apply_patch".into()));
    let b = upstream::request_to_responses(&r);
    assert_eq!(
        b["tools"][1],
        json!({"type": "custom", "name": "apply_patch", "description": "Edit files.",
            "format": {"type": "grammar", "syntax": "lark",
                "definition": "start: begin_patch hunk+ end_patch"}})
    );
    assert_eq!(b["tools"][0]["type"], "function");
    assert_eq!(
        b["tool_choice"],
        json!({"type": "custom", "name": "apply_patch"})
    );
    let items = b["input"].as_array().unwrap();
    let kinds: Vec<&str> = items.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message",
            "function_call",
            "function_call_output",
            "custom_tool_call",
            "custom_tool_call_output",
            "message"
        ]
    );
    assert_eq!(items[3]["input"], "*** Begin Patch\n*** End Patch\n");
    assert_eq!(items[4]["call_id"], "call_2");
}

#[test]
fn bad_requests_say_what_to_fix() {
    let e = request_from_responses(&obj(json!({"model": "m", "input": "hi",
        "previous_response_id": 7})))
    .unwrap_err();
    assert_eq!(e.param, "previous_response_id");
    assert!(e.message.contains("must be a string"), "{}", e.message);
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
            cache_write_tokens: 0,
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

/// Codex 0.171's own shape: its tools in an `additional_tools` input item, grouped in
/// namespaces (the default `functions` one holds the freeform `exec`), a tool's output as a
/// list of text parts, and earlier calls carrying their `namespace`.
fn codex_171_like() -> Map<String, Value> {
    obj(json!({
        "model": "gpt-6.2-sol", "stream": true, "store": false, "tool_choice": "auto",
        "input": [
            {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [
                {"type": "namespace", "name": "functions", "description": "", "tools": [
                    {"type": "custom", "name": "exec", "description": "Run JavaScript.",
                     "format": {"type": "grammar", "syntax": "lark", "definition": "start: SOURCE"}},
                    {"type": "function", "name": "wait", "parameters": {"type": "object", "properties": {}}}
                ]},
                {"type": "namespace", "name": "clock", "tools": [
                    {"type": "function", "name": "sleep", "parameters": {"type": "object",
                     "properties": {"duration_ms": {"type": "number"}}}}
                ]}
            ]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "nap, then patch"}]},
            {"type": "function_call", "call_id": "call_a", "name": "sleep", "namespace": "clock",
             "arguments": "{\"duration_ms\":5}"},
            {"type": "function_call_output", "call_id": "call_a", "output": "Sleep completed."},
            {"type": "custom_tool_call", "call_id": "call_b", "name": "exec", "input": "await tools.apply_patch(P)"},
            {"type": "custom_tool_call_output", "call_id": "call_b", "output": [
                {"type": "input_text", "text": "Script completed\nOutput:\n"},
                {"type": "input_text", "text": "patched"}]}
        ]
    }))
}

#[test]
fn tools_declared_in_input_and_namespaces_travel_flat_and_come_back_namespaced() {
    let body = codex_171_like();
    let r = request_from_responses(&body).unwrap();
    let names: Vec<&str> = r.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["exec", "wait", "clock__sleep"]);
    assert_eq!(r.tools[0].parameters["required"], json!(["input"]));
    assert_eq!(
        r.system,
        Vec::<String>::new(),
        "the tools item is not a message"
    );
    let calls: Vec<&str> = r
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolCall { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["clock__sleep", "exec"]);
    let outputs: Vec<&str> = r
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        outputs,
        ["Sleep completed.", "Script completed\nOutput:\npatched"]
    );

    // Back to the client: the namespaced call with its namespace, the freeform one raw.
    let echo = Echo::new(&body, "req3", "gpt-6.2-sol", 1);
    let answer = ChatResponse {
        id: "x".into(),
        model: "m".into(),
        created: 1,
        content: vec![
            Part::ToolCall {
                id: "call_c".into(),
                name: "clock__sleep".into(),
                arguments: "{\"duration_ms\":1}".into(),
            },
            Part::ToolCall {
                id: "call_d".into(),
                name: "exec".into(),
                arguments: json!({"input": "text('hi')"}).to_string(),
            },
        ],
        stop: Some(StopReason::ToolCalls),
        usage: None,
    };
    let r = response_to_responses(&answer, &echo);
    assert_eq!(r["output"][0]["type"], "function_call");
    assert_eq!(r["output"][0]["name"], "sleep");
    assert_eq!(r["output"][0]["namespace"], "clock");
    assert_eq!(r["output"][1]["type"], "custom_tool_call");
    assert_eq!(r["output"][1]["name"], "exec");
    assert!(r["output"][1].get("namespace").is_none());
    assert_eq!(r["output"][1]["input"], "text('hi')");

    // Streamed, the same names on every event that carries one.
    let mut enc = StreamEncoder::new(Echo::new(&body, "req4", "gpt-6.2-sol", 1));
    let mut out = String::new();
    for ev in [
        StreamEvent::ToolCallStart {
            index: 0,
            id: "call_e".into(),
            name: "clock__sleep".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{}".into(),
        },
        StreamEvent::Finish(StopReason::ToolCalls),
    ] {
        enc.push(&ev, &mut out);
    }
    enc.finish(&mut out);
    let f = frames(&out);
    let named: Vec<(&str, &Value)> = f
        .iter()
        .filter_map(|e| {
            let name = e.get("item").map(|i| &i["name"]).or(e.get("name"))?;
            Some((e["type"].as_str().unwrap(), name))
        })
        .collect();
    assert_eq!(named.len(), 3, "{named:?}");
    assert!(named.iter().all(|(_, n)| *n == "sleep"), "{named:?}");
    let added = f
        .iter()
        .find(|e| e["type"] == "response.output_item.added")
        .unwrap();
    assert_eq!(added["item"]["namespace"], "clock");
}

#[test]
fn reasoning_from_any_upstream_is_a_summary_the_client_can_show() {
    let body = obj(json!({"model": "m", "input": "think", "stream": true}));
    let mut enc = StreamEncoder::new(Echo::new(&body, "req5", "m", 1));
    let mut out = String::new();
    for ev in [
        StreamEvent::ReasoningDelta("Weighing ".into()),
        StreamEvent::ReasoningDelta("options.".into()),
        StreamEvent::TextDelta("Done.".into()),
        StreamEvent::Finish(StopReason::Stop),
    ] {
        enc.push(&ev, &mut out);
    }
    enc.finish(&mut out);
    let f = frames(&out);
    let types: Vec<&str> = f.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        types[2..9],
        [
            "response.output_item.added",
            "response.reasoning_summary_part.added",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.delta",
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done",
        ]
    );
    assert_eq!(f[2]["item"]["type"], "reasoning");
    let done = &f.last().unwrap()["response"];
    let reasoning = &done["output"][0];
    assert_eq!(reasoning["summary"][0]["text"], "Weighing options.");
    assert!(reasoning["id"]
        .as_str()
        .unwrap()
        .starts_with(REASONING_ID_PREFIX));
    assert_eq!(done["output"][1]["content"][0]["text"], "Done.");
    assert_eq!(f[9]["output_index"], 1, "the message is the next item");

    // Whole: the reasoning item first.
    let answer = ChatResponse {
        id: "x".into(),
        model: "m".into(),
        created: 1,
        content: vec![Part::Reasoning("Hmm.".into()), Part::Text("Yes.".into())],
        stop: Some(StopReason::Stop),
        usage: None,
    };
    let r = response_to_responses(&answer, &Echo::new(&body, "req6", "m", 1));
    assert_eq!(r["output"][0]["type"], "reasoning");
    assert_eq!(r["output"][0]["summary"][0]["text"], "Hmm.");
    assert_eq!(r["output"][1]["content"][0]["text"], "Yes.");
}
