//! API keys typed into the UI. Each goes to the operating system's credential store (Secret
//! Service on Linux, Keychain on macOS, Credential Manager on Windows) when one answers, else
//! into `secrets.json` in the data directory, readable by this user only (0600). A provider
//! refers to a key by id (`{"stored": "s_…"}`): the configuration, the admin API and exports only
//! ever see the id. `secrets.json` records where each id lives (never the value, for keys in the
//! OS store).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rand::Rng;
use serde::{Deserialize, Serialize};

/// The name under which a stored secret is looked up alongside environment variables (it
/// cannot collide with one: variable names have no `:`).
pub const LOOKUP_PREFIX: &str = "stored:";
/// The service name entries carry in the OS credential store.
const SERVICE: &str = "dev.baton.gateway";

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

/// Where one secret lives.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
enum Slot {
    /// In this file.
    File(String),
    /// In the OS credential store under `SERVICE` / id.
    Os { os: String },
}

/// Which store new secrets go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// The OS credential store, falling back to the file when it does not answer.
    Auto,
    /// Only the 0600 file (`BATON_SECRET_STORE=file`).
    File,
}

pub struct SecretStore {
    path: PathBuf,
    backend: Backend,
    lock: Mutex<()>,
    /// Values read from the OS store, so routing reloads do not call it each time.
    cache: Mutex<HashMap<String, String>>,
    /// `secrets.json` as last read or written: a reload resolving thousands of stored keys
    /// reads the file once, not once per key. Baton is the file's only writer.
    file: Mutex<Option<BTreeMap<String, Slot>>>,
    /// How often the file was read (for the test that proves the cache).
    reads: std::sync::atomic::AtomicUsize,
}

/// The fallback store's file in the data directory.
pub const FILE: &str = "secrets.json";

impl SecretStore {
    pub fn new(data_dir: &Path) -> Self {
        let backend = match std::env::var("BATON_SECRET_STORE").as_deref() {
            Ok("file") => Backend::File,
            _ => Backend::Auto,
        };
        Self {
            path: data_dir.join(FILE),
            backend,
            lock: Mutex::new(()),
            cache: Mutex::new(HashMap::new()),
            file: Mutex::new(None),
            reads: Default::default(),
        }
    }

    /// The stored slots (from memory after the first read).
    fn load(&self) -> Result<BTreeMap<String, Slot>, SecretError> {
        if let Some(m) = self.file.lock().ok().and_then(|f| f.clone()) {
            return Ok(m);
        }
        let m = self.read_file()?;
        if let Ok(mut f) = self.file.lock() {
            *f = Some(m.clone());
        }
        Ok(m)
    }

    /// One stored slot, without copying the whole map.
    fn slot(&self, id: &str) -> Option<Slot> {
        {
            let f = self.file.lock().ok()?;
            if let Some(m) = f.as_ref() {
                return m.get(id).cloned();
            }
        }
        self.load().ok()?.get(id).cloned()
    }

    fn read_file(&self) -> Result<BTreeMap<String, Slot>, SecretError> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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
    fn save(&self, map: &BTreeMap<String, Slot>) -> Result<(), SecretError> {
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
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Ok(mut f) = self.file.lock() {
            *f = Some(map.clone());
        }
        Ok(())
    }

