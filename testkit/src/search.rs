//! Fake search services, as strict as the real ones about what they need: SearXNG's JSON API
//! (`GET /search?q=…&format=json`; 403 for any other format, as an instance without `json` in
//! its `search.formats` answers) and Brave's Search API (`GET /res/v1/web/search?q=…`, its key in
//! `X-Subscription-Token`: 401 without the right one, 422 without a query, in Brave's error
//! shape). Each answers three results derived from the query, and records the query.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::Shared;

/// The key the fake Brave takes.
pub const BRAVE_KEY: &str = "BSA-fake-subscription-key";

fn slug(q: &str) -> String {
    q.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// The three pages every query finds: (url, title, excerpt, age).
fn pages(q: &str) -> Vec<(String, String, String, Option<&'static str>)> {
    let s = slug(q);
    vec![
        (
            format!("https://docs.example.org/{s}"),
            format!("{q} — Example Docs"),
            format!("Everything about {q}, updated for 2026."),
            Some("2026-11-30T00:00:00"),
        ),
        (
            format!("https://news.example.com/{s}"),
            format!("{q} in the news"),
            format!("The latest on {q}."),
            None,
        ),
        (
            format!("https://mirror.example.net/{s}"),
            format!("Mirror: {q}"),
            format!("A copy of a page about {q}."),
            Some("3 days ago"),
        ),
    ]
}

fn record(s: &Shared, q: &str) {
    s.searches.lock().unwrap().push(q.to_string());
}

/// SearXNG's `/search`.
pub(crate) async fn searxng(
    State(s): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if params.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "403 Forbidden").into_response();
    }
    let Some(q) = params.get("q").filter(|q| !q.trim().is_empty()) else {
        return (StatusCode::BAD_REQUEST, "400 Bad Request").into_response();
    };
    record(&s, q);
    let results: Vec<Value> = pages(q)
        .into_iter()
        .map(|(url, title, content, age)| {
            json!({"url": url, "title": title, "content": content, "publishedDate": age,
                "engine": "fake", "engines": ["fake"], "score": 1.0, "category": "general"})
        })
        .collect();
    axum::Json(json!({"query": q, "number_of_results": results.len(), "results": results,
        "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}))
    .into_response()
}

fn brave_error(status: StatusCode, code: &str, detail: &str) -> Response {
    (
        status,
        axum::Json(
            json!({"type": "ErrorResponse", "error": {"id": "fake", "status": status.as_u16(),
            "code": code, "detail": detail}, "time": 1}),
        ),
    )
        .into_response()
}

/// Brave's `/res/v1/web/search`.
pub(crate) async fn brave(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
        != Some(BRAVE_KEY)
    {
        return brave_error(
            StatusCode::UNAUTHORIZED,
            "SUBSCRIPTION_TOKEN_INVALID",
            "The provided subscription token is invalid.",
        );
    }
    let Some(q) = params.get("q").filter(|q| !q.trim().is_empty()) else {
        return brave_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION",
            "Unable to validate request parameter(s)",
        );
    };
    if let Some(c) = params.get("count") {
        if !c.parse::<u32>().is_ok_and(|n| (1..=20).contains(&n)) {
            return brave_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "VALIDATION",
                "Unable to validate request parameter(s)",
            );
        }
    }
    record(&s, q);
    let results: Vec<Value> = pages(q)
        .into_iter()
        .map(|(url, title, description, age)| {
            json!({"type": "search_result", "url": url, "title": title, "description": description,
                "age": age, "language": "en", "family_friendly": true})
        })
        .collect();
    axum::Json(json!({"type": "search", "query": {"original": q}, "web": {"type": "search", "results": results}}))
        .into_response()
}

/// The query a request asks the API's own web search for (Anthropic's `web_search_*` server
/// tool, the Responses `web_search` tool, Gemini's `googleSearch`), when it declares one and the
/// last turn is the user's: Baton's "Search the web for: …" prompt's query, else the user's words.
pub(crate) fn native_query(s: &Shared, body: &Value) -> Option<String> {
    let tools = body.get("tools")?.as_array()?;
    let declared = tools.iter().any(|t| {
        t.get("type")
            .and_then(Value::as_str)
            .is_some_and(|k| k.starts_with("web_search"))
            || t.get("googleSearch").is_some()
            || t.get("google_search").is_some()
    });
    if !declared {
        return None;
    }
    let words = crate::model::last_user_words(body)?;
    let q = words
        .strip_prefix("Search the web for: ")
        .map(|r| r.lines().next().unwrap_or_default().to_string())
        .unwrap_or(words);
    record(s, &q);
    Some(q)
}

/// Anthropic's answer after its server tool searched: the call, the results (opaque
/// `encrypted_content`), a text citing the first page.
pub(crate) fn anthropic_answer(model: &str, q: &str) -> Value {
    let pages = pages(q);
    let results: Vec<Value> = pages
        .iter()
        .map(|(url, title, _, age)| {
            json!({"type": "web_search_result", "url": url, "title": title,
                "encrypted_content": "EqgfCioIARgBIiQ3YTQ0OWZmYi1mZTcxLTRkMzktOWU2Yy0y", "page_age": age})
        })
        .collect();
    let (url, title, excerpt, _) = &pages[0];
    json!({"id": "msg_fake_search", "type": "message", "role": "assistant", "model": model,
        "content": [
            {"type": "server_tool_use", "id": "srvtoolu_fake1", "name": "web_search", "input": {"query": q}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_fake1", "content": results},
            {"type": "text", "text": excerpt, "citations": [{"type": "web_search_result_location",
                "url": url, "title": title, "encrypted_index": "Eo8BCioIAhgB", "cited_text": excerpt}]}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 20, "output_tokens": 10, "server_tool_use": {"web_search_requests": 1}}})
}

/// The Responses API's output after its `web_search` tool searched: the call with its sources,
/// then a message whose text cites the first page (`url_citation`).
pub(crate) fn responses_output(q: &str) -> Vec<Value> {
    let pages = pages(q);
    let sources: Vec<Value> = pages
        .iter()
        .map(|(u, ..)| json!({"type": "url", "url": u}))
        .collect();
    let (url, title, excerpt, _) = &pages[0];
    let text = format!("{excerpt} More in the news.");
    vec![
        json!({"type": "web_search_call", "id": "ws_fake1", "status": "completed",
            "action": {"type": "search", "query": q, "sources": sources}}),
        json!({"type": "message", "id": "msg_fake_search", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "logprobs": [], "annotations": [
                {"type": "url_citation", "url": url, "title": title, "start_index": 0,
                    "end_index": excerpt.chars().count()}]}]}),
    ]
}

/// Gemini's candidate after grounding with Google Search: the text, and `groundingMetadata`
/// with the pages and the passage grounded in the first.
pub(crate) fn gemini_candidate(q: &str) -> Value {
    let pages = pages(q);
    let chunks: Vec<Value> = pages
        .iter()
        .map(|(u, t, ..)| json!({"web": {"uri": u, "title": t}}))
        .collect();
    let excerpt = &pages[0].2;
    json!({"content": {"role": "model", "parts": [{"text": excerpt}]}, "finishReason": "STOP", "index": 0,
        "groundingMetadata": {"webSearchQueries": [q], "groundingChunks": chunks,
            "groundingSupports": [{"segment": {"startIndex": 0, "endIndex": excerpt.len(), "text": excerpt},
                "groundingChunkIndices": [0]}]}})
}
