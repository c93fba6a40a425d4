//! The `openai-responses` upstream kind: `POST {baseUrl}/responses` with Bearer auth (OpenAI's
//! Responses API, for models only it serves); its answers, error bodies and stream events. A
//! client that spoke Responses has its own body sent on with only the model rewritten.

use serde_json::{json, Map, Value};

use super::contract::{Decode, Outbound, UpstreamKind};
use super::openai_compat;
use crate::canonical::responses::upstream::{
    request_to_responses, usage_from_responses, StreamDecoder,
};
use crate::canonical::search::{SearchHit, WebSearch};
use crate::canonical::{ChatResponse, Wire};
use crate::config::kind::{KindSpec, Vendor};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::codec::{parse, Complete, Decoded, NotJson, UpstreamError};
use crate::providers::{ApiKey, ModelInfo, ProviderEntry};

/// The least `max_output_tokens` the Responses API accepts.
const MIN_OUTPUT_TOKENS: u64 = 16;

pub mod public;

/// Fields Codex sends that only the ChatGPT backend (its own login's endpoint) takes; the
/// public Responses API refuses them as unknown parameters (Codex 0.171's request type).
const CHATGPT_ONLY: [&str; 2] = ["client_metadata", "generate"];

/// The request body: the client's own Responses body (model rewritten, output capped to the
/// model's limit), or the canonical request translated. `public`: the provider is the public
/// API (not the ChatGPT backend), which takes none of that backend's own fields; everything
/// else the client sent (`reasoning`, `include`, `prompt_cache_key`, its freeform tools as
/// freeform tools) goes on as it came.
pub fn body(o: &Outbound, model: &ModelInfo, public: bool) -> bytes::Bytes {
    // Nothing to change but the model (Codex's turns on its own login, as a rule): the
    // client's bytes go as they came.
    if let Some(own) = o.original(Wire::Responses) {
        if let Some(out) = o
            .verbatim(Wire::Responses, own)
            .filter(|_| fits(own, model, public))
            .and_then(|v| openai_compat::splice(v, &model.id, None))
        {
            return out;
        }
    }
    let mut b = match o.original(Wire::Responses) {
        Some(own) => own.clone(),
        None => request_to_responses(o.canonical),
    };
    if public {
        for k in CHATGPT_ONLY {
            b.remove(k);
        }
        public::input(&mut b);
        public::tools_declared_in_tools(&mut b);
    }
    b.insert("model".into(), json!(model.id));
    // Reasoning Baton gave the client from another provider has no encrypted content, and the
    // server has nothing stored under its id: it stays with the client.
    if let Some(Value::Array(items)) = b.get_mut("input") {
        items.retain(|i| !batons_reasoning(i));
    }
    if let Some(n) = output_tokens(&b, model) {
        b.insert("max_output_tokens".into(), json!(n));
    }
    serde_json::to_vec(&b).unwrap_or_default().into()
}

/// Reasoning Baton wrote for the client from another provider's answer (see `body`).
fn batons_reasoning(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("reasoning")
        && item
            .get("id")
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with(crate::canonical::responses::REASONING_ID_PREFIX))
}

/// Whether `body` would send the client's own body `b` unchanged but for its model.
fn fits(b: &Map<String, Value>, model: &ModelInfo, public: bool) -> bool {
    let input = b
        .get("input")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    (!public || (!CHATGPT_ONLY.iter().any(|k| b.contains_key(*k)) && public::fits(input)))
        && !input.iter().any(batons_reasoning)
        && output_tokens(b, model).is_none()
}

/// The `max_output_tokens` to write in place of the body's, if it must change: raised to the
/// least the API accepts (a probe or the UI's Test asks for 1 or 8), then held to the model's
/// cap (also when the body names none).
fn output_tokens(b: &Map<String, Value>, model: &ModelInfo) -> Option<u64> {
    let asked = b.get("max_output_tokens").and_then(Value::as_u64);
    let floored = asked.map(|n| n.max(MIN_OUTPUT_TOKENS));
    let limited = match model.max_output_tokens {
        Some(cap) if floored.is_none_or(|n| n > cap) => Some(cap),
        _ => floored,
    };
    limited.filter(|n| Some(*n) != asked)
}

