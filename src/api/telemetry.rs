//! `/admin/telemetry`: OpenTelemetry traces (Settings → Diagnostics): the collector's address,
//! its headers (a typed value goes to the OS credential store and is never echoed), the share
//! of requests traced and whether spans carry content.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::state::AppState;
use crate::config::telemetry::TelemetrySettings;
use crate::gateway::diagnostics::{export_client, TELEMETRY_SETTING};
use crate::gateway::Core;

/// One export header: its value typed (stored, never shown again) or an environment
/// variable's name; neither keeps the one saved.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    name: String,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    env: Option<String>,
}

/// `PUT /admin/telemetry`'s body.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Body {
    enabled: bool,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    sample_rate: Option<f64>,
    #[serde(default)]
    capture_content: Option<bool>,
    #[serde(default)]
    service_name: Option<String>,
    /// Every header to send (absent: the saved ones are kept).
    #[serde(default)]
    headers: Option<Vec<Header>>,
}

impl Shape for Body {
    const EXPECTED: &'static str = r#"{"enabled": true, "endpoint": "http://127.0.0.1:4318/v1/traces", "sampleRate": 1.0, "captureContent": false, "serviceName": "baton", "headers": [{"name": "x-honeycomb-team", "value": "…"} or {"name": "…", "env": "VARIABLE"}]}"#;
}

fn view(core: &Core) -> Value {
    let s = core.telemetry_settings();
    let headers: Vec<Value> = s
        .headers
        .iter()
        .map(|(name, source)| {
            let stored = source.starts_with(crate::secrets::LOOKUP_PREFIX);
            json!({
                "name": name,
                // A typed value is never shown: only that there is one.
                "env": if stored { "" } else { source.as_str() },
                "stored": stored,
                "set": core.secret(source).is_some_and(|v| !v.is_empty()),
            })
        })
        .collect();
    json!({
        "enabled": s.enabled,
        "endpoint": s.endpoint,
        "sampleRate": s.sample_rate,
        "captureContent": s.capture_content,
        "serviceName": s.service_name,
        "headers": headers,
        "exporting": core.routing.telemetry.enabled(),
        "fromFile": core.file_config.telemetry.is_some(),
    })
}

/// `GET /admin/telemetry`.
pub async fn get(State(state): State<AppState>) -> Json<Value> {
    Json(view(&state.core))
}

/// `PUT /admin/telemetry`: turn tracing on or off and say where spans go. Saved even when the
/// collector does not answer (it may start later), with a warning saying so.
pub async fn put(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<Body>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if core.file_config.telemetry.is_some() {
        return Err(ApiError::set_in_config_file(crate::i18n::msg(
            "Tracing is set in the config file (`telemetry`), which wins at every start: change it there.",
            &[],
        )));
    }
    let old = core.stored_telemetry();
    let mut s = TelemetrySettings {
        enabled: b.enabled,
        endpoint: b
            .endpoint
            .map(|e| e.trim().to_string())
            .unwrap_or(old.endpoint.clone()),
        sample_rate: b.sample_rate.unwrap_or(old.sample_rate),
        capture_content: b.capture_content.unwrap_or(old.capture_content),
        service_name: b
            .service_name
            .map(|n| n.trim().to_string())
            .unwrap_or(old.service_name.clone()),
        headers: old.headers.clone(),
    };
    let mut typed = Vec::new();
    if let Some(list) = b.headers {
        s.headers = headers(list, &old.headers, &mut typed)?;
    }
    if let Some((field, p)) = s.problem_in() {
        return Err(ApiError::field(field, p));
    }
    // Checked before any value is stored: a refused change stores nothing.
    for (name, value) in typed {
        let id = core
            .secrets
            .put(&value)
            .map_err(|e| ApiError::internal("secrets", e))?;
        s.headers
            .insert(name, format!("{}{id}", crate::secrets::LOOKUP_PREFIX));
    }
    let value = serde_json::to_value(&s).map_err(|e| ApiError::internal("settings", e))?;
    core.store
        .set_setting(TELEMETRY_SETTING, &value)
        .map_err(|e| ApiError::internal("settings", e))?;
    // Typed values replaced or removed are gone from the credential store too.
    for source in old.headers.values() {
        if let Some(id) = source.strip_prefix(crate::secrets::LOOKUP_PREFIX) {
            if !s.headers.values().any(|v| v == source) {
                let _ = core.secrets.delete(&[id.to_string()]);
            }
        }
    }
    // The header values are secrets the redactor must know.
    core.reload_blocking()
        .await
        .map_err(|e| ApiError::internal("reload", e))?;
    let problem = match core.apply_telemetry() {
        Err(e) => Some(e),
        Ok(()) if s.enabled => reachable(core, &s).await.err(),
        Ok(()) => None,
    };
    let mut out = view(core);
    if let (Some(w), Some(o)) = (problem, out.as_object_mut()) {
        o.insert("warning".into(), Value::String(w));
    }
    Ok(Json(out))
}

/// The headers as sent: each a variable's name, a typed value (kept aside to be stored), or
/// the one saved under that name.
fn headers(
    list: Vec<Header>,
    old: &BTreeMap<String, String>,
    typed: &mut Vec<(String, String)>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let mut out = BTreeMap::new();
    for h in list {
        let name = h.name.trim().to_ascii_lowercase();
        if name.is_empty() {
            continue;
        }
        let value = h
            .value
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        let env = h
            .env
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        let source =
            match (value, env) {
                (Some(v), _) => {
                    typed.push((name.clone(), v));
                    format!("{}pending", crate::secrets::LOOKUP_PREFIX)
                }
                // Checked with the rest (`TelemetrySettings::problem_in`).
                (None, Some(env)) => env,
                (None, None) => match old.get(&name) {
                    Some(saved) => saved.clone(),
                    None => return Err(ApiError::field(
                        "headers",
                        crate::i18n::msg(
                            "header {name} needs a value or the environment variable holding it",
                            &[("name", &name)],
                        ),
                    )),
                },
            };
        out.insert(name, source);
    }
    Ok(out)
}

/// Whether the collector takes an export: an empty one (a valid OTLP request of no spans),
/// with the headers, as spans will be sent.
async fn reachable(core: &Core, s: &TelemetrySettings) -> Result<(), String> {
    let url = s.url()?;
    let client = export_client().map_err(|e| e.to_string())?;
    let mut req = client
        .post(url.clone())
        .header("content-type", "application/x-protobuf")
        .timeout(std::time::Duration::from_secs(3));
    for (name, value) in core.telemetry_headers(s) {
        req = req.header(name, value);
    }
    let said = |what: String| {
        crate::i18n::msg(
            "Saved, but the collector at {url} did not take a test export: {what}",
            &[("url", url.as_str()), ("what", &what)],
        )
    };
    match req.send().await {
        Ok(r) if r.status().is_success() => Ok(()),
        Ok(r) => Err(said(format!("HTTP {}", r.status().as_u16()))),
        Err(e) => Err(said(crate::providers::outbound::describe(&e))),
    }
}
