//! A provider's configuration made ready for routing: its keys, headers and a CLI's variables
//! read, its models with their prices and the names they serve, its address parsed once, its
//! day's zone — asked of its kind where the kind decides.

use std::sync::Arc;

use super::{cli, kinds};
use super::{price_and_tier, ApiKey, ModelInfo, ProviderEntry, ProviderRuntime, Secret};
use crate::config::{ModelEntry, ProviderConfig};

/// Builds a routing-ready provider, reading its keys from the environment.
pub fn resolve(
    config: ProviderConfig,
    runtime: Arc<ProviderRuntime>,
    env: &dyn Fn(&str) -> Option<String>,
) -> ProviderEntry {
    let models = model_infos(&config);
    let mut keys = Vec::new();
    let mut missing_keys = Vec::new();
    for k in &config.keys {
        match env(&k.lookup_name()).filter(|v| !v.trim().is_empty()) {
            Some(v) => keys.push(ApiKey {
                id: k.label(),
                secret: Secret::new(v.trim()),
            }),
            None => missing_keys.push(match &k.stored {
                Some(id) => format!("stored secret {id}"),
                None => k.env.clone(),
            }),
        }
    }
    let (headers, mut missing_headers) = resolve_headers(&config, env);
    let (cli_env, missing_env) = resolve_cli_env(&config, env);
    let proxy_login = config.proxy_login.as_ref().and_then(|r| {
        crate::config::HeaderValue::Secret(r.clone())
            .read(env)
            .map(Secret::new)
    });
    missing_headers.extend(missing_env);
    let path = kinds::of_provider(&config).map(|k| k.chat_path());
    let chat_url = path.and_then(|path| {
        reqwest::Url::parse(&format!("{}/{path}", config.base_url.trim_end_matches('/'))).ok()
    });
    let default_zone = cli::day_reset_zone(config.kind);
    let day_reset = config
        .day_reset
        .as_deref()
        .or(default_zone)
        .and_then(|z| jiff::tz::TimeZone::get(z).ok());
    ProviderEntry {
        day_reset,
        day_cache: std::sync::Mutex::new(None),
        config,
        models: models.into_iter().map(Arc::new).collect(),
        keys,
        missing_keys,
        headers,
        missing_headers,
        cli_env,
        runtime,
        proxy_login,
        chat_url,
    }
}

/// A CLI provider's `env` as the CLI gets it: text as written, secrets read from their
/// variable or the secret store; and the secret variables that could not be read.
pub fn resolve_cli_env(
    config: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<(String, Secret)>, Vec<String>) {
    let mut vars = Vec::new();
    let mut missing = Vec::new();
    for (name, value) in &config.env {
        match value.read(env) {
            Some(v) => vars.push((name.clone(), Secret::new(v))),
            None => missing.push(value.missing(&format!("env.{name}"))),
        }
    }
    (vars, missing)
}

/// The provider's models with their capabilities and prices (the provider's defaults filled in).
fn model_infos(config: &ProviderConfig) -> Vec<ModelInfo> {
    let caps = &config.capabilities;
    // The names a platform's own model ids stand for (Bedrock's), beside the configured ones.
    let platform = kinds::platform(config.kind);
    let also = |id: &str, given: &[String]| -> Vec<String> {
        let mut serves = given.to_vec();
        for n in platform.map(|k| k.serves(id)).unwrap_or_default() {
            if !serves.contains(&n) && n != id {
                serves.push(n);
            }
        }
        serves
    };
    config
        .models
        .iter()
        .map(|m| match m {
            ModelEntry::Name(n) => {
                let (price, tier) = price_and_tier(config, n, None, None);
                ModelInfo {
                    id: n.clone(),
                    context_window: caps.context_window,
                    tools: caps.tools,
                    images: caps.images,
                    structured_output: caps.structured_output,
                    max_output_tokens: caps.max_output_tokens,
                    price,
                    tier,
                    serves: also(n, &[]),
                }
            }
            ModelEntry::Detailed(d) => {
                let (price, tier) = price_and_tier(config, &d.id, d.price, d.tier);
                ModelInfo {
                    id: d.id.clone(),
                    context_window: d.context_window.or(caps.context_window),
                    tools: d.tools.unwrap_or(caps.tools),
                    images: d.images.unwrap_or(caps.images),
                    structured_output: d.structured_output.unwrap_or(caps.structured_output),
                    max_output_tokens: d.max_output_tokens.or(caps.max_output_tokens),
                    price,
                    tier,
                    serves: also(&d.id, &d.serves),
                }
            }
        })
        .collect()
}

/// A provider's `headers` as sent: text as written, secrets read from their variable or the
/// secret store (and marked sensitive); the secret headers that could not be read.
#[allow(clippy::type_complexity)]
fn resolve_headers(
    config: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> (
    Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    Vec<String>,
) {
    let mut headers = Vec::new();
    let mut missing = Vec::new();
    for (name, value) in &config.headers {
        let Ok(name_h) = reqwest::header::HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        match value
            .read(env)
            .filter(|t| !t.is_empty())
            .and_then(|t| reqwest::header::HeaderValue::from_str(&t).ok())
        {
            Some(mut v) => {
                v.set_sensitive(value.is_secret());
                headers.push((name_h, v));
            }
            None => missing.push(value.missing(name)),
        }
    }
    (headers, missing)
}
