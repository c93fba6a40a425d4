//! Inbound Anthropic Messages API: `POST /v1/messages` (Claude Code, the anthropic SDK), its
//! `count_tokens` (counted by `api/count.rs`) and errors in Anthropic's shape.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::contract::{Cx, Dialect, Parsed};
use crate::api::error::ApiError;
use crate::api::reply::header_value;
use crate::api::state::AppState;
use crate::canonical::{ChatResponse, Wire};
use crate::providers::Vendor;
use crate::router::stream::Out;
use crate::router::{Inbound, Original};

/// The Messages API. What `parse` learns answers the request: the model the client named
/// (an answer names it back: Claude Code drops a signed thinking block whose message names
/// another model, and its next tool turn is then refused; the served one is always in
/// `x-gateway-model`) and whether it asked for thinking (it gets the upstream's reasoning as
/// thinking).
#[derive(Default)]
pub struct Anthropic {
    asked: String,
    thinking: bool,
}

impl Anthropic {
    fn named<'m>(&'m self, served: &'m str) -> &'m str {
        if self.asked.is_empty() || self.asked == "auto" {
            served
        } else {
            &self.asked
        }
    }
}

impl Dialect for Anthropic {
    fn wire(&self) -> Wire {
        Wire::Anthropic
    }

    fn keeps_body_verbatim(&self) -> bool {
        true
    }

    fn vendor(&self) -> Vendor {
        Vendor::Anthropic
    }

    fn parse(&mut self, body: Map<String, Value>, _cx: &Cx) -> Result<Parsed, ApiError> {
        let canonical = crate::canonical::anthropic::request_from_anthropic(&body)
            .map_err(|e| ApiError::invalid(e.param, e.message))?;
        self.asked = canonical.model.clone();
        self.thinking = crate::canonical::anthropic::thinking_asked(&body);
        // Anthropic-only fields (metadata, thinking, context_management…) stay in the client's
        // own body for Anthropic upstreams; an OpenAI server would refuse them.
        // A message thread held by an Anthropic server (`thread: {"type": "continue"}`).
        let continues = (body
            .get("thread")
            .and_then(|t| t.get("type"))
            .and_then(Value::as_str)
            == Some("continue"))
        .then(|| crate::router::Continues {
            why: "`thread` continues a message thread held by an Anthropic server",
            failure: crate::router::Failure::ThreadNotFound(
                "No usable thread state for `previous_message_id` here: Baton keeps no conversation state and no Anthropic provider can take this request. Replay the full conversation with `thread: {\"type\": \"create\"}`.".into(),
            ),
        });
        Ok(Parsed {
            continues,
            canonical,
            openai: None,
            original: Some(Original {
                wire: Wire::Anthropic,
                body,
            }),
        })
    }

    fn render(&self, answer: &ChatResponse, served: &str, _cx: &Cx) -> Value {
        crate::canonical::anthropic::response_to_anthropic(
            answer,
            self.named(served),
            self.thinking,
        )
    }

    fn encoder(&mut self, served: &str, cx: &Cx, inbound: &Inbound) -> Out {
        Box::new(
            crate::canonical::anthropic::stream::StreamEncoder::new(
                cx.request_id,
                self.named(served),
            )
            .with_thinking(self.thinking)
            .with_prompt_estimate(inbound.needs.prompt_tokens()),
        )
    }

    /// The answer names the model the client asked for (see the stream encoder's `relay`).
    fn relayed(&self, body: bytes::Bytes, served: &str) -> bytes::Bytes {
        use crate::canonical::anthropic::stream::{named_as, Framing};
        match named_as(&body, self.named(served), Framing::Body) {
            Some(renamed) => bytes::Bytes::from(renamed),
            None => body,
        }
    }

    fn error(&self, e: ApiError) -> Response {
        error(e)
    }

    fn id_headers(&self, request_id: &str, base: &mut HeaderMap) {
        static REQUEST_ID: http::HeaderName = http::HeaderName::from_static("request-id");
        base.insert(
            crate::api::reply::X_REQUEST_ID.clone(),
            header_value(request_id),
        );
        base.insert(REQUEST_ID.clone(), header_value(request_id));
    }

