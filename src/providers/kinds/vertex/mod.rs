//! Google Vertex AI: Anthropic's Messages API on a company's Google Cloud project. The bytes are
//! the Messages API's (`anthropic`: a Claude Code turn keeps its thinking, cache control and
//! tools, and a stream is the same server-sent events); what is Vertex's is where and how:
//!
//! - `baseUrl` is the regional endpoint, `https://REGION-aiplatform.googleapis.com/v1`
//!   (`https://aiplatform.googleapis.com/v1` for the `global` region), with `project`; each
//!   model is a Vertex model id (`claude-sonnet-4-5@20250929`), which also answers to its
//!   Anthropic names. `POST {baseUrl}/projects/P/locations/R/publishers/anthropic/models/M:rawPredict`
//!   (`:streamRawPredict` for a stream);
//! - the body is the Messages API's without `model`, with `anthropic_version:
//!   "vertex-2023-10-16"` (Google's documented value; `stream` stays);
//! - authentication ([`google`]): an OAuth access token as a bearer, from the key (a token or a
//!   service account's JSON key) or the application-default credentials, exchanged before the
//!   request is built ([`Platform::exchange`]);
//! - its errors are Google's (`RESOURCE_EXHAUSTED` quota errors are rate limits).

pub mod google;

use futures_util::future::BoxFuture;

use super::{anthropic, Platform, UpstreamKind};
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
        Some(Box::pin(async move {
            let token = google::token(client, key.map(|k| k.secret.expose()), now_ms).await?;
            Ok(ApiKey {
                id: key.map(|k| k.id.clone()).unwrap_or_default(),
                secret: crate::providers::Secret::new(token),
            })
        }))
    }

    fn sign(
        &self,
        req: &mut reqwest::Request,
        _p: &ProviderEntry,
        key: Option<&ApiKey>,
        _now_ms: i64,
    ) -> Result<(), Classified> {
        let Some(key) = key else {
            return Err(crate::limits::classify_transport(
                "no Google access token for Vertex AI",
            ));
        };
        let mut v =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.secret.expose()))
                .map_err(|_| {
                    crate::limits::classify_transport("the token is not a valid header value")
                })?;
        v.set_sensitive(true);
        req.headers_mut().insert(reqwest::header::AUTHORIZATION, v);
        Ok(())
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

#[cfg(test)]
mod tests;
