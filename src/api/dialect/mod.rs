//! One trait per inbound API. A [`Dialect`] is everything that differs between the APIs
//! clients speak: where the client presents Baton's key, how its body becomes the canonical
//! request, how an answer, a stream and an error look to it. The pipeline (`api/pipeline.rs`),
//! the renderer (`api/render.rs`) and the stream pump (`router/stream.rs`) hold a dialect and
//! name none; each handler is one line over `pipeline::serve`.
//!
//! Adding a dialect: a folder here with its `Dialect` and its axum handlers, one line in
//! [`shape_of`] for its paths' error shape, and its routes in `api/mod.rs`.

pub mod anthropic;
mod codex;
pub mod gemini;
pub mod openai;
pub mod responses;
pub mod responses_ws;

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};

use super::error::ApiError;
use super::reply::header_value;
use crate::canonical::{ChatRequest, ChatResponse, Wire};
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
    /// The request in Chat Completions form (the client's own body when it spoke that).
    pub openai: Map<String, Value>,
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
    /// Whose API it is: a client's own login of no known shape is taken to be that vendor's.
    fn vendor(&self) -> Vendor;
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
    /// An error in this API's shape.
    fn error(&self, e: ApiError) -> Response;
    /// The request-id headers every answer carries.
    fn id_headers(&self, request_id: &str, base: &mut HeaderMap) {
        base.insert("x-request-id", header_value(request_id));
    }
}

/// The error shape of a path's API, for what is refused before a handler runs (an unknown
/// path, a wrong method, a URI or headers over the limit, a request over the concurrency
/// bound). The admin API answers in OpenAI's shape.
pub fn shape_of(path: &str) -> fn(ApiError) -> Response {
    if anthropic::owns(path) {
        anthropic::error
    } else if gemini::owns(path) {
        gemini::error
    } else {
        openai::error
    }
}

/// Whether a path is an inbound API call (it takes one of the concurrent request slots).
pub fn is_call(path: &str) -> bool {
    openai::is_call(path)
        || responses::is_call(path)
        || anthropic::is_call(path)
        || gemini::is_call(path)
}

#[cfg(test)]
mod tests;
