//! `/admin/update`: the desktop app's updates, as Settings shows and drives them. Off until the
//! user turns them on; a check asks the update address, an install downloads, verifies and
//! replaces the binary, then the desktop restarts into it.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{object_body, JsonBody};
use super::state::AppState;
use crate::gateway::Core;
use crate::update::{self, UpdateError, UpdateSettings};

object_body!(
    /// The updates settings' body.
    UpdateBody,
    r#"{"enabled": true|false, "url": "https://…/latest.json" (optional; "" for the built-in one)}"#
);

fn view(core: &Core) -> Value {
    let s = update::settings(core);
    let st = core.updates.state();
    json!({
        "supported": core.updates.app().is_some(),
        "enabled": s.enabled,
        "url": s.url,
        "builtInUrl": update::built_in_url(),
        "signed": update::trusted_key().is_some(),
        "current": crate::version(),
        "platform": update::platform(),
        "lastCheckMs": st.last_check_ms,
        "offer": st.offer,
        "error": st.error,
        "installed": st.installed,
    })
}

fn api_error(e: UpdateError) -> ApiError {
    let (status, code) = match &e {
        UpdateError::Disabled => (StatusCode::CONFLICT, "updates_off"),
        UpdateError::NoUrl => (StatusCode::CONFLICT, "no_update_url"),
        UpdateError::NoKey => (StatusCode::CONFLICT, "unsigned_build"),
        UpdateError::NotDesktop => (StatusCode::CONFLICT, "no_desktop"),
        UpdateError::NothingOffered => (StatusCode::CONFLICT, "no_update"),
        UpdateError::PackageManaged { .. } => (StatusCode::CONFLICT, "package_managed"),
        UpdateError::Insecure(_) => (StatusCode::UNPROCESSABLE_ENTITY, "insecure_update_url"),
        UpdateError::Fetch(_) | UpdateError::Manifest(_) => {
            (StatusCode::BAD_GATEWAY, "update_unavailable")
        }
        UpdateError::Signature(_) => (StatusCode::BAD_GATEWAY, "update_rejected"),
        UpdateError::Replace(..) => (StatusCode::INTERNAL_SERVER_ERROR, "update_failed"),
    };
    ApiError::new(status, "invalid_request_error", code, e.to_string())
}

/// `GET /admin/update`.
pub async fn get(State(state): State<AppState>) -> Json<Value> {
    Json(view(&state.core))
}

/// `PUT /admin/update`: turn checks on or off, or set the update address.
pub async fn put(
    State(state): State<AppState>,
    JsonBody(UpdateBody(v)): JsonBody<UpdateBody>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if let Some(k) = v.keys().find(|k| !matches!(k.as_str(), "enabled" | "url")) {
        return Err(ApiError::field(
            k.clone(),
            format!("unknown field `{k}`: updates take `enabled` and `url`"),
        ));
    }
    let mut s: UpdateSettings = update::settings(core);
    if let Some(e) = v.get("enabled") {
        s.enabled = e
            .as_bool()
            .ok_or_else(|| ApiError::field("enabled", "must be true or false"))?;
    }
    if let Some(u) = v.get("url") {
        let u = u
            .as_str()
            .ok_or_else(|| {
                ApiError::field("url", "must be a string (\"\" for the built-in address)")
            })?
            .trim();
        if !u.is_empty() {
            let parsed = reqwest::Url::parse(u)
                .map_err(|e| ApiError::field("url", format!("not an address: {e}")))?;
            let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
            if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
                return Err(ApiError::field(
                    "url",
                    "must be https (plain http only on this machine's loopback)",
                ));
            }
        }
        s.url = (!u.is_empty()).then(|| u.to_string());
    }
    let value = serde_json::to_value(&s).map_err(|e| ApiError::internal("settings", e))?;
    core.store
        .set_setting(update::SETTING, &value)
        .map_err(|e| ApiError::internal("settings", e))?;
    Ok(Json(view(core)))
}

/// `POST /admin/update/check`: ask the update address now.
pub async fn check(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    update::check(&state.core).await.map_err(api_error)?;
    Ok(Json(view(&state.core)))
}

/// `POST /admin/update/install`: download, verify and install the offered version, then restart
/// into it (202: the answer goes out before the app quits).
pub async fn install(State(state): State<AppState>) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = state.core.clone();
    let link = core
        .desktop
        .load_full()
        .ok_or_else(|| api_error(UpdateError::NotDesktop))?;
    let version = update::install(&core).await.map_err(api_error)?;
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        (link.relaunch)();
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"installed": version, "restarting": true})),
    ))
}
