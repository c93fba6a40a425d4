//! Inbound Anthropic Messages API: `POST /v1/messages` (Claude Code, the anthropic SDK) and
//! errors in Anthropic's shape (`count_tokens` is `api/count.rs`).

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::pipeline::{handle, header_value, new_request_id, Format};
use super::AppState;

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
    let mut body =
        json!({"type": "error", "error": {"type": error_type(e.status), "message": e.message}});
    if let Some(d) = e.details {
        body["error"]["details"] = d;
    }
    let mut resp = (e.status, Json(body)).into_response();
    resp.headers_mut().extend(e.headers);
    if let Some(s) = e.retry_after_secs {
        resp.headers_mut()
            .insert("retry-after", HeaderValue::from(s));
    }
    resp
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
