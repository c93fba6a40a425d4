//! SQLite persistence: versioned migrations, the request log, cooldowns and the live provider
//! table. Writes go through one background writer thread in batched transactions, so the request
//! path never waits on the disk; reads open their own WAL connection.

mod edit;
mod handle;
mod keys;
mod migrations;
mod rows;
mod settings;
mod writer;

use std::path::Path;

use rusqlite::{params, Connection};
use serde::{Deserialize, Serialize};

pub use edit::EditError;
pub(crate) use handle::DB_FILE;
pub use handle::{Store, StoreError};
pub use keys::{ClientKeyRow, SyncedKey};
pub use rows::{AttemptRecord, CooldownRow, LogRow};
pub use settings::{UsageRow, WindowStats, LISTEN_SETTING, USAGE_SETTING};
pub use writer::{StoreWriter, WriteOp};

use crate::config::ProviderConfig;

/// The desktop shell's notification icon, in the data directory (a file Baton makes there).
pub const ICON_FILE: &str = "baton-icon.png";

/// Which request-log rows to read.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogFilter {
    #[serde(default = "default_page")]
    pub limit: usize,
    #[serde(default)]
    pub offset: usize,
    pub provider: Option<String>,
    /// `ok` (status below 400) or `error`.
    pub outcome: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// Only requests made with this client key id.
    pub client: Option<String>,
}

fn default_page() -> usize {
    50
}

/// Who owns a provider definition: the config file (redefined at each start) or the UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    File,
    Ui,
}

/// A provider as stored: its definition plus the toggles and order the user set.
#[derive(Debug, Clone)]
pub struct StoredProvider {
    pub config: ProviderConfig,
    pub owner: Owner,
    pub enabled_override: Option<bool>,
    pub priority_override: Option<i64>,
}

/// How an import's providers meet the stored ones (the admin API's import and
/// `baton config import` alike): one the config file owns is left alone (the file wins at
/// every start), one that exists is replaced, a new one is added.
pub struct ProviderImport {
    /// What the import writes, in its order.
    pub taking: Vec<ProviderConfig>,
    /// The ids among them that already exist.
    pub replaced: Vec<String>,
    /// The ids the config file owns, left alone.
    pub file_owned: Vec<String>,
}

impl ProviderImport {
    pub fn sort(stored: &[StoredProvider], incoming: &[ProviderConfig]) -> Self {
        let mut out = ProviderImport {
            taking: Vec::new(),
            replaced: Vec::new(),
            file_owned: Vec::new(),
        };
        for p in incoming {
            match stored.iter().find(|s| s.config.id == p.id).map(|s| s.owner) {
                Some(Owner::File) => out.file_owned.push(p.id.clone()),
                Some(Owner::Ui) => {
                    out.replaced.push(p.id.clone());
                    out.taking.push(p.clone());
                }
                None => out.taking.push(p.clone()),
            }
        }
        out
    }
}

impl StoredProvider {
    /// The definition with the user's overrides applied.
    pub fn effective(&self) -> ProviderConfig {
        let mut c = self.config.clone();
        if let Some(e) = self.enabled_override {
            c.enabled = e;
        }
        if let Some(p) = self.priority_override {
            c.priority = p;
        }
        c
    }
}

impl Store {
    /// Opens (creating and migrating) `baton.db` in `data_dir` and starts the writer thread.
    pub fn open(data_dir: &Path, log: &crate::config::LogConfig) -> Result<Self, StoreError> {
        Self::open_with_clock(
            data_dir,
            log,
            std::sync::Arc::new(crate::clock::SystemClock),
        )
    }

