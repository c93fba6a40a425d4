//! Each kind through the trait alone, with no server: the request it builds (URL,
//! authentication, body), what it makes of a complete body and of stream events, and the
//! capabilities it declares.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::*;
use crate::canonical::{ChatRequest, Message, Part, Role};
use crate::providers::codec::Complete;
use crate::providers::resolve::resolve;
use crate::providers::ProviderRuntime;

fn entry(kind: &str, base: &str) -> ProviderEntry {
    let config = serde_json::from_value(json!({"id": "p", "kind": kind, "baseUrl": base,
        "models": ["m1"], "keys": [{"env": "K"}]}))
    .expect("a provider");
    resolve(config, Arc::new(ProviderRuntime::new(None)), &|_| {
        Some("secret-key-123".to_string())
    })
}

/// A client as Baton builds them (rustls with ring), for the kinds' tests.
pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: "m1".into(),
        system: vec!["be brief".into()],
        messages: vec![Message {
            role: Role::User,
            content: vec![Part::Text("hi".into())],
            name: None,
        }],
        max_tokens: Some(10),
        stream: true,
        ..ChatRequest::default()
    }
}

/// The request a kind builds for `o`, taken apart.
fn built(wire: Wire, base: &str, o: &Outbound) -> (String, http::HeaderMap, Value) {
    let kind = of(wire);
    let p = entry(
        crate::config::ProviderKind::all()
            .iter()
            .find(|k| k.wire() == Some(wire))
            .map(|k| k.as_str())
            .unwrap_or_default(),
        base,
    );
    let url = p.chat_url.clone().expect("a chat URL");
    let client = client();
    let rb = kind
        .request(&client, &url, &p, &p.models[0], p.keys.first(), o)
        .expect("a request");
    let req = rb.build().expect("builds");
    let body = req
        .body()
        .and_then(|b| b.as_bytes())
        .map(|b| serde_json::from_slice(b).expect("JSON"))
        .unwrap_or(Value::Null);
    (req.url().to_string(), req.headers().clone(), body)
}

fn outbound<'a>(
    canonical: &'a ChatRequest,
    openai: &'a std::sync::OnceLock<Map<String, Value>>,
    original: Option<(Wire, &'a Map<String, Value>)>,
) -> Outbound<'a> {
    Outbound {
        openai,
        original,
        verbatim: None,
        client: None,
        anthropic_beta: None,
        canonical,
        stream: true,
        request_id: "req_1",
        thinking: crate::providers::thinking::Keep::None,
        now_ms: 0,
    }
}

#[test]
fn every_kind_builds_its_own_request() {
    let c = request();
    // Made by the Chat Completions kind when it builds its request, from the canonical one.
    let openai = std::sync::OnceLock::new();
    let o = outbound(&c, &openai, None);

    let (url, h, body) = built(Wire::OpenAi, "https://x.test/v1", &o);
    assert_eq!(url, "https://x.test/v1/chat/completions");
    assert_eq!(h["authorization"], "Bearer secret-key-123");
    assert_eq!(body["model"], "m1");
    assert_eq!(
        body["stream_options"]["include_usage"], true,
        "a stream asks for usage"
    );

    let (url, h, body) = built(Wire::Anthropic, "https://x.test/v1", &o);
    assert_eq!(url, "https://x.test/v1/messages");
    assert_eq!(h["x-api-key"], "secret-key-123");
    assert!(h.contains_key("anthropic-version"));
    assert_eq!(body["system"], "be brief");
    assert_eq!(body["max_tokens"], 10);

    let (url, h, body) = built(Wire::Gemini, "https://x.test/v1beta", &o);
    assert_eq!(
        url,
        "https://x.test/v1beta/models/m1:streamGenerateContent?alt=sse"
    );
    assert_eq!(h["x-goog-api-key"], "secret-key-123");
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "be brief"}]})
    );

    let (url, h, body) = built(Wire::Responses, "https://x.test/v1", &o);
    assert_eq!(url, "https://x.test/v1/responses");
    assert_eq!(h["authorization"], "Bearer secret-key-123");
    assert_eq!(body["model"], "m1");
    assert_eq!(body["instructions"], "be brief");
}

