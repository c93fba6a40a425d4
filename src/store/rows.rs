//! The rows the database keeps (a leaf): the request log with its attempts, and cooldowns.

use serde::{Deserialize, Serialize};

/// One attempt of a request at one upstream target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub provider: String,
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `ok`, `skipped`, or the error class (`rate`, `transient`, `request`…).
    pub class: crate::limits::Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    pub latency_ms: u64,
    /// The same in microseconds, for Baton's own added latency (not stored).
    #[serde(skip)]
    pub latency_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unix ms when the limit resets, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset_at_ms: Option<i64>,
    /// Part of the answer reached the client from this attempt before it failed (a stream
    /// that broke off): its tokens count though its class is a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub streamed: bool,
    /// Sent beside the attempt before it, which was slow to answer (`routing.hedge`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hedge: bool,
    /// The prompt tokens an attempt cancelled after it was sent (`outrun`) is estimated to
    /// have cost: the provider may bill a prompt it started reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// When it was sent, for its span (`telemetry`; not stored).
    #[serde(skip)]
    pub started: Option<std::time::Instant>,
    /// Its span id in the request's trace (0: not traced; not stored).
    #[serde(skip)]
    pub span: u64,
}

/// One row of the request log.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LogRow {
    pub id: String,
    pub ts_ms: i64,
    pub client: String,
    pub requested_model: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub status: u16,
    pub stream: bool,
    pub attempts: Vec<AttemptRecord>,
    pub ttfb_ms: Option<u64>,
    pub total_ms: u64,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub error: Option<String>,
    /// Id of the client key (`k_…`, or the label of a configuration key).
    #[serde(default)]
    pub client_key: String,
    /// Estimated cost in USD, when the serving model's price is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Time spent waiting on upstreams (the rest is Baton's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_ms: Option<u64>,
    /// Prompt tokens read from the provider's cache (part of `input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache (part of `input_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// How the JSON the client asked for turned out (`valid`, `repaired`, `invalid`), when it
    /// asked for JSON (`structured`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// A persisted cooldown. Empty `key_id` / `model` mean "any".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownRow {
    pub provider: String,
    pub key_id: String,
    pub model: String,
    pub until_ms: i64,
    pub class: String,
    pub reason: String,
}
