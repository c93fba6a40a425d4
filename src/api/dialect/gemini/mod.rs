//! Inbound Gemini API (`generativelanguage.googleapis.com/v1beta`), for Gemini CLI and the
//! `google-genai` SDKs: `POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent` (SSE with `alt=sse`, else Google's streamed JSON array),
//! `:countTokens`, `GET /v1beta/models` and `GET /v1beta/models/{model}`. The client's key
//! comes in `x-goog-api-key` or `?key=`; errors are Google's
//! `{"error": {"code", "message", "status"}}`. A request goes as it came to `gemini`
//! upstreams and translated to every other kind.

mod fields;
mod request;
mod response;
#[cfg(test)]
mod tests;

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::contract::{Cx, Dialect, Parsed};
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::canonical::{ChatResponse, Wire};
use crate::providers::Vendor;
use crate::router::stream::Out;
use crate::router::{Inbound, Original};
pub use request::{json_schema, request_from_gemini};
pub use response::{error_body, response_to_gemini, StreamEncoder};

/// The Gemini API, for one call: the model and whether (and how) it streams come from the path
/// and the query, not the body.
pub struct Gemini {
    model: String,
    stream: bool,
    sse: bool,
}

impl Gemini {
    /// One call on `model`: `stream` for `:streamGenerateContent`, `sse` with `alt=sse`.
    pub fn for_model(model: &str, stream: bool, sse: bool) -> Self {
        Self {
            model: model.to_string(),
            stream,
            sse,
        }
    }
}

impl Dialect for Gemini {
    fn operation(&self) -> &'static str {
        "generate_content"
    }

    fn wire(&self) -> Wire {
        Wire::Gemini
    }

    /// Its model is in the URL: its bytes go as they came (`kinds::gemini::as_it_came`).
    fn keeps_body_verbatim(&self) -> bool {
        true
    }

    fn vendor(&self) -> Vendor {
        Vendor::Google
    }

    /// `x-goog-api-key` (`?key=` is moved there by the handler), else the common headers.
    fn presented_key<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        presented_key(headers)
    }

    fn named(&self, _body: &Map<String, Value>) -> (Option<String>, bool) {
        (Some(self.model.clone()), self.stream)
    }

    fn parse(&mut self, body: Map<String, Value>, _cx: &Cx) -> Result<Parsed, ApiError> {
        let canonical = request_from_gemini(&body, &self.model, self.stream)
            .map_err(|e| ApiError::invalid(e.param, e.message))?;
        Ok(Parsed {
            canonical,
            openai: None,
            original: Some(Original {
                wire: Wire::Gemini,
                body,
            }),
            continues: None,
        })
    }

    fn render(&self, answer: &ChatResponse, served: &str, cx: &Cx) -> Value {
        response_to_gemini(answer, served, cx.request_id)
    }

    fn encoder(&mut self, served: &str, cx: &Cx, _inbound: &Inbound) -> Out {
        Box::new(StreamEncoder::new(served, cx.request_id, self.sse))
    }

    fn error(&self, e: ApiError) -> Response {
        error(e)
    }
}

fn presented_key(headers: &HeaderMap) -> Option<&str> {
    // A client passing its own Google key through (`credentials: "client"`) sends Baton's in
    // `x-baton-key`, which wins as it does for every API.
    if headers.contains_key(crate::auth::BATON_KEY_HEADER) {
        return crate::auth::presented_key(headers);
    }
    headers
        .get("x-goog-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .or_else(|| crate::auth::presented_key(headers))
}

/// Google's error shape, with `Retry-After` and a `RetryInfo` detail when there is a wait.
pub fn error(e: ApiError) -> Response {
    let body = error_body(e.status.as_u16(), &e.message, e.retry_after_secs);
    e.answer(body)
}

/// Its place in the server.
pub(super) const API: super::contract::Registration = super::contract::Registration {
    routes,
    owns,
    error,
    lists_models,
};

/// The v1beta paths, and the v1 method paths Google's SDKs use with `api_version="v1"`.
fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/models/{action}", post(call))
        .route("/v1beta/models", get(models))
        .route("/v1beta/models/{action}", post(call).get(model))
}

/// `/v1beta/…` (and the v1 method paths).
fn owns(path: &str) -> bool {
    path.starts_with("/v1beta/") || path == "/v1beta" || is_method_path(path)
}

/// A model method's path (`…/models/m:generateContent`).
fn is_method_path(path: &str) -> bool {
    (path.starts_with("/v1beta/models/") || path.starts_with("/v1/models/")) && path.contains(':')
}

#[derive(serde::Deserialize, Default)]
struct Query {
    alt: Option<String>,
    key: Option<String>,
}

