use std::sync::Arc;

use super::*;
use crate::providers::codec::Complete;
use crate::providers::resolve::resolve;
use crate::providers::ProviderRuntime;

fn entry(base: &str) -> ProviderEntry {
    let v = serde_json::json!({"id": "bc", "kind": "bedrock-converse", "baseUrl": base,
        "models": ["us.meta.llama3-3-70b-instruct-v1:0"]});
    let config = serde_json::from_value(v).expect("a provider");
    resolve(config, Arc::new(ProviderRuntime::new(None)), &|_| None)
}

#[test]
fn its_models_are_called_at_their_converse_addresses_signed_like_bedrock() {
    let p = entry("https://bedrock-runtime.eu-west-1.amazonaws.com/");
    let plain = BedrockConverse
        .url(&p, "us.meta.llama3-3-70b-instruct-v1:0", false)
        .unwrap();
    assert_eq!(
        plain.as_str(),
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/us.meta.llama3-3-70b-instruct-v1:0/converse"
    );
    let arn = "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc";
    let streamed = BedrockConverse.url(&p, arn, true).unwrap();
    assert!(
        streamed.path().ends_with("/converse-stream")
            && streamed
                .path()
                .contains("application-inference-profile%2Fabc"),
        "{streamed}"
    );
    assert_eq!(
        BedrockConverse.serves("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        vec!["claude-sonnet-4-5-20250929", "claude-sonnet-4-5"]
    );
    assert!(BedrockConverse
        .serves("meta.llama3-3-70b-instruct-v1:0")
        .is_empty());
    assert_eq!(
        BedrockConverse.framing(Some("application/vnd.amazon.eventstream")),
        Framing::AwsEventStream
    );
}

#[test]
fn a_stream_of_typed_events_is_text_a_tool_call_the_stop_and_the_usage() {
    let mut d = api::Converse.decoder();
    let mut events = Vec::new();
    let mut ended = false;
    for e in [
        r#"{"messageStart":{"role":"assistant","p":"abc"}}"#,
        r#"{"contentBlockDelta":{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hm"}}}}"#,
        r#"{"contentBlockDelta":{"contentBlockIndex":1,"delta":{"text":"Let me look."},"p":"ab"}}"#,
        r#"{"contentBlockStop":{"contentBlockIndex":1}}"#,
        r#"{"contentBlockStart":{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"read"}}}}"#,
        r#"{"contentBlockDelta":{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{\"path\":"}}}}"#,
        r#"{"contentBlockDelta":{"contentBlockIndex":2,"delta":{"toolUse":{"input":"\"a\"}"}}}}"#,
        r#"{"messageStop":{"stopReason":"tool_use"}}"#,
        r#"{"metadata":{"usage":{"inputTokens":10,"outputTokens":5,"totalTokens":19,"cacheReadInputTokens":4},"metrics":{"latencyMs":3}}}"#,
    ] {
        let decoded = d.decode(e.as_bytes(), true).unwrap();
        ended |= decoded.end;
        events.extend(decoded.events);
    }
    use crate::canonical::{StopReason, StreamEvent as E, Usage};
    assert_eq!(
        events,
        vec![
            E::ReasoningDelta("hm".into()),
            E::TextDelta("Let me look.".into()),
            E::ToolCallStart {
                index: 0,
                id: "tooluse_1".into(),
                name: "read".into()
            },
            E::ToolCallDelta {
                index: 0,
                arguments: "{\"path\":".into()
            },
            E::ToolCallDelta {
                index: 0,
                arguments: "\"a\"}".into()
            },
            E::Finish(StopReason::ToolCalls),
            E::Usage(Usage {
                input_tokens: 14,
                output_tokens: 5,
                cached_input_tokens: 4,
                cache_write_tokens: 0
            }),
        ]
    );
    assert!(ended, "metadata is the stream's last event");
    // An exception met mid-stream, as the event-stream reader hands it on.
    let e = d
        .decode(
            br#"{"type":"error","error":{"type":"rate_limit_error","message":"Too many tokens"}}"#,
            false,
        )
        .unwrap();
    assert_eq!(e.error.map(|e| e.status), Some(429));
}

#[test]
fn a_complete_answer_is_an_answer_and_anything_else_is_not() {
    let ok = br#"{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4},"metrics":{"latencyMs":1}}"#;
    assert!(matches!(api::Converse.complete(ok), Complete::Answer(Some(u)) if u.input_tokens == 3));
    assert!(matches!(
        api::Converse.complete(br#"{"message":"nope"}"#),
        Complete::NotAnswer(_)
    ));
}
