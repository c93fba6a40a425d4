//! The fake upstream as Gemini's native API: `models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, same script, Gemini's shapes.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::contract::Api;
use crate::{sse, Behavior, InFlight, Received, Shared};

/// The fake as Gemini's `generateContent` / `streamGenerateContent`. Long because it is the
/// behaviour table again, each arm in Gemini's shapes.
pub(crate) async fn generate(
    State(s): State<Arc<Shared>>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let unauthenticated = s.strict() && !headers.contains_key("x-goog-api-key");
    s.receive(Received {
        headers,
        body: json!({"path": rest, "body": body.clone()}),
    });
    if unauthenticated {
        return (
            StatusCode::FORBIDDEN,
            axum::Json(json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}})),
        )
            .into_response();
    }
    if rest.ends_with(":countTokens") {
        return s
            .contract_count(&body)
            .unwrap_or_else(|| count_tokens(&body));
    }
    if let Some(r) = s.contract(Api::GeminiGenerateContent, &body) {
        return r;
    }
    let _guard = InFlight::new(s.clone());
    let stream = rest.ends_with(":streamGenerateContent");
    let behavior = s.next_behavior();
    let last_user = body
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["parts"].as_array())
        .and_then(|p| {
            p.iter()
                .rev()
                .find_map(|p| p.get("text").and_then(Value::as_str))
        })
        .unwrap_or("")
        .to_string();
    let usage = if s.cached() {
        json!({"promptTokenCount": 100, "cachedContentTokenCount": 80,
            "candidatesTokenCount": 7, "totalTokenCount": 107})
    } else {
        json!({"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18})
    };
    let parts = match behavior {
        Behavior::Status {
            status,
            body,
            headers,
        } => return crate::status_response(status, body, headers),
        Behavior::ToolCall { name, arguments } => vec![json!({"functionCall": {"name": name,
            "args": serde_json::from_str::<Value>(&arguments).unwrap_or(json!({}))}})],
        Behavior::Text(t) => vec![json!({"text": t})],
        _ => vec![json!({"text": format!("{}: {}", s.name, last_user)})],
    };
    if !stream {
        return axum::Json(json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
            "usageMetadata": usage, "modelVersion": "gemini-fake"}))
        .into_response();
    }
    // One chunk per text word (or the whole call), the last with the finish reason and usage.
    let mut chunks = Vec::new();
    for p in &parts {
        match p.get("text").and_then(Value::as_str) {
            Some(t) => chunks.extend(t.split_inclusive(' ').map(|w| json!({"text": w}))),
            None => chunks.push(p.clone()),
        }
    }
    let n = chunks.len();
    let frames: Vec<Bytes> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let mut c = json!({"candidates": [{"content": {"role": "model", "parts": [part]}}]});
            if i + 1 == n {
                c["candidates"][0]["finishReason"] = json!("STOP");
                c["usageMetadata"] = usage.clone();
            }
            Bytes::from(format!("data: {c}\r\n\r\n"))
        })
        .collect();
    sse(Body::from_stream(futures_util::stream::iter(
        frames.into_iter().map(Ok::<Bytes, Infallible>),
    )))
}

/// `GET /v1beta/models`: Gemini's model list (`models/…` names). Strict, refused without
/// `x-goog-api-key`.
pub(crate) async fn models(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    s.lists.lock().unwrap().push(headers.clone());
    if s.strict() && !headers.contains_key("x-goog-api-key") {
        return (
            StatusCode::FORBIDDEN,
            axum::Json(json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}})),
        )
            .into_response();
    }
    axum::Json(
        json!({"models": [{"name": format!("models/{}-model", s.name),
        "displayName": s.name, "supportedGenerationMethods": ["generateContent"]}]}),
    )
    .into_response()
}

/// `models/{model}:countTokens`: this fake counts one token per word of every text part (in
/// `contents`, or in a `generateContentRequest`'s contents and system instruction).
fn count_tokens(body: &Value) -> Response {
    let inner = body.get("generateContentRequest").unwrap_or(body);
    let mut words = 0;
    let parts = inner
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(inner.get("systemInstruction"))
        .filter_map(|c| c.get("parts").and_then(Value::as_array))
        .flatten();
    for p in parts {
        words += p["text"].as_str().unwrap_or("").split_whitespace().count();
    }
    axum::Json(json!({"totalTokens": words})).into_response()
}
