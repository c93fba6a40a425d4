//! AWS Bedrock's Converse API: every model Bedrock hosts (Llama, Mistral, Nova, DeepSeek,
//! Claude…) through the one request shape Bedrock defines for all of them ([`api`]), on a
//! company's AWS account. Where and how it is called is the `bedrock` kind's:
//!
//! - `baseUrl` is the runtime endpoint, `https://bedrock-runtime.REGION.amazonaws.com` (or a VPC
//!   endpoint, with `region`), each model a Bedrock model id or inference profile;
//!   `POST {baseUrl}/model/{id}/converse`, or `/converse-stream` (AWS event-stream frames of
//!   typed events);
//! - authentication: a Bedrock API key as a bearer token, or SigV4 (`bedrock::aws`) with an
//!   access key typed as the provider's key, else the AWS environment and profile;
//! - token counting: CountTokens' `converse` input, for the foundation models it counts.
//!
//! The `bedrock` kind keeps Claude's own Messages API (thinking signatures, cache control and
//! betas untouched); this one reaches the rest, and Claude too where a plain conversation is
//! all that is needed.

pub mod api;

use super::bedrock::{self, model_url, Bedrock};
use super::contract::{Framing, Platform, UpstreamKind};
use crate::canonical::Wire;
use crate::config::kind::KindSpec;
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::{ApiKey, ProviderEntry};

/// Bedrock's platform for the Converse API.
pub struct BedrockConverse;

/// The `bedrock-converse` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "bedrock-converse",
    order: 61,
    doc: "AWS Bedrock's Converse API: every model Bedrock hosts (Llama, Mistral, Nova, DeepSeek,\nClaude…) on a company's AWS account (`baseUrl`\n`https://bedrock-runtime.REGION.amazonaws.com`); SigV4 or a Bedrock API key.",
    label: n_("AWS Bedrock · any model (Converse)"),
    badge: "Bc",
    wire: Some(Wire::Converse),
    base_url_example: Some("https://bedrock-runtime.us-east-1.amazonaws.com"),
    base_url_hint: bedrock::SPEC.base_url_hint,
    key_hint: bedrock::SPEC.key_hint,
    no_key_hint: bedrock::SPEC.no_key_hint,
    sample_model: Some("us.meta.llama3-3-70b-instruct-v1:0"),
    fields: &["region", "awsProfile"],
    check: bedrock::SPEC.check,
    ..KindSpec::BASE
};

/// The `bedrock-converse` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &BedrockConverse);

impl Platform for BedrockConverse {
    fn gen_ai_system(&self) -> &'static str {
        "aws.bedrock"
    }

    fn api(&self) -> &'static dyn UpstreamKind {
        &api::Converse
    }

    fn url(&self, p: &ProviderEntry, model: &str, stream: bool) -> Option<reqwest::Url> {
        model_url(
            p,
            model,
            if stream {
                "converse-stream"
            } else {
                "converse"
            },
        )
    }

    fn own_auth(&self) -> bool {
        true
    }

    fn shape(&self, req: &mut reqwest::Request) -> Result<(), Classified> {
        let stream = req.url().path().ends_with("/converse-stream");
        req.headers_mut().insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static(if stream {
                crate::providers::eventstream::CONTENT_TYPE
            } else {
                "application/json"
            }),
        );
        Ok(())
    }

    fn sign(
        &self,
        req: &mut reqwest::Request,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
        now_ms: i64,
    ) -> Result<(), Classified> {
        Bedrock.sign(req, p, key, now_ms)
    }

    fn counts_tokens(&self) -> bool {
        true
    }

    /// CountTokens counts a foundation model's tokens (an inference profile's model is asked
    /// under its own id): `POST /model/{id}/count-tokens` with the conversation in
    /// `input.converse`.
    fn count_shape(
        &self,
        p: &ProviderEntry,
        model: &str,
        req: &mut reqwest::Request,
    ) -> Result<bool, Classified> {
        let Some(url) =
            bedrock::foundation_model(model).and_then(|m| model_url(p, m, "count-tokens"))
        else {
            return Ok(false);
        };
        *req.url_mut() = url;
        let Some(body) = req.body().and_then(reqwest::Body::as_bytes) else {
            return Ok(false);
        };
        let conversation: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| crate::limits::classify_transport(format!("request body: {e}")))?;
        let count = serde_json::json!({"input": {"converse": conversation}});
        *req.body_mut() = Some(serde_json::to_vec(&count).unwrap_or_default().into());
        Ok(true)
    }

    /// Bedrock's model list is on its control plane: the configured models are the ones there
    /// are.
    fn models_url(&self, _p: &ProviderEntry) -> Option<String> {
        None
    }

    /// A Claude model's Bedrock id serves its Anthropic names, as on the `bedrock` kind.
    fn serves(&self, model: &str) -> Vec<String> {
        bedrock::anthropic_names(model)
    }

    fn framing(&self, content_type: Option<&str>) -> Framing {
        Bedrock.framing(content_type)
    }

    fn searches(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
