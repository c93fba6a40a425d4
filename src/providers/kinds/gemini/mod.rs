//! The `gemini` upstream kind: `POST {baseUrl}/{model}:generateContent` (or
//! `:streamGenerateContent?alt=sse`) with `x-goog-api-key`; its answers, errors and stream chunks.

use serde_json::{json, Map, Value};

use super::contract::{Decode, Outbound, UpstreamKind};
use crate::canonical;
use crate::canonical::gemini::StreamDecoder;
use crate::canonical::search::{SearchHit, WebSearch};
use crate::canonical::{ChatRequest, ChatResponse, Wire};
use crate::config::kind::{KindSpec, Vendor};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::{self, Classified};
use crate::providers::codec::{parse, Complete, Decoded, NotJson, UpstreamError};
use crate::providers::{ApiKey, ModelInfo, ProviderEntry};

/// The request: the canonical request translated, at the model's own URL.
pub fn request(
    client: &reqwest::Client,
    base: &reqwest::Url,
    p: &ProviderEntry,
    model: &ModelInfo,
    key: Option<&ApiKey>,
    o: &Outbound,
) -> Result<reqwest::RequestBuilder, Classified> {
    // A Gemini client's own body goes as it came (thought signatures, safety settings, Google's
    // own tools): its very bytes when it names no model and asks for no more output than the
    // model gives (`as_it_came`); anything else is translated.
    let url = url(base, model, o.stream)?;
    if let Some(bytes) = as_it_came(o, model) {
        let rb = post(client, url, o).body(bytes);
        return Ok(authorize(rb, p, key));
    }
    let own = o.original(Wire::Gemini).map(|b| {
        let mut b = b.clone();
        b.remove("model");
        b
    });
    let translated = own.is_none();
    let mut body =
        own.unwrap_or_else(|| canonical::gemini::request_to_gemini(o.canonical, &model.id));
    // The client's effort as a thinking budget, for a Gemini that thinks.
    let budget = o
        .canonical
        .effort
        .as_deref()
        .filter(|_| translated && canonical::effort::gemini_thinks(&model.id))
        .and_then(canonical::effort::gemini_budget);
    // With a budget it also asks for its thoughts (`includeThoughts`), which reach clients
    // that show reasoning: Anthropic clients as thinking, Responses clients as summaries.
    if let Some(b) = budget {
        let cfg = body
            .entry("generationConfig")
            .or_insert_with(|| Value::Object(Default::default()));
        cfg["thinkingConfig"] = serde_json::json!({"thinkingBudget": b, "includeThoughts": b > 0});
    }
    if let Some(c) = model.max_output_tokens.filter(|_| over_cap(&body, model)) {
        if let Some(cfg) = body.get_mut("generationConfig") {
            cfg["maxOutputTokens"] = c.into();
        }
    }
    let rb = post(client, url, o).body(serde_json::to_vec(&body).unwrap_or_default());
    Ok(authorize(rb, p, key))
}

/// The client's own Gemini body, when it can go as it came: it names no model (Gemini's is in
/// the URL; one in the body is taken out) and asks for no more output than the model gives.
fn as_it_came(o: &Outbound, model: &ModelInfo) -> Option<bytes::Bytes> {
    let own = o.original(Wire::Gemini)?;
    let v = o.verbatim(Wire::Gemini, own)?;
    // Shared, not copied.
    (v.model.is_none() && !over_cap(own, model)).then(|| v.bytes.clone())
}

/// Whether a body asks for more output (`generationConfig.maxOutputTokens`) than the model
/// gives (then the model's cap is written in its place).
fn over_cap(body: &Map<String, Value>, model: &ModelInfo) -> bool {
    let asked = body
        .get("generationConfig")
        .and_then(|c| c.get("maxOutputTokens"))
        .and_then(Value::as_u64);
    model
        .max_output_tokens
        .is_some_and(|cap| asked.is_some_and(|n| n > cap))
}

/// `{base}/{model}:generateContent`, or its stream.
fn url(base: &reqwest::Url, model: &ModelInfo, stream: bool) -> Result<reqwest::Url, Classified> {
    let action = if stream {
        ":streamGenerateContent?alt=sse"
    } else {
        ":generateContent"
    };
    reqwest::Url::parse(&format!(
        "{}/{}{action}",
        base.as_str().trim_end_matches('/'),
        model.id
    ))
    .map_err(|_| limits::classify_transport("model name does not form a valid URL"))
}

fn post(client: &reqwest::Client, url: reqwest::Url, o: &Outbound) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header("x-request-id", o.request_id)
}

/// Gemini's authentication (`x-goog-api-key`) and the provider's configured headers.
pub fn authorize(
    mut rb: reqwest::RequestBuilder,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
) -> reqwest::RequestBuilder {
    if let Some(k) = key {
        rb = rb.header("x-goog-api-key", k.secret.expose());
    }
    for (name, value) in &p.headers {
        rb = rb.header(name, value.clone());
    }
    rb
}

/// `{"error": {"code": 429, …}}`, with the status its code names (else 502).
fn error_of(v: Value) -> UpstreamError {
    let status = v
        .pointer("/error/code")
        .and_then(Value::as_u64)
        .filter(|c| (400..600).contains(c))
        .map_or(502, |c| c as u16);
    UpstreamError { status, body: v }
}

