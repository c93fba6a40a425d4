//! The `anthropic` upstream kind: `POST {baseUrl}/messages` with `x-api-key` and
//! `anthropic-version`; its answers, error bodies and stream events.

use serde_json::{json, Map, Value};

use super::contract::{Decode, Outbound, UpstreamKind};
use super::openai_compat;
use crate::canonical;
use crate::canonical::anthropic::stream::StreamDecoder;
use crate::canonical::search::{SearchHit, WebSearch};
use crate::canonical::{ChatRequest, ChatResponse, Wire};
use crate::config::kind::{KindSpec, Vendor};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::codec::{
    check_json, has, parse, token, Complete, Decoded, NotJson, UpstreamError,
};
use crate::providers::{ApiKey, ModelInfo, ProviderEntry};

/// `max_tokens` when neither the client nor the config gave one (the Messages API requires it).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// `anthropic-version` sent to Messages API upstreams.
pub const VERSION: &str = "2023-06-01";

/// The body: the client's own when it spoke Anthropic (model rewritten, so thinking signatures,
/// cache control and betas survive), else translated from the canonical request.
pub fn body(o: &Outbound, model: &ModelInfo) -> bytes::Bytes {
    let cap = model.max_output_tokens;
    if let Some(b) = o.original(Wire::Anthropic) {
        // Searches Baton ran on another upstream earlier in the conversation: as text.
        if let Some(own) = canonical::search::unbridge(b) {
            let o = Outbound {
                original: Some((Wire::Anthropic, &own)),
                // Not the client's bytes any more.
                verbatim: None,
                ..*o
            };
            return body(&o, model);
        }
        // Thinking blocks go back only to the account that signed them (`thinking`); a body
        // with nothing to take out goes as it came.
        if crate::providers::thinking::to_check(b)
            && crate::providers::thinking::changes(b, o.thinking)
        {
            let mut own = b.clone();
            fit_thinking(&mut own, o);
            return openai_compat::same_body(&own, &model.id, cap, None);
        }
        return openai_compat::same_body(b, &model.id, cap, o.verbatim(Wire::Anthropic, b));
    }
    let mut b: Map<String, Value> = canonical::anthropic::request_to_anthropic(
        o.canonical,
        &model.id,
        cap.unwrap_or(DEFAULT_MAX_TOKENS),
    );
    // A translated conversation has no signed thinking: a tool loop's final exchange is closed
    // so the model thinks on every turn (`thinking`).
    fit_thinking(&mut b, o);
    if let Some(c) = cap {
        if b.get("max_tokens")
            .and_then(Value::as_u64)
            .is_some_and(|m| m > c)
        {
            b.insert("max_tokens".into(), c.into());
        }
    }
    serde_json::to_vec(&b).unwrap_or_default().into()
}

/// The thinking blocks this account may see, and thinking kept on where the API allows it.
fn fit_thinking(b: &mut Map<String, Value>, o: &Outbound) {
    let s = crate::providers::thinking::strip(b, o.thinking);
    if s.blocks > 0 || s.closed > 0 || s.thinking_off {
        tracing::debug!(
            request_id = o.request_id,
            blocks = s.blocks,
            closed = s.closed,
            thinking_off = s.thinking_off,
            "thinking fitted to the account: foreign blocks left out, the final tool exchange closed"
        );
    }
}

/// A Messages API request: `x-api-key`, `anthropic-version`, the client's `anthropic-beta`.
pub fn request(
    client: &reqwest::Client,
    url: reqwest::Url,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
    body: bytes::Bytes,
    o: &Outbound,
) -> reqwest::RequestBuilder {
    let mut rb = authorize(
        openai_compat::json_post(client, url, o.stream, o.request_id),
        p,
        key,
    );
    if let Some(b) = o.anthropic_beta {
        rb = rb.header("anthropic-beta", b);
    }
    rb.body(body)
}

/// The Messages API's authentication (`x-api-key`, `anthropic-version`) and the provider's
/// configured headers, on any request to it (chat, `count_tokens`, model lists).
pub fn authorize(
    mut rb: reqwest::RequestBuilder,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
) -> reqwest::RequestBuilder {
    rb = rb.header("anthropic-version", VERSION);
    if let Some(k) = key {
        rb = rb.header("x-api-key", k.secret.expose());
    }
    for (name, value) in &p.headers {
        rb = rb.header(name, value.clone());
    }
    rb
}

