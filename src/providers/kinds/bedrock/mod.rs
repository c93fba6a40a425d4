//! AWS Bedrock: Anthropic's Messages API on a company's AWS account. The bytes are the Messages
//! API's (`anthropic`: a Claude Code turn keeps its thinking signatures, cache control and
//! tools); what is Bedrock's is where and how it is called:
//!
//! - `baseUrl` is the runtime endpoint, `https://bedrock-runtime.REGION.amazonaws.com` (or a
//!   VPC endpoint, with `region`), and each model is a Bedrock model id or inference profile
//!   (`us.anthropic.claude-sonnet-4-5-20250929-v1:0`; `serves` names the Anthropic name it
//!   stands for). `POST {baseUrl}/model/{id}/invoke`, or `/invoke-with-response-stream`;
//! - the body is the Messages API's without `model` and `stream` (they are in the path), with
//!   `anthropic_version: "bedrock-2023-05-31"`, and the client's `anthropic-beta` as the body's
//!   `anthropic_beta` list;
//! - a stream comes in AWS event-stream frames (`providers::eventstream`);
//! - authentication ([`aws`]): a Bedrock API key as a bearer token, or SigV4 with an access key
//!   — typed as the provider's key, or the AWS environment and profile when it has none;
//! - its errors name their exception in `x-amzn-ErrorType` (`limits::classify`).

pub mod aws;

use super::anthropic;
use super::contract::{Framing, Platform, UpstreamKind};
use crate::canonical::Wire;
use crate::config::kind::{Hint, KindSpec, Own};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::{ApiKey, ProviderEntry};

/// The `anthropic_version` Bedrock's Messages API takes in the body.
pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// AWS Bedrock's platform.
pub struct Bedrock;

/// The `bedrock` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "bedrock",
    order: 60,
    doc: "AWS Bedrock: Anthropic's Messages API on a company's AWS account (`baseUrl`\n`https://bedrock-runtime.REGION.amazonaws.com`); models are Bedrock model ids or\ninference profiles; SigV4 or a Bedrock API key.",
    label: n_("AWS Bedrock"),
    badge: "Bk",
    wire: Some(Wire::Anthropic),
    base_url_example: Some("https://bedrock-runtime.us-east-1.amazonaws.com"),
    base_url_hint: Some(Hint {
        text: n_("Your region's runtime endpoint, e.g. {example}; its model ids or inference profiles are the models"),
        values: &[],
    }),
    key_hint: Some(Hint {
        text: n_("A Bedrock API key, or an access key typed as ACCESS_KEY_ID:SECRET_ACCESS_KEY (add :SESSION_TOKEN for temporary credentials)."),
        values: &[],
    }),
    no_key_hint: Some(Hint {
        text: n_("No key: Baton signs with the AWS credentials of its environment or profile (AWS_ACCESS_KEY_ID, AWS_PROFILE, ~/.aws/credentials)."),
        values: &[],
    }),
    sample_model: Some("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
    fields: &["region", "awsProfile"],
    check: Some(check),
    ..KindSpec::BASE
};

/// The `bedrock` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &Bedrock);

/// The region requests are signed for: `region`, else the one the runtime endpoint names
/// (`bedrock-runtime[-fips].REGION.amazonaws.com`).
pub fn region(base_url: &str, region: Option<&str>) -> Option<String> {
    super::contract::region_of(base_url, region, |host| {
        let mut parts = host.split('.');
        let service = parts.next()?;
        let region = parts.next()?;
        (service.starts_with("bedrock-runtime") && host.ends_with(".amazonaws.com"))
            .then(|| region.to_string())
    })
}

/// `{baseUrl}/model/{id}/{op}`: the id one path segment (an ARN's `/` escaped), as every
/// Bedrock runtime operation on a model is addressed.
pub(crate) fn model_url(p: &ProviderEntry, model: &str, op: &str) -> Option<reqwest::Url> {
    let base = p.config.base_url.trim_end_matches('/');
    let mut url = reqwest::Url::parse(&format!("{base}/model/")).ok()?;
    url.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .push(model)
        .push(op);
    Some(url)
}

/// The foundation model a Bedrock model id or a cross-region inference profile names
/// (`us.anthropic.claude-sonnet-4-5-20250929-v1:0` is `anthropic.claude-sonnet-4-5-20250929-v1:0`):
/// what CountTokens takes. `None` for an ARN (an application inference profile's model is not
/// in its name).
pub fn foundation_model(model: &str) -> Option<&str> {
    if model.starts_with("arn:") {
        return None;
    }
    model.find("anthropic.").map(|i| &model[i..])
}

/// The client's `anthropic-beta` list, taken off the request's headers (Bedrock takes it in the
/// body), with the `anthropic-version` header it does not take.
fn take_betas(req: &mut reqwest::Request) -> Vec<String> {
    req.headers_mut().remove("anthropic-version");
    req.headers_mut()
        .remove("anthropic-beta")
        .and_then(|v| v.to_str().ok().map(str::to_string))
        .map(|b| b.split(',').map(|s| s.trim().to_string()).collect())
        .unwrap_or_default()
}

/// A region known, from `region` or the endpoint.
fn check(own: &Own) -> Result<(), (&'static str, String)> {
    if region(own.base_url, own.region).is_none() {
        return Err(("region", crate::i18n::msg("Bedrock signs each request for a region: use a base URL that names it (https://bedrock-runtime.us-east-1.amazonaws.com) or give `region`", &[])));
    }
    Ok(())
}

