//! The `openai-compatible` upstream kind: `POST {baseUrl}/chat/completions`.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::{ApiKey, ProviderEntry};

/// The client's own body with only `model` replaced, serialised without copying the map. A
/// stream always asks for usage (`stream_options.include_usage`): tokens, budgets and cost
/// must not depend on whether the client asked; the extra chunk is not relayed to a client
/// that did not.
struct WithModel<'a> {
    body: &'a Map<String, Value>,
    model: &'a str,
    max_tokens_cap: Option<u64>,
}

impl Serialize for WithModel<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let stream = self.body.get("stream").and_then(Value::as_bool) == Some(true);
        let mut map = s.serialize_map(Some(self.body.len() + 1))?;
        map.serialize_entry("model", self.model)?;
        if stream {
            let mut opts = match self.body.get("stream_options") {
                Some(Value::Object(o)) => o.clone(),
                _ => Map::new(),
            };
            opts.insert("include_usage".into(), Value::Bool(true));
            map.serialize_entry("stream_options", &opts)?;
        }
        for (k, v) in self.body {
            if k == "model" || stream && k == "stream_options" {
                continue;
            }
            let capped = matches!(k.as_str(), "max_tokens" | "max_completion_tokens")
                .then(|| self.max_tokens_cap.zip(v.as_u64()))
                .flatten()
                .filter(|(cap, asked)| asked > cap);
            match capped {
                Some((cap, _)) => map.serialize_entry(k, &cap)?,
                None => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

/// Body for the fast path: the OpenAI request exactly as the client sent it, model rewritten.
pub fn passthrough_body(
    body: &Map<String, Value>,
    model: &str,
    max_tokens_cap: Option<u64>,
) -> Vec<u8> {
    serde_json::to_vec(&WithModel {
        body,
        model,
        max_tokens_cap,
    })
    .unwrap_or_default()
}

/// A JSON POST that accepts an event stream or a JSON answer, with Baton's request id: the
/// common part of every chat request to an HTTP upstream.
pub fn json_post(
    client: &reqwest::Client,
    url: reqwest::Url,
    stream: bool,
    request_id: &str,
) -> reqwest::RequestBuilder {
    client
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
        .header("x-request-id", request_id)
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
    let mut rb = json_post(client, url, stream, request_id);
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
        let out: Value =
            serde_json::from_slice(&passthrough_body(&map, "llama", None)).expect("json");
        assert_eq!(out["model"], "llama");
        assert_eq!(out["x_unknown"], json!({"a": [1, 2]}));
        assert_eq!(out["seed"], 7);
        assert_eq!(out["temperature"], 0.2);
        assert_eq!(out.as_object().map(|m| m.len()), Some(5));
    }

    #[test]
    fn max_tokens_is_capped_only_when_larger() {
        let Value::Object(map) = json!({"model": "x", "max_tokens": 64000, "messages": []}) else {
            unreachable!()
        };
        let out: Value =
            serde_json::from_slice(&passthrough_body(&map, "m", Some(8192))).expect("json");
        assert_eq!(out["max_tokens"], 8192);
        let out: Value =
            serde_json::from_slice(&passthrough_body(&map, "m", Some(100_000))).expect("json");
        assert_eq!(out["max_tokens"], 64000);
    }
}
