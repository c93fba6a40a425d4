//! The inbound pipeline every dialect shares: authenticate, admit, read and parse the body,
//! resolve the model, dispatch through the router, and render the answer (complete or
//! streamed) or the failure in the client's format. What differs between the APIs is the
//! `Dialect` it is handed (`api/dialect/`).

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::Response;
use serde_json::Value;

use super::admission::client_targets;
use super::admit::{Admitted, Source};
use super::dialect::contract::{Cx, Dialect, Parsed};
use super::error::ApiError;
use super::failure::resolve_error;
use super::reply::{attempt_headers, new_request_id};
use super::state::AppState;
use crate::router::record::Record;
use crate::router::{self, Inbound, Served};

/// An HTTP request in `dialect`, admitted and served: the answer, or the failure in the
/// dialect's error shape.
pub async fn serve(state: &AppState, req: Request, dialect: impl Dialect) -> Response {
    let (mut parts, body) = req.into_parts();
    let source = Source::http(body, &parts.headers);
    match admit(state, &dialect, &mut parts.headers, source).await {
        Ok(mut admitted) => {
            admitted.capture = state.core.captures.begin(crate::capture::Start {
                request_id: &admitted.request_id,
                client_key: &admitted.client.id,
                method: parts.method.as_str(),
                path: parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str())
                    .unwrap_or("/"),
                headers: &parts.headers,
                body: &admitted.body,
                now_ms: state.core.routing.clock.now_ms(),
            });
            serve_admitted(state, &parts.headers, admitted, dialect).await
        }
        Err(resp) => resp,
    }
}

/// The one admission (`api::admit`) for a unit of work in `dialect`: a refusal is logged as a
/// request refused before routing and answered in the dialect's shape.
pub(crate) async fn admit(
    state: &AppState,
    dialect: &dyn Dialect,
    headers: &mut HeaderMap,
    source: Source,
) -> Result<Admitted, Response> {
    let request_id = new_request_id();
    let presented = dialect.presented_key(headers).map(str::to_string);
    match super::admit::admit(state, presented, headers, source, request_id.clone()).await {
        Ok(a) => Ok(a),
        Err(r) => {
            if let Some(client) = r.client {
                refused(state, &request_id, client, Seen::default(), &r.error);
            }
            let mut base = HeaderMap::new();
            dialect.id_headers(&request_id, &mut base);
            Err(rendered(dialect, &request_id, r.error, base))
        }
    }
}

/// An admitted unit of work served: parsed, resolved, dispatched and answered; its
/// concurrency slot is held until the answer has been sent.
pub(crate) async fn serve_admitted(
    state: &AppState,
    headers: &HeaderMap,
    mut admitted: Admitted,
    mut dialect: impl Dialect,
) -> Response {
    let request_id = admitted.request_id.clone();
    let headroom = admitted.headroom;
    let capture = admitted.capture.take();
    let (client, body, charge, slot) = admitted.into_parts();
    let mut base = HeaderMap::new();
    dialect.id_headers(&request_id, &mut base);
    // The key's own limits, as the vendors' APIs say theirs: an SDK paces itself by them.
    dialect.rate_limit_headers(&headroom, state.core.routing.clock.now_ms(), &mut base);
    let mut seen = Seen::default();
    let unit = Unit {
        headers,
        body,
        charge,
        capture: capture.clone(),
    };
    let result = handle_client(
        state,
        unit,
        &request_id,
        &mut base,
        &mut dialect,
        client.clone(),
        &mut seen,
    )
    .await;
    match result {
        Ok(resp) => crate::capture::teed(resp, capture.as_ref())
            .map(|body| axum::body::Body::new(super::budget::Held::new(body, slot))),
        Err(e) => {
            refused(state, &request_id, client, seen, &e);
            crate::capture::teed(rendered(&dialect, &request_id, e, base), capture.as_ref())
        }
    }
}

/// A refusal in the dialect's shape, with the answer's headers (its request id).
fn rendered(dialect: &dyn Dialect, request_id: &str, e: ApiError, base: HeaderMap) -> Response {
    log_failure(request_id, &e);
    let mut resp = dialect.error(e);
    resp.headers_mut().extend(base);
    resp
}

