//! Admin API for editing the live configuration: providers (create, update, toggle, delete,
//! reorder); their Test is in `provider_test`, export and import in `transfer`, routes and
//! `modelMap` in `routing`.
//! Every change is validated (errors name the field in
//! `error.param`), stored in one SQLite transaction and applied to routing at once; requests in
//! flight finish on the snapshot they started with.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::admin::provider_json;
use super::error::ApiError;
use super::json::{object_body, JsonBody, Shape};
pub(super) use super::key_refs::{check_key_refs, Bounds};
use super::state::AppState;
use crate::config::{ConfigError, ProviderConfig, SecretRef};
use crate::gateway::Core;
use crate::store::EditError;

const REQUEST: &str = "request body";

pub(super) fn not_found(id: &str) -> ApiError {
    ApiError::missing(
        "provider_not_found",
        "id",
        crate::i18n::msg(
            "No provider `{id}` (it may have been deleted; reload).",
            &[("id", id)],
        ),
    )
}

fn edit_error(e: EditError) -> ApiError {
    match e {
        EditError::NotFound(id) => not_found(&id),
        EditError::Conflict(m) => {
            ApiError::new(StatusCode::CONFLICT, "invalid_request_error", "conflict", m)
        }
        EditError::Store(e) => store_error(e),
    }
}

pub(super) fn store_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal("store_failed", e)
}

pub(super) fn field_error(param: String, message: String) -> ApiError {
    ApiError::field(param, message)
}

/// A provider definition from a request body: the config-file format plus `newKeys`, API keys
/// typed into the UI (stored in the secret store, never echoed back).
pub(super) struct ProviderBody {
    pub(super) config: ProviderConfig,
    pub(super) new_keys: Vec<String>,
    /// `newHeaders`: secret header values typed into the UI, stored like keys.
    pub(super) new_headers: Vec<(String, String)>,
    /// Whether the body states a `priority` (else a new provider goes last).
    priority_given: bool,
}

fn parse_provider(body: &[u8]) -> Result<ProviderBody, ApiError> {
    parse_provider_value(body_json(body)?)
}

pub(super) fn body_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid("body", format!("The body is not valid JSON: {e}")))
}

pub(super) fn parse_provider_value(mut v: Value) -> Result<ProviderBody, ApiError> {
    let Some(obj) = v.as_object_mut() else {
        return Err(ApiError::invalid(
            "body",
            "Send a provider object, as in config.example.json.",
        ));
    };
    let new_keys: Vec<String> = match obj.remove("newKeys") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .into_iter()
            .map(|k| match k {
                Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                _ => Err(field_error(
                    "newKeys".into(),
                    "each new key must be a non-empty string".into(),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(field_error(
                "newKeys".into(),
                "must be a list of keys".into(),
            ))
        }
    };
    // A kind whose key may be a credentials file (Vertex AI's service account) takes its JSON
    // as pasted, kept compact; any other key is one line without spaces.
    let kind = obj
        .get("kind")
        .cloned()
        .and_then(|k| serde_json::from_value::<crate::config::ProviderKind>(k).ok());
    let files = kind.is_some_and(crate::config::ProviderKind::takes_credentials_file);
    let new_keys = new_keys
        .into_iter()
        .map(|k| typed_key(k, files))
        .collect::<Result<Vec<_>, _>>()?;
    let new_headers = new_headers(obj.remove("newHeaders"))?;
    let priority_given = obj.contains_key("priority");
    let text = serde_json::to_string(&v).unwrap_or_default();
    let de = &mut serde_json::Deserializer::from_str(&text);
    let mut config: ProviderConfig = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let param = if path == "." {
            "body".to_string()
        } else {
            path
        };
        field_error(
            param,
            super::error::plain_serde(&e.into_inner().to_string()),
        )
    })?;
    config.adopt_kind();
    validate(&config)?;
    if config.id == crate::config::LOCAL_PROVIDER_ID {
        return Err(field_error(
            "id".into(),
            format!(
                "`{}` is reserved for the local last-resort server",
                config.id
            ),
        ));
    }
    if let Some((name, _)) = new_headers
        .iter()
        .find(|(n, _)| config.headers.contains_key(n))
    {
        return Err(field_error(
            format!("newHeaders.{name}"),
            format!("`{name}` is also in `headers`; give it once"),
        ));
    }
    Ok(ProviderBody {
        config,
        new_keys,
        new_headers,
        priority_given,
    })
}

/// `newHeaders`: `{"X-Proxy-Token": "value"}`, secret header values to store.
fn new_headers(v: Option<Value>) -> Result<Vec<(String, String)>, ApiError> {
    let map = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(field_error(
                "newHeaders".into(),
                "must be an object of header names and their secret values".into(),
            ))
        }
    };
    map.into_iter()
        .map(|(name, value)| {
            let at = format!("newHeaders.{name}");
            let text = value
                .as_str()
                .map(str::trim)
                .unwrap_or_default()
                .to_string();
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(field_error(at, "is not a valid header name".into()));
            }
            if text.is_empty() || text.len() > 4096 || http::HeaderValue::from_str(&text).is_err() {
                return Err(field_error(
                    at,
                    "give the value as one line of visible ASCII".into(),
                ));
            }
            Ok((name, text))
        })
        .collect()
}