    /// Anthropic's own `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}` (the
    /// reset an RFC 3339 time), beside OpenAI's for tools that read those.
    fn rate_limit_headers(
        &self,
        room: &crate::clients::limiter::Headroom,
        now_ms: i64,
        base: &mut HeaderMap,
    ) {
        crate::api::reply::openai_rate_limits(room, base);
        let at = |r: &crate::clients::limiter::Room| {
            jiff::Timestamp::from_millisecond(now_ms + r.reset_ms)
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default()
        };
        crate::api::reply::rate_limits(
            [
                [
                    "anthropic-ratelimit-requests-limit",
                    "anthropic-ratelimit-requests-remaining",
                    "anthropic-ratelimit-requests-reset",
                ],
                [
                    "anthropic-ratelimit-tokens-limit",
                    "anthropic-ratelimit-tokens-remaining",
                    "anthropic-ratelimit-tokens-reset",
                ],
            ],
            room,
            &at,
            base,
        );
    }
}

/// Its place in the server.
pub(super) const API: super::contract::Registration = super::contract::Registration {
    routes,
    owns,
    error,
    lists_models,
};

fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
}

/// `/v1/messages…`.
fn owns(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages/")
}

async fn messages(State(state): State<AppState>, req: Request) -> Response {
    crate::api::pipeline::serve(&state, req, Anthropic::default()).await
}

/// `POST /v1/messages/count_tokens` (Claude Code asks it to decide when to compact): counted as
/// `api/count.rs` counts, the client's own body to an Anthropic provider.
async fn count_tokens(State(state): State<AppState>, req: Request) -> Response {
    let counted = crate::api::count::counted(&state, req, &Anthropic::default(), |body| {
        let req = crate::canonical::anthropic::request_from_anthropic(&body)
            .map_err(|e| ApiError::invalid(e.param, e.message))?;
        Ok((req, Some(body)))
    })
    .await;
    match counted {
        Ok((n, method)) => {
            crate::api::count::with_method(Json(json!({"input_tokens": n})).into_response(), method)
        }
        Err(e) => error(e),
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
pub fn error(mut e: ApiError) -> Response {
    let mut body =
        json!({"type": "error", "error": {"type": error_type(e.status), "message": e.message}});
    if let Some(d) = e.details.take() {
        body["error"]["details"] = d;
    }
    if let Some(reset) = e.limit_reset {
        usage_limit_headers(&mut e.headers, reset, e.retry_after_secs.unwrap_or(0));
    }
    e.answer(body)
}

/// A usage limit as Anthropic's API states a spent subscription window: the unified
/// rate-limit headers, which Claude Code on a subscription shows as "You've hit your 5-hour
/// limit · resets 3pm" (without them it says the server is limiting requests, "not your usage
/// limit"). The window named is the one a wait this long fits: five hours, else the week.
fn usage_limit_headers(h: &mut HeaderMap, reset: i64, wait_secs: u64) {
    let claim = if wait_secs <= 5 * 3600 {
        "five_hour"
    } else {
        "seven_day"
    };
    h.insert(
        "anthropic-ratelimit-unified-status",
        HeaderValue::from_static("rejected"),
    );
    h.insert(
        "anthropic-ratelimit-unified-reset",
        HeaderValue::from(reset),
    );
    h.insert(
        "anthropic-ratelimit-unified-representative-claim",
        HeaderValue::from_static(claim),
    );
}

/// `GET /v1/models` in Anthropic's list shape.
/// `GET /v1/models` from an Anthropic client (`anthropic-version`): the names this key may use,
/// in Anthropic's list shape.
fn lists_models(state: &AppState, headers: &HeaderMap) -> Option<Response> {
    if !headers.contains_key("anthropic-version") {
        return None;
    }
    let names = match super::contract::usable_names(state, crate::auth::presented_key(headers)) {
        Ok(names) => names,
        Err(e) => return Some(error(e)),
    };
    let data: Vec<Value> = names
        .iter()
        .map(|n| json!({"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}))
        .collect();
    let list = json!({
        "data": data,
        "has_more": false,
        "first_id": names.first(),
        "last_id": names.last(),
    });
    Some(Json(list).into_response())
}
