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

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Map, Value};

use super::contract::Dialect;
use super::responses::Responses;
use crate::api::admit::Source;
use crate::api::budget::Charge;
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::api::websocket::{End, Next, Socket};
use crate::providers::sse::{ByteStream, SseReader};

/// Its place in the server: `GET` on the Responses API's paths (their `POST` is
/// `responses`'s); errors in OpenAI's shape.
pub(super) const API: super::contract::Registration = super::contract::Registration {
    routes,
    owns: super::contract::none,
    error: super::openai::error,
    lists_models: super::contract::no_list,
};

fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/responses", get(upgrade))
        .route("/responses", get(upgrade))
}

/// `GET /v1/responses`: a WebSocket upgrade (Codex), its key checked at the handshake as a
/// request's is; a plain GET is told to POST.
async fn upgrade(State(state): State<AppState>, req: Request) -> Response {
    let presented = Responses::default()
        .presented_key(req.headers())
        .map(str::to_string);
    if let Err(e) = still_valid(&state, presented.as_deref()) {
        return super::openai::error(e);
    }
    let headers = crate::api::websocket::request_headers(req.headers());
    let serving = state.clone();
    let accepted = crate::api::websocket::accept(&state, req, move |socket| {
        serve_socket(serving, headers, presented, socket)
    });
    accepted.unwrap_or_else(super::openai::error)
}

/// Whether the key a connection was opened with may still be used: known, not disabled, not
/// expired.
fn still_valid(state: &AppState, presented: Option<&str>) -> Result<(), ApiError> {
    let core = &state.core;
    let client = crate::api::state::authenticate(core, presented)?;
    let now = core.routing.clock.now_ms();
    match core.clients.gate(&client, now) {
        Err(
            d @ (crate::clients::limiter::Deny::Disabled
            | crate::clients::limiter::Deny::Expired(_)),
        ) => Err(crate::api::admission::deny_error(&d, &client.label, now)),
        _ => Ok(()),
    }
}

/// The conversation a connection holds: over the WebSocket, Codex sends a turn as the items
/// *since* the last response (`previous_response_id` naming it, as OpenAI keeps each
/// connection's last response); Baton keeps no conversation anywhere else, so the connection
/// remembers the last response's whole input and output (as one JSON array's text, charged to
/// the memory budget while it is held) to rebuild a complete request.
#[derive(Default)]
struct Chain {
    id: String,
    /// The items, a JSON array's text.
    items: Bytes,
    _charge: Charge,
}

async fn serve_socket(
    state: AppState,
    headers: HeaderMap,
    presented: Option<String>,
    mut socket: Socket,
) {
    let stopping = state.core.stopping.clone();
    let valid = || still_valid(&state, presented.as_deref());
    let mut chain = Chain::default();
    let end = loop {
        let (text, charge) = match socket.next(&stopping, &valid).await {
            Next::Text(text, charge) => (text, charge),
            Next::Binary => {
                let e = error_event(400, "invalid_request_error", "binary messages are not part of the Responses WebSocket protocol: send JSON text", None);
                match socket.send(e.to_string()).await {
                    Ok(()) => continue,
                    Err(end) => break end,
                }
            }
            Next::End(end) => break end,
        };
        // A turn in flight keeps the connection from being closed to make room.
        let serving = socket.serving();
        let served = serve_message(&state, &headers, text, charge, &mut socket, &mut chain).await;
        drop(serving);
        if let Err(end) = served {
            break end;
        }
    };
    let error = match &end {
        End::Revoked(e) => Some(wrapped(e).to_string()),
        _ => None,
    };
    socket.end(end, error).await;
}

