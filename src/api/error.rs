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
    /// Machine-readable details (`error.details`), e.g. Anthropic's `error_code` that tells its
    /// SDKs to replay a conversation in full.
    pub details: Option<serde_json::Value>,
    /// When every candidate is out for long (a spent window, a daily quota): the instant
    /// (Unix seconds) the soonest is back. Each API's error then takes the form its clients
    /// show as a usage limit with its reset time, rather than a rate limit to retry.
    pub limit_reset: Option<i64>,
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
            details: None,
            limit_reset: None,
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
    fn into_response(mut self) -> Response {
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
        if let Some(c) = self.candidates.take() {
            body["error"]["candidates"] = c;
        }
        if let Some(d) = self.details.take() {
            body["error"]["details"] = d;
        }
        self.answer(body)
    }
}

impl ApiError {
    /// The error answered with `body` (an API's own error shape): its status, its headers
    /// and its `Retry-After`, whatever the shape.
    pub fn answer(self, body: serde_json::Value) -> Response {
        let mut resp = (self.status, axum::Json(body)).into_response();
        resp.headers_mut().extend(self.headers);
        if let Some(s) = self.retry_after_secs {
            resp.headers_mut()
                .insert("retry-after", HeaderValue::from(s));
        }
        resp
    }
}

/// A serde error message in words a user acts on: "invalid value: integer `-5`, expected u32"
/// becomes "must be a whole number of 0 or more (got -5)"; messages it does not know stay.
pub fn plain_serde(msg: &str) -> String {
    let expected = msg.rsplit_once(", expected ").map(|(_, e)| e.trim());
    let got = msg
        .split_once('`')
        .and_then(|(_, r)| r.split_once('`'))
        .map(|(g, _)| g);
    let want = match expected {
        Some("u8" | "u16" | "u32" | "u64" | "usize") => "must be a whole number of 0 or more",
        Some("i32" | "i64" | "isize") => "must be a whole number",
        Some("f32" | "f64") => "must be a number",
        Some("a boolean") => "must be true or false",
        Some("a string") => "must be text (in quotes)",
        Some(e) if e.starts_with("a sequence") => "must be a list",
        Some(e) if e.starts_with("struct ") || e.starts_with("a map") => "must be an object",
        _ => return msg.to_string(),
    };
    let got = got.map(str::to_string).or_else(|| {
        msg.strip_prefix("invalid type: ")
            .and_then(|r| r.split_once(", expected"))
            .map(|(g, _)| g.to_string())
    });
    match got {
        Some(g) => format!("{want} (got {g})"),
        None => want.to_string(),
    }
}

#[cfg(test)]
mod plain_tests {
    use super::plain_serde;

    #[test]
    fn serde_messages_say_what_to_send() {
        assert_eq!(
            plain_serde("invalid value: integer `-5`, expected u32"),
            "must be a whole number of 0 or more (got -5)"
        );
        assert_eq!(
            plain_serde("invalid type: string \"x\", expected u64"),
            "must be a whole number of 0 or more (got string \"x\")"
        );
        assert_eq!(
            plain_serde("invalid type: integer `1`, expected a boolean"),
            "must be true or false (got 1)"
        );
        assert_eq!(plain_serde("unknown field `foo`"), "unknown field `foo`");
    }
}
