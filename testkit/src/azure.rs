//! Azure OpenAI's routes, as strict as the service is before a request reaches its model: the
//! key in `api-key` (or a Microsoft Entra ID token as `Authorization: Bearer`), an
//! `api-version` on the deployments form, and the deployment — in the path, or the v1 API's
//! `model` — one of the resource's (`FakeUpstream::azure_deployments`). Each refusal is Azure's
//! own status and text; a request that passes is answered by the Chat Completions fake.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::{FakeUpstream, Shared};

impl FakeUpstream {
    /// The deployments its Azure OpenAI routes serve (`/openai/…`); none until set.
    pub fn azure_deployments(&self, names: &[&str]) {
        *self.shared.azure.lock().unwrap() = names.iter().map(|n| n.to_string()).collect();
    }

    /// The path and query of each request its Azure OpenAI routes took, in order.
    pub fn azure_calls(&self) -> Vec<String> {
        self.shared.azure_calls.lock().unwrap().clone()
    }

    /// The endpoint an `azure-openai` provider's `baseUrl` names (its `/openai/v1` for the v1
    /// API).
    pub fn azure_endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Shared {
    fn azure_deployments(&self) -> Vec<String> {
        self.azure.lock().unwrap().clone()
    }
}

fn azure_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"code": code, "message": message}})),
    )
        .into_response()
}

/// Azure's 401 for a request with no key, or one that is not the resource's.
fn unauthorized() -> Response {
    azure_error(
        StatusCode::UNAUTHORIZED,
        "401",
        "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.",
    )
}

fn deployment_not_found() -> Response {
    azure_error(
        StatusCode::NOT_FOUND,
        "DeploymentNotFound",
        "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.",
    )
}

/// A key in `api-key`, or a bearer token; never both missing.
fn authenticated(headers: &HeaderMap) -> bool {
    let key = headers
        .get("api-key")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !v.trim().is_empty());
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer ") && v.len() > 7);
    key || bearer
}

/// `POST /openai/deployments/{deployment}/chat/completions?api-version=…`.
pub(crate) async fn deployment_chat(
    State(s): State<Arc<Shared>>,
    Path(deployment): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    s.azure_calls.lock().unwrap().push(format!(
        "/openai/deployments/{deployment}/chat/completions?{}",
        query.as_deref().unwrap_or("")
    ));
    if !authenticated(&headers) {
        return unauthorized();
    }
    let versioned = query.as_deref().unwrap_or("").split('&').any(|p| {
        p.strip_prefix("api-version=")
            .is_some_and(|v| !v.is_empty())
    });
    if !versioned {
        return azure_error(StatusCode::NOT_FOUND, "404", "Resource not found");
    }
    if !s.azure_deployments().contains(&deployment) {
        return deployment_not_found();
    }
    crate::chat(State(s), headers, body).await
}

/// `POST /openai/v1/chat/completions`: the deployment is the body's `model`.
pub(crate) async fn v1_chat(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    s.azure_calls
        .lock()
        .unwrap()
        .push("/openai/v1/chat/completions".into());
    if !authenticated(&headers) {
        return unauthorized();
    }
    let model = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("model").and_then(Value::as_str).map(str::to_string));
    if !model.is_some_and(|m| s.azure_deployments().contains(&m)) {
        return deployment_not_found();
    }
    crate::chat(State(s), headers, body).await
}

/// `GET /openai/v1/models`: the resource's deployments.
pub(crate) async fn v1_models(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if !authenticated(&headers) {
        return unauthorized();
    }
    s.lists.lock().unwrap().push(headers);
    let data: Vec<Value> = s
        .azure_deployments()
        .iter()
        .map(
            |d| json!({"id": d, "object": "model", "created": 1_720_000_000, "owned_by": "system"}),
        )
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}