/// `POST /v1beta/models/{model}:{method}`.
async fn call(
    State(state): State<AppState>,
    Path(action): Path<String>,
    mut req: Request,
) -> Response {
    let query = axum::extract::Query::<Query>::try_from_uri(req.uri())
        .map(|q| q.0)
        .unwrap_or_default();
    // `?key=` is how Google's REST examples pass the key; the pipeline reads headers.
    if let Some(k) = query
        .key
        .as_deref()
        .filter(|_| presented_key(req.headers()).is_none())
    {
        if let Ok(v) = HeaderValue::from_str(k) {
            req.headers_mut().insert("x-goog-api-key", v);
        }
    }
    let Some((model, method)) = action.rsplit_once(':') else {
        return error(not_found(&action));
    };
    let model = model.strip_prefix("models/").unwrap_or(model).to_string();
    if model.is_empty() {
        return error(ApiError::invalid(
            "model",
            "The path names no model: POST /v1beta/models/{model}:generateContent.",
        ));
    }
    let sse = match query.alt.as_deref() {
        None | Some("json") => false,
        Some("sse") => true,
        Some(other) => {
            return error(ApiError::invalid(
                "alt",
                format!("Invalid value at 'alt' (type.googleapis.com/google.api.Alt), \"{other}\": use alt=sse or leave it out."),
            ))
        }
    };
    let stream = match method {
        "generateContent" => false,
        "streamGenerateContent" => true,
        "countTokens" => return count_tokens(&state, req, model).await,
        _ => return error(not_found(&action)),
    };
    let dialect = Gemini::for_model(&model, stream, stream && sse);
    crate::api::pipeline::serve(&state, req, dialect).await
}

fn not_found(action: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "unknown_url",
        format!(
            "Baton does not serve `{}`: it serves generateContent, streamGenerateContent and countTokens on /v1beta/models/{{model}}.",
            crate::limits::truncate(action, 200)
        ),
    )
}

/// `:countTokens`: `{"contents": …}` or `{"generateContentRequest": …}`, counted as
/// `/v1/messages/count_tokens` counts (the provider's own count where it has one).
async fn count_tokens(state: &AppState, req: Request, model: String) -> Response {
    let dialect = Gemini::for_model(&model, false, false);
    let counted = crate::api::count::counted(state, req, &dialect, |mut body| {
        let inner = match body
            .remove("generateContentRequest")
            .or_else(|| body.remove("generate_content_request"))
        {
            Some(Value::Object(inner)) => inner,
            Some(_) => {
                return Err(ApiError::invalid(
                    "generate_content_request",
                    "Invalid value at 'generate_content_request': expected an object.",
                ))
            }
            None => body,
        };
        let req = request_from_gemini(&inner, &model, false)
            .map_err(|e| ApiError::invalid(e.param, e.message))?;
        Ok((req, None))
    })
    .await;
    match counted {
        Ok((n, method)) => {
            crate::api::count::with_method(Json(json!({"totalTokens": n})).into_response(), method)
        }
        Err(e) => error(e),
    }
}

/// Whether a request comes from a Google client: its key header, or the SDK's `x-goog-api-client`.
fn speaks(headers: &HeaderMap) -> bool {
    headers.contains_key("x-goog-api-key") || headers.contains_key("x-goog-api-client")
}

/// `GET /v1beta/models`: the names this key may use, as Gemini `Model`s.
async fn models(State(state): State<AppState>, headers: HeaderMap) -> Response {
    model_list(&state, &headers)
}

/// `GET /v1/models` from a Google client: Google's SDKs list models there too.
fn lists_models(state: &AppState, headers: &HeaderMap) -> Option<Response> {
    speaks(headers).then(|| model_list(state, headers))
}

fn model_list(state: &AppState, headers: &HeaderMap) -> Response {
    match listed(state, headers) {
        Ok(names) => Json(json!({
            "models": names.iter().map(|n| model_json(n)).collect::<Vec<_>>(),
        }))
        .into_response(),
        Err(e) => error(e),
    }
}

/// `GET /v1beta/models/{model}`.
async fn model(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let name = name.strip_prefix("models/").unwrap_or(&name).to_string();
    match listed(&state, &headers) {
        Ok(names) if names.contains(&name) => Json(model_json(&name)).into_response(),
        Ok(_) => error(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            "model_not_found",
            format!(
                "models/{} is not found: GET /v1beta/models lists the names this key may use.",
                crate::limits::truncate(&name, 200)
            ),
        )),
        Err(e) => error(e),
    }
}

fn listed(state: &AppState, headers: &HeaderMap) -> Result<Vec<String>, ApiError> {
    super::contract::usable_names(state, presented_key(headers))
}

fn model_json(name: &str) -> Value {
    json!({
        "name": format!("models/{name}"),
        "baseModelId": name,
        "version": "baton",
        "displayName": name,
        "description": "Served through Baton.",
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}
