//! The configuration file's own sections (a leaf of the config module): the whole file
//! (`ConfigFile`), server, routing, log, local fallback, routes and gateway keys, with their
//! defaults. Providers are `provider.rs`'s, shared state `state.rs`'s.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::provider::{default_true, ProviderConfig};
use super::state::StateConfig;
use super::web_search;

/// Default listen port.
pub const DEFAULT_PORT: u16 = 8787;

/// Names that cannot be provider ids or route names because requests use them.
pub const RESERVED_MODEL_NAMES: &[&str] = &["auto"];

/// The whole configuration file (`config.example.json` documents every field).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    /// Path or URL of the JSON schema; ignored by Baton, used by editors.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Listener and request-size settings.
    #[serde(default)]
    pub server: ServerConfig,
    /// Keys that clients must present (`Authorization: Bearer` or `x-api-key`). When empty,
    /// Baton generates one on first start and keeps it in the data directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateway_keys: Vec<GatewayKeyConfig>,
    /// Failover, cooldown and queueing behaviour.
    #[serde(default)]
    pub routing: RoutingConfig,
    /// Request-log retention.
    #[serde(default)]
    pub log: LogConfig,
    /// Upstream providers. Lower `priority` is tried first for `auto`.
    #[serde(default)]
    pub providers: Vec<ProviderConfig>,
    /// Named routes: ordered fallback chains of `provider`, `provider/model` or other route
    /// names; a list, or an object with `targets` and options.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub routes: BTreeMap<String, RouteConfig>,
    /// A local OpenAI-compatible server (Ollama by default) used as the last resort when every
    /// configured provider is cooling or failing — only when enabled.
    #[serde(default, skip_serializing_if = "LocalFallback::is_default")]
    pub local_fallback: LocalFallback,
    /// Model names clients send (exact, or globs with `*`) mapped to what Baton routes them to,
    /// e.g. `{"claude-haiku-*": "fast", "claude-*": "auto"}`. The most specific pattern wins.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_map: BTreeMap<String, String>,
    /// Where the state several instances must share lives: `sqlite` (this instance only, the
    /// default) or `redis` (cooldowns, breaker states, client rate limits and budgets, and
    /// per-provider concurrency shared by every instance on the same Redis).
    #[serde(default, skip_serializing_if = "StateConfig::is_default")]
    pub state: StateConfig,
    /// The search service hosted web search (Claude Code's WebSearch, Codex's web_search,
    /// Gemini's grounding) runs through when a provider of another API serves it. Given here,
    /// it is the file's: Settings shows it and cannot change it. Absent, Settings → Web search
    /// sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search: Option<web_search::SearchSettings>,
    /// OpenTelemetry traces of the requests served, sent to an OTLP/HTTP collector. Given
    /// here, they are the file's: Settings shows them and cannot change them. Absent,
    /// Settings → Diagnostics sets them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<super::telemetry::TelemetrySettings>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on. Loopback by default; any other address requires `gatewayKeys`.
    #[serde(default = "default_host")]
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    /// Largest request body accepted, in bytes (413 above it).
    #[serde(default = "default_max_body")]
    pub max_body_bytes: usize,
    /// Extra `Host` header names accepted besides loopback names and `host` (DNS-rebinding guard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
    /// How long a shutdown waits for in-flight requests before cutting them off.
    #[serde(default = "default_grace")]
    pub shutdown_grace_ms: u64,
    /// Longest a client may take to send a request's headers; also how long an idle
    /// keep-alive connection stays open.
    #[serde(default = "default_header_timeout")]
    pub header_timeout_ms: u64,
    /// Longest silence while a client sends a request body; after that long, the body must
    /// also keep arriving at 16 KiB/s on average (a trickling upload gets a 408).
    #[serde(default = "default_body_timeout")]
    pub body_timeout_ms: u64,
    /// Inbound API requests (chat, messages, token counts) handled at once; beyond this a
    /// request gets a 503 with `Retry-After`. Streams count until they end.
    #[serde(default = "default_max_concurrent")]
    pub max_concurrent_requests: usize,
    /// Memory all requests in flight may hold together, in bytes: each is charged its body
    /// and an estimate of parsing it; beyond this a request gets a 503 with `Retry-After`.
    #[serde(default = "default_memory_budget")]
    pub memory_budget_bytes: usize,
    /// JSON values (objects, arrays, members, elements) one request body may hold; a body
    /// with more is refused (413) before it is parsed.
    #[serde(default = "default_max_json_values")]
    pub max_json_values: usize,
    /// Open client connections at most. When reached, a new connection takes the place of
    /// the oldest one that has not sent a request's headers yet, else of the longest-idle
    /// keep-alive one; when every connection is serving a request, it waits in the listen
    /// queue. A warning is logged (once a minute).
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// Open connections one address other than loopback may hold at most (its own least
    /// useful connection makes room for its next, or that one is closed). Loopback is exempt:
    /// every local client shares its address.
    #[serde(default = "default_max_connections_per_peer")]
    pub max_connections_per_peer: usize,
    /// How long a WebSocket (Codex's Responses transport) may stay open without a message
    /// before it is closed; the client reconnects for its next turn.
    #[serde(default = "default_web_socket_idle")]
    pub web_socket_idle_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: default_host(),
            port: default_port(),
            max_body_bytes: default_max_body(),
            allowed_hosts: Vec::new(),
            shutdown_grace_ms: default_grace(),
            header_timeout_ms: default_header_timeout(),
            body_timeout_ms: default_body_timeout(),
            max_connections: default_max_connections(),
            max_connections_per_peer: default_max_connections_per_peer(),
            max_concurrent_requests: default_max_concurrent(),
            memory_budget_bytes: default_memory_budget(),
            max_json_values: default_max_json_values(),
            web_socket_idle_ms: default_web_socket_idle(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoutingConfig {
    /// Cooldown after a 429/503 that states no reset time.
    #[serde(default = "default_cooldown")]
    pub default_cooldown_ms: u64,
    /// How long a request may wait for a free concurrency slot before 429.
    #[serde(default = "default_queue_timeout")]
    pub queue_timeout_ms: u64,
    /// How many requests may wait for a slot at once; more get 429 at once.
    #[serde(default = "default_max_queued")]
    pub max_queued: usize,
    /// Upper bound for the whole fallback chain of one request.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_ms: u64,
    /// Send a context-length error once to a candidate with a larger (or unknown) context window.
    #[serde(default = "default_true")]
    pub context_fallback: bool,
    /// A rate limit that lifts within this long is waited out on the same target (which the
    /// user ranked first) instead of failing over, when the deadline allows.
    #[serde(default = "default_short_wait")]
    pub short_wait_ms: u64,
    /// When every candidate is rate-limited and the soonest reset is within this long, hold
    /// the request until then instead of answering 429. 0 turns this off.
    #[serde(default)]
    pub wait_for_reset_ms: u64,
    /// Circuit breaker for transient failures.
    #[serde(default)]
    pub breaker: crate::limits::breaker::BreakerConfig,
    /// A provider's content-policy refusal goes back to the client (false) or the request
    /// tries the next candidate (true).
    #[serde(default)]
    pub content_policy_fallback: bool,
    /// Conversation affinity: a conversation's turns stay on the key and provider that served
    /// it, so the provider's prompt cache stays warm.
    #[serde(default)]
    pub affinity: AffinityConfig,
    /// How `auto` orders providers of equal priority: by their usage windows' room
    /// (`priority`, the default) or by how fast they answer now (`speed`).
    #[serde(default)]
    pub order: Order,
    /// Hedging: a request whose first candidate is slow to answer goes to the next one too,
    /// and the first to answer with content wins. Off unless turned on here (for `auto` and
    /// every route), on a route or on a provider.
    #[serde(default, skip_serializing_if = "HedgeConfig::is_default")]
    pub hedge: HedgeConfig,
    /// Read a stream that asked for JSON whole before relaying it, so that one that is not the
    /// JSON asked for can still fail over (and a fence around it be taken off): the client
    /// gets nothing until the answer is complete. Off: relayed as it comes, checked at its end.
    #[serde(default)]
    pub validate_streams: bool,
}

/// `routing.hedge`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HedgeConfig {
    /// Hedge requests to `auto` and to every route that does not say otherwise (a route's or
    /// a provider's own `hedge` decides over this).
    #[serde(default)]
    pub enabled: bool,
    /// When the second request goes: after this many milliseconds without a first token, or
    /// `"p95"`: after the first candidate's own 95th percentile time to first token (measured
    /// from its recent answers; `unmeasuredMs` until it has answered enough).
    #[serde(default)]
    pub after: HedgeAfter,
    /// The wait before a second request while the first candidate's p95 is not measured yet.
    #[serde(default = "default_hedge_unmeasured")]
    pub unmeasured_ms: u64,
    /// Extra upstream requests hedging may add, in percent of the requests it could hedge
    /// (5: one request in twenty at most, over time; a burst of at most that many).
    #[serde(default = "default_hedge_budget")]
    pub budget_percent: f64,
}

