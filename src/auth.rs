//! Gateway and admin keys: loaded from the environment variables the config names, or generated
//! once into the data directory (mode 0600). Keys are compared in constant time.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use rand::Rng;
use subtle::ConstantTimeEq;

use crate::clients::Client;

use crate::config::ConfigFile;
use crate::providers::Secret;

pub const GATEWAY_KEY_FILE: &str = "gateway.key";
pub const ADMIN_KEY_FILE: &str = "admin.key";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error(
        "gatewayKeys[{index}]: environment variable {env} is not set; set it or remove the entry"
    )]
    MissingEnv { index: usize, env: String },
    #[error("key file {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A client key and the non-secret label that identifies it in logs.
#[derive(Debug)]
pub struct ClientKey {
    pub label: String,
    secret: Secret,
    client: Arc<Client>,
}

#[derive(Debug)]
pub struct Keys {
    gateway: Vec<ClientKey>,
    /// Keys made in the UI or admin API: (client, SHA-256 of the key). Swapped whole on change.
    ui: std::sync::RwLock<Vec<(Arc<Client>, Vec<u8>)>>,
    admin: Secret,
}

/// The label (and client id) of the gateway key Baton generates when none is configured.
pub const GENERATED_LABEL: &str = "generated";

/// SHA-256 of a key: what is stored for UI-made gateway keys.
pub fn key_hash(key: &str) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, key.as_bytes())
        .as_ref()
        .to_vec()
}

/// A new random gateway key.
pub fn new_gateway_key() -> String {
    generate("bt-")
}

impl Keys {
    /// Returns the keys and, when the gateway key was generated just now, its value.
    pub fn load(config: &ConfigFile, data_dir: &Path) -> Result<(Self, Option<String>), AuthError> {
        let mut gateway = Vec::new();
        for (index, k) in config.gateway_keys.iter().enumerate() {
            let v = std::env::var(&k.env).ok().filter(|v| !v.trim().is_empty());
            let v = v.ok_or_else(|| AuthError::MissingEnv {
                index,
                env: k.env.clone(),
            })?;
            gateway.push(ClientKey {
                client: Arc::new(Client {
                    id: k.label(),
                    label: k.label(),
                    policy: k.policy.clone(),
                }),
                label: k.label(),
                secret: Secret::new(v.trim()),
            });
        }
        let mut generated = None;
        if gateway.is_empty() {
            let (key, fresh) = load_or_create(&data_dir.join(GATEWAY_KEY_FILE), "bt-")?;
            if fresh {
                generated = Some(key.expose().to_string());
            }
            gateway.push(ClientKey {
                client: Arc::new(Client::unlimited(GENERATED_LABEL)),
                label: GENERATED_LABEL.into(),
                secret: key,
            });
        }
        let (admin, _) = load_or_create(&data_dir.join(ADMIN_KEY_FILE), "bta-")?;
        Ok((
            Self {
                gateway,
                ui: Default::default(),
                admin,
            },
            generated,
        ))
    }

    /// The client whose key `presented` is, if any.
    pub fn client(&self, presented: &str) -> Option<Arc<Client>> {
        let p = presented.as_bytes();
        let mut found = None;
        // Check every key so timing does not reveal which one matched.
        for k in &self.gateway {
            if bool::from(k.secret.expose().as_bytes().ct_eq(p)) {
                found = Some(k.client.clone());
            }
        }
        if let Ok(ui) = self.ui.read() {
            if !ui.is_empty() {
                let h = key_hash(presented);
                for (client, hash) in ui.iter() {
                    if bool::from(hash.as_slice().ct_eq(&h)) {
                        found = Some(client.clone());
                    }
                }
            }
        }
        found
    }

    /// Every admin-made client (for seeding budgets and metrics labels).
    pub fn managed(&self) -> Vec<Arc<Client>> {
        self.ui
            .read()
            .map(|ui| ui.iter().map(|(c, _)| c.clone()).collect())
            .unwrap_or_default()
    }

    /// Replaces the UI-made keys (after a create, change or revoke).
    pub fn set_ui_keys(&self, keys: Vec<(Arc<Client>, Vec<u8>)>) {
        if let Ok(mut ui) = self.ui.write() {
            *ui = keys;
        }
    }

    /// The keys that come from the configuration or the data directory: (client, masked).
    pub fn fixed(&self) -> Vec<(Arc<Client>, String)> {
        self.gateway
            .iter()
            .map(|k| (k.client.clone(), k.secret.masked()))
            .collect()
    }

    /// The key a client set up by `connect` presents: the config file's first gateway key, else
    /// the generated one.
    pub fn first_gateway_secret(&self) -> Option<String> {
        self.gateway.first().map(|k| k.secret.expose().to_string())
    }

    /// The configured and generated gateway keys and the admin key, for the redactor.
    pub fn secret_values(&self) -> Vec<String> {
        self.gateway
            .iter()
            .map(|k| k.secret.expose().to_string())
            .chain(std::iter::once(self.admin.expose().to_string()))
            .collect()
    }

    pub fn is_admin(&self, presented: &str) -> bool {
        bool::from(self.admin.expose().as_bytes().ct_eq(presented.as_bytes()))
    }
}

fn load_or_create(path: &Path, prefix: &str) -> Result<(Secret, bool), AuthError> {
    let err = |source| AuthError::File {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(s) if !s.trim().is_empty() => return Ok((Secret::new(s.trim()), false)),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let key = generate(prefix);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).map_err(err)?;
    f.write_all(key.as_bytes()).map_err(err)?;
    f.write_all(b"\n").map_err(err)?;
    Ok((Secret::new(key), true))
}

fn generate(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let body: String = (0..40)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{body}")
}

pub use crate::providers::BATON_KEY_HEADER;

/// The credential a request presents: `Authorization: Bearer …` or `x-api-key`.
pub fn presented_key(headers: &http::HeaderMap) -> Option<&str> {
    // A client that sends its own subscription credential in Authorization / x-api-key
    // presents Baton's key here.
    if let Some(v) = headers.get(BATON_KEY_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(v.trim());
    }
    if let Some(v) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let v = v.trim();
        if let Some(t) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        {
            return Some(t.trim());
        }
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_persist_with_private_mode() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (k1, first) = Keys::load(&ConfigFile::default(), dir.path()).expect("keys");
        let gen = first.expect("generated on first start");
        let (k2, second) = Keys::load(&ConfigFile::default(), dir.path()).expect("keys");
        assert!(second.is_none(), "not regenerated");
        assert_eq!(
            k1.client(&gen).map(|c| c.label.clone()).as_deref(),
            Some("generated")
        );
        assert_eq!(
            k2.client(&gen).map(|c| c.label.clone()).as_deref(),
            Some("generated")
        );
        assert_eq!(k2.client("bt-wrong"), None);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(GATEWAY_KEY_FILE))
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
