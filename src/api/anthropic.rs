//! Inbound Anthropic Messages API: `POST /v1/messages` (Claude Code, the anthropic SDK),
//! `POST /v1/messages/count_tokens`, and errors in Anthropic's shape.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::pipeline::{handle, header_value, new_request_id, Format};
use super::{authenticate, AppState};

pub async fn messages(State(state): State<AppState>, req: Request) -> Response {
    let request_id = new_request_id();
    let mut base = HeaderMap::new();
    base.insert("x-request-id", header_value(&request_id));
    base.insert("request-id", header_value(&request_id));
    match handle(&state, req, &request_id, &mut base, Format::Anthropic).await {
        Ok(resp) => resp,
        Err(e) => {
            super::pipeline::log_failure(&request_id, &e);
            let mut resp = anthropic_error(e);
            resp.headers_mut().extend(base);
            resp
        }
    }
}

/// The Anthropic error `type` for an HTTP status.
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// Renders an error as `{"type":"error","error":{"type","message"}}` with its headers.
pub fn anthropic_error(e: ApiError) -> Response {
    let body =
        json!({"type": "error", "error": {"type": error_type(e.status), "message": e.message}});
    let mut resp = (e.status, Json(body)).into_response();
    resp.headers_mut().extend(e.headers);
    if let Some(s) = e.retry_after_secs {
        resp.headers_mut()
            .insert("retry-after", HeaderValue::from(s));
    }
    resp
}

/// `POST /v1/messages/count_tokens`: exact when the model routes to an `anthropic` provider (its
/// own count_tokens answers), otherwise a documented estimate (about four characters a token
/// over system, messages and tools).
pub async fn count_tokens(State(state): State<AppState>, req: Request) -> Response {
    let core = &state.core;
    let headers = req.headers().clone();
    if let Err(e) = authenticate(core, &headers) {
        return anthropic_error(e);
    }
    // The same body limit as /v1/messages: a context that can be sent can be counted.
    let (body, _charge) = match super::budget::read_body(&state, req).await {
        Ok(b) => b,
        Err(e) => return anthropic_error(e),
    };
    let parsed = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(m)) => m,
        _ => {
            return anthropic_error(ApiError::invalid(
                "body",
                "The request body must be a JSON object.",
            ))
        }
    };
    let req = match crate::canonical::anthropic::request_from_anthropic(&parsed) {
        Ok(r) => r,
        Err(e) => return anthropic_error(ApiError::invalid(e.param, e.message)),
    };
    let snap = core.routing.snapshot.load_full();
    let resolved = match snap.resolve(snap.map_model(&req.model)) {
        // A model no request could be sent to is not counted either, as /v1/messages answers.
        Err(e @ crate::router::snapshot::ResolveError::UnknownModel { .. }) => {
            return anthropic_error(super::pipeline::resolve_error(e))
        }
        r => r,
    };
    let first_anthropic = resolved.ok().and_then(|(targets, _)| {
        targets.into_iter().find(|t| {
            t.provider.config.kind == crate::config::ProviderKind::Anthropic
                && t.provider.unavailable().is_none()
        })
    });
    if let Some(t) = first_anthropic {
        if let Some(exact) = exact_count(core, &t, parsed, &headers).await {
            return Json(exact).into_response();
        }
    }
    Json(json!({"input_tokens": crate::canonical::anthropic::estimate_tokens(&req)}))
        .into_response()
}

/// Asks an Anthropic provider's own `count_tokens`; `None` on any failure (the estimate is used).
async fn exact_count(
    core: &crate::gateway::Core,
    t: &crate::router::snapshot::Target,
    mut body: serde_json::Map<String, Value>,
    headers: &HeaderMap,
) -> Option<Value> {
    let p = &t.provider;
    body.insert("model".into(), json!(t.model.id));
    let url = format!(
        "{}/messages/count_tokens",
        p.config.base_url.trim_end_matches('/')
    );
    let client = core.routing.http.get(p.config.timeouts.connect_ms).ok()?;
    let rb = client
        .post(url)
        .timeout(std::time::Duration::from_millis(
            p.config.timeouts.first_byte_ms,
        ))
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body).ok()?);
    // The same authentication as every request to this provider.
    let mut rb = crate::providers::anthropic::authorize(rb, p, p.keys.first());
    if let Some(beta) = headers.get("anthropic-beta") {
        rb = rb.header("anthropic-beta", beta);
    }
    let resp = rb.send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&resp.bytes().await.ok()?).ok()?;
    v.get("input_tokens").and_then(Value::as_u64).map(|_| v)
}

/// `GET /v1/models` in Anthropic's list shape.
pub fn models(names: Vec<String>) -> Json<Value> {
    let data: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}))
        .collect();
    Json(json!({
        "data": data,
        "has_more": false,
        "first_id": names.first(),
        "last_id": names.last(),
    }))
}
