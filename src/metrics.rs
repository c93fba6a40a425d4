//! `GET /metrics`: Prometheus text exposition of requests, attempts, failovers, tokens, cost,
//! latency (total and Baton's own share), client refusals, and — read at scrape time —
//! cooldowns, breaker states, in-flight requests and queued requests.
//!
//! Labels are provider ids, client key ids and a few fixed words. Providers and keys are what
//! the admin configured, and each label is capped at [`MAX_LABEL_VALUES`] distinct values
//! (later ones are counted as `other`), so a misbehaving setup cannot grow the series forever.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::store::LogRow;

mod kept;

use kept::{kept_counter, ByClient, ByKey, Kept};

/// Distinct values kept per label before the rest become `other`.
pub const MAX_LABEL_VALUES: usize = 200;

type L1 = Labels<1>;
type L2 = Labels<2>;
type L3 = Labels<3>;

/// A series' labels: names and values. A family finds its series in a map hashed by SipHash,
/// which over the names and values took ~1,200 instructions a lookup, five lookups a request;
/// here the values are folded into one word first (foldhash, seeded per process), and equal
/// label sets still hash alike.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Labels<const N: usize>([(&'static str, Arc<str>); N]);

impl<const N: usize> std::hash::Hash for Labels<N> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        use std::hash::BuildHasher;
        static SEED: std::sync::LazyLock<foldhash::fast::RandomState> =
            std::sync::LazyLock::new(foldhash::fast::RandomState::default);
        // A family's label names are the same in every series: only the values tell apart.
        state.write_u64(SEED.hash_one(self.0.each_ref().map(|(_, v)| &**v)));
    }
}

impl<const N: usize> prometheus_client::encoding::EncodeLabelSet for Labels<N> {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}
type HistFamily = Family<L1, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.001, 2.0, 17,
    ))
}

fn added_histogram() -> Histogram {
    // 25 µs … ~100 ms: Baton's own share is small.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_025, 2.0, 13,
    ))
}

/// Caps the distinct values of one label (looked up on every request: foldhash, not SipHash).
#[derive(Default)]
struct Cap(Mutex<HashSet<Arc<str>, foldhash::fast::RandomState>>);

impl Cap {
    fn get(&self, v: &str) -> Arc<str> {
        let Ok(mut seen) = self.0.lock() else {
            return Arc::from("other");
        };
        if let Some(a) = seen.get(v) {
            return a.clone();
        }
        if seen.len() >= MAX_LABEL_VALUES {
            return Arc::from("other");
        }
        let a: Arc<str> = Arc::from(v);
        seen.insert(a.clone());
        a
    }
}

pub struct Metrics {
    registry: Registry,
    by_client: Kept<ByClient>,
    by_key: Kept<ByKey>,
    requests: Family<L3, Counter>,
    attempts: Family<L3, Counter>,
    failovers: Family<L1, Counter>,
    tokens: Family<L3, Counter>,
    cost: Family<L1, Counter<f64, std::sync::atomic::AtomicU64>>,
    duration: HistFamily,
    added: Histogram,
    denied: Family<L2, Counter>,
    cooldowns: Family<L1, Gauge>,
    breaker_open: Family<L1, Gauge>,
    in_flight: Family<L1, Gauge>,
    queued: Gauge,
    log_dropped: Counter,
    shared_up: Gauge,
    quota_used: Family<L3, Gauge<f64, std::sync::atomic::AtomicU64>>,
    quota_reset: Family<L3, Gauge<f64, std::sync::atomic::AtomicU64>>,
    providers: Cap,
    clients: Cap,
    keys: Cap,
}

