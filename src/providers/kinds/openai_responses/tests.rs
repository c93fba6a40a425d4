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
