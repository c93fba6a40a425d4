//! Azure OpenAI: OpenAI's Chat Completions on a company's Azure resource. The bytes are the
//! Chat Completions API's (`openai_compat`: a Chat Completions client's body is relayed as it
//! came); what is Azure's is where and how it is called:
//!
//! - `baseUrl` is the resource's endpoint (`https://NAME.openai.azure.com`) and each model is a
//!   deployment: `POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version=V`
//!   (`apiVersion`, default the GA [`DEFAULT_API_VERSION`]). A base URL ending in `/openai/v1`
//!   is the v1 API instead: `POST {baseUrl}/chat/completions` with the deployment as `model`,
//!   no `api-version`, and its deployments listed at `{baseUrl}/models`;
//! - the key goes in `api-key`; a Microsoft Entra ID access token (a JWT) as
//!   `Authorization: Bearer`;
//! - its 429s say how long in `retry-after-ms` and `retry-after`, and its answers carry
//!   `x-ratelimit-remaining-*`, read as every kind's are.

use super::contract::{Platform, UpstreamKind};
use super::openai_compat;
use crate::canonical::Wire;
use crate::config::kind::{Hint, KindSpec, Own};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::{ApiKey, ProviderEntry};

/// The generally available `api-version` of the deployments API.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// Azure OpenAI's platform.
pub struct AzureOpenAi;

/// The `azure-openai` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "azure-openai",
    order: 50,
    doc: "Azure OpenAI: Chat Completions on a company's Azure resource (`baseUrl` its endpoint,\n`https://NAME.openai.azure.com`, or `…/openai/v1`); models are deployment names.",
    label: n_("Azure OpenAI"),
    badge: "Az",
    wire: Some(Wire::OpenAi),
    base_url_example: Some("https://NAME.openai.azure.com"),
    base_url_hint: Some(Hint {
        text: n_("Your resource's endpoint, e.g. {example}; its deployments are the models"),
        values: &[],
    }),
    fields: &["apiVersion"],
    check: Some(check),
    ..KindSpec::BASE
};

/// The `azure-openai` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &AzureOpenAi);

/// Its `apiVersion` a dated version, and a base URL that is the resource's endpoint (or its
/// `/openai/v1`), never one deployment's.
fn check(own: &Own) -> Result<(), (&'static str, String)> {
    if let Some(v) = own.api_version {
        let dated = v.len() >= 10
            && v.as_bytes()[..10].iter().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    *b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            })
            && v[10..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !dated {
            return Err(("apiVersion", crate::i18n::msg("`{v}` is not an Azure OpenAI API version: give a date such as 2024-10-21 (or 2025-04-01-preview)", &[("v", v)])));
        }
    }
    if own.base_url.contains("/deployments") {
        return Err(("baseUrl", crate::i18n::msg("give the resource's endpoint (https://NAME.openai.azure.com) and list deployments as models, not one deployment's URL", &[])));
    }
    Ok(())
}

/// Whether a base URL is the v1 API's (`…/openai/v1`).
fn is_v1(base: &str) -> bool {
    base.trim_end_matches('/').ends_with("/openai/v1")
}

impl Platform for AzureOpenAi {
    fn gen_ai_system(&self) -> &'static str {
        "azure.ai.openai"
    }

    fn api(&self) -> &'static dyn UpstreamKind {
        &openai_compat::OpenAiCompatible
    }

    fn url(&self, p: &ProviderEntry, model: &str, _stream: bool) -> Option<reqwest::Url> {
        let base = p.config.base_url.trim_end_matches('/');
        if is_v1(base) {
            return reqwest::Url::parse(&format!("{base}/chat/completions")).ok();
        }
        let mut url = reqwest::Url::parse(&format!("{base}/openai/deployments/")).ok()?;
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .push(model)
            .push("chat")
            .push("completions");
        let version = p
            .config
            .api_version
            .as_deref()
            .unwrap_or(DEFAULT_API_VERSION);
        url.query_pairs_mut().append_pair("api-version", version);
        Some(url)
    }

    fn own_auth(&self) -> bool {
        true
    }

    fn sign(
        &self,
        req: &mut reqwest::Request,
        _p: &ProviderEntry,
        key: Option<&ApiKey>,
        _now_ms: i64,
    ) -> Result<(), Classified> {
        let Some(key) = key else {
            return Ok(());
        };
        let secret = key.secret.expose();
        // A Microsoft Entra ID access token is a JWT.
        let (name, value) = if crate::providers::client::is_jwt(secret) {
            (reqwest::header::AUTHORIZATION, format!("Bearer {secret}"))
        } else {
            (
                reqwest::header::HeaderName::from_static("api-key"),
                secret.to_string(),
            )
        };
        super::contract::put_secret(req, name, &value)
    }

    fn models_url(&self, p: &ProviderEntry) -> Option<String> {
        let base = p.config.base_url.trim_end_matches('/');
        is_v1(base).then(|| format!("{base}/models"))
    }
}

#[cfg(test)]
mod tests;
