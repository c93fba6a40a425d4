//! The HTTP request one attempt sends to an HTTP upstream, for every kind: URL, authentication
//! and body in the upstream's own format. Routing, the UI's Test and `baton probe` all build
//! their requests here, so they cannot drift apart (they did: probe once sent an OpenAI body
//! with Bearer auth to Anthropic and POSTed to `{baseUrl}/models` for Gemini).

use serde_json::{Map, Value};

use super::{anthropic, gemini, openai_compat, openai_responses, ApiKey, ModelInfo, ProviderEntry};
use crate::canonical::ChatRequest;
use crate::limits::{self, Classified};

pub use crate::canonical::Wire;

pub use super::thinking::Keep;

pub use super::anthropic::{
    DEFAULT_MAX_TOKENS as DEFAULT_ANTHROPIC_MAX_TOKENS, VERSION as ANTHROPIC_VERSION,
};

/// What the client asked for, in the forms an upstream may take it in.
pub struct Outbound<'a> {
    /// The request in OpenAI form (the client's own body when it spoke OpenAI).
    pub openai_body: &'a Map<String, Value>,
    /// The client's own body and its API, when it spoke another than Chat Completions: sent
    /// unchanged (but for the model) to upstreams of that API.
    pub original: Option<(Wire, &'a Map<String, Value>)>,
    /// The client's own credential and identification headers, for providers with
    /// `credentials: "client"` (sent instead of any key of Baton's).
    pub client: Option<&'a super::ClientCredential>,
    /// `anthropic-beta` from the client, for Anthropic upstreams.
    pub anthropic_beta: Option<&'a str>,
    pub canonical: &'a ChatRequest,
    pub stream: bool,
    pub request_id: &'a str,
    /// Which of the client's thinking blocks may go to this account (Anthropic upstreams).
    pub thinking: super::thinking::Keep<'a>,
}

impl Outbound<'_> {
    /// The client's own body, when it spoke `wire`.
    pub fn original(&self, wire: Wire) -> Option<&Map<String, Value>> {
        self.original.filter(|(w, _)| *w == wire).map(|(_, b)| b)
    }
}

/// Builds the request for `model` on provider `p` with `key`, in the provider's format.
pub fn build(
    client: &reqwest::Client,
    p: &ProviderEntry,
    model: &ModelInfo,
    key: Option<&ApiKey>,
    o: &Outbound,
) -> Result<(reqwest::RequestBuilder, Wire), Classified> {
    let Some(url) = p.chat_url.clone() else {
        return Err(limits::classify_transport(
            "provider base URL is not a valid URL",
        ));
    };
    let Some(wire) = p.config.kind.wire() else {
        return Err(limits::classify_transport("not an HTTP provider"));
    };
    // The account's key stands for the client's credential, which goes in its own headers.
    let key = if p.config.credentials.is_baton() {
        key
    } else {
        None
    };
    let rb = match wire {
        Wire::OpenAi => {
            // A translated request's effort, for an OpenAI reasoning model (the client's own
            // OpenAI body already says it, to any model).
            let effort = o
                .canonical
                .effort
                .as_deref()
                .filter(|_| o.original.is_some())
                .filter(|_| crate::canonical::effort::openai_reasons(&model.id));
            let with_effort = effort.map(|e| {
                let mut b = o.openai_body.clone();
                b.insert("reasoning_effort".into(), Value::from(e));
                b
            });
            let body = openai_compat::passthrough_body(
                with_effort.as_ref().unwrap_or(o.openai_body),
                &model.id,
                model.max_output_tokens,
            );
            openai_compat::build(client, url, p, key, body, o.stream, o.request_id)
        }
        Wire::Responses => {
            let body = openai_responses::body(o, model, p.config.credentials.is_baton());
            openai_responses::request(client, url, p, key, body, o)
        }
        Wire::Anthropic => anthropic::request(client, url, p, key, anthropic::body(o, model), o),
        Wire::Gemini => gemini::request(client, &url, p, model, key, o)?,
    };
    // The client's own credential goes to a `credentials: "client"` provider, and only there.
    let rb = match (p.config.credentials, o.client) {
        (crate::config::Credentials::Client, Some(c)) => c
            .headers
            .iter()
            .fold(rb, |rb, (name, value)| rb.header(name, value.clone())),
        _ => rb,
    };
    Ok((rb, wire))
}

/// `GET {baseUrl}/models` with the kind's own authentication (model discovery).
pub fn models_request(
    client: &reqwest::Client,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
) -> Result<reqwest::RequestBuilder, String> {
    let wire = p.config.kind.wire().ok_or("not an HTTP provider")?;
    let url = format!("{}/models", p.config.base_url.trim_end_matches('/'));
    let rb = client.get(url);
    Ok(match wire {
        Wire::OpenAi | Wire::Responses => openai_compat::authorize(rb, p, key),
        Wire::Anthropic => anthropic::authorize(rb, p, key),
        Wire::Gemini => gemini::authorize(rb, p, key),
    })
}

/// `GET {baseUrl}/models?client_version=…` on the client's own login, for a
/// `credentials: "client"` provider: Codex asks its provider for its models' metadata so.
pub fn client_models_request(
    client: &reqwest::Client,
    p: &ProviderEntry,
    credential: &super::ClientCredential,
    client_version: &str,
) -> reqwest::RequestBuilder {
    // Only a version's own characters go into the URL.
    let version: String = client_version
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        .take(40)
        .collect();
    let base = p.config.base_url.trim_end_matches('/');
    let rb = client.get(format!("{base}/models?client_version={version}"));
    credential
        .headers
        .iter()
        .fold(rb, |rb, (name, value)| rb.header(name, value.clone()))
}

/// A transport error in words, without URLs (which could carry credentials for some services).
pub fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "response body broke off"
    } else if e.is_request() {
        "request failed"
    } else {
        "error"
    };
    let mut detail = String::new();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        detail = s.to_string();
        src = s.source();
    }
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {detail}")
    }
}
