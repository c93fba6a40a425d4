//! Inbound OpenAI Chat Completions (`POST /v1/chat/completions`) and `GET /v1/models`.

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::admission::{admits, Admits};
use super::pipeline::{handle, header_value, log_failure, new_request_id, Format};
use super::{authenticate, AppState};

#[derive(serde::Deserialize)]
pub struct ModelsQuery {
    /// Codex's version: Codex asks so for its models' metadata.
    client_version: Option<String>,
}

pub async fn chat_completions(State(state): State<AppState>, req: Request) -> Response {
    let request_id = new_request_id();
    let mut base = HeaderMap::new();
    base.insert("x-request-id", header_value(&request_id));
    match handle(&state, req, &request_id, &mut base, Format::OpenAi).await {
        Ok(resp) => resp,
        Err(e) => {
            log_failure(&request_id, &e);
            e.with_headers(base).into_response()
        }
    }
}

/// `GET /v1/models`: OpenAI's list shape, or Anthropic's when the request carries
/// `anthropic-version`; Codex (`?client_version=`) also gets its own `models` list.
pub async fn models(
    State(state): State<AppState>,
    super::json::ApiQuery(query): super::json::ApiQuery<ModelsQuery>,
    headers: HeaderMap,
) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let client = match authenticate(&state.core, &headers) {
        Ok(c) => c,
        Err(e) if anthropic => return super::anthropic::anthropic_error(e),
        Err(e) => return e.into_response(),
    };
    // A disabled or expired key lists nothing (listing costs no tokens: no metering).
    let now = state.core.routing.clock.now_ms();
    if let Err(d) = state.core.clients.gate(&client, now) {
        let e = super::admission::deny_error(&d, &client.label, now);
        return if anthropic {
            super::anthropic::anthropic_error(e)
        } else {
            e.into_response()
        };
    }
    let snap = state.core.routing.snapshot.load();
    // A key limited to some targets or a price tier sees only the names it can use.
    let usable = |name: &str| {
        let p = &client.policy;
        if p.allow.is_empty() && p.max_tier.is_none() {
            return true;
        }
        snap.resolve(name).is_ok_and(|(targets, _)| {
            targets
                .iter()
                .any(|t| matches!(admits(p, name, t), Admits::Yes))
        })
    };
    if anthropic {
        let names = snap
            .model_names()
            .into_iter()
            .filter(|n| usable(n))
            .collect();
        return super::anthropic::models(names).into_response();
    }
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
