//! The Connect screen's one-click set-up: `GET /admin/connect` (each client: connected or not,
//! the files it would write), `POST /admin/connect/{client}` and `POST
//! /admin/connect/{client}/undo`. Both take `{"dryRun": true}` for the preview (a diff with the
//! key masked, and its fingerprint); the write needs that fingerprint back, so nothing is
//! written that was not shown. Writes change files on the machine Baton runs on, so they are
//! taken only from a browser on that machine (a loopback peer).

use std::path::PathBuf;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::state::{AppState, Peer};
use crate::connect::{self, App, ConnectError, Mode, Plan, Target};

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConnectBody {
    /// `keys` or `login` [default: login when a passthrough provider serves the client].
    #[serde(default)]
    mode: Option<String>,
    /// Install Baton's status line (Claude Code).
    #[serde(default)]
    statusline: bool,
    #[serde(default)]
    dry_run: bool,
    /// The preview's fingerprint: required to write.
    #[serde(default)]
    fingerprint: Option<String>,
}

impl Shape for ConnectBody {
    const EXPECTED: &'static str = r#"{"dryRun": true} to preview, then {"fingerprint": "<from the preview>"} to write (optional "mode": "keys" or "login", "statusline": true)"#;
}

fn journal(state: &AppState) -> PathBuf {
    state.core.data_dir.join("connect")
}

fn app_of(id: &str) -> Result<App, ApiError> {
    App::parse(id).map_err(|e| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "unknown_client",
            e.to_string(),
        )
    })
}

fn api_error(e: ConnectError) -> ApiError {
    let (status, code) = match &e {
        ConnectError::UnknownApp(_) => (StatusCode::NOT_FOUND, "unknown_client"),
        ConnectError::NoLogin(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        ConnectError::Unreadable { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "unreadable_file"),
        ConnectError::Changed { .. } => (StatusCode::CONFLICT, "changed_since_preview"),
        ConnectError::NotConnected(_) => (StatusCode::CONFLICT, "not_connected"),
        ConnectError::NoHome
        | ConnectError::Read { .. }
        | ConnectError::Write { .. }
        | ConnectError::Journal { .. } => (StatusCode::INTERNAL_SERVER_ERROR, "connect_failed"),
    };
    ApiError::new(status, "invalid_request_error", code, e.to_string())
}

/// Each client: whether Baton has connected it, and where its file is.
pub async fn list(
    State(state): State<AppState>,
    peer: Option<Extension<Peer>>,
) -> Result<Json<Value>, ApiError> {
    let homes = state.core.client_homes.load_full();
    let snap = state.core.routing.snapshot.load();
    let mut clients = Vec::new();
    for app in App::ALL {
        let done = connect::connected(app, &journal(&state)).map_err(api_error)?;
        let files: Vec<PathBuf> = match homes.as_deref() {
            Some(h) => connect::files(app, h),
            None => Vec::new(),
        };
        clients.push(json!({
            "id": app.id(),
            "name": app.name(),
            "plan": app.plan(),
            "available": true,
            "files": files,
            "loginProviders": connect::login_providers(app, snap.providers.iter().map(|p| &p.config)),
            // Whether the client's own model names reach a provider (else its requests get 404
            // until they are mapped).
            "namesServed": connect::sample_model(app)
                .is_none_or(|m| snap.resolve_requested(m).is_ok_and(|(t, _)| !t.is_empty())),
            "connected": done.map(|m| json!({"mode": m.mode, "atMs": m.at_ms,
                "files": m.files.iter().map(|f| &f.path).collect::<Vec<_>>()})),
        }));
    }
    let statusline = statusline_command(&state);
    Ok(Json(json!({
        "clients": clients,
        "writable": peer.is_some_and(|Extension(Peer(ip))| ip.is_loopback()),
        "statusline": statusline.is_ok(),
        // The command for this setup (its binary, address and data directory), for the
        // by-hand snippet: the default `baton statusline` would ask another Baton.
        "statuslineCommand": statusline.ok(),
    })))
}

pub async fn connect(
    State(state): State<AppState>,
    Path(id): Path<String>,
    peer: Option<Extension<Peer>>,
    JsonBody(b): JsonBody<ConnectBody>,
) -> Result<Json<Value>, ApiError> {
    let app = app_of(&id)?;
    let target = target(&state, app, &b)?;
    let homes = state
        .core
        .client_homes
        .load_full()
        .ok_or_else(|| api_error(ConnectError::NoHome))?;
    let plan = connect::plan_connect(app, &homes, &target, &journal(&state)).map_err(api_error)?;
    finish(&state, plan, &b, peer).await
}

pub async fn undo(
    State(state): State<AppState>,
    Path(id): Path<String>,
    peer: Option<Extension<Peer>>,
    JsonBody(b): JsonBody<ConnectBody>,
) -> Result<Json<Value>, ApiError> {
    let app = app_of(&id)?;
    let plan = connect::plan_undo(app, &journal(&state)).map_err(api_error)?;
    finish(&state, plan, &b, peer).await
}

/// The preview, or the write of a plan whose fingerprint the caller has seen.
async fn finish(
    state: &AppState,
    plan: Plan,
    b: &ConnectBody,
    peer: Option<Extension<Peer>>,
) -> Result<Json<Value>, ApiError> {
    let key = state.core.keys.first_gateway_secret();
    let mut out = preview(&plan, key.as_deref());
    if b.dry_run || (!plan.changes() && !plan.undo) {
        return Ok(Json(out));
    }
    if !peer.is_some_and(|Extension(Peer(ip))| ip.is_loopback()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "not_this_machine",
            "Connecting a client writes its config files on the machine Baton runs on: do it from a browser on that machine (or run `baton connect` there).",
        ));
    }
    match b.fingerprint.as_deref() {
        None => {
            return Err(ApiError::new(
                StatusCode::PRECONDITION_REQUIRED,
                "invalid_request_error",
                "confirmation_required",
                "Preview first: send {\"dryRun\": true}, show the change, then send its \"fingerprint\" to write it.",
            ))
        }
        Some(f) if f != plan.fingerprint() => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "invalid_request_error",
                "changed_since_preview",
                "The files changed since the preview: preview again before writing.",
            ))
        }
        Some(_) => {}
    }
    let dir = journal(state);
    let tightened = tokio::task::spawn_blocking(move || connect::apply(&plan, &dir))
        .await
        .map_err(|e| ApiError::internal("connect", e))?
        .map_err(api_error)?;
    out["written"] = json!(true);
    // Files made private because they now hold a key (and the mode each had).
    out["tightened"] = json!(tightened
        .iter()
        .map(|(p, mode)| json!({"path": p, "mode": format!("{mode:o}")}))
        .collect::<Vec<_>>());
    Ok(Json(out))
}