    /// [`Store::open`] with the clock that decides what the log's retention has expired.
    pub fn open_with_clock(
        data_dir: &Path,
        log: &crate::config::LogConfig,
        clock: std::sync::Arc<dyn crate::clock::Clock>,
    ) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(|source| StoreError::Dir {
            path: data_dir.to_path_buf(),
            source,
        })?;
        make_private(data_dir);
        let path = data_dir.join(DB_FILE);
        // Created 0600 before SQLite opens it (an empty file is a valid new database), so the
        // log is never readable by others, not even for a moment.
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path);
        }
        let mut conn = open_conn(&path)?;
        migrations::migrate(&mut conn, &path)?;
        // SQLite gives the -wal and -shm files the database's mode: private from here on.
        make_private(data_dir);
        let writer = StoreWriter::start(conn, path.clone(), log.clone(), clock);
        Ok(Self { path, writer })
    }

    pub fn writer(&self) -> &StoreWriter {
        &self.writer
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<Connection, StoreError> {
        open_conn(&self.path)
    }

    fn sql<T>(&self, r: rusqlite::Result<T>) -> Result<T, StoreError> {
        r.map_err(|source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    /// The estimated cost of the requests logged since `since_ms` (USD; unpriced ones count 0).
    pub fn cost_since(&self, since_ms: i64) -> Result<f64, StoreError> {
        let conn = self.read()?;
        self.sql(conn.query_row(
            "SELECT COALESCE(SUM(cost_usd), 0) FROM request_log WHERE ts_ms >= ?1",
            [since_ms],
            |r| r.get(0),
        ))
    }

    /// Cooldowns that have not yet expired at `now_ms`.
    pub fn load_cooldowns(
        &self,
        now_ms: i64,
    ) -> Result<Vec<crate::limits::CooldownEntry>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT provider, key_id, model, until_ms, class, reason FROM cooldowns WHERE until_ms > ?1",
        ))?;
        let rows = self.sql(stmt.query_map([now_ms], |r| {
            let (key, model): (String, String) = (r.get(1)?, r.get(2)?);
            let class: String = r.get(4)?;
            // A cause this version does not know (a newer one wrote it) is not restored.
            Ok(
                crate::limits::Cause::parse(&class).map(|class| crate::limits::CooldownEntry {
                    scope: crate::limits::Scope {
                        provider: r.get(0).unwrap_or_default(),
                        key: Some(key).filter(|s| !s.is_empty()),
                        model: Some(model).filter(|s| !s.is_empty()),
                    },
                    until_ms: r.get(3).unwrap_or_default(),
                    class,
                    reason: r.get(5).unwrap_or_default(),
                    since_ms: i64::MIN,
                }),
            )
        }))?;
        let rows: Vec<Option<crate::limits::CooldownEntry>> = self.sql(rows.collect())?;
        Ok(rows.into_iter().flatten().collect())
    }

    /// The newest request-log rows, newest first.
    pub fn recent_requests(&self, limit: usize) -> Result<Vec<LogRow>, StoreError> {
        self.query_requests(&LogFilter {
            limit,
            ..LogFilter::default()
        })
    }

    /// A page of the request log, newest first, filtered.
    pub fn query_requests(&self, f: &LogFilter) -> Result<Vec<LogRow>, StoreError> {
        let conn = self.read()?;
        let mut sql = String::from(
            "SELECT id, ts_ms, client, requested_model, provider, model, status, stream, attempts,
                    ttfb_ms, total_ms, input_tokens, output_tokens, error, client_key, cost_usd,
                    upstream_ms, cache_read_tokens, cache_write_tokens, output
             FROM request_log WHERE 1 = 1",
        );
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(p) = &f.provider {
            // Served by it, or tried on the way (its id appears in the attempt chain).
            sql.push_str(" AND (provider = ? OR attempts LIKE ? ESCAPE '\\')");
            args.push(p.clone().into());
            let escaped = p
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_");
            args.push(format!("%\"provider\":\"{escaped}\"%").into());
        }
        match f.outcome.as_deref() {
            Some("ok") => sql.push_str(" AND status < 400"),
            Some("error") => sql.push_str(" AND status >= 400"),
            _ => {}
        }
        if let Some(c) = &f.client {
            sql.push_str(" AND client_key = ?");
            args.push(c.clone().into());
        }
        if let Some(since) = f.since_ms {
            sql.push_str(" AND ts_ms >= ?");
            args.push(since.into());
        }
        if let Some(until) = f.until_ms {
            sql.push_str(" AND ts_ms < ?");
            args.push(until.into());
        }
        sql.push_str(" ORDER BY seq DESC LIMIT ? OFFSET ?");
        args.push((f.limit as i64).into());
        args.push((f.offset as i64).into());
        let mut stmt = self.sql(conn.prepare(&sql))?;
        let rows = self.sql(stmt.query_map(rusqlite::params_from_iter(args), |r| {
            let attempts: String = r.get(8)?;
            Ok(LogRow {
                id: r.get(0)?,
                ts_ms: r.get(1)?,
                client: r.get(2)?,
                requested_model: r.get(3)?,
                provider: r.get(4)?,
                model: r.get(5)?,
                status: r.get(6)?,
                stream: r.get(7)?,
                attempts: serde_json::from_str(&attempts).unwrap_or_default(),
                ttfb_ms: r.get::<_, Option<i64>>(9)?.map(|v| v as u64),
                total_ms: r.get::<_, i64>(10)? as u64,
                input_tokens: r.get::<_, Option<i64>>(11)?.map(|v| v as u64),
                output_tokens: r.get::<_, Option<i64>>(12)?.map(|v| v as u64),
                error: r.get(13)?,
                client_key: r.get(14)?,
                cost_usd: r.get(15)?,
                upstream_ms: r.get::<_, Option<i64>>(16)?.map(|v| v as u64),
                cache_read_tokens: r.get::<_, Option<i64>>(17)?.map(|v| v as u64),
                cache_write_tokens: r.get::<_, Option<i64>>(18)?.map(|v| v as u64),
                output: r.get(19)?,
            })
        }))?;
        self.sql(rows.collect())
    }

    /// Makes the stored providers match the config file: file-owned providers are (re)defined
    /// from it, file-owned providers no longer in it are removed, and the user's enable/priority
    /// overrides and UI-owned providers are kept. Returns every stored provider.
    pub fn sync_file_providers(
        &self,
        file_providers: &[ProviderConfig],
        now_ms: i64,
    ) -> Result<Vec<StoredProvider>, StoreError> {
        let mut conn = self.read()?;
        let tx =
            self.sql(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate))?;
        {
            let ids: Vec<&str> = file_providers.iter().map(|p| p.id.as_str()).collect();
            let mut existing =
                self.sql(tx.prepare("SELECT id FROM providers WHERE owner = 'file'"))?;
            let stale: Vec<String> = self.sql(
                existing
                    .query_map([], |r| r.get::<_, String>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
            )?;
            for id in stale.iter().filter(|id| !ids.contains(&id.as_str())) {
                self.sql(tx.execute("DELETE FROM providers WHERE id = ?1", [id]))?;
            }
            for p in file_providers {
                let def = serde_json::to_string(p).unwrap_or_default();
                self.sql(tx.execute(
                    "INSERT INTO providers (id, owner, definition, updated_ms) VALUES (?1, 'file', ?2, ?3)
                     ON CONFLICT(id) DO UPDATE SET owner = 'file', definition = excluded.definition,
                        updated_ms = excluded.updated_ms",
                    params![p.id, def, now_ms],
                ))?;
            }
        }
        self.sql(tx.commit())?;
        self.load_providers()
    }

    /// Adds or replaces providers as UI-owned (kept across starts, not tied to a file), in one
    /// transaction: all of them or none.
    pub fn import_providers(
        &self,
        providers: &[ProviderConfig],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let mut conn = self.read()?;
        let tx =
            self.sql(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate))?;
        for p in providers {
            let def = serde_json::to_string(p).unwrap_or_default();
            self.sql(tx.execute(
                "INSERT INTO providers (id, owner, definition, updated_ms) VALUES (?1, 'ui', ?2, ?3)
                 ON CONFLICT(id) DO UPDATE SET owner = 'ui', definition = excluded.definition,
                    enabled = NULL, priority = NULL, updated_ms = excluded.updated_ms",
                params![p.id, def, now_ms],
            ))?;
        }
        self.sql(tx.commit())
    }

    pub fn load_providers(&self) -> Result<Vec<StoredProvider>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT id, owner, definition, enabled, priority FROM providers ORDER BY id",
        ))?;
        let rows = self.sql(
            stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<bool>>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                ))
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
        )?;
        rows.into_iter()
            .map(|(id, owner, def, enabled, priority)| {
                let mut config: ProviderConfig =
                    serde_json::from_str(&def).map_err(|e| StoreError::Corrupt {
                        id: id.clone(),
                        message: e.to_string(),
                    })?;
                config.adopt_kind();
                Ok(StoredProvider {
                    config,
                    owner: if owner == "ui" {
                        Owner::Ui
                    } else {
                        Owner::File
                    },
                    enabled_override: enabled,
                    priority_override: priority,
                })
            })
            .collect()
    }

    /// Records the user's enable toggle / priority for a provider (kept across restarts).
    pub fn set_overrides(
        &self,
        id: &str,
        enabled: Option<bool>,
        priority: Option<i64>,
    ) -> Result<bool, StoreError> {
        let conn = self.read()?;
        let n = self.sql(conn.execute(
            "UPDATE providers SET enabled = COALESCE(?2, enabled), priority = COALESCE(?3, priority) WHERE id = ?1",
            params![id, enabled, priority],
        ))?;
        Ok(n > 0)
    }
}

