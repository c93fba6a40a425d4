//! Moving the live configuration in and out as a config file: export (no secrets) and import
//! (validated whole first; the running file's providers, routes and mappings are skipped; a
//! replace is asked for).

use std::path::Path;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::manage::{check_key_refs, field_error, store_error, Bounds};
use super::state::AppState;
use crate::config::{ConfigError, ProviderConfig};
use crate::gateway::Core;

/// The live configuration as a config file: the file's settings, the stored providers with the
/// user's toggles and order, keys only as the variables they come from (typed keys are left
/// out: they live in this machine's secret store).
pub fn export_config(core: &Core) -> Result<crate::config::ConfigFile, ApiError> {
    let mut out = core.file_config.clone();
    let stored = core.store.load_providers().map_err(store_error)?;
    let mut providers: Vec<ProviderConfig> = stored.iter().map(|s| s.effective()).collect();
    providers.sort_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)));
    for p in &mut providers {
        p.keys.retain(|k| k.stored.is_none());
        let typed = |v: &crate::config::HeaderValue| matches!(v, crate::config::HeaderValue::Secret(r) if r.stored.is_some());
        p.headers.retain(|_, v| !typed(v));
        p.env.retain(|_, v| !typed(v));
    }
    out.providers = providers;
    out.routes = core.live_routes();
    out.model_map = core.live_model_map();
    // Web search as it is live, but for a key typed into Settings (never exported).
    let mut search = core.web_search_service().settings;
    if search
        .api_key_env
        .starts_with(crate::secrets::LOOKUP_PREFIX)
    {
        search.api_key_env.clear();
    }
    out.web_search = (search != crate::search::SearchSettings::default()).then_some(search);
    out.schema = Some("./config.schema.json".into());
    Ok(out)
}

/// `GET /admin/export`.
pub async fn export(State(state): State<AppState>) -> Result<(HeaderMap, Json<Value>), ApiError> {
    let core = &state.core;
    let config = export_config(core)?;
    let mut h = HeaderMap::new();
    h.insert(
        axum::http::header::CONTENT_DISPOSITION,
        axum::http::HeaderValue::from_static("attachment; filename=\"baton-config.json\""),
    );
    Ok((h, Json(serde_json::to_value(config).unwrap_or_default())))
}

/// `POST /admin/import[?replace=true]`: a config file's providers, validated as a whole first
/// (nothing changes on error), added as UI-owned and applied at once. Providers the running
/// config file defines are skipped (the file wins at every start), so an export imports back on
/// the same machine; one that already exists is replaced only with `replace=true` — without it,
/// a 409 lists them and nothing changes.
pub async fn import(
    State(state): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let replace = replace_flag(query.as_deref())?;
    let text = std::str::from_utf8(&body)
        .map_err(|_| ApiError::invalid("body", "The file is not UTF-8 text."))?;
    let config = crate::config::parse_str(text, Path::new("the file")).map_err(|e| match e {
        ConfigError::Field { path, message, .. } => {
            field_error(path, format!("{message}; nothing was imported"))
        }
        other => ApiError::invalid("body", format!("{other}; nothing was imported")),
    })?;
    // An import names keys like any edit: bound to where they belong (nothing is imported
    // when one is not).
    let bounds = Bounds::of(core);
    for (i, p) in config.providers.iter().enumerate() {
        let existing = core
            .routing
            .snapshot
            .load()
            .provider(&p.id)
            .map(|e| e.config.clone());
        check_key_refs(&bounds, p, existing.as_ref()).map_err(|mut e| {
            let param = e.param.take().unwrap_or_default();
            e.param = Some(format!("providers[{i}].{param}"));
            e.message = format!("{}; nothing was imported", e.message);
            e
        })?;
    }
    let Plan {
        taking,
        replaced,
        skipped,
        ui_routes,
        ui_map,
    } = plan(core, &config)?;
    if !replaced.is_empty() && !replace {
        let mut e = ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "import_conflict",
            crate::i18n::msg(
                "{names} already exist(s) here; import again with replace=true to overwrite them. Nothing was imported.",
                &[("names", &replaced.join(", "))],
            ),
        );
        e.param = Some("replace".into());
        return Err(e);
    }
    core.store
        .import_providers(&taking, core.routing.clock.now_ms())
        .map_err(store_error)?;
    for (key, value) in [
        (
            crate::gateway::live::UI_ROUTES,
            serde_json::to_value(&ui_routes),
        ),
        (
            crate::gateway::live::UI_MODEL_MAP,
            serde_json::to_value(&ui_map),
        ),
    ] {
        let value = value.map_err(store_error)?;
        core.store.set_setting(key, &value).map_err(store_error)?;
    }
    core.reload_blocking().await.map_err(store_error)?;
    let ids: Vec<&str> = taking.iter().map(|p| p.id.as_str()).collect();
    tracing::info!(providers = ?ids, replaced = ?replaced, skipped = skipped.len(), "configuration imported");
    Ok(Json(
        json!({"imported": ids, "replaced": replaced, "skipped": skipped}),
    ))
}

/// `replace=true|false` (or bare `replace`); anything else is refused.
fn replace_flag(query: Option<&str>) -> Result<bool, ApiError> {
    let mut replace = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair {
            "replace" | "replace=true" | "replace=1" => replace = true,
            "replace=false" | "replace=0" => replace = false,
            other => {
                return Err(ApiError::invalid(
                    "replace",
                    format!(
                        "`{}` is not understood here: the only option is replace=true",
                        crate::limits::truncate(other, 60)
                    ),
                ))
            }
        }
    }
    Ok(replace)
}

/// What an import would do: the providers it takes (new or replacing a UI-made one), what it
/// replaces, what it leaves to the running config file, and the UI's routes and modelMap with
/// the file's merged in.
struct Plan {
    taking: Vec<crate::config::ProviderConfig>,
    replaced: Vec<String>,
    skipped: Vec<Value>,
    ui_routes: std::collections::BTreeMap<String, crate::config::RouteConfig>,
    ui_map: std::collections::BTreeMap<String, String>,
}

fn plan(core: &crate::gateway::Core, config: &crate::config::ConfigFile) -> Result<Plan, ApiError> {
    let stored = core.store.load_providers().map_err(store_error)?;
    let crate::store::ProviderImport {
        taking,
        mut replaced,
        file_owned,
    } = crate::store::ProviderImport::sort(&stored, &config.providers);
    let mut skipped: Vec<Value> = file_owned
        .iter()
        .map(|id| {
            json!({"id": id,
            "reason": "defined in the config file Baton runs with, which wins at every start"})
        })
        .collect();
    // Routes and modelMap entries come along, owned by the UI; the running file's stay.
    let mut ui_routes = core.ui_routes();
    let mut ui_map = core.ui_model_map();
    for (name, r) in &config.routes {
        if core.file_config.routes.contains_key(name) {
            skipped.push(json!({"id": format!("route {name}"),
                "reason": "defined in the config file Baton runs with"}));
        } else if let Some(old) = ui_routes.insert(name.clone(), r.clone()) {
            if &old != r {
                replaced.push(format!("route {name}"));
            }
        }
    }
    for (pattern, target) in &config.model_map {
        if core.file_config.model_map.contains_key(pattern) {
            skipped.push(json!({"id": format!("modelMap {pattern}"),
                "reason": "defined in the config file Baton runs with"}));
        } else if let Some(old) = ui_map.insert(pattern.clone(), target.clone()) {
            if &old != target {
                replaced.push(format!("modelMap {pattern}"));
            }
        }
    }
    Ok(Plan {
        taking,
        replaced,
        skipped,
        ui_routes,
        ui_map,
    })
}