fn preview(plan: &Plan, key: Option<&str>) -> Value {
    let secrets: Vec<&str> = key.into_iter().collect();
    let files: Vec<Value> = plan
        .files
        .iter()
        .map(|f| {
            let action = match (&f.before, &f.after) {
                _ if !f.changes() => "unchanged",
                (None, Some(_)) => "create",
                (Some(_), None) => "remove",
                _ if plan.undo => "restore",
                _ => "change",
            };
            json!({"path": f.path, "action": action, "diff": f.diff(&secrets)})
        })
        .collect();
    json!({
        "client": plan.app.id(),
        "name": plan.app.name(),
        "undo": plan.undo,
        "changes": plan.changes(),
        "files": files,
        "notes": plan.notes,
        "fingerprint": plan.fingerprint(),
        "undoCommand": format!("baton connect {} --undo", plan.app.id()),
        "written": false,
    })
}

fn target(state: &AppState, app: App, b: &ConnectBody) -> Result<Target, ApiError> {
    let core = &state.core;
    let key = core.keys.first_gateway_secret().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "no_gateway_key",
            "Baton has no gateway key to give the client.",
        )
    })?;
    let snap = core.routing.snapshot.load();
    let login = connect::login_providers(app, snap.providers.iter().map(|p| &p.config));
    let asked = match b.mode.as_deref() {
        None => None,
        Some("login") => Some(Mode::Login),
        Some("keys") => Some(Mode::Keys),
        Some(other) => {
            return Err(ApiError::field(
                "mode",
                format!("`{other}` is not a mode: use \"keys\" or \"login\""),
            ))
        }
    };
    let mode = connect::choose_mode(app, asked, &login)
        .map_err(|e| ApiError::field("mode", format!("{e}: use \"keys\"")))?;
    let statusline = match (b.statusline, app) {
        (false, _) => None,
        (true, App::ClaudeCode) => {
            Some(statusline_command(state).map_err(|e| ApiError::field("statusline", e))?)
        }
        (true, _) => {
            return Err(ApiError::field(
                "statusline",
                "the status line is Claude Code's",
            ))
        }
    };
    Ok(Target {
        origin: origin(state),
        key,
        mode,
        statusline,
    })
}

/// The address a client on this machine reaches: loopback when Baton listens everywhere.
fn origin(state: &AppState) -> String {
    let mut addr = state.addr;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}")
}

/// `'/path/to/baton' statusline [--url …] [--data-dir …]`: the command-line binary next to
/// this one, else on PATH.
fn statusline_command(state: &AppState) -> Result<String, String> {
    let exe = std::env::current_exe().ok();
    let name = if cfg!(windows) { "baton.exe" } else { "baton" };
    let beside = exe.as_ref().and_then(|e| e.parent()).map(|d| d.join(name));
    let found = match (&exe, beside) {
        (Some(e), _) if e.file_name().is_some_and(|n| n == name) => e.clone(),
        (_, Some(b)) if b.is_file() => b,
        _ => crate::providers::presence::which(name).ok_or("the `baton` command is not next to this app nor on PATH, so Claude Code could not run it")?,
    };
    let data_dir =
        (state.core.data_dir != crate::default_data_dir()).then_some(state.core.data_dir.as_path());
    connect::statusline_command(&found, &origin(state), data_dir)
}
