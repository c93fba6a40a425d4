//! Model discovery: `GET {baseUrl}/models` on every HTTP provider, in its kind's own
//! authentication (OpenAI's `data[].id`, Anthropic's `data[].id`, Gemini's `models[].name`), at
//! start-up and on demand, cached per provider, so Baton can warn when a configured model has disappeared and
//! offer real model names.

use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::ProviderEntry;

/// What a provider's `/models` said, and when.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Discovered {
    pub at_ms: i64,
    /// Model ids the provider lists (empty when the call failed).
    pub models: Vec<String>,
    /// Configured models the provider no longer lists.
    pub missing: Vec<String>,
    pub error: Option<String>,
}

/// Cache of the last discovery per provider (lives in the provider's runtime).
#[derive(Debug, Default)]
pub struct DiscoveryCache(Mutex<Option<Discovered>>);

impl DiscoveryCache {
    pub fn get(&self) -> Option<Discovered> {
        self.0.lock().ok().and_then(|d| d.clone())
    }

    fn set(&self, d: Discovered) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(d);
        }
    }
}

/// Asks one provider for its models and records the answer.
pub async fn discover(client: &reqwest::Client, p: &ProviderEntry, now_ms: i64) -> Discovered {
    let request = super::outbound::models_request(client, p, p.keys.first(), now_ms).map(|rb| {
        rb.timeout(Duration::from_millis(
            p.config.timeouts.first_byte_ms.min(15_000),
        ))
    });
    let sent = match request {
        Ok(rb) => rb.send().await.map_err(|e| super::outbound::describe(&e)),
        Err(e) => Err(e),
    };
    let result = match sent {
        Err(e) => Err(e),
        Ok(resp) if !resp.status().is_success() => Err(format!("HTTP {}", resp.status().as_u16())),
        Ok(resp) => resp
            .bytes()
            .await
            .map_err(|e| super::outbound::describe(&e))
            .and_then(|b| {
                serde_json::from_slice::<Value>(&b).map_err(|e| format!("not a model list: {e}"))
            })
            .map(|v| {
                v.get("data")
                    .or_else(|| v.get("models"))
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|m| {
                                m.get("id")
                                    .or_else(|| m.get("name"))
                                    .and_then(Value::as_str)
                            })
                            // Gemini names its models `models/gemini-2.5-pro`.
                            .map(|id| id.strip_prefix("models/").unwrap_or(id).to_string())
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            }),
    };
    let d = match result {
        Ok(models) => {
            let missing: Vec<String> = if models.is_empty() {
                Vec::new()
            } else {
                p.models
                    .iter()
                    .filter(|m| !models.contains(&m.id))
                    .map(|m| m.id.clone())
                    .collect()
            };
            if !missing.is_empty() {
                tracing::warn!(
                    provider = p.id(),
                    ?missing,
                    "configured models are not in the provider's model list"
                );
            }
            Discovered {
                at_ms: now_ms,
                models,
                missing,
                error: None,
            }
        }
        Err(e) => {
            tracing::debug!(provider = p.id(), error = %e, "model discovery failed");
            Discovered {
                at_ms: now_ms,
                models: Vec::new(),
                missing: Vec::new(),
                error: Some(e),
            }
        }
    };
    p.runtime.discovery.set(d.clone());
    d
}
