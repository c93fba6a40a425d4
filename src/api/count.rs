//! `POST /v1/messages/count_tokens` (Claude Code asks it to decide when to compact): counted by
//! whoever can count best for the model the request would go to (`tokens`): the provider itself
//! (an `anthropic` provider's `count_tokens`, a `gemini` provider's `countTokens`), OpenAI's
//! tokenizer for OpenAI's models, else the calibrated estimate. The answer's
//! `x-baton-token-count` header says which: `provider`, `tokenizer` or `estimate`.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::anthropic::anthropic_error;
use super::error::ApiError;
use super::{authenticate, AppState};
use crate::canonical::ChatRequest;
use crate::config::ProviderKind;
use crate::providers::{ClientCredential, ProviderEntry};
use crate::router::snapshot::Target;
use crate::tokens::Method;

pub async fn count_tokens(State(state): State<AppState>, req: Request) -> Response {
    let core = &state.core;
    let headers = req.headers().clone();
    let client = match authenticate(core, &headers) {
        Ok(c) => c,
        Err(e) => return anthropic_error(e),
    };
    // The key's own policy, as for the request it counts: disabled, expired, rate, budgets.
    if let Err(e) = super::pipeline::admit(core, &client).await {
        return anthropic_error(e);
    }
    // The same body limit as /v1/messages: a context that can be sent can be counted.
    let (body, _charge) = match super::budget::read_body(&state, req).await {
        Ok(b) => b,
        Err(e) => return anthropic_error(e),
    };
    let parsed = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(m)) => m,
        _ => {
            return anthropic_error(ApiError::invalid(
                "body",
                "The request body must be a JSON object.",
            ))
        }
    };
    let req = match crate::canonical::anthropic::request_from_anthropic(&parsed) {
        Ok(r) => r,
        Err(e) => return anthropic_error(ApiError::invalid(e.param, e.message)),
    };
    let snap = core.routing.snapshot.load_full();
    let targets = match snap.resolve_requested(&req.model) {
        Ok((targets, _)) => targets,
        // A model no request could be sent to is not counted either, as /v1/messages answers.
        Err(e @ crate::router::snapshot::ResolveError::UnknownModel { .. }) => {
            return anthropic_error(super::pipeline::resolve_error(e))
        }
        Err(_) => Vec::new(),
    };
    // The target the request would go to first.
    let first = targets
        .into_iter()
        .find(|t| t.provider.unavailable().is_none());
    let counted = match &first {
        Some(t) => match provider_count(core, t, &parsed, &req, &headers).await {
            Some(n) => (n, Method::Provider),
            None => crate::tokens::count_for(&t.model.id, &req),
        },
        None => crate::tokens::count_for(&req.model, &req),
    };
    let mut resp = Json(json!({"input_tokens": counted.0})).into_response();
    resp.headers_mut().insert(
        "x-baton-token-count",
        axum::http::HeaderValue::from_static(counted.1.as_str()),
    );
    resp
}

/// The provider's own count, for the kinds that have one; `None` on any failure.
async fn provider_count(
    core: &crate::gateway::Core,
    t: &Target,
    body: &Map<String, Value>,
    req: &ChatRequest,
    headers: &HeaderMap,
) -> Option<u64> {
    let p = &t.provider;
    let client = core.routing.http.get(p.config.timeouts.connect_ms).ok()?;
    let base = p.config.base_url.trim_end_matches('/');
    let timeout = Duration::from_millis(p.config.timeouts.first_byte_ms.min(30_000));
    let rb = match p.config.kind {
        ProviderKind::Anthropic => {
            let mut body = body.clone();
            body.insert("model".into(), json!(t.model.id));
            let rb = json_post(client.post(format!("{base}/messages/count_tokens")), &body);
            let mut rb = authorized(rb, p, headers, crate::providers::anthropic::authorize)?;
            if let Some(beta) = headers.get("anthropic-beta") {
                rb = rb.header("anthropic-beta", beta);
            }
            rb
        }
        ProviderKind::Gemini => {
            let mut inner = crate::canonical::gemini::request_to_gemini(req, &t.model.id);
            inner.insert("model".into(), json!(format!("models/{}", t.model.id)));
            let url = format!("{base}/models/{}:countTokens", t.model.id);
            let rb = json_post(
                client.post(url),
                &json!({ "generateContentRequest": inner }),
            );
            authorized(rb, p, headers, crate::providers::gemini::authorize)?
        }
        _ => return None,
    };
    let resp = rb.timeout(timeout).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&resp.bytes().await.ok()?).ok()?;
    v.get("input_tokens")
        .or_else(|| v.get("totalTokens"))
        .and_then(Value::as_u64)
}

/// The request with the provider's own authentication: Baton's key, or for a
/// `credentials: "client"` provider the client's own login (and nothing when it sent none).
fn authorized(
    rb: reqwest::RequestBuilder,
    p: &ProviderEntry,
    headers: &HeaderMap,
    authorize: fn(
        reqwest::RequestBuilder,
        &ProviderEntry,
        Option<&crate::providers::ApiKey>,
    ) -> reqwest::RequestBuilder,
) -> Option<reqwest::RequestBuilder> {
    if p.config.credentials.is_baton() {
        return Some(authorize(rb, p, p.keys.first()));
    }
    // Only to its own vendor (an unknown-shaped login: Anthropic's, whose API this endpoint
    // is, whatever headers came with it).
    let own =
        ClientCredential::from_headers(headers)?.spoken_to(crate::providers::Vendor::Anthropic);
    if !own.fits(&p.config) {
        return None;
    }
    let rb = authorize(rb, p, None);
    Some(
        own.headers
            .iter()
            .fold(rb, |rb, (name, value)| rb.header(name, value.clone())),
    )
}

fn json_post(rb: reqwest::RequestBuilder, body: &impl serde::Serialize) -> reqwest::RequestBuilder {
    rb.header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
}