    /// Tries the OS credential store; `false` when there is none (headless Linux without a
    /// Secret Service, a locked keychain…).
    fn os_put(id: &str, value: &str) -> bool {
        let r = keyring::Entry::new(SERVICE, id).and_then(|e| e.set_password(value));
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::info!(error = %e, "no OS credential store; keeping the key in the data directory (0600)");
                false
            }
        }
    }

    /// Stores a secret and returns its new id.
    pub fn put(&self, value: &str) -> Result<String, SecretError> {
        let _g = self.lock.lock();
        let mut map = self.load()?;
        let id = format!("s_{:012x}", rand::rng().random::<u64>() & 0xffff_ffff_ffff);
        let value = value.trim().to_string();
        let slot = if self.backend == Backend::Auto && Self::os_put(&id, &value) {
            if let Ok(mut c) = self.cache.lock() {
                c.insert(id.clone(), value);
            }
            Slot::Os { os: SERVICE.into() }
        } else {
            Slot::File(value)
        };
        map.insert(id.clone(), slot);
        self.save(&map)?;
        Ok(id)
    }

    pub fn get(&self, id: &str) -> Option<String> {
        if let Some(v) = self.cache.lock().ok().and_then(|c| c.get(id).cloned()) {
            return Some(v);
        }
        let _g = self.lock.lock();
        match self.slot(id)? {
            Slot::File(v) => Some(v),
            Slot::Os { .. } => {
                let v = keyring::Entry::new(SERVICE, id)
                    .and_then(|e| e.get_password())
                    .map_err(|e| tracing::warn!(error = %e, id, "cannot read a key from the OS credential store"))
                    .ok()?;
                if let Ok(mut c) = self.cache.lock() {
                    c.insert(id.to_string(), v.clone());
                }
                Some(v)
            }
        }
    }

    /// Where a stored secret lives: `os` or `file`.
    pub fn location(&self, id: &str) -> Option<&'static str> {
        let _g = self.lock.lock();
        match self.slot(id)? {
            Slot::File(_) => Some("file"),
            Slot::Os { .. } => Some("os"),
        }
    }

    pub fn delete(&self, ids: &[String]) -> Result<(), SecretError> {
        if ids.is_empty() {
            return Ok(());
        }
        let _g = self.lock.lock();
        let mut map = self.load()?;
        for id in ids {
            if let Some(Slot::Os { .. }) = map.remove(id) {
                if let Err(e) = keyring::Entry::new(SERVICE, id).and_then(|e| e.delete_credential())
                {
                    tracing::warn!(error = %e, id, "cannot remove a key from the OS credential store");
                }
            }
            if let Ok(mut c) = self.cache.lock() {
                c.remove(id);
            }
        }
        self.save(&map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_store_is_private_and_round_trips() {
        let d = tempfile::tempdir().unwrap();
        let mut s = SecretStore::new(d.path());
        s.backend = Backend::File;
        let id = s.put(" sk-live-123 ").unwrap();
        assert_eq!(s.get(&id).as_deref(), Some("sk-live-123"));
        assert_eq!(s.location(&id), Some("file"));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("secrets.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        s.delete(std::slice::from_ref(&id)).unwrap();
        assert_eq!(s.get(&id), None);
    }

    /// A reload resolves every stored key; with thousands of them, reading and parsing the file
    /// once per key held every chat request for seconds. It is read once.
    #[test]
    fn thousands_of_keys_are_read_from_the_file_once() {
        let d = tempfile::tempdir().unwrap();
        let ids: Vec<String> = (0..6000).map(|i| format!("s_{i:012x}")).collect();
        let file: BTreeMap<&String, Slot> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id, Slot::File(format!("sk-key-{i:05}"))))
            .collect();
        std::fs::write(
            d.path().join("secrets.json"),
            serde_json::to_string(&file).unwrap(),
        )
        .unwrap();
        // As after a restart: nothing in memory yet.
        let mut fresh = SecretStore::new(d.path());
        fresh.backend = Backend::File;
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(fresh.get(id), Some(format!("sk-key-{i:05}")));
        }
        let reads = |s: &SecretStore| s.reads.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(reads(&fresh), 1);
        // Changes are written through, and the file is still not read again.
        let new = fresh.put("sk-one-more").unwrap();
        assert_eq!(fresh.get(&new).as_deref(), Some("sk-one-more"));
        fresh.delete(std::slice::from_ref(&ids[0])).unwrap();
        assert_eq!(fresh.get(&ids[0]), None);
        assert_eq!(reads(&fresh), 1);
    }

    #[test]
    fn slots_read_both_forms() {
        let m: BTreeMap<String, Slot> =
            serde_json::from_str(r#"{"a": "sk-1", "b": {"os": "dev.baton.gateway"}}"#).unwrap();
        assert_eq!(m["a"], Slot::File("sk-1".into()));
        assert!(matches!(m["b"], Slot::Os { .. }));
    }
}
