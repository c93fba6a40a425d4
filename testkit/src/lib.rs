//! Fake upstream providers for tests and benchmarks: real HTTP servers on loopback that speak the
//! OpenAI Chat Completions API and follow a per-test script (200, 429, 5xx, resets, hangs, streams
//! that die or never finish). They record what they received.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

mod anthropic;
mod azure;
pub mod bedrock;
mod cache;
pub mod contract;
mod model;
mod modes;
mod proxy;
mod refuse;
mod vertex;
pub(crate) use model::{resolve_auto, schema_answer};
pub use modes::behavior_from_name;
mod control;
mod gemini;
mod openai;
mod responses;
mod search;
pub use search::BRAVE_KEY;

pub(crate) use openai::sse;
use openai::{answer, slow_stream, thinking_stream, Cut, Reply};

/// What the fake does with one request.
#[derive(Debug, Clone)]
pub enum Behavior {
    /// A normal answer ("<name>: <last user text>"), streamed when the request asks.
    Ok,
    /// A normal answer with this exact text.
    Text(String),
    /// A normal answer that never reports usage, even when asked (some servers do not).
    NoUsage,
    /// A tool call to `name` with these JSON arguments.
    ToolCall { name: String, arguments: String },
    /// Several tool calls in one turn (name, JSON arguments), as models make parallel calls.
    ToolCalls(Vec<(String, String)>),
    /// An error status with a JSON body and headers.
    Status {
        status: u16,
        body: Value,
        headers: Vec<(String, String)>,
    },
    /// Sends headers, then breaks the connection before any body.
    Reset,
    /// Never answers.
    Hang,
    /// Streams `n` content chunks, then closes without finishing.
    StreamDies(usize),
    /// Streams `n` content chunks, then stays silent forever.
    StreamStalls(usize),
    /// Streams `n` content chunks, then an event that is not JSON, then the rest of the answer.
    StreamMalformed(usize),
    /// A reasoning model: sends its headers at once, then a reasoning delta every 100 ms for
    /// this many ms (no content yet), then the answer.
    Thinks(u64),
    /// Streams the whole answer with a finish reason but never sends `[DONE]`.
    StreamNoDone,
    /// Streams `n` chunks `delay_ms` apart (for disconnect tests).
    SlowStream { chunks: usize, delay_ms: u64 },
    /// Waits this long, then answers normally.
    Delay(u64),
    /// A normal answer carrying these extra response headers (e.g. rate-limit counters).
    OkHeaders(Vec<(String, String)>),
    /// Like a real model: calls the first tool when the request offers tools and the last turn
    /// is the user's; otherwise answers like `Ok`.
    Auto,
}

/// A request as the fake received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Value,
    /// The body's bytes as they came (what a gateway relaying them verbatim must match).
    pub raw: Bytes,
}

#[derive(Default)]
pub(crate) struct Shared {
    name: String,
    /// As a forward proxy: the `USER:PASSWORD` it asks of every request (407 without it).
    pub(crate) proxy_login: Mutex<Option<String>>,
    script: Mutex<VecDeque<Behavior>>,
    fallback: Mutex<Option<Behavior>>,
    received: Mutex<Vec<Received>>,
    hits: AtomicUsize,
    /// Requests are kept for `received()` unless a long run turns it off.
    forget: std::sync::atomic::AtomicBool,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Responses whose body was dropped before it finished (the client went away).
    abandoned: AtomicUsize,
    /// Refuse requests not authenticated the way the real API wants (see `strict_auth`).
    strict: std::sync::atomic::AtomicBool,
    /// The headers of every model-list request (`model_list_requests()`).
    lists: Mutex<Vec<HeaderMap>>,
    /// The one subscription token Anthropic requests must carry (`only_subscription`).
    subscription: Mutex<Option<String>>,
    /// Standing for Mistral's API: tool call ids must be nine letters and digits.
    pub(crate) nine_alphanumeric_ids: std::sync::atomic::AtomicBool,
    /// Answers report prompt-cache usage (`report_cache_usage`).
    cache_usage: std::sync::atomic::AtomicBool,
    /// A prompt cache per key (`model_prompt_cache`): the digests of the prompts each key sent.
    prompt_cache: Mutex<Option<std::collections::HashMap<String, std::collections::HashSet<u64>>>>,
    /// Every body refused as the real API would refuse it (`refusals`): the API's message.
    refusals: Mutex<Vec<String>>,
    /// The test sends bodies the API refuses on purpose (`expect_refusals`).
    refusals_expected: std::sync::atomic::AtomicBool,
    /// Benchmarks only: bodies are not checked (`unchecked_for_benchmarks`).
    unchecked: std::sync::atomic::AtomicBool,
    /// The queries the fake search services were asked (`searches`).
    searches: Mutex<Vec<String>>,
    /// Azure OpenAI's deployments on this resource (`azure_deployments`).
    pub(crate) azure: Mutex<Vec<String>>,
    /// The path and query of every request its Azure routes took (`azure_calls`).
    pub(crate) azure_calls: Mutex<Vec<String>>,
    /// Its Bedrock routes' AWS account (`bedrock_account`), and each request they took.
    pub(crate) bedrock: Mutex<bedrock::Account>,
    pub(crate) bedrock_calls: Mutex<Vec<serde_json::Value>>,
    /// Its Vertex AI routes' Google Cloud account (`vertex_account`).
    pub(crate) vertex: Mutex<vertex::Account>,
}

