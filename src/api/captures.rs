//! `/admin/captures`: capture (opt-in, for a while) of the requests sent to a provider or made
//! with a client key, and the captures kept — each downloadable as the one file a bug report
//! needs (already redacted), or deleted.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::state::AppState;
use crate::capture::{Rule, MAX_MINUTES};
use crate::gateway::Core;

/// `POST /admin/captures/rules`: what to capture, for how long.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Arm {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    client_key: Option<String>,
    minutes: u32,
}

impl Shape for Arm {
    const EXPECTED: &'static str =
        r#"{"provider": "claude"} or {"clientKey": "k_…"}, with "minutes": 60 (1–1440)"#;
}

fn view(core: &Core) -> Value {
    json!({
        "rules": core.captures.rules(core.routing.clock.now_ms()),
        "captures": core.captures.list(),
    })
}

/// `GET /admin/captures`: the rules running and the captures kept.
pub async fn list(State(state): State<AppState>) -> Json<Value> {
    Json(view(&state.core))
}

/// `POST /admin/captures/rules`: capture a provider's or a client key's requests from now.
pub async fn arm(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<Arm>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    if !(1..=MAX_MINUTES).contains(&b.minutes) {
        return Err(ApiError::field(
            "minutes",
            crate::i18n::msg(
                "minutes must be between 1 and {max} (a capture runs for a while, then stops)",
                &[("max", &MAX_MINUTES.to_string())],
            ),
        ));
    }
    let provider = b
        .provider
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty());
    let client_key = b
        .client_key
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty());
    match (&provider, &client_key) {
        (Some(p), None) if core.routing.snapshot.load().provider(p).is_none() => {
            return Err(ApiError::field(
                "provider",
                crate::i18n::msg("no provider is called {id}", &[("id", p)]),
            ))
        }
        (None, Some(k)) if !known_key(core, k) => {
            return Err(ApiError::field(
                "clientKey",
                crate::i18n::msg("no client key has the id {id}", &[("id", k)]),
            ))
        }
        (Some(_), None) | (None, Some(_)) => {}
        _ => {
            return Err(ApiError::field(
                "provider",
                crate::i18n::msg("name either a provider or a client key to capture", &[]),
            ))
        }
    }
    let now = core.routing.clock.now_ms();
    let mut rules = core.captures.rules(now);
    // One rule per provider or key: arming it again sets its end.
    rules.retain(|r| r.provider != provider || r.client_key != client_key);
    rules.push(Rule {
        provider,
        client_key,
        until_ms: now + i64::from(b.minutes) * 60_000,
    });
    core.save_capture_rules(rules)
        .map_err(|e| ApiError::internal("settings", e))?;
    Ok((StatusCode::CREATED, Json(view(core))))
}

fn known_key(core: &Core, id: &str) -> bool {
    core.keys.managed().iter().any(|c| c.id == id)
        || core.keys.fixed().iter().any(|(c, _)| c.id == id)
}

/// `DELETE /admin/captures/rules`: stop capturing.
pub async fn disarm(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    core.save_capture_rules(Vec::new())
        .map_err(|e| ApiError::internal("settings", e))?;
    Ok(Json(view(core)))
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "capture_not_found",
        crate::i18n::msg(
            "No capture of request {id}: it was not captured, or is past the log's retention.",
            &[("id", crate::limits::truncate(id, 100))],
        ),
    )
}

/// `GET /admin/captures/{id}`: the capture as one file (redacted when it was written).
pub async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.core.captures.read(&id) {
        Some(bytes) => (
            [
                (header::CONTENT_TYPE, "application/json".to_string()),
                (
                    header::CONTENT_DISPOSITION,
                    format!("attachment; filename=\"baton-capture-{id}.json\""),
                ),
            ],
            bytes,
        )
            .into_response(),
        None => not_found(&id).into_response(),
    }
}

/// `DELETE /admin/captures/{id}`.
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    if state.core.captures.delete(&id) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        not_found(&id).into_response()
    }
}