/// A client of the same API has its own body sent, only the model changed: what has no
/// canonical form (thought signatures, safety settings) survives.
#[test]
fn a_client_of_the_same_api_keeps_its_body() {
    let c = request();
    let openai = std::sync::OnceLock::new();
    let own: Map<String, Value> = serde_json::from_value(json!({
        "contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}},
            "thoughtSignature": "c2ln"}]}],
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
    }))
    .unwrap();
    let o = outbound(&c, &openai, Some((Wire::Gemini, &own)));
    let (_, _, body) = built(Wire::Gemini, "https://x.test/v1beta", &o);
    assert_eq!(body, Value::Object(own.clone()));
    // Another kind gets the translation, not the Gemini body.
    let (_, _, body) = built(Wire::Anthropic, "https://x.test/v1", &o);
    assert!(body.get("safetySettings").is_none() && body["messages"].is_array());
    // No Chat Completions form was made: only an upstream of that API makes it, once.
    assert!(openai.get().is_none());
    let (_, _, body) = built(Wire::OpenAi, "https://x.test/v1", &o);
    assert!(body["messages"].is_array() && openai.get().is_some());
}

#[test]
fn complete_bodies_are_answers_errors_or_neither() {
    let cases = [
        (
            Wire::OpenAi,
            json!({"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
        ),
        (
            Wire::Anthropic,
            json!({"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn", "usage": {"input_tokens": 3, "output_tokens": 1}}),
        ),
        (
            Wire::Gemini,
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}}),
        ),
        (
            Wire::Responses,
            json!({"object": "response", "status": "completed", "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}], "usage": {"input_tokens": 3, "output_tokens": 1}}),
        ),
    ];
    for (wire, body) in cases {
        let kind = of(wire);
        let bytes = serde_json::to_vec(&body).unwrap();
        match kind.complete(&bytes) {
            Complete::Answer(Some(u)) => {
                assert_eq!((u.input_tokens, u.output_tokens), (3, 1), "{wire:?}")
            }
            other => panic!("{wire:?}: {other:?}"),
        }
        let answer = kind.answer(&body).unwrap_or_else(|| panic!("{wire:?}"));
        assert_eq!(answer.text(), "hi", "{wire:?}");
        assert!(
            matches!(
                kind.complete(b"[1, 2]"),
                Complete::NotAnswer(_) | Complete::Error(_)
            ),
            "{wire:?}"
        );
    }
    let err = br#"{"error": {"message": "overloaded", "type": "server_error"}}"#;
    assert!(matches!(of(Wire::OpenAi).complete(err), Complete::Error(_)));
}

#[test]
fn decoders_read_their_own_stream_events() {
    let events: [(Wire, &[&str]); 4] = [
        (
            Wire::OpenAi,
            &[
                r#"{"choices":[{"index":0,"delta":{"content":"hi"}}]}"#,
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
        ),
        (
            Wire::Anthropic,
            &[
                r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3,"output_tokens":0}}}"#,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}"#,
                r#"{"type":"message_stop"}"#,
            ],
        ),
        (
            Wire::Gemini,
            &[
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]}}]}"#,
                r#"{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}"#,
            ],
        ),
        (
            Wire::Responses,
            &[
                r#"{"type":"response.created","response":{"id":"r"}}"#,
                r#"{"type":"response.output_text.delta","item_id":"i","output_index":0,"content_index":0,"delta":"hi"}"#,
                r#"{"type":"response.completed","response":{"id":"r","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":1}}}"#,
            ],
        ),
    ];
    for (wire, frames) in events {
        let mut d = of(wire).decoder();
        assert_eq!(d.wire(), wire);
        let (mut text, mut finish) = (0, false);
        for f in frames {
            let got = d
                .decode(f.as_bytes(), true)
                .unwrap_or_else(|_| panic!("{wire:?}: {f}"));
            text += got.text_bytes;
            finish |= got.finish;
        }
        assert_eq!(text, 2, "{wire:?}");
        assert!(finish, "{wire:?}");
        assert!(d.decode(b"not json", true).is_err(), "{wire:?}");
    }
}

