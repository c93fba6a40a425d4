//! Admin API for what model names lead to: `auto`, named routes and `modelMap`. Routes and
//! map entries made here live in the store (settings `routes` and `modelMap`); the config
//! file's own win for the names they define, as its providers do, and are read-only here.
//! Every change is validated against the live providers and applied to routing at once.

use std::collections::BTreeMap;
use std::path::Path;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::state::AppState;
use crate::config::{ConfigError, RouteConfig, RouteDetail};
use crate::gateway::live::{UI_MODEL_MAP, UI_ROUTES};
use crate::gateway::Core;

fn store_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal("store_failed", e)
}

fn conflict(code: &'static str, message: String) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "invalid_request_error", code, message)
}

fn owner(file: bool) -> &'static str {
    if file {
        "file"
    } else {
        "ui"
    }
}

/// `GET /admin/routes`: what each model name leads to — `auto` (enabled providers in order,
/// each with the models it offers), the named routes and `modelMap`, each with its owner
/// (`file`: read-only here; `ui`: editable) and the targets that name nothing any more.
pub async fn routes(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let snap = core.routing.snapshot.load();
    let auto: Vec<Value> = snap
        .enabled()
        .filter(|p| p.config.auto)
        .map(|p| {
            // A provider that calls with the client's own login serves only requests that
            // bring one: Settings lists it apart from a gateway key's order.
            json!({"provider": p.id(), "name": p.config.display_name(),
                "loginOnly": !p.config.credentials.is_baton(),
                "models": p.models.iter().map(|m| m.id.clone()).collect::<Vec<_>>()})
        })
        .collect();
    let names_nothing = |t: &str| {
        let head = t.split('/').next().unwrap_or_default();
        t != "auto" && snap.provider(head).is_none() && !snap.routes.contains_key(t)
    };
    let named: serde_json::Map<String, Value> = snap
        .routes
        .iter()
        .map(|(name, r)| {
            let missing: Vec<&String> = r.targets().iter().filter(|t| names_nothing(t)).collect();
            (
                name.clone(),
                json!({"targets": r.targets(), "resumeOnBreak": r.resume_on_break(),
                    "order": r.order(), "hedge": r.hedge(),
                    "owner": owner(core.file_config.routes.contains_key(name)),
                    "missing": missing}),
            )
        })
        .collect();
    let map: Vec<Value> = snap
        .model_map
        .iter()
        .map(|(from, to)| {
            json!({"pattern": from, "route": to,
                "owner": owner(core.file_config.model_map.contains_key(from)),
                "missing": names_nothing(to)})
        })
        .collect();
    Ok(Json(json!({"auto": auto, "routes": named, "modelMap": map,
        // What a route without its own `hedge` does (`routing.hedge.enabled`).
        "hedgeDefault": snap.routing.hedge.enabled,
        "edit": "routes and modelMap entries made here can be changed here; the config file's are changed in the file; the order of auto is the providers' order"})))
}

/// Checks routes and map as they would be after a change, against the stored providers, with
/// the config file's rules. The error names the field as the config file would.
fn check(
    core: &Core,
    routes: &BTreeMap<String, RouteConfig>,
    map: &BTreeMap<String, String>,
) -> Result<(), (String, String)> {
    let stored = core
        .store
        .load_providers()
        .map_err(|e| (String::new(), e.to_string()))?;
    let mut config = core.file_config.clone();
    config.providers = stored.iter().map(|s| s.effective()).collect();
    config.routes = routes.clone();
    config.model_map = map.clone();
    match crate::config::validate(&config, Path::new("live")) {
        Ok(()) => Ok(()),
        Err(ConfigError::Field { path, message, .. }) => Err((path, message)),
        Err(other) => Err((String::new(), other.to_string())),
    }
}

async fn apply(core: &AppState) -> Result<(), ApiError> {
    core.core.reload_blocking().await.map_err(store_error)
}

fn save_routes(core: &Core, routes: &BTreeMap<String, RouteConfig>) -> Result<(), ApiError> {
    let v = serde_json::to_value(routes).map_err(store_error)?;
    core.store.set_setting(UI_ROUTES, &v).map_err(store_error)
}

fn save_map(core: &Core, map: &BTreeMap<String, String>) -> Result<(), ApiError> {
    let v = serde_json::to_value(map).map_err(store_error)?;
    core.store
        .set_setting(UI_MODEL_MAP, &v)
        .map_err(store_error)
}

impl Shape for RouteDetail {
    const PARAM: &'static str = "targets";
    const EXPECTED: &'static str = r#"{"targets": ["provider", "provider/model" or a route, in order], "resumeOnBreak": false}"#;
}

/// A `modelMap` entry's body.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapEntry {
    target: String,
}

impl Shape for MapEntry {
    const PARAM: &'static str = "target";
    const EXPECTED: &'static str = r#"{"target": "auto", a route, a provider or "provider/model"}"#;
}

