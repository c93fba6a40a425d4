//! Inbound OpenAI Chat Completions (`POST /v1/chat/completions`) and `GET /v1/models`.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::contract::{Cx, Dialect, Parsed};
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::canonical::{ChatResponse, Wire};
use crate::providers::Vendor;
use crate::router::stream::Out;
use crate::router::Inbound;

#[derive(serde::Deserialize)]
pub struct ModelsQuery {
    /// Codex's version: Codex asks so for its models' metadata.
    client_version: Option<String>,
}

/// Chat Completions.
pub struct OpenAi;

impl Dialect for OpenAi {
    fn wire(&self) -> Wire {
        Wire::OpenAi
    }

    fn keeps_body_verbatim(&self) -> bool {
        true
    }

    fn vendor(&self) -> Vendor {
        Vendor::OpenAi
    }

    fn parse(&mut self, body: Map<String, Value>, _cx: &Cx) -> Result<Parsed, ApiError> {
        let canonical = crate::canonical::openai::request_from_openai(&body)
            .map_err(|e| ApiError::invalid(e.param, e.message))?;
        Ok(Parsed {
            canonical,
            openai: Some(body),
            original: None,
            continues: None,
        })
    }

    fn render(&self, answer: &ChatResponse, _served: &str, _cx: &Cx) -> Value {
        crate::canonical::openai::response_to_openai(answer)
    }

    fn encoder(&mut self, served: &str, cx: &Cx, inbound: &Inbound) -> Out {
        Box::new(crate::canonical::openai::stream::StreamEncoder::new(
            cx.request_id,
            served,
            cx.now_s,
            inbound.canonical.stream_usage,
        ))
    }

    fn error(&self, e: ApiError) -> Response {
        error(e)
    }
}

/// OpenAI's error shape: `{"error":{"message","type","param","code"}}`.
pub fn error(e: ApiError) -> Response {
    e.into_response()
}

/// Its place in the server: its error shape is every path's no other API owns.
pub(super) const API: super::contract::Registration = super::contract::Registration {
    routes,
    owns,
    error,
    lists_models: super::contract::no_list,
};

fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/chat/completions", post(chat_completions))
}

/// Every path no other API owns (`dialect::ALL` asks it last).
fn owns(_: &str) -> bool {
    true
}

async fn chat_completions(State(state): State<AppState>, req: Request) -> Response {
    crate::api::pipeline::serve(&state, req, OpenAi).await
}

/// `GET /v1/models` in OpenAI's list shape (`dialect::routes` asks the other APIs first);
/// Codex (`?client_version=`) also gets its own `models` list.
pub(super) async fn models(
    State(state): State<AppState>,
    crate::api::json::ApiQuery(query): crate::api::json::ApiQuery<ModelsQuery>,
    headers: HeaderMap,
) -> Response {
    let presented = crate::auth::presented_key(&headers);
    let client = match crate::api::admission::listing_client(&state.core, presented) {
        Ok(c) => c,
        Err(e) => return e.into_response(),
    };
    let snap = state.core.routing.snapshot.load();
    let usable = |name: &str| crate::api::admission::may_use(&snap, &client, name);
    let mut data = Vec::new();
    let mut push = |id: String, owner: &str| {
        if usable(&id) {
            data.push(json!({"id": id, "object": "model", "created": 0, "owned_by": owner}));
        }
    };
    push("auto".into(), "baton");
    for r in snap.routes.keys() {
        push(r.clone(), "baton");
    }
    for p in snap.enabled() {
        push(p.id().to_string(), p.id());
        // `*` (any model, for a passthrough provider) is not a name a client can send.
        for m in p.models.iter().filter(|m| m.id != "*") {
            push(format!("{}/{}", p.id(), m.id), p.id());
        }
    }
    let mut list = json!({"object": "list", "data": data});
    if let Some(version) = query.client_version {
        list["models"] = super::codex::models(&state, &headers, &version).await;
    }
    Json(list).into_response()
}
