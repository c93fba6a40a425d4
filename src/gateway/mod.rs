//! The composition root: [`Core`] owns the store, keys, routing context, client limiter and
//! metrics, and implements what the layers below ask of it (the router's [`Sink`], shared
//! state's [`Host`](crate::shared::Host)). `open` builds it; `crate::server` runs it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::auth::{AuthError, Keys};
use crate::clients::limiter;
use crate::clock::{Clock, SystemClock};
use crate::config::{ConfigFile, ServerConfig};
use crate::events::Events;
use crate::limits::Cooldowns;
use crate::providers::ProviderRuntime;
use crate::router::snapshot::Snapshot;
use crate::router::{Routing, Sink};
use crate::store::{LogRow, Store, StoreError, WriteOp};

mod desktop;
pub mod diagnostics;
pub mod live;
mod local;
pub mod summary;
pub use desktop::DesktopLink;

/// Everything a request handler needs, shared behind one `Arc`.
pub struct Core {
    /// What routing reads and changes (snapshot, cooldowns, events, clock, HTTP clients, CLI
    /// processes, shared state).
    pub routing: Arc<Routing>,
    pub store: Store,
    pub keys: Keys,
    pub server: ServerConfig,
    /// Health counters per provider / key / model.
    pub stats: Arc<crate::stats::Stats>,
    /// Cancelled when shutdown begins: long-lived streams (the UI's event stream) end at once
    /// instead of holding the graceful shutdown open.
    pub stopping: CancellationToken,
    /// Routing paused from the tray: requests get a 503 until resumed.
    pub paused: std::sync::atomic::AtomicBool,
    /// What the desktop shell offers the UI (start at login), when Baton runs inside it.
    pub desktop: arc_swap::ArcSwapOption<DesktopLink>,
    /// The desktop app's updater (checks only when turned on in Settings).
    pub updates: crate::update::Updates,
    /// Where `connect` finds clients' config files (from the environment; tests move it).
    pub client_homes: arc_swap::ArcSwapOption<crate::connect::Homes>,
    /// API keys typed into the UI.
    pub secrets: crate::secrets::SecretStore,
    /// Where this gateway keeps its database and keys.
    pub data_dir: std::path::PathBuf,
    /// The configuration file's settings (server, routing, routes) as loaded at start.
    pub file_config: ConfigFile,
    /// Client keys' rate limits, budgets and bad-request throttle on this instance.
    pub clients: limiter::Limiter,
    pub metrics: crate::metrics::Metrics,
    /// Requests captured for replay and bug reports, when a rule is live (`capture`).
    pub captures: crate::capture::Captures,
    runtimes: Mutex<HashMap<String, Arc<ProviderRuntime>>>,
    /// The detected local last-resort server, once found.
    local: Mutex<Option<crate::config::ProviderConfig>>,
}

