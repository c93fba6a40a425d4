//! In-memory health counters per provider / key / model, fed by every finished request's
//! attempts: calls, successes, failures by class, latency percentiles, tokens, last error.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use serde::Serialize;

use crate::store::LogRow;

/// Latencies kept per entry for percentiles.
const LATENCY_SAMPLES: usize = 512;

#[derive(Debug, Default, Clone)]
struct Entry {
    calls: u64,
    successes: u64,
    failures: BTreeMap<String, u64>,
    latencies: VecDeque<u64>,
    input_tokens: u64,
    output_tokens: u64,
    cache_read_tokens: u64,
    last_error: Option<(i64, String)>,
}

/// What the admin API shows for a key, a model or a provider.
#[derive(Debug, Default, Clone, Serialize, serde::Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Health {
    pub calls: u64,
    pub successes: u64,
    pub failures: BTreeMap<String, u64>,
    pub p50_ms: Option<u64>,
    pub p95_ms: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache (part of `input_tokens`).
    pub cache_read_tokens: u64,
    /// `cache_read_tokens / input_tokens`: how much of the prompts the cache served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_hit_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error_at_ms: Option<i64>,
}

/// provider -> key -> model: nested so that steady-state updates look up by `&str` and
/// allocate nothing, hashed by foldhash (six lookups a request; SipHash's were ~1,100
/// instructions of it).
type Tree = Map<Map<Map<Entry>>>;
type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

#[derive(Debug, Default)]
pub struct Stats(Mutex<Tree>);

/// The entry for `k`, created on first use; only the first use allocates the key.
fn slot<'a, V: Default>(m: &'a mut Map<V>, k: &str) -> Option<&'a mut V> {
    if !m.contains_key(k) {
        m.insert(k.to_string(), V::default());
    }
    m.get_mut(k)
}

impl Stats {
    /// Counts every attempt that was actually sent; tokens go to the attempt that served.
    pub fn observe(&self, row: &LogRow) {
        let Ok(mut map) = self.0.lock() else { return };
        // Tokens go to the attempt whose answer the client got, whole or broken off.
        let served = row
            .attempts
            .iter()
            .rposition(|a| a.class == crate::limits::Outcome::Ok || a.streamed);
        for (i, a) in row.attempts.iter().enumerate() {
            if a.class == crate::limits::Outcome::Skipped {
                continue;
            }
            let Some(e) = slot(&mut map, &a.provider)
                .and_then(|by_key| slot(by_key, a.key.as_deref().unwrap_or_default()))
                .and_then(|by_model| slot(by_model, &a.model))
            else {
                continue;
            };
            if a.class == crate::limits::Outcome::Outrun {
                // Cancelled for a hedge that answered first: its prompt may be billed, and it
                // says nothing of the provider's health.
                e.input_tokens += a.input_tokens.unwrap_or(0);
                continue;
            }
            e.calls += 1;
            if a.class == crate::limits::Outcome::Ok {
                e.successes += 1;
            } else {
                *e.failures.entry(a.class.to_string()).or_default() += 1;
                e.last_error = Some((
                    row.ts_ms,
                    a.reason.clone().unwrap_or_else(|| a.class.to_string()),
                ));
            }
            e.latencies.push_back(a.latency_ms);
            if e.latencies.len() > LATENCY_SAMPLES {
                e.latencies.pop_front();
            }
            if Some(i) == served {
                e.input_tokens += row.input_tokens.unwrap_or(0);
                e.output_tokens += row.output_tokens.unwrap_or(0);
                e.cache_read_tokens += row.cache_read_tokens.unwrap_or(0);
            }
        }
    }

    /// Health of everything matching the filter (`None` = any), merged.
    pub fn health(&self, provider: &str, key: Option<&str>, model: Option<&str>) -> Health {
        let Ok(map) = self.0.lock() else {
            return Health::default();
        };
        let mut merged = Entry::default();
        let entries = map.get(provider).into_iter().flat_map(|keys| {
            keys.iter()
                .filter(|(k, _)| key.is_none_or(|x| x == k.as_str()))
                .flat_map(|(_, models)| models.iter())
                .filter(|(m, _)| model.is_none_or(|x| x == m.as_str()))
                .map(|(_, e)| e)
        });
        for e in entries {
            merged.calls += e.calls;
            merged.successes += e.successes;
            for (c, n) in &e.failures {
                *merged.failures.entry(c.clone()).or_default() += n;
            }
            merged.latencies.extend(e.latencies.iter().copied());
            merged.input_tokens += e.input_tokens;
            merged.output_tokens += e.output_tokens;
            merged.cache_read_tokens += e.cache_read_tokens;
            if e.last_error.as_ref().map(|(t, _)| *t) > merged.last_error.as_ref().map(|(t, _)| *t)
            {
                merged.last_error = e.last_error.clone();
            }
        }
        let mut lat: Vec<u64> = merged.latencies.into_iter().collect();
        lat.sort_unstable();
        let pct =
            |p: f64| (!lat.is_empty()).then(|| lat[((lat.len() - 1) as f64 * p).round() as usize]);
        Health {
            calls: merged.calls,
            successes: merged.successes,
            failures: merged.failures,
            p50_ms: pct(0.5),
            p95_ms: pct(0.95),
            input_tokens: merged.input_tokens,
            output_tokens: merged.output_tokens,
            cache_read_tokens: merged.cache_read_tokens,
            cache_hit_ratio: (merged.input_tokens > 0)
                .then(|| merged.cache_read_tokens as f64 / merged.input_tokens as f64),
            last_error_at_ms: merged.last_error.as_ref().map(|(t, _)| *t),
            last_error: merged.last_error.map(|(_, m)| m),
        }
    }
}
