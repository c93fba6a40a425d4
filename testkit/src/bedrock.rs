//! AWS Bedrock's runtime routes (`POST /model/{id}/invoke` and `/invoke-with-response-stream`;
//! the Converse API's `converse` and `converse-stream` in `converse.rs`), as strict as the
//! service is before a request reaches its model. The SigV4 signature is
//! checked by this file's own implementation of AWS's published algorithm (not Baton's signer):
//! a wrong secret, region, service, date or payload hash, an unknown access key or a missing
//! session token gets AWS's own status, exception and text. A Bedrock API key is a bearer token.
//! The body must be the Messages API's as Bedrock takes it (`anthropic_version`, no `model`,
//! no `stream`) for a model of the account's; the answer is the Anthropic fake's, a stream
//! framed in AWS event-stream messages whose checksums are computed here.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::{FakeUpstream, Shared};

mod converse;
mod sigv4;

/// The `anthropic_version` values Bedrock takes.
const VERSIONS: [&str; 2] = ["bedrock-2023-05-31", "2026-10-21"];

/// The AWS account a fake Bedrock serves.
#[derive(Default, Clone)]
pub(crate) struct Account {
    pub access_key_id: String,
    pub secret: String,
    pub session: Option<String>,
    pub region: String,
    pub api_keys: Vec<String>,
    pub models: Vec<String>,
    /// Streams that get a `throttlingException` frame after their 200, before any event.
    pub stream_exceptions: usize,
}

impl FakeUpstream {
    /// Its Bedrock routes take requests signed with this access key (and session token) for
    /// `region`, for these model ids.
    pub fn bedrock_account(
        &self,
        access_key_id: &str,
        secret: &str,
        session: Option<&str>,
        region: &str,
        models: &[&str],
    ) {
        let mut a = self.shared.bedrock.lock().unwrap();
        a.access_key_id = access_key_id.into();
        a.secret = secret.into();
        a.session = session.map(str::to_string);
        a.region = region.into();
        a.models = models.iter().map(|m| m.to_string()).collect();
    }

    /// A Bedrock API key its routes also take (`Authorization: Bearer`).
    pub fn bedrock_api_key(&self, key: &str) {
        self.shared
            .bedrock
            .lock()
            .unwrap()
            .api_keys
            .push(key.into());
    }

    /// Its next `n` streams answer 200 and then a `throttlingException` frame, as Bedrock does
    /// when a limit is met once the stream has begun.
    pub fn bedrock_throttle_streams(&self, n: usize) {
        self.shared.bedrock.lock().unwrap().stream_exceptions = n;
    }

    /// Every request its Bedrock routes took: the path as sent, the headers, the body.
    pub fn bedrock_calls(&self) -> Vec<Value> {
        self.shared.bedrock_calls.lock().unwrap().clone()
    }
}

/// AWS's error answer: the exception in `x-amzn-ErrorType`, the text in `message`.
pub(crate) fn aws_error(status: StatusCode, exception: &str, message: &str) -> Response {
    let mut r = (status, axum::Json(json!({"message": message}))).into_response();
    let t = format!("{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/");
    r.headers_mut()
        .insert("x-amzn-errortype", HeaderValue::from_str(&t).unwrap());
    r
}

fn malformed(what: &str) -> Response {
    aws_error(
        StatusCode::BAD_REQUEST,
        "ValidationException",
        &format!("Malformed input request: #: {what}, please reformat your input and try again."),
    )
}

