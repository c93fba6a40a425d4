//! The HTTP request one attempt sends to an HTTP upstream, for every kind: URL, authentication
//! and body in the upstream's own format. Routing, the UI's Test and `baton probe` all build
//! their requests here, so they cannot drift apart (they did: probe once sent an OpenAI body
//! with Bearer auth to Anthropic and POSTed to `{baseUrl}/models` for Gemini).

use serde_json::{Map, Value};

use super::{openai_compat, ApiKey, ModelInfo, ProviderEntry};
use crate::canonical::{self, ChatRequest};
use crate::config::ProviderKind;
use crate::limits::{self, Classified};

/// The wire format of a request or answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
    Gemini,
}

impl Wire {
    /// The format an HTTP provider speaks; `None` for subscription CLIs.
    pub fn of(kind: ProviderKind) -> Option<Self> {
        match kind {
            ProviderKind::OpenaiCompatible => Some(Wire::OpenAi),
            ProviderKind::Anthropic => Some(Wire::Anthropic),
            ProviderKind::Gemini => Some(Wire::Gemini),
            ProviderKind::ClaudeCli | ProviderKind::CodexCli | ProviderKind::GeminiCli => None,
        }
    }
}

/// `max_tokens` for Anthropic upstreams when neither the client nor the config gave one (the
/// Messages API requires it).
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u64 = 4096;

/// `anthropic-version` sent to Messages API upstreams.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// What the client asked for, in the forms an upstream may take it in.
pub struct Outbound<'a> {
    /// The request in OpenAI form (the client's own body when it spoke OpenAI).
    pub openai_body: &'a Map<String, Value>,
    /// The client's own body when it spoke Anthropic: sent unchanged (but for the model) to
    /// Anthropic upstreams.
    pub anthropic_body: Option<&'a Map<String, Value>>,
    /// `anthropic-beta` from the client, for Anthropic upstreams.
    pub anthropic_beta: Option<&'a str>,
    pub canonical: &'a ChatRequest,
    pub stream: bool,
    pub request_id: &'a str,
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
    let Some(wire) = Wire::of(p.config.kind) else {
        return Err(limits::classify_transport("not an HTTP provider"));
    };
    let cap = model.max_output_tokens;
    let rb = match wire {
        Wire::OpenAi => {
            let body = openai_compat::passthrough_body(o.openai_body, &model.id, cap);
            openai_compat::build(client, url, p, key, body, o.stream, o.request_id)
        }
        Wire::Anthropic => {
            let body = match o.anthropic_body {
                // Same format both sides: the client's body, model rewritten.
                Some(b) => openai_compat::passthrough_body(b, &model.id, cap),
                None => {
                    let mut b = canonical::anthropic::request_to_anthropic(
                        o.canonical,
                        &model.id,
                        cap.unwrap_or(DEFAULT_ANTHROPIC_MAX_TOKENS),
                    );
                    if let Some(c) = cap {
                        if b.get("max_tokens")
                            .and_then(Value::as_u64)
                            .is_some_and(|m| m > c)
                        {
                            b.insert("max_tokens".into(), c.into());
                        }
                    }
                    serde_json::to_vec(&b).unwrap_or_default()
                }
            };
            anthropic(client, url, p, key, body, o)
        }
        Wire::Gemini => {
            let mut body = canonical::gemini::request_to_gemini(o.canonical);
            if let (Some(c), Some(cfg)) = (cap, body.get_mut("generationConfig")) {
                if cfg
                    .get("maxOutputTokens")
                    .and_then(Value::as_u64)
                    .is_some_and(|m| m > c)
                {
                    cfg["maxOutputTokens"] = c.into();
                }
            }
            let action = if o.stream {
                ":streamGenerateContent?alt=sse"
            } else {
                ":generateContent"
            };
            let Ok(url) = reqwest::Url::parse(&format!(
                "{}/{}{action}",
                url.as_str().trim_end_matches('/'),
                model.id
            )) else {
                return Err(limits::classify_transport(
                    "model name does not form a valid URL",
                ));
            };
            let mut rb = client
                .post(url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .header("x-request-id", o.request_id)
                .body(serde_json::to_vec(&body).unwrap_or_default());
            if let Some(k) = key {
                rb = rb.header("x-goog-api-key", k.secret.expose());
            }
            for (name, value) in &p.config.headers {
                rb = rb.header(name.as_str(), value.as_str());
            }
            rb
        }
    };
    Ok((rb, wire))
}

/// A Messages API request: `x-api-key`, `anthropic-version`, the client's `anthropic-beta`.
fn anthropic(
    client: &reqwest::Client,
    url: reqwest::Url,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
    body: Vec<u8>,
    o: &Outbound,
) -> reqwest::RequestBuilder {
    let mut rb = openai_compat::json_post(client, url, o.stream, o.request_id)
        .header("anthropic-version", ANTHROPIC_VERSION);
    if let Some(k) = key {
        rb = rb.header("x-api-key", k.secret.expose());
    }
    if let Some(b) = o.anthropic_beta {
        rb = rb.header("anthropic-beta", b);
    }
    for (name, value) in &p.config.headers {
        rb = rb.header(name.as_str(), value.as_str());
    }
    rb.body(body)
}