impl Core {
    /// Pauses or resumes routing (tray menu, UI, admin API) and tells every listener.
    pub fn set_paused(&self, paused: bool) {
        let was = self
            .paused
            .swap(paused, std::sync::atomic::Ordering::Relaxed);
        if was != paused {
            tracing::info!(
                paused,
                "routing {}",
                if paused { "paused" } else { "resumed" }
            );
            self.routing
                .events
                .emit(crate::events::Event::Paused { paused });
        }
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether `client` may send a request now: its switch and expiry, the bad-request
    /// throttle, then rate limits and budgets (shared ones when Redis is there).
    /// On success, what is left of the key's per-minute limits (for its rate-limit headers).
    pub async fn admit(
        &self,
        client: &crate::clients::Client,
    ) -> Result<limiter::Headroom, limiter::Deny> {
        let now = self.routing.clock.now_ms();
        let verdict = match self.clients.gate(client, now) {
            Err(d) => Err(d),
            Ok(()) if !client.policy.is_metered() => Ok(limiter::Headroom::default()),
            Ok(()) => match self.routing.shared.admit(client, now, &self.clients).await {
                Some(v) => v,
                None => self.clients.admit(client, now),
            },
        };
        if let Err(d) = &verdict {
            self.metrics.denied(&client.id, d.code());
        }
        verdict
    }

    /// Counts a finished request's tokens and estimated cost against its client.
    pub fn spend(&self, client: &Arc<crate::clients::Client>, spend: limiter::Spend) {
        let now = self.routing.clock.now_ms();
        self.clients.spend(client, spend, now);
        self.routing.shared.spend(client, spend, now);
    }

    /// Counts a request the client got wrong (the bad-request throttle).
    /// The key Baton generated for local tools is never paused: it is the one key every tool
    /// on this machine shares (Baton only generates it when it listens on loopback), so one
    /// buggy tool would lock all the others out.
    pub fn bad_request(&self, client: &crate::clients::Client) {
        if client.id == crate::auth::GENERATED_LABEL {
            return;
        }
        if self
            .clients
            .bad_request(&client.id, self.routing.clock.now_ms())
        {
            tracing::warn!(client = %client.label, "client throttled: too many invalid requests in a minute");
        }
    }

    /// The Prometheus text: counters kept as requests finish, gauges read now.
    pub fn metrics_text(&self) -> String {
        let snap = self.routing.snapshot.load();
        let now = self.routing.clock.now_ms();
        let usage = snap
            .providers
            .iter()
            .flat_map(|p| {
                self.routing
                    .usage
                    .accounts(p.id(), now)
                    .into_iter()
                    .map(|a| (p.id().to_string(), a))
            })
            .collect();
        self.metrics.render(crate::metrics::Scrape {
            usage,
            now_ms: now,
            providers: &snap.providers,
            cooldowns: self.routing.cooldowns.active(),
            queued: self
                .routing
                .queued
                .load(std::sync::atomic::Ordering::Relaxed),
            log_dropped: self.store.writer().dropped(),
            shared_up: self.routing.shared.is_up(),
        })
    }

    /// Loads this day's and month's spending per client key from the request log.
    fn seed_budgets(&self) -> Result<(), StoreError> {
        let now = self.routing.clock.now_ms();
        let (day, next_day) = crate::clients::utc_day(now);
        let (month, next_month) = crate::clients::utc_month(now);
        let days: HashMap<String, (u64, u64)> = self
            .store
            .client_totals(day, next_day)?
            .into_iter()
            .map(|(k, t, u)| (k, (t, u)))
            .collect();
        for (id, tokens, micro) in self.store.client_totals(month, next_month)? {
            let d = days.get(&id).copied().unwrap_or((0, 0));
            self.clients
                .seed(&id, (day, d.0, d.1), (month, tokens, micro));
        }
        Ok(())
    }

    /// Looks for the local last-resort server (if enabled) and, when it answers, adds it as the
    /// lowest-priority provider with the models it lists.
    pub async fn detect_local(&self) {
        let lf = &self.file_config.local_fallback;
        if !lf.enabled {
            return;
        }
        let Ok(client) = self.routing.http.get(2_000) else {
            return;
        };
        let url = format!("{}/models", lf.base_url.trim_end_matches('/'));
        let models: Vec<String> = match client
            .get(&url)
            .timeout(Duration::from_secs(3))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => r
                .bytes()
                .await
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v.get("data").and_then(|d| d.as_array()).cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        if models.is_empty() {
            tracing::info!(url = %lf.base_url, "no local last-resort server found");
            return;
        }
        tracing::info!(url = %lf.base_url, models = models.len(), "local last-resort server found");
        let config = local::last_resort(&lf.base_url, models);
        if let Ok(mut l) = self.local.lock() {
            *l = Some(config);
        }
        if let Err(e) = self.reload() {
            tracing::warn!(error = %e, "cannot add the local server");
        }
    }

    /// Asks every enabled provider (or just `only`) for its model list, concurrently.
    pub async fn discover_models(
        &self,
        only: Option<&str>,
    ) -> Vec<(String, crate::providers::discovery::Discovered)> {
        let snap = self.routing.snapshot.load_full();
        let now = self.routing.clock.now_ms();
        let jobs = snap
            .providers
            .iter()
            .filter(|p| {
                // A provider on the client's credential has no key of Baton's to ask with.
                p.config.enabled
                    && !p.config.kind.is_cli()
                    && p.config.credentials.is_baton()
                    && only.is_none_or(|id| id == p.id())
                    && p.unavailable().is_none()
                    // One with no model list (Azure's deployments): its models are configured.
                    && crate::providers::kinds::platform(p.config.kind)
                        .is_some_and(|k| k.models_url(p).is_some())
            })
            .filter_map(|p| {
                let client = self.routing.http.for_provider(p).ok()?;
                let p = p.clone();
                Some(async move {
                    let d = crate::providers::discovery::discover(&client, &p, now).await;
                    (p.id().to_string(), d)
                })
            });
        futures_util::future::join_all(jobs).await
    }

    /// Spent usage windows whose reset has passed: told as `back`, and for a CLI one status
    /// check (its login, not a billed request).
    pub async fn sweep_usage(&self) {
        let now = self.routing.clock.now_ms();
        let back = self.routing.usage.sweep(now);
        self.save_usage();
        let snap = self.routing.snapshot.load_full();
        for (provider, account, notice) in back {
            let Some(p) = snap.provider(&provider) else {
                continue;
            };
            self.routing.tell(p, &account, vec![notice]);
            if p.config.kind.is_cli() {
                self.check_clis(Some(&provider)).await;
            }
        }
    }

    /// Keeps the usage windows for the next start, when they changed.
    pub fn save_usage(&self) {
        if let Some(saved) = self.routing.usage.to_save() {
            let v = serde_json::to_value(saved).unwrap_or_default();
            if let Err(e) = self.store.set_setting(crate::store::USAGE_SETTING, &v) {
                tracing::warn!(error = %e, "cannot keep the usage windows");
            }
        }
    }

    /// The usage windows the last run kept (after the thresholds are set: what was told is
    /// not told again).
    pub fn restore_usage(&self) {
        let saved = self
            .store
            .setting(crate::store::USAGE_SETTING)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        self.routing.usage.restore(saved);
    }

    /// Checks every CLI provider's executable, version and login (in parallel, off the async
    /// runtime) and records the result where routing and `/admin/state` read it.
    /// `only`: just that provider (after it was saved, so its row is complete at once).
    pub async fn check_clis(&self, only: Option<&str>) {
        let snap = self.routing.snapshot.load_full();
        let now = self.routing.clock.now_ms();
        let jobs = snap
            .providers
            .iter()
            .filter(|p| p.config.kind.is_cli() && only.is_none_or(|id| id == p.id()))
            .map(|p| {
                let p = p.clone();
                async move {
                    let config = p.config.clone();
                    let vars = p.cli_env.clone();
                    let st = tokio::task::spawn_blocking(move || {
                        crate::providers::cli::check_status(&config, &vars, now)
                    })
                    .await
                    .unwrap_or_default();
                    match &st.problem {
                        Some(problem) => {
                            tracing::warn!(provider = p.id(), %problem, "CLI provider unavailable")
                        }
                        None => tracing::info!(
                            provider = p.id(),
                            version = st.version.as_deref().unwrap_or("?"),
                            logged_in = ?st.logged_in,
                            "CLI provider ready"
                        ),
                    }
                    // Codex tells its login's windows without a request: into the usage book.
                    let windows = st.windows.clone();
                    p.runtime.cli_status.store(Some(Arc::new(st)));
                    self.routing.usage_signal(&p, "", windows);
                }
            });
        futures_util::future::join_all(jobs).await;
    }

    /// A provider key by its lookup name: a stored secret (`stored:ID`) or an environment
    /// variable.
    pub fn secret(&self, name: &str) -> Option<String> {
        match name.strip_prefix(crate::secrets::LOOKUP_PREFIX) {
            Some(id) => self.secrets.get(id),
            None => std::env::var(name).ok(),
        }
    }

    /// Loads the UI-made gateway keys into the key checker (at start and after each change).
    pub fn load_ui_keys(&self) -> Result<(), StoreError> {
        let keys = self.store.client_keys()?;
        self.keys.set_ui_keys(
            keys.into_iter()
                .map(|k| {
                    let client = crate::clients::Client {
                        id: k.id,
                        label: format!("ui:{}", k.label),
                        policy: k.policy,
                    };
                    (Arc::new(client), k.hash)
                })
                .collect(),
        );
        Ok(())
    }

    /// After a client key was made, changed or revoked here: the key checker reloads and the
    /// other instances (when state is shared) hear of it.
    pub fn client_key_changed(&self, id: &str) -> Result<(), StoreError> {
        self.load_ui_keys()?;
        self.routing.shared.key_changed(&self.store, id);
        Ok(())
    }

    /// [`Core::reload`] on a blocking thread, for the admin API: rebuilding the snapshot reads
    /// the database and every key, and must not hold an async worker that chat requests need.
    pub async fn reload_blocking(self: &Arc<Self>) -> Result<(), StoreError> {
        let core = self.clone();
        match tokio::task::spawn_blocking(move || core.reload()).await {
            Ok(r) => r,
            Err(_) => self.reload(),
        }
    }

    /// Rebuilds the routing snapshot from the stored providers and swaps it in. Requests in
    /// flight keep the snapshot they started with.
    pub fn reload(&self) -> Result<(), StoreError> {
        let stored = self.store.load_providers()?;
        let mut configs: Vec<crate::config::ProviderConfig> =
            stored.iter().map(|s| s.effective()).collect();
        if let Some(local) = self.local.lock().ok().and_then(|l| l.clone()) {
            configs.push(local);
        }
        let env = |name: &str| self.secret(name);
        let mut snap = {
            let mut rt = self
                .runtimes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Snapshot::build(
                configs,
                self.live_routes(),
                self.file_config.routing.clone(),
                &mut rt,
                &env,
            )
        };
        snap.set_model_map(&self.live_model_map());
        snap.web_search = Arc::new(self.web_search_service());
        self.routing.redactor.set_secrets(
            snap.providers
                .iter()
                .flat_map(|p| p.secret_values())
                .chain(self.keys.secret_values())
                .chain(snap.web_search.key().map(str::to_string))
                .chain(
                    self.telemetry_headers(&self.telemetry_settings())
                        .into_iter()
                        .map(|(_, v)| v),
                ),
        );
        for p in &snap.providers {
            if let Some(why) = p.unavailable() {
                tracing::warn!(provider = p.id(), "provider unavailable: {why}");
            }
        }
        self.routing.snapshot.store(Arc::new(snap));
        self.routing
            .events
            .emit(crate::events::Event::ConfigChanged);
        Ok(())
    }
}

/// A finished request: its spending, health statistics, metrics, the request event, then the
/// request-log row (written by the batched writer).
impl Sink for Core {
    fn finished(
        &self,
        client: &Arc<crate::clients::Client>,
        row: LogRow,
        total: Duration,
        upstream_us: u64,
    ) {
        let tokens = row.input_tokens.unwrap_or(0) + row.output_tokens.unwrap_or(0);
        let cost = row.cost_usd;
        if tokens > 0 || cost.is_some_and(|c| c > 0.0) {
            self.spend(
                client,
                limiter::Spend {
                    tokens,
                    micro_usd: (cost.unwrap_or(0.0) * 1_000_000.0).round() as u64,
                },
            );
        }
        self.stats.observe(&row);
        self.metrics.observe(&row, total, upstream_us);
        let events = &self.routing.events;
        if events.has_subscribers() {
            events.emit(crate::events::Event::Request {
                id: row.id.clone(),
                requested_model: row.requested_model.clone(),
                provider: row.provider.clone(),
                model: row.model.clone(),
                status: row.status,
                attempts: row.attempts.iter().filter(|a| a.class.sent()).count(),
                total_ms: row.total_ms,
            });
        }
        self.store.writer().send(WriteOp::Log(Box::new(row)));
    }
}

impl crate::shared::Host for Core {
    fn now_ms(&self) -> i64 {
        self.routing.clock.now_ms()
    }
    fn provider(&self, id: &str) -> Option<Arc<crate::providers::ProviderEntry>> {
        self.routing
            .snapshot
            .load()
            .providers
            .iter()
            .find(|p| p.id() == id)
            .cloned()
    }
    fn cooldowns(&self) -> &Cooldowns {
        &self.routing.cooldowns
    }
    fn store(&self) -> &Store {
        &self.store
    }
    fn clients(&self) -> &limiter::Limiter {
        &self.clients
    }
    fn reload_keys(&self) -> Result<(), StoreError> {
        self.load_ui_keys()
    }
    fn stopping(&self) -> &CancellationToken {
        &self.stopping
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("cannot read the listener address: {0}")]
    Listener(std::io::Error),
    #[error(transparent)]
    Shared(#[from] crate::shared::SharedError),
}

/// What the gateway needs to start.
pub struct StartOptions {
    pub config: ConfigFile,
    pub data_dir: PathBuf,
    /// Replaces the system clock (tests).
    pub clock: Option<Arc<dyn Clock>>,
}

/// Builds the core: opens the store, seeds it from the config file, loads cooldowns and keys
/// and builds the first snapshot. Nothing listens and no background task runs yet (the
/// router's unit tests use the core as it is). Returns the gateway key generated on first
/// start, if one was.
pub(crate) async fn open(opts: StartOptions) -> Result<(Arc<Core>, Option<String>), StartError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let clock = opts.clock.unwrap_or_else(|| Arc::new(SystemClock));
    let store = Store::open_with_clock(&opts.data_dir, &opts.config.log, clock.clone())?;
    let now = clock.now_ms();
    store.sync_file_providers(&opts.config.providers, now)?;
    let events = Events::default();
    let cooldowns = Cooldowns::new(
        clock.clone(),
        Some(Box::new(store.writer().clone())),
        events.clone(),
    );
    cooldowns.load(store.load_cooldowns(now)?);
    let shared = match (&opts.config.state.backend, &opts.config.state.redis) {
        (crate::config::StateBackend::Redis, Some(r)) => crate::shared::Shared::redis(r)?,
        _ => crate::shared::Shared::local(),
    };
    cooldowns.share(Box::new(shared.clone()));
    let (keys, generated_key) = Keys::load(&opts.config, &opts.data_dir)?;
    crate::store::make_private(&opts.data_dir);
    let server_cfg = opts.config.server.clone();
    let empty = Snapshot::build(
        Vec::new(),
        Default::default(),
        Default::default(),
        &mut HashMap::new(),
        &|_| None,
    );
    let core = Arc::new_cyclic(|me: &std::sync::Weak<Core>| {
        let sink: std::sync::Weak<dyn Sink> = me.clone();
        let routing = Arc::new(Routing::new(empty, cooldowns, events, clock, shared, sink));
        let retention = opts.config.log.retention_days;
        Core {
            captures: crate::capture::Captures::new(
                &opts.data_dir,
                routing.redactor.clone(),
                retention,
            ),
            routing,
            store,
            keys,
            server: server_cfg,
            stats: Default::default(),
            paused: Default::default(),
            stopping: CancellationToken::new(),
            desktop: Default::default(),
            updates: Default::default(),
            client_homes: arc_swap::ArcSwapOption::from_pointee(crate::connect::Homes::from_env()),
            secrets: crate::secrets::SecretStore::new(&opts.data_dir),
            data_dir: opts.data_dir.clone(),
            runtimes: Mutex::new(HashMap::new()),
            local: Mutex::new(None),
            clients: Default::default(),
            metrics: Default::default(),
            file_config: opts.config,
        }
    });
    core.reload()?;
    core.load_ui_keys()?;
    core.seed_budgets()?;
    core.load_capture_rules();
    Ok((core, generated_key))
}
