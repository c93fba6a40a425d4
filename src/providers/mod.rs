//! Upstream providers: resolved definitions (keys read from the environment), their run-time
//! state (concurrency limit, key cursor) and one adapter per upstream kind.

pub mod cli;
pub mod codec;
pub mod discovery;
pub mod eventstream;
pub mod kinds;
pub mod outbound;
pub mod presence;
pub mod sse;
pub mod state;
pub mod thinking;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::config::{ModelEntry, ProviderConfig};

/// A secret string whose `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// `sk-…abcd`: enough to recognise a key, never enough to use it.
    pub fn masked(&self) -> String {
        let s = &self.0;
        let tail: String = s
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let head: String = s.chars().take(3).collect();
        if s.chars().count() <= 8 {
            "…".into()
        } else {
            format!("{head}…{tail}")
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(*****)")
    }
}

/// One usable API key of a provider.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Stable, non-secret id (`env:GROQ_API_KEY`).
    pub id: String,
    pub secret: Secret,
}

pub(crate) mod client;
pub use client::{ClientCredential, Vendor, BATON_KEY_HEADER};

/// Per-provider state that outlives configuration swaps (so in-flight counts stay right).
#[derive(Debug)]
pub struct ProviderRuntime {
    pub limit: Option<u32>,
    pub semaphore: Option<Arc<Semaphore>>,
    key_cursor: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub breakers: crate::limits::breaker::Breakers,
    pub quota: crate::limits::quota::Quota,
    pub discovery: discovery::DiscoveryCache,
    /// CLI kinds: executable, version and login state as last checked.
    pub cli_status: arc_swap::ArcSwapOption<cli::CliStatus>,
}

impl ProviderRuntime {
    pub fn new(limit: Option<u32>) -> Self {
        Self {
            limit,
            semaphore: limit.map(|n| Arc::new(Semaphore::new(n as usize))),
            key_cursor: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            breakers: Default::default(),
            quota: Default::default(),
            discovery: Default::default(),
            cli_status: Default::default(),
        }
    }

    /// Index of the key to try first (round-robin start).
    pub fn key_start(&self) -> usize {
        self.key_cursor.load(Ordering::Relaxed)
    }

    /// Records that key `i` was used, so the next request starts after it.
    pub fn used_key(&self, i: usize) {
        self.key_cursor.store(i.wrapping_add(1), Ordering::Relaxed);
    }
}

/// Model facts the router needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    pub id: String,
    pub context_window: Option<u64>,
    pub tools: bool,
    pub images: bool,
    pub max_output_tokens: Option<u64>,
    /// USD per million tokens, when known (config, else catalog).
    pub price: Option<crate::pricing::Price>,
    /// Price tier, when known.
    pub tier: Option<crate::pricing::Tier>,
    /// Other names it answers to (`ModelDetail::serves`).
    pub serves: Vec<String>,
}

/// A model's price and tier: the config's word, else the catalog's price, else the provider's
/// tier; subscription CLIs and loopback servers cost nothing per request.
fn price_and_tier(
    config: &ProviderConfig,
    id: &str,
    price: Option<crate::pricing::Price>,
    tier: Option<crate::pricing::Tier>,
) -> (Option<crate::pricing::Price>, Option<crate::pricing::Tier>) {
    use crate::pricing::{Price, Tier};
    let local = config.kind.is_cli()
        || reqwest::Url::parse(&config.base_url).is_ok_and(|u| {
            u.host_str()
                .is_some_and(crate::config::validate::is_loopback_host)
        });
    let price = price
        .or_else(|| crate::catalog::price(&config.base_url, id))
        .or((local && config.tier.is_none()).then_some(Price::FREE));
    let tier = tier
        .or(price.map(|p| p.tier()))
        .or(config.tier)
        .or(local.then_some(Tier::Free));
    (price, tier)
}

/// A provider ready for routing.
#[derive(Debug)]
pub struct ProviderEntry {
    pub config: ProviderConfig,
    pub models: Vec<ModelInfo>,
    pub keys: Vec<ApiKey>,
    /// Environment variables named in the config but not set.
    pub missing_keys: Vec<String>,
    /// The `headers` to send, secrets read (and marked sensitive, so no debug output shows them).
    pub headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    /// Secret headers (and a CLI's secret variables) whose variable or stored secret is
    /// missing.
    pub missing_headers: Vec<String>,
    /// A CLI's `env`, secrets read from their variable or the secret store.
    pub cli_env: Vec<(String, Secret)>,
    pub runtime: Arc<ProviderRuntime>,
    /// Zone of the daily quota reset.
    pub day_reset: Option<jiff::tz::TimeZone>,
    /// `base_url` + `/chat/completions`, parsed once (URL parsing is not free per request).
    pub chat_url: Option<reqwest::Url>,
}

impl ProviderEntry {
    pub fn id(&self) -> &str {
        &self.config.id
    }

