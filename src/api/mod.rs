//! The HTTP surface: the inbound APIs (`dialect/`), models, health, the admin API and UI, and
//! the guards in front of them (DNS-rebinding Host check, gateway-key auth).

// ApiError is built once per failed request, never on the hot path; boxing it buys nothing.
#![allow(clippy::result_large_err)]

pub(crate) mod activity;
pub(crate) mod admin;
mod admission;
pub(crate) mod admit;
pub(crate) mod budget;
mod captures;
pub(crate) mod clients;
mod connect;
pub(crate) mod count;
pub mod dialect;
pub(crate) mod error;
mod failure;
pub(crate) mod json;
pub mod key_refs;
pub(crate) mod manage;
pub(crate) mod pipeline;
mod provider_test;
mod render;
mod reply;
pub(crate) mod routing;
pub mod settings;
mod state;
mod statusline;
mod telemetry;
mod transfer;
pub(crate) mod ui;
mod update;
pub mod views;
mod web_search;
pub(crate) mod websocket;

pub(crate) use state::shared_state;
use state::strip_port;
pub use state::{authenticate, AppState, Peer};

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::json;

use crate::config::validate::is_loopback_host;
use crate::gateway::Core;
use error::ApiError;

/// The complete router. Long because it is the route table: one line per endpoint, read as a
/// list.
pub fn app(core: Arc<Core>, addr: SocketAddr) -> Router {
    let mut allowed: Vec<String> = core
        .server
        .allowed_hosts
        .iter()
        .map(|h| h.to_ascii_lowercase())
        .collect();
    allowed.push(core.server.host.to_ascii_lowercase());
    allowed.push(addr.ip().to_string());
    let state = AppState {
        inbound: Arc::new(budget::Inbound::new(&core.server)),
        core,
        addr,
        allowed_hosts: Arc::new(allowed),
    };
    // Every admin route (and /metrics) behind one guard: the admin key is checked before the
    // body is read or any handler runs.
    let admin = Router::new()
        .route("/admin/state", get(admin::state))
        .route("/admin/statusline", get(statusline::statusline))
        .route("/admin/providers", get(admin::state).post(manage::create))
        .route(
            "/admin/providers/{id}",
            put(manage::update)
                .patch(manage::patch)
                .delete(manage::delete),
        )
        .route(
            "/admin/providers/{id}/test",
            post(provider_test::test_saved),
        )
        .route("/admin/test", post(provider_test::test_unsaved))
        .route("/admin/order", put(manage::order))
        .route("/admin/export", get(transfer::export))
        .route("/admin/import", post(transfer::import))
        .route("/admin/log", get(activity::log))
        .route("/admin/events", get(activity::events))
        .route("/admin/setup", get(activity::setup))
        .route("/admin/connect", get(connect::list))
        .route("/admin/connect/{client}", post(connect::connect))
        .route("/admin/connect/{client}/undo", post(connect::undo))
        .route("/admin/stats", get(activity::stats))
        .route("/admin/routes", get(routing::routes))
        .route(
            "/admin/routes/{name}",
            put(routing::put_route).delete(routing::delete_route),
        )
        .route(
            "/admin/model-map/{pattern}",
            put(routing::put_map).delete(routing::delete_map),
        )
        .route(
            "/admin/keys",
            get(clients::list_keys).post(clients::create_key),
        )
        .route(
            "/admin/keys/{id}",
            axum::routing::delete(clients::revoke_key).patch(clients::update_key),
        )
        .route("/admin/usage", get(clients::usage))
        .route("/metrics", get(clients::metrics))
        .route("/admin/settings", get(settings::get).put(settings::put))
        .route(
            "/admin/desktop",
            get(settings::desktop).put(settings::set_desktop),
        )
        .route("/admin/desktop/restart", post(settings::restart))
        .route("/admin/update", get(update::get).put(update::put))
        .route("/admin/update/check", post(update::check))
        .route("/admin/update/install", post(update::install))
        .route(
            "/admin/web-search",
            get(web_search::get).put(web_search::put),
        )
        .route("/admin/web-search/test", post(web_search::test))
        .route("/admin/telemetry", get(telemetry::get).put(telemetry::put))
        .route("/admin/captures", get(captures::list))
        .route(
            "/admin/captures/rules",
            post(captures::arm).delete(captures::disarm),
        )
        .route(
            "/admin/captures/{id}",
            get(captures::get).delete(captures::delete),
        )
        .route("/admin/discover", post(admin::discover))
        .route("/admin/cli-check", post(provider_test::cli_check))
        .route("/admin/pause", put(admin::set_paused))
        .route(
            "/admin/cooldowns",
            post(admin::set_cooldown).delete(admin::clear_cooldowns),
        )
        .route("/admin/speeds", post(admin::measured))
        .route_layer(middleware::from_fn_with_state(state.clone(), admin_guard));
    Router::new()
        .merge(dialect::routes())
        .route("/health", get(health))
        .route("/ui", get(ui::redirect))
        .route("/ui/", get(ui::index))
        .route("/ui/{file}", get(ui::asset))
        .route("/ui/locales/{file}", get(ui::locale))
        .route("/", get(root).head(root))
        .merge(admin)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), contract))
        .layer(middleware::from_fn_with_state(state.clone(), host_guard))
        .with_state(state)
}

