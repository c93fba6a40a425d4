//! Small settings (notification preferences), usage reports and windowed provider stats.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

/// The setting with the listen address chosen in Settings (or given to the desktop app on its
/// command line): `{"host": …, "port": …}`, used from the next start.
pub const LISTEN_SETTING: &str = "listen";
/// The usage windows as last seen, kept across a restart.
pub const USAGE_SETTING: &str = "usage_windows";

use super::handle::{Store, StoreError};

/// Usage of one client or provider in one time bucket.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// Start of the bucket, Unix ms.
    pub start_ms: i64,
    /// Client key id or provider id.
    pub key: String,
    pub requests: u64,
    pub errors: u64,
    /// Requests that were tried at more than one provider.
    pub failovers: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache (part of `input_tokens`).
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache (part of `input_tokens`).
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
}

impl Store {
    /// Tokens and estimated cost (µUSD) per client key in `[since_ms, until_ms)`.
    pub fn client_totals(
        &self,
        since_ms: i64,
        until_ms: i64,
    ) -> Result<Vec<(String, u64, u64)>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT client_key, SUM(COALESCE(input_tokens, 0) + COALESCE(output_tokens, 0)),
                    SUM(COALESCE(cost_usd, 0))
             FROM request_log WHERE ts_ms >= ?1 AND ts_ms < ?2 AND client_key != ''
             GROUP BY client_key",
        ))?;
        let rows = self.sql(stmt.query_map([since_ms, until_ms], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?.max(0) as u64,
                (r.get::<_, f64>(2)? * 1_000_000.0).round().max(0.0) as u64,
            ))
        }))?;
        self.sql(rows.collect())
    }

    /// Requests, tokens, cost and failovers per `bucket_ms` and per client key (`by_provider`
    /// false) or serving provider, in `[since_ms, until_ms)`, oldest first.
    pub fn usage(
        &self,
        since_ms: i64,
        until_ms: i64,
        bucket_ms: i64,
        by_provider: bool,
        client: Option<&str>,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let conn = self.read()?;
        let group = if by_provider {
            "COALESCE(provider, '')"
        } else {
            "client_key"
        };
        let sql = format!(
            "SELECT (ts_ms / ?3) * ?3 AS b, {group} AS g, COUNT(*),
                    SUM(status >= 400),
                    SUM((SELECT COUNT(DISTINCT json_extract(value, '$.provider')) FROM json_each(attempts)
                         WHERE json_extract(value, '$.class') != 'skipped') > 1),
                    SUM(COALESCE(input_tokens, 0)), SUM(COALESCE(output_tokens, 0)),
                    SUM(COALESCE(cost_usd, 0)),
                    SUM(COALESCE(cache_read_tokens, 0)), SUM(COALESCE(cache_write_tokens, 0))
             FROM request_log
             WHERE ts_ms >= ?1 AND ts_ms < ?2 AND (?4 IS NULL OR client_key = ?4)
             GROUP BY b, g ORDER BY b, g"
        );
        let mut stmt = self.sql(conn.prepare(&sql))?;
        let rows = self.sql(stmt.query_map(
            params![since_ms, until_ms, bucket_ms.max(1), client],
            |r| {
                Ok(UsageRow {
                    start_ms: r.get(0)?,
                    key: r.get(1)?,
                    requests: r.get::<_, i64>(2)? as u64,
                    errors: r.get::<_, i64>(3)? as u64,
                    failovers: r.get::<_, i64>(4)? as u64,
                    input_tokens: r.get::<_, i64>(5)? as u64,
                    output_tokens: r.get::<_, i64>(6)? as u64,
                    cost_usd: r.get(7)?,
                    cache_read_tokens: r.get::<_, i64>(8)? as u64,
                    cache_write_tokens: r.get::<_, i64>(9)? as u64,
                })
            },
        ))?;
        self.sql(rows.collect())
    }

    /// One setting read before the gateway starts (nothing created, no migrations): `None`
    /// when the database or the setting does not exist yet, or cannot be read.
    pub fn setting_at(data_dir: &std::path::Path, key: &str) -> Option<Value> {
        let path = data_dir.join(super::handle::DB_FILE);
        if !path.exists() {
            return None;
        }
        let conn = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()?;
        let text: String = conn
            .query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn setting(&self, key: &str) -> Result<Option<Value>, StoreError> {
        let conn = self.read()?;
        let v: Option<String> = self.sql(
            conn.query_row("SELECT value FROM settings WHERE key = ?1", [key], |r| {
                r.get(0)
            })
            .optional(),
        )?;
        Ok(v.and_then(|s| serde_json::from_str(&s).ok()))
    }

    pub fn set_setting(&self, key: &str, value: &Value) -> Result<(), StoreError> {
        let conn = self.read()?;
        self.sql(conn.execute(
            "INSERT INTO settings (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            params![key, value.to_string()],
        ))?;
        Ok(())
    }
}

/// One provider's numbers over a window of the request log.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WindowStats {
    /// Attempts that reached the provider (skips not counted).
    pub calls: u64,
    pub failures: u64,
    /// Requests it answered.
    pub served: u64,
    pub p50_ms: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from its prompt cache (part of `input_tokens`).
    pub cache_read_tokens: u64,
}

impl Store {
    /// Per-provider numbers for requests since `since_ms` (at most the newest 100,000).
    pub fn window_stats(
        &self,
        since_ms: i64,
    ) -> Result<std::collections::BTreeMap<String, WindowStats>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT provider, status, attempts, input_tokens, output_tokens, cache_read_tokens
             FROM request_log WHERE ts_ms >= ?1 ORDER BY seq DESC LIMIT 100000",
        ))?;
        let mut out: std::collections::BTreeMap<String, WindowStats> = Default::default();
        let mut latencies: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
        let rows = self.sql(stmt.query_map([since_ms], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<i64>>(3)?,
                r.get::<_, Option<i64>>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        }))?;
        for row in rows {
            let (provider, status, attempts, input, output, cached) = self.sql(row)?;
            let attempts: Vec<super::rows::AttemptRecord> =
                serde_json::from_str(&attempts).unwrap_or_default();
            for a in attempts.iter().filter(|a| a.class.judged()) {
                let s = out.entry(a.provider.clone()).or_default();
                s.calls += 1;
                if a.class != crate::limits::Outcome::Ok {
                    s.failures += 1;
                } else {
                    latencies
                        .entry(a.provider.clone())
                        .or_default()
                        .push(a.latency_ms);
                }
            }
            if let (Some(p), true) = (provider, status < 400) {
                let s = out.entry(p).or_default();
                s.served += 1;
                s.input_tokens += input.unwrap_or(0).max(0) as u64;
                s.output_tokens += output.unwrap_or(0).max(0) as u64;
                s.cache_read_tokens += cached.unwrap_or(0).max(0) as u64;
            }
        }
        for (p, mut l) in latencies {
            l.sort_unstable();
            if let Some(s) = out.get_mut(&p) {
                s.p50_ms = l.get(l.len() / 2).copied();
            }
        }
        Ok(out)
    }
}
