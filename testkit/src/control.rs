//! Test control endpoints of the fake: queue behaviours by name, read what it received.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::{behavior_from_name, Shared};

/// Test control: `POST /_script` with a JSON list of mode names queues those behaviours.
pub(crate) async fn script(
    State(s): State<Arc<Shared>>,
    axum::Json(modes): axum::Json<Vec<String>>,
) -> Response {
    let mut parsed = Vec::new();
    for m in &modes {
        match behavior_from_name(m) {
            Some(b) => parsed.push(b),
            None => return (StatusCode::BAD_REQUEST, format!("unknown mode {m}")).into_response(),
        }
    }
    s.script.lock().unwrap().extend(parsed);
    StatusCode::NO_CONTENT.into_response()
}

/// Test control: `GET /_stats` — how many requests, the last body, the searches run; with
/// `?all=1` every body received, in order (a session's turns, one by one), and each one's
/// headers (`headers`, names lower-cased; to compare what a client and Baton send).
pub(crate) async fn stats(
    State(s): State<Arc<Shared>>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Response {
    let received = s.received.lock().unwrap();
    let last = received
        .last()
        .map(|r| r.body.clone())
        .unwrap_or(Value::Null);
    let searches = s.searches.lock().unwrap().clone();
    let azure = s.azure_calls.lock().unwrap().clone();
    let bedrock = s.bedrock_calls.lock().unwrap().clone();
    let mut out = json!({"hits": received.len(), "last": last, "searches": searches,
        "azureCalls": azure, "bedrockCalls": bedrock});
    if q.contains_key("all") {
        out["all"] = received.iter().map(|r| r.body.clone()).collect();
        out["headers"] = received
            .iter()
            .map(|r| {
                r.headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or(""))))
                    .collect::<serde_json::Map<String, Value>>()
            })
            .map(Value::Object)
            .collect();
    }
    axum::Json(out).into_response()
}
