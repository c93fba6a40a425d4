//! The admin API's JSON bodies: one extractor reads and parses a handler's body type, and a
//! body that is not JSON or not of that shape is a 400 in OpenAI's error shape that names the
//! field and says what to send — instead of each handler parsing bytes by hand.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use super::error::{plain_serde, ApiError};

/// What a handler's body looks like, for the error a malformed one gets.
pub trait Shape {
    /// The field blamed when the body cannot be read.
    const PARAM: &'static str = "body";
    /// What to send, as the error says it: `{"paused": true}`.
    const EXPECTED: &'static str;
}

/// A JSON request body of `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Shape> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::invalid("body", e.body_text()))?;
        parse(&bytes).map(JsonBody)
    }
}

/// Parses `bytes` as `T`, with the error a client can act on.
pub fn parse<T: DeserializeOwned + Shape>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let detail = if e.is_syntax() || e.is_eof() {
            format!("the body is not valid JSON ({e})")
        } else {
            // serde_json says where ("… at line 1 column 16"); the words are what help.
            let msg = e.to_string();
            let words = msg
                .rsplit_once(" at line ")
                .map_or(msg.as_str(), |(w, _)| w);
            plain_serde(words)
        };
        ApiError::invalid(T::PARAM, format!("Send {}: {detail}", T::EXPECTED))
    })
}

/// A query string of `T`: a malformed one is a 400 in the API's error shape that says what is
/// wrong (axum's own rejection is plain text).
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| ApiQuery(v))
            .map_err(|e| {
                let text = e.body_text();
                let why = text
                    .strip_prefix("Failed to deserialize query string: ")
                    .unwrap_or(&text);
                ApiError::invalid(
                    "query",
                    format!("The query string is not valid: {}", plain_serde(why)),
                )
            })
    }
}

/// Declares a JSON object body whose fields a handler reads itself (patches, settings), with
/// what to send.
macro_rules! object_body {
    ($(#[$doc:meta])* $name:ident, $expected:literal) => {
        $(#[$doc])*
        #[derive(serde::Deserialize, Debug)]
        #[serde(transparent)]
        pub struct $name(pub serde_json::Map<String, serde_json::Value>);

        impl $crate::api::json::Shape for $name {
            const EXPECTED: &'static str = $expected;
        }
    };
}
pub(crate) use object_body;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, Value};

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Paused {
        #[allow(dead_code)]
        paused: bool,
    }

    impl Shape for Paused {
        const PARAM: &'static str = "paused";
        const EXPECTED: &'static str = r#"{"paused": true} or {"paused": false}"#;
    }

    object_body!(Patch, "a JSON object");

    #[test]
    fn a_malformed_body_says_what_to_send() {
        let e = parse::<Paused>(b"{\"paused\": ").unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.param.as_deref(), Some("paused"));
        assert!(
            e.message.starts_with(
                r#"Send {"paused": true} or {"paused": false}: the body is not valid JSON"#
            ),
            "{}",
            e.message
        );
        let e = parse::<Paused>(br#"{"paused": "yes"}"#).unwrap_err();
        assert!(e.message.contains("must be true or false"), "{}", e.message);
        assert!(parse::<Paused>(br#"{"paused": true}"#).is_ok());
        let e = parse::<Patch>(b"[1]").unwrap_err();
        assert!(
            e.message.starts_with("Send a JSON object: "),
            "{}",
            e.message
        );
        let Patch(m): Patch = parse(br#"{"a": 1}"#).unwrap();
        assert_eq!(m.get("a"), Some(&Value::from(1)));
        let _: Map<String, Value> = m;
    }
}
