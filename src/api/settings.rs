//! Settings: gateway keys (list, create, revoke) and notification preferences.

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Map, Value};

use super::admin::require_admin;
use super::error::ApiError;
use super::AppState;
use crate::gateway::Core;

/// Notification kinds the desktop shell can show, and whether each is on by default.
pub const NOTIFICATIONS: &[(&str, bool)] = &[
    ("failover", true),
    ("allExhausted", true),
    ("cooldownEnded", true),
    ("loggedOut", true),
];

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal("store_failed", e)
}

fn invalid(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::field(param, message)
}

fn reload_keys(core: &Core) -> Result<(), ApiError> {
    core.load_ui_keys().map_err(internal)
}

/// `GET /admin/keys`: the gateway keys, masked.
pub async fn list_keys(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    let fixed: Vec<Value> = core
        .keys
        .fixed()
        .into_iter()
        .map(|(label, masked)| {
            let from = if label == "generated" {
                "the data directory (gateway.key)".to_string()
            } else {
                format!("the configuration ({label})")
            };
            json!({"label": label, "masked": masked, "from": from})
        })
        .collect();
    let ui = core.store.client_keys().map_err(internal)?;
    Ok(Json(json!({"fixed": fixed, "ui": ui})))
}

/// `POST /admin/keys` with `{"label": "…"}`: a new gateway key, shown in this answer only.
pub async fn create_key(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    let v: Map<String, Value> = serde_json::from_slice(&body)
        .map_err(|e| invalid("body", format!("Send {{\"label\": \"who uses it\"}}: {e}")))?;
    let label = v
        .get("label")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    if label.is_empty() || label.chars().count() > 64 || label.chars().any(char::is_control) {
        return Err(invalid(
            "label",
            "give a label of 1-64 characters (who or what uses the key)",
        ));
    }
    let existing = core.store.client_keys().map_err(internal)?;
    if existing.iter().any(|k| k.label == label) {
        return Err(invalid(
            "label",
            format!("a key labelled `{label}` exists already"),
        ));
    }
    let key = crate::auth::new_gateway_key();
    let row = crate::store::ClientKeyRow {
        id: format!(
            "k_{}",
            &crate::auth::new_gateway_key()[3..15].to_ascii_lowercase()
        ),
        label: label.clone(),
        hash: crate::auth::key_hash(&key),
        hint: crate::providers::Secret::new(key.clone()).masked(),
        created_ms: core.clock.now_ms(),
    };
    core.store.add_client_key(&row).map_err(internal)?;
    reload_keys(core)?;
    tracing::info!(label = %label, "gateway key created");
    Ok((
        StatusCode::CREATED,
        Json(
            json!({"id": row.id, "label": label, "hint": row.hint, "createdMs": row.created_ms, "key": key,
            "note": "Copy the key now: Baton keeps only a hash of it."}),
        ),
    ))
}

/// `DELETE /admin/keys/{id}`: revokes a UI-made key at once.
pub async fn revoke_key(
    State(state): State<AppState>,
    headers: HeaderMap,
    UrlPath(id): UrlPath<String>,
) -> Result<StatusCode, ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    core.store.revoke_client_key(&id, core.clock.now_ms()).map_err(|e| match e {
        crate::store::EditError::NotFound(_) => ApiError::missing(
            "key_not_found",
            "id",
            format!("No active key `{id}`; keys from the configuration or gateway.key are changed there."),
        ),
        other => internal(other),
    })?;
    reload_keys(core)?;
    tracing::info!(key = %id, "gateway key revoked");
    Ok(StatusCode::NO_CONTENT)
}

/// The notification preferences with defaults filled in.
pub fn notifications(core: &Core) -> Map<String, Value> {
    let stored = core
        .store
        .setting("notifications")
        .ok()
        .flatten()
        .unwrap_or_default();
    NOTIFICATIONS
        .iter()
        .map(|(k, default)| {
            let on = stored.get(*k).and_then(Value::as_bool).unwrap_or(*default);
            (k.to_string(), Value::Bool(on))
        })
        .collect()
}

/// `GET /admin/settings`.
pub async fn get(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    Ok(Json(json!({
        "notifications": notifications(core),
        "server": {"address": state.addr.to_string(), "host": core.server.host, "port": state.addr.port(),
            "change": "set server.host / server.port in the config file or pass --host / --port, then restart"},
    })))
}

/// `PUT /admin/settings` with `{"notifications": {"failover": bool, …}}`.
pub async fn put(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    let v: Map<String, Value> =
        serde_json::from_slice(&body).map_err(|e| invalid("body", format!("not JSON: {e}")))?;
    if let Some(k) = v.keys().find(|k| k.as_str() != "notifications") {
        return Err(invalid(
            k,
            format!("`{k}` cannot be set here; only `notifications` can"),
        ));
    }
    let Some(Value::Object(n)) = v.get("notifications") else {
        return Err(invalid("notifications", "send an object of true/false"));
    };
    let mut current = notifications(core);
    for (k, val) in n {
        if !NOTIFICATIONS.iter().any(|(name, _)| name == k) {
            let known: Vec<&str> = NOTIFICATIONS.iter().map(|(n, _)| *n).collect();
            return Err(invalid(
                &format!("notifications.{k}"),
                format!("unknown; known: {}", known.join(", ")),
            ));
        }
        let Some(on) = val.as_bool() else {
            return Err(invalid(
                &format!("notifications.{k}"),
                "must be true or false",
            ));
        };
        current.insert(k.clone(), Value::Bool(on));
    }
    core.store
        .set_setting("notifications", &Value::Object(current.clone()))
        .map_err(internal)?;
    Ok(Json(json!({"notifications": current})))
}

/// `GET /admin/desktop`: whether Baton runs inside the desktop app, and its start-at-login state.
pub async fn desktop(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    let link = core.desktop.load();
    Ok(Json(match link.as_deref() {
        Some(l) => json!({"present": true, "autostart": (l.autostart)(),
            "paused": core.paused.load(std::sync::atomic::Ordering::Relaxed)}),
        None => json!({"present": false}),
    }))
}

/// `PUT /admin/desktop` with `{"autostart": bool}`: the UI's Start at login toggle.
pub async fn set_desktop(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    require_admin(core, &headers)?;
    let link = core.desktop.load_full().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "no_desktop",
            "Start at login is set by the desktop app; this Baton runs headless (baton serve).",
        )
    })?;
    let v: Map<String, Value> =
        serde_json::from_slice(&body).map_err(|e| invalid("body", format!("not JSON: {e}")))?;
    let Some(on) = v.get("autostart").and_then(Value::as_bool) else {
        return Err(invalid("autostart", "must be true or false"));
    };
    (link.set_autostart)(on).map_err(|e| ApiError::internal("autostart", e))?;
    Ok(Json(
        json!({"present": true, "autostart": (link.autostart)()}),
    ))
}
