//! API keys typed into the UI. They live in `secrets.json` in the data directory, readable by
//! this user only (0600), and a provider refers to them by id (`{"stored": "s_…"}`): the
//! configuration, the admin API and exports only ever see the id.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rand::Rng;

/// The name under which a stored secret is looked up alongside environment variables (it
/// cannot collide with one: variable names have no `:`).
pub const LOOKUP_PREFIX: &str = "stored:";

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret store {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("secret store {path} is not valid JSON: {message}")]
    Corrupt { path: PathBuf, message: String },
}

pub struct SecretStore {
    path: PathBuf,
    lock: Mutex<()>,
}

impl SecretStore {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join("secrets.json"),
            lock: Mutex::new(()),
        }
    }

    fn load(&self) -> Result<BTreeMap<String, String>, SecretError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| SecretError::Corrupt {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(source) => Err(SecretError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// Writes the whole map to a new 0600 file, then renames it over the old one (a crash
    /// never leaves half a file).
    fn save(&self, map: &BTreeMap<String, String>) -> Result<(), SecretError> {
        let io = |source| SecretError::Io {
            path: self.path.clone(),
            source,
        };
        let tmp = self.path.with_extension("json.tmp");
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp).map_err(io)?;
        f.write_all(
            serde_json::to_string_pretty(map)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, &self.path).map_err(io)
    }

    /// Stores a secret and returns its new id.
    pub fn put(&self, value: &str) -> Result<String, SecretError> {
        let _g = self.lock.lock();
        let mut map = self.load()?;
        let id = format!("s_{:012x}", rand::rng().random::<u64>() & 0xffff_ffff_ffff);
        map.insert(id.clone(), value.trim().to_string());
        self.save(&map)?;
        Ok(id)
    }

    pub fn get(&self, id: &str) -> Option<String> {
        let _g = self.lock.lock();
        self.load().ok()?.get(id).cloned()
    }

    pub fn delete(&self, ids: &[String]) -> Result<(), SecretError> {
        if ids.is_empty() {
            return Ok(());
        }
        let _g = self.lock.lock();
        let mut map = self.load()?;
        for id in ids {
            map.remove(id);
        }
        self.save(&map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_private_and_round_trip() {
        let d = tempfile::tempdir().unwrap();
        let s = SecretStore::new(d.path());
        let id = s.put(" sk-live-123 ").unwrap();
        assert_eq!(s.get(&id).as_deref(), Some("sk-live-123"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("secrets.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        s.delete(std::slice::from_ref(&id)).unwrap();
        assert_eq!(s.get(&id), None);
    }
}
