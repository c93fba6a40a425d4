//! Gateway keys made in the UI (hashed) and small settings (notification preferences).

use rusqlite::{params, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use super::{EditError, Store, StoreError};

/// A UI-made gateway key as stored: never the key itself.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClientKeyRow {
    pub id: String,
    pub label: String,
    #[serde(skip)]
    pub hash: Vec<u8>,
    /// `bt-…abcd`.
    pub hint: String,
    pub created_ms: i64,
}

impl Store {
    /// Live (not revoked) UI-made gateway keys, oldest first.
    pub fn client_keys(&self) -> Result<Vec<ClientKeyRow>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT id, label, hash, hint, created_ms FROM client_keys WHERE revoked_ms IS NULL ORDER BY created_ms, id",
        ))?;
        let rows = self.sql(stmt.query_map([], |r| {
            Ok(ClientKeyRow {
                id: r.get(0)?,
                label: r.get(1)?,
                hash: r.get(2)?,
                hint: r.get(3)?,
                created_ms: r.get(4)?,
            })
        }))?;
        self.sql(rows.collect())
    }

    pub fn add_client_key(&self, row: &ClientKeyRow) -> Result<(), StoreError> {
        let conn = self.read()?;
        self.sql(conn.execute(
            "INSERT INTO client_keys (id, label, hash, hint, created_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![row.id, row.label, row.hash, row.hint, row.created_ms],
        ))?;
        Ok(())
    }

    pub fn revoke_client_key(&self, id: &str, now_ms: i64) -> Result<(), EditError> {
        let conn = self.read()?;
        let n = self.sql(conn.execute(
            "UPDATE client_keys SET revoked_ms = ?2 WHERE id = ?1 AND revoked_ms IS NULL",
            params![id, now_ms],
        ))?;
        if n == 0 {
            return Err(EditError::NotFound(id.to_string()));
        }
        Ok(())
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
}

impl Store {
    /// Per-provider numbers for requests since `since_ms` (at most the newest 100,000).
    pub fn window_stats(
        &self,
        since_ms: i64,
    ) -> Result<std::collections::BTreeMap<String, WindowStats>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT provider, status, attempts, input_tokens, output_tokens FROM request_log
             WHERE ts_ms >= ?1 ORDER BY seq DESC LIMIT 100000",
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
            ))
        }))?;
        for row in rows {
            let (provider, status, attempts, input, output) = self.sql(row)?;
            let attempts: Vec<super::AttemptRecord> =
                serde_json::from_str(&attempts).unwrap_or_default();
            for a in attempts.iter().filter(|a| a.class != "skipped") {
                let s = out.entry(a.provider.clone()).or_default();
                s.calls += 1;
                if a.class != "ok" {
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
