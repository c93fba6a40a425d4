//! The HTTP request one attempt sends to an HTTP upstream, for every kind: URL, authentication
//! and body in the upstream's own format. Routing, the UI's Test and `baton probe` all build
//! their requests here, so they cannot drift apart (they did: probe once sent an OpenAI body
//! with Bearer auth to Anthropic and POSTed to `{baseUrl}/models` for Gemini).

use super::{ApiKey, ModelInfo, ProviderEntry};
use crate::limits::{self, Classified};

pub use crate::canonical::Wire;

pub use super::kinds::{Outbound, Verbatim};
pub use super::thinking::Keep;

pub use super::kinds::anthropic::{
    DEFAULT_MAX_TOKENS as DEFAULT_ANTHROPIC_MAX_TOKENS, VERSION as ANTHROPIC_VERSION,
};

/// Builds the request for `model` on provider `p` with `key`, in the provider's format.
pub fn build(
    client: &reqwest::Client,
    p: &ProviderEntry,
    model: &ModelInfo,
    key: Option<&ApiKey>,
    o: &Outbound,
) -> Result<(reqwest::RequestBuilder, Wire), Classified> {
    let Some(wire) = p.config.kind.wire() else {
        return Err(limits::classify_transport("not an HTTP provider"));
    };
    // The account's key stands for the client's credential, which goes in its own headers.
    let key = if p.config.credentials.is_baton() {
        key
    } else {
        None
    };
    let rb = super::kinds::request(client, p, model, key, o)?;
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

/// [`build`], once the platform has made its credential of `key` (Vertex AI's access token,
/// exchanged for a service account's key): what routing and `baton probe` send.
pub async fn build_signed(
    client: &reqwest::Client,
    p: &ProviderEntry,
    model: &ModelInfo,
    key: Option<&ApiKey>,
    o: &Outbound<'_>,
) -> Result<(reqwest::RequestBuilder, Wire), Classified> {
    let made = super::kinds::exchanged(client, p, key, o.now_ms).await?;
    build(client, p, model, made.as_ref().or(key), o)
}

/// The provider's model list (`GET {baseUrl}/models` for most), with its platform's
/// authentication (model discovery); an error for a platform with no list Baton reads.
pub fn models_request(
    client: &reqwest::Client,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
    now_ms: i64,
) -> Result<reqwest::RequestBuilder, String> {
    let platform = super::kinds::platform(p.config.kind).ok_or("not an HTTP provider")?;
    let url = platform
        .models_url(p)
        .ok_or("it lists no models: its configured models are the ones there are")?;
    super::kinds::authorize(client, p, client.get(url), key, now_ms).map_err(|c| c.reason)
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
