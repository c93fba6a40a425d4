//! Google Vertex AI: Anthropic's Messages API ([`ANTHROPIC`]) and Gemini's API ([`GEMINI`]) on
//! a company's Google Cloud project. The bytes are those APIs' (a Claude
//! Code turn keeps its thinking, cache control and tools; a Gemini client's body goes as it
//! came); what is Vertex's is where and how:
//!
//! - `baseUrl` is the regional endpoint, `https://REGION-aiplatform.googleapis.com/v1`
//!   (`https://aiplatform.googleapis.com/v1` for the `global` region), with `project`; each
//!   model is a Vertex model id (`claude-sonnet-4-5@20250929`, which also answers to its
//!   Anthropic names; `gemini-2.5-pro`).
//!   `POST {baseUrl}/projects/P/locations/R/publishers/anthropic/models/M:rawPredict`
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

use super::contract::{Platform, UpstreamKind};
use super::{anthropic, gemini};
use crate::canonical::Wire;
use crate::config::kind::{Hint, KindSpec, Own};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::{ApiKey, ProviderEntry};

/// The `anthropic_version` Vertex AI's Messages API takes in the body.
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Google Vertex AI's platform for one publisher's models: where they are, and how the API they
/// speak is called there.
pub struct Vertex {
    /// `anthropic` (the Messages API, `:rawPredict`) or `google` (the Gemini API).
    publisher: &'static str,
    api: &'static dyn UpstreamKind,
}

/// Claude on Vertex AI.
pub static ANTHROPIC: Vertex = Vertex {
    publisher: "anthropic",
    api: &anthropic::Anthropic,
};

/// Gemini on Vertex AI.
pub static GEMINI: Vertex = Vertex {
    publisher: "google",
    api: &gemini::Gemini,
};

/// Where the Vertex AI kinds are, and what they take without a key.
const VERTEX_URL_HINT: Hint = Hint {
    text: n_("Your region's endpoint, e.g. {example}; Vertex model ids ({model}) are the models"),
    values: &[],
};
const VERTEX_KEY_HINT: Hint = Hint {
    text: n_("A service account's JSON key (paste the whole file), or an access token."),
    values: &[],
};
const VERTEX_NO_KEY_HINT: Hint = Hint {
    text: n_(
        "No key: Baton uses the Google application-default credentials ({variable}, or {command}).",
    ),
    values: &[
        ("variable", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("command", "gcloud auth application-default login"),
    ],
};

/// The `vertex-anthropic` kind.
pub static ANTHROPIC_SPEC: KindSpec = KindSpec {
    name: "vertex-anthropic",
    order: 70,
    doc: "Google Vertex AI: Anthropic's Messages API on a company's Google Cloud project (`baseUrl`\n`https://REGION-aiplatform.googleapis.com/v1`, with `project`); models are Vertex model\nids (`claude-sonnet-4-5@20250929`); OAuth access tokens.",
    label: n_("Claude on Google Vertex AI"),
    badge: "Vx",
    wire: Some(Wire::Anthropic),
    base_url_example: Some("https://us-east5-aiplatform.googleapis.com/v1"),
    base_url_hint: Some(VERTEX_URL_HINT),
    key_hint: Some(VERTEX_KEY_HINT),
    no_key_hint: Some(VERTEX_NO_KEY_HINT),
    sample_model: Some("claude-sonnet-4-5@20250929"),
    fields: &["project", "region"],
    check: Some(check),
    credentials_file: true,
    ..KindSpec::BASE
};

/// The `vertex-gemini` kind.
pub static GEMINI_SPEC: KindSpec = KindSpec {
    name: "vertex-gemini",
    order: 80,
    doc: "Google Vertex AI: Gemini's API on a company's Google Cloud project (as\n`vertex-anthropic`; models are Gemini model ids).",
    label: n_("Gemini on Google Vertex AI"),
    badge: "VG",
    wire: Some(Wire::Gemini),
    base_url_example: Some("https://us-central1-aiplatform.googleapis.com/v1"),
    base_url_hint: Some(VERTEX_URL_HINT),
    key_hint: Some(VERTEX_KEY_HINT),
    no_key_hint: Some(VERTEX_NO_KEY_HINT),
    sample_model: Some("gemini-2.5-pro"),
    fields: &["project", "region"],
    check: Some(check),
    credentials_file: true,
    ..KindSpec::BASE
};

/// The `vertex-anthropic` kind.
pub const ANTHROPIC_KIND: ProviderKind = ProviderKind::of(&ANTHROPIC_SPEC);
/// The `vertex-gemini` kind.
pub const GEMINI_KIND: ProviderKind = ProviderKind::of(&GEMINI_SPEC);

super::contract::register!(ANTHROPIC_SPEC, &ANTHROPIC);
super::contract::register!(GEMINI_SPEC, &GEMINI);

/// The region of its requests' path: `region`, else the one the endpoint names
/// (`REGION-aiplatform.googleapis.com`; `aiplatform.googleapis.com` is `global`).
pub fn region(base_url: &str, region: Option<&str>) -> Option<String> {
    super::contract::region_of(base_url, region, |host| {
        if host == "aiplatform.googleapis.com" {
            return Some("global".into());
        }
        host.strip_suffix("-aiplatform.googleapis.com")
            .filter(|r| !r.is_empty() && !r.contains('.'))
            .map(str::to_string)
    })
}

/// A region known and the project given.
fn check(own: &Own) -> Result<(), (&'static str, String)> {
    if region(own.base_url, own.region).is_none() {
        return Err(("region", crate::i18n::msg("Vertex AI needs the region: use its regional endpoint (https://us-east5-aiplatform.googleapis.com/v1) or give `region`", &[])));
    }
    let project_ok = own.project.is_some_and(|v| {
        !v.is_empty()
            && v.len() <= 64
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == ':' || c == '.')
    });
    if !project_ok {
        return Err((
            "project",
            crate::i18n::msg(
                "Vertex AI needs the id of the Google Cloud project whose models it calls",
                &[],
            ),
        ));
    }
    Ok(())
}

