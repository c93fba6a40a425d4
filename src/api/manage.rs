//! Admin API for editing the live configuration: providers (create, update, toggle, delete,
//! reorder, test); export and import are in `transfer`, routes and `modelMap` in `routing`.
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
pub(super) use super::key_refs::check_key_refs;
use super::AppState;
use crate::config::{ConfigError, ProviderConfig, SecretRef};
use crate::gateway::Core;
use crate::store::EditError;

const REQUEST: &str = "request body";

fn not_found(id: &str) -> ApiError {
    ApiError::missing(
        "provider_not_found",
        "id",
        format!("No provider `{id}` (it may have been deleted; reload)."),
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
struct ProviderBody {
    config: ProviderConfig,
    new_keys: Vec<String>,
    /// `newHeaders`: secret header values typed into the UI, stored like keys.
    new_headers: Vec<(String, String)>,
    /// Whether the body states a `priority` (else a new provider goes last).
    priority_given: bool,
}

fn parse_provider(body: &[u8]) -> Result<ProviderBody, ApiError> {
    parse_provider_value(body_json(body)?)
}

fn body_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid("body", format!("The body is not valid JSON: {e}")))
}

fn parse_provider_value(mut v: Value) -> Result<ProviderBody, ApiError> {
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
    if new_keys
        .iter()
        .any(|k| k.len() > 4096 || k.contains(char::is_whitespace))
    {
        return Err(field_error(
            "newKeys".into(),
            "a key is one line without spaces (paste only the key)".into(),
        ));
    }
    let new_headers = new_headers(obj.remove("newHeaders"))?;
    let priority_given = obj.contains_key("priority");
    let text = serde_json::to_string(&v).unwrap_or_default();
    let de = &mut serde_json::Deserializer::from_str(&text);
    let config: ProviderConfig = serde_path_to_error::deserialize(de).map_err(|e| {
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
    Ok(json!(provider_json(
        core,
        p,
        &stored,
        core.routing.clock.now_ms()
    )))
}

/// `POST /admin/providers`: adds a provider (201 with its state).
pub async fn create(
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    let mut p = parse_provider(&body)?;
    check_key_refs(core, &p.config, None)?;
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
    check_key_refs(core, &p.config, Some(&old.config))?;
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

/// One tiny real request. `adopt`: a saved provider's limit found by the test is applied
/// like one found by routing, so the row shows the same reset the test did.
async fn test_result(
    core: &Core,
    entry: Arc<crate::providers::ProviderEntry>,
    adopt: bool,
) -> Value {
    {
        if let Some(why) = entry.unavailable() {
            return json!({"ok": false, "class": "unavailable", "reason": why});
        }
        if entry.config.credentials == crate::config::Credentials::Client {
            return passthrough_check(core, &entry).await;
        }
        let Some(model) = entry.models.first().cloned() else {
            return json!({"ok": false, "class": "request", "reason": "no model configured"});
        };
        let target = crate::router::snapshot::Target {
            provider: entry.clone(),
            model,
        };
        let key = entry.keys.first();
        match crate::router::test_target(&core.routing, &target, key).await {
            Ok(ms) => json!({"ok": true, "model": target.model.id, "latencyMs": ms}),
            Err(c) => {
                let limit = matches!(
                    c.class,
                    crate::limits::ErrorClass::Rate | crate::limits::ErrorClass::Billing
                );
                let adopted = adopt && limit;
                if adopted {
                    crate::router::adopt_limit(&core.routing, &target, key, &c);
                }
                json!({"ok": false, "model": target.model.id, "class": c.class.as_str(),
                "reason": c.reason, "resetAtMs": c.reset_at_ms, "adopted": adopted})
            }
        }
    }
}

/// Test for a provider that calls with the client's own login: Baton never holds that login,
/// so it cannot send a prompt. It checks what it can — that the endpoint answers, as the API
/// it should be (a 401 without a login is the right answer) — and says what it cannot.
async fn passthrough_check(core: &Core, entry: &crate::providers::ProviderEntry) -> Value {
    let cannot = "Baton cannot test your login: it never holds it. Send one request from your tool (Claude Code, Codex) to check that.";
    let url = format!("{}/models", entry.config.base_url.trim_end_matches('/'));
    let started = std::time::Instant::now();
    let client = match core.routing.http.get(5_000) {
        Ok(c) => c,
        Err(e) => return json!({"ok": false, "class": "transient", "reason": e.to_string()}),
    };
    let sent = client
        .get(&url)
        .timeout(std::time::Duration::from_secs(15))
        .send()
        .await;
    let ms = started.elapsed().as_millis() as u64;
    match sent {
        Ok(r) if r.status().is_server_error() => json!({"ok": false, "passthrough": true,
            "class": "transient", "reason": format!("HTTP {}", r.status().as_u16())}),
        Ok(r) => json!({"ok": true, "passthrough": true, "latencyMs": ms,
            "note": format!("The endpoint answers (HTTP {} without a login, in {ms} ms). {cannot}", r.status().as_u16())}),
        Err(e) => json!({"ok": false, "passthrough": true, "class": "transient",
            "reason": crate::providers::outbound::describe(&e)}),
    }
}

/// `POST /admin/providers/{id}/test`: one tiny real request through that provider.
pub async fn test_saved(
    State(state): State<AppState>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let entry = core
        .routing
        .snapshot
        .load()
        .provider(&id)
        .cloned()
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(test_result(core, entry, true).await))
}

/// `confirmRun` taken out of a test body: whether the user agreed to run a CLI.
fn take_confirm_run(body: &mut Value) -> Result<bool, ApiError> {
    // Not an object: `parse_provider_value` says what is wrong with it.
    let Some(obj) = body.as_object_mut() else {
        return Ok(false);
    };
    match obj.remove("confirmRun") {
        None | Some(Value::Bool(false)) => Ok(false),
        Some(Value::Bool(true)) => Ok(true),
        Some(_) => Err(field_error(
            "confirmRun".into(),
            "must be true or false".into(),
        )),
    }
}

/// Testing an unsaved CLI provider runs a program on this machine: nothing runs until the user
/// has seen which one and agreed (`confirmRun: true`, the form's second press).
fn confirm_first(config: &ProviderConfig) -> ApiError {
    let kind = config.kind;
    let name = config
        .executable
        .clone()
        .or_else(|| kind.cli_program().map(str::to_string))
        .unwrap_or_default();
    let path =
        crate::providers::cli::resolve_executable(&name, std::env::var_os("PATH").as_deref())
            .map(|p| p.display().to_string())
            .unwrap_or(name);
    ApiError::new(
        StatusCode::PRECONDITION_REQUIRED,
        "invalid_request_error",
        "confirmation_required",
        format!("Testing runs `{path} --version`, its login check and one tiny prompt on this machine. Send the same body with \"confirmRun\": true once you agree."),
    )
}

/// `POST /admin/test`: validates a provider body and tests it without saving anything (the
/// form's Test button); typed keys are used from memory only. A CLI provider is run only with
/// `confirmRun: true`.
pub async fn test_unsaved(
    State(state): State<AppState>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let mut v = body_json(&body)?;
    let confirmed = take_confirm_run(&mut v)?;
    let mut p = parse_provider_value(v)?;
    if p.config.kind.is_cli() && !confirmed {
        return Err(confirm_first(&p.config));
    }
    // Testing an edit of a saved provider may keep its stored keys (same host only).
    let saved = core
        .routing
        .snapshot
        .load()
        .provider(&p.config.id)
        .map(|e| e.config.clone());
    check_key_refs(core, &p.config, saved.as_ref())?;
    let mut typed = std::mem::take(&mut p.new_keys);
    let typed_ref = |i: usize| SecretRef {
        env: String::new(),
        stored: Some(format!("typed-{i}")),
    };
    for i in 0..typed.len() {
        p.config.keys.insert(i, typed_ref(i));
    }
    for (name, value) in std::mem::take(&mut p.new_headers) {
        p.config.headers.insert(
            name,
            crate::config::HeaderValue::Secret(typed_ref(typed.len())),
        );
        typed.push(value);
    }
    // Keys and headers typed into the form are used from memory; everything else as routing
    // finds it.
    let env = |name: &str| {
        let typed_index = name
            .strip_prefix(crate::secrets::LOOKUP_PREFIX)
            .and_then(|id| id.strip_prefix("typed-"))
            .and_then(|i| i.parse::<usize>().ok());
        match typed_index {
            Some(i) => typed.get(i).cloned(),
            None => core.secret(name),
        }
    };
    let runtime = Arc::new(crate::providers::ProviderRuntime::new(None));
    let entry = crate::providers::resolve(p.config.clone(), runtime.clone(), &env);
    if p.config.kind.is_cli() {
        let config = p.config.clone();
        let now = core.routing.clock.now_ms();
        let st =
            tokio::task::spawn_blocking(move || crate::providers::cli::check_status(&config, now))
                .await
                .unwrap_or_default();
        runtime.cli_status.store(Some(Arc::new(st)));
    }
    let result = test_result(core, Arc::new(entry), false).await;
    // Typed secrets are not among those the gateway's redactor knows: mask them here too.
    let typed_only = crate::redact::Redactor::default();
    typed_only.set_secrets(&typed);
    let text = result.to_string();
    Ok(Json(match typed_only.text(&text) {
        std::borrow::Cow::Borrowed(_) => result,
        std::borrow::Cow::Owned(masked) => serde_json::from_str(&masked).unwrap_or(result),
    }))
}
