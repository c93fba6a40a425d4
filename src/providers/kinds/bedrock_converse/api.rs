//! The Converse API's bytes (`canonical::converse` does the translation): the body built from the
//! canonical request (tool call ids made to fit Bedrock's pattern), a complete
//! `ConverseResponse` read, and ConverseStream's typed events decoded. Its errors come as AWS's
//! (`x-amzn-ErrorType`, classified by `limits::classify`); one met mid-stream arrives as the
//! `error` event `providers::eventstream` makes of an exception message.

use serde_json::{Map, Value};

use crate::canonical::converse::{self, StreamDecoder};
use crate::canonical::ids::{self, IdRule};
use crate::canonical::{ChatRequest, ChatResponse, Wire};
use crate::limits::Classified;
use crate::providers::codec::{parse, Complete, Decoded, NotJson};
use crate::providers::kinds::contract::{Decode, Outbound, UpstreamKind};
use crate::providers::{ApiKey, ModelInfo, ProviderEntry};

/// AWS Bedrock's Converse API.
pub struct Converse;

/// The Converse body for `req`: Bedrock takes tool call ids of `[a-zA-Z0-9_.:-]`, which the
/// Messages API's rule (letters, digits, `_`, `-`) fits inside.
pub fn body(req: &ChatRequest, max_output: Option<u64>) -> Map<String, Value> {
    converse::request_to_converse(&ids::fit(req, IdRule::Anthropic), max_output)
}

impl UpstreamKind for Converse {
    fn wire(&self) -> Wire {
        Wire::Converse
    }

    fn chat_path(&self) -> &'static str {
        "model"
    }

    fn request(
        &self,
        client: &reqwest::Client,
        url: &reqwest::Url,
        p: &ProviderEntry,
        model: &ModelInfo,
        key: Option<&ApiKey>,
        o: &Outbound,
    ) -> Result<reqwest::RequestBuilder, Classified> {
        let body = body(o.canonical, model.max_output_tokens);
        let rb = client
            .post(url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header("x-request-id", o.request_id)
            .body(serde_json::to_vec(&body).unwrap_or_default());
        Ok(self.authorize(rb, p, key))
    }

    /// The provider's configured headers (its platform signs the request).
    fn authorize(
        &self,
        mut rb: reqwest::RequestBuilder,
        p: &ProviderEntry,
        _key: Option<&ApiKey>,
    ) -> reqwest::RequestBuilder {
        for (name, value) in &p.headers {
            rb = rb.header(name, value.clone());
        }
        rb
    }

    /// The conversation as CountTokens' `converse` input takes it (its platform puts it there).
    fn count_request(
        &self,
        client: &reqwest::Client,
        base: &str,
        model: &str,
        req: &ChatRequest,
        _own: Option<&Map<String, Value>>,
        _headers: &http::HeaderMap,
    ) -> Option<reqwest::RequestBuilder> {
        let mut body = body(req, None);
        body.retain(|k, _| matches!(k.as_str(), "messages" | "system" | "toolConfig"));
        Some(
            client
                .post(format!("{base}/model/{model}/count-tokens"))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&body).unwrap_or_default()),
        )
    }

    fn complete(&self, body: &[u8]) -> Complete {
        match serde_json::from_slice::<Value>(body) {
            Ok(v) if v.pointer("/output/message").is_some() => {
                Complete::Answer(v.get("usage").map(converse::usage_from_converse))
            }
            _ => Complete::NotAnswer(
                "upstream answered 2xx with a body that is not a Converse answer",
            ),
        }
    }

    fn answer(&self, v: &Value) -> Option<ChatResponse> {
        converse::response_from_converse(v)
    }

    fn decoder(&self) -> Box<dyn Decode> {
        Box::new(Events(StreamDecoder::default()))
    }

    /// Converse answers carry neither an id nor the model.
    fn names_answers(&self) -> bool {
        false
    }
}

/// ConverseStream's events, and the tool calls begun.
struct Events(StreamDecoder);

impl Decode for Events {
    fn decode(&mut self, data: &[u8], _events: bool) -> Result<Decoded, NotJson> {
        let v = parse(data)?;
        // An exception message, as `providers::eventstream` hands it on.
        if v.get("type").and_then(Value::as_str) == Some("error") {
            return Ok(Decoded {
                error: Some(super::super::anthropic::error_of(v)),
                ..Decoded::default()
            });
        }
        let (events, last) = self.0.push(&v);
        let mut decoded = Decoded::from_events(events);
        decoded.end = last;
        Ok(decoded)
    }

    fn wire(&self) -> Wire {
        Wire::Converse
    }
}
