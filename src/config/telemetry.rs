//! `telemetry`: OpenTelemetry traces of the requests Baton serves (`telemetry/`), sent to an
//! OTLP/HTTP collector, as the config file and Settings → Diagnostics give them. Off unless
//! enabled.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where an OTLP/HTTP collector listens for traces when no other address is given (the
/// OpenTelemetry Collector's default).
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:4318/v1/traces";

/// `telemetry` in the config file and the settings table.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelemetrySettings {
    /// Send a trace of each request (a span per request, a child span per upstream attempt,
    /// with the OpenTelemetry GenAI attributes).
    #[serde(default)]
    pub enabled: bool,
    /// The collector's OTLP/HTTP traces address (protobuf), e.g.
    /// `http://127.0.0.1:4318/v1/traces`; an address without a path gets `/v1/traces`.
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    /// Headers sent with every export (a collector's or vendor's key): header name to the name
    /// of an environment variable holding its value, or `stored:ID` for one typed into
    /// Settings (kept in the OS credential store). Values are never written to an export.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The share of requests traced (0–1), unless the client's `traceparent` already decided.
    #[serde(default = "default_sample_rate")]
    pub sample_rate: f64,
    /// Put the prompt and the answer's text in the spans (`gen_ai.input.messages`,
    /// `gen_ai.output.messages`), redacted and cut at 16 KB each. Off: no content, only
    /// names, counts and timings.
    #[serde(default)]
    pub capture_content: bool,
    /// `service.name` of the spans.
    #[serde(default = "default_service_name")]
    pub service_name: String,
}

fn default_endpoint() -> String {
    DEFAULT_ENDPOINT.to_string()
}

fn default_sample_rate() -> f64 {
    1.0
}

fn default_service_name() -> String {
    "baton".to_string()
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            enabled: false,
            endpoint: default_endpoint(),
            headers: BTreeMap::new(),
            sample_rate: default_sample_rate(),
            capture_content: false,
            service_name: default_service_name(),
        }
    }
}

impl TelemetrySettings {
    /// What is wrong with these settings, in words for the user.
    pub fn problem(&self) -> Option<String> {
        self.problem_in().map(|(_, p)| p)
    }

    /// What is wrong, and in which field (`sampleRate`, `serviceName`, `headers`, `endpoint`).
    pub fn problem_in(&self) -> Option<(&'static str, String)> {
        if !(0.0..=1.0).contains(&self.sample_rate) || self.sample_rate.is_nan() {
            return Some((
                "sampleRate",
                crate::i18n::msg(
                    "sampleRate must be between 0 and 1 (1 traces every request)",
                    &[],
                ),
            ));
        }
        if self.service_name.trim().is_empty() {
            return Some((
                "serviceName",
                crate::i18n::msg("serviceName must not be empty", &[]),
            ));
        }
        for (name, source) in &self.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Some((
                    "headers",
                    crate::i18n::msg(
                        "{name} is not a header name (letters, digits and -)",
                        &[("name", name)],
                    ),
                ));
            }
            if source.trim().is_empty() {
                return Some((
                    "headers",
                    crate::i18n::msg(
                        "header {name} needs the environment variable holding its value",
                        &[("name", name)],
                    ),
                ));
            }
            // A value typed into Settings is stored; any other source names a variable.
            if !source.starts_with(crate::secrets::LOOKUP_PREFIX) {
                if let Err(e) = super::refs::check_env_name(source.trim()) {
                    return Some(("headers", e));
                }
            }
        }
        let url = match self.url() {
            Ok(u) => u,
            Err(e) => return Some(("endpoint", e)),
        };
        let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        if url.scheme() == "http" && !local && !self.headers.is_empty() {
            return Some((
                "endpoint",
                crate::i18n::msg(
                    "{url} is plain http to another machine: its headers (a key) would cross the network readable; use https",
                    &[("url", url.as_str())],
                ),
            ));
        }
        None
    }

    /// The collector's traces address, checked: http(s), `/v1/traces` when no path is given.
    pub fn url(&self) -> Result<reqwest::Url, String> {
        let raw = self.endpoint.trim();
        let mut url = reqwest::Url::parse(raw).map_err(|e| {
            crate::i18n::msg(
                "{raw} is no address ({error}); e.g. http://127.0.0.1:4318/v1/traces",
                &[("raw", raw), ("error", &e.to_string())],
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(crate::i18n::msg(
                "{raw}: the collector must be reached over http or https (OTLP/HTTP)",
                &[("raw", raw)],
            ));
        }
        if matches!(url.path(), "" | "/") {
            url.set_path("/v1/traces");
        }
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_say_what_is_wrong() {
        let mut s = TelemetrySettings {
            enabled: true,
            endpoint: "http://collector:4318".into(),
            ..TelemetrySettings::default()
        };
        assert_eq!(s.problem(), None);
        assert_eq!(s.url().unwrap().as_str(), "http://collector:4318/v1/traces");
        s.headers
            .insert("x-honeycomb-team".into(), "HONEYCOMB".into());
        assert!(s.problem().unwrap().contains("https"), "{:?}", s.problem());
        s.endpoint = "https://api.honeycomb.io/v1/traces".into();
        assert_eq!(s.problem(), None);
        s.headers.insert("bad header".into(), "X".into());
        assert!(s.problem().unwrap().contains("header name"));
        s.headers.clear();
        s.sample_rate = 1.5;
        assert!(s.problem().unwrap().contains("sampleRate"));
        s.sample_rate = 0.25;
        s.endpoint = "ftp://x".into();
        assert!(s.problem().unwrap().contains("http"));
        s.endpoint = "not a url".into();
        assert!(s.problem().unwrap().contains("no address"));
    }
}
