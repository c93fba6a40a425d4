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

    /// 409 for a change to settings the config file owns (it wins at every start): `message`
    /// says which section and to change it there.
    pub fn set_in_config_file(message: String) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "set_in_config_file",
            message,
        )
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

/// A serde error message in words a user acts on, in the language the admin request asked
/// for: "invalid value: integer `-5`, expected u32 at line 1 column 9" becomes "must be a whole
/// number of 0 or more (got -5)", "unknown variant `x`, expected one of `a`, `b`" becomes "`x`
/// is not one of: `a`, `b`"; messages it does not know stay as they are, without the position
/// in a body the user never wrote by hand.
pub fn plain_serde(raw: &str) -> String {
    use crate::i18n::msg;
    let text = strip_position(raw);
    let quoted = |m: &str| {
        m.split_once('`')
            .and_then(|(_, r)| r.split_once('`'))
            .map(|(g, _)| g.to_string())
    };
    if let Some(rest) = text.strip_prefix("unknown variant ") {
        let list = rest.split_once("expected one of ").map(|(_, l)| l.trim());
        return msg(
            "`{value}` is not one of: {choices}",
            &[
                ("value", &quoted(rest).unwrap_or_default()),
                ("choices", list.unwrap_or_default()),
            ],
        );
    }
    if let Some(rest) = text.strip_prefix("unknown field ") {
        let known = rest.split_once("expected one of ").map(|(_, l)| l.trim());
        let name = quoted(rest).unwrap_or_default();
        return match known {
            Some(k) => msg(
                "`{name}` is not a field here (it takes {fields})",
                &[("name", &name), ("fields", k)],
            ),
            None => msg("`{name}` is not a field here", &[("name", &name)]),
        };
    }
    if let Some(rest) = text.strip_prefix("missing field ") {
        return msg(
            "`{name}` is missing",
            &[("name", &quoted(rest).unwrap_or_default())],
        );
    }
    let expected = text.rsplit_once(", expected ").map(|(_, e)| e.trim());
    let want = match expected {
        Some("u8" | "u16" | "u32" | "u64" | "usize")
            if text.starts_with("invalid value: integer") =>
        {
            msg(
                "must be a whole number of 0 or more, and not that large",
                &[],
            )
        }
        Some("u8" | "u16" | "u32" | "u64" | "usize") => {
            msg("must be a whole number of 0 or more", &[])
        }
        Some("i32" | "i64" | "isize") => msg("must be a whole number", &[]),
        Some("f32" | "f64") => msg("must be a number", &[]),
        Some("a boolean") => msg("must be true or false", &[]),
        Some("a string") => msg("must be text (in quotes)", &[]),
        Some(e) if e.starts_with("a sequence") => msg("must be a list", &[]),
        Some(e) if e.starts_with("struct ") || e.starts_with("a map") => {
            msg("must be an object", &[])
        }
        _ => return text,
    };
    // A negative number is below 0, not "too large".
    let want = match quoted(&text) {
        Some(g) if g.starts_with('-') => msg("must be a whole number of 0 or more", &[]),
        _ => want,
    };
    let got = quoted(&text).or_else(|| {
        text.strip_prefix("invalid type: ")
            .and_then(|r| r.split_once(", expected"))
            .map(|(g, _)| g.strip_prefix("string ").unwrap_or(g).to_string())
    });
    match got {
        Some(g) => msg("{what} (got {value})", &[("what", &want), ("value", &g)]),
        None => want,
    }
}

/// A message without serde_json's " at line 1 column 99".
fn strip_position(msg: &str) -> String {
    match msg.rsplit_once(" at line ") {
        Some((head, tail))
            if tail
                .split_once(" column ")
                .is_some_and(|(l, c)| l.parse::<u64>().is_ok() && c.parse::<u64>().is_ok()) =>
        {
            head.to_string()
        }
        _ => msg.to_string(),
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
            "must be a whole number of 0 or more (got \"x\")"
        );
        assert_eq!(
            plain_serde("invalid type: integer `1`, expected a boolean"),
            "must be true or false (got 1)"
        );
        assert_eq!(
            plain_serde("unknown field `foo`"),
            "`foo` is not a field here"
        );
        assert_eq!(
            plain_serde("invalid type: floating point `1.5`, expected u32 at line 1 column 99"),
            "must be a whole number of 0 or more (got 1.5)"
        );
        assert_eq!(
            plain_serde("invalid value: integer `99999999999`, expected u32 at line 1 column 7"),
            "must be a whole number of 0 or more, and not that large (got 99999999999)"
        );
        assert_eq!(
            plain_serde("invalid value: integer `-3`, expected u32"),
            "must be a whole number of 0 or more (got -3)"
        );
        assert_eq!(
            plain_serde("unknown variant `nope`, expected one of `a`, `b` at line 1 column 24"),
            "`nope` is not one of: `a`, `b`"
        );
        assert_eq!(plain_serde("missing field `id`"), "`id` is missing");
        assert_eq!(
            plain_serde("something else at line 3"),
            "something else at line 3"
        );
    }
}
