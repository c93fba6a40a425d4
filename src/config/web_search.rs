//! `webSearch`: the search service Baton runs hosted web search through on translated routes
//! (`search/`), as the config file and Settings → Web search give it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Brave's Search API, when no other address is given.
pub const BRAVE_URL: &str = "https://api.search.brave.com/res/v1/web/search";

/// Which service searches.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// None: a translated route tells the model web search is unavailable.
    #[default]
    None,
    /// A SearXNG instance's JSON API (`{url}/search?format=json`; `json` must be among its
    /// `search.formats`).
    Searxng,
    /// Brave's Search API, with a subscription key.
    Brave,
    /// A configured provider with web search built in (`anthropic`: its web search server tool;
    /// `openai-responses`: its `web_search` tool; `gemini`: grounding with Google Search), on
    /// its own key and bill.
    Provider,
}

/// `webSearch` in the settings table.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchSettings {
    #[serde(default)]
    pub backend: Backend,
    /// SearXNG's address (`http://127.0.0.1:8888`); for Brave, another endpoint than its own.
    #[serde(default)]
    pub url: String,
    /// Brave's key: the name of an environment variable, or `stored:ID` for one typed into
    /// Settings (kept in the OS credential store).
    #[serde(default)]
    pub api_key_env: String,
    /// The provider that searches, for `backend: "provider"` (its id).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Results per search (1–20).
    #[serde(default = "default_max_results")]
    pub max_results: u32,
}

fn default_max_results() -> u32 {
    5
}

impl Default for SearchSettings {
    fn default() -> Self {
        Self {
            backend: Backend::None,
            url: String::new(),
            api_key_env: String::new(),
            provider: String::new(),
            max_results: default_max_results(),
        }
    }
}

impl SearchSettings {
    /// What is wrong with these settings, in words for the user.
    pub fn problem(&self) -> Option<String> {
        if !(1..=20).contains(&self.max_results) {
            return Some(crate::i18n::msg("maxResults must be between 1 and 20", &[]));
        }
        match self.backend {
            Backend::None => None,
            Backend::Searxng if self.url.trim().is_empty() => {
                Some(crate::i18n::msg(
                    "SearXNG needs its address, e.g. http://127.0.0.1:8888",
                    &[],
                ))
            }
            Backend::Brave if self.api_key_env.trim().is_empty() => {
                Some(crate::i18n::msg("Brave's Search API needs a key", &[]))
            }
            Backend::Provider if self.provider.trim().is_empty() => Some(
                crate::i18n::msg(
                    "name the provider that searches (an anthropic, openai-responses or gemini provider)",
                    &[],
                ),
            ),
            Backend::Provider => None,
            _ => self.endpoint().err(),
        }
    }

    /// The address searched, checked: http(s), and plain http only on this machine (a query
    /// is the user's words).
    pub fn endpoint(&self) -> Result<reqwest::Url, String> {
        let raw = match self.backend {
            Backend::Brave if self.url.trim().is_empty() => BRAVE_URL.to_string(),
            Backend::Searxng => format!("{}/search", self.url.trim().trim_end_matches('/')),
            _ => self.url.trim().to_string(),
        };
        let url = reqwest::Url::parse(&raw).map_err(|e| format!("{raw:?} is no address: {e}"))?;
        let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
        match url.scheme() {
            "https" => Ok(url),
            "http" if local => Ok(url),
            "http" => Err(format!(
                "{raw} must use https (plain http only on this machine)"
            )),
            s => Err(format!("{raw}: {s}: is not http(s)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_say_what_is_missing() {
        let mut s = SearchSettings {
            backend: Backend::Searxng,
            ..SearchSettings::default()
        };
        assert!(s.problem().unwrap().contains("address"));
        s.url = "http://search.example.com".into();
        assert!(s.problem().unwrap().contains("https"));
        s.url = "http://127.0.0.1:8888/".into();
        assert_eq!(s.problem(), None);
        assert_eq!(
            s.endpoint().unwrap().as_str(),
            "http://127.0.0.1:8888/search"
        );
        s.max_results = 0;
        assert!(s.problem().unwrap().contains("maxResults"));
        let brave = SearchSettings {
            backend: Backend::Brave,
            ..SearchSettings::default()
        };
        assert!(brave.problem().unwrap().contains("key"));
    }
}
