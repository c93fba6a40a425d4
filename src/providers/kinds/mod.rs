//! The upstream seam, cut in two. An API ([`UpstreamKind`], keyed by the `Wire` it speaks, one
//! folder each): what the bytes look like — the body built, a complete answer and a stream's
//! events read, its framing, its quirks as declared capabilities. A platform ([`Platform`],
//! keyed by the provider's kind): where and how that API is called — the URL for a model, the
//! authentication put on the built request, where its models are listed. A vendor's own API
//! served natively is both at once ([`Native`]); a second vendor of an existing API (Azure
//! OpenAI's Chat Completions) is a platform of its own over that API, so a client speaking the
//! same API still gets its bytes relayed untouched. Routing, the UI's Test, `baton probe` and
//! token counting reach every kind through [`platform`] and [`of`]; nothing outside this folder
//! names one.
//!
//! Adding a kind that speaks an existing API: a folder here with its `KindSpec` and its
//! `Platform`, registered from the folder by [`contract::register!`], and its `pub mod` line
//! below. A new API: a `Wire` variant and a folder implementing `UpstreamKind`, one line in
//! [`of`].

pub mod anthropic;
pub mod azure_openai;
pub mod bedrock;
pub mod bedrock_converse;
pub mod chatgpt;
pub mod contract;
pub mod gemini;
pub mod openai_compat;
pub mod openai_responses;
pub mod vertex;

pub use contract::{
    platform, Decode, Framing, Native, Outbound, Platform, Registered, UpstreamKind, Verbatim,
};

use super::{ApiKey, ModelInfo, ProviderEntry};
use crate::canonical::search::WebSearch;
use crate::canonical::{ChatResponse, Wire};
use crate::limits::Classified;

/// A complete answer's body in `wire`, in canonical form (`None` when it is not one).
pub fn answer_from(wire: Wire, body: &[u8]) -> Option<ChatResponse> {
    serde_json::from_slice(body)
        .ok()
        .and_then(|v| of(wire).answer(&v))
}

/// The kind that speaks `wire`.
pub fn of(wire: Wire) -> &'static dyn UpstreamKind {
    match wire {
        Wire::OpenAi => &openai_compat::OpenAiCompatible,
        Wire::Responses => &openai_responses::OpenAiResponses,
        Wire::Anthropic => &anthropic::Anthropic,
        Wire::Gemini => &gemini::Gemini,
        Wire::Converse => &bedrock_converse::api::Converse,
    }
}

/// Whether a provider of `kind` can run a web search by itself (its API has one built in).
pub fn searches(kind: crate::config::ProviderKind) -> bool {
    platform(kind).is_some_and(|p| {
        p.searches()
            && p.api()
                .search_request("m", "q", &WebSearch::default())
                .is_some()
    })
}

/// The API of an HTTP provider; `None` for a subscription CLI.
pub fn of_provider(p: &crate::config::ProviderConfig) -> Option<&'static dyn UpstreamKind> {
    p.kind.wire().map(of)
}

/// `p`'s token count of `req` for `model`, unauthorised: its API's count in its platform's
/// form (`own`: the client's body when it spoke that API; `headers`: the client's); `None`
/// when it counts none.
pub fn count_request(
    client: &reqwest::Client,
    p: &ProviderEntry,
    model: &str,
    req: &crate::canonical::ChatRequest,
    own: Option<&serde_json::Map<String, serde_json::Value>>,
    headers: &http::HeaderMap,
) -> Option<reqwest::RequestBuilder> {
    let platform = platform(p.config.kind)?;
    if !platform.counts_tokens() {
        return None;
    }
    let base = p.config.base_url.trim_end_matches('/');
    let rb = platform
        .api()
        .count_request(client, base, model, req, own, headers)?;
    let mut built = rb.build().ok()?;
    if !platform.count_shape(p, model, &mut built).ok()? {
        return None;
    }
    Some(reqwest::RequestBuilder::from_parts(client.clone(), built))
}

/// A request for `model` on `p`, built by its API and authenticated by its platform.
pub fn request(
    client: &reqwest::Client,
    p: &ProviderEntry,
    model: &ModelInfo,
    key: Option<&ApiKey>,
    o: &Outbound,
) -> Result<reqwest::RequestBuilder, Classified> {
    let Some(platform) = platform(p.config.kind) else {
        return Err(crate::limits::classify_transport("not an HTTP provider"));
    };
    let Some(url) = platform.url(p, &model.id, o.stream) else {
        return Err(crate::limits::classify_transport(
            "provider base URL is not a valid URL",
        ));
    };
    if !platform.own_auth() {
        return platform.api().request(client, &url, p, model, key, o);
    }
    let rb = platform.api().request(client, &url, p, model, None, o)?;
    signed(client, platform, p, rb, key, o.now_ms, true)
}

/// Any request to `p` (a model list, a token count) with its platform's authentication and the
/// provider's configured headers.
pub fn authorize(
    client: &reqwest::Client,
    p: &ProviderEntry,
    rb: reqwest::RequestBuilder,
    key: Option<&ApiKey>,
    now_ms: i64,
) -> Result<reqwest::RequestBuilder, Classified> {
    let Some(platform) = platform(p.config.kind) else {
        return Err(crate::limits::classify_transport("not an HTTP provider"));
    };
    if !platform.own_auth() {
        return Ok(platform.api().authorize(rb, p, key));
    }
    let rb = platform.api().authorize(rb, p, None);
    signed(client, platform, p, rb, key, now_ms, false)
}

/// A request its platform shaped (a model call: `chat`) and signed.
fn signed(
    client: &reqwest::Client,
    platform: &dyn Platform,
    p: &ProviderEntry,
    rb: reqwest::RequestBuilder,
    key: Option<&ApiKey>,
    now_ms: i64,
    chat: bool,
) -> Result<reqwest::RequestBuilder, Classified> {
    let mut req = rb
        .build()
        .map_err(|e| crate::limits::classify_transport(e.to_string()))?;
    if chat {
        platform.shape(&mut req)?;
    }
    // A client's own login (`credentials: "client"`) is its own authentication.
    if p.config.credentials.is_baton() {
        platform.sign(&mut req, p, key, now_ms)?;
    }
    Ok(reqwest::RequestBuilder::from_parts(client.clone(), req))
}

/// The credential `p`'s platform makes of `key` for a request at `now_ms` (an exchanged access
/// token), when it makes one; `None`: send the key as it is.
pub async fn exchanged(
    client: &reqwest::Client,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
    now_ms: i64,
) -> Result<Option<ApiKey>, Classified> {
    if !p.config.credentials.is_baton() {
        return Ok(None);
    }
    match platform(p.config.kind).and_then(|k| k.exchange(client, p, key, now_ms)) {
        Some(made) => made.await.map(Some),
        None => Ok(None),
    }
}

/// How `p`'s answer with `content_type` is framed.
pub fn framing(p: &crate::config::ProviderConfig, content_type: Option<&str>) -> Framing {
    platform(p.kind).map_or(Framing::Sse, |k| k.framing(content_type))
}

#[cfg(test)]
mod tests;