impl Default for Metrics {
    // Long because it is one registration per metric, in the order `/metrics` lists them.
    fn default() -> Self {
        let mut registry = Registry::with_prefix("baton");
        let requests = Family::<L3, Counter>::default();
        registry.register(
            "requests",
            "Client requests by serving provider (none when nothing served), client key and HTTP status",
            requests.clone(),
        );
        let attempts = Family::<L3, Counter>::default();
        registry.register(
            "upstream_attempts",
            "Upstream attempts by provider, provider key (its non-secret id, e.g. env:GROQ_API_KEY) and outcome class (ok, rate, quota, transient, auth, request…)",
            attempts.clone(),
        );
        let failovers = Family::<L1, Counter>::default();
        registry.register(
            "failovers",
            "Failovers away from a provider (an attempt failed and another candidate was tried)",
            failovers.clone(),
        );
        let tokens = Family::<L3, Counter>::default();
        registry.register(
            "tokens",
            "Tokens by serving provider, client key and direction (input, output; cache_read and cache_write are the parts of input read from and written to the provider's prompt cache)",
            tokens.clone(),
        );
        let cost = Family::<L1, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "estimated_cost_usd",
            "Estimated cost in US dollars by client key, from model prices",
            cost.clone(),
        );
        let duration: HistFamily = Family::new_with_constructor(latency_histogram);
        registry.register(
            "request_duration_seconds",
            "Total request time by serving provider",
            duration.clone(),
        );
        let added = added_histogram();
        registry.register(
            "added_latency_seconds",
            "Baton's own share of each request's time to first byte: total minus time spent waiting on upstreams",
            added.clone(),
        );
        let denied = Family::<L2, Counter>::default();
        registry.register(
            "client_denied",
            "Requests refused before routing by client key and reason (rate, tokens, budget, bad requests, disabled, expired, not allowed)",
            denied.clone(),
        );
        let cooldowns = Family::<L1, Gauge>::default();
        registry.register(
            "cooldowns_active",
            "Active cooldowns (provider, key or model scopes) by provider",
            cooldowns.clone(),
        );
        let breaker_open = Family::<L1, Gauge>::default();
        registry.register(
            "breaker_open",
            "1 when the provider's circuit breaker is open",
            breaker_open.clone(),
        );
        let in_flight = Family::<L1, Gauge>::default();
        registry.register(
            "in_flight",
            "Upstream requests in flight by provider",
            in_flight.clone(),
        );
        let queued = Gauge::default();
        registry.register(
            "queued",
            "Requests waiting for a provider concurrency slot",
            queued.clone(),
        );
        let log_dropped = Counter::default();
        registry.register(
            "log_rows_dropped",
            "Request-log rows dropped because the database did not keep up",
            log_dropped.clone(),
        );
        let shared_up = Gauge::default();
        registry.register(
            "shared_state_up",
            "1 when the shared Redis state is reachable, 0 when it is not, -1 without one",
            shared_up.clone(),
        );
        let quota_used = Family::<L3, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "quota_used_ratio",
            "Share used (0..1) of each usage window (5h, 7d, 1m_requests…) by provider and account (a key id, client:… for a subscription passed through, empty for a CLI's login)",
            quota_used.clone(),
        );
        let quota_reset = Family::<L3, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "quota_reset_seconds",
            "Seconds until each usage window resets, by provider, account and window",
            quota_reset.clone(),
        );
        Self {
            registry,
            quota_used,
            quota_reset,
            requests,
            attempts,
            failovers,
            tokens,
            cost,
            duration,
            added,
            denied,
            cooldowns,
            breaker_open,
            in_flight,
            queued,
            log_dropped,
            shared_up,
            providers: Cap::default(),
            clients: Cap::default(),
            keys: Cap::default(),
            by_client: Kept::default(),
            by_key: Kept::default(),
        }
    }
}

fn status_label(status: u16) -> Arc<str> {
    static COMMON: std::sync::LazyLock<Vec<(u16, Arc<str>)>> = std::sync::LazyLock::new(|| {
        [
            200, 400, 401, 403, 404, 408, 413, 422, 429, 499, 500, 502, 503, 504,
        ]
        .into_iter()
        .map(|s| (s, Arc::from(s.to_string())))
        .collect()
    });
    COMMON
        .iter()
        .find(|(s, _)| *s == status)
        .map(|(_, a)| a.clone())
        .unwrap_or_else(|| Arc::from(status.to_string()))
}

impl Metrics {
    /// Counts one finished request.
    pub fn observe(&self, row: &LogRow, total: Duration, upstream_us: u64) {
        let provider = row.provider.as_deref().unwrap_or("none");
        let client = self.by_client.with(
            provider,
            &row.client_key,
            || self.by_client_series(provider, &row.client_key),
            |s| {
                self.count_request(s, row, total);
                s.client.clone()
            },
        );
        let sent: Vec<_> = row.attempts.iter().filter(|a| a.class.sent()).collect();
        for (i, a) in sent.iter().enumerate() {
            let key = a.key.as_deref().unwrap_or("none");
            let make = || ByKey {
                provider: self.providers.get(&a.provider),
                key: self.keys.get(key),
                attempts: Vec::new(),
            };
            let p = self.by_key.with(&a.provider, key, make, |s| {
                let class = a.class.as_str();
                kept_counter(&mut s.attempts, class, || {
                    self.attempts.get_or_create(&Labels([
                        ("provider", s.provider.clone()),
                        ("key", s.key.clone()),
                        ("class", Arc::from(class)),
                    ]))
                })
                .inc();
                s.provider.clone()
            });
            let moved_on = sent
                .get(i + 1)
                .is_some_and(|n| n.provider != a.provider || n.model != a.model);
            let failed = matches!(a.class, crate::limits::Outcome::Failed(_));
            if failed && moved_on {
                self.failovers
                    .get_or_create(&Labels([("provider", p)]))
                    .inc();
            }
        }
        if let Some(c) = row.cost_usd.filter(|c| *c > 0.0) {
            self.cost
                .get_or_create(&Labels([("client", client)]))
                .inc_by(c);
        }
        if !sent.is_empty() {
            let first_byte = row
                .ttfb_ms
                .map(|_| total.min(Duration::from_millis(row.ttfb_ms.unwrap_or(0) + 1)))
                .unwrap_or(total);
            let own = first_byte
                .as_micros()
                .saturating_sub(upstream_us as u128)
                .min(total.as_micros());
            self.added.observe(own as f64 / 1_000_000.0);
        }
    }