/// The bookkeeping of a request refused: a malformed one feeds its key's throttle, and one
/// refused before routing (bad JSON, an unknown model, paused) still gets its Activity row,
/// which is where a user debugging a tool looks.
fn refused(
    state: &AppState,
    request_id: &str,
    client: std::sync::Arc<crate::clients::Client>,
    seen: Seen,
    e: &ApiError,
) {
    let core = &state.core;
    if malformed(e) {
        core.bad_request(&client);
    }
    if seen.logged || own_limit(e) {
        return;
    }
    let mut rec = Record::new(
        request_id.to_string(),
        core.routing.clock.now_ms(),
        client,
        // Bounded: a hostile client must not fill the log with megabyte model names.
        crate::limits::truncate(&seen.model.unwrap_or_default(), 200).to_string(),
        seen.stream,
        &core.routing,
    );
    let message = crate::limits::truncate(&e.message, 1000).to_string();
    rec.finish(e.status.as_u16(), Some(message));
}

/// An admitted unit's request headers and body, and the body's memory charge.
struct Unit<'a> {
    headers: &'a HeaderMap,
    body: axum::body::Bytes,
    charge: super::budget::Charge,
    /// The capture armed for it, if any.
    capture: Option<std::sync::Arc<crate::capture::Capture>>,
}

/// What a request showed of itself before it was refused, for its log row.
#[derive(Default)]
struct Seen {
    model: Option<String>,
    stream: bool,
    /// A log row was started (the router's record writes it).
    logged: bool,
}

/// A client over its own limits: counted by the metrics, not logged row by row (a runaway
/// script would flood the log).
fn own_limit(e: &ApiError) -> bool {
    matches!(
        e.code,
        "client_rate_limited"
            | "client_token_limited"
            | "budget_exceeded"
            | "too_many_bad_requests"
    )
}

/// Whether a refusal is the client's own malformed request, the only kind that feeds its
/// bad-request throttle: not an unknown model (404; a tool's model names may simply not be
/// mapped yet), not an upload that broke off, not an upstream's verdict relayed as it came,
/// not a well-formed request no provider here can take (`unsupported_request`: a subscription
/// model without the client's login, a conversation a CLI cannot take) nor one continuing a
/// response Baton no longer holds (after a restart).
fn malformed(e: &ApiError) -> bool {
    matches!(e.status.as_u16(), 400 | 413 | 422)
        && !matches!(
            e.code,
            "body_incomplete"
                | "upstream_rejected"
                | "context_length_exceeded"
                | "unsupported_request"
                | "previous_response_not_found"
        )
}

/// Server-side failures and upstream limits are worth a line; a client over its own limits is
/// not (a runaway script would flood the log), and the metrics count those.
pub(super) fn log_failure(request_id: &str, e: &ApiError) {
    if own_limit(e) {
        tracing::debug!(request_id, status = e.status.as_u16(), message = %e.message, "request refused");
    } else if e.status.is_server_error() || e.status == StatusCode::TOO_MANY_REQUESTS {
        tracing::info!(request_id, status = e.status.as_u16(), message = %e.message, "request failed");
    }
}

async fn handle_client(
    state: &AppState,
    unit: Unit<'_>,
    request_id: &str,
    base: &mut HeaderMap,
    dialect: &mut dyn Dialect,
    client: std::sync::Arc<crate::clients::Client>,
    seen: &mut Seen,
) -> Result<Response, ApiError> {
    let core = &state.core;
    let body_len = unit.body.len();
    // The charge is held until this request's parsed form is gone (the budget's estimate
    // covers it).
    let (mut inbound, charge) = parse(state, unit, dialect, seen, request_id)?;
    // Affinity is per client key: one member's session name cannot steer another's routing.
    inbound.conversation = inbound.conversation.map(|c| c.of_client(&client.id));
    let snap = core.routing.snapshot.load_full();
    let mapped = snap.map_model(&inbound.canonical.model).to_string();
    let (targets, selection) = snap
        .resolve_requested(&inbound.canonical.model)
        .map_err(resolve_error)?;
    let before = targets.len();
    let targets = snap.name_any_model(targets, &inbound.canonical.model);
    if targets.is_empty() && before > 0 {
        return Err(ApiError::invalid(
            "model",
            format!(
                "`{}` names no model, and the providers it leads to serve the model the client names (\"*\"): ask for a model name mapped to them, or `provider/model`.",
                crate::limits::truncate(&inbound.canonical.model, 200)
            ),
        ));
    }
    let mut rec = Record::new(
        request_id.to_string(),
        core.routing.clock.now_ms(),
        client.clone(),
        inbound.canonical.model.clone(),
        inbound.canonical.stream,
        &core.routing,
    );
    seen.logged = true;
    rec.traced(inbound.trace.as_ref(), dialect.operation());
    rec.captured(inbound.capture.as_ref());
    if rec.wants_trace(true) {
        rec.content(inbound.prompt(), String::new());
    }
    let targets = match client_targets(&client, &mapped, targets, &mut rec) {
        Ok(t) => t,
        Err(e) => {
            core.metrics.denied(&client.id, e.code);
            rec.finish(e.status.as_u16(), Some(e.message.clone()));
            return Err(e);
        }
    };
    let result =
        router::dispatch(&core.routing, &snap, &inbound, targets, selection, &mut rec).await;
    attempt_headers(base, rec.sent_count(), rec.attempts());
    let out = super::render::Out {
        state,
        request_id,
        dialect,
        base,
    };
    let answer = match result {
        Ok(Served::Complete(c)) => out.complete(c, &inbound, rec),
        Ok(Served::Stream(s)) => Ok(out.stream(s, &inbound, rec)),
        Err(f) => Err(out.failure(f, &inbound, rec)),
    };
    // A large request's parsed forms are freed once its answer is on its way.
    state.inbound.free_later(inbound, charge, body_len);
    answer
}