impl Default for HedgeConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            after: HedgeAfter::default(),
            unmeasured_ms: default_hedge_unmeasured(),
            budget_percent: default_hedge_budget(),
        }
    }
}

impl HedgeConfig {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// When a hedge is sent: a fixed wait, or the first candidate's measured p95.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum HedgeAfter {
    /// Milliseconds without a first token.
    Ms(u64),
    /// `"p95"`.
    Measured(Percentile),
}

impl Default for HedgeAfter {
    fn default() -> Self {
        HedgeAfter::Measured(Percentile::P95)
    }
}

/// A measured percentile of the time to first token.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub enum Percentile {
    #[serde(rename = "p95")]
    P95,
}

fn default_hedge_unmeasured() -> u64 {
    2_000
}
fn default_hedge_budget() -> f64 {
    5.0
}

/// How candidates of equal priority are ordered.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// As listed, the one with the most room in its usage windows first.
    #[default]
    Priority,
    /// The fastest now first: time to the first token, a decaying average of live answers.
    Speed,
}

/// `routing.affinity`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AffinityConfig {
    /// Keep each conversation on the key (and, for `auto` and routes, the provider) that last
    /// served it while that is healthy (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// A conversation idle for longer is forgotten (its next turn follows the configured order
    /// again): about as long as providers keep a prompt cache warm (default 10 minutes).
    #[serde(default = "default_affinity_ttl")]
    pub ttl_ms: u64,
}

