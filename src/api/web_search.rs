//! `/admin/web-search`: the search service Baton runs hosted web search through on translated
//! routes (Settings → Web search), and a test search.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::json::{JsonBody, Shape};
use super::state::AppState;
use crate::gateway::Core;
use crate::search::{Backend, SearchSettings, SETTING};

/// `PUT /admin/web-search`'s body: the settings, and a key typed in (stored in the OS
/// credential store, never echoed).
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Body {
    backend: Backend,
    #[serde(default)]
    url: String,
    /// An environment variable's name holding the key.
    #[serde(default)]
    api_key_env: Option<String>,
    /// The key itself.
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    max_results: Option<u32>,
    /// The provider that searches, for `backend: "provider"`.
    #[serde(default)]
    provider: String,
}

impl Shape for Body {
    const EXPECTED: &'static str = r#"{"backend": "none"|"searxng"|"brave"|"provider", "url": "http://127.0.0.1:8888", "apiKey": "…" or "apiKeyEnv": "BRAVE_API_KEY", "provider": "claude" (for "provider"), "maxResults": 5}"#;
}

fn view(core: &Core) -> Value {
    let service = core.web_search_service();
    let s = &service.settings;
    let stored_key = s.api_key_env.starts_with(crate::secrets::LOOKUP_PREFIX);
    json!({
        "backend": s.backend,
        "url": s.url,
        // A typed key is never shown: only that there is one.
        "apiKeyEnv": if stored_key { "" } else { s.api_key_env.as_str() },
        "keyStored": stored_key,
        "keySet": service.key().is_some(),
        "maxResults": s.max_results,
        "provider": s.provider,
        "unavailable": crate::router::searcher::unavailable(&core.routing, &service),
        // Set by the config file, which wins at every start: edited there.
        "fromFile": core.file_config.web_search.is_some(),
    })
}

/// `GET /admin/web-search`.
pub async fn get(State(state): State<AppState>) -> Json<Value> {
    Json(view(&state.core))
}

/// `PUT /admin/web-search`: choose the service, its address and key.
pub async fn put(
    State(state): State<AppState>,
    JsonBody(b): JsonBody<Body>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if core.file_config.web_search.is_some() {
        return Err(ApiError::set_in_config_file(crate::i18n::msg(
            "Web search is set in the config file (`webSearch`), which wins at every start: change it there.",
            &[],
        )));
    }
    let old = core.stored_web_search();
    let mut s = SearchSettings {
        backend: b.backend,
        url: b.url.trim().to_string(),
        api_key_env: old.api_key_env.clone(),
        max_results: b.max_results.unwrap_or(old.max_results),
        provider: b.provider.trim().to_string(),
    };
    if let Some(env) = b.api_key_env.map(|e| e.trim().to_string()) {
        if !env.is_empty() && !env.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ApiError::field(
                "apiKeyEnv",
                "must be an environment variable's name (letters, digits and _)",
            ));
        }
        s.api_key_env = env;
    }
    let typed = b
        .api_key
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty());
    if typed.is_some() {
        // Checked before the key is stored: a refused change stores nothing.
        s.api_key_env = format!("{}pending", crate::secrets::LOOKUP_PREFIX);
    }
    check(core, &s)?;
    if let Some(k) = typed {
        let id = core
            .secrets
            .put(&k)
            .map_err(|e| ApiError::internal("secrets", e))?;
        s.api_key_env = format!("{}{id}", crate::secrets::LOOKUP_PREFIX);
    }
    let value = serde_json::to_value(&s).map_err(|e| ApiError::internal("settings", e))?;
    core.store
        .set_setting(SETTING, &value)
        .map_err(|e| ApiError::internal("settings", e))?;
    // A replaced typed key is gone from the credential store too.
    if let Some(id) = old
        .api_key_env
        .strip_prefix(crate::secrets::LOOKUP_PREFIX)
        .filter(|_| old.api_key_env != s.api_key_env)
    {
        let _ = core.secrets.delete(&[id.to_string()]);
    }
    core.reload_blocking()
        .await
        .map_err(|e| ApiError::internal("reload", e))?;
    let mut answer = view(core);
    // Saved as asked (the service may be started later), but a service that does not answer
    // now is said at once, not at the first search that fails.
    if let Some(why) = unreachable(core, &s).await {
        answer["warning"] = json!(crate::i18n::msg(
            "Saved, but Baton could not reach {url}: {why}. Searches fail until it answers.",
            &[("url", &s.url), ("why", &why)],
        ));
    }
    Ok(Json(answer))
}

/// What in `s` cannot work, on the field to fix.
fn check(core: &Core, s: &SearchSettings) -> Result<(), ApiError> {
    if let Some(p) = s.problem() {
        let field = match s.backend {
            _ if p.contains("maxResults") => "maxResults",
            Backend::Brave if p.contains("key") => "apiKey",
            Backend::Provider => "provider",
            _ => "url",
        };
        return Err(ApiError::field(field, p));
    }
    if s.backend == Backend::Provider {
        let service = crate::search::Service::new(s.clone(), None);
        if let Some(why) = crate::router::searcher::unavailable(&core.routing, &service) {
            return Err(ApiError::field("provider", why));
        }
    }
    Ok(())
}

/// Why the service at a SearXNG address does not answer (within three seconds), if it does
/// not. It is asked for a JSON search without a query, which searches nothing: SearXNG answers
/// 400 ("No query") when it serves JSON, 403 when `json` is not among its `search.formats`.
async fn unreachable(core: &Core, s: &SearchSettings) -> Option<String> {
    if s.backend != Backend::Searxng {
        return None;
    }
    // The client the searches themselves go through.
    let client = core.routing.http.get(3_000).ok()?;
    let url = format!("{}/search?format=json", s.url.trim_end_matches('/'));
    match client
        .get(&url)
        .timeout(std::time::Duration::from_secs(3))
        .send()
        .await
    {
        Err(e) => Some(crate::providers::outbound::describe(&e)),
        Ok(r) if r.status().is_success() || r.status().as_u16() == 400 => None,
        Ok(r) if r.status().as_u16() == 403 => Some(
            "it refuses JSON searches (add `json` to `search.formats` in its settings.yml)".into(),
        ),
        Ok(r) => Some(format!(
            "it answered HTTP {} where SearXNG's search page should be",
            r.status().as_u16()
        )),
    }
}

/// `POST /admin/web-search/test {"query"}`: one search through the service as saved, with what
/// it found or why it found nothing.
pub async fn test(
    State(state): State<AppState>,
    JsonBody(q): JsonBody<TestBody>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let query = q.query.trim().to_string();
    if query.is_empty() {
        return Err(ApiError::field(
            "query",
            crate::i18n::msg("give a query to search for", &[]),
        ));
    }
    let service = core.routing.snapshot.load().web_search.clone();
    let run = crate::router::searcher::search(
        &core.routing,
        &service,
        "test".into(),
        query,
        &crate::canonical::search::WebSearch::default(),
        "web-search-test",
    )
    .await;
    Ok(Json(json!({
        "query": run.query,
        "error": run.error.as_ref().map(|e| json!({"code": e.code, "message": e.message})),
        "results": run.hits.iter().map(|h| json!({"url": h.url, "title": h.title, "snippet": h.snippet, "age": h.age})).collect::<Vec<_>>(),
    })))
}

/// `POST /admin/web-search/test`'s body.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct TestBody {
    query: String,
}

impl Shape for TestBody {
    const PARAM: &'static str = "query";
    const EXPECTED: &'static str = r#"{"query": "what to search for"}"#;
}
