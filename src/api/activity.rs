//! What happened: the request log (paged, filtered) and a server-sent event stream of gateway
//! events for live views; plus what the first-run view shows.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::Json;
use futures_util::Stream;
use serde_json::{json, Value};

use super::error::ApiError;
use super::state::AppState;
use crate::store::LogFilter;

/// `GET /admin/log?limit=&offset=&provider=&outcome=ok|error&sinceMs=&untilMs=`: request-log
/// rows, newest first, each with its attempt chain.
pub async fn log(
    State(state): State<AppState>,
    super::json::ApiQuery(mut f): super::json::ApiQuery<LogFilter>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if f.limit == 0 || f.limit > 500 {
        return Err(ApiError::invalid("limit", "limit must be 1-500"));
    }
    if let Some(o) = &f.outcome {
        if o != "ok" && o != "error" {
            return Err(ApiError::invalid(
                "outcome",
                "outcome must be `ok` or `error`",
            ));
        }
    }
    f.provider = f.provider.filter(|p| !p.is_empty());
    // Rows written a moment ago are still in the writer's batch.
    core.store.writer().flush().await;
    let rows = core
        .store
        .query_requests(&f)
        .map_err(|e| ApiError::internal("store_failed", e))?;
    // Each row says whether its request was captured (the Activity row links to it): the
    // captures folder read once for the page, not once a row.
    let mut rows = serde_json::to_value(rows).map_err(|e| ApiError::internal("log", e))?;
    let captured = core.captures.ids();
    for row in rows.as_array_mut().into_iter().flatten() {
        let captured = row["id"].as_str().is_some_and(|id| captured.contains(id));
        if let (true, Some(o)) = (captured, row.as_object_mut()) {
            o.insert("captured".into(), Value::Bool(true));
        }
    }
    Ok(Json(
        json!({"rows": rows, "limit": f.limit, "offset": f.offset}),
    ))
}

/// `GET /admin/events`: gateway events (request, failover, cooldown…) as server-sent events,
/// `event:` the type and `data:` the JSON. A slow reader that falls behind is told how many
/// it missed (`event: lagged`).
pub async fn events(
    State(state): State<AppState>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let core = &state.core;
    let rx = core.routing.events.subscribe();
    let stopping = core.stopping.clone();
    let stream = futures_util::stream::unfold((rx, stopping), |(mut rx, stopping)| async move {
        use tokio::sync::broadcast::error::RecvError;
        let next = tokio::select! {
            _ = stopping.cancelled() => return None,
            r = rx.recv() => r,
        };
        let rx = (rx, stopping);
        match next {
            Ok(ev) => {
                let v = serde_json::to_value(&ev).unwrap_or_default();
                let kind = v
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("event")
                    .to_string();
                let sse = SseEvent::default().event(kind).data(v.to_string());
                Some((Ok(sse), rx))
            }
            Err(RecvError::Lagged(n)) => {
                let sse = SseEvent::default()
                    .event("lagged")
                    .data(json!({"missed": n}).to_string());
                Some((Ok(sse), rx))
            }
            Err(RecvError::Closed) => None,
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// `GET /admin/setup`: what the first-run view offers — subscription CLIs on PATH and whether
/// they are logged in, provider key variables set in Baton's environment, a local Ollama —
/// and what clients need (base URL; the gateway key itself stays in its file).
pub async fn setup(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let catalog = crate::catalog::load().map_err(|e| ApiError::internal("catalog", e))?;
    let found = tokio::task::spawn_blocking(move || {
        let env = |name: &str| std::env::var(name).ok();
        let rows =
            crate::providers::presence::check(&catalog, &env, &crate::providers::presence::which);
        (catalog, rows)
    })
    .await
    .map_err(|e| ApiError::internal("setup", e))?;
    let (catalog, rows) = found;
    let configured: Vec<String> = core
        .routing
        .snapshot
        .load()
        .providers
        .iter()
        .map(|p| p.id().to_string())
        .collect();
    let suggestions: Vec<Value> = rows
        .iter()
        .filter(|r| {
            !matches!(
                r.status.as_str(),
                "missing" | "no-key-needed" | "client-login"
            )
        })
        .filter_map(|r| {
            let entry = catalog.providers.iter().find(|p| p.id == r.id)?;
            Some(json!({
                "id": r.id, "name": r.name, "status": r.status, "found": r.found, "hint": r.hint,
                "configured": configured.contains(&r.id),
                "provider": suggestion(entry),
            }))
        })
        .collect();
    // Every catalog entry as a ready form preset.
    let presets: Vec<Value> = catalog
        .providers
        .iter()
        .map(|e| {
            // Whether the preset's key variable is set here: a pasted key replaces an unset one.
            let key_found = e
                .key_env
                .as_deref()
                .is_some_and(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()));
            json!({"id": e.id, "name": e.name, "kind": e.kind, "signup": e.signup,
            "freeTier": e.free_tier, "provider": suggestion(e), "keyFound": key_found})
        })
        .collect();
    let ollama = ollama_models(core).await;
    let addr = state.addr;
    Ok(Json(json!({
        "suggestions": suggestions,
        "presets": presets,
        "ollama": ollama.map(|models| json!({"baseUrl": "http://127.0.0.1:11434/v1", "models": models})),
        "baseUrl": format!("http://{addr}/v1"),
        "anthropicBaseUrl": format!("http://{addr}"),
        "gatewayKeyFile": core.data_dir.join(crate::auth::GATEWAY_KEY_FILE),
        // How a set-up snippet gets the gateway key without the UI ever holding it: the file
        // Baton generated, or the variable the config file names.
        "gatewayKey": match core.file_config.gateway_keys.first() {
            Some(k) => json!({"env": k.env}),
            None => json!({"file": core.data_dir.join(crate::auth::GATEWAY_KEY_FILE)}),
        },
    })))
}

/// A ready provider definition for a catalog entry.
fn suggestion(entry: &crate::catalog::CatalogEntry) -> Value {
    let mut p = json!({"id": entry.id, "name": entry.name, "kind": entry.kind,
        "models": entry.models.iter().take(3).collect::<Vec<_>>()});
    if let Some(url) = &entry.base_url {
        p["baseUrl"] = json!(url);
    }
    if let Some(var) = &entry.key_env {
        p["keys"] = json!([{"env": var}]);
    }
    if let Some(c) = &entry.credentials {
        p["credentials"] = json!(c);
    }
    if let Some(ids) = &entry.tool_call_ids {
        p["capabilities"] = json!({"toolCallIds": ids});
    }
    p
}

async fn ollama_models(core: &crate::gateway::Core) -> Option<Vec<String>> {
    let client = core.routing.http.get(1_000).ok()?;
    let r = client
        .get("http://127.0.0.1:11434/v1/models")
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&r.bytes().await.ok()?).ok()?;
    Some(
        v.get("data")?
            .as_array()?
            .iter()
            .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// `GET /admin/stats`: per provider, the last hour and the last day from the request log.
pub async fn stats(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    core.store.writer().flush().await;
    let now = core.routing.clock.now_ms();
    let store = core.store.clone();
    let (hour, day) = tokio::task::spawn_blocking(move || {
        Ok::<_, crate::store::StoreError>((
            store.window_stats(now - 3_600_000)?,
            store.window_stats(now - 86_400_000)?,
        ))
    })
    .await
    .map_err(|e| ApiError::internal("stats", e))?
    .map_err(|e| ApiError::internal("store_failed", e))?;
    Ok(Json(json!({"hour": hour, "day": day})))
}
