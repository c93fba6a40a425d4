//! Client keys made in the UI or admin API: only a SHA-256 of each key is kept, with its policy.
//! Every change stamps `updated_ms`, so instances sharing state can merge each other's keys
//! (the newer version of a key wins; a revocation is a version too).

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::edit::EditError;
use super::handle::{Store, StoreError};

/// A client key as stored: never the key itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClientKeyRow {
    pub id: String,
    pub label: String,
    #[serde(skip)]
    pub hash: Vec<u8>,
    /// `bt-…abcd`.
    pub hint: String,
    pub created_ms: i64,
    pub policy: crate::clients::ClientPolicy,
}

/// A key with everything another instance needs to adopt it (the hash hex-encoded).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SyncedKey {
    #[serde(flatten)]
    pub row: ClientKeyRow,
    pub hash_hex: String,
    pub revoked_ms: Option<i64>,
    pub updated_ms: i64,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn policy_json(p: &crate::clients::ClientPolicy) -> String {
    serde_json::to_string(p).unwrap_or_else(|_| "{}".into())
}

impl Store {
    /// Live (not revoked) client keys, oldest first.
    pub fn client_keys(&self) -> Result<Vec<ClientKeyRow>, StoreError> {
        Ok(self
            .synced_keys(None)?
            .into_iter()
            .filter(|k| k.revoked_ms.is_none())
            .map(|k| k.row)
            .collect())
    }

    /// Every key (revoked ones too), or just `only`, as another instance would adopt it.
    pub fn synced_keys(&self, only: Option<&str>) -> Result<Vec<SyncedKey>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare(
            "SELECT id, label, hash, hint, created_ms, policy, revoked_ms, updated_ms FROM client_keys
             WHERE ?1 IS NULL OR id = ?1 ORDER BY created_ms, id",
        ))?;
        let rows = self.sql(stmt.query_map([only], |r| {
            let hash: Vec<u8> = r.get(2)?;
            Ok((
                SyncedKey {
                    hash_hex: hex(&hash),
                    row: ClientKeyRow {
                        id: r.get(0)?,
                        label: r.get(1)?,
                        hash,
                        hint: r.get(3)?,
                        created_ms: r.get(4)?,
                        policy: Default::default(),
                    },
                    revoked_ms: r.get(6)?,
                    updated_ms: r.get(7)?,
                },
                r.get::<_, String>(5)?,
            ))
        }))?;
        let mut out = Vec::new();
        for row in rows {
            let (mut k, policy) = self.sql(row)?;
            k.row.policy = serde_json::from_str(&policy).map_err(|e| StoreError::Corrupt {
                id: k.row.id.clone(),
                message: format!("client key policy: {e}"),
            })?;
            out.push(k);
        }
        Ok(out)
    }

    /// Takes another instance's version of a key when it is newer than ours (or new here).
    /// Returns whether anything changed.
    pub fn adopt_key(&self, k: &SyncedKey) -> Result<bool, StoreError> {
        let Some(hash) = unhex(&k.hash_hex).filter(|h| h.len() == 32) else {
            return Err(StoreError::Corrupt {
                id: k.row.id.clone(),
                message: "shared client key has no valid hash".into(),
            });
        };
        let conn = self.read()?;
        let n = self.sql(conn.execute(
            "INSERT INTO client_keys (id, label, hash, hint, created_ms, policy, revoked_ms, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT(id) DO UPDATE SET label = excluded.label, hash = excluded.hash,
                hint = excluded.hint, created_ms = excluded.created_ms, policy = excluded.policy,
                revoked_ms = excluded.revoked_ms, updated_ms = excluded.updated_ms
             WHERE excluded.updated_ms > client_keys.updated_ms",
            params![
                k.row.id,
                k.row.label,
                hash,
                k.row.hint,
                k.row.created_ms,
                policy_json(&k.row.policy),
                k.revoked_ms,
                k.updated_ms
            ],
        ))?;
        Ok(n > 0)
    }

    pub fn add_client_key(&self, row: &ClientKeyRow) -> Result<(), StoreError> {
        let conn = self.read()?;
        self.sql(conn.execute(
            "INSERT INTO client_keys (id, label, hash, hint, created_ms, policy, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?5)",
            params![
                row.id,
                row.label,
                row.hash,
                row.hint,
                row.created_ms,
                policy_json(&row.policy)
            ],
        ))?;
        Ok(())
    }

    /// Replaces a live key's policy.
    pub fn set_client_policy(
        &self,
        id: &str,
        policy: &crate::clients::ClientPolicy,
        now_ms: i64,
    ) -> Result<(), EditError> {
        let conn = self.read()?;
        let n = self.sql(conn.execute(
            "UPDATE client_keys SET policy = ?2, updated_ms = MAX(updated_ms + 1, ?3)
             WHERE id = ?1 AND revoked_ms IS NULL",
            params![id, policy_json(policy), now_ms],
        ))?;
        if n == 0 {
            return Err(EditError::NotFound(id.to_string()));
        }
        Ok(())
    }

    pub fn revoke_client_key(&self, id: &str, now_ms: i64) -> Result<(), EditError> {
        let conn = self.read()?;
        let n = self.sql(conn.execute(
            "UPDATE client_keys SET revoked_ms = ?2, updated_ms = MAX(updated_ms + 1, ?2)
             WHERE id = ?1 AND revoked_ms IS NULL",
            params![id, now_ms],
        ))?;
        if n == 0 {
            return Err(EditError::NotFound(id.to_string()));
        }
        Ok(())
    }

    /// Every key ever made (revoked ones too): id and label, for usage reports.
    pub fn client_key_labels(&self) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.read()?;
        let mut stmt = self.sql(conn.prepare("SELECT id, label FROM client_keys"))?;
        let rows = self.sql(stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))))?;
        self.sql(rows.collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_win_when_keys_are_merged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path(), &Default::default()).expect("store");
        let row = ClientKeyRow {
            id: "k_1".into(),
            label: "alice".into(),
            hash: vec![7; 32],
            hint: "bt-…abcd".into(),
            created_ms: 1_000,
            policy: Default::default(),
        };
        store.add_client_key(&row).expect("add");
        let mut theirs = store.synced_keys(Some("k_1")).expect("read").remove(0);
        assert_eq!(unhex(&theirs.hash_hex), Some(vec![7; 32]));
        theirs.row.policy.rpm = Some(5);
        assert!(
            !store.adopt_key(&theirs).expect("adopt"),
            "same version: ours stays"
        );
        theirs.updated_ms += 1;
        assert!(store.adopt_key(&theirs).expect("adopt"));
        assert_eq!(store.client_keys().expect("keys")[0].policy.rpm, Some(5));
        store.revoke_client_key("k_1", 2_000).expect("revoke");
        assert!(
            !store.adopt_key(&theirs).expect("adopt"),
            "an older version cannot undo a revocation"
        );
        assert!(store.client_keys().expect("keys").is_empty());
    }
}