fn open_conn(path: &Path) -> Result<Connection, StoreError> {
    let wrap = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(wrap)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(wrap)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(wrap)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(wrap)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(wrap)?;
    Ok(conn)
}

/// The files Baton makes in its data directory (the database and its journals, the keys, the
/// stored secrets, the desktop's icon): the only ones it tightens.
fn is_batons(name: &str) -> bool {
    name.starts_with(DB_FILE)
        || [
            crate::auth::GATEWAY_KEY_FILE,
            crate::auth::ADMIN_KEY_FILE,
            crate::secrets::FILE,
            ICON_FILE,
        ]
        .contains(&name)
}

/// The data directory 0700 and every file Baton made in it 0600, on creation and when found
/// looser (it holds the request log, keys and cooldowns; other local users have no business
/// reading it). Files of the user's own in a directory given with `--data-dir` are left as they
/// are, and so is such a directory's own mode (a warning says it is readable).
pub fn make_private(data_dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let tighten = |path: &Path, mode: u32| {
            if let Ok(meta) = std::fs::symlink_metadata(path) {
                if meta.file_type().is_symlink() {
                    return;
                }
                if meta.permissions().mode() & 0o077 != 0 {
                    if let Err(e) =
                        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                    {
                        tracing::warn!(path = %path.display(), error = %e, "cannot make private");
                    }
                }
            }
        };
        let mut foreign = false;
        if let Ok(entries) = std::fs::read_dir(data_dir) {
            for e in entries.flatten() {
                let name = e.file_name();
                let ours = name.to_str().is_some_and(is_batons);
                foreign |= !ours;
                if ours && e.file_type().is_ok_and(|t| t.is_file()) {
                    tighten(&e.path(), 0o600);
                }
            }
        }
        if !foreign {
            tighten(data_dir, 0o700);
        } else if std::fs::metadata(data_dir).is_ok_and(|m| m.permissions().mode() & 0o077 != 0) {
            tracing::warn!(path = %data_dir.display(), "the data directory holds other files and is readable by other users; Baton's own files in it are private");
        }
    }
    #[cfg(not(unix))]
    let _ = data_dir;
}
