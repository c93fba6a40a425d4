//! Edits from the admin API, each in one transaction: create, update, delete, toggle and the
//! whole-order reorder.

use rusqlite::{params, OptionalExtension};

use super::handle::{Store, StoreError};
use crate::config::ProviderConfig;

/// Why an edit was refused.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    #[error("no provider `{0}`")]
    NotFound(String),
    /// The edit contradicts the stored state (id taken, owned by the config file, stale order).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Store {
    fn owner_of(
        &self,
        tx: &rusqlite::Transaction<'_>,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.sql(
            tx.query_row("SELECT owner FROM providers WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional(),
        )
    }

    /// Adds a UI-owned provider; its id must be free. New providers go to the end of the order
    /// unless they state a priority.
    pub fn create_provider(&self, p: &ProviderConfig, now_ms: i64) -> Result<(), EditError> {
        let mut conn = self.read()?;
        let tx =
            self.sql(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate))?;
        if self.owner_of(&tx, &p.id)?.is_some() {
            return Err(EditError::Conflict(format!(
                "a provider with id `{}` exists already; choose another id",
                p.id
            )));
        }
        let def = serde_json::to_string(p).unwrap_or_default();
        self.sql(tx.execute(
            "INSERT INTO providers (id, owner, definition, updated_ms) VALUES (?1, 'ui', ?2, ?3)",
            params![p.id, def, now_ms],
        ))?;
        self.sql(tx.commit())?;
        Ok(())
    }

    /// Replaces a UI-owned provider's definition (toggle and order overrides are kept). A
    /// provider from the config file is redefined from it at each start, so it is not edited here.
    pub fn update_provider(
        &self,
        id: &str,
        p: &ProviderConfig,
        now_ms: i64,
    ) -> Result<(), EditError> {
        let mut conn = self.read()?;
        let tx =
            self.sql(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate))?;
        match self.owner_of(&tx, id)?.as_deref() {
            None => return Err(EditError::NotFound(id.to_string())),
            Some("file") => {
                return Err(EditError::Conflict(format!(
                    "`{id}` is defined in the config file, which wins at every start: edit it there (here you can only enable, disable or reorder it)"
                )))
            }
            _ => {}
        }
        if p.id != id {
            return Err(EditError::Conflict(
                "the id of a provider cannot change; delete it and add a new one".into(),
            ));
        }
        let def = serde_json::to_string(p).unwrap_or_default();
        self.sql(tx.execute(
            "UPDATE providers SET definition = ?2, updated_ms = ?3 WHERE id = ?1",
            params![id, def, now_ms],
        ))?;
        self.sql(tx.commit())?;
        Ok(())
    }

    /// Deletes a UI-owned provider.
    pub fn delete_provider(&self, id: &str) -> Result<(), EditError> {
        let mut conn = self.read()?;
        let tx =
            self.sql(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate))?;
        match self.owner_of(&tx, id)?.as_deref() {
            None => return Err(EditError::NotFound(id.to_string())),
            Some("file") => {
                return Err(EditError::Conflict(format!(
                    "`{id}` is defined in the config file and would come back at the next start: remove it there, or disable it here"
                )))
            }
            _ => {}
        }
        self.sql(tx.execute("DELETE FROM providers WHERE id = ?1", [id]))?;
        self.sql(tx.commit())?;
        Ok(())
    }

    /// Sets the routing order: `ids` must name every stored provider exactly once. Priorities
    /// become 10, 20, 30… in that order (last write wins when two reorders race).
    pub fn set_order(&self, ids: &[String], now_ms: i64) -> Result<(), EditError> {
        let mut conn = self.read()?;
        let tx =
            self.sql(conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate))?;
        let stored: Vec<String> = {
            let mut stmt = self.sql(tx.prepare("SELECT id FROM providers ORDER BY id"))?;
            self.sql(
                stmt.query_map([], |r| r.get::<_, String>(0))
                    .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>()),
            )?
        };
        let mut given: Vec<&String> = ids.iter().collect();
        given.sort();
        given.dedup();
        if given.len() != ids.len() {
            return Err(EditError::Conflict(
                "the order names a provider twice".into(),
            ));
        }
        let missing: Vec<&str> = stored
            .iter()
            .filter(|s| !ids.contains(s))
            .map(String::as_str)
            .collect();
        let unknown: Vec<&str> = ids
            .iter()
            .filter(|i| !stored.contains(i))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() || !unknown.is_empty() {
            let mut why = Vec::new();
            if !missing.is_empty() {
                why.push(format!("it leaves out {}", missing.join(", ")));
            }
            if !unknown.is_empty() {
                why.push(format!("{} no longer exist(s)", unknown.join(", ")));
            }
            return Err(EditError::Conflict(format!(
                "the order must list every provider exactly once, but {}; reload and try again",
                why.join(" and ")
            )));
        }
        for (i, id) in ids.iter().enumerate() {
            self.sql(tx.execute(
                "UPDATE providers SET priority = ?2, updated_ms = ?3 WHERE id = ?1",
                params![id, (i as i64 + 1) * 10, now_ms],
            ))?;
        }
        self.sql(tx.commit())?;
        Ok(())
    }

    /// Turns a provider on or off (kept across restarts, also for file-owned providers).
    pub fn set_enabled(&self, id: &str, enabled: bool) -> Result<(), EditError> {
        if self.set_overrides(id, Some(enabled), None)? {
            Ok(())
        } else {
            Err(EditError::NotFound(id.to_string()))
        }
    }
}