    /// The breaker scope of a model: the model alone, unless the provider declares its limits
    /// provider- or key-wide (`limitScope`), when one breaker covers every model.
    pub fn breaker_scope<'a>(&self, model: &'a str) -> Option<&'a str> {
        use crate::config::LimitScope;
        match self.config.limit_scope {
            Some(LimitScope::Provider | LimitScope::Key) => None,
            _ => Some(model),
        }
    }

    /// The breaker guarding `model` on this provider.
    pub fn breaker(&self, model: &str) -> Arc<crate::limits::breaker::Breaker> {
        self.runtime.breakers.get(self.breaker_scope(model))
    }

    /// The provider's breaker as a whole: `(open_until, consecutive failures)`.
    pub fn breaker_state(&self) -> (Option<i64>, u32) {
        let models: Vec<&str> = self.models.iter().map(|m| m.id.as_str()).collect();
        self.runtime.breakers.provider_snapshot(&models)
    }

    /// The provider's quota day containing `now`: midnight to midnight in its `dayReset` zone
    /// (UTC when none is declared), 23 or 25 hours long on DST days.
    pub fn quota_day(&self, now: i64) -> (i64, i64) {
        match &self.day_reset {
            Some(tz) => crate::clock::day_bounds(now, tz),
            None => crate::clients::utc_day(now),
        }
    }

    /// Why this provider cannot be used at all right now, if so.
    /// The secrets this provider sends, for the redactor: its keys, its secret headers and a
    /// CLI's secret variables (text values are no secret).
    pub fn secret_values(&self) -> impl Iterator<Item = String> + '_ {
        let keys = self.keys.iter().map(|k| k.secret.expose().to_string());
        let headers = self
            .headers
            .iter()
            .filter(|(_, v)| v.is_sensitive())
            .filter_map(|(_, v)| v.to_str().ok().map(str::to_string));
        let vars = self
            .cli_env
            .iter()
            .filter(|(name, _)| self.config.env.get(name).is_some_and(|v| v.is_secret()))
            .map(|(_, v)| v.expose().to_string());
        keys.chain(headers).chain(vars)
    }

    pub fn unavailable(&self) -> Option<String> {
        if self.config.kind.is_cli() {
            if !self.missing_headers.is_empty() {
                return Some(format!(
                    "a secret environment variable is not set: {}",
                    self.missing_headers.join(", ")
                ));
            }
            return self
                .runtime
                .cli_status
                .load()
                .as_ref()
                .and_then(|s| s.problem.clone());
        }
        if self.chat_url.is_none() {
            return Some(format!(
                "base URL `{}` is not a valid URL",
                self.config.base_url
            ));
        }
        if !self.missing_headers.is_empty() {
            return Some(format!(
                "a secret header is not set: {}",
                self.missing_headers.join(", ")
            ));
        }
        if !self.config.keys.is_empty() && self.keys.is_empty() {
            return Some(format!(
                "no API key: environment variable{} {} not set",
                if self.missing_keys.len() > 1 { "s" } else { "" },
                self.missing_keys.join(", ")
            ));
        }
        None
    }

    /// The model named `id`, or else the one that serves that name (the same model under its
    /// vendor's name).
    pub fn model(&self, id: &str) -> Option<&ModelInfo> {
        self.models.iter().find(|m| m.id == id).or_else(|| {
            self.models
                .iter()
                .find(|m| m.serves.iter().any(|s| s == id))
        })
    }

    /// Facts for a model not in the list (pinned by name): provider-wide capabilities.
    pub fn model_or_default(&self, id: &str) -> ModelInfo {
        self.model(id).cloned().unwrap_or_else(|| {
            let (price, tier) = price_and_tier(&self.config, id, None, None);
            ModelInfo {
                id: id.to_string(),
                context_window: self.config.capabilities.context_window,
                tools: self.config.capabilities.tools,
                images: self.config.capabilities.images,
                max_output_tokens: self.config.capabilities.max_output_tokens,
                price,
                tier,
                serves: Vec::new(),
            }
        })
    }
}

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
        config,
        models,
        keys,
        missing_keys,
        headers,
        missing_headers,
        cli_env,
        runtime,
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

/// Shared HTTP clients: one connection pool per distinct connect timeout (usually one).
pub struct HttpClients {
    clients: Mutex<HashMap<(u64, Option<String>), reqwest::Client>>,
}

impl Default for HttpClients {
    fn default() -> Self {
        Self {
            clients: Mutex::new(HashMap::new()),
        }
    }
}

impl HttpClients {
    /// A client with this connect timeout and no proxy of Baton's own.
    pub fn get(&self, connect_ms: u64) -> Result<reqwest::Client, reqwest::Error> {
        self.with(connect_ms, None)
    }