/// The config file's rules for one provider, as an admin-API error naming the field; every
/// field with a problem is in `error.details.fields`, so a form shows them all at once.
pub(super) fn validate(config: &ProviderConfig) -> Result<(), ApiError> {
    let problems =
        crate::config::validate::provider_problems(config, "provider", Path::new(REQUEST));
    let fields: Vec<(String, String)> = problems
        .into_iter()
        .map(|e| match e {
            ConfigError::Field { path, message, .. } => {
                (path.trim_start_matches("provider.").to_string(), message)
            }
            other => ("body".to_string(), other.to_string()),
        })
        .collect();
    let Some((param, message)) = fields.first().cloned() else {
        return Ok(());
    };
    let mut e = if param == "body" {
        ApiError::invalid("body", message)
    } else {
        field_error(param, message)
    };
    if fields.len() > 1 {
        e.details = Some(json!({"fields": fields.iter()
            .map(|(p, m)| json!({"param": p, "message": m})).collect::<Vec<_>>()}));
    }
    Err(e)
}

/// Stores typed keys and adds references to them; returns the new secret ids (to undo).
fn store_new_keys(core: &Core, body: &mut ProviderBody) -> Result<Vec<String>, ApiError> {
    if !body.new_keys.is_empty() && body.config.kind.is_cli() {
        return Err(field_error(
            "newKeys".into(),
            "a CLI provider uses the CLI's own login, not keys".into(),
        ));
    }
    if !body.new_headers.is_empty() && body.config.kind.is_cli() {
        return Err(field_error(
            "newHeaders".into(),
            "a CLI provider sends no HTTP headers".into(),
        ));
    }
    // Each typed secret is stored, then referred to; a failure undoes the ones stored so far.
    let mut ids = Vec::new();
    let mut store = |value: &str| match core.secrets.put(value) {
        Ok(id) => {
            ids.push(id.clone());
            Ok(SecretRef {
                env: String::new(),
                stored: Some(id),
            })
        }
        Err(e) => {
            let _ = core.secrets.delete(&ids);
            Err(store_error(e))
        }
    };
    for (name, value) in &body.new_headers {
        let r = store(value)?;
        body.config
            .headers
            .insert(name.clone(), crate::config::HeaderValue::Secret(r));
    }
    for k in &body.new_keys {
        let r = store(k)?;
        body.config.keys.push(r);
    }
    Ok(ids)
}

async fn applied(core: &Arc<Core>, id: &str) -> Result<Value, ApiError> {
    core.reload_blocking().await.map_err(store_error)?;
    // A CLI's executable, version and login are known when the answer comes, not minutes later.
    let is_cli = core
        .routing
        .snapshot
        .load()
        .provider(id)
        .is_some_and(|p| p.config.kind.is_cli());
    if is_cli {
        core.check_clis(Some(id)).await;
    }
    let stored = core.store.load_providers().map_err(store_error)?;
    let snap = core.routing.snapshot.load();
    let p = snap.provider(id).ok_or_else(|| not_found(id))?;
    let now = core.routing.clock.now_ms();
    let mut row = core.provider_summary(p, &core.routing.cooldowns.active(), now);
    row.name_windows(crate::i18n::asked());
    Ok(json!(provider_json(core, p, &row, &stored, now)))
}

/// `POST /admin/providers`: adds a provider (201 with its state).
pub async fn create(
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    let mut p = parse_provider(&body)?;
    check_key_refs(&Bounds::of(core), &p.config, None)?;
    if core
        .routing
        .snapshot
        .load()
        .provider(&p.config.id)
        .is_some()
    {
        return Err(field_error(
            "id".into(),
            format!("a provider with id `{}` exists already", p.config.id),
        ));
    }
    if !p.priority_given {
        // Last in the order, not wherever priority 100 and its id would sort it.
        let stored = core.store.load_providers().map_err(store_error)?;
        if let Some(last) = stored.iter().map(|s| s.effective().priority).max() {
            p.config.priority = p.config.priority.max(last.saturating_add(10));
        }
    }
    let secrets = store_new_keys(core, &mut p)?;
    if let Err(e) = core
        .store
        .create_provider(&p.config, core.routing.clock.now_ms())
    {
        let _ = core.secrets.delete(&secrets);
        return Err(edit_error(e));
    }
    tracing::info!(provider = %p.config.id, kind = p.config.kind.as_str(), "provider added");
    Ok((
        StatusCode::CREATED,
        Json(applied(core, &p.config.id).await?),
    ))
}

