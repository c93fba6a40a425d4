//! Updates of the desktop app: off until the user turns them on in Settings (no request leaves
//! the machine before), a signed manifest read from one address, the new build downloaded and
//! verified against the signing key built into this binary before anything is replaced, and
//! installed only when the user asks. The desktop shell then restarts into it.
//!
//! The manifest (`latest.json`, written by `scripts/release-manifest`) follows Tauri's updater
//! format: `{"version", "notes", "pub_date", "platforms": {"linux-x86_64": {"url",
//! "signature"}}}`, where `signature` is the minisign signature file's text and its trusted
//! comment must read `baton-desktop VERSION PLATFORM` (so an older signed build cannot be
//! offered as a newer one, nor one platform's as another's).

mod manifest;
mod verify;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};

pub use manifest::{platform, Manifest, Offer};
pub use verify::{trusted_comment, verify};

use crate::Core;

/// The settings key (in the store) holding [`UpdateSettings`].
pub const SETTING: &str = "updates";
/// The largest manifest read (it is a few hundred bytes).
const MANIFEST_LIMIT: usize = 64 * 1024;
/// The largest build downloaded.
const DOWNLOAD_LIMIT: u64 = 400 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error("updates are off: turn on \"Check for updates\" in Settings first")]
    Disabled,
    #[error("this build has no update address: set one in Settings (the release's latest.json)")]
    NoUrl,
    #[error("this build has no update signing key, so no update could be verified: install new versions from a release package")]
    NoKey,
    #[error("updates are installed by the desktop app; this Baton runs headless (update the binary yourself)")]
    NotDesktop,
    #[error("no update to install: check for updates first")]
    NothingOffered,
    #[error("the update address {0} is not https (plain http is allowed only on this machine's loopback)")]
    Insecure(String),
    #[error("cannot reach the update address: {0}")]
    Fetch(String),
    #[error("the update manifest is not valid: {0}")]
    Manifest(String),
    #[error(
        "the downloaded update is not signed by Baton's release key: {0}. Nothing was installed."
    )]
    Signature(String),
    #[error("{exe} belongs to your package manager: install {file} with it (e.g. `sudo apt-get install {file}`), or download the new package from the release page")]
    PackageManaged { exe: String, file: String },
    #[error("cannot replace {0}: {1}")]
    Replace(String, String),
}

/// What Settings keeps: whether to check, and where (empty: the address built in).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSettings {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The app that updates itself: its artifact name and where its binary was when it started
/// (after a replacement, the running process's own path reads "(deleted)").
#[derive(Debug, Clone)]
pub struct App {
    pub name: &'static str,
    pub exe: PathBuf,
}

/// What the last check and install found (shown in Settings and the tray).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateState {
    pub last_check_ms: Option<i64>,
    pub offer: Option<Offer>,
    pub error: Option<String>,
    /// The version written over this binary, waiting for the restart.
    pub installed: Option<String>,
}

/// This process's updater: which app it is (set by the desktop shell) and what it found.
#[derive(Default)]
pub struct Updates {
    app: OnceLock<App>,
    state: Mutex<UpdateState>,
}

/// The minisign public key releases are signed with: set when the release is built
/// (`BATON_UPDATE_PUBKEY`). Debug builds also take it from the environment, for tests; a release
/// build never does (anyone who can set a variable could otherwise choose the key).
pub fn trusted_key() -> Option<String> {
    let built = option_env!("BATON_UPDATE_PUBKEY").map(str::to_string);
    let from_env = if cfg!(debug_assertions) {
        std::env::var("BATON_UPDATE_PUBKEY").ok()
    } else {
        None
    };
    from_env.or(built).filter(|k| !k.trim().is_empty())
}

/// The manifest address built into release builds (`BATON_UPDATE_URL`).
pub fn built_in_url() -> Option<&'static str> {
    option_env!("BATON_UPDATE_URL").filter(|u| !u.is_empty())
}

impl Updates {
    /// The desktop shell says which app this is, once per process.
    pub fn attach(&self, app: App) {
        let _ = self.app.set(app);
    }

    pub fn app(&self) -> Option<&App> {
        self.app.get()
    }