/// `POST /model/{id}/{invoke | invoke-with-response-stream}`. Long because it is Bedrock's checks
/// in its order, each with AWS's own answer, before the Anthropic fake answers.
pub(crate) async fn invoke(
    State(s): State<Arc<Shared>>,
    Path((model, op)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let call = json!({"path": uri.path(), "body": String::from_utf8_lossy(&body),
        "headers": headers.iter().map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or("")))).collect::<serde_json::Map<_, _>>()});
    s.bedrock_calls.lock().unwrap().push(call);
    let account = s.bedrock.lock().unwrap().clone();
    if let Err(r) = authenticate(&account, &uri, &headers, &body) {
        return *r;
    }
    let stream = match op.as_str() {
        "invoke" => false,
        "invoke-with-response-stream" => true,
        "count-tokens" => return count_tokens(s, &account, &model, headers, &body).await,
        "converse" => return converse::converse(s, &account, &model, headers, &body, false).await,
        "converse-stream" => {
            return converse::converse(s, &account, &model, headers, &body, true).await
        }
        _ => return aws_error(StatusCode::NOT_FOUND, "UnknownOperationException", ""),
    };
    let Ok(Value::Object(mut b)) = serde_json::from_slice::<Value>(&body) else {
        return malformed("expected type: JSONObject");
    };
    for extraneous in ["model", "stream"] {
        if b.contains_key(extraneous) {
            return malformed(&format!("extraneous key [{extraneous}] is not permitted"));
        }
    }
    // AWS's user guide documents `bedrock-2023-05-31`; Anthropic's current SDK sends the API
    // version it speaks (`2026-10-21`).
    match b.remove("anthropic_version") {
        None => return malformed("required key [anthropic_version] not found"),
        Some(v) if !VERSIONS.iter().any(|k| v == *k) => {
            return aws_error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                &format!("Invalid API version {v}"),
            )
        }
        Some(_) => {}
    }
    if !account.models.contains(&model) {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The provided model identifier is invalid.",
        );
    }
    if stream && take_exception(&s) {
        return throttled_stream();
    }
    // What remains is the Messages API's: the Anthropic fake answers it.
    let mut headers = headers;
    if let Some(Value::Array(betas)) = b.remove("anthropic_beta") {
        let list: Vec<&str> = betas.iter().filter_map(Value::as_str).collect();
        headers.insert(
            "anthropic-beta",
            HeaderValue::from_str(&list.join(",")).unwrap(),
        );
    }
    headers.remove("authorization");
    b.insert("model".into(), json!(model));
    if stream {
        b.insert("stream".into(), json!(true));
    }
    let body = Bytes::from(serde_json::to_vec(&b).unwrap());
    let answer = crate::anthropic::messages(State(s), headers, body).await;
    if !stream || !answer.status().is_success() {
        return answer;
    }
    let (mut parts, body) = answer.into_parts();
    parts.headers.insert(
        "content-type",
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    parts.headers.remove("content-length");
    Response::from_parts(parts, Body::from_stream(frames(body)))
}

/// `POST /model/{id}/count-tokens`: the InvokeModel body it would take, base64 in
/// `input.invokeModel.body` (or a Converse conversation in `input.converse`), for a foundation model's own id (an inference profile's is
/// refused, as Bedrock does); counted by the Anthropic fake, answered as `inputTokens`.
async fn count_tokens(
    s: Arc<Shared>,
    account: &Account,
    model: &str,
    headers: HeaderMap,
    body: &[u8],
) -> Response {
    use base64::Engine;
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return malformed("expected type: JSONObject");
    };
    // CountTokens' input is a union: an InvokeModel body, or a Converse conversation.
    enum Input<'a> {
        Invoke(&'a str),
        Converse(&'a Value),
    }
    let input = match (
        v.pointer("/input/converse"),
        v.pointer("/input/invokeModel/body").and_then(Value::as_str),
    ) {
        (Some(c), _) => Input::Converse(c),
        (None, Some(encoded)) => Input::Invoke(encoded),
        (None, None) => {
            return aws_error(
                StatusCode::BAD_REQUEST,
                "ValidationException",
                "1 validation error detected: Value null at 'input' failed to satisfy constraint: Member must not be null",
            )
        }
    };
    if !account.models.iter().any(|m| m.ends_with(model)) || !model.starts_with("anthropic.") {
        return aws_error(
            StatusCode::BAD_REQUEST,
            "ValidationException",
            "The provided model doesn't support counting tokens.",
        );
    }
    let encoded = match input {
        Input::Converse(conversation) => {
            return converse::count(s, model, headers, conversation).await
        }
        Input::Invoke(encoded) => encoded,
    };
    let Ok(Value::Object(mut b)) = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| ())
        .and_then(|d| serde_json::from_slice::<Value>(&d).map_err(|_| ()))
    else {
        return malformed("the invokeModel body is not base64 JSON");
    };
    for extraneous in ["model", "stream"] {
        if b.contains_key(extraneous) {
            return malformed(&format!("extraneous key [{extraneous}] is not permitted"));
        }
    }
    for required in ["anthropic_version", "max_tokens"] {
        if b.remove(required).is_none() {
            return malformed(&format!("required key [{required}] not found"));
        }
    }
    b.remove("anthropic_beta");
    b.insert("model".into(), json!(model));
    let answer = crate::anthropic::count_tokens(
        State(s),
        headers,
        Bytes::from(serde_json::to_vec(&b).unwrap()),
    )
    .await;
    as_input_tokens(answer).await
}

