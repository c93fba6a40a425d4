//! Admin API (admin key in `Authorization: Bearer` or `x-admin-key`; never a cookie, never
//! permissive CORS): live routing state and clearing cooldowns by hand.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::state::AppState;
use super::views::{AdminState, KeyView, ProviderView};
use crate::gateway::Core;
use crate::limits::CooldownEntry;

pub(super) fn require_admin(core: &Core, headers: &HeaderMap) -> Result<(), ApiError> {
    let presented = headers
        .get("x-admin-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .or_else(|| crate::auth::presented_key(headers));
    if presented.is_some_and(|k| core.keys.is_admin(k)) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_admin_key",
            "The admin API needs the admin key (admin.key in the data directory) as `Authorization: Bearer <key>` or `x-admin-key`.",
        ))
    }
}

fn cooldown_json(c: &CooldownEntry, now: i64) -> Value {
    json!({
        "key": c.scope.key, "model": c.scope.model, "class": c.class, "reason": c.reason,
        "untilMs": c.until_ms, "remainingMs": (c.until_ms - now).max(0),
    })
}

/// `GET /admin/state`: every provider in routing order with keys (masked), models, cooldowns,
/// breaker, concurrency, quota scores and health counters.
pub async fn state(State(state): State<AppState>) -> Result<Json<AdminState>, ApiError> {
    let core = &state.core;
    let now = core.routing.clock.now_ms();
    let snap = core.routing.snapshot.load();
    let stored = core
        .store
        .load_providers()
        .map_err(|e| ApiError::internal("store_failed", e))?;
    // One snapshot for the summary and the views beside it: each provider has its row.
    let mut summary = core.summary_of(&snap, now);
    // Window names in the language the UI asked for (English for scripts).
    let lang = crate::i18n::asked();
    for row in summary.providers.iter_mut() {
        row.name_windows(lang);
    }
    let providers = snap
        .providers
        .iter()
        .zip(&summary.providers)
        .map(|(p, row)| provider_json(core, p, row, &stored, now))
        .collect();
    Ok(Json(AdminState {
        now_ms: summary.now_ms,
        providers,
        shared_state: super::state::shared_state(core).to_string(),
        paused: summary.paused,
        kinds: super::views::KindView::all(),
        summary,
    }))
}