async fn send(socket: &mut Socket, v: Value) -> Result<(), End> {
    socket.send(v.to_string()).await
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

/// An error as Codex's wrapped error event.
fn wrapped(e: &ApiError) -> Value {
    let mut headers = Map::new();
    if let Some(v) = e.headers.get("retry-after").and_then(|v| v.to_str().ok()) {
        headers.insert("retry-after".into(), Value::String(v.to_string()));
    }
    json!({"type": "error", "status": e.status.as_u16(), "headers": headers,
        "error": {"type": e.kind, "code": e.code, "message": e.message, "param": e.param}})
}

/// One message: through the one admission (the key now, the concurrency bound, its policy,
/// the memory charge and the JSON-value bound) before it is parsed, then a turn or a prewarm.
async fn serve_message(
    state: &AppState,
    headers: &HeaderMap,
    text: Bytes,
    charge: Charge,
    socket: &mut Socket,
    chain: &mut Chain,
) -> Result<(), End> {
    let dialect = Responses::default();
    let source = Source::Message {
        bytes: text,
        charge,
    };
    let mut headers = headers.clone();
    let admitted = crate::api::pipeline::admit(state, &dialect, &mut headers, source).await;
    let mut admitted = match admitted {
        Ok(a) => a,
        Err(resp) => return send(socket, refused(resp).await).await,
    };
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(&admitted.body) else {
        state.core.bad_request(&admitted.client);
        return send(socket, error_event(400, "invalid_request_error", "a message must be a JSON object such as {\"type\": \"response.create\", \"model\": …, \"input\": …}", None)).await;
    };
    match body.remove("type").as_ref().and_then(Value::as_str) {
        Some("response.create") => {}
        // An acknowledgement of a finished response: nothing to answer.
        Some("response.processed") => return Ok(()),
        other => {
            state.core.bad_request(&admitted.client);
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
    let prewarm = body.remove("generate") == Some(Value::Bool(false));
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    let (full, input) = continued(body, chain);
    if let Err(e) = admitted.rebody(state, full).await {
        return send(socket, wrapped(&e)).await;
    }
    if prewarm {
        return prewarm_turn(state, &admitted.client, model, input, socket, chain).await;
    }
    // Until this turn completes, nothing is there to continue from.
    *chain = Chain::default();
    let resp =
        crate::api::pipeline::serve_admitted(state, &headers, admitted, Responses::default()).await;
    relay(state, resp, input, socket, chain).await
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
fn turn_headers(mut headers: HeaderMap, body: &mut Map<String, Value>) -> HeaderMap {
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

/// One turn's answer from the pipeline (`stream: true`): each event of its stream goes back as
/// a text message.
async fn relay(
    state: &AppState,
    resp: Response,
    input: Bytes,
    socket: &mut Socket,
    chain: &mut Chain,
) -> Result<(), End> {
    if resp.status() != axum::http::StatusCode::OK {
        return send(socket, refused(resp).await).await;
    }
    let body: ByteStream = Box::pin(
        resp.into_body()
            .into_data_stream()
            .map(|r| r.map_err(|e| e.to_string())),
    );
    let mut events = SseReader::new(body, std::time::Duration::from_secs(3600));
    loop {
        // Events already here are queued and go out together; the socket is written when the
        // next one has to be waited for (one write per burst, as the HTTP stream does).
        let next = match events.buffered_event() {
            Some(ev) => Ok(Some(ev)),
            None => {
                socket.flush().await?;
                events.next_event().await
            }
        };
        match next {
            Ok(Some(ev)) => {
                let Some(data) = ev.data else { continue };
                if data.as_ref() == b"[DONE]" {
                    continue;
                }
                let text = String::from_utf8_lossy(&data).into_owned();
                if text.contains("\"response.completed\"") {
                    remember(state, chain, &input, &text);
                }
                socket.feed(text).await?;
            }
            Ok(None) => return socket.flush().await,
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
/// called (so nothing is billed): a response that completes empty. The model it names must be
/// one the key may use, as a turn's must.
async fn prewarm_turn(
    state: &AppState,
    client: &crate::clients::Client,
    model: Value,
    input: Bytes,
    socket: &mut Socket,
    chain: &mut Chain,
) -> Result<(), End> {
    if let Err(e) = allowed(state, client, model.as_str().unwrap_or_default()) {
        return send(socket, wrapped(&e)).await;
    }
    let id = format!("resp_prewarm_{}", crate::api::reply::new_request_id());
    keep(state, chain, id.clone(), input);
    let created = state.core.routing.clock.now_ms() / 1000;
    let response = |status: &str| {
        json!({"id": id, "object": "response", "created_at": created, "status": status,
            "model": model, "output": [], "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}})
    };
    send(socket, json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress")})).await?;
    send(socket, json!({"type": "response.completed", "sequence_number": 1, "response": response("completed")})).await
}

/// Whether the key may use `model` (a name no provider serves is left to the turn to refuse).
fn allowed(state: &AppState, client: &crate::clients::Client, model: &str) -> Result<(), ApiError> {
    let snap = state.core.routing.snapshot.load();
    match snap.resolve_requested(model) {
        Ok((targets, _)) => {
            crate::api::admission::allowed_targets(client, snap.map_model(model), targets)
                .map(|_| ())
        }
        Err(_) => Ok(()),
    }
}

/// The body of a turn, complete: a turn that continues this connection's last response gets
/// its items before the new ones (spliced as text: the kept items are not parsed again), and no
/// `previous_response_id` left for a provider to look up. Any other id is left as it is (a
/// Responses provider that stores conversations may know it). Also returns the turn's whole
/// input, a JSON array's text.
fn continued(mut body: Map<String, Value>, chain: &Chain) -> (Bytes, Bytes) {
    let continues = body
        .get("previous_response_id")
        .and_then(Value::as_str)
        .is_some_and(|id| !chain.id.is_empty() && id == chain.id);
    let new = match body.remove("input") {
        Some(Value::Array(items)) => items,
        Some(Value::String(s)) => vec![json!({"type": "message", "role": "user", "content": s})],
        _ => Vec::new(),
    };
    let new = Value::Array(new).to_string();
    let input = if continues {
        body.remove("previous_response_id");
        join_arrays(&chain.items, new.as_bytes())
    } else {
        Bytes::from(new)
    };
    body.insert("stream".into(), Value::Bool(true));
    let mut full = Value::Object(body).to_string().into_bytes();
    // `{…}` becomes `{…,"input":[…]}`.
    full.pop();
    if full.len() > 1 {
        full.push(b',');
    }
    full.extend_from_slice(b"\"input\":");
    full.extend_from_slice(&input);
    full.push(b'}');
    (Bytes::from(full), input)
}

/// Two JSON arrays' texts as one array's.
fn join_arrays(a: &[u8], b: &[u8]) -> Bytes {
    let inner = |t: &[u8]| -> Vec<u8> {
        let t = t.trim_ascii();
        if t.len() < 2 {
            return Vec::new();
        }
        t[1..t.len() - 1].trim_ascii().to_vec()
    };
    let (a, b) = (inner(a), inner(b));
    let mut out = Vec::with_capacity(a.len() + b.len() + 3);
    out.push(b'[');
    out.extend_from_slice(&a);
    if !a.is_empty() && !b.is_empty() {
        out.push(b',');
    }
    out.extend_from_slice(&b);
    out.push(b']');
    Bytes::from(out)
}

/// Keeps `items` as the conversation of response `id`, charged to the memory budget; when the
/// budget cannot hold it, nothing is kept (a turn continuing it is refused as an unknown id).
fn keep(state: &AppState, chain: &mut Chain, id: String, items: Bytes) {
    *chain = Chain::default();
    let mut charge = Charge::default();
    if state.inbound.charge(&mut charge, items.len()).is_err() {
        tracing::info!("a WebSocket conversation was not kept: the memory budget is spent");
        return;
    }
    *chain = Chain {
        id,
        items,
        _charge: charge,
    };
}

/// After `response.completed`: the whole conversation so far (this turn's input and the
/// response's output) under the response's id.
fn remember(state: &AppState, chain: &mut Chain, input: &[u8], completed: &str) {
    let Ok(ev) = serde_json::from_str::<Value>(completed) else {
        return;
    };
    if ev["type"] != "response.completed" {
        return;
    }
    let Some(id) = ev["response"]["id"].as_str() else {
        return;
    };
    let output = ev["response"]["output"].to_string();
    let output = if output.starts_with('[') {
        output
    } else {
        "[]".to_string()
    };
    keep(
        state,
        chain,
        id.to_string(),
        join_arrays(input, output.as_bytes()),
    );
}