/// A Messages API body as a cloud takes it (Bedrock, Vertex AI): the top-level members kept as
/// they are (not parsed again), less `drop` (what its path says), with its `anthropic_version`
/// and the betas (`anthropic_beta`, when the client sent any and the body has none).
pub fn platform_body(
    body: &[u8],
    version: &str,
    betas: &[String],
    drop: &[&str],
) -> Result<Vec<u8>, Classified> {
    use serde_json::value::RawValue;
    let members: Vec<(String, Box<RawValue>)> =
        serde_json::from_slice::<std::collections::BTreeMap<String, Box<RawValue>>>(body)
            .map_err(|e| crate::limits::classify_transport(format!("request body: {e}")))?
            .into_iter()
            .filter(|(k, _)| k != "anthropic_version" && !drop.contains(&k.as_str()))
            .collect();
    let mut out = Vec::with_capacity(body.len() + 64);
    out.push(b'{');
    let mut first = true;
    let mut member = |out: &mut Vec<u8>, k: &str, v: &str| {
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(Value::from(k).to_string().as_bytes());
        out.push(b':');
        out.extend_from_slice(v.as_bytes());
    };
    member(
        &mut out,
        "anthropic_version",
        &Value::from(version).to_string(),
    );
    let betas: Vec<&String> = betas.iter().filter(|b| !b.is_empty()).collect();
    if !betas.is_empty() && !members.iter().any(|(k, _)| k == "anthropic_beta") {
        member(
            &mut out,
            "anthropic_beta",
            &serde_json::to_string(&betas).unwrap_or_default(),
        );
    }
    for (k, v) in &members {
        member(&mut out, k, v.get());
    }
    out.push(b'}');
    Ok(out)
}

/// An `{"type":"error"}` body (in a 200 or mid-stream) with the status its error type means.
pub(crate) fn error_of(v: Value) -> UpstreamError {
    let status = match v
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or_default()
    {
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "invalid_request_error" => 400,
        "request_too_large" => 413,
        _ => 500,
    };
    UpstreamError { status, body: v }
}

fn kind(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or_default()
}

/// A complete 2xx body: a message, an error, or neither.
pub fn complete(body: &[u8]) -> Complete {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if kind(&v) == "message" => Complete::Answer(
            v.get("usage")
                .map(canonical::anthropic::usage_from_anthropic),
        ),
        Ok(v) if kind(&v) == "error" => Complete::Error(error_of(v)),
        _ => Complete::NotAnswer("upstream answered 2xx with a body that is not a message"),
    }
}

/// One Messages stream event. Without `events`, the text deltas that make up most of a stream
/// are only checked to be JSON: a tree is built for the events that start, finish or break the
/// message.
pub fn decode(d: &mut StreamDecoder, data: &[u8], events: bool) -> Result<Decoded, NotJson> {
    let matters = events
        || has(data, token!(b"\"message_start\""))
        || has(data, token!(b"\"message_delta\""))
        || has(data, token!(b"\"message_stop\""))
        || has(data, token!(b"\"error\""))
        || has(data, token!(b"\"signature_delta\""))
        || has(data, token!(b"\"redacted_thinking\""));
    if !matters {
        check_json(data)?;
        let text_bytes = openai_compat::string_len(data, token!(b"\"text\":\""))
            + openai_compat::string_len(data, token!(b"\"partial_json\":\""));
        return Ok(Decoded {
            content: has(data, token!(b"\"content_block_delta\"")),
            text_bytes,
            ..Decoded::default()
        });
    }
    let v = parse(data)?;
    match kind(&v) {
        "error" => Ok(Decoded {
            error: Some(error_of(v)),
            ..Decoded::default()
        }),
        "message_stop" => Ok(Decoded {
            end: true,
            ..Decoded::default()
        }),
        _ => {
            let mut decoded = Decoded::from_events(d.push(&v));
            decoded.seal = seal(&v);
            Ok(decoded)
        }
    }
}

/// The seal of a thinking block an event completes: a `signature_delta`'s signature, or a
/// `redacted_thinking` block's data.
fn seal(v: &Value) -> Option<String> {
    let s = match kind(v) {
        "content_block_delta" => canonical::at(v, &["delta", "signature"]),
        "content_block_start" => canonical::at(v, &["content_block", "data"]).filter(|_| {
            canonical::at(v, &["content_block", "type"]).and_then(Value::as_str)
                == Some("redacted_thinking")
        }),
        _ => None,
    };
    s.and_then(Value::as_str).map(str::to_string)
}

/// Anthropic's Messages API (`POST {baseUrl}/messages`, `x-api-key`, `anthropic-version`).
pub struct Anthropic;