/// `PUT /admin/pause` with `{"paused": bool}`: pauses routing (every request gets 503 until
/// resumed) or resumes it — the tray menu's Pause, for the UI and scripts.
pub async fn set_paused(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<PauseBody>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    core.set_paused(b.paused);
    Ok(Json(json!({"paused": core.is_paused()})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseBody {
    paused: bool,
}

impl Shape for PauseBody {
    const PARAM: &'static str = "paused";
    const EXPECTED: &'static str = r#"{"paused": true} or {"paused": false}"#;
}

/// One provider's live state and definition (no secrets: keys are masked, the definition only
/// names where keys come from).
pub(super) fn provider_json(
    core: &Core,
    p: &crate::providers::ProviderEntry,
    row: &crate::gateway::summary::ProviderSummary,
    stored: &[crate::store::StoredProvider],
    now: i64,
) -> ProviderView {
    let cooldowns = core.routing.cooldowns.active();
    let owner = if p.id() == crate::config::LOCAL_PROVIDER_ID {
        "detected"
    } else if stored
        .iter()
        .any(|s| s.config.id == p.id() && s.owner == crate::store::Owner::File)
    {
        "file"
    } else {
        "ui"
    };
    let id = p.id();
    let mine: Vec<&CooldownEntry> = cooldowns
        .iter()
        .filter(|c| c.scope.provider == id)
        .collect();
    let breaker = breaker_json(p, now);
    let keys = key_views(core, p, &mine, now);
    let models: Vec<Value> = p
        .models
        .iter()
        .map(|m| {
            json!({
                "id": m.id, "contextWindow": m.context_window, "tools": m.tools, "images": m.images,
                "cooldowns": mine.iter().filter(|c| c.scope.model.as_deref() == Some(&m.id))
                    .map(|c| cooldown_json(c, now)).collect::<Vec<_>>(),
                "health": core.stats.health(id, None, Some(&m.id)),
            })
        })
        .collect();
    ProviderView {
        id: id.to_string(),
        name: p.config.display_name().to_string(),
        kind: p.config.kind.as_str().to_string(),
        enabled: p.config.enabled,
        auto: p.config.auto,
        priority: p.config.priority,
        unavailable: p.unavailable(),
        status: row.status.clone(),
        in_flight: p
            .runtime
            .in_flight
            .load(std::sync::atomic::Ordering::Relaxed) as u64,
        max_concurrency: p.config.concurrency(),
        breaker,
        cooldowns: mine.iter().map(|c| cooldown_json(c, now)).collect(),
        keys,
        models,
        health: core.stats.health(id, None, None),
        speed: core.routing.speeds.best_of(id),
        discovery: json!(p.runtime.discovery.get()),
        cli: p
            .runtime
            .cli_status
            .load_full()
            .map_or(Value::Null, |s| json!(*s)),
        owner: owner.to_string(),
        usage: row.windows.clone(),
        config: json!(p.config),
    }
}

/// The provider's breaker and its models' breakers.
fn breaker_json(p: &crate::providers::ProviderEntry, now: i64) -> Value {
    let (open_until, consecutive) = p.breaker_state();
    let model_breakers: Vec<Value> = p
        .runtime
        .breakers
        .tripped()
        .into_iter()
        .filter_map(|(model, until, n)| {
            let state = if until > now { "open" } else { "half-open" };
            model.map(|m| json!({"model": m, "state": state, "openUntilMs": until, "consecutiveFailures": n}))
        })
        .collect();
    let breaker = match open_until {
        None => "closed",
        Some(u) if u > now => "open",
        Some(_) => "half-open",
    };
    json!({"state": breaker, "openUntilMs": open_until, "consecutiveFailures": consecutive, "models": model_breakers})
}

/// Each key (masked) with its quota, cooldown and health, then the keys whose variable is unset.
fn key_views(
    core: &Core,
    p: &crate::providers::ProviderEntry,
    mine: &[&CooldownEntry],
    now: i64,
) -> Vec<KeyView> {
    let id = p.id();
    p.keys
        .iter()
        .map(|k| {
            let cd = mine.iter().find(|c| c.scope.key.as_deref() == Some(&k.id));
            KeyView {
                id: k.id.clone(),
                masked: Some(k.secret.masked()),
                quota_score: p.runtime.quota.score(
                    &k.id,
                    now,
                    &p.config.limits,
                    p.quota_day(now).0,
                ),
                cooldown: cd.map(|c| cooldown_json(c, now)),
                disabled: cd.is_some_and(|c| c.class == crate::limits::ErrorClass::Auth),
                health: Some(core.stats.health(id, Some(&k.id), None)),
                missing: false,
                reason: None,
            }
        })
        .chain(p.missing_keys.iter().map(|env| KeyView {
            id: format!("env:{env}"),
            masked: None,
            quota_score: None,
            cooldown: None,
            disabled: false,
            health: None,
            missing: true,
            reason: Some(format!("environment variable {env} is not set")),
        }))
        .collect()
}

#[derive(Deserialize)]
pub struct ClearQuery {
    provider: Option<String>,
    key: Option<String>,
    model: Option<String>,
}

/// `DELETE /admin/cooldowns[?provider=ID[&key=KEY_ID][&model=M]]`: clears the matching cooldowns
/// (all of the provider's when no key or model is given, every provider's without `provider`)
/// and closes the breakers.
pub async fn clear_cooldowns(
    State(state): State<AppState>,
    super::json::ApiQuery(q): super::json::ApiQuery<ClearQuery>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let snap = core.routing.snapshot.load();
    let Some(provider) = q.provider else {
        if q.key.is_some() || q.model.is_some() {
            return Err(ApiError::invalid(
                "provider",
                "A key or model belongs to a provider: add provider=ID (or leave all out to clear every cooldown).",
            ));
        }
        let ids: Vec<String> = snap.providers.iter().map(|p| p.id().to_string()).collect();
        drop(snap);
        let cleared: usize = ids
            .iter()
            .map(|id| core.clear_cooldowns(id, None, None))
            .sum();
        return Ok(Json(json!({"cleared": cleared})));
    };
    let Some(p) = snap.provider(&provider) else {
        return Err(ApiError::missing(
            "provider_not_found",
            "provider",
            format!("No provider `{provider}`."),
        ));
    };
    let id = p.id().to_string();
    drop(snap);
    let cleared = core.clear_cooldowns(&id, q.key.as_deref(), q.model.as_deref());
    Ok(Json(json!({"cleared": cleared})))
}

#[derive(Deserialize)]
pub struct DiscoverQuery {
    provider: Option<String>,
}

/// `POST /admin/discover[?provider=ID]`: asks providers for their model lists now.
pub async fn discover(
    State(state): State<AppState>,
    super::json::ApiQuery(q): super::json::ApiQuery<DiscoverQuery>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if let Some(id) = &q.provider {
        if core.routing.snapshot.load().provider(id).is_none() {
            return Err(ApiError::missing(
                "provider_not_found",
                "provider",
                format!("No provider `{id}`."),
            ));
        }
    }
    let results = core.discover_models(q.provider.as_deref()).await;
    let map: serde_json::Map<String, Value> = results
        .into_iter()
        .map(|(id, d)| (id, serde_json::to_value(d).unwrap_or(Value::Null)))
        .collect();
    Ok(Json(Value::Object(map)))
}

/// A 404 naming `id` unless routing knows that provider.
fn known_provider(core: &crate::gateway::Core, id: &str) -> Result<(), ApiError> {
    if core.routing.snapshot.load().provider(id).is_none() {
        return Err(ApiError::missing(
            "provider_not_found",
            "provider",
            format!("No provider `{id}`."),
        ));
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Measured {
    provider: String,
    model: String,
    ttft_ms: u64,
}

impl Shape for Measured {
    const EXPECTED: &'static str = "{provider, model, ttftMs}";
}

/// `POST /admin/speeds`: a time to first token measured outside live traffic (`baton probe
/// --apply`), noted in the speed book as a live answer's would be.
pub async fn measured(
    State(state): State<AppState>,
    JsonBody(m): JsonBody<Measured>,
) -> Result<StatusCode, ApiError> {
    let core = &state.core;
    known_provider(core, &m.provider)?;
    if m.model.is_empty() || m.model.len() > 256 {
        return Err(ApiError::invalid("model", "model must be 1-256 characters"));
    }
    if m.ttft_ms > 600_000 {
        return Err(ApiError::invalid(
            "ttftMs",
            "ttftMs must be at most 600000 (ten minutes)",
        ));
    }
    core.routing
        .speeds
        .measured(&m.provider, &m.model, m.ttft_ms);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetCooldown {
    provider: String,
    key: Option<String>,
    model: Option<String>,
    until_ms: i64,
    class: crate::limits::Cause,
    reason: String,
}

impl Shape for SetCooldown {
    const EXPECTED: &'static str = "{provider, key?, model?, untilMs, class, reason}";
}

/// `POST /admin/cooldowns`: takes a scope out of rotation until `untilMs` (used by
/// `baton probe --apply`).
pub async fn set_cooldown(
    State(state): State<AppState>,
    JsonBody(c): JsonBody<SetCooldown>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let core = &state.core;
    known_provider(core, &c.provider)?;
    let now = core.routing.clock.now_ms();
    if c.until_ms <= now {
        return Err(ApiError::invalid(
            "untilMs",
            "untilMs must be in the future",
        ));
    }
    let until = c.until_ms.min(now + 8 * 86_400_000);
    let scope = crate::limits::Scope {
        provider: c.provider,
        key: c.key,
        model: c.model,
    };
    core.routing
        .cooldowns
        .start(scope, until, c.class, &c.reason);
    Ok((StatusCode::CREATED, Json(json!({"untilMs": until}))))
}
