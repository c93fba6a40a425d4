//! A provider's Test (`POST /admin/providers/{id}/test`, `POST /admin/test` for the form's
//! unsaved one): one tiny real request; a subscription CLI runs only once the user agreed; a
//! provider on the client's own login is checked as far as Baton can without that login.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::manage::{
    body_json, check_key_refs, field_error, not_found, parse_provider_value, validate, Bounds,
};
use super::state::AppState;
use crate::config::{ProviderConfig, SecretRef};
use crate::gateway::Core;

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
    let cannot = crate::i18n::msg(
        "Baton cannot test your login: it never holds it. Send one request from your tool (Claude Code, Codex) to check that.",
        &[],
    );
    let url = format!("{}/models", entry.config.base_url.trim_end_matches('/'));
    let started = std::time::Instant::now();
    let client = match core.routing.http.for_provider(entry) {
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
        "note": crate::i18n::msg(
            "The endpoint answers (HTTP {status} without a login, in {ms} ms). {cannot}",
            &[("status", &r.status().as_u16().to_string()), ("ms", &ms.to_string()), ("cannot", &cannot)],
        )}),
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
        format!(
            "{} {}",
            crate::i18n::msg(
                "Testing runs `{command}`, its login check and one tiny prompt on this machine.",
                &[("command", &format!("{path} --version"))],
            ),
            crate::i18n::msg(
                "Send the same body with \"confirmRun\": true once you agree.",
                &[]
            )
        ),
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
    check_key_refs(&Bounds::of(core), &p.config, saved.as_ref())?;
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
    let entry = crate::providers::resolve::resolve(p.config.clone(), runtime.clone(), &env);
    if p.config.kind.is_cli() {
        let config = p.config.clone();
        let vars = entry.cli_env.clone();
        let now = core.routing.clock.now_ms();
        let st = tokio::task::spawn_blocking(move || {
            crate::providers::cli::check_status(&config, &vars, now)
        })
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CliCheck {
    kind: crate::config::ProviderKind,
    #[serde(default)]
    executable: Option<String>,
    /// The user agreed to run it (`--version` and the login check); without, it is only looked
    /// for.
    #[serde(default)]
    run: bool,
}

impl Shape for CliCheck {
    const PARAM: &'static str = "kind";
    const EXPECTED: &'static str = r#"{"kind": "claude-cli" | "codex-cli" | "gemini-cli", "executable": optional path, "run": optional true}"#;
}

/// `POST /admin/cli-check` with `{"kind": "claude-cli", "executable": "…"}` (executable
/// optional): what the Add form shows before anything is saved — the executable found and,
/// once the user agrees to run it (`"run": true`), its version, whether it is logged in, and
/// what to do if not. Nothing is stored or sent, and nothing runs without `run`.
pub async fn cli_check(
    State(state): State<AppState>,
    JsonBody(c): JsonBody<CliCheck>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if !c.kind.is_cli() {
        return Err(ApiError::field(
            "kind",
            format!("`{}` is not a subscription CLI kind", c.kind.as_str()),
        ));
    }
    let executable = c
        .executable
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty());
    if executable.as_ref().is_some_and(|e| e.len() > 4096) {
        return Err(ApiError::field(
            "executable",
            "longer than any path (4096 bytes)",
        ));
    }
    let config: crate::config::ProviderConfig = serde_json::from_value(json!({
        "id": "cli-check", "kind": c.kind.as_str(), "models": ["default"], "executable": executable,
    }))
    .map_err(|e| ApiError::internal("cli_check", e))?;
    // The same rules as a saved provider (only the CLI itself may run) before anything runs.
    validate(&config)?;
    let now = core.routing.clock.now_ms();
    if !c.run {
        let st = crate::providers::cli::locate(&config, now);
        let mut v = json!(st);
        v["ran"] = json!(false);
        return Ok(Json(v));
    }
    let (vars, _) = crate::providers::resolve::resolve_cli_env(&config, &|name| core.secret(name));
    let st = tokio::task::spawn_blocking(move || {
        crate::providers::cli::check_status(&config, &vars, now)
    })
    .await
    .map_err(|e| ApiError::internal("cli_check", e))?;
    let mut v = json!(st);
    v["ran"] = json!(true);
    Ok(Json(v))
}