impl Platform for Bedrock {
    fn gen_ai_system(&self) -> &'static str {
        "aws.bedrock"
    }

    fn api(&self) -> &'static dyn UpstreamKind {
        &anthropic::Anthropic
    }

    fn url(&self, p: &ProviderEntry, model: &str, stream: bool) -> Option<reqwest::Url> {
        let op = if stream {
            "invoke-with-response-stream"
        } else {
            "invoke"
        };
        model_url(p, model, op)
    }

    fn own_auth(&self) -> bool {
        true
    }

    /// The model and `stream` leave the body; the version and the betas go in.
    fn shape(&self, req: &mut reqwest::Request) -> Result<(), Classified> {
        let betas = take_betas(req);
        let stream = req.url().path().ends_with("/invoke-with-response-stream");
        req.headers_mut().insert(
            reqwest::header::ACCEPT,
            reqwest::header::HeaderValue::from_static(if stream {
                crate::providers::eventstream::CONTENT_TYPE
            } else {
                "application/json"
            }),
        );
        let Some(body) = req.body().and_then(reqwest::Body::as_bytes) else {
            return Ok(());
        };
        let body = anthropic::platform_body(body, ANTHROPIC_VERSION, &betas, &["model", "stream"])?;
        *req.body_mut() = Some(body.into());
        Ok(())
    }

    /// Bedrock counts a foundation model's tokens (not an inference profile's or an ARN's: the
    /// count of the profile's model is asked for it): `POST /model/{id}/count-tokens` with the
    /// InvokeModel body it would take, base64-encoded in `input.invokeModel.body`.
    fn counts_tokens(&self) -> bool {
        true
    }

    fn count_shape(
        &self,
        p: &ProviderEntry,
        model: &str,
        req: &mut reqwest::Request,
    ) -> Result<bool, Classified> {
        let Some(bare) = foundation_model(model) else {
            return Ok(false);
        };
        let Some(url) = model_url(p, bare, "count-tokens") else {
            return Ok(false);
        };
        *req.url_mut() = url;
        let betas = take_betas(req);
        let Some(body) = req.body().and_then(reqwest::Body::as_bytes) else {
            return Ok(false);
        };
        let invoke =
            anthropic::platform_body(body, ANTHROPIC_VERSION, &betas, &["model", "stream"])?;
        // InvokeModel's body needs `max_tokens`, which a count leaves out.
        let mut invoke: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&invoke)
                .map_err(|e| crate::limits::classify_transport(format!("request body: {e}")))?;
        invoke
            .entry("max_tokens")
            .or_insert(serde_json::Value::from(1));
        let invoke = serde_json::to_vec(&invoke).unwrap_or_default();
        use base64::Engine;
        let encoded = base64::engine::general_purpose::STANDARD.encode(invoke);
        let count = serde_json::json!({"input": {"invokeModel": {"body": encoded}}});
        *req.body_mut() = Some(serde_json::to_vec(&count).unwrap_or_default().into());
        Ok(true)
    }

    fn sign(
        &self,
        req: &mut reqwest::Request,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
        now_ms: i64,
    ) -> Result<(), Classified> {
        let auth = match key {
            Some(k) => aws::Auth::from_key(k.secret.expose())?,
            None => aws::Auth::from_environment(p.config.aws_profile.as_deref())?,
        };
        let region = region(&p.config.base_url, p.config.region.as_deref()).ok_or_else(|| {
            crate::limits::classify_transport(
                "the provider names no AWS region: give `region`, or a base URL with one",
            )
        })?;
        auth.apply(req, &region, now_ms)
    }

    /// Bedrock's model list is on its control plane, another endpoint: the configured models
    /// are the ones there are.
    fn models_url(&self, _p: &ProviderEntry) -> Option<String> {
        None
    }

    /// An Anthropic model's Bedrock id or inference profile serves its Anthropic name, and a
    /// dated name its undated alias too: `us.anthropic.claude-sonnet-4-5-20250929-v1:0`
    /// serves `claude-sonnet-4-5-20250929` and `claude-sonnet-4-5`.
    fn serves(&self, model: &str) -> Vec<String> {
        anthropic_names(model)
    }

    fn framing(&self, content_type: Option<&str>) -> Framing {
        if content_type.is_some_and(|c| c.starts_with(crate::providers::eventstream::CONTENT_TYPE))
        {
            Framing::AwsEventStream
        } else {
            Framing::Sse
        }
    }

    /// Bedrock has no server-side web search tool.
    fn searches(&self) -> bool {
        false
    }
}

/// The Anthropic names of a Bedrock model id (none for another vendor's model).
pub(crate) fn anthropic_names(model: &str) -> Vec<String> {
    // An inference profile's ARN ends in its id; a geography prefix (`us.`, `global.`) goes.
    let id = model.rsplit('/').next().unwrap_or(model);
    let Some((_, rest)) = id.split_once("anthropic.") else {
        return Vec::new();
    };
    // `-v1:0`, `-v1`: the Bedrock version.
    let name = match rest.rfind("-v") {
        Some(at) if rest[at + 2..].split(':').all(|p| p.parse::<u32>().is_ok()) => &rest[..at],
        _ => rest,
    };
    let mut names = vec![name.to_string()];
    if let Some((alias, date)) = name.rsplit_once('-') {
        if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) {
            names.push(alias.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests;
