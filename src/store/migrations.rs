//! The database schema, one migration per step; `PRAGMA user_version` says how many ran.

use std::path::Path;

use rusqlite::Connection;

use super::handle::StoreError;

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE request_log (
    -- Rows are appended in time order: an integer key keeps inserts at the end of the b-tree
    -- (a random text key costs a page split per row under load).
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    client TEXT NOT NULL,
    requested_model TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    status INTEGER NOT NULL,
    stream INTEGER NOT NULL,
    attempts TEXT NOT NULL,
    ttfb_ms INTEGER,
    total_ms INTEGER NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    error TEXT
);
CREATE INDEX request_log_ts ON request_log(ts_ms);
CREATE TABLE cooldowns (
    provider TEXT NOT NULL,
    key_id TEXT NOT NULL,
    model TEXT NOT NULL,
    until_ms INTEGER NOT NULL,
    class TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (provider, key_id, model)
);
CREATE TABLE providers (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL CHECK (owner IN ('file', 'ui')),
    definition TEXT NOT NULL,
    enabled INTEGER,
    priority INTEGER,
    updated_ms INTEGER NOT NULL
);
"#,
    r#"
-- Gateway keys made in the UI: only a SHA-256 of each key is kept, and a masked hint to
-- recognise it by.
CREATE TABLE client_keys (
    id TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    hash BLOB NOT NULL,
    hint TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    revoked_ms INTEGER
);
CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#,
    r#"
-- Client keys for teams: limits, budgets, allowed targets, tier cap, expiry (JSON, see
-- clients::ClientPolicy). The request log says which key asked and what it cost. (No index on
-- client_key: the log is written on every request and read rarely, by time range.)
ALTER TABLE client_keys ADD COLUMN policy TEXT NOT NULL DEFAULT '{}';
-- When the key last changed (made, limits changed, revoked): instances sharing state merge
-- keys by it.
ALTER TABLE client_keys ADD COLUMN updated_ms INTEGER NOT NULL DEFAULT 0;
UPDATE client_keys SET updated_ms = COALESCE(revoked_ms, created_ms);
ALTER TABLE request_log ADD COLUMN client_key TEXT NOT NULL DEFAULT '';
ALTER TABLE request_log ADD COLUMN cost_usd REAL;
ALTER TABLE request_log ADD COLUMN upstream_ms INTEGER;
"#,
    r#"
-- Prompt-cache tokens: read from the provider's cache and written to it (both part of
-- input_tokens), for cost at cache prices and the cache-hit ratio.
ALTER TABLE request_log ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE request_log ADD COLUMN cache_write_tokens INTEGER;
"#,
    r#"
-- How the JSON a client asked for turned out: valid, repaired, invalid (NULL when it asked for
-- none).
ALTER TABLE request_log ADD COLUMN output TEXT;
"#,
];

pub(super) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let wrap = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(wrap)?;
    let version: i64 = tx
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(wrap)?;
    let known = MIGRATIONS.len() as i64;
    if version > known {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            known,
        });
    }
    for sql in &MIGRATIONS[version as usize..] {
        tx.execute_batch(sql).map_err(wrap)?;
    }
    tx.pragma_update(None, "user_version", known)
        .map_err(wrap)?;
    tx.commit().map_err(wrap)
}
