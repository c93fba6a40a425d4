use super::*;
use serde_json::json;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[test]
fn request_round_trip_keeps_everything() {
    let body = obj(json!({
        "model": "auto",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{\"x\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a cat"}
        ],
        "tools": [{"type": "function", "function": {"name": "look", "description": "d",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}],
        "tool_choice": "auto",
        "max_completion_tokens": 50,
        "temperature": 0.5,
        "stop": "END",
        "stream": true,
        "stream_options": {"include_usage": true},
        "seed": 3,
        "response_format": {"type": "json_object"}
    }));
    let req = request_from_openai(&body).expect("valid");
    assert_eq!(req.system, vec!["be brief".to_string()]);
    assert_eq!(req.messages.len(), 3);
    assert_eq!(req.max_tokens, Some(50));
    assert_eq!(req.stop, vec!["END".to_string()]);
    assert!(req.stream && req.stream_usage);
    assert_eq!(req.extra.get("seed"), Some(&json!(3)));
    let needs = req.needs();
    assert!(needs.tools && needs.images && needs.multi_turn);

    let back = request_to_openai(&req);
    let again = request_from_openai(&back).expect("valid again");
    assert_eq!(
        again, req,
        "OpenAI -> canonical -> OpenAI -> canonical is stable"
    );
    assert_eq!(
        back["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"x\":1}"
    );
    assert_eq!(back["messages"][3]["tool_call_id"], "call_1");
}

#[test]
fn bad_requests_name_the_field() {
    let e = request_from_openai(&obj(json!({"model": "auto"}))).expect_err("no messages");
    assert_eq!(e.param, "messages");
    let e = request_from_openai(&obj(json!({"model": "auto", "messages": []}))).expect_err("empty");
    assert_eq!(e.param, "messages");
    let e = request_from_openai(&obj(
        json!({"messages": [{"role": "user", "content": "x"}]}),
    ))
    .expect_err("no model");
    assert_eq!(e.param, "model");
    let e = request_from_openai(&obj(
        json!({"model": "a", "messages": [{"role": "robot", "content": "x"}]}),
    ))
    .expect_err("bad role");
    assert_eq!(e.param, "messages[0].role");
    let e = request_from_openai(&obj(
        json!({"model": "a", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
    ))
    .expect_err("bad stream");
    assert_eq!(e.param, "stream");
}

#[test]
fn response_and_chunks_convert_both_ways() {
    let v = json!({"id": "c1", "object": "chat.completion", "created": 5, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi",
            "tool_calls": [{"id": "t", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 1}}});
    let r = response_from_openai(&v).expect("parse");
    assert_eq!(r.stop, Some(StopReason::ToolCalls));
    assert_eq!(
        r.usage,
        Some(Usage {
            input_tokens: 3,
            output_tokens: 4,
            cached_input_tokens: 1,
            cache_write_tokens: 0
        })
    );
    assert_eq!(response_from_openai(&response_to_openai(&r)), Some(r));

    let events = vec![
        StreamEvent::TextDelta("he".into()),
        StreamEvent::ToolCallStart {
            index: 0,
            id: "t".into(),
            name: "f".into(),
        },
        StreamEvent::ToolCallDelta {
            index: 0,
            arguments: "{\"a\"".into(),
        },
        StreamEvent::Finish(StopReason::Length),
        StreamEvent::Usage(Usage {
            input_tokens: 1,
            output_tokens: 2,
            cached_input_tokens: 0,
            cache_write_tokens: 0,
        }),
    ];
    let back: Vec<StreamEvent> = events
        .iter()
        .flat_map(|e| chunk_events(&event_to_chunk(e, "id", "m", 0)))
        .collect();
    assert_eq!(back, events);
}

#[test]
fn reasoning_reads_from_either_field_and_goes_out_as_reasoning_content() {
    let chunk = json!({"choices": [{"index": 0, "delta": {"reasoning_content": "Let me see."}}]});
    assert_eq!(
        chunk_events(&chunk),
        [StreamEvent::ReasoningDelta("Let me see.".into())]
    );
    let chunk = json!({"choices": [{"index": 0, "delta": {"reasoning": "Hmm", "content": "Hi"}}]});
    assert_eq!(
        chunk_events(&chunk),
        [
            StreamEvent::ReasoningDelta("Hmm".into()),
            StreamEvent::TextDelta("Hi".into())
        ]
    );
    let whole = json!({"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "reasoning_content": "Because.", "content": "Yes."}}]});
    let r = response_from_openai(&whole).unwrap();
    assert_eq!(
        r.content,
        [
            Part::Reasoning("Because.".into()),
            Part::Text("Yes.".into())
        ]
    );
    let back = response_to_openai(&r);
    assert_eq!(
        back["choices"][0]["message"]["reasoning_content"],
        "Because."
    );
    assert_eq!(back["choices"][0]["message"]["content"], "Yes.");
    let c = event_to_chunk(&StreamEvent::ReasoningDelta("x".into()), "i", "m", 1);
    assert_eq!(c["choices"][0]["delta"]["reasoning_content"], "x");
}