impl Default for AffinityConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl_ms: default_affinity_ttl(),
        }
    }
}

fn default_affinity_ttl() -> u64 {
    600_000
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            default_cooldown_ms: default_cooldown(),
            queue_timeout_ms: default_queue_timeout(),
            max_queued: default_max_queued(),
            request_timeout_ms: default_request_timeout(),
            context_fallback: true,
            short_wait_ms: default_short_wait(),
            wait_for_reset_ms: 0,
            breaker: Default::default(),
            content_policy_fallback: false,
            affinity: Default::default(),
            order: Order::Priority,
            hedge: HedgeConfig::default(),
            validate_streams: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LogConfig {
    /// Request-log rows older than this are deleted.
    #[serde(default = "default_retention_days")]
    pub retention_days: u32,
    /// At most this many request-log rows are kept.
    #[serde(default = "default_max_rows")]
    pub max_rows: u64,
    /// At most this many log rows wait for the database (about 2 KB each). When the database
    /// stalls and the queue is full, the oldest waiting rows are dropped (counted in
    /// `baton_log_rows_dropped_total`, with a warning) so memory stays bounded.
    #[serde(default = "default_max_queued_rows")]
    pub max_queued_rows: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            retention_days: default_retention_days(),
            max_rows: default_max_rows(),
            max_queued_rows: default_max_queued_rows(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LocalFallback {
    #[serde(default)]
    pub enabled: bool,
    /// Where to look for it.
    #[serde(default = "default_local_url")]
    pub base_url: String,
}

impl Default for LocalFallback {
    fn default() -> Self {
        Self {
            enabled: false,
            base_url: default_local_url(),
        }
    }
}

impl LocalFallback {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

fn default_local_url() -> String {
    "http://127.0.0.1:11434/v1".into()
}

/// The provider id a detected local server gets.
pub const LOCAL_PROVIDER_ID: &str = "local";

/// A named route.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum RouteConfig {
    Chain(Vec<String>),
    Detailed(RouteDetail),
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteDetail {
    pub targets: Vec<String>,
    /// When a stream breaks after content was sent, continue on the next candidate that
    /// declares `capabilities.prefill`, sending the partial answer as an assistant prefill.
    #[serde(default)]
    pub resume_on_break: bool,
    /// How targets of equal priority are ordered (`speed`: the fastest now first).
    #[serde(default)]
    pub order: Order,
    /// Hedge this route's slow requests (`routing.hedge` says when and how many); unset
    /// follows `routing.hedge.enabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge: Option<bool>,
}

impl RouteConfig {
    pub fn targets(&self) -> &[String] {
        match self {
            RouteConfig::Chain(t) => t,
            RouteConfig::Detailed(d) => &d.targets,
        }
    }

    pub fn resume_on_break(&self) -> bool {
        matches!(self, RouteConfig::Detailed(d) if d.resume_on_break)
    }

    pub fn order(&self) -> Order {
        match self {
            RouteConfig::Detailed(d) => d.order,
            RouteConfig::Chain(_) => Order::Priority,
        }
    }

    /// The route's own word on hedging, if it has one.
    pub fn hedge(&self) -> Option<bool> {
        match self {
            RouteConfig::Detailed(d) => d.hedge,
            RouteConfig::Chain(_) => None,
        }
    }
}

/// A client key declared in the configuration: the key itself lives in an environment variable.
/// Several instances sharing one config file (and Redis) enforce the same limits on it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayKeyConfig {
    /// Name of the environment variable that holds the key.
    pub env: String,
    /// Who or what uses it, in logs, usage and metrics (default `env:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Limits and permissions, as for keys made in the UI.
    #[serde(
        default,
        skip_serializing_if = "crate::clients::ClientPolicy::is_empty"
    )]
    pub policy: crate::clients::ClientPolicy,
}

impl GatewayKeyConfig {
    pub fn label(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| format!("env:{}", self.env))
    }
}

