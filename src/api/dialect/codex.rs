//! What Codex asks its provider besides `POST /responses`: `GET /models?client_version=…`, its
//! models' metadata in the Codex backend's own shape (`{"models": [...]}`). Codex cannot read
//! OpenAI's list and logs an error on every start when that is all it gets.
//!
//! On its ChatGPT login (`x-baton-key` beside it) the list comes from the first `chatgpt`
//! provider (a backend platform) — the Codex backend itself — so Codex sees the
//! metadata its models really have (their tools, their context windows). Without one, or when
//! that backend does not answer, the list is empty, which Codex takes as "use what you know".
//! (Codex 0.171 calls nothing else on a custom provider: it compacts a conversation with an
//! ordinary `/responses` request.)

use std::time::Duration;

use axum::http::HeaderMap;
use serde_json::Value;

use crate::api::state::AppState;
use crate::config::Credentials;
use crate::providers::{outbound, ClientCredential};

/// The most of a models answer read: the real one is a few hundred KB of instructions.
const MAX_BODY: usize = 8 << 20;

/// The `models` list for a Codex client of version `version`.
pub(super) async fn models(state: &AppState, headers: &HeaderMap, version: &str) -> Value {
    let empty = Value::Array(Vec::new());
    let Some(credential) = ClientCredential::from_headers(headers)
        .map(|c| c.spoken_to(crate::providers::Vendor::OpenAi))
        .filter(|c| c.vendor == crate::providers::Vendor::OpenAi)
    else {
        return empty;
    };
    let snap = state.core.routing.snapshot.load();
    // The backend Codex was written for (ChatGPT's), on its login.
    let Some(p) = snap.enabled().find(|p| {
        p.config.credentials == Credentials::Client
            && crate::providers::kinds::platform(p.config.kind).is_some_and(|k| k.backend())
    }) else {
        return empty;
    };
    let Ok(client) = state.core.routing.http.for_provider(p) else {
        return empty;
    };
    let timeout = Duration::from_millis(p.config.timeouts.first_byte_ms.min(10_000));
    let request = outbound::client_models_request(&client, p, &credential, version);
    match fetch(request.timeout(timeout)).await {
        Ok(body) => {
            let body = state.core.routing.redactor.bytes(&body);
            match serde_json::from_slice::<Value>(&body) {
                Ok(mut v) if v.get("models").is_some_and(Value::is_array) => v["models"].take(),
                _ => {
                    tracing::warn!(provider = %p.id(), "Codex models: the answer has no models list");
                    empty
                }
            }
        }
        Err(e) => {
            tracing::warn!(provider = %p.id(), "Codex models: {e}");
            empty
        }
    }
}

/// The body of a 2xx answer, at most `MAX_BODY` bytes.
async fn fetch(request: reqwest::RequestBuilder) -> Result<Vec<u8>, String> {
    let mut resp = request.send().await.map_err(|e| outbound::describe(&e))?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| outbound::describe(&e))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!("the answer is over {} MiB", MAX_BODY >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
