//! The search service Baton runs a hosted web search through when the upstream serving the
//! request cannot (`router/hosted.rs`): a SearXNG instance (often local) or Brave's Search API
//! (keyed). Settings → Web search edits it (`api/web_search.rs`); it is kept in the settings
//! table under [`SETTING`] and read into each routing snapshot.
//!
//! What a service answers is text from outside: bounded in size and time, and every title,
//! address and excerpt goes through the redactor before the model or the client sees it.

use std::time::Duration;

use serde_json::Value;

pub use crate::config::web_search::{Backend, SearchSettings, BRAVE_URL};

use crate::canonical::search::{SearchError, SearchHit, SearchRun, WebSearch};

/// The settings table's key.
pub const SETTING: &str = "webSearch";
/// How long one search may take, all in.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The most a service's answer may be.
const MAX_BODY: usize = 2 * 1024 * 1024;
/// The longest title and excerpt passed on (in characters).
const MAX_TITLE: usize = 300;
const MAX_SNIPPET: usize = 1500;

/// The settings with the key looked up: what a snapshot holds.
#[derive(Debug, Clone, Default)]
pub struct Service {
    pub settings: SearchSettings,
    key: Option<String>,
}

impl Service {
    pub fn new(settings: SearchSettings, key: Option<String>) -> Self {
        Self { settings, key }
    }

    /// The service's key (for the redactor: never relayed, logged or shown).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Why searches cannot run, if they cannot.
    pub fn unavailable(&self) -> Option<String> {
        if self.settings.backend == Backend::None {
            return Some(
                "no search service is set up in Baton (Settings → Web search)".to_string(),
            );
        }
        if let Some(p) = self.settings.problem() {
            return Some(format!("Baton's web search settings: {p}"));
        }
        if self.settings.backend == Backend::Brave && self.key.is_none() {
            return Some(format!(
                "the Brave Search key ({}) is not set",
                self.settings.api_key_env
            ));
        }
        None
    }

    /// One search: the hits that pass the client's filters, or why there are none.
    pub async fn search(
        &self,
        http: &reqwest::Client,
        id: String,
        query: String,
        opts: &WebSearch,
        redactor: &crate::redact::Redactor,
    ) -> SearchRun {
        let outcome = match self.unavailable() {
            Some(why) => Err(error("unavailable", why)),
            None => tokio::time::timeout(TIMEOUT, self.fetch(http, &query))
                .await
                .unwrap_or_else(|_| {
                    Err(error(
                        "unavailable",
                        format!("the search service gave no answer within {TIMEOUT:?}"),
                    ))
                }),
        };
        self.run(id, query, outcome, opts, redactor)
    }

    /// What one search found, or why nothing, as the run the model and the client see (from
    /// this service or from a provider's own search): the hits that pass the client's filters,
    /// as many as asked for, every text from outside redacted and bounded.
    pub fn run(
        &self,
        id: String,
        query: String,
        outcome: Result<Vec<SearchHit>, SearchError>,
        opts: &WebSearch,
        redactor: &crate::redact::Redactor,
    ) -> SearchRun {
        let clean = |s: &str, max: usize| {
            let s = redactor.string(s.to_string());
            crate::limits::truncate(&s, max).to_string()
        };
        match outcome {
            Ok(hits) => SearchRun {
                id,
                hits: hits
                    .into_iter()
                    .filter(|h| opts.permits(&h.url))
                    .take(self.settings.max_results as usize)
                    .map(|h| SearchHit {
                        url: clean(&h.url, 2000),
                        title: clean(&h.title, MAX_TITLE),
                        snippet: clean(&h.snippet, MAX_SNIPPET),
                        age: h.age.map(|a| clean(&a, 100)),
                    })
                    .collect(),
                query,
                error: None,
            },
            Err(e) => SearchRun {
                id,
                query,
                hits: Vec::new(),
                error: Some(SearchError {
                    code: e.code,
                    message: redactor.string(e.message),
                }),
            },
        }
    }

    async fn fetch(
        &self,
        http: &reqwest::Client,
        query: &str,
    ) -> Result<Vec<SearchHit>, SearchError> {
        let mut url = self
            .settings
            .endpoint()
            .map_err(|e| error("unavailable", e))?;
        // More than asked for: the client's domain filters apply afterwards.
        let count = (self.settings.max_results * 2).min(20).to_string();
        let req = match self.settings.backend {
            Backend::Searxng => {
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("format", "json")
                    .append_pair("pageno", "1");
                http.get(url)
            }
            _ => {
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("count", &count);
                http.get(url).header(
                    "X-Subscription-Token",
                    self.key.as_deref().unwrap_or_default(),
                )
            }
        };
        let resp = req
            .header("Accept", "application/json")
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|e| {
                error(
                    "unavailable",
                    format!(
                        "the search service could not be reached: {}",
                        crate::providers::outbound::describe(&e)
                    ),
                )
            })?;
        let status = resp.status().as_u16();
        let body = read_bounded(resp).await?;
        if status != 200 {
            return Err(refused(self.settings.backend, status));
        }
        let v: Value = serde_json::from_slice(&body)
            .map_err(|_| error("unavailable", "the search service did not answer in JSON"))?;
        Ok(match self.settings.backend {
            Backend::Searxng => hits(v.get("results"), "content", "publishedDate"),
            _ => hits(v.pointer("/web/results"), "description", "age"),
        })
    }
}

fn error(code: &'static str, message: impl Into<String>) -> SearchError {
    SearchError {
        code,
        message: message.into(),
    }
}

/// A service's refusal, in words that say what to fix.
fn refused(backend: Backend, status: u16) -> SearchError {
    match (backend, status) {
        (_, 429) => error(
            "too_many_requests",
            "the search service's rate limit was reached",
        ),
        (Backend::Searxng, 403) => error(
            "unavailable",
            "SearXNG refused JSON output: add `json` to `search.formats` in its settings.yml",
        ),
        (Backend::Brave, 401 | 403 | 422) => error(
            "unavailable",
            format!("Brave refused the key (HTTP {status})"),
        ),
        _ => error(
            "unavailable",
            format!("the search service answered HTTP {status}"),
        ),
    }
}

async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, SearchError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|_| error("unavailable", "the search service's answer broke off"))?
    {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(error(
                "unavailable",
                "the search service's answer is too large",
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The results list of a SearXNG or Brave answer.
fn hits(list: Option<&Value>, snippet: &str, age: &str) -> Vec<SearchHit> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let url = r.get("url")?.as_str()?.to_string();
            url.starts_with("http").then(|| SearchHit {
                title: crate::canonical::str_at(r, "title"),
                snippet: crate::canonical::str_at(r, snippet),
                age: r
                    .get(age)
                    .and_then(Value::as_str)
                    .filter(|a| !a.is_empty())
                    .map(str::to_string),
                url,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_service_says_where_to_set_one_up() {
        assert!(Service::default()
            .unavailable()
            .unwrap()
            .contains("Settings → Web search"));
    }

    #[test]
    fn results_without_an_http_address_are_dropped() {
        let v = serde_json::json!({"results": [
            {"url": "https://a.example/", "title": "A", "content": "a", "publishedDate": "2026-11-01"},
            {"url": "javascript:alert(1)", "title": "B"},
            {"title": "no url"}]});
        let h = hits(v.get("results"), "content", "publishedDate");
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].age.as_deref(), Some("2026-11-01"));
    }
}
