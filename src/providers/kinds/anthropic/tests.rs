//! Unit tests of the `anthropic` kind, with no server.

use super::*;

/// The same events with and without the fast path: usage, finish, end and errors agree.
#[test]
fn stream_events_read_alike_with_and_without_the_fast_path() {
    let events = [
        r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":9,"output_tokens":1}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"message_stop"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}"#,
        r#"{"type":"message_stop"}"#,
    ];
    for fast in [true, false] {
        let mut d = StreamDecoder::default();
        let got: Vec<_> = events
            .iter()
            .map(|e| decode(&mut d, e.as_bytes(), !fast).unwrap())
            .map(|x| {
                (
                    x.finish,
                    x.usage.map(|u| (u.input_tokens, u.output_tokens)),
                    x.end,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (false, None, false),
                (false, None, false),
                (false, None, false),
                (true, Some((9, 4)), false),
                (false, None, true),
            ],
            "fast path: {fast}"
        );
    }
    let mut d = StreamDecoder::default();
    let e = decode(
        &mut d,
        br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        false,
    )
    .unwrap()
    .error
    .unwrap();
    assert_eq!((e.status, e.message()), (529, "Overloaded"));
    assert!(decode(&mut d, b"{\"type\":", false).is_err());
}