    pub fn state(&self) -> UpdateState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn update(&self, f: impl FnOnce(&mut UpdateState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }
}

pub fn settings(core: &Core) -> UpdateSettings {
    core.store
        .setting(SETTING)
        .ok()
        .flatten()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// The manifest address in use: the one set in Settings, else the one built in.
pub fn url(s: &UpdateSettings) -> Option<String> {
    s.url
        .clone()
        .filter(|u| !u.trim().is_empty())
        .or_else(|| built_in_url().map(str::to_string))
}

/// https anywhere; plain http only to this machine (a test server, a local mirror).
fn secure(url: &str) -> Result<reqwest::Url, UpdateError> {
    let u = reqwest::Url::parse(url).map_err(|e| UpdateError::Insecure(format!("{url} ({e})")))?;
    let loopback = matches!(u.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    match u.scheme() {
        "https" => Ok(u),
        "http" if loopback => Ok(u),
        _ => Err(UpdateError::Insecure(url.to_string())),
    }
}

fn client() -> Result<reqwest::Client, UpdateError> {
    reqwest::Client::builder()
        .user_agent(concat!("baton-updater/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::limited(5))
        .build()
        .map_err(|e| UpdateError::Fetch(e.to_string()))
}

/// Reads at most `limit` bytes of `url`'s body; more is an error, not a truncation.
async fn fetch(url: &str, limit: u64, timeout_s: u64) -> Result<Vec<u8>, UpdateError> {
    let u = secure(url)?;
    let mut resp = client()?
        .get(u)
        .timeout(std::time::Duration::from_secs(timeout_s))
        .send()
        .await
        .map_err(|e| UpdateError::Fetch(format!("{url}: {e}")))?;
    if !resp.status().is_success() {
        return Err(UpdateError::Fetch(format!(
            "{url} answered {}",
            resp.status()
        )));
    }
    if resp.content_length().is_some_and(|n| n > limit) {
        return Err(UpdateError::Fetch(format!(
            "{url} is larger than {limit} bytes"
        )));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| UpdateError::Fetch(format!("{url}: {e}")))?
    {
        body.extend_from_slice(&chunk);
        if body.len() as u64 > limit {
            return Err(UpdateError::Fetch(format!(
                "{url} is larger than {limit} bytes"
            )));
        }
    }
    Ok(body)
}

/// Asks the update address whether a newer version exists (only when updates are on). The
/// answer is kept for Settings and the tray.
pub async fn check(core: &Core) -> Result<Option<Offer>, UpdateError> {
    let r = check_inner(core).await;
    let now = core.routing.clock.now_ms();
    core.updates.update(|s| {
        s.last_check_ms = Some(now);
        match &r {
            Ok(offer) => {
                s.offer = offer.clone();
                s.error = None;
            }
            Err(e) => s.error = Some(e.to_string()),
        }
    });
    if let Ok(Some(offer)) = &r {
        tracing::info!(version = %offer.version, "an update is available");
    }
    r
}

async fn check_inner(core: &Core) -> Result<Option<Offer>, UpdateError> {
    let s = settings(core);
    if !s.enabled {
        return Err(UpdateError::Disabled);
    }
    let app = core.updates.app().ok_or(UpdateError::NotDesktop)?;
    trusted_key().ok_or(UpdateError::NoKey)?;
    let url = url(&s).ok_or(UpdateError::NoUrl)?;
    let body = fetch(&url, MANIFEST_LIMIT as u64, 30).await?;
    let m: Manifest =
        serde_json::from_slice(&body).map_err(|e| UpdateError::Manifest(e.to_string()))?;
    m.offer(crate::version(), app.name, &platform())
        .map_err(UpdateError::Manifest)
}

/// Downloads the offered build, verifies its signature and trusted comment, and writes it over
/// this app's binary (atomically: a file beside it, then a rename). Returns the version
/// installed; the caller restarts into it.
pub async fn install(core: &Core) -> Result<String, UpdateError> {
    let r = install_inner(core).await;
    core.updates.update(|s| match &r {
        Ok(v) => {
            s.installed = Some(v.clone());
            s.error = None;
        }
        Err(e) => s.error = Some(e.to_string()),
    });
    r
}

async fn install_inner(core: &Core) -> Result<String, UpdateError> {
    if !settings(core).enabled {
        return Err(UpdateError::Disabled);
    }
    let app = core.updates.app().ok_or(UpdateError::NotDesktop)?.clone();
    let key = trusted_key().ok_or(UpdateError::NoKey)?;
    let offer = core
        .updates
        .state()
        .offer
        .ok_or(UpdateError::NothingOffered)?;
    let bytes = fetch(&offer.url, DOWNLOAD_LIMIT, 600).await?;
    let comment = trusted_comment(app.name, &offer.version, &platform());
    verify(&key, &bytes, &offer.signature, &comment).map_err(UpdateError::Signature)?;
    if package_managed(&app.exe) {
        // Verified, but not ours to replace: kept for the package manager.
        let file = core
            .data_dir
            .join(format!("{}-{}", app.name, offer.version));
        std::fs::write(&file, &bytes)
            .map_err(|e| UpdateError::Replace(file.display().to_string(), e.to_string()))?;
        return Err(UpdateError::PackageManaged {
            exe: app.exe.display().to_string(),
            file: file.display().to_string(),
        });
    }
    replace(&app.exe, &bytes)?;
    tracing::info!(version = %offer.version, exe = %app.exe.display(), "update installed; restarting into it");
    Ok(offer.version)
}

/// A binary in a system directory was put there by a package (deb, rpm): the package manager
/// replaces it, not the app.
fn package_managed(exe: &Path) -> bool {
    ["/usr/", "/opt/", "/bin/", "/sbin/"]
        .iter()
        .any(|p| exe.starts_with(p))
}

fn replace(exe: &Path, bytes: &[u8]) -> Result<(), UpdateError> {
    let fail = |e: std::io::Error| UpdateError::Replace(exe.display().to_string(), e.to_string());
    let dir = exe.parent().ok_or_else(|| {
        UpdateError::Replace(exe.display().to_string(), "no parent directory".into())
    })?;
    let tmp = dir.join(format!(
        ".{}.update-{}",
        exe.file_name().and_then(|n| n.to_str()).unwrap_or("baton"),
        std::process::id()
    ));
    let written = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
        }
        std::fs::rename(&tmp, exe)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

/// Checks once a day while updates are on (the first a minute after start); the desktop shell
/// runs it and is told of each new version found (once per version). Nothing is downloaded or
/// installed without the user.
pub async fn run_checks(core: std::sync::Arc<Core>, on_offer: impl Fn(&Offer)) {
    let mut told: Option<String> = None;
    let day_ms = 24 * 3_600_000;
    let mut first = true;
    loop {
        let wait = if first { 60 } else { 3_600 };
        first = false;
        tokio::select! {
            _ = core.stopping.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(wait)) => {}
        }
        let due = core
            .updates
            .state()
            .last_check_ms
            .is_none_or(|t| core.routing.clock.now_ms() - t >= day_ms);
        if settings(&core).enabled && due {
            if let Ok(Some(offer)) = check(&core).await {
                if told.as_deref() != Some(offer.version.as_str()) {
                    on_offer(&offer);
                    told = Some(offer.version.clone());
                }
            }
        }
    }
}
