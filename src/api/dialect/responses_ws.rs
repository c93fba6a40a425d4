//! Codex's Responses WebSocket transport: `GET /v1/responses` upgraded to a WebSocket. Each
//! text message `{"type": "response.create", …the Responses request…}` is served by the same
//! pipeline as `POST /v1/responses` with `stream: true` (routing, failover, cooldowns,
//! accounting, redaction), and each event of that stream goes back as one text message, the
//! JSON the SSE `data:` lines carry. An error before the stream is one message in the shape
//! Codex reads: `{"type": "error", "status": 429, "error": {…}, "headers": {…}}`.
//!
//! What the real Codex sends (0.171, captured): an upgrade with its usual headers (the key in
//! `authorization`), then a prewarm `response.create` with `generate: false` (answered here at
//! once, without calling any upstream), then one full `response.create` per model turn. The
//! upgrade's headers are the prewarm's (`x-codex-turn-metadata` with `"request_kind":
//! "prewarm"` and no turn id, and `openai-beta: responses_websockets=…`); each message's
//! `client_metadata` carries that turn's own (`x-codex-turn-metadata`, and
//! `ws_request_header_<name>` for headers Codex would send over HTTP). Each turn reaches the
//! pipeline as Codex's HTTP request for it would: the turn's own headers, and its
//! `client_metadata` less the transport's telemetry (a passthrough provider, the ChatGPT
//! backend, gets both, as over HTTP; a public API is given neither). Several turns share a
//! connection, one at a time.

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Map, Value};

use super::responses::Responses;
use super::Dialect;
use crate::api::error::ApiError;
use crate::api::AppState;
use crate::providers::sse::{ByteStream, SseReader};

/// Headers of the upgrade that belong to the WebSocket handshake, not to each request.
const HANDSHAKE_HEADERS: [&str; 7] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "content-length",
];

/// Its place in the server: `GET` on the Responses API's paths (their `POST` is
/// `responses`'s, which also counts them as calls); errors in OpenAI's shape.
pub(super) const API: super::Registration = super::Registration {
    routes,
    owns: super::none,
    error: super::openai::error,
    is_call: super::none,
    lists_models: super::no_list,
};

fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", get(upgrade))
        .route("/responses", get(upgrade))
}

/// `GET /v1/responses`: a WebSocket upgrade (Codex), authenticated at the handshake like a
/// request; a plain GET is told to POST.
async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Ok(ws) = ws else {
        return super::openai::error(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method_not_allowed",
            "GET /v1/responses is Codex's WebSocket transport (send Upgrade: websocket); create a response with POST /v1/responses.",
        ));
    };
    if let Err(e) =
        crate::api::authenticate(&state.core, Responses::default().presented_key(&headers))
    {
        return super::openai::error(e);
    }
    let mut per_request = headers;
    for h in HANDSHAKE_HEADERS {
        per_request.remove(h);
    }
    let limit = state.core.server.max_body_bytes;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| serve_socket(state, per_request, socket))
        .into_response()
}

/// The conversation a connection holds: over the WebSocket, Codex sends a turn as the items
/// *since* the last response (`previous_response_id` naming it, as OpenAI keeps each
/// connection's last response); Baton keeps no conversation anywhere else, so the connection
/// remembers the last response's whole input and output to rebuild a complete request.
#[derive(Default)]
struct Chain {
    id: String,
    items: Vec<Value>,
}

async fn serve_socket(state: AppState, headers: HeaderMap, mut socket: WebSocket) {
    let stopping = state.core.stopping.clone();
    let mut chain = Chain::default();
    loop {
        // A shutdown ends the connection between turns (a turn in flight finishes first).
        let msg = tokio::select! {
            m = socket.recv() => m,
            _ = stopping.cancelled() => {
                let _ = socket.send(Message::Close(None)).await;
                break;
            }
        };
        let Some(Ok(msg)) = msg else { break };
        let outcome = match msg {
            Message::Text(text) => {
                serve_message(&state, &headers, text.as_str(), &mut socket, &mut chain).await
            }
            Message::Binary(_) => send(&mut socket, error_event(400, "invalid_request_error", "binary messages are not part of the Responses WebSocket protocol: send JSON text", None)).await,
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => Ok(()),
        };
        if outcome.is_err() {
            break; // the client is gone
        }
    }
}

async fn send(socket: &mut WebSocket, v: Value) -> Result<(), axum::Error> {
    socket.send(Message::Text(v.to_string().into())).await
}