    fn by_client_series(&self, provider: &str, client: &str) -> ByClient {
        let provider = self.providers.get(provider);
        ByClient {
            duration: self
                .duration
                .get_or_create(&Labels([("provider", provider.clone())]))
                .clone(),
            provider,
            client: self.clients.get(client),
            requests: Vec::new(),
            tokens: Default::default(),
        }
    }

    /// The request by status, its tokens by direction and its duration.
    fn count_request(&self, s: &mut ByClient, row: &LogRow, total: Duration) {
        kept_counter(&mut s.requests, row.status, || {
            self.requests.get_or_create(&Labels([
                ("provider", s.provider.clone()),
                ("client", s.client.clone()),
                ("status", status_label(row.status)),
            ]))
        })
        .inc();
        let counts = [
            row.input_tokens,
            row.output_tokens,
            row.cache_read_tokens,
            row.cache_write_tokens,
        ];
        const DIRECTIONS: [&str; 4] = ["input", "output", "cache_read", "cache_write"];
        for ((n, slot), dir) in counts.into_iter().zip(&mut s.tokens).zip(DIRECTIONS) {
            let Some(n) = n.filter(|n| *n > 0) else {
                continue;
            };
            slot.get_or_insert_with(|| {
                self.tokens
                    .get_or_create(&Labels([
                        ("provider", s.provider.clone()),
                        ("client", s.client.clone()),
                        ("direction", Arc::from(dir)),
                    ]))
                    .clone()
            })
            .inc_by(n);
        }
        s.duration.observe(total.as_secs_f64());
    }

    /// Counts a request refused before routing.
    pub fn denied(&self, client: &str, reason: &'static str) {
        self.denied
            .get_or_create(&Labels([
                ("client", self.clients.get(client)),
                ("reason", Arc::from(reason)),
            ]))
            .inc();
    }

    /// Sets the scrape-time gauges and renders everything.
    pub fn render(&self, at: Scrape<'_>) -> String {
        let now = at.now_ms;
        self.cooldowns.clear();
        self.breaker_open.clear();
        self.in_flight.clear();
        for p in at.providers {
            let id = self.providers.get(p.id());
            self.in_flight
                .get_or_create(&Labels([("provider", id.clone())]))
                .set(
                    p.runtime
                        .in_flight
                        .load(std::sync::atomic::Ordering::Relaxed) as i64,
                );
            let open = p.breaker_state().0.is_some_and(|u| u > now);
            self.breaker_open
                .get_or_create(&Labels([("provider", id.clone())]))
                .set(open as i64);
            self.cooldowns
                .get_or_create(&Labels([("provider", id)]))
                .set(0);
        }
        for c in at.cooldowns {
            self.cooldowns
                .get_or_create(&Labels([(
                    "provider",
                    self.providers.get(&c.scope.provider),
                )]))
                .inc();
        }
        self.quota_used.clear();
        self.quota_reset.clear();
        for (provider, a) in &at.usage {
            for w in &a.windows {
                let labels = Labels([
                    ("provider", self.providers.get(provider)),
                    ("account", self.keys.get(&a.account)),
                    ("window", Arc::from(w.id.as_str())),
                ]);
                self.quota_used
                    .get_or_create(&labels)
                    .set(w.used_or_status());
                if let Some(r) = w.resets_at_ms {
                    self.quota_reset
                        .get_or_create(&labels)
                        .set(((r - now).max(0) as f64) / 1000.0);
                }
            }
        }
        self.queued.set(at.queued as i64);
        // The writer counts drops; the counter catches up at scrape time.
        let dropped = at.log_dropped;
        let seen = self.log_dropped.get();
        if dropped > seen {
            self.log_dropped.inc_by(dropped - seen);
        }
        self.shared_up.set(match at.shared_up {
            None => -1,
            Some(up) => up as i64,
        });
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// What the scrape-time gauges show, read by the caller from the running gateway.
pub struct Scrape<'a> {
    pub now_ms: i64,
    pub providers: &'a [Arc<crate::providers::ProviderEntry>],
    pub cooldowns: Vec<crate::limits::CooldownEntry>,
    /// Requests waiting for a concurrency slot.
    pub queued: usize,
    /// Request-log rows the writer has dropped so far.
    pub log_dropped: u64,
    /// Whether shared state is reachable (`None`: not configured).
    pub shared_up: Option<bool>,
    /// Every account's usage windows, by provider id.
    pub usage: Vec<(String, crate::limits::usage::AccountUsage)>,
}

#[cfg(test)]
mod tests;
