//! Inbound OpenAI Responses API: `POST /v1/responses` (Codex, `client.responses.create`);
//! errors in OpenAI's shape.

use axum::extract::{Request, State};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::{Map, Value};

use super::contract::{Cx, Dialect, Parsed};
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::canonical::responses::Echo;
use crate::canonical::{ChatResponse, Wire};
use crate::providers::Vendor;
use crate::router::stream::Out;
use crate::router::{Inbound, Original};

/// The Responses API. An answer echoes its request's settings (`Echo`), read by `parse`.
#[derive(Default)]
pub struct Responses {
    echo: Option<Echo>,
}

impl Dialect for Responses {
    fn wire(&self) -> Wire {
        Wire::Responses
    }

    fn keeps_body_verbatim(&self) -> bool {
        true
    }

    fn vendor(&self) -> Vendor {
        Vendor::OpenAi
    }

    fn parse(&mut self, body: Map<String, Value>, cx: &Cx) -> Result<Parsed, ApiError> {
        let canonical = crate::canonical::responses::request_from_responses(&body)
            .map_err(|e| ApiError::invalid(e.param, e.message))?;
        self.echo = Some(Echo::new(&body, cx.request_id, &canonical.model, cx.now_s));
        // A conversation stored on a Responses server (`previous_response_id`). Refused in the
        // API's own words (`previous_response_not_found`), which clients recover from by
        // sending the whole conversation.
        let continues = body
            .get("previous_response_id")
            .and_then(Value::as_str)
            .map(|id| crate::router::Continues {
                why: "`previous_response_id` names a conversation stored on a Responses server",
                failure: crate::router::Failure::NoStoredConversation(format!(
                    "Previous response with id '{id}' not found. Baton keeps no conversation state, and no Responses provider (kind openai-responses) can take this request to continue it: send the whole conversation in `input` (as Codex does with \"store\": false)."
                )),
            });
        Ok(Parsed {
            continues,
            canonical,
            openai: None,
            original: Some(Original {
                wire: Wire::Responses,
                body,
            }),
        })
    }

    fn render(&self, answer: &ChatResponse, _served: &str, _cx: &Cx) -> Value {
        match &self.echo {
            Some(echo) => crate::canonical::responses::response_to_responses(answer, echo),
            None => crate::canonical::openai::response_to_openai(answer),
        }
    }

    fn encoder(&mut self, _served: &str, _cx: &Cx, _inbound: &Inbound) -> Out {
        Box::new(crate::canonical::responses::stream::StreamEncoder::new(
            self.echo.take().unwrap_or_default(),
        ))
    }

    fn error(&self, e: ApiError) -> Response {
        error(e)
    }
}

/// OpenAI's error shape; a usage limit in the form Codex shows with its reset time ("You've
/// hit your usage limit. Try again at 3:05 PM.", at once) rather than a rate limit it retries
/// silently for as long as it lasts: `usage_limit_reached` with `resets_at` and
/// `resets_in_seconds`, as the ChatGPT backend states a spent plan (no `plan_type`: that is
/// the backend's to say, and Codex would offer an upgrade of it).
pub fn error(e: ApiError) -> Response {
    let Some(reset) = e.limit_reset else {
        return super::openai::error(e);
    };
    let body = serde_json::json!({"error": {"type": "usage_limit_reached", "code": e.code,
        "message": e.message, "param": null, "resets_at": reset,
        "resets_in_seconds": e.retry_after_secs.unwrap_or(0)}});
    e.answer(body)
}

/// Its place in the server: its errors are OpenAI's, the default shape.
pub(super) const API: super::contract::Registration = super::contract::Registration {
    routes,
    owns: super::contract::none,
    error,
    lists_models: super::contract::no_list,
};

/// Over HTTP (the WebSocket at the same paths is `responses_ws`'s).
fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", post(create))
        .route("/responses", post(create))
}

async fn create(State(state): State<AppState>, req: Request) -> Response {
    crate::api::pipeline::serve(&state, req, Responses::default()).await
}
