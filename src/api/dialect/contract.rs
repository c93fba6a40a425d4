//! What an inbound API is, as the pipeline, the renderer and the stream pump see it: the
//! [`Dialect`] trait, what it is told and what it returns, and its [`Registration`] in the
//! server. A leaf: the dialects implement it and `dialect/mod.rs` lists them; the pipeline
//! holds a `dialect::contract::Dialect` and names none.

use axum::http::HeaderMap;
use axum::response::Response;
use axum::Router;
use serde_json::{Map, Value};

use crate::api::error::ApiError;
use crate::api::reply::header_value;
use crate::api::state::AppState;
use crate::canonical::{ChatRequest, ChatResponse, Wire};
use crate::clients::limiter::Headroom;
use crate::providers::Vendor;
use crate::router::stream::Out;
use crate::router::{Inbound, Original};

/// What a dialect is told about the request it parses or answers.
pub struct Cx<'a> {
    pub request_id: &'a str,
    /// The clock's now, in Unix seconds.
    pub now_s: i64,
}

/// A client's request, read.
pub struct Parsed {
    pub canonical: ChatRequest,
    /// The client's own Chat Completions body, when it spoke that API (for any other, the form
    /// is made only if an upstream of that API serves it: `Inbound::openai_body`).
    pub openai: Option<Map<String, Value>>,
    /// The client's own body when it spoke another API, for upstreams of that API.
    pub original: Option<Original>,
    /// The request continues a conversation its API's server stores (only an upstream of
    /// the same API can take it).
    pub continues: Option<crate::router::Continues>,
}

/// An inbound API. One value serves one request: what `parse` learns (the model a Gemini path
/// names, a Responses request's echo, whether an Anthropic client asked for thinking) stays in
/// it for rendering the answer.
pub trait Dialect: Send + Sync {
    /// The API: an upstream's bytes in it reach this client untouched.
    fn wire(&self) -> Wire;
    /// Whether the body `parse` keeps for upstreams of this API (`Parsed::openai` or
    /// `Parsed::original`) is the client's own, unchanged: then such an upstream is sent the
    /// client's bytes with only the model replaced (`providers::outbound::Verbatim`).
    fn keeps_body_verbatim(&self) -> bool {
        false
    }
    /// Whose API it is: a client's own login of no known shape is taken to be that vendor's.
    fn vendor(&self) -> Vendor;
    /// What a request in it does, as OpenTelemetry's GenAI conventions name it
    /// (`gen_ai.operation.name`).
    fn operation(&self) -> &'static str {
        "chat"
    }
    /// Baton's key, where this API's clients present theirs.
    fn presented_key<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        crate::auth::presented_key(headers)
    }
    /// The model and stream flag a request names, for the log row of one refused early.
    fn named(&self, body: &Map<String, Value>) -> (Option<String>, bool) {
        (
            body.get("model")
                .and_then(Value::as_str)
                .map(str::to_string),
            body.get("stream").and_then(Value::as_bool) == Some(true),
        )
    }
    /// The client's body as the canonical request, or the error that says what to fix.
    fn parse(&mut self, body: Map<String, Value>, cx: &Cx) -> Result<Parsed, ApiError>;
    /// A complete answer in this API's shape; `served` is the model that answered.
    fn render(&self, answer: &ChatResponse, served: &str, cx: &Cx) -> Value;
    /// The encoder of a streamed answer.
    fn encoder(&mut self, served: &str, cx: &Cx, inbound: &Inbound) -> Out;
    /// A complete answer an upstream of this API gave, as it goes to the client: as it came,
    /// unless the client compares something in it with what it sent.
    fn relayed(&self, body: bytes::Bytes, _served: &str) -> bytes::Bytes {
        body
    }
    /// An error in this API's shape.
    fn error(&self, e: ApiError) -> Response;
    /// The request-id headers every answer carries.
    fn id_headers(&self, request_id: &str, base: &mut HeaderMap) {
        base.insert(
            crate::api::reply::X_REQUEST_ID.clone(),
            header_value(request_id),
        );
    }
    /// The client key's own limits, in the headers its SDK reads (OpenAI's `x-ratelimit-*`
    /// unless this API has its own).
    fn rate_limit_headers(&self, room: &Headroom, _now_ms: i64, base: &mut HeaderMap) {
        crate::api::reply::openai_rate_limits(room, base);
    }
}

/// An inbound API's place in the server.
pub struct Registration {
    /// Its routes, each handler one line over `pipeline::serve`.
    pub routes: fn() -> Router<AppState>,
    /// Whether `path` is its: what is refused there before a handler runs (an unknown path, a
    /// wrong method, a URI or headers over the limit, a request over the concurrency bound)
    /// takes its error shape.
    pub owns: fn(&str) -> bool,
    /// Its error shape.
    pub error: fn(ApiError) -> Response,
    /// Its clients' answer at the shared `GET /v1/models`, when `headers` are its clients'
    /// (Anthropic's SDKs send `anthropic-version`, Google's their key header).
    pub lists_models: fn(&AppState, &HeaderMap) -> Option<Response>,
}

/// The model names the key presented may use (a model list's content in every API).
pub(super) fn usable_names(
    state: &AppState,
    presented: Option<&str>,
) -> Result<Vec<String>, ApiError> {
    let client = crate::api::admission::listing_client(&state.core, presented)?;
    let snap = state.core.routing.snapshot.load();
    Ok(snap
        .model_names()
        .into_iter()
        .filter(|n| crate::api::admission::may_use(&snap, &client, n))
        .collect())
}

/// For a registration: no such paths, or no model list of its own.
pub(super) fn none(_: &str) -> bool {
    false
}

pub(super) fn no_list(_: &AppState, _: &HeaderMap) -> Option<Response> {
    None
}
