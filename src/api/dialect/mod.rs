//! One trait per inbound API. A [`Dialect`] is everything that differs between the APIs
//! clients speak: where the client presents Baton's key, how its body becomes the canonical
//! request, how an answer, a stream and an error look to it. The pipeline (`api/pipeline.rs`),
//! the renderer (`api/render.rs`) and the stream pump (`router/stream.rs`) hold a dialect and
//! name none; each handler is one line over `pipeline::serve`.
//!
//! Adding a dialect: a folder here with its `Dialect`, its axum handlers and its
//! [`Registration`] (routes, paths, error shape), and one line in [`ALL`].

pub mod anthropic;
mod codex;
pub mod contract;
pub mod gemini;
pub mod openai;
pub mod responses;
pub mod responses_ws;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use super::error::ApiError;
use super::state::AppState;

pub use contract::{Cx, Dialect, Parsed, Registration};

/// Every inbound API, in the order their paths are looked up: OpenAI's, whose error shape is
/// every other path's (the admin API's too), last.
const ALL: [Registration; 5] = [
    anthropic::API,
    gemini::API,
    responses::API,
    responses_ws::API,
    openai::API,
];

/// The routes of every inbound API, and the model list they share.
pub fn routes() -> Router<AppState> {
    ALL.iter()
        .fold(Router::new(), |r, d| r.merge((d.routes)()))
        .route("/v1/models", get(models))
}

/// `GET /v1/models`: another API's list when the headers are its clients'
/// (`Registration::lists_models`), else OpenAI's.
async fn models(
    state: State<AppState>,
    query: crate::api::json::ApiQuery<openai::ModelsQuery>,
    headers: HeaderMap,
) -> Response {
    if let Some(theirs) = models_for(&state, &headers) {
        return theirs;
    }
    openai::models(state, query, headers).await
}

/// The error shape of a path's API.
pub fn shape_of(path: &str) -> fn(ApiError) -> Response {
    ALL.iter()
        .find(|d| (d.owns)(path))
        .map_or(openai::error, |d| d.error)
}

/// The model list a client of another API than OpenAI's gets at `GET /v1/models`, when its
/// headers say which.
fn models_for(state: &AppState, headers: &HeaderMap) -> Option<Response> {
    ALL.iter().find_map(|d| (d.lists_models)(state, headers))
}

#[cfg(test)]
mod tests;
