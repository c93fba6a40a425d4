//! The fake as a company's forward proxy that asks for a login: with `require_proxy_login`,
//! every request without `Proxy-Authorization: Basic base64(USER:PASSWORD)` gets what such a
//! proxy answers, `407 Proxy Authentication Required` with its `Proxy-Authenticate` challenge.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use crate::{FakeUpstream, Shared};

impl FakeUpstream {
    /// Asks every request for this proxy login (`USER:PASSWORD`).
    pub fn require_proxy_login(&self, login: &str) {
        *self.shared.proxy_login.lock().unwrap() = Some(login.to_string());
    }
}

pub(crate) async fn gate(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let wanted = s.proxy_login.lock().unwrap().clone();
    let Some(login) = wanted else {
        return next.run(req).await;
    };
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(login)
    );
    let given = req
        .headers()
        .get("proxy-authorization")
        .and_then(|v| v.to_str().ok());
    if given == Some(expected.as_str()) {
        return next.run(req).await;
    }
    let mut r = (
        StatusCode::PROXY_AUTHENTICATION_REQUIRED,
        "Proxy Authentication Required\n",
    )
        .into_response();
    r.headers_mut().insert(
        "proxy-authenticate",
        HeaderValue::from_static("Basic realm=\"egress\""),
    );
    r
}
