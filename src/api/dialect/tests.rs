//! Every dialect through the trait alone, with no server: the body it reads, the answer and the
//! stream it writes, and the error shape it refuses in.

use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Map, Value};

use super::anthropic::Anthropic;
use super::gemini::Gemini;
use super::openai::OpenAi;
use super::responses::Responses;
use super::*;
use crate::canonical::{ChatResponse, Part, StopReason, StreamEvent, Usage, Wire};
use crate::router::Inbound;

fn obj(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn cx() -> Cx<'static> {
    Cx {
        request_id: "req_1",
        now_s: 1_700_000_000,
    }
}

/// Each dialect with a minimal valid body of its API.
fn dialects() -> Vec<(Box<dyn Dialect>, Value)> {
    vec![
        (
            Box::new(OpenAi),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            Box::new(Anthropic::default()),
            json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            Box::new(Responses::default()),
            json!({"model": "m", "input": "hi"}),
        ),
        (
            Box::new(Gemini::for_model("m", false, false)),
            json!({"contents": [{"parts": [{"text": "hi"}]}]}),
        ),
    ]
}

fn inbound(p: Parsed) -> Inbound {
    Inbound {
        needs: p.canonical.needs(),
        openai: p.openai.map(Into::into).unwrap_or_default(),
        original: p.original,
        verbatim: Default::default(),
        client: None,
        anthropic_beta: None,
        canonical: p.canonical,
        deadline_ms: None,
        conversation: None,
        follows: false,
        continues: p.continues,
        expect: Default::default(),
        trace: None,
        capture: None,
    }
}

fn answer() -> ChatResponse {
    ChatResponse {
        id: "x".into(),
        model: "served".into(),
        created: 0,
        content: vec![Part::Text("hello".into())],
        stop: Some(StopReason::Stop),
        usage: Some(Usage {
            input_tokens: 3,
            output_tokens: 1,
            ..Default::default()
        }),
    }
}

#[test]
fn every_dialect_reads_its_body_and_keeps_the_original_for_its_own_upstreams() {
    for (mut d, body) in dialects() {
        let wire = d.wire();
        let p = d
            .parse(obj(body.clone()), &cx())
            .unwrap_or_else(|e| panic!("{wire:?}: {}", e.message));
        assert_eq!(p.canonical.model, "m", "{wire:?}");
        assert_eq!(p.canonical.messages.len(), 1, "{wire:?}");
        // Only a Chat Completions client's own body is kept; for the others the form is made
        // when an upstream of that API needs it.
        assert_eq!(p.openai.is_some(), wire == Wire::OpenAi, "{wire:?}");
        let made = inbound(Parsed {
            canonical: p.canonical.clone(),
            openai: p.openai.clone(),
            original: None,
            continues: None,
        });
        assert!(
            made.openai_body().get("messages").is_some(),
            "{wire:?}: the Chat Completions form"
        );
        match wire {
            Wire::OpenAi => assert!(p.original.is_none()),
            _ => assert_eq!(
                p.original.map(|o| (o.wire, Value::Object(o.body))),
                Some((wire, body))
            ),
        }
        assert!(p.continues.is_none(), "{wire:?}");
        // A body that is no request of its API is refused with the field to fix.
        let e = d
            .parse(obj(json!({"bogus": 1})), &cx())
            .err()
            .unwrap_or_else(|| panic!("{wire:?}"));
        assert_eq!(e.status, StatusCode::BAD_REQUEST, "{wire:?}");
        assert!(e.param.is_some() && !e.message.is_empty(), "{wire:?}");
    }
}