/// The Anthropic fake's count as CountTokens answers it.
async fn as_input_tokens(answer: Response) -> Response {
    if !answer.status().is_success() {
        return answer;
    }
    let bytes = axum::body::to_bytes(answer.into_body(), 1 << 16)
        .await
        .unwrap_or_default();
    let n = serde_json::from_slice::<Value>(&bytes).unwrap_or_default()["input_tokens"].clone();
    axum::Json(json!({"inputTokens": n})).into_response()
}

/// A stream that answers 200 and then meets a limit: one `throttlingException` message.
fn throttled_stream() -> Response {
    let frame = message(
        &[
            (":exception-type", "throttlingException"),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        br#"{"message":"Too many tokens, please wait before trying again."}"#,
    );
    let mut r = Response::new(Body::from(frame));
    r.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("application/vnd.amazon.eventstream"),
    );
    r
}

/// Whether this stream is one of those told to meet an exception.
fn take_exception(s: &Shared) -> bool {
    let mut a = s.bedrock.lock().unwrap();
    let take = a.stream_exceptions > 0;
    a.stream_exceptions = a.stream_exceptions.saturating_sub(1);
    take
}

/// The Anthropic fake's SSE body as event-stream `chunk` messages, one per event.
fn frames(body: Body) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    reframed(body, |data| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(data);
        let payload = json!({"bytes": b64, "p": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"});
        vec![Bytes::from(message(
            &[
                (":event-type", "chunk"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            payload.to_string().as_bytes(),
        ))]
    })
}

/// An SSE body as the event-stream messages `frame` makes of each event's data.
pub(crate) fn reframed(
    body: Body,
    mut frame: impl FnMut(&str) -> Vec<Bytes> + Send + 'static,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let mut buf = Vec::<u8>::new();
    body.into_data_stream().flat_map(move |chunk| {
        let mut out = Vec::new();
        match chunk {
            Err(e) => out.push(Err(std::io::Error::other(e.to_string()))),
            Ok(c) => {
                buf.extend_from_slice(&c);
                while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = buf.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&event);
                    let data: Vec<&str> = text
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    if !data.is_empty() {
                        out.extend(frame(&data.join("\n")).into_iter().map(Ok));
                    }
                }
            }
        }
        futures_util::stream::iter(out)
    })
}

/// One event-stream message: the prelude (total and header lengths, their CRC-32), string
/// headers, the payload, the CRC-32 of all before it.
pub fn message(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(7); // a string
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value.as_bytes());
    }
    let total = 12 + h.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// A Bedrock API key, or a SigV4 signature by the account's access key.
fn authenticate(
    a: &Account,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Box<Response>> {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if let Some(key) = auth.strip_prefix("Bearer ") {
        return if a.api_keys.iter().any(|k| k == key) {
            Ok(())
        } else {
            Err(Box::new(aws_error(
                StatusCode::FORBIDDEN,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )))
        };
    }
    if auth.is_empty() {
        return Err(Box::new(aws_error(
            StatusCode::FORBIDDEN,
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        )));
    }
    sigv4::verify(
        a,
        &Method::POST,
        uri,
        headers,
        body,
        std::time::SystemTime::now(),
    )
}