#[test]
fn capabilities_are_declared_not_tested_elsewhere() {
    assert!(of(Wire::Anthropic).signs_reasoning());
    assert!(!of(Wire::OpenAi).signs_reasoning());
    assert!(!of(Wire::Gemini).names_answers());
    assert!(of(Wire::OpenAi).resumes_from_prefill());
    assert!(!of(Wire::Responses).resumes_from_prefill());
    for wire in [Wire::OpenAi, Wire::Responses, Wire::Anthropic, Wire::Gemini] {
        assert_eq!(of(wire).wire(), wire);
        assert_eq!(of(wire).framing(), Framing::Sse);
    }
    let c = request();
    let client = client();
    let h = http::HeaderMap::new();
    assert!(of(Wire::OpenAi)
        .count_request(&client, "https://x.test", "m1", &c, None, &h)
        .is_none());
    let req = of(Wire::Gemini)
        .count_request(&client, "https://x.test/v1beta", "m1", &c, None, &h)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(
        req.url().as_str(),
        "https://x.test/v1beta/models/m1:countTokens"
    );
}

/// The registry is every folder's registration: each kind named once, in its own place in the
/// UI's list, whole (a label, a badge of two letters, an HTTP kind's platform over its API, a
/// CLI kind's program), and found by its name.
#[test]
fn every_registered_kind_is_whole_and_found_by_its_name() {
    use crate::config::ProviderKind;
    let all = ProviderKind::all();
    assert_eq!(all.len(), 13, "{all:?}");
    let mut names = std::collections::HashSet::new();
    let mut orders = std::collections::HashSet::new();
    for k in all {
        let s = k.spec();
        assert!(names.insert(s.name), "{} twice", s.name);
        assert!(orders.insert(s.order), "{} shares its place", s.name);
        assert!(!s.label.is_empty() && !s.doc.is_empty(), "{}", s.name);
        assert!((1..=2).contains(&s.badge.chars().count()), "{}", s.name);
        assert_eq!(ProviderKind::named(s.name), Some(*k));
        assert_eq!(s.name.parse::<ProviderKind>().ok(), Some(*k));
        match (k.wire(), k.is_cli()) {
            (Some(w), false) => {
                let p = platform(*k).expect("an HTTP kind's platform");
                assert_eq!(p.api().wire(), w, "{}", s.name);
                assert!(crate::providers::cli::program::of(*k).is_none());
            }
            (None, true) => {
                assert!(platform(*k).is_none(), "{}", s.name);
                assert!(crate::providers::cli::program::of(*k).is_some());
            }
            other => panic!("{} is {other:?}", s.name),
        }
    }
    assert!(all
        .windows(2)
        .all(|w| w[0].spec().order < w[1].spec().order));
    // Web search is the platform's word as well as the API's: Bedrock has none.
    assert!(!searches(bedrock::KIND) && searches(vertex::ANTHROPIC_KIND));
    assert!(searches(anthropic::KIND) && !searches(openai_compat::KIND));
    let err = "claude".parse::<ProviderKind>().unwrap_err();
    assert!(
        err.contains("`claude-cli`") && err.contains("`bedrock`"),
        "{err}"
    );
    let json: Result<ProviderKind, _> = serde_json::from_str("\"azure\"");
    assert!(json
        .unwrap_err()
        .to_string()
        .contains("unknown variant `azure`, expected one of `openai-compatible`"));
}