/// A running fake upstream. Dropping it stops the server.
pub struct FakeUpstream {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeUpstream {
    /// The contract check: a test whose fake refused a body that the real API would refuse fails
    /// here, even when what Baton made of the refusal looked fine to the test (a failover, an
    /// error the test expected for another reason), unless the test said it sends such bodies.
    fn drop(&mut self) {
        self.task.abort();
        let refused = self
            .shared
            .refusals
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default();
        if !refused.is_empty()
            && !self.shared.refusals_expected.load(Ordering::SeqCst)
            && !std::thread::panicking()
        {
            panic!(
                "fake upstream {:?} refused {} request(s) as the real API would: {refused:?}",
                self.shared.name,
                refused.len()
            );
        }
    }
}

impl FakeUpstream {
    /// Starts a fake named `name` on `127.0.0.1:0`; unscripted requests get `Behavior::Ok`.
    pub async fn start(name: &str) -> Self {
        Self::start_on(name, "127.0.0.1:0").await
    }

    pub async fn start_on(name: &str, addr: &str) -> Self {
        let shared = Arc::new(Shared {
            name: name.to_string(),
            ..Shared::default()
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(openai::models))
            .route("/v1/responses", post(responses::create))
            .route("/v1/messages", post(anthropic::messages))
            .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
            .route("/v1beta/models", get(gemini::models))
            .route("/v1beta/models/{*rest}", post(gemini::generate))
            .route(
                "/openai/deployments/{deployment}/chat/completions",
                post(azure::deployment_chat),
            )
            .route("/openai/v1/chat/completions", post(azure::v1_chat))
            .route("/openai/v1/models", get(azure::v1_models))
            .route("/model/{model}/{op}", post(bedrock::invoke))
            .route("/token", post(vertex::token))
            .route(
                "/v1/projects/{project}/locations/{region}/publishers/{publisher}/models/{rest}",
                post(vertex::predict),
            )
            .route("/search", get(search::searxng))
            .route("/res/v1/web/search", get(search::brave))
            .route("/_script", post(control::script))
            .route("/_stats", get(control::stats))
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                proxy::gate,
            ))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared, task }
    }

    /// The base URL for a `gemini` provider.
    pub fn gemini_base_url(&self) -> String {
        self.base_url_for("gemini")
    }

    /// The base URL to put in a provider's `baseUrl`.
    pub fn base_url(&self) -> String {
        self.base_url_for("openai-compatible")
    }

    /// The `baseUrl` for a provider of `kind`: Gemini's API is under `/v1beta`, the others' `/v1`.
    pub fn base_url_for(&self, kind: &str) -> String {
        let version = if kind == "gemini" { "v1beta" } else { "v1" };
        format!("http://{}/{version}", self.addr)
    }

    /// Queues behaviours for the next requests, in order.
    pub fn script(&self, behaviors: impl IntoIterator<Item = Behavior>) {
        self.shared.script.lock().unwrap().extend(behaviors);
    }

    /// Behaviour for requests once the script is used up.
    pub fn always(&self, b: Behavior) {
        *self.shared.fallback.lock().unwrap() = Some(b);
    }

    /// The queries its fake search services (SearXNG at `/search`, Brave at
    /// `/res/v1/web/search`) answered.
    pub fn searches(&self) -> Vec<String> {
        self.shared.searches.lock().unwrap().clone()
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// The headers of each `GET …/models` so far (model discovery).
    pub fn model_list_requests(&self) -> Vec<HeaderMap> {
        self.shared.lists.lock().unwrap().clone()
    }

    pub fn hits(&self) -> usize {
        self.shared.hits.load(Ordering::SeqCst)
    }

    /// Stops keeping requests for `received()` (long runs that measure memory).
    pub fn forget_requests(&self) {
        self.shared.forget.store(true, Ordering::SeqCst);
        self.shared.received.lock().unwrap().clear();
    }

    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(Ordering::SeqCst)
    }

    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    pub fn abandoned(&self) -> usize {
        self.shared.abandoned.load(Ordering::SeqCst)
    }

    /// From now on, refuse what the real APIs refuse: Messages requests without `x-api-key`
    /// and `anthropic-version` (or with a Bearer token), Gemini requests without
    /// `x-goog-api-key`, chat completions without `Authorization: Bearer` — each with that
    /// API's own error answer.
    /// Anthropic and Responses endpoints that take only this subscription login, as Claude Code
    /// and Codex send it (`Authorization: Bearer …`; for Anthropic no `x-api-key` either), and
    /// refuse anything else.
    pub fn only_subscription(&self, token: &str) {
        *self.shared.subscription.lock().unwrap() = Some(token.to_string());
    }

    /// From now on, every answer's usage says its prompt was mostly read from the provider's
    /// prompt cache, in the API's own fields: 100 prompt tokens, 80 of them read from the cache
    /// (Anthropic: 18 uncached, 80 read, 2 written).
    pub fn report_cache_usage(&self) {
        self.shared.cache_usage.store(true, Ordering::SeqCst);
    }

    pub fn strict_auth(&self) {
        self.shared.strict.store(true, Ordering::SeqCst);
    }

    /// What this fake refused because the body broke the API's contract (`contract.rs`), in
    /// the API's own words.
    pub fn refusals(&self) -> Vec<String> {
        self.shared.refusals.lock().unwrap().clone()
    }

    /// For benchmarks only: bodies are not checked against the API's contract, so the fake
    /// costs what the cheapest upstream would (it stands for the physical limit there; the
    /// tests hold Baton to the contract).
    pub fn unchecked_for_benchmarks(&self) {
        self.shared.unchecked.store(true, Ordering::SeqCst);
    }

    /// This test sends bodies the real API refuses on purpose: dropping the fake does not fail
    /// the test for them (check `refusals()` instead).
    pub fn expect_refusals(&self) {
        self.shared.refusals_expected.store(true, Ordering::SeqCst);
    }
}

