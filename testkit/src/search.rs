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