fn default_host() -> String {
    "127.0.0.1".into()
}
fn default_port() -> u16 {
    DEFAULT_PORT
}
fn default_max_body() -> usize {
    20 * 1024 * 1024
}
fn default_grace() -> u64 {
    10_000
}
fn default_cooldown() -> u64 {
    60_000
}
fn default_queue_timeout() -> u64 {
    30_000
}
fn default_max_queued() -> usize {
    1024
}
fn default_request_timeout() -> u64 {
    600_000
}
fn default_short_wait() -> u64 {
    3_000
}
fn default_retention_days() -> u32 {
    30
}
fn default_header_timeout() -> u64 {
    30_000
}
fn default_body_timeout() -> u64 {
    10_000
}
fn default_max_concurrent() -> usize {
    256
}
fn default_memory_budget() -> usize {
    // A laptop's worth: about six of the largest requests the other limits allow at once.
    512 * 1024 * 1024
}
fn default_max_json_values() -> usize {
    // A long agent session (thousands of messages, dozens of tool schemas) is well under it.
    500_000
}
fn default_web_socket_idle() -> u64 {
    // A developer reads an answer and types the next prompt in minutes, not hours.
    10 * 60 * 1000
}
fn default_max_connections_per_peer() -> usize {
    64
}

fn default_max_connections() -> usize {
    // Leaves room under the common 1024-descriptor limit for upstream connections, the
    // database and CLI pipes.
    512
}
fn default_max_rows() -> u64 {
    200_000
}
fn default_max_queued_rows() -> usize {
    8_192
}
