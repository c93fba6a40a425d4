//! Google Vertex AI: Anthropic's Messages API ([`VertexAnthropic`]) and Gemini's API
//! ([`VertexGemini`]) on a company's Google Cloud project. The bytes are those APIs' (a Claude
//! Code turn keeps its thinking, cache control and tools; a Gemini client's body goes as it
//! came); what is Vertex's is where and how:
//!
//! - `baseUrl` is the regional endpoint, `https://REGION-aiplatform.googleapis.com/v1`
//!   (`https://aiplatform.googleapis.com/v1` for the `global` region), with `project`; each
//!   model is a Vertex model id (`claude-sonnet-4-5@20250929`, which also answers to its
//!   Anthropic names; `gemini-2.5-pro`). `POST {baseUrl}/projects/P/locations/R/publishers/anthropic/models/M:rawPredict`
//!   (`:streamRawPredict` for a stream), or `…/publishers/google/models/M:generateContent`
//!   (`:streamGenerateContent?alt=sse`);
//! - a Messages body goes without `model`, with `anthropic_version: "vertex-2023-10-16"`
//!   (Google's documented value; `stream` stays); a Gemini body as the Gemini API's;
//! - authentication ([`google`]): an OAuth access token as a bearer, from the key (a token or a
//!   service account's JSON key) or the application-default credentials, exchanged before the
//!   request is built ([`Platform::exchange`]);
//! - its errors are Google's (`RESOURCE_EXHAUSTED` quota errors are rate limits).

pub mod google;

use futures_util::future::BoxFuture;

use super::{anthropic, gemini, Platform, UpstreamKind};
use crate::limits::Classified;
use crate::providers::{ApiKey, ProviderEntry};

/// The `anthropic_version` Vertex AI's Messages API takes in the body.
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Google Vertex AI's platform for Anthropic's models.
pub struct VertexAnthropic;

impl Platform for VertexAnthropic {
    fn api(&self) -> &'static dyn UpstreamKind {
        &anthropic::Anthropic
    }

    fn url(&self, p: &ProviderEntry, model: &str, stream: bool) -> Option<reqwest::Url> {
        let base = p.config.base_url.trim_end_matches('/');
        let region = p.config.vertex_region()?;
        let project = p.config.project.as_deref()?;
        let mut url = reqwest::Url::parse(&format!("{base}/")).ok()?;
        let method = if stream {
            "streamRawPredict"
        } else {
            "rawPredict"
        };
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .extend(["projects", project, "locations", &region])
            .extend(["publishers", "anthropic", "models"])
            .push(&format!("{model}:{method}"));
        Some(url)
    }

    fn own_auth(&self) -> bool {
        true
    }

    /// The model leaves the body (it is in the path); the version goes in.
    fn shape(&self, req: &mut reqwest::Request) -> Result<(), Classified> {
        req.headers_mut().remove("anthropic-version");
        let Some(body) = req.body().and_then(reqwest::Body::as_bytes) else {
            return Ok(());
        };
        let body = anthropic::platform_body(body, ANTHROPIC_VERSION, &[], &["model"])?;
        *req.body_mut() = Some(body.into());
        Ok(())
    }

    fn exchange<'a>(
        &'a self,
        client: &'a reqwest::Client,
        _p: &'a ProviderEntry,
        key: Option<&'a ApiKey>,
        now_ms: i64,
    ) -> Option<BoxFuture<'a, Result<ApiKey, Classified>>> {
        Some(exchange(client, key, now_ms))
    }

    fn sign(
        &self,
        req: &mut reqwest::Request,
        _p: &ProviderEntry,
        key: Option<&ApiKey>,
        _now_ms: i64,
    ) -> Result<(), Classified> {
        bearer(req, key)
    }

    /// Vertex lists no publisher models Baton reads: the configured ones are the ones there are.
    fn models_url(&self, _p: &ProviderEntry) -> Option<String> {
        None
    }

    /// `claude-sonnet-4-5@20250929` serves `claude-sonnet-4-5-20250929` and `claude-sonnet-4-5`.
    fn serves(&self, model: &str) -> Vec<String> {
        match model.split_once('@') {
            Some((name, version)) if !version.is_empty() => {
                vec![format!("{name}-{version}"), name.to_string()]
            }
            _ => Vec::new(),
        }
    }
}

/// Google Vertex AI's platform for Gemini models: the Gemini API's body and events at a
/// publisher model of Google's, with the same access token.
pub struct VertexGemini;

impl Platform for VertexGemini {
    fn api(&self) -> &'static dyn UpstreamKind {
        &gemini::Gemini
    }

    /// The models' collection: the Gemini API adds `/{model}:generateContent`.
    fn url(&self, p: &ProviderEntry, _model: &str, _stream: bool) -> Option<reqwest::Url> {
        publisher_models(p, "google")
    }

    fn own_auth(&self) -> bool {
        true
    }

    fn exchange<'a>(
        &'a self,
        client: &'a reqwest::Client,
        _p: &'a ProviderEntry,
        key: Option<&'a ApiKey>,
        now_ms: i64,
    ) -> Option<BoxFuture<'a, Result<ApiKey, Classified>>> {
        Some(exchange(client, key, now_ms))
    }

    fn sign(
        &self,
        req: &mut reqwest::Request,
        _p: &ProviderEntry,
        key: Option<&ApiKey>,
        _now_ms: i64,
    ) -> Result<(), Classified> {
        bearer(req, key)
    }

    fn models_url(&self, _p: &ProviderEntry) -> Option<String> {
        None
    }
}

/// `{baseUrl}/projects/P/locations/R/publishers/{publisher}/models`.
fn publisher_models(p: &ProviderEntry, publisher: &str) -> Option<reqwest::Url> {
    let base = p.config.base_url.trim_end_matches('/');
    let region = p.config.vertex_region()?;
    let project = p.config.project.as_deref()?;
    let mut url = reqwest::Url::parse(&format!("{base}/")).ok()?;
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .extend(["projects", project, "locations", &region])
        .extend(["publishers", publisher, "models"]);
    Some(url)
}

/// The access token for `key` (or the application-default credentials), as the key a request
/// is signed with.
fn exchange<'a>(
    client: &'a reqwest::Client,
    key: Option<&'a ApiKey>,
    now_ms: i64,
) -> BoxFuture<'a, Result<ApiKey, Classified>> {
    Box::pin(async move {
        let token = google::token(client, key.map(|k| k.secret.expose()), now_ms).await?;
        Ok(ApiKey {
            id: key.map(|k| k.id.clone()).unwrap_or_default(),
            secret: crate::providers::Secret::new(token),
        })
    })
}

/// The access token as a bearer.
fn bearer(req: &mut reqwest::Request, key: Option<&ApiKey>) -> Result<(), Classified> {
    let Some(key) = key else {
        return Err(crate::limits::classify_transport(
            "no Google access token for Vertex AI",
        ));
    };
    super::put_secret(
        req,
        reqwest::header::AUTHORIZATION,
        &format!("Bearer {}", key.secret.expose()),
    )
}

#[cfg(test)]
mod tests;