/// The `anthropic` kind: Anthropic's own Messages API.
pub static SPEC: KindSpec = KindSpec {
    name: "anthropic",
    order: 30,
    doc: "Anthropic's Messages API (`baseUrl` e.g. `https://api.anthropic.com/v1`).",
    label: n_("Anthropic API"),
    badge: "A",
    wire: Some(Wire::Anthropic),
    vendor: Vendor::Anthropic,
    base_url_example: Some("https://api.anthropic.com/v1"),
    client_login: true,
    ..KindSpec::BASE
};

/// The `anthropic` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &super::contract::Native(&Anthropic));

/// Messages API fields `count_tokens` does not take (its request type has the prompt only).
const COUNT_REFUSES: [&str; 8] = [
    "max_tokens",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "service_tier",
];

impl UpstreamKind for Anthropic {
    fn gen_ai_system(&self) -> &'static str {
        "anthropic"
    }

    fn wire(&self) -> Wire {
        Wire::Anthropic
    }

    fn chat_path(&self) -> &'static str {
        "messages"
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
        Ok(request(client, url.clone(), p, key, body(o, model), o))
    }

    fn authorize(
        &self,
        rb: reqwest::RequestBuilder,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
    ) -> reqwest::RequestBuilder {
        authorize(rb, p, key)
    }

    /// `POST {baseUrl}/messages/count_tokens`: an Anthropic client's own body, else the
    /// request translated without its sampling settings.
    fn count_request(
        &self,
        client: &reqwest::Client,
        base: &str,
        model: &str,
        req: &ChatRequest,
        own: Option<&Map<String, Value>>,
        headers: &http::HeaderMap,
    ) -> Option<reqwest::RequestBuilder> {
        let mut body = match own {
            Some(b) => b.clone(),
            None => {
                let mut b =
                    canonical::anthropic::request_to_anthropic(req, model, DEFAULT_MAX_TOKENS);
                for k in COUNT_REFUSES {
                    b.remove(k);
                }
                b
            }
        };
        body.insert("model".into(), Value::from(model));
        let mut rb = client
            .post(format!("{base}/messages/count_tokens"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(&body).unwrap_or_default());
        if let Some(beta) = headers.get("anthropic-beta") {
            rb = rb.header("anthropic-beta", beta);
        }
        Some(rb)
    }

    fn complete(&self, body: &[u8]) -> Complete {
        complete(body)
    }

    fn answer(&self, v: &Value) -> Option<ChatResponse> {
        canonical::anthropic::response_from_anthropic(v)
    }

    fn decoder(&self) -> Box<dyn Decode> {
        Box::new(Events(Box::default()))
    }

    fn signs_reasoning(&self) -> bool {
        true
    }
    /// Its `web_search_20250305` server tool, forced, as Claude Code's WebSearch asks for it.
    fn search_request(
        &self,
        model: &str,
        query: &str,
        opts: &WebSearch,
    ) -> Option<Map<String, Value>> {
        let mut tool = json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 1});
        // The API takes one of the two lists; the other is applied to what it finds.
        if !opts.allowed_domains.is_empty() {
            tool["allowed_domains"] = json!(opts.allowed_domains);
        } else if !opts.blocked_domains.is_empty() {
            tool["blocked_domains"] = json!(opts.blocked_domains);
        }
        let body = json!({"model": model, "max_tokens": 2048,
            "messages": [{"role": "user", "content": super::contract::search_prompt(query)}],
            "tools": [tool], "tool_choice": {"type": "tool", "name": "web_search"}});
        body.as_object().cloned()
    }

    /// The pages of its `web_search_tool_result` blocks, each with the passages the answer
    /// cited from it.
    fn search_hits(&self, answer: &Value) -> Vec<SearchHit> {
        let blocks = answer
            .get("content")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let cited = |url: &str| -> String {
            blocks
                .iter()
                .filter_map(|b| b.get("citations").and_then(Value::as_array))
                .flatten()
                .filter(|c| c.get("url").and_then(Value::as_str) == Some(url))
                .filter_map(|c| c.get("cited_text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" … ")
        };
        blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("web_search_tool_result"))
            .filter_map(|b| b.get("content").and_then(Value::as_array))
            .flatten()
            .filter_map(|h| {
                let url = h.get("url")?.as_str()?.to_string();
                Some(SearchHit {
                    title: canonical::str_at(h, "title"),
                    snippet: cited(&url),
                    age: h
                        .get("page_age")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    url,
                })
            })
            .collect()
    }
}

/// The Messages event stream's state (blocks open, their kinds).
struct Events(Box<StreamDecoder>);

impl Decode for Events {
    fn decode(&mut self, data: &[u8], events: bool) -> Result<Decoded, NotJson> {
        decode(&mut self.0, data, events)
    }

    fn wire(&self) -> Wire {
        Wire::Anthropic
    }
}

#[cfg(test)]
mod tests;