fn error_event(
    status: u16,
    kind: &str,
    message: &str,
    headers: Option<Map<String, Value>>,
) -> Value {
    let mut v = json!({"type": "error", "status": status,
        "error": {"type": kind, "code": Value::Null, "message": message, "param": Value::Null}});
    if let Some(h) = headers {
        v["headers"] = Value::Object(h);
    }
    v
}

async fn serve_message(
    state: &AppState,
    headers: &HeaderMap,
    text: &str,
    socket: &mut WebSocket,
    chain: &mut Chain,
) -> Result<(), axum::Error> {
    let Ok(Value::Object(mut body)) = serde_json::from_str::<Value>(text) else {
        return send(socket, error_event(400, "invalid_request_error", "a message must be a JSON object such as {\"type\": \"response.create\", \"model\": …, \"input\": …}", None)).await;
    };
    match body.remove("type").as_ref().and_then(Value::as_str) {
        Some("response.create") => {}
        // Codex's acknowledgement of a finished response: nothing to answer.
        Some("response.processed") => return Ok(()),
        other => {
            let msg = format!(
                "unknown message type {}: this endpoint takes \"response.create\"",
                other.map_or("(none)".to_string(), |t| format!("{t:?}"))
            );
            return send(
                socket,
                error_event(400, "invalid_request_error", &msg, None),
            )
            .await;
        }
    }
    let headers = turn_headers(headers, &mut body);
    continue_chain(&mut body, chain);
    let input: Vec<Value> = match body.get("input") {
        Some(Value::Array(items)) => items.clone(),
        Some(Value::String(s)) => vec![json!({"type": "message", "role": "user", "content": s})],
        _ => Vec::new(),
    };
    if body.remove("generate") == Some(Value::Bool(false)) {
        let id = format!("resp_prewarm_{}", crate::api::reply::new_request_id());
        *chain = Chain {
            id: id.clone(),
            items: input,
        };
        return prewarm(state, &id, &body, socket).await;
    }
    // Until this turn completes, nothing is there to continue from.
    *chain = Chain::default();
    relay(state, &headers, body, &input, socket, chain).await
}

/// The prefix of a `client_metadata` entry that stands for an HTTP header of the turn.
const WS_HEADER_PREFIX: &str = "ws_request_header_";

/// Headers a message's metadata may not set: the handshake's credentials hold for the socket.
const CREDENTIAL_HEADERS: [&str; 3] = [
    "x-api-key",
    "x-goog-api-key",
    crate::providers::BATON_KEY_HEADER,
];

/// The `client_metadata` entries that describe the WebSocket itself (no HTTP request has them).
const WS_ONLY_METADATA: [&str; 1] = ["x-codex-ws-stream-request-start-ms"];

/// The headers Codex's HTTP request for this turn would carry: the upgrade's, less the
/// WebSocket's own `openai-beta`, with the turn's `x-codex-turn-metadata` and the headers its
/// `client_metadata` names (`ws_request_header_x_openai_…` → `x-openai-…`), which leave the
/// metadata as they would over HTTP, with the WebSocket's own telemetry.
fn turn_headers(upgrade: &HeaderMap, body: &mut Map<String, Value>) -> HeaderMap {
    let mut headers = upgrade.clone();
    if headers
        .get("openai-beta")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("responses_websockets"))
    {
        headers.remove("openai-beta");
    }
    let Some(Value::Object(meta)) = body.get_mut("client_metadata") else {
        return headers;
    };
    let named: Vec<String> = meta
        .keys()
        .filter(|k| k.starts_with(WS_HEADER_PREFIX))
        .cloned()
        .collect();
    for key in named {
        let value = meta.remove(&key);
        let name = key[WS_HEADER_PREFIX.len()..].replace('_', "-");
        // Only an `x-` header of the client's own: never a credential, Baton's key or a
        // header the server reads for itself (the handshake's stand for the whole socket).
        if !name.starts_with("x-") || CREDENTIAL_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let value = value.as_ref().and_then(Value::as_str).unwrap_or_default();
        if let (Ok(n), Ok(v)) = (
            axum::http::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            headers.insert(n, v);
        }
    }
    for k in WS_ONLY_METADATA {
        meta.remove(k);
    }
    if let Some(v) = meta
        .get("x-codex-turn-metadata")
        .and_then(Value::as_str)
        .and_then(|v| HeaderValue::from_str(v).ok())
    {
        headers.insert("x-codex-turn-metadata", v);
    }
    headers
}

