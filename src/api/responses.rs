//! Inbound OpenAI Responses API: `POST /v1/responses` (Codex, `client.responses.create`), a thin
//! adapter over the shared pipeline; errors in OpenAI's shape.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::pipeline::{handle, header_value, log_failure, new_request_id, Format};
use super::AppState;

pub async fn create(State(state): State<AppState>, req: Request) -> Response {
    let request_id = new_request_id();
    let mut base = HeaderMap::new();
    base.insert("x-request-id", header_value(&request_id));
    match handle(&state, req, &request_id, &mut base, Format::Responses).await {
        Ok(resp) => resp,
        Err(e) => {
            log_failure(&request_id, &e);
            e.with_headers(base).into_response()
        }
    }
}