    /// The client a provider's requests go through: its connect timeout, and its `proxy` when
    /// it names one (a dead proxy fails the attempt as an unreachable upstream does: before the
    /// first byte, so the request fails over).
    pub fn for_provider(&self, p: &ProviderConfig) -> Result<reqwest::Client, reqwest::Error> {
        self.with(p.timeouts.connect_ms, p.proxy.as_deref())
    }

    fn with(
        &self,
        connect_ms: u64,
        proxy: Option<&str>,
    ) -> Result<reqwest::Client, reqwest::Error> {
        let key = (connect_ms, proxy.map(str::to_string));
        if let Ok(map) = self.clients.lock() {
            if let Some(c) = map.get(&key) {
                return Ok(c.clone());
            }
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(connect_ms))
            .pool_idle_timeout(Duration::from_secs(90))
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true)
            // An API answering with a redirect is misconfigured; never re-send a prompt elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")));
        if let Some(url) = proxy {
            // Every request of this provider's, whatever its scheme, and nothing else's.
            builder = builder.proxy(reqwest::Proxy::all(url)?);
        }
        let client = builder.build()?;
        if let Ok(mut map) = self.clients.lock() {
            map.insert(key, client.clone());
        }
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked() {
        let s = Secret::new("sk-proj-1234567890abcd");
        assert_eq!(s.masked(), "sk-…abcd");
        assert_eq!(format!("{s:?}"), "Secret(*****)");
        assert_eq!(Secret::new("short").masked(), "…");
    }

    fn headers(pairs: &[(&'static str, &str)]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                *k,
                v.parse()
                    .unwrap_or_else(|_| http::HeaderValue::from_static("")),
            );
        }
        h
    }

    #[test]
    fn a_client_login_is_taken_only_beside_batons_key_and_named_by_its_account() {
        // Baton's key as the API key: no client login; nor when it comes twice.
        assert!(
            ClientCredential::from_headers(&headers(&[("authorization", "Bearer gw-key")]))
                .is_none()
        );
        assert!(ClientCredential::from_headers(&headers(&[
            ("x-baton-key", "gw-key"),
            ("authorization", "Bearer gw-key")
        ]))
        .is_none());
        let claude = ClientCredential::from_headers(&headers(&[
            ("x-baton-key", "gw-key"),
            ("authorization", "Bearer sk-ant-oat01-abc"),
            ("x-app", "cli"),
            ("cookie", "not forwarded"),
        ]))
        .expect("a login");
        assert!(claude.key.id.starts_with("client:") && claude.key.id.len() == 19);
        assert!(!claude.key.id.contains("sk-ant"));
        let names: Vec<&str> = claude.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["authorization", "x-app"],
            "Baton's key and unknown headers stay"
        );
        assert!(claude.headers.iter().all(|(_, v)| v.is_sensitive()));
        // ChatGPT names the account: a refreshed token is the same account.
        let codex = |token: &str| {
            ClientCredential::from_headers(&headers(&[
                ("x-baton-key", "gw-key"),
                ("authorization", token),
                ("chatgpt-account-id", "acct-1"),
                ("x-codex-window-id", "w1"),
            ]))
            .expect("a login")
        };
        assert_eq!(codex("Bearer tok-1").key.id, codex("Bearer tok-2").key.id);
        assert_eq!(codex("Bearer tok-1").headers.len(), 3);

        // Claude Code names the account in its body: a refreshed login is the same account.
        let login = |token: &str| {
            ClientCredential::from_headers(&headers(&[
                ("x-baton-key", "gw-key"),
                ("authorization", token),
            ]))
            .expect("a login")
        };
        let body = |user_id: &str| {
            serde_json::json!({"metadata": {"user_id": user_id}})
                .as_object()
                .cloned()
                .unwrap_or_default()
        };
        let current = body(r#"{"device_id":"d1","account_uuid":"acc-9","session_id":"s1"}"#);
        let older = body("user_abc_account_acc-9_session_s2");
        let a = login("Bearer sk-ant-oat01-old").with_account_in(&current);
        let b = login("Bearer sk-ant-oat01-new").with_account_in(&older);
        assert_eq!(a.key.id, b.key.id);
        assert!(!a.key.id.contains("acc-9"), "a digest, not the account");
        // No account named (an empty one, no metadata): the login itself.
        let blank = body(r#"{"device_id":"d1","account_uuid":"","session_id":"s1"}"#);
        let c = login("Bearer sk-ant-oat01-old").with_account_in(&blank);
        assert_eq!(c.key.id, login("Bearer sk-ant-oat01-old").key.id);
        assert_ne!(c.key.id, a.key.id);
        // The account counts with the Baton key it came with.
        let other_member = ClientCredential::from_headers(&headers(&[
            ("x-baton-key", "bk-another-member"),
            ("authorization", "Bearer sk-ant-oat01-old"),
        ]))
        .expect("a login")
        .with_account_in(&current);
        assert_ne!(other_member.key.id, a.key.id);
    }
}