/// One turn through the pipeline, as `POST /v1/responses` with `stream: true`; each event of
/// its stream goes back as a text message.
async fn relay(
    state: &AppState,
    headers: &HeaderMap,
    mut body: Map<String, Value>,
    input: &[Value],
    socket: &mut WebSocket,
    chain: &mut Chain,
) -> Result<(), axum::Error> {
    body.insert("stream".into(), Value::Bool(true));
    let bytes = Value::Object(body).to_string();
    let mut req = Request::new(axum::body::Body::from(bytes));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = axum::http::Uri::from_static("/v1/responses");
    *req.headers_mut() = headers.clone();
    req.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let resp = crate::api::pipeline::serve(state, req, Responses::default()).await;
    if resp.status() != StatusCode::OK {
        return send(socket, refused(resp).await).await;
    }
    let body: ByteStream = Box::pin(
        resp.into_body()
            .into_data_stream()
            .map(|r| r.map_err(|e| e.to_string())),
    );
    let mut events = SseReader::new(body, std::time::Duration::from_secs(3600));
    loop {
        match events.next_event().await {
            Ok(Some(ev)) => {
                let Some(data) = ev.data else { continue };
                if data.as_ref() == b"[DONE]" {
                    continue;
                }
                let text = String::from_utf8_lossy(&data).into_owned();
                if text.contains("\"response.completed\"") {
                    remember(chain, input, &text);
                }
                socket.send(Message::Text(text.into())).await?;
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                let msg = format!("the stream broke: {e}");
                return send(socket, error_event(502, "api_error", &msg, None)).await;
            }
        }
    }
}

/// A refusal (auth, no provider, a limit everywhere) as Codex's wrapped error event: the status,
/// the OpenAI-shaped error and the headers a retry needs.
async fn refused(resp: Response) -> Value {
    let status = resp.status().as_u16();
    let mut headers = Map::new();
    for name in ["retry-after", "x-request-id", "x-gateway-provider"] {
        if let Some(v) = resp.headers().get(name).and_then(|v| v.to_str().ok()) {
            headers.insert(name.into(), Value::String(v.to_string()));
        }
    }
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let error = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("error").cloned())
        .unwrap_or_else(|| json!({"type": "api_error", "message": String::from_utf8_lossy(&body)}));
    json!({"type": "error", "status": status, "error": error, "headers": headers})
}

/// `generate: false`: Codex warms the connection up; nothing is generated and no upstream is
/// called (so nothing is billed): a response that completes empty.
async fn prewarm(
    state: &AppState,
    id: &str,
    body: &Map<String, Value>,
    socket: &mut WebSocket,
) -> Result<(), axum::Error> {
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    let created = state.core.routing.clock.now_ms() / 1000;
    let response = |status: &str| {
        json!({"id": id, "object": "response", "created_at": created, "status": status,
            "model": model, "output": [], "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}})
    };
    send(socket, json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress")})).await?;
    send(socket, json!({"type": "response.completed", "sequence_number": 1, "response": response("completed")})).await
}

/// A turn that continues this connection's last response: its items before the new ones, and
/// no `previous_response_id` left for a provider to look up. Any other id is left as it is
/// (a Responses provider that stores conversations may know it).
fn continue_chain(body: &mut Map<String, Value>, chain: &Chain) {
    let continues = body
        .get("previous_response_id")
        .and_then(Value::as_str)
        .is_some_and(|id| !chain.id.is_empty() && id == chain.id);
    if !continues {
        return;
    }
    body.remove("previous_response_id");
    let new = match body.remove("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(s)) => vec![json!({"type": "message", "role": "user", "content": s})],
        _ => Vec::new(),
    };
    let mut all = chain.items.clone();
    all.extend(new);
    body.insert("input".into(), Value::Array(all));
}

/// After `response.completed`: the whole conversation so far (this turn's input and the
/// response's output) under the response's id.
fn remember(chain: &mut Chain, input: &[Value], completed: &str) {
    let Ok(ev) = serde_json::from_str::<Value>(completed) else {
        return;
    };
    if ev["type"] != "response.completed" {
        return;
    }
    let Some(id) = ev["response"]["id"].as_str() else {
        return;
    };
    let mut items = input.to_vec();
    if let Some(out) = ev["response"]["output"].as_array() {
        items.extend(out.iter().cloned());
    }
    *chain = Chain {
        id: id.to_string(),
        items,
    };
}
