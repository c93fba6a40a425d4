//! Gateway and admin keys: loaded from the environment variables the config names, or generated
//! once into the data directory (mode 0600). A presented gateway key is found by its SHA-256
//! (never compared itself); the admin key is compared in constant time.

use std::collections::HashMap;
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
    /// The configured and generated keys' clients by the SHA-256 of the key.
    gateway_by_hash: ByDigest,
    /// Keys made in the UI or admin API: (client, SHA-256 of the key). Swapped whole on change.
    ui: std::sync::RwLock<UiKeys>,
    admin: Secret,
}

/// A SHA-256 digest: what a presented key is looked up by.
type Digest = [u8; 32];

/// Clients by their key's digest. Looked up on every request; a digest is already uniform and
/// nobody can aim it, so foldhash (seeded per process) rather than SipHash.
type ByDigest = HashMap<Digest, Arc<Client>, foldhash::fast::RandomState>;

#[derive(Debug, Default)]
struct UiKeys {
    listed: Vec<Arc<Client>>,
    by_hash: ByDigest,
}

/// The label (and client id) of the gateway key Baton generates when none is configured.
pub const GENERATED_LABEL: &str = "generated";

/// SHA-256 of a key: what is stored for UI-made gateway keys.
pub fn key_hash(key: &str) -> Vec<u8> {
    digest(key).to_vec()
}

/// SHA-256 of a key: what every gateway key is looked up by.
fn digest(key: &str) -> Digest {
    let mut out = [0; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, key.as_bytes()).as_ref());
    out
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
        let gateway_by_hash = gateway
            .iter()
            .map(|k| (digest(k.secret.expose()), k.client.clone()))
            .collect();
        Ok((
            Self {
                gateway,
                gateway_by_hash,
                ui: Default::default(),
                admin,
            },
            generated,
        ))
    }

    /// The client whose key `presented` is, if any: one digest and a table lookup, whatever
    /// the number of keys. The key is never compared itself, so the time taken says nothing
    /// about how much of a key was right (only about a digest nobody can aim at).
    pub fn client(&self, presented: &str) -> Option<Arc<Client>> {
        let h = digest(presented);
        let ui = self
            .ui
            .read()
            .ok()
            .and_then(|ui| ui.by_hash.get(&h).cloned());
        ui.or_else(|| self.gateway_by_hash.get(&h).cloned())
    }

    /// Every admin-made client (for seeding budgets and metrics labels).
    pub fn managed(&self) -> Vec<Arc<Client>> {
        self.ui
            .read()
            .map(|ui| ui.listed.clone())
            .unwrap_or_default()
    }

    /// Replaces the UI-made keys (after a create, change or revoke).
    pub fn set_ui_keys(&self, keys: Vec<(Arc<Client>, Vec<u8>)>) {
        let by_hash = keys
            .iter()
            .filter_map(|(c, h)| Some((Digest::try_from(h.as_slice()).ok()?, c.clone())))
            .collect();
        let listed = keys.into_iter().map(|(c, _)| c).collect();
        if let Ok(mut ui) = self.ui.write() {
            *ui = UiKeys { listed, by_hash };
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
    // A header's text is visible ASCII, spaces and tabs (`to_str`): ASCII whitespace is all
    // there is to trim.
    //
    // A client that sends its own subscription credential in Authorization / x-api-key
    // presents Baton's key here.
    if let Some(v) = headers
        .get(&crate::providers::client::BATON_KEY)
        .and_then(|v| v.to_str().ok())
    {
        return Some(v.trim_ascii());
    }
    if let Some(v) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let v = v.trim_ascii();
        if let Some(t) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        {
            return Some(t.trim_ascii());
        }
    }
    headers
        .get(&crate::providers::client::X_API_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::trim_ascii)
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

    #[test]
    fn every_key_is_found_among_many_and_a_near_miss_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = ConfigFile::default();
        for i in 0..300 {
            let env = format!("BATON_AUTH_TEST_KEY_{i}");
            std::env::set_var(&env, format!("bt-configured-{i:04}"));
            config.gateway_keys.push(
                serde_json::from_value(serde_json::json!({"env": env, "label": format!("c{i}")}))
                    .expect("key entry"),
            );
        }
        let (keys, generated) = Keys::load(&config, dir.path()).expect("keys");
        assert!(generated.is_none(), "configured keys: none generated");
        let ui: Vec<_> = (0..300)
            .map(|i| {
                let c = Arc::new(Client::unlimited(&format!("ui:{i}")));
                (c, key_hash(&format!("bt-made-in-ui-{i:04}")))
            })
            .collect();
        keys.set_ui_keys(ui);
        let label = |k: &str| keys.client(k).map(|c| c.label.clone());
        assert_eq!(label("bt-configured-0000").as_deref(), Some("c0"));
        assert_eq!(label("bt-configured-0299").as_deref(), Some("c299"));
        assert_eq!(label("bt-made-in-ui-0150").as_deref(), Some("ui:150"));
        for near in [
            "bt-configured-029",
            "bt-configured-02990",
            "BT-configured-0299",
            "",
        ] {
            assert_eq!(label(near), None, "{near:?}");
        }
        // A revoked UI key stops working at once; the configured ones stay.
        keys.set_ui_keys(Vec::new());
        assert_eq!(label("bt-made-in-ui-0150"), None);
        assert_eq!(keys.managed().len(), 0);
        assert_eq!(label("bt-configured-0007").as_deref(), Some("c7"));
    }
}