/// The admin API's one guard: the admin key as `x-admin-key` or `Authorization: Bearer`.
async fn admin_guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match admin::require_admin(&state.core, req.headers()) {
        Ok(()) => {
            // The admin API answers in the language the UI reads (English without one).
            let lang = req
                .headers()
                .get(axum::http::header::ACCEPT_LANGUAGE)
                .and_then(|v| v.to_str().ok())
                .and_then(crate::i18n::from_accept_language)
                .unwrap_or(crate::i18n::Lang::En);
            crate::i18n::answering(lang, next.run(req)).await
        }
        Err(e) => e.into_response(),
    }
}

/// Rejects requests whose `Host` is not this machine or a configured name, so that a web page
/// on another origin cannot reach the gateway through DNS rebinding.
async fn host_guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()));
    let Some(host) = host else {
        return ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "missing_host",
            "The request has no Host header.",
        )
        .into_response();
    };
    let name = strip_port(&host).to_ascii_lowercase();
    if is_loopback_host(&name) || state.allowed_hosts.contains(&name) {
        return next.run(req).await;
    }
    tracing::warn!(host = %name, "request refused: Host header not allowed");
    ApiError::new(
        StatusCode::FORBIDDEN,
        "permission_error",
        "host_not_allowed",
        format!("Host `{name}` is not allowed. Use 127.0.0.1 or localhost, or add the name to server.allowedHosts."),
    )
    .into_response()
}

async fn health(State(state): State<AppState>) -> axum::response::Response {
    let core = &state.core;
    let snap = core.routing.snapshot.load();
    let enabled: Vec<_> = snap.enabled().collect();
    let cooldowns = core.routing.cooldowns.active();
    let now = core.routing.clock.now_ms();
    use crate::providers::state::{state_of, State};
    let states: Vec<State> = enabled
        .iter()
        .map(|p| state_of(p, &cooldowns, now).state)
        .collect();
    let count = |f: &dyn Fn(State) -> bool| states.iter().filter(|s| f(**s)).count();
    let ready = count(&|s| s == State::Ready);
    let cooling_n = count(&|s| matches!(s, State::Cooling | State::BreakerOpen));
    let unavailable = count(&|s| matches!(s, State::Unavailable | State::LoggedOut));
    let summary = if snap.providers.is_empty() {
        "no providers configured".to_string()
    } else {
        format!(
            "{} provider{} enabled: {ready} ready, {cooling_n} cooling, {unavailable} unavailable",
            enabled.len(),
            if enabled.len() == 1 { "" } else { "s" }
        )
    };
    // Paused routing answers every request with 503: a health check must not say ok.
    let (code, status, summary) = if core.is_paused() {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "paused",
            format!("routing is paused (requests get 503 until resumed); {summary}"),
        )
    } else {
        (axum::http::StatusCode::OK, "ok", summary)
    };
    let body = Json(json!({
        "status": status,
        "version": crate::version(),
        "summary": summary,
        "sharedState": shared_state(core),
    }));
    axum::response::IntoResponse::into_response((code, body))
}

/// `GET /`: a browser goes to the web UI; anything else learns where things are.
async fn root(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let browser = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    if browser {
        return axum::response::Redirect::to("/ui/").into_response();
    }
    Json(json!({
        "name": "Baton",
        "version": crate::version(),
        "openai_base_url": "/v1",
        "anthropic_base_url": "/",
        "ui": "/ui/",
        "health": "/health",
        // Where the UI's unlock page sends the user (a path, not a secret).
        "adminKeyFile": state.core.data_dir.join(crate::auth::ADMIN_KEY_FILE),
        // The language chosen in Settings, so the unlock page speaks it before the key.
        "language": state.core.language_choice(),
    }))
    .into_response()
}

