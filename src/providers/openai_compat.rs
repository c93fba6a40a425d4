//! The `openai-compatible` upstream kind: `POST {baseUrl}/chat/completions`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::{ApiKey, ProviderEntry};

/// The client's own body with only `model` replaced, serialised without copying the map.
struct WithModel<'a> {
    body: &'a Map<String, Value>,
    model: &'a str,
}

impl Serialize for WithModel<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.body.len()))?;
        map.serialize_entry("model", self.model)?;
        for (k, v) in self.body {
            if k != "model" {
                map.serialize_entry(k, v)?;
            }
        }
        map.end()
    }
}

/// Body for the fast path: the OpenAI request exactly as the client sent it, model rewritten.
pub fn passthrough_body(body: &Map<String, Value>, model: &str) -> Vec<u8> {
    serde_json::to_vec(&WithModel { body, model }).unwrap_or_default()
}

/// Builds the upstream request (headers, auth, body).
pub fn build(
    client: &reqwest::Client,
    url: reqwest::Url,
    entry: &ProviderEntry,
    key: Option<&ApiKey>,
    body: Vec<u8>,
    stream: bool,
    request_id: &str,
) -> reqwest::RequestBuilder {
    let mut rb = client
        .post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::ACCEPT,
            if stream {
                "text/event-stream"
            } else {
                "application/json"
            },
        )
        .header("x-request-id", request_id);
    if let Some(k) = key {
        rb = rb.bearer_auth(k.secret.expose());
    }
    for (name, value) in &entry.config.headers {
        rb = rb.header(name.as_str(), value.as_str());
    }
    rb.body(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn passthrough_keeps_every_field() {
        let body = json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.2, "x_unknown": {"a": [1, 2]}, "seed": 7});
        let Value::Object(map) = body else {
            unreachable!()
        };
        let out: Value = serde_json::from_slice(&passthrough_body(&map, "llama")).expect("json");
        assert_eq!(out["model"], "llama");
        assert_eq!(out["x_unknown"], json!({"a": [1, 2]}));
        assert_eq!(out["seed"], 7);
        assert_eq!(out["temperature"], 0.2);
        assert_eq!(out.as_object().map(|m| m.len()), Some(5));
    }
}