/// Parses an admitted request: the dialect's body to the canonical request, and the headers
/// that shape routing.
fn parse(
    state: &AppState,
    unit: Unit<'_>,
    dialect: &mut dyn Dialect,
    seen: &mut Seen,
    request_id: &str,
) -> Result<(Inbound, super::budget::Charge), ApiError> {
    static ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");
    let headers = unit.headers;
    let anthropic_beta = headers
        .get(&ANTHROPIC_BETA)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let deadline_ms = timeout_header(headers)?;
    let client = crate::providers::ClientCredential::from_headers(headers);
    let session = crate::router::affinity::Conversation::session_header(headers);
    let (body, model_at) = json_object(&unit.body)?;
    let charge = unit.charge;
    let client = client.map(|c| c.with_account_in(&body).spoken_to(dialect.vendor()));
    let named = crate::router::affinity::Conversation::named(session.as_deref(), &body);
    (seen.model, seen.stream) = dialect.named(&body);
    let cx = Cx {
        request_id,
        now_s: state.core.routing.clock.now_ms() / 1000,
    };
    let Parsed {
        canonical,
        openai,
        original,
        continues,
    } = dialect.parse(body, &cx)?;
    let verbatim = model_at
        .filter(|_| dialect.keeps_body_verbatim())
        .map(|model| crate::providers::outbound::Verbatim {
            wire: dialect.wire(),
            bytes: unit.body.clone(),
            model,
        });
    let needs = canonical.needs();
    let follows = named.is_some()
        || crate::router::affinity::Conversation::follows_unnamed(
            &canonical,
            needs.prompt_tokens(),
        );
    let conversation =
        named.or_else(|| crate::router::affinity::Conversation::by_prefix(&canonical));
    let inbound = Inbound {
        openai: openai.map(Into::into).unwrap_or_default(),
        original,
        verbatim: crate::router::ClientBytes(verbatim),
        client,
        anthropic_beta,
        needs,
        canonical,
        deadline_ms,
        conversation,
        follows,
        continues,
        expect: Default::default(),
        trace: state.core.routing.telemetry.start(headers),
        capture: unit.capture,
    };
    if let Some(c) = &inbound.capture {
        // A login Baton does not hold is masked by its value, like Baton's own keys.
        if let Some(login) = &inbound.client {
            c.mask(login.key.secret.expose());
        }
        c.canonical(format!("{:#?}", inbound.canonical));
    }
    Ok((inbound, charge))
}

/// `x-gateway-timeout-ms`: this request's deadline, overriding `routing.requestTimeoutMs`.
fn timeout_header(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    static TIMEOUT: HeaderName = HeaderName::from_static("x-gateway-timeout-ms");
    let Some(v) = headers.get(&TIMEOUT) else {
        return Ok(None);
    };
    match v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(ms) if (1..=86_400_000).contains(&ms) => Ok(Some(ms)),
        _ => Err(ApiError::invalid(
            "x-gateway-timeout-ms",
            "The x-gateway-timeout-ms header must be a whole number of milliseconds between 1 and 86400000.",
        )),
    }
}

/// The body as a JSON object and, when it writes no top-level key twice, where its top-level
/// `model` value lies in `bytes` if it names one (`providers::outbound::Verbatim`); or the
/// error that says what is wrong with it.
fn json_object(bytes: &[u8]) -> Result<Body, ApiError> {
    use serde::de::DeserializeSeed;
    // JSON is UTF-8 (RFC 8259): checked once over the whole body, at SIMD speed, instead of
    // by serde_json string by string (a tenth of a large body's parse).
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        let mut de = serde_json::Deserializer::from_str(text);
        if let Ok(top) = TopLevel(text.as_bytes()).deserialize(&mut de) {
            if de.end().is_ok() {
                return Ok(top);
            }
        }
    }
    // Not an object, or not JSON: parsed again as any value for the error that says which.
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok((map, None)),
        Ok(_) => Err(ApiError::invalid(
            "body",
            "The request body must be a JSON object.",
        )),
        Err(e) => {
            let mut err =
                ApiError::invalid("body", format!("The request body is not valid JSON: {e}"));
            err.code = "invalid_json";
            Err(err)
        }
    }
}