impl Vertex {
    fn is_anthropic(&self) -> bool {
        self.publisher == "anthropic"
    }
}

impl Platform for Vertex {
    fn gen_ai_system(&self) -> &'static str {
        "gcp.vertex_ai"
    }

    fn api(&self) -> &'static dyn UpstreamKind {
        self.api
    }

    /// Claude's model with its method; for Gemini the collection, to which the Gemini API adds
    /// `/{model}:generateContent`.
    fn url(&self, p: &ProviderEntry, model: &str, stream: bool) -> Option<reqwest::Url> {
        let mut url = publisher_models(p, self.publisher)?;
        if self.is_anthropic() {
            let method = if stream {
                "streamRawPredict"
            } else {
                "rawPredict"
            };
            url.path_segments_mut()
                .ok()?
                .push(&format!("{model}:{method}"));
        }
        Some(url)
    }

    fn own_auth(&self) -> bool {
        true
    }

    /// A Messages body loses its model (it is in the path) and gains Vertex's version.
    fn shape(&self, req: &mut reqwest::Request) -> Result<(), Classified> {
        if !self.is_anthropic() {
            return Ok(());
        }
        req.headers_mut().remove("anthropic-version");
        let Some(body) = req.body().and_then(reqwest::Body::as_bytes) else {
            return Ok(());
        };
        let body = anthropic::platform_body(body, ANTHROPIC_VERSION, &[], &["model"])?;
        *req.body_mut() = Some(body.into());
        Ok(())
    }

    /// Vertex AI counts tokens: Claude's at the `count-tokens` publisher model (`:rawPredict`,
    /// the model named in the body), Gemini's at the model's `:countTokens`.
    fn counts_tokens(&self) -> bool {
        true
    }

    fn count_shape(
        &self,
        p: &ProviderEntry,
        model: &str,
        req: &mut reqwest::Request,
    ) -> Result<bool, Classified> {
        let Some(mut url) = publisher_models(p, self.publisher) else {
            return Ok(false);
        };
        let method = if self.is_anthropic() {
            "count-tokens:rawPredict".to_string()
        } else {
            format!("{model}:countTokens")
        };
        if let Ok(mut path) = url.path_segments_mut() {
            path.push(&method);
        }
        *req.url_mut() = url;
        if self.is_anthropic() {
            // The Messages API's count body, with its model, as it is.
            req.headers_mut().remove("anthropic-version");
            req.headers_mut().remove("anthropic-beta");
            return Ok(true);
        }
        // Vertex takes the request's contents, system instruction and tools themselves, not the
        // Gemini API's `generateContentRequest` (whose `model` names no Vertex resource).
        let Some(body) = req.body().and_then(reqwest::Body::as_bytes) else {
            return Ok(false);
        };
        let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)
            .map_err(|e| crate::limits::classify_transport(format!("request body: {e}")))?;
        let mut inner = match v.remove("generateContentRequest") {
            Some(serde_json::Value::Object(m)) => m,
            _ => v,
        };
        inner.retain(|k, _| {
            matches!(
                k.as_str(),
                "contents" | "systemInstruction" | "tools" | "generationConfig"
            )
        });
        *req.body_mut() = Some(serde_json::to_vec(&inner).unwrap_or_default().into());
        Ok(true)
    }

    /// The access token for the key (or the application-default credentials).
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

    /// The access token as a bearer.
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
        let bearer = format!("Bearer {}", key.secret.expose());
        super::contract::put_secret(req, reqwest::header::AUTHORIZATION, &bearer)
    }

    /// Vertex lists no publisher models Baton reads: the configured ones are the ones there are.
    fn models_url(&self, _p: &ProviderEntry) -> Option<String> {
        None
    }

    /// `claude-sonnet-4-5@20250929` serves `claude-sonnet-4-5-20250929` and `claude-sonnet-4-5`.
    fn serves(&self, model: &str) -> Vec<String> {
        match model.split_once('@') {
            Some((name, version)) if self.is_anthropic() && !version.is_empty() => {
                vec![format!("{name}-{version}"), name.to_string()]
            }
            _ => Vec::new(),
        }
    }
}

/// `{baseUrl}/projects/P/locations/R/publishers/{publisher}/models`.
fn publisher_models(p: &ProviderEntry, publisher: &str) -> Option<reqwest::Url> {
    let base = p.config.base_url.trim_end_matches('/');
    let region = region(&p.config.base_url, p.config.region.as_deref())?;
    let project = p.config.project.as_deref()?;
    let mut url = reqwest::Url::parse(&format!("{base}/")).ok()?;
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .extend(["projects", project, "locations", &region])
        .extend(["publishers", publisher, "models"]);
    Some(url)
}

#[cfg(test)]
mod tests;
