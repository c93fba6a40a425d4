//! Hosted web search in canonical form (a leaf): the tool a client asked for, with its limits,
//! and what one search found. How each API spells them, and the function the model sees
//! instead, are `search.rs`'s.

/// The hosted search a client asked for, with its limits.
#[derive(Debug, Clone, PartialEq)]
pub struct WebSearch {
    /// Live access to the web. Codex's default `web_search = "cached"` declares the tool with
    /// `external_web_access: false` (OpenAI's cached index only): the user has not allowed live
    /// searches, so Baton runs none for it.
    pub live: bool,
    /// Searches one answer may run (Anthropic's `max_uses`).
    pub max_uses: Option<u32>,
    pub allowed_domains: Vec<String>,
    pub blocked_domains: Vec<String>,
}

/// What one search found, or why it found nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRun {
    /// Baton's id for it; each API's clients see it under their own prefix (`srvtoolu_…`,
    /// `ws_…`).
    pub id: String,
    pub query: String,
    pub hits: Vec<SearchHit>,
    pub error: Option<SearchError>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub url: String,
    pub title: String,
    /// The page's text the service quoted.
    pub snippet: String,
    /// How old the page is, as the service said (`"2 days ago"`, a date).
    pub age: Option<String>,
}

/// A search that could not run: Anthropic's `error_code` and a sentence for the model and the
/// log.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchError {
    /// `unavailable`, `max_uses_exceeded`, `too_many_requests`, `query_too_long` or
    /// `invalid_tool_input` (the codes Anthropic's `web_search_tool_result_error` has).
    pub code: &'static str,
    pub message: String,
}

impl Default for WebSearch {
    fn default() -> Self {
        Self {
            live: true,
            max_uses: None,
            allowed_domains: Vec::new(),
            blocked_domains: Vec::new(),
        }
    }
}
