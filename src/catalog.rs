//! The provider catalog shipped with Baton (`catalog/providers.json`): well-known providers with
//! their kind, base URL, key variable, models, sign-up page, free-tier limits and the flags a user
//! should know. Defaults only — a user's configuration always wins.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The catalog file, embedded at build time.
pub const CATALOG_JSON: &str = include_str!("../catalog/providers.json");

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Catalog {
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub about: String,
    pub providers: Vec<CatalogEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogEntry {
    pub id: String,
    pub name: String,
    /// `openai-compatible`, `anthropic`, `gemini`, or a subscription CLI (`claude-cli`…).
    pub kind: String,
    /// API base URL; none for subscription CLIs.
    pub base_url: Option<String>,
    /// Environment variable the key conventionally lives in; none when no key is needed.
    pub key_env: Option<String>,
    /// `client`: the provider calls with the caller's own subscription login (passthrough).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
    /// Executable of a subscription CLI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<String>,
    pub models: Vec<String>,
    #[serde(default)]
    pub fallback_models: Vec<String>,
    pub signup: String,
    pub free_tier: Option<FreeTier>,
    /// IANA zone of the daily quota reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_reset: Option<String>,
    /// The tool call ids the service takes, when not any: a `capabilities.toolCallIds` value
    /// (Mistral: `nine-alphanumerics`), checked where the configuration is parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_ids: Option<String>,
    /// `card-required`, `phone-required`, `trial-only`, `may-train-on-prompts`,
    /// `non-commercial`, `region-restricted`, `subscription`, `local`.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Where the numbers come from.
    pub source: String,
    /// When they were last checked (YYYY-MM-DD); `null` when not verified by Baton's maintainers.
    pub checked: Option<String>,
    /// List prices by model, USD per million tokens: the estimate behind client budgets and
    /// price tiers. A model's `price` in the configuration wins.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub prices: std::collections::BTreeMap<String, crate::pricing::Price>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FreeTier {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpd: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpd: Option<u32>,
    /// What the limits apply to: `key`, `model`, `provider` (account / organization).
    pub scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Allowed flag words.
pub const FLAGS: &[&str] = &[
    "card-required",
    "phone-required",
    "trial-only",
    "may-train-on-prompts",
    "non-commercial",
    "region-restricted",
    "subscription",
    "local",
];

/// The shipped catalog.
pub fn load() -> Result<Catalog, serde_json::Error> {
    serde_json::from_str(CATALOG_JSON)
}

/// The JSON schema of the catalog file (`catalog/providers.schema.json`).
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Catalog)).unwrap_or_default()
}

static CATALOG: std::sync::LazyLock<Option<Catalog>> = std::sync::LazyLock::new(|| load().ok());

/// The shipped catalog's providers (none if it failed to parse, which a test rules out).
pub fn entries() -> &'static [CatalogEntry] {
    CATALOG
        .as_ref()
        .map(|c| c.providers.as_slice())
        .unwrap_or(&[])
}

/// The catalog's price for `model` at the provider whose API lives at `base_url`. OpenRouter's
/// `:free` variants cost nothing.
pub fn price(base_url: &str, model: &str) -> Option<crate::pricing::Price> {
    let base = base_url.trim_end_matches('/');
    if let Some(entry) = CATALOG.as_ref().and_then(|c| {
        c.providers
            .iter()
            .find(|e| e.base_url.as_deref().map(|b| b.trim_end_matches('/')) == Some(base))
    }) {
        if let Some(p) = entry.prices.get(model) {
            return Some(*p);
        }
        if entry.id == "openrouter" && model.ends_with(":free") {
            return Some(crate::pricing::Price::FREE);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_prices_are_found_by_base_url() {
        let groq =
            price("https://api.groq.com/openai/v1/", "llama-3.1-8b-instant").expect("groq price");
        assert_eq!(groq.tier(), crate::pricing::Tier::Low);
        assert_eq!(
            price("https://openrouter.ai/api/v1", "x/y:free"),
            Some(crate::pricing::Price::FREE)
        );
        assert_eq!(price("http://127.0.0.1:9/v1", "gpt-4.1-mini"), None);
    }
}