impl Shared {
    pub(crate) fn strict(&self) -> bool {
        self.strict.load(Ordering::SeqCst)
    }

    pub(crate) fn cached(&self) -> bool {
        self.cache_usage.load(Ordering::SeqCst)
    }
}

impl Shared {
    /// Counts a request and keeps it for `received()`.
    pub(crate) fn receive(&self, r: Received) {
        self.hits.fetch_add(1, Ordering::SeqCst);
        if !self.forget.load(Ordering::SeqCst) {
            self.received.lock().unwrap().push(r);
        }
    }

    /// The next scripted behaviour, else the standing one, else a normal answer.
    pub(crate) fn next_behavior(&self) -> Behavior {
        self.script
            .lock()
            .unwrap()
            .pop_front()
            .or_else(|| self.fallback.lock().unwrap().clone())
            .unwrap_or(Behavior::Ok)
    }
}

/// Counts a request as in flight until dropped.
pub(crate) struct InFlight(Arc<Shared>);

impl InFlight {
    pub(crate) fn new(s: Arc<Shared>) -> Self {
        let n = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_in_flight.fetch_max(n, Ordering::SeqCst);
        Self(s)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Marks a streamed body abandoned when dropped before `done` is set.
struct Abandon {
    shared: Arc<Shared>,
    done: bool,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if !self.done {
            self.shared.abandoned.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A scripted error answer: that status, that JSON body, those headers.
pub(crate) fn status_response(
    status: u16,
    body: Value,
    headers: Vec<(String, String)>,
) -> Response {
    let mut resp = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    for (k, v) in headers {
        resp.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    resp
}

/// The fake's Chat Completions endpoint. Long because it is the fake's behaviour table: one arm
/// per scripted behaviour a test can ask for (a status, a hang, a stream that dies, stalls or
/// turns malformed, a slow stream, a tool call…).
pub(crate) async fn chat(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = body.clone();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "));
    s.receive(Received {
        headers: headers.clone(),
        body: body.clone(),
        raw,
    });
    if s.strict() && !bearer {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {"message": "You didn't provide an API key.", "type": "invalid_request_error", "code": null}})),
        )
            .into_response();
    }
    if let Some(r) = s.contract(contract::Api::OpenAiChat, &body) {
        return r;
    }
    if let Some(r) = openai::refuse_conversation(&s, &body) {
        return r;
    }
    let guard = InFlight::new(s.clone());
    let behavior = s.next_behavior();
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let usage = openai::Usage {
        in_stream: body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        value: s.chat_usage(&headers, &body),
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake")
        .to_string();
    // The last user text: a string, or the last text part of a parts array.
    let last_user = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m.get("content"))
        .and_then(|c| match c {
            Value::String(s) => Some(s.clone()),
            Value::Array(parts) => parts
                .iter()
                .rev()
                .find_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string)),
            _ => None,
        })
        .unwrap_or_default();
    let text = schema_answer(&body).unwrap_or_else(|| format!("{}: {}", s.name, last_user));
    let behavior = match behavior {
        Behavior::Auto => openai::auto_behavior(&body),
        b => b,
    };
    match behavior {
        Behavior::OkHeaders(extra) => {
            let mut resp = answer(&s, guard, stream, usage, &model, Reply::Text(text), None).await;
            for (k, v) in extra {
                resp.headers_mut().insert(
                    axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                );
            }
            resp
        }
        // A model stops at the request's token limit, whatever it was saying.
        b @ (Behavior::Ok | Behavior::Auto | Behavior::Text(_)) => {
            let said = match b {
                Behavior::Text(t) => t,
                _ => text,
            };
            let reply = match crate::model::within_limit(said, &body) {
                (t, true) => Reply::Cut(t),
                (t, false) => Reply::Text(t),
            };
            answer(&s, guard, stream, usage, &model, reply, None).await
        }
        Behavior::NoUsage => {
            answer(
                &s,
                guard,
                stream,
                usage.quiet(),
                &model,
                Reply::Text(text),
                None,
            )
            .await
        }
        Behavior::ToolCall { name, arguments } => {
            answer(
                &s,
                guard,
                stream,
                usage,
                &model,
                Reply::Tools(vec![(name, arguments)]),
                None,
            )
            .await
        }
        Behavior::ToolCalls(calls) => {
            answer(&s, guard, stream, usage, &model, Reply::Tools(calls), None).await
        }
        Behavior::Delay(ms) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            answer(&s, guard, stream, usage, &model, Reply::Text(text), None).await
        }
        Behavior::Status {
            status,
            body,
            headers,
        } => crate::status_response(status, body, headers),
        Behavior::Reset => {
            let s = futures_util::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("reset"))
            });
            Response::new(Body::from_stream(s))
        }
        Behavior::Hang => {
            let _g = guard;
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
        Behavior::StreamDies(n) | Behavior::StreamMalformed(n) | Behavior::StreamStalls(n) => {
            let cut = match behavior {
                Behavior::StreamDies(_) => Cut::Die(n),
                Behavior::StreamMalformed(_) => Cut::Malformed(n),
                _ => Cut::Stall(n),
            };
            answer(
                &s,
                guard,
                true,
                usage.quiet(),
                &model,
                Reply::Text(text),
                Some(cut),
            )
            .await
        }
        Behavior::StreamNoDone => {
            answer(
                &s,
                guard,
                true,
                usage,
                &model,
                Reply::Text(text),
                Some(Cut::NoDone),
            )
            .await
        }
        Behavior::SlowStream { chunks, delay_ms } => {
            let words: Vec<String> = (0..chunks).map(|i| format!("w{i} ")).collect();
            slow_stream(s.clone(), guard, model, words, delay_ms)
        }
        Behavior::Thinks(ms) => thinking_stream(s.clone(), guard, model, ms, text),
    }
}
