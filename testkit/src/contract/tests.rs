//! The contract checker against bodies the real APIs accept and refuse.

use super::*;
use serde_json::json;

fn msg(extra: Value) -> Value {
    let mut b = json!({"model": "claude-sonnet-4-5", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}]});
    for (k, v) in extra.as_object().unwrap() {
        b[k] = v.clone();
    }
    b
}

#[test]
fn anthropic_refuses_stream_options_and_accepts_a_plain_stream() {
    assert_eq!(
        check(Api::AnthropicMessages, &msg(json!({"stream": true}))),
        Ok(())
    );
    let e = check(
        Api::AnthropicMessages,
        &msg(json!({"stream": true, "stream_options": {"include_usage": true}})),
    )
    .unwrap_err();
    assert_eq!(e.dotted(), "stream_options");
    assert_eq!(e.problem, Problem::Unknown);
}

#[test]
fn anthropic_checks_content_blocks_by_their_type() {
    let body = msg(json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "a", "bogus": 1}]}]}));
    let e = check(Api::AnthropicMessages, &body).unwrap_err();
    assert_eq!(e.dotted(), "messages.0.content.0.bogus");
    let body = msg(json!({"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]}));
    assert_eq!(check(Api::AnthropicMessages, &body), Ok(()));
    let e = check(
        Api::AnthropicMessages,
        &json!({"model": "m", "messages": []}),
    )
    .unwrap_err();
    assert_eq!(
        (e.dotted().as_str(), e.problem),
        ("max_tokens", Problem::Missing)
    );
}

#[test]
fn anthropic_tool_schemas_are_free_form_json_schema() {
    let body = msg(
        json!({"tools": [{"name": "f", "input_schema": {"type": "object",
        "$schema": "http://json-schema.org/draft-07/schema#", "additionalProperties": false}}]}),
    );
    assert_eq!(check(Api::AnthropicMessages, &body), Ok(()));
}

#[test]
fn gemini_parameters_are_the_openapi_subset() {
    let decl = |params: Value| {
        json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "tools": [{"functionDeclarations": [{"name": "f", "parameters": params}]}]})
    };
    let ok = decl(json!({"type": "OBJECT", "properties": {"a": {"type": "string"}}}));
    assert_eq!(check(Api::GeminiGenerateContent, &ok), Ok(()));
    let lower = decl(json!({"type": "object", "required": ["a"]}));
    assert_eq!(check(Api::GeminiGenerateContent, &lower), Ok(()));
    let bad = decl(json!({"type": "object", "additionalProperties": false}));
    let e = check(Api::GeminiGenerateContent, &bad).unwrap_err();
    assert_eq!(e.field(), "additionalProperties");
    assert_eq!(
        e.parent().bracketed(true),
        "tools[0].function_declarations[0].parameters"
    );
    let full = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "parametersJsonSchema":
            {"type": "object", "additionalProperties": false, "$schema": "x"}}]}]});
    assert_eq!(check(Api::GeminiGenerateContent, &full), Ok(()));
    let snake = json!({"contents": [], "system_instruction": {"parts": [{"text": "s"}]}});
    assert_eq!(check(Api::GeminiGenerateContent, &snake), Ok(()));
}

#[test]
fn openai_chat_and_responses_refuse_unknown_fields() {
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}],
        "stream": true, "stream_options": {"include_usage": true}});
    assert_eq!(check(Api::OpenAiChat, &chat), Ok(()));
    let mut bad = chat.clone();
    bad["thinking"] = json!({"type": "enabled"});
    assert_eq!(
        check(Api::OpenAiChat, &bad).unwrap_err().field(),
        "thinking"
    );
    let r = json!({"model": "gpt-5", "input": [{"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "hi"}]}]});
    assert_eq!(check(Api::OpenAiResponses, &r), Ok(()));
    let mut bad = r.clone();
    bad["input"][0]["content"][0]["status"] = json!("completed");
    assert_eq!(
        check(Api::OpenAiResponses, &bad)
            .unwrap_err()
            .bracketed(false),
        "input[0].content[0].status"
    );
}

/// A Converse body (botocore's service model): a union takes exactly one member, and AWS's
/// lengths, ranges and patterns hold.
#[test]
fn converse_checks_unions_bounds_and_patterns_as_aws_does() {
    let ok = json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
        "system": [{"text": "be brief"}],
        "inferenceConfig": {"maxTokens": 10, "temperature": 0.5},
        "toolConfig": {"tools": [{"toolSpec": {"name": "read_file",
            "inputSchema": {"json": {"type": "object", "anything": ["goes"]}}}}],
            "toolChoice": {"auto": {}}}});
    assert_eq!(check(Api::BedrockConverse, &ok), Ok(()));
    assert_eq!(check(Api::BedrockConverseStream, &ok), Ok(()));
    let refused = |pointer: &str, v: Value| {
        let mut b = ok.clone();
        *b.pointer_mut(pointer).unwrap() = v;
        check(Api::BedrockConverse, &b).unwrap_err()
    };
    let two = refused(
        "/messages/0/content/0",
        json!({"text": "hi", "image": {"format": "png", "source": {"bytes": "AA"}}}),
    );
    assert_eq!(two.bracketed(false), "messages[0].content[0]");
    assert!(matches!(two.problem, Problem::Constraint(ref c) if c.contains("exactly one")));
    let name = refused("/toolConfig/tools/0/toolSpec/name", json!("files.read"));
    assert!(matches!(name.problem, Problem::Constraint(ref c) if c.contains("[a-zA-Z0-9_-]+")));
    let hot = refused("/inferenceConfig/temperature", json!(1.5));
    assert!(
        matches!(hot.problem, Problem::Constraint(ref c) if c.contains("less than or equal to 1"))
    );
    let none = refused("/inferenceConfig/maxTokens", json!(0));
    assert!(matches!(none.problem, Problem::Constraint(_)));
    let blank = refused("/system/0/text", json!(""));
    assert!(
        matches!(blank.problem, Problem::Constraint(ref c) if c.contains("greater than or equal to 1"))
    );
    let unknown = refused("/inferenceConfig", json!({"max_tokens": 10}));
    assert_eq!(unknown.problem, Problem::Unknown);
    let role = refused("/messages/0/role", json!("tool"));
    assert!(matches!(role.problem, Problem::Value(_)));
}
