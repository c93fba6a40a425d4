//! Errors at the HTTP edge, rendered once in the client's API format (OpenAI's error shape).

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer in OpenAI's shape: `{"error":{"message","type","param","code"}}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: &'static str,
    pub retry_after_secs: Option<u64>,
    pub headers: HeaderMap,
    /// Each candidate's state when routing gave up (`error.candidates`).
    pub candidates: Option<serde_json::Value>,
    /// An upstream's own error `type` and `code`, relayed as they came when its verdict is
    /// passed to the client (`content_policy_violation` stays that, not a Baton code).
    pub relayed: Option<(String, Option<String>)>,
}

impl ApiError {
    pub fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            message: message.into(),
            kind,
            param: None,
            code,
            retry_after_secs: None,
            headers: HeaderMap::new(),
            candidates: None,
            relayed: None,
        }
    }

    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            message,
        );
        e.param = Some(param.into());
        e
    }

    /// 422 with the offending field in `param` (the UI places the message next to it).
    pub fn field(param: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_request_error",
            "invalid_field",
            message,
        );
        e.param = Some(param.into());
        e
    }

    /// 404 for an admin object (provider, key) that does not exist (any more).
    pub fn missing(code: &'static str, param: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(StatusCode::NOT_FOUND, "not_found_error", code, message);
        e.param = Some(param.into());
        e
    }

    /// 500 when Baton's own storage failed; logged in full, shown plainly.
    pub fn internal(code: &'static str, e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, code, "admin request failed inside Baton");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            code,
            format!("Baton could not complete this: {e}"),
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "Missing or wrong gateway key. Send it as `Authorization: Bearer <key>` or `x-api-key: <key>`; `baton serve` printed it on first start and keeps it in the data directory (gateway.key).",
        )
    }

    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(secs.max(1));
        self
    }

    pub fn with_headers(mut self, headers: HeaderMap) -> Self {
        self.headers.extend(headers);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (kind, code) = match &self.relayed {
            Some((t, c)) => (t.as_str(), c.as_deref().unwrap_or(self.code)),
            None => (self.kind, self.code),
        };
        let mut body = json!({"error": {
            "message": self.message,
            "type": kind,
            "param": self.param,
            "code": code,
        }});
        if let Some(c) = self.candidates {
            body["error"]["candidates"] = c;
        }
        let mut resp = (self.status, axum::Json(body)).into_response();
        resp.headers_mut().extend(self.headers);
        if let Some(s) = self.retry_after_secs {
            resp.headers_mut()
                .insert("retry-after", HeaderValue::from(s));
        }
        resp
    }
}