/// `PUT /admin/providers/{id}`: replaces a UI-owned provider's definition. Keys kept are the
/// `keys` the body lists; stored keys it no longer lists are deleted.
pub async fn update(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let mut p = parse_provider(&body)?;
    let old = core
        .store
        .load_providers()
        .map_err(store_error)?
        .into_iter()
        .find(|s| s.config.id == id)
        .ok_or_else(|| not_found(&id))?;
    check_key_refs(&Bounds::of(core), &p.config, Some(&old.config))?;
    let secrets = store_new_keys(core, &mut p)?;
    if let Err(e) = core
        .store
        .update_provider(&id, &p.config, core.routing.clock.now_ms())
    {
        let _ = core.secrets.delete(&secrets);
        return Err(edit_error(e));
    }
    let kept = p.config.stored_ids();
    let dropped: Vec<String> = old
        .config
        .stored_ids()
        .into_iter()
        .filter(|s| !kept.contains(s))
        .collect();
    let _ = core.secrets.delete(&dropped);
    Ok(Json(applied(core, &id).await?))
}

object_body!(
    /// The toggle's body.
    EnabledPatch,
    r#"{"enabled": true|false}"#
);

/// `PATCH /admin/providers/{id}` with `{"enabled": bool}`: the toggle (also for providers from
/// the config file; kept across restarts).
pub async fn patch(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
    JsonBody(EnabledPatch(v)): JsonBody<EnabledPatch>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if let Some(k) = v.keys().find(|k| k.as_str() != "enabled") {
        return Err(field_error(k.clone(), format!("`{k}` cannot be patched; only `enabled` can (use PUT for the definition, PUT /admin/order for the order)")));
    }
    let Some(enabled) = v.get("enabled").and_then(Value::as_bool) else {
        return Err(field_error(
            "enabled".into(),
            "must be true or false".into(),
        ));
    };
    core.store.set_enabled(&id, enabled).map_err(edit_error)?;
    tracing::info!(provider = %id, enabled, "provider toggled");
    Ok(Json(applied(core, &id).await?))
}

/// `DELETE /admin/providers/{id}`: removes a UI-owned provider, its stored keys and cooldowns.
pub async fn delete(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<StatusCode, ApiError> {
    let core = &state.core;
    let old = core
        .store
        .load_providers()
        .map_err(store_error)?
        .into_iter()
        .find(|s| s.config.id == id);
    if let Some(user) = crate::api::routing::user_of(core, &id) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "provider_in_use",
            format!("{user} still leads to `{id}`; change it in Settings → Routing first."),
        ));
    }
    core.store.delete_provider(&id).map_err(edit_error)?;
    if let Some(old) = old {
        let _ = core.secrets.delete(&old.config.stored_ids());
    }
    for c in core
        .routing
        .cooldowns
        .active()
        .iter()
        .filter(|c| c.scope.provider == id)
    {
        core.routing.cooldowns.clear(&c.scope);
    }
    core.reload_blocking().await.map_err(store_error)?;
    tracing::info!(provider = %id, "provider deleted");
    Ok(StatusCode::NO_CONTENT)
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Order {
    order: Vec<String>,
}

impl Shape for Order {
    const PARAM: &'static str = "order";
    const EXPECTED: &'static str = r#"{"order": [provider ids in order]}"#;
}

/// `PUT /admin/order` with `{"order": [ids]}`: the whole routing order in one call.
pub async fn order(
    State(state): State<AppState>,
    JsonBody(o): JsonBody<Order>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    core.store
        .set_order(&o.order, core.routing.clock.now_ms())
        .map_err(edit_error)?;
    core.reload_blocking().await.map_err(store_error)?;
    tracing::info!(order = ?o.order, "providers reordered");
    Ok(Json(json!({"order": o.order})))
}

/// A key as typed: one line without spaces, or for a kind that takes one, a credentials file's
/// JSON (a Google service account's key or a user's refresh token), kept compact.
fn typed_key(k: String, files: bool) -> Result<String, ApiError> {
    if files && k.starts_with('{') {
        let v: Value = serde_json::from_str(&k).map_err(|e| {
            field_error(
                "newKeys".into(),
                crate::i18n::msg(
                    "the pasted key is not valid JSON ({why}): paste the whole key file",
                    &[("why", &e.to_string())],
                ),
            )
        })?;
        let known = matches!(
            v.get("type").and_then(Value::as_str),
            Some("service_account" | "authorized_user")
        );
        if !known || k.len() > 16 * 1024 {
            return Err(field_error(
                "newKeys".into(),
                crate::i18n::msg("this JSON is not a service account's key file (its \"type\" is \"service_account\")", &[]),
            ));
        }
        return Ok(v.to_string());
    }
    if k.len() > 4096 || k.contains(char::is_whitespace) {
        return Err(field_error(
            "newKeys".into(),
            crate::i18n::msg("a key is one line without spaces (paste only the key)", &[]),
        ));
    }
    Ok(k)
}