pub fn request(
    client: &reqwest::Client,
    url: reqwest::Url,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
    body: bytes::Bytes,
    o: &Outbound,
) -> reqwest::RequestBuilder {
    openai_compat::authorize(
        openai_compat::json_post(client, url, o.stream, o.request_id),
        p,
        key,
    )
    .body(body)
}

/// An error (a body's `error`, a `response.failed`'s response error, an `error` event) with
/// the status its code means.
fn error_of(e: &Value) -> UpstreamError {
    let code = e
        .get("code")
        .or_else(|| e.get("type"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let status = match code {
        "rate_limit_exceeded" | "usage_limit_reached" | "insufficient_quota" => 429,
        "invalid_api_key" => 401,
        "model_not_found" => 404,
        "invalid_prompt" | "invalid_request_error" | "context_length_exceeded" => 400,
        "server_is_overloaded" | "slow_down" => 503,
        _ => 502,
    };
    let mut body = json!({ "error": e });
    if code == "insufficient_quota" {
        body["error"]["type"] = json!("insufficient_quota");
    }
    UpstreamError { status, body }
}

/// A complete 2xx body: a `response`, an error, or neither.
pub fn complete(body: &[u8]) -> Complete {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Complete::NotAnswer("upstream answered 2xx with a body that is not JSON");
    };
    if let Some(e) = v.get("error").filter(|e| e.is_object()) {
        return Complete::Error(error_of(e));
    }
    if v.get("object").and_then(Value::as_str) == Some("response") {
        return Complete::Answer(
            v.get("usage")
                .filter(|u| u.is_object())
                .map(usage_from_responses),
        );
    }
    Complete::NotAnswer("upstream answered 2xx with a body that is not a response")
}

/// One Responses stream event. Every event is parsed: they are few and small beside a chat
/// stream's chunks, and which ones matter depends on their `type`.
pub fn decode(d: &mut StreamDecoder, data: &[u8]) -> Result<Decoded, NotJson> {
    let v = parse(data)?;
    match v.get("type").and_then(Value::as_str).unwrap_or_default() {
        "error" => {
            return Ok(Decoded {
                error: Some(error_of(&v)),
                ..Decoded::default()
            })
        }
        "response.failed" => {
            let e = v
                .pointer("/response/error")
                .cloned()
                .unwrap_or_else(|| json!({"message": "the response failed"}));
            return Ok(Decoded {
                error: Some(error_of(&e)),
                ..Decoded::default()
            });
        }
        _ => {}
    }
    let mut decoded = Decoded::from_events(d.push(&v));
    // A compaction (Codex's `compaction_trigger` answered) is the whole answer, opaque.
    if crate::canonical::at(&v, &["item", "type"]).and_then(Value::as_str) == Some("compaction") {
        decoded.content = true;
    }
    // A Responses stream has no terminator but its last event: the answer is complete here,
    // whether or not the server closes at once (a client that goes away now got it all).
    decoded.end = matches!(
        v.get("type").and_then(Value::as_str),
        Some("response.completed" | "response.incomplete")
    );
    Ok(decoded)
}

/// OpenAI's Responses API (`POST {baseUrl}/responses`).
pub struct OpenAiResponses;

/// The `openai-responses` kind: OpenAI's Responses API.
pub static SPEC: KindSpec = KindSpec {
    name: "openai-responses",
    order: 20,
    doc: "OpenAI's Responses API (`POST {baseUrl}/responses`), for models only it serves.",
    label: n_("OpenAI Responses API"),
    badge: "R",
    wire: Some(Wire::Responses),
    vendor: Vendor::OpenAi,
    base_url_example: Some("https://api.openai.com/v1"),
    client_login: true,
    ..KindSpec::BASE
};

/// The `openai-responses` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &super::contract::Native(&OpenAiResponses));

impl UpstreamKind for OpenAiResponses {
    fn wire(&self) -> Wire {
        Wire::Responses
    }

    fn chat_path(&self) -> &'static str {
        "responses"
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
        // The public API's shapes, unless the platform is the backend the client was written
        // for (ChatGPT's, on Codex's own login).
        let public = !super::contract::platform(p.config.kind).is_some_and(|k| k.backend());
        let body = body(o, model, public);
        Ok(request(client, url.clone(), p, key, body, o))
    }

    fn authorize(
        &self,
        rb: reqwest::RequestBuilder,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
    ) -> reqwest::RequestBuilder {
        openai_compat::authorize(rb, p, key)
    }

    fn complete(&self, body: &[u8]) -> Complete {
        complete(body)
    }

    fn answer(&self, v: &Value) -> Option<ChatResponse> {
        crate::canonical::responses::upstream::response_from_responses(v)
    }

    fn decoder(&self) -> Box<dyn Decode> {
        Box::new(Events(StreamDecoder::default()))
    }
    /// Its hosted `web_search` tool, with the sources kept (`include`).
    fn search_request(
        &self,
        model: &str,
        query: &str,
        opts: &WebSearch,
    ) -> Option<Map<String, Value>> {
        let mut tool = json!({"type": "web_search"});
        if !opts.allowed_domains.is_empty() {
            tool["filters"] = json!({"allowed_domains": opts.allowed_domains});
        }
        let body = json!({"model": model, "input": super::contract::search_prompt(query), "tools": [tool],
            "include": ["web_search_call.action.sources"], "store": false});
        body.as_object().cloned()
    }

    /// The pages its answer cites (`url_citation`, with the cited passage), then the other
    /// sources its searches found.
    fn search_hits(&self, answer: &Value) -> Vec<SearchHit> {
        let output = answer
            .get("output")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut hits: Vec<SearchHit> = Vec::new();
        for part in output
            .iter()
            .filter_map(|i| i.get("content").and_then(Value::as_array))
            .flatten()
        {
            let text: Vec<char> = crate::canonical::str_at(part, "text").chars().collect();
            for a in part
                .get("annotations")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(url) = a.get("url").and_then(Value::as_str) else {
                    continue;
                };
                let span = |k: &str| {
                    a.get(k)
                        .and_then(Value::as_u64)
                        .map(|n| (n as usize).min(text.len()))
                };
                let snippet = match (span("start_index"), span("end_index")) {
                    (Some(s), Some(e)) if s < e => text[s..e].iter().collect(),
                    _ => String::new(),
                };
                match hits.iter_mut().find(|h| h.url == url) {
                    Some(h) if !snippet.is_empty() => {
                        h.snippet = format!("{} … {snippet}", h.snippet)
                    }
                    Some(_) => {}
                    None => hits.push(SearchHit {
                        url: url.to_string(),
                        title: crate::canonical::str_at(a, "title"),
                        snippet,
                        age: None,
                    }),
                }
            }
        }
        for url in output
            .iter()
            .filter_map(|i| i.pointer("/action/sources").and_then(Value::as_array))
            .flatten()
            .filter_map(|s| s.get("url").and_then(Value::as_str))
        {
            if !hits.iter().any(|h| h.url == url) {
                hits.push(SearchHit {
                    url: url.to_string(),
                    title: url.to_string(),
                    snippet: String::new(),
                    age: None,
                });
            }
        }
        hits
    }
}

/// The Responses event stream's state (items open, calls seen).
struct Events(StreamDecoder);

impl Decode for Events {
    fn decode(&mut self, data: &[u8], _events: bool) -> Result<Decoded, NotJson> {
        decode(&mut self.0, data)
    }

    fn wire(&self) -> Wire {
        Wire::Responses
    }
}

#[cfg(test)]
mod tests;