/// A body's members and, unless a top-level key is written twice (such a body is never relayed
/// as it came), where its `model` value lies in its bytes if it names one (see `json_object`).
type Body = (
    serde_json::Map<String, Value>,
    Option<Option<std::ops::Range<usize>>>,
);

/// A request body's top level read once: its members, and the span of its `model` value.
struct TopLevel<'b>(&'b [u8]);

impl<'de> serde::de::DeserializeSeed<'de> for TopLevel<'de> {
    type Value = Body;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for TopLevel<'de> {
    type Value = Body;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut map = serde_json::Map::new();
        let (mut keys, mut model) = (0usize, None);
        while let Some(key) = a.next_key::<String>()? {
            keys += 1;
            let value = if key == "model" {
                // Borrowed from the body itself: its place there is where the bytes are.
                let raw: &'de serde_json::value::RawValue = a.next_value()?;
                let start = raw.get().as_ptr() as usize - self.0.as_ptr() as usize;
                model = Some(start..start + raw.get().len());
                serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?
            } else {
                a.next_value()?
            };
            map.insert(key, value);
        }
        // A key written twice is read as its last by Baton and perhaps as its first upstream:
        // such a body is written out again, never relayed as it came.
        let relay = (keys == map.len()).then_some(model);
        Ok((map, relay))
    }
}

#[cfg(test)]
mod tests {
    use super::json_object;

    fn span(body: &str) -> Option<String> {
        let (_, at) = json_object(body.as_bytes()).unwrap_or_else(|e| panic!("{}", e.message));
        at.flatten().map(|r| body[r].to_string())
    }

    #[test]
    fn the_model_value_is_found_where_the_client_wrote_it() {
        assert_eq!(span(r#"{"model":"m","n":1}"#).as_deref(), Some(r#""m""#));
        assert_eq!(
            span(r#"{ "messages": [{"model": "inner"}], "model" :  "caf\u00e9\"x" }"#).as_deref(),
            Some(r#""caf\u00e9\"x""#),
            "the top level's, escapes and all, not a nested one"
        );
        // An escaped key is still `model`; any key written twice, and none, give no span.
        assert_eq!(span(r#"{"mod\u0065l":"m"}"#).as_deref(), Some(r#""m""#));
        assert_eq!(span(r#"{"model":"a","model":"b"}"#), None);
        assert_eq!(span(r#"{"model":"a","n":1,"n":2}"#), None);
        assert_eq!(span(r#"{"messages":[]}"#), None);
        // Relayable without a model (Gemini's is in the URL), but not with a key written twice.
        let relay = |b: &str| json_object(b.as_bytes()).ok().map(|(_, r)| r);
        assert_eq!(relay(r#"{"contents":[]}"#), Some(Some(None)));
        assert_eq!(relay(r#"{"contents":[],"contents":[]}"#), Some(None));
        let (map, _) = json_object(br#"{"model":"a","model":"b"}"#)
            .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(map["model"], "b", "read as serde_json reads it: the last");
    }

    #[test]
    fn what_is_not_an_object_says_so() {
        let err = |b: &str| json_object(b.as_bytes()).err().map(|e| (e.code, e.message));
        let (code, message) = err("[1, 2]").unwrap_or_default();
        assert_eq!(
            (code, message.as_str()),
            ("invalid_request", "The request body must be a JSON object.")
        );
        let (code, message) = err(r#"{"model": "m",}"#).unwrap_or_default();
        assert_eq!(code, "invalid_json");
        assert!(
            message.starts_with("The request body is not valid JSON: trailing comma"),
            "{message}"
        );
        let (code, _) = err(r#"{"model": "m"} x"#).unwrap_or_default();
        assert_eq!(code, "invalid_json", "trailing characters");
        // Not UTF-8: the same error as before the whole body was checked at once.
        let e = json_object(b"{\"model\": \"m\xff\"}").err();
        let (code, message) = e.map(|e| (e.code, e.message)).unwrap_or_default();
        assert_eq!(code, "invalid_json");
        assert!(message.contains("invalid unicode code point"), "{message}");
    }
}
