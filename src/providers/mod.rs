//! Upstream providers: resolved definitions (keys read from the environment), their run-time
//! state (concurrency limit, key cursor) and one adapter per upstream kind.

pub mod cli;
pub mod codec;
pub mod discovery;
pub mod eventstream;
pub mod kinds;
pub mod outbound;
pub mod presence;
pub mod resolve;
pub(crate) mod secret;
pub mod sse;
pub mod state;
pub mod thinking;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::config::ProviderConfig;

pub(crate) mod client;
pub use client::{ClientCredential, Vendor, BATON_KEY_HEADER};
pub use secret::{ApiKey, Secret};

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
    pub cli_status: arc_swap::ArcSwapOption<cli::state::CliStatus>,
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
    /// Honours a JSON schema; else the schema goes in its system prompt.
    pub structured_output: bool,
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
pub(crate) fn price_and_tier(
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
    /// Shared with every routing target that names one (a request's candidates are cheap to
    /// list however many providers serve its model).
    pub models: Vec<Arc<ModelInfo>>,
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
    /// The last quota day `quota_day` worked out in that zone: routing asks for every
    /// candidate on every request, and a zone's calendar is not free to consult.
    pub day_cache: Mutex<Option<(i64, i64)>>,
    /// The login of its `proxy` (`USER:PASSWORD`), read from its reference.
    pub proxy_login: Option<Secret>,
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
        let Some(tz) = &self.day_reset else {
            return crate::clients::utc_day(now);
        };
        let cached = self.day_cache.lock().ok().and_then(|c| *c);
        if let Some((start, end)) = cached.filter(|(s, e)| (*s..*e).contains(&now)) {
            return (start, end);
        }
        let day = crate::clock::day_bounds(now, tz);
        if let Ok(mut c) = self.day_cache.lock() {
            *c = Some(day);
        }
        day
    }

    /// Why this provider cannot be used at all right now, if so.
    /// The secrets this provider sends, for the redactor: its keys, its secret headers, a
    /// CLI's secret variables and its proxy's login (text values are no secret).
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
        let proxy = self.proxy_login.iter().map(|l| l.expose().to_string());
        keys.chain(headers).chain(vars).chain(proxy)
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
        if let (Some(r), None) = (&self.config.proxy_login, &self.proxy_login) {
            return Some(format!(
                "the proxy's login is not set: {}",
                crate::config::HeaderValue::Secret(r.clone()).missing("proxyLogin")
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
    pub fn model(&self, id: &str) -> Option<&Arc<ModelInfo>> {
        self.models.iter().find(|m| m.id == id).or_else(|| {
            self.models
                .iter()
                .find(|m| m.serves.iter().any(|s| s == id))
        })
    }

    /// Facts for a model not in the list (pinned by name): provider-wide capabilities.
    pub fn model_or_default(&self, id: &str) -> Arc<ModelInfo> {
        self.model(id).cloned().unwrap_or_else(|| {
            let (price, tier) = price_and_tier(&self.config, id, None, None);
            Arc::new(ModelInfo {
                id: id.to_string(),
                context_window: self.config.capabilities.context_window,
                tools: self.config.capabilities.tools,
                images: self.config.capabilities.images,
                structured_output: self.config.capabilities.structured_output,
                max_output_tokens: self.config.capabilities.max_output_tokens,
                price,
                tier,
                serves: Vec::new(),
            })
        })
    }
}

/// Shared HTTP clients: one connection pool per distinct connect timeout (usually one).
pub struct HttpClients {
    /// Looked up on every attempt: foldhash (seeded per process), not SipHash.
    clients: Mutex<HashMap<ClientKey, reqwest::Client, foldhash::fast::RandomState>>,
}

/// What tells two clients apart: the connect timeout, the proxy, and a digest of the proxy's
/// login (never the login itself).
type ClientKey = (u64, Option<String>, u64);

impl Default for HttpClients {
    fn default() -> Self {
        Self {
            clients: Mutex::new(HashMap::default()),
        }
    }
}

impl HttpClients {
    /// A client with this connect timeout and no proxy of Baton's own.
    pub fn get(&self, connect_ms: u64) -> Result<reqwest::Client, reqwest::Error> {
        self.with(connect_ms, None, None)
    }

    /// The client a provider's requests go through: its connect timeout, and its `proxy` when
    /// it names one, with its login (a dead proxy fails the attempt as an unreachable upstream
    /// does: before the first byte, so the request fails over).
    pub fn for_provider(&self, p: &ProviderEntry) -> Result<reqwest::Client, reqwest::Error> {
        self.with(
            p.config.timeouts.connect_ms,
            p.config.proxy.as_deref(),
            p.proxy_login.as_ref(),
        )
    }

    fn with(
        &self,
        connect_ms: u64,
        proxy: Option<&str>,
        login: Option<&Secret>,
    ) -> Result<reqwest::Client, reqwest::Error> {
        let digest = login.map_or(0, |l| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            l.expose().hash(&mut h);
            h.finish()
        });
        let key = (connect_ms, proxy.map(str::to_string), digest);
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
            let mut proxy = reqwest::Proxy::all(url)?;
            if let Some((user, password)) = login.and_then(|l| l.expose().split_once(':')) {
                proxy = proxy.basic_auth(user, password);
            }
            builder = builder.proxy(proxy);
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

    /// The quota day is remembered, never trusted outside its bounds: the clock crossing
    /// midnight in the zone (or going back) gets that day's bounds, DST days included.
    #[test]
    fn the_remembered_quota_day_follows_the_clock_across_midnight() {
        let config = serde_json::from_value(serde_json::json!({"id": "p",
            "kind": "openai-compatible", "baseUrl": "https://api.example.com/v1",
            "models": ["m"], "dayReset": "America/New_York"}))
        .unwrap_or_else(|e| panic!("{e}"));
        let p = resolve::resolve(config, Arc::new(ProviderRuntime::new(None)), &|_| None);
        let ms = |s: &str| {
            s.parse::<jiff::Timestamp>()
                .map(|t| t.as_millisecond())
                .unwrap_or_else(|e| panic!("{e}"))
        };
        // 2026-03-08 is New York's spring-forward day (23 hours); it starts 05:00 UTC.
        let (day7, day8, day9) = (
            ms("2026-03-07T05:00:00Z"),
            ms("2026-03-08T05:00:00Z"),
            ms("2026-03-09T04:00:00Z"),
        );
        assert_eq!(p.quota_day(day8 - 1), (day7, day8));
        assert_eq!(p.quota_day(day8 - 1), (day7, day8), "remembered");
        assert_eq!(p.quota_day(day8), (day8, day9), "midnight crossed");
        assert_eq!(p.quota_day(day9 - 1), (day8, day9));
        assert_eq!(p.quota_day(day8 - 1), (day7, day8), "the clock went back");
        assert_eq!(p.quota_day(day9), (day9, day9 + 86_400_000));
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