#[test]
fn every_dialect_writes_an_answer_and_a_stream_in_its_shape() {
    for (mut d, body) in dialects() {
        let wire = d.wire();
        let p = d.parse(obj(body), &cx()).unwrap();
        let inbound = inbound(p);
        let v = d.render(&answer(), "served", &cx());
        let text = match wire {
            Wire::OpenAi => v.pointer("/choices/0/message/content"),
            Wire::Anthropic => v.pointer("/content/0/text"),
            Wire::Responses => v.pointer("/output/0/content/0/text"),
            Wire::Gemini => v.pointer("/candidates/0/content/parts/0/text"),
            Wire::Converse => panic!("no dialect speaks Converse"),
        };
        assert_eq!(text, Some(&json!("hello")), "{wire:?}: {v}");

        let mut enc = d.encoder("served", &cx(), &inbound);
        let mut out = String::new();
        enc.push(&StreamEvent::TextDelta("hel".into()), &mut out);
        enc.push(&StreamEvent::TextDelta("lo".into()), &mut out);
        enc.push(&StreamEvent::Finish(StopReason::Stop), &mut out);
        enc.finish(&mut out);
        assert!(out.contains("hel") && out.contains("lo"), "{wire:?}: {out}");
        // A break ends the stream with an explicit error the client's parser reads.
        let mut enc = d.encoder("served", &cx(), &inbound);
        let mut broke = String::new();
        enc.push(&StreamEvent::TextDelta("partial".into()), &mut broke);
        enc.error("the provider stopped", false, &mut broke);
        assert!(broke.contains("the provider stopped"), "{wire:?}: {broke}");
        // Its events pass through from an upstream of its API, but for Gemini's JSON array
        // (this call did not ask for SSE), which is always written here.
        let relays = if wire == Wire::Gemini {
            None
        } else {
            Some(wire)
        };
        assert_eq!(enc.wire(), relays, "{wire:?}");
    }
}

#[test]
fn every_dialect_refuses_in_its_own_error_shape() {
    for (d, _) in dialects() {
        let wire = d.wire();
        let e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "all_providers_rate_limited",
            "every provider is out",
        )
        .retry_after(30);
        let resp = d.error(e);
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS, "{wire:?}");
        assert_eq!(resp.headers()["retry-after"], "30", "{wire:?}");
        let mut h = HeaderMap::new();
        d.id_headers("req_1", &mut h);
        assert_eq!(h["x-request-id"], "req_1", "{wire:?}");
    }
    // Where each looks for Baton's key.
    let mut h = HeaderMap::new();
    h.insert("x-goog-api-key", "bt-key".parse().unwrap());
    assert_eq!(
        Gemini::for_model("m", false, false).presented_key(&h),
        Some("bt-key")
    );
    assert_eq!(OpenAi.presented_key(&h), None);
    h.insert("authorization", "Bearer bt-other".parse().unwrap());
    assert_eq!(OpenAi.presented_key(&h), Some("bt-other"));
    // A client's own Google key beside Baton's: Baton's is the one presented to Baton.
    let mut own = HeaderMap::new();
    own.insert("x-goog-api-key", "AIza-own-key".parse().unwrap());
    own.insert("x-baton-key", "bt-key".parse().unwrap());
    assert_eq!(
        Gemini::for_model("m", false, false).presented_key(&own),
        Some("bt-key")
    );
}

/// The registry: each path's error shape and whether it takes a request slot, from each API's
/// registration; and the routes of all merge without two claiming one path (axum panics then).
#[tokio::test]
async fn the_registry_gives_each_path_its_apis_error_shape_and_slot() {
    let _ = routes();
    let shape = |path: &str| {
        let e = ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "x",
            "no such path",
        );
        shape_of(path)(e)
    };
    let body = |r: Response| async move {
        let b = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        serde_json::from_slice::<Value>(&b).unwrap()
    };
    for path in ["/v1/messages", "/v1/messages/batches"] {
        assert_eq!(body(shape(path)).await["type"], "error", "{path}");
    }
    for path in [
        "/v1beta/models/m:generateContent",
        "/v1beta/x",
        "/v1/models/m:countTokens",
    ] {
        assert_eq!(
            body(shape(path)).await["error"]["status"],
            "NOT_FOUND",
            "{path}"
        );
    }
    for path in [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/models",
        "/nowhere",
    ] {
        let v = body(shape(path)).await;
        assert_eq!(v["error"]["type"], "not_found_error", "{path}");
        assert!(v["error"].get("status").is_none(), "{path}");
    }
}
