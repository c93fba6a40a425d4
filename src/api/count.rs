//! Token counting for every dialect's count endpoint (Anthropic's `count_tokens`, Gemini's
//! `:countTokens`): counted by whoever can count best for the model the request would go to
//! (`tokens`): the provider itself (through its kind's `count_request`), OpenAI's tokenizer for
//! OpenAI's models, else the calibrated estimate. The answer's `x-baton-token-count` header
//! says which: `provider`, `tokenizer` or `estimate`.

use std::time::Duration;

use axum::extract::Request;
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};

use super::dialect::contract::Dialect;
use super::error::ApiError;
use super::state::AppState;
use crate::canonical::ChatRequest;
use crate::providers::{ClientCredential, ProviderEntry};
use crate::router::snapshot::Target;
use crate::tokens::Method;

/// The answer's `x-baton-token-count`: who counted.
pub(crate) fn with_method(mut resp: Response, method: Method) -> Response {
    resp.headers_mut().insert(
        "x-baton-token-count",
        axum::http::HeaderValue::from_static(method.as_str()),
    );
    resp
}

/// Counts a request's prompt for the model it would be sent to, admitted as the request itself
/// is (`api::admit`: the client's key, its policy, the concurrency bound, the body and memory
/// limits) and through the key's model allow-list. `read` turns the body into the canonical
/// request and, for an Anthropic client, its own body (counted as it came by an Anthropic
/// provider).
pub(crate) async fn counted(
    state: &AppState,
    req: Request,
    dialect: &dyn Dialect,
    read: impl FnOnce(Map<String, Value>) -> Result<(ChatRequest, Option<Map<String, Value>>), ApiError>,
) -> Result<(u64, Method), ApiError> {
    let core = &state.core;
    let (parts, body) = req.into_parts();
    let mut headers = parts.headers;
    let source = super::admit::Source::http(body, &headers);
    let presented = dialect.presented_key(&headers).map(str::to_string);
    let admitted = super::admit::admit(
        state,
        presented,
        &mut headers,
        source,
        super::reply::new_request_id(),
    )
    .await
    .map_err(|r| r.error)?;
    let parsed = match serde_json::from_slice::<Value>(&admitted.body) {
        Ok(Value::Object(m)) => m,
        _ => {
            return Err(ApiError::invalid(
                "body",
                "The request body must be a JSON object.",
            ))
        }
    };
    let (req, own) = read(parsed)?;
    let snap = core.routing.snapshot.load_full();
    let targets = match snap.resolve_requested(&req.model) {
        // Only what this key may use: a count names a model as its request would.
        Ok((targets, _)) => super::admission::allowed_targets(
            &admitted.client,
            snap.map_model(&req.model),
            targets,
        )?,
        // A model no request could be sent to is not counted either, as the request answers.
        Err(e @ crate::router::snapshot::ResolveError::UnknownModel { .. }) => {
            return Err(super::failure::resolve_error(e))
        }
        Err(_) => Vec::new(),
    };
    // The target the request would go to first: not one that is out, nor one whose every
    // credential is cooling for this model (the request would pass it over).
    let first = targets
        .into_iter()
        .find(|t| t.provider.unavailable().is_none() && !cooling(core, t));
    Ok(match &first {
        Some(t) => {
            match provider_count(core, t, own.as_ref(), &req, &headers, dialect.vendor()).await {
                Some(n) => (n, Method::Provider),
                None => crate::tokens::count_for(&t.model.id, &req),
            }
        }
        None => crate::tokens::count_for(&req.model, &req),
    })
}

/// Whether every credential of `t`'s provider (its one scope when it holds no key) is cooling
/// for `t`'s model now.
fn cooling(core: &crate::gateway::Core, t: &Target) -> bool {
    let p = &t.provider;
    let blocked = |key: Option<&str>| {
        core.routing
            .cooldowns
            .blocking(p.id(), key, &t.model.id)
            .is_some()
    };
    if p.keys.is_empty() || !p.config.credentials.is_baton() {
        return blocked(None);
    }
    p.keys.iter().all(|k| blocked(Some(&k.id)))
}

/// The provider's own count, for the kinds that have one; `None` on any failure.
async fn provider_count(
    core: &crate::gateway::Core,
    t: &Target,
    own: Option<&Map<String, Value>>,
    req: &ChatRequest,
    headers: &HeaderMap,
    vendor: crate::providers::Vendor,
) -> Option<u64> {
    let p = &t.provider;
    let client = core.routing.http.for_provider(p).ok()?;
    let timeout = Duration::from_millis(p.config.timeouts.first_byte_ms.min(30_000));
    let rb = crate::providers::kinds::count_request(&client, p, &t.model.id, req, own, headers)?;
    let now_ms = core.routing.clock.now_ms();
    // The first key not cooling for the model, as a request would take.
    let key = p.keys.iter().find(|k| {
        core.routing
            .cooldowns
            .blocking(p.id(), Some(&k.id), &t.model.id)
            .is_none()
    });
    let rb = authorized(&client, rb, p, key, headers, vendor, now_ms).await?;
    let resp = rb.timeout(timeout).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&resp.bytes().await.ok()?).ok()?;
    // Anthropic's and Vertex AI's Claude `input_tokens`, Bedrock's `inputTokens`, Gemini's
    // `totalTokens`.
    v.get("input_tokens")
        .or_else(|| v.get("inputTokens"))
        .or_else(|| v.get("totalTokens"))
        .and_then(Value::as_u64)
}

/// The request with the provider's own authentication: Baton's key (or the credential its
/// platform makes of it: Vertex AI's access token), or for a `credentials: "client"` provider
/// the client's own login (and nothing when it sent none).
async fn authorized(
    client: &reqwest::Client,
    rb: reqwest::RequestBuilder,
    p: &ProviderEntry,
    key: Option<&crate::providers::ApiKey>,
    headers: &HeaderMap,
    vendor: crate::providers::Vendor,
    now_ms: i64,
) -> Option<reqwest::RequestBuilder> {
    use crate::providers::kinds::authorize;
    if p.config.credentials.is_baton() {
        let made = crate::providers::kinds::exchanged(client, p, key, now_ms)
            .await
            .ok()?;
        return authorize(client, p, rb, made.as_ref().or(key), now_ms).ok();
    }
    // Only to its own vendor (an unknown-shaped login: the vendor whose API the client spoke).
    let own = ClientCredential::from_headers(headers)?.spoken_to(vendor);
    if !own.fits(&p.config) {
        return None;
    }
    let rb = authorize(client, p, rb, None, now_ms).ok()?;
    Some(
        own.headers
            .iter()
            .fold(rb, |rb, (name, value)| rb.header(name, value.clone())),
    )
}