fn is_error(v: &Value) -> bool {
    v.get("error").is_some() && v.get("candidates").is_none()
}

/// A complete 2xx body: candidates, an error, or neither.
pub fn complete(body: &[u8]) -> Complete {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.get("candidates").is_some() => Complete::Answer(
            v.get("usageMetadata")
                .map(canonical::gemini::usage_from_gemini),
        ),
        Ok(v) if v.get("error").is_some() => Complete::Error(error_of(v)),
        _ => Complete::NotAnswer("upstream answered 2xx with a body that is not an answer"),
    }
}

/// One streamed chunk, read into canonical events (no prefilter: a Gemini chunk carries its
/// text, usage and finish together, so every one is read).
pub fn decode(d: &mut StreamDecoder, data: &[u8]) -> Result<Decoded, NotJson> {
    let v = parse(data)?;
    if is_error(&v) {
        return Ok(Decoded {
            error: Some(error_of(v)),
            ..Decoded::default()
        });
    }
    Ok(Decoded::from_events(d.push(&v)))
}

/// Gemini's native API (`{baseUrl}/models/{model}:generateContent`, `x-goog-api-key`).
pub struct Gemini;

/// The `gemini` kind: Google's own Gemini API.
pub static SPEC: KindSpec = KindSpec {
    name: "gemini",
    order: 40,
    doc: "Gemini's native API (`baseUrl` e.g. `https://generativelanguage.googleapis.com/v1beta`).",
    label: n_("Gemini API"),
    badge: "G",
    wire: Some(Wire::Gemini),
    vendor: Vendor::Google,
    base_url_example: Some("https://generativelanguage.googleapis.com/v1beta"),
    client_login: true,
    ..KindSpec::BASE
};

/// The `gemini` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &super::contract::Native(&Gemini));

impl UpstreamKind for Gemini {
    fn gen_ai_system(&self) -> &'static str {
        "gcp.gemini"
    }

    fn wire(&self) -> Wire {
        Wire::Gemini
    }

    fn chat_path(&self) -> &'static str {
        "models"
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
        request(client, url, p, model, key, o)
    }

    fn authorize(
        &self,
        rb: reqwest::RequestBuilder,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
    ) -> reqwest::RequestBuilder {
        authorize(rb, p, key)
    }

    /// `:countTokens` with the request translated as `generateContentRequest`.
    fn count_request(
        &self,
        client: &reqwest::Client,
        base: &str,
        model: &str,
        req: &ChatRequest,
        _own: Option<&serde_json::Map<String, Value>>,
        _headers: &http::HeaderMap,
    ) -> Option<reqwest::RequestBuilder> {
        let mut inner = canonical::gemini::request_to_gemini(req, model);
        inner.insert("model".into(), Value::from(format!("models/{model}")));
        let body = serde_json::json!({ "generateContentRequest": inner });
        Some(
            client
                .post(format!("{base}/models/{model}:countTokens"))
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(serde_json::to_vec(&body).unwrap_or_default()),
        )
    }

    fn complete(&self, body: &[u8]) -> Complete {
        complete(body)
    }

    fn answer(&self, v: &Value) -> Option<ChatResponse> {
        canonical::gemini::response_from_gemini(v)
    }

    fn decoder(&self) -> Box<dyn Decode> {
        Box::new(Chunks(StreamDecoder::default()))
    }

    /// Gemini answers carry neither an id nor the model.
    fn names_answers(&self) -> bool {
        false
    }
    /// Grounding with Google Search.
    fn search_request(
        &self,
        _model: &str,
        query: &str,
        _opts: &WebSearch,
    ) -> Option<Map<String, Value>> {
        let body = json!({"contents": [{"role": "user", "parts": [{"text": super::contract::search_prompt(query)}]}],
            "tools": [{"googleSearch": {}}]});
        body.as_object().cloned()
    }

    /// The pages of its `groundingMetadata`, each with the answer's passages grounded in it.
    fn search_hits(&self, answer: &Value) -> Vec<SearchHit> {
        let Some(meta) = answer.pointer("/candidates/0/groundingMetadata") else {
            return Vec::new();
        };
        let supports = meta
            .get("groundingSupports")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        meta.get("groundingChunks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, c)| {
                let web = c.get("web")?;
                let snippet = supports
                    .iter()
                    .filter(|s| {
                        s.get("groundingChunkIndices")
                            .and_then(Value::as_array)
                            .is_some_and(|ix| ix.iter().any(|n| n.as_u64() == Some(i as u64)))
                    })
                    .filter_map(|s| s.pointer("/segment/text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(" … ");
                Some(SearchHit {
                    url: web.get("uri")?.as_str()?.to_string(),
                    title: canonical::str_at(web, "title"),
                    snippet,
                    age: None,
                })
            })
            .collect()
    }
}

/// Gemini's chunks: the usage it repeats, the calls seen.
struct Chunks(StreamDecoder);

impl Decode for Chunks {
    fn decode(&mut self, data: &[u8], _events: bool) -> Result<Decoded, NotJson> {
        decode(&mut self.0, data)
    }

    fn wire(&self) -> Wire {
        Wire::Gemini
    }
}
