//! The update manifest (`latest.json`, Tauri's updater format) and what it offers this build.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub version: String,
    #[serde(default)]
    pub notes: String,
    #[serde(default)]
    pub pub_date: Option<String>,
    pub platforms: BTreeMap<String, Platform>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Platform {
    pub url: String,
    pub signature: String,
}

/// A newer version for this build: what Settings shows and what install fetches.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Offer {
    pub version: String,
    pub notes: String,
    pub date: Option<String>,
    pub url: String,
    #[serde(skip)]
    pub signature: String,
}

/// This build's platform name in the manifest: `linux-x86_64`, `darwin-aarch64`,
/// `windows-x86_64` (Tauri's names).
pub fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    format!("{os}-{}", std::env::consts::ARCH)
}

impl Manifest {
    /// The offer for `app` on `platform` when the manifest's version is newer than `current`;
    /// `None` when this build is up to date. A manifest without this platform, or with a version
    /// that is not semver, is an error (said in Settings), not silence.
    pub fn offer(&self, current: &str, app: &str, platform: &str) -> Result<Option<Offer>, String> {
        let newest = semver::Version::parse(self.version.trim_start_matches('v'))
            .map_err(|e| format!("version {:?}: {e}", self.version))?;
        let ours = semver::Version::parse(current)
            .map_err(|e| format!("this build's version {current:?}: {e}"))?;
        if newest <= ours {
            return Ok(None);
        }
        let key = format!("{platform}-{app}");
        let p = self
            .platforms
            .get(&key)
            .or_else(|| self.platforms.get(platform))
            .ok_or_else(|| format!("version {newest} has no build for {platform}"))?;
        if p.signature.trim().is_empty() {
            return Err(format!("version {newest}'s {platform} build is not signed"));
        }
        Ok(Some(Offer {
            version: newest.to_string(),
            notes: self.notes.clone(),
            date: self.pub_date.clone(),
            url: p.url.clone(),
            signature: p.signature.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(version: &str, sig: &str) -> Manifest {
        serde_json::from_value(serde_json::json!({
            "version": version, "notes": "Faster failover.", "pub_date": "2026-12-01T00:00:00Z",
            "platforms": {"linux-x86_64": {"url": "https://example.invalid/b", "signature": sig}}
        }))
        .unwrap()
    }

    #[test]
    fn only_a_newer_version_for_this_platform_is_offered() {
        let m = manifest("v0.2.0", "sig");
        let o = m
            .offer("0.1.0", "baton-desktop", "linux-x86_64")
            .unwrap()
            .unwrap();
        assert_eq!(
            (o.version.as_str(), o.notes.as_str()),
            ("0.2.0", "Faster failover.")
        );
        assert_eq!(
            m.offer("0.2.0", "baton-desktop", "linux-x86_64").unwrap(),
            None
        );
        assert_eq!(
            m.offer("0.3.0", "baton-desktop", "linux-x86_64").unwrap(),
            None
        );
        // 0.10 is newer than 0.9 (numbers, not text); a pre-release is older than its release.
        assert!(manifest("0.10.0", "s")
            .offer("0.9.0", "a", "linux-x86_64")
            .unwrap()
            .is_some());
        assert!(manifest("0.2.0-rc.1", "s")
            .offer("0.2.0", "a", "linux-x86_64")
            .unwrap()
            .is_none());
        let err = m
            .offer("0.1.0", "baton-desktop", "darwin-aarch64")
            .unwrap_err();
        assert!(err.contains("no build for darwin-aarch64"), "{err}");
        assert!(manifest("0.2.0", " ")
            .offer("0.1.0", "a", "linux-x86_64")
            .unwrap_err()
            .contains("not signed"));
        assert!(manifest("latest", "s")
            .offer("0.1.0", "a", "linux-x86_64")
            .is_err());
    }
}
