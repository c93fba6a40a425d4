//! What lets a user see inside requests, as the core keeps it: the OpenTelemetry exporter
//! built from the `telemetry` settings (the config file's, else Settings'), with its headers'
//! values looked up.

use std::time::Duration;

use super::Core;
use crate::config::telemetry::TelemetrySettings;

/// The settings table's key for Settings → Diagnostics' tracing.
pub const TELEMETRY_SETTING: &str = "telemetry";

impl Core {
    /// The tracing settings in force: the config file's when it gives them, else Settings'.
    pub fn telemetry_settings(&self) -> TelemetrySettings {
        match &self.file_config.telemetry {
            Some(s) => s.clone(),
            None => self.stored_telemetry(),
        }
    }

    /// The tracing settings Settings saved, whatever the file says.
    pub fn stored_telemetry(&self) -> TelemetrySettings {
        self.store
            .setting(TELEMETRY_SETTING)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }

    /// The export headers with their values (an empty value where the variable is unset).
    pub fn telemetry_headers(&self, s: &TelemetrySettings) -> Vec<(String, String)> {
        s.headers
            .iter()
            .map(|(name, source)| (name.clone(), self.secret(source.trim()).unwrap_or_default()))
            .collect()
    }

    /// Starts, replaces or stops the trace exporter as the settings say; why it is off when
    /// they ask for it and cannot be.
    pub fn apply_telemetry(&self) -> Result<(), String> {
        let s = self.telemetry_settings();
        if !s.enabled {
            self.routing.telemetry.set(None);
            return Ok(());
        }
        let built = s
            .problem()
            .map_or_else(|| self.exporter(&s), Err)
            .inspect_err(|e| {
                tracing::warn!("telemetry is on but cannot export: {e}");
            });
        match built {
            Ok(exporter) => {
                tracing::info!(endpoint = %s.endpoint, sample_rate = s.sample_rate, "tracing requests to an OTLP collector");
                self.routing.telemetry.set(Some(exporter));
                Ok(())
            }
            Err(e) => {
                self.routing.telemetry.set(None);
                Err(e)
            }
        }
    }

    /// The capture rules saved (Settings, `/admin/captures`), in force again after a restart
    /// until each one's end; old captures past the retention are deleted.
    pub fn load_capture_rules(&self) {
        let rules: Vec<crate::capture::Rule> = self
            .store
            .setting(crate::capture::SETTING)
            .ok()
            .flatten()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        let now = self.routing.clock.now_ms();
        self.captures
            .set_rules(rules.into_iter().filter(|r| r.until_ms > now).collect());
        self.captures.prune();
    }

    /// Saves and applies the capture rules.
    pub fn save_capture_rules(
        &self,
        rules: Vec<crate::capture::Rule>,
    ) -> Result<(), crate::store::StoreError> {
        let value = serde_json::to_value(&rules).unwrap_or_default();
        self.store.set_setting(crate::capture::SETTING, &value)?;
        self.captures.set_rules(rules);
        Ok(())
    }

    fn exporter(&self, s: &TelemetrySettings) -> Result<crate::telemetry::Exporter, String> {
        let rt = tokio::runtime::Handle::try_current()
            .map_err(|_| "no runtime to export on".to_string())?;
        let client = export_client().map_err(|e| format!("HTTP client: {e}"))?;
        let mut headers = std::collections::HashMap::new();
        for (name, value) in self.telemetry_headers(s) {
            if value.is_empty() {
                tracing::warn!(header = %name, "telemetry header has no value: its environment variable is unset");
                continue;
            }
            headers.insert(name, value);
        }
        crate::telemetry::Exporter::new(s, headers, client, rt)
    }
}

/// The HTTP client spans (and the Settings check) go to the collector with: no redirects (a
/// header may be a key), bounded in time.
pub(crate) fn export_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
        .build()
}