/// Longest request URI answered normally (414 beyond).
pub(crate) const MAX_URI_BYTES: usize = 16 * 1024;
/// Largest header block answered normally (431 beyond).
pub(crate) const MAX_HEADER_BYTES: usize = 64 * 1024;

/// Which error shape a path answers in: the admin API's (OpenAI's, behind the admin key) or
/// its inbound API's.
#[derive(Clone, Copy)]
enum Shape {
    Admin,
    Api(fn(ApiError) -> Response),
}

impl Shape {
    fn of(path: &str) -> Self {
        if path == "/metrics" || path == "/admin" || path.starts_with("/admin/") {
            Shape::Admin
        } else {
            Shape::Api(dialect::shape_of(path))
        }
    }

    fn render(self, e: ApiError) -> Response {
        match self {
            Shape::Admin => e.into_response(),
            Shape::Api(render) => render(e),
        }
    }
}

/// One error contract for every route: the admin key is checked before anything else on the
/// admin API answers (a malformed query must not be the first thing a stranger learns), and a
/// rejection axum produces itself (a query or path that does not parse, a body over a
/// handler's limit, a wrong content type) is rewritten from `text/plain` into the route's API
/// error shape.
async fn contract(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let dialect = Shape::of(path);
    if let Err(e) = protocol_limits(&req) {
        return dialect.render(e);
    }
    if matches!(dialect, Shape::Admin) {
        if let Err(e) = admin::require_admin(&state.core, req.headers()) {
            return e.into_response();
        }
    }
    // An inbound API's concurrency slot is taken by its admission (`admit`), whatever the
    // transport.
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    rewrite_rejection(resp, dialect).await
}

/// The URI and header size limits, answered in the API's shape (hyper's own, further out, can
/// only close the connection with a bare status).
fn protocol_limits(req: &Request) -> Result<(), ApiError> {
    // Origin-form, as clients send it: path and query (no allocation on every request).
    let uri_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri_len > MAX_URI_BYTES {
        return Err(ApiError::new(
            StatusCode::URI_TOO_LONG,
            "invalid_request_error",
            "uri_too_long",
            format!("The request URI is {uri_len} bytes; at most {MAX_URI_BYTES} are accepted. Send parameters in the body."),
        ));
    }
    let header_bytes: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "invalid_request_error",
            "headers_too_large",
            format!("The request headers are {header_bytes} bytes; at most {MAX_HEADER_BYTES} are accepted."),
        ));
    }
    Ok(())
}

/// A plain-text error axum produced itself, in the route's API error shape (its headers kept).
async fn rewrite_rejection(resp: Response, dialect: Shape) -> Response {
    let status = resp.status();
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 4096)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_string()
    } else {
        text
    };
    let (kind, code) = match status.as_u16() {
        413 => ("invalid_request_error", "request_too_large"),
        415 => ("invalid_request_error", "unsupported_media_type"),
        s if s >= 500 => ("api_error", "internal_error"),
        _ => ("invalid_request_error", "invalid_request"),
    };
    let mut out = dialect.render(ApiError::new(status, kind, code, message));
    for (name, value) in parts.headers.iter() {
        if name != axum::http::header::CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

async fn not_found(req: Request) -> Response {
    let dialect = Shape::of(req.uri().path());
    dialect.render(ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "unknown_url",
        format!(
            "Unknown path {} {}. Baton serves POST /v1/chat/completions, POST /v1/responses, POST /v1/messages, POST /v1beta/models/{{model}}:generateContent and GET /v1/models.",
            req.method(),
            req.uri().path()
        ),
    ))
}

async fn method_not_allowed(req: Request) -> Response {
    Shape::of(req.uri().path()).render(ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        format!("{} is not allowed on {}.", req.method(), req.uri().path()),
    ))
}

#[cfg(test)]
mod tests {
    use super::strip_port;

    #[test]
    fn ports_are_stripped() {
        assert_eq!(strip_port("127.0.0.1:8787"), "127.0.0.1");
        assert_eq!(strip_port("localhost"), "localhost");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("evil.example:80"), "evil.example");
    }
}
