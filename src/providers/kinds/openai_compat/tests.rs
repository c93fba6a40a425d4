//! Unit tests of the `openai-compatible` kind, with no server.

use super::*;
use serde_json::json;

#[test]
fn passthrough_keeps_every_field() {
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2, "x_unknown": {"a": [1, 2]}, "seed": 7});
    let Value::Object(map) = body else {
        unreachable!()
    };
    let out: Value =
        serde_json::from_slice(&passthrough_body(&map, "llama", None, None)).expect("json");
    assert_eq!(out["model"], "llama");
    assert_eq!(out["x_unknown"], json!({"a": [1, 2]}));
    assert_eq!(out["seed"], 7);
    assert_eq!(out["temperature"], 0.2);
    assert_eq!(out.as_object().map(|m| m.len()), Some(5));
}

#[test]
fn max_tokens_is_capped_only_when_larger() {
    let Value::Object(map) = json!({"model": "x", "max_tokens": 64000, "messages": []}) else {
        unreachable!()
    };
    let out: Value =
        serde_json::from_slice(&passthrough_body(&map, "m", Some(8192), None)).expect("json");
    assert_eq!(out["max_tokens"], 8192);
    let out: Value =
        serde_json::from_slice(&passthrough_body(&map, "m", Some(100_000), None)).expect("json");
    assert_eq!(out["max_tokens"], 64000);
}

#[test]
fn the_fast_path_and_the_full_parse_read_chunks_alike() {
    let chunks = [
        r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":"he said \"hi\""},"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"f","arguments":""}}]},"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{},"finish_reason" : "stop"}]}"#,
        r#"{"id":"c","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
    ];
    let expect = [
        (false, false, None, false),
        (true, false, None, false),
        (true, false, None, false),
        (true, true, None, false),
        (false, false, Some((5, 2)), true),
    ];
    for (c, want) in chunks.iter().zip(expect) {
        for events in [false, true] {
            let d = decode(c.as_bytes(), events).unwrap();
            let got = (
                d.content,
                d.finish,
                d.usage.map(|u| (u.input_tokens, u.output_tokens)),
                d.usage_only,
            );
            assert_eq!(got, want, "{c} (events: {events})");
            assert!(d.error.is_none() && !d.end);
        }
    }
    assert!(decode(b"[DONE]", false).unwrap().end);
    assert!(decode(b"{not json", false).is_err());
    assert!(decode(b"{\"choices\":[{\"delta\":{\"content\":\"x\"}}]", false).is_err());
    let e = decode(br#"{"error":{"message":"slow down","code":"429"}}"#, false)
        .unwrap()
        .error
        .unwrap();
    assert_eq!((e.status, e.message()), (429, "slow down"));
    let e = decode(br#"{"error":{"message":"boom"}}"#, true)
        .unwrap()
        .error
        .unwrap();
    assert_eq!(e.status, 502, "an error without a code is a bad gateway");
}

#[test]
fn complete_bodies_are_answers_errors_or_neither() {
    assert!(matches!(
        complete(br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#),
        Complete::Answer(Some(_))
    ));
    assert!(matches!(
        complete(br#"{"error":{"message":"quota","code":429}}"#),
        Complete::Error(UpstreamError { status: 429, .. })
    ));
    assert!(matches!(complete(b"<html>"), Complete::NotAnswer(_)));
}

#[test]
fn one_pass_reads_what_the_two_readers_read() {
    let bodies = [
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"a\": 1}"},
            "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}),
        json!({"choices": [{"message": {"content": "{\"a\": \"cut"}, "finish_reason": "length"}]}),
        json!({"choices": [{"message": {"content": null, "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "f", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [{"message": {"content": "one"}}, {"message": {"content": "two"}}]}),
        json!({"choices": [{"text": "a legacy completion"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
        json!({"choices": [], "usage": null}),
        json!({"error": {"message": "overloaded", "code": 529}}),
        json!({"id": "neither"}),
    ];
    for body in bodies {
        let body = serde_json::to_vec(&body).expect("json");
        let (complete_, text) = complete_with_text(&body);
        assert_eq!(format!("{complete_:?}"), format!("{:?}", complete(&body)));
        assert_eq!(
            text,
            answer_text(&body).map(|(t, cut)| (t.into_owned(), cut))
        );
    }
    let (_, text) = complete_with_text(
        br#"{"choices":[{"message":{"content":"x"},"finish_reason":"length"}]}"#,
    );
    assert_eq!(text, Some(("x".to_string(), true)));
}

/// A body that already names the model it goes to is sent as the very bytes it came in (shared,
/// not copied); one naming another model, or the same one written with an escape, or one that
/// gets a member added, is a copy with the model written in.
#[test]
fn a_body_naming_its_model_is_shared_not_copied() {
    let verbatim = |text: &str| {
        let start = text.find(r#""model":"#).unwrap() + r#""model":"#.len();
        let end = start + text[start..].find(',').unwrap();
        Verbatim {
            wire: Wire::OpenAi,
            bytes: Bytes::copy_from_slice(text.as_bytes()),
            model: Some(start..end),
        }
    };
    let same = verbatim(r#"{"model":"claude-sonnet-4-5","stream":true}"#);
    let out = splice(&same, "claude-sonnet-4-5", None).unwrap();
    assert_eq!(out.as_ptr(), same.bytes.as_ptr(), "shared");
    assert_eq!(out, same.bytes);

    let other = splice(&same, "m", None).unwrap();
    assert_ne!(other.as_ptr(), same.bytes.as_ptr());
    assert_eq!(&other[..], br#"{"model":"m","stream":true}"#);

    let added = splice(&same, "claude-sonnet-4-5", Some(USAGE_MEMBER)).unwrap();
    assert_eq!(
        &added[..],
        br#"{"model":"claude-sonnet-4-5","stream":true,"stream_options":{"include_usage":true}}"#
    );

    // The same name with an escape in it is the same string, but not the same bytes: written.
    let escaped = verbatim(r#"{"model":"m\u0065","stream":true}"#);
    let out = splice(&escaped, "me", None).unwrap();
    assert_eq!(&out[..], br#"{"model":"me","stream":true}"#);
    // A model whose name JSON must escape is written as serde writes it.
    let quoted = verbatim(r#"{"model":"a\"b","stream":true}"#);
    let out = splice(&quoted, "a\"b", None).unwrap();
    assert_eq!(&out[..], br#"{"model":"a\"b","stream":true}"#);
    assert_ne!(out.as_ptr(), quoted.bytes.as_ptr());
}