/// `PUT /admin/routes/{name}` with `{"targets": [...], "resumeOnBreak": false}`: creates or
/// replaces a route made in the UI. The targets are tried in the order given.
pub async fn put_route(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
    JsonBody(detail): JsonBody<RouteDetail>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    if core.file_config.routes.contains_key(&name) {
        return Err(conflict(
            "defined_in_file",
            crate::i18n::msg("The route `{name}` is defined in the config file, which wins at every start; change it there.", &[("name", &name.to_string())]),
        ));
    }
    if detail.targets.iter().all(|t| t.trim().is_empty()) {
        return Err(ApiError::field(
            "targets",
            "List at least one target: `auto`, a provider, `provider/model` or another route.",
        ));
    }
    let mut detail = detail;
    detail.targets = detail
        .targets
        .iter()
        .map(|t| t.trim().to_string())
        .collect();
    let mut ui = core.ui_routes();
    let created = !ui.contains_key(&name);
    ui.insert(
        name.clone(),
        // A plain list unless the route says more than its targets.
        if detail.resume_on_break
            || detail.order != crate::config::Order::Priority
            || detail.hedge.is_some()
        {
            RouteConfig::Detailed(detail.clone())
        } else {
            RouteConfig::Chain(detail.targets.clone())
        },
    );
    let live = core.routes_over(ui.clone());
    let prefix = format!("routes.{name}");
    check(core, &live, &core.live_model_map()).map_err(|(path, message)| {
        let param = match path.strip_prefix(&prefix) {
            Some("") => "name".to_string(),
            Some(rest) => format!("targets{rest}"),
            None => path,
        };
        ApiError::field(param, message)
    })?;
    save_routes(core, &ui)?;
    apply(&state).await?;
    tracing::info!(route = %name, targets = ?detail.targets, "route saved");
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(
            json!({"name": name, "targets": detail.targets, "resumeOnBreak": detail.resume_on_break,
                "order": detail.order, "hedge": detail.hedge, "owner": "ui"}),
        ),
    ))
}

/// `DELETE /admin/routes/{name}`: removes a route made in the UI (409 while a route or a
/// `modelMap` entry still leads to it).
pub async fn delete_route(
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Result<StatusCode, ApiError> {
    let core = &state.core;
    if core.file_config.routes.contains_key(&name) {
        return Err(conflict(
            "defined_in_file",
            crate::i18n::msg(
                "The route `{name}` is defined in the config file; remove it there.",
                &[("name", &name.to_string())],
            ),
        ));
    }
    let mut ui = core.ui_routes();
    if ui.remove(&name).is_none() {
        return Err(ApiError::missing(
            "route_not_found",
            "name",
            crate::i18n::msg(
                "No route `{name}` (it may have been deleted; reload).",
                &[("name", &name.to_string())],
            ),
        ));
    }
    let live = core.routes_over(ui.clone());
    check(core, &live, &core.live_model_map()).map_err(|(path, _)| {
        conflict(
            "route_in_use",
            crate::i18n::msg(
                "`{path}` still leads to the route `{name}`; point it elsewhere first.",
                &[("path", &path.to_string()), ("name", &name.to_string())],
            ),
        )
    })?;
    save_routes(core, &ui)?;
    apply(&state).await?;
    tracing::info!(route = %name, "route deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /admin/model-map/{pattern}` with `{"target": "auto"}`: client model names matching
/// the pattern (exact, or a glob with `*`) go to the target (`auto`, a route, a provider or
/// `provider/model`).
pub async fn put_map(
    State(state): State<AppState>,
    UrlPath(pattern): UrlPath<String>,
    JsonBody(e): JsonBody<MapEntry>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    let pattern = pattern.trim().to_string();
    if pattern.is_empty() || pattern.len() > 200 {
        return Err(ApiError::field(
            "pattern",
            "Give the model name a client sends (1-200 characters; `*` matches anything).",
        ));
    }
    if core.file_config.model_map.contains_key(&pattern) {
        return Err(conflict(
            "defined_in_file",
            crate::i18n::msg("`{pattern}` is mapped in the config file, which wins at every start; change it there.", &[("pattern", &pattern.to_string())]),
        ));
    }
    let target = e.target.trim().to_string();
    let mut ui = core.ui_model_map();
    let created = ui.insert(pattern.clone(), target.clone()).is_none();
    let live = core.map_over(ui.clone());
    check(core, &core.live_routes(), &live).map_err(|(path, message)| {
        let param = if path.starts_with("modelMap.") {
            "target".to_string()
        } else {
            path
        };
        ApiError::field(param, message)
    })?;
    save_map(core, &ui)?;
    apply(&state).await?;
    tracing::info!(pattern = %pattern, target = %target, "model name mapped");
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({"pattern": pattern, "route": target, "owner": "ui"})),
    ))
}

/// `DELETE /admin/model-map/{pattern}`.
pub async fn delete_map(
    State(state): State<AppState>,
    UrlPath(pattern): UrlPath<String>,
) -> Result<StatusCode, ApiError> {
    let core = &state.core;
    if core.file_config.model_map.contains_key(&pattern) {
        return Err(conflict(
            "defined_in_file",
            crate::i18n::msg(
                "`{pattern}` is mapped in the config file; remove it there.",
                &[("pattern", &pattern.to_string())],
            ),
        ));
    }
    let mut ui = core.ui_model_map();
    if ui.remove(&pattern).is_none() {
        return Err(ApiError::missing(
            "mapping_not_found",
            "pattern",
            crate::i18n::msg(
                "No mapping for `{pattern}` (it may have been deleted; reload).",
                &[("pattern", &pattern.to_string())],
            ),
        ));
    }
    save_map(core, &ui)?;
    apply(&state).await?;
    tracing::info!(pattern = %pattern, "model name mapping deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// A route or mapping made in the UI that names this provider (it would break without it).
pub(crate) fn user_of(core: &Core, provider: &str) -> Option<String> {
    let names = |t: &str| t == provider || t.split_once('/').is_some_and(|(h, _)| h == provider);
    core.ui_routes()
        .iter()
        .find(|(_, r)| r.targets().iter().any(|t| names(t)))
        .map(|(name, _)| crate::i18n::msg("The route `{name}`", &[("name", &name.to_string())]))
        .or_else(|| {
            core.ui_model_map()
                .iter()
                .find(|(_, t)| names(t))
                .map(|(p, _)| crate::i18n::msg("The mapping of `{p}`", &[("p", &p.to_string())]))
        })
}
