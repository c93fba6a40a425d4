//! The `openai-compatible` upstream kind: `POST {baseUrl}/chat/completions`.

use bytes::Bytes;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::contract::{Decode, Outbound, UpstreamKind, Verbatim};
use crate::canonical::openai::{chunk_events, usage_from_openai};
use crate::canonical::{ChatResponse, Wire};
use crate::config::kind::KindSpec;
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::Classified;
use crate::providers::codec::{
    check_json, has, parse, token, Complete, Decoded, NotJson, UpstreamError,
};
use crate::providers::{ApiKey, ModelInfo, ProviderEntry};

/// The client's own body with only `model` replaced, serialised without copying the map. On a
/// Chat Completions stream (`ask_usage`) it always asks for usage
/// (`stream_options.include_usage`): tokens, budgets and cost must not depend on whether the
/// client asked; the extra chunk is not relayed to a client that did not. Other APIs get no
/// such field: the Messages API refuses unknown fields, and reports a stream's usage in
/// `message_start` and `message_delta` anyway.
struct WithModel<'a> {
    body: &'a Map<String, Value>,
    model: &'a str,
    max_tokens_cap: Option<u64>,
    ask_usage: bool,
}

impl Serialize for WithModel<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let stream =
            self.ask_usage && self.body.get("stream").and_then(Value::as_bool) == Some(true);
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

/// Body for the fast path: the OpenAI request exactly as the client sent it, model rewritten
/// (and a stream asked for its usage).
pub fn passthrough_body(
    body: &Map<String, Value>,
    model: &str,
    max_tokens_cap: Option<u64>,
    verbatim: Option<&Verbatim>,
) -> Bytes {
    written(body, model, max_tokens_cap, true, verbatim)
}

/// A body of another API sent on as the client wrote it: only `model` rewritten and the
/// output cap applied, nothing added.
pub fn same_body(
    body: &Map<String, Value>,
    model: &str,
    max_tokens_cap: Option<u64>,
    verbatim: Option<&Verbatim>,
) -> Bytes {
    written(body, model, max_tokens_cap, false, verbatim)
}

/// `body` with the model rewritten (and the cap, and a stream's usage when `ask_usage`): the
/// client's own bytes with only the model spliced in (`verbatim`, given for its body unchanged)
/// when nothing else changes, else written out again.
fn written(
    body: &Map<String, Value>,
    model: &str,
    max_tokens_cap: Option<u64>,
    ask_usage: bool,
    verbatim: Option<&Verbatim>,
) -> Bytes {
    let adds_usage = ask_usage
        && body.get("stream").and_then(Value::as_bool) == Some(true)
        && body
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            != Some(true);
    // A stream asked for its usage keeps the client's bytes too when it named no
    // `stream_options` (the SDKs' default): the member goes in at the end.
    let usage = adds_usage.then_some(USAGE_MEMBER);
    if let Some(out) = verbatim
        .filter(|_| !over_cap(body, max_tokens_cap))
        .filter(|_| !adds_usage || !body.contains_key("stream_options"))
        .and_then(|v| splice(v, model, usage))
    {
        return out;
    }
    serde_json::to_vec(&WithModel {
        body,
        model,
        max_tokens_cap,
        ask_usage,
    })
    .unwrap_or_default()
    .into()
}

/// Whether the body asks for more output than `cap` allows (then it is written out again, the
/// cap in place).
fn over_cap(body: &Map<String, Value>, cap: Option<u64>) -> bool {
    let Some(cap) = cap else {
        return false;
    };
    ["max_tokens", "max_completion_tokens"]
        .iter()
        .filter_map(|k| body.get(*k))
        .any(|v| v.as_u64().is_none_or(|asked| asked > cap))
}

/// What a stream that did not ask for its usage is sent (see [`WithModel`]).
const USAGE_MEMBER: &str = r#""stream_options":{"include_usage":true}"#;

/// The client's bytes with the top-level `model` value replaced by `model`, and `member` (a
/// member's JSON text the body does not have) added last: one copy, no parsing or writing out
/// of the rest. None when the client's body named no model. The bytes themselves, shared and
/// not copied, when they already name `model` and nothing is added (an agent's turn sent to
/// the model it named: Claude Code's on its own account, Codex's on its own login).
pub(super) fn splice(v: &Verbatim, model: &str, member: Option<&str>) -> Option<Bytes> {
    let at = v.model.clone()?;
    if member.is_none() && names(&v.bytes[at.clone()], model) {
        return Some(v.bytes.clone());
    }
    let (head, tail) = (&v.bytes[..at.start], &v.bytes[at.end..]);
    let extra = member.map_or(0, |m| m.len() + 1);
    let mut out = Vec::with_capacity(v.bytes.len() + model.len() + 8 + extra);
    out.extend_from_slice(head);
    // A JSON string as serde writes it (quotes and escapes); writing to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, model);
    out.extend_from_slice(tail);
    if let Some(m) = member {
        // Before the object's closing brace (only whitespace may follow it); the object has
        // its model, so a comma goes first.
        let end = out.iter().rposition(|b| !b.is_ascii_whitespace())?;
        if out[end] != b'}' {
            return None;
        }
        let close = out.split_off(end);
        out.push(b',');
        out.extend_from_slice(m.as_bytes());
        out.extend_from_slice(&close);
    }
    Some(out.into())
}

/// Whether `json` (a value's JSON text, from a parsed body) is the string `model`: a JSON
/// string written without escapes is its value byte for byte (a raw quote or control
/// character cannot be in it).
fn names(json: &[u8], model: &str) -> bool {
    json.strip_prefix(b"\"")
        .and_then(|j| j.strip_suffix(b"\""))
        .is_some_and(|inner| !inner.contains(&b'\\') && inner == model.as_bytes())
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
    body: Bytes,
    stream: bool,
    request_id: &str,
) -> reqwest::RequestBuilder {
    authorize(json_post(client, url, stream, request_id), entry, key).body(body)
}

/// Bearer authentication and the provider's configured headers.
pub fn authorize(
    mut rb: reqwest::RequestBuilder,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
) -> reqwest::RequestBuilder {
    if let Some(k) = key {
        // As reqwest's `bearer_auth` makes it (sensitive: never logged, never indexed by
        // HTTP/2's header compression), without its formatting machinery.
        match http::HeaderValue::try_from(["Bearer ", k.secret.expose()].concat()) {
            Ok(mut v) => {
                v.set_sensitive(true);
                rb = rb.header(http::header::AUTHORIZATION, v);
            }
            // A key no header can carry: reqwest's own error, as before.
            Err(_) => rb = rb.bearer_auth(k.secret.expose()),
        }
    }
    for (name, value) in &p.headers {
        rb = rb.header(name, value.clone());
    }
    rb
}

/// A complete 2xx body: a chat completion, an `{"error": …}` some services answer 200 with, or
/// neither. One light parse (the choices are not built).
pub fn complete(body: &[u8]) -> Complete {
    #[derive(serde::Deserialize)]
    struct Peek {
        choices: Option<serde::de::IgnoredAny>,
        error: Option<Value>,
        usage: Option<Value>,
    }
    match serde_json::from_slice::<Peek>(body) {
        Ok(Peek {
            choices: Some(_),
            usage,
            ..
        }) => Complete::Answer(usage.as_ref().and_then(usage_from_openai)),
        Ok(Peek { error: Some(e), .. }) => {
            Complete::Error(error_of(serde_json::json!({ "error": e })))
        }
        _ => Complete::NotAnswer("upstream answered 2xx with a body that is not a chat completion"),
    }
}

/// An `{"error": …}` in a 2xx answer or a stream, with the status its own code names (else 502).
fn error_of(body: Value) -> UpstreamError {
    let status = body
        .pointer("/error/code")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .filter(|c| (400..600).contains(c))
        .map_or(502, |c| c as u16);
    UpstreamError { status, body }
}

fn is_error(v: &Value) -> bool {
    v.get("error").is_some() && v.get("choices").is_none()
}

/// One `chat.completion.chunk`. Without `events`, most chunks are only checked to be JSON and
/// scanned for their text length: a tree is built only for chunks that carry a finish reason,
/// usage or an error.
pub fn decode(data: &[u8], events: bool) -> Result<Decoded, NotJson> {
    if data.starts_with(b"[DONE]") {
        return Ok(Decoded {
            end: true,
            ..Decoded::default()
        });
    }
    if events {
        let v = parse(data)?;
        if is_error(&v) {
            return Ok(Decoded {
                error: Some(error_of(v)),
                ..Decoded::default()
            });
        }
        let mut d = Decoded::from_events(chunk_events(&v));
        d.usage_only = d.usage.is_some() && choices_empty(&v);
        return Ok(d);
    }
    let (finish, usage, error) = (
        set(data, token!(b"\"finish_reason\"")),
        set(data, token!(b"\"usage\"")),
        has(data, token!(b"\"error\"")),
    );
    let text_bytes = content_len(data);
    if !finish && !usage && !error {
        check_json(data)?;
        return Ok(Decoded {
            content: text_bytes > 0 || has(data, token!(b"\"tool_calls\"")),
            text_bytes,
            ..Decoded::default()
        });
    }
    let v = parse(data)?;
    if is_error(&v) {
        return Ok(Decoded {
            error: Some(error_of(v)),
            ..Decoded::default()
        });
    }
    let finish =
        crate::canonical::at(&v, &["choices", "0", "finish_reason"]).is_some_and(|f| !f.is_null());
    let usage = v.get("usage").and_then(usage_from_openai);
    Ok(Decoded {
        content: finish || text_bytes > 0 || has(data, token!(b"\"tool_calls\"")),
        finish,
        usage_only: usage.is_some() && choices_empty(&v),
        usage,
        text_bytes,
        ..Decoded::default()
    })
}

/// Whether `key` occurs with a value other than `null` (most chunks carry
/// `"finish_reason":null`, and some `"usage":null`).
fn set(data: &[u8], key: &memchr::memmem::Finder) -> bool {
    key.find_iter(data).any(|at| {
        let rest = &data[at + key.needle().len()..];
        let mut it = rest.iter().skip_while(|b| b.is_ascii_whitespace());
        it.next() == Some(&b':') && it.find(|b| !b.is_ascii_whitespace()) != Some(&b'n')
    })
}

fn choices_empty(v: &Value) -> bool {
    v.get("choices")
        .and_then(Value::as_array)
        .is_some_and(|c| c.is_empty())
}

/// Bytes of the `delta.content` string in a chunk, found without parsing it.
pub fn content_len(data: &[u8]) -> usize {
    string_len(data, token!(b"\"content\":\""))
}

/// Bytes of the first string value that `opening` (`"key":"`) starts, found without parsing.
pub fn string_len(data: &[u8], opening: &memchr::memmem::Finder) -> usize {
    let Some(at) = opening.find(data) else {
        return 0;
    };
    let s = &data[at + opening.needle().len()..];
    let mut from = 0;
    while let Some(off) = memchr::memchr(b'"', &s[from..]) {
        let q = from + off;
        let escapes = s[..q].iter().rev().take_while(|b| **b == b'\\').count();
        if escapes % 2 == 0 {
            return q;
        }
        from = q + 1;
    }
    0
}

/// Any OpenAI Chat Completions server (`POST {baseUrl}/chat/completions`, Bearer key).
pub struct OpenAiCompatible;

/// The `openai-compatible` kind: any Chat Completions server.
pub static SPEC: KindSpec = KindSpec {
    name: "openai-compatible",
    order: 10,
    doc: "Any OpenAI Chat Completions compatible API (OpenAI, OpenRouter, Groq, DeepSeek, Ollama, vLLM…).",
    label: n_("OpenAI-compatible API"),
    badge: "AI",
    wire: Some(Wire::OpenAi),
    base_url_example: Some("https://api.groq.com/openai/v1"),
    client_login: true,
    ..KindSpec::BASE
};

/// The `openai-compatible` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

super::contract::register!(SPEC, &super::contract::Native(&OpenAiCompatible));

impl UpstreamKind for OpenAiCompatible {
    fn wire(&self) -> Wire {
        Wire::OpenAi
    }

    fn chat_path(&self) -> &'static str {
        "chat/completions"
    }

    /// The client's Chat Completions body as it came (model rewritten), or the request
    /// translated; a translated effort goes to an OpenAI reasoning model.
    fn request(
        &self,
        client: &reqwest::Client,
        url: &reqwest::Url,
        p: &ProviderEntry,
        model: &ModelInfo,
        key: Option<&ApiKey>,
        o: &Outbound,
    ) -> Result<reqwest::RequestBuilder, Classified> {
        let effort = o
            .canonical
            .effort
            .as_deref()
            .filter(|_| o.translated())
            .filter(|_| crate::canonical::effort::openai_reasons(&model.id));
        let nine =
            p.config.capabilities.tool_call_ids == crate::config::ToolCallIds::NineAlphanumerics;
        let with_ids = nine
            .then(|| {
                use crate::canonical::ids;
                ids::fit_chat_body(o.openai_body(), ids::IdRule::NineAlphanumerics)
            })
            .flatten();
        let base = with_ids.as_ref().unwrap_or(o.openai_body());
        let with_effort = effort.map(|e| {
            let mut b = base.clone();
            b.insert("reasoning_effort".into(), Value::from(e));
            b
        });
        let body = match &with_effort {
            Some(b) => passthrough_body(b, &model.id, model.max_output_tokens, None),
            None => passthrough_body(
                base,
                &model.id,
                model.max_output_tokens,
                o.verbatim(Wire::OpenAi, base),
            ),
        };
        Ok(build(
            client,
            url.clone(),
            p,
            key,
            body,
            o.stream,
            o.request_id,
        ))
    }

    fn authorize(
        &self,
        rb: reqwest::RequestBuilder,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
    ) -> reqwest::RequestBuilder {
        authorize(rb, p, key)
    }

    fn complete(&self, body: &[u8]) -> Complete {
        complete(body)
    }

    fn answer(&self, v: &Value) -> Option<ChatResponse> {
        crate::canonical::openai::response_from_openai(v)
    }

    fn complete_with_text(&self, body: &[u8]) -> (Complete, Option<(String, bool)>) {
        complete_with_text(body)
    }

    fn decoder(&self) -> Box<dyn Decode> {
        Box::new(Chunks)
    }

    fn resumes_from_prefill(&self) -> bool {
        true
    }
}

/// Chat Completions chunks carry no state between them.
struct Chunks;

impl Decode for Chunks {
    fn decode(&mut self, data: &[u8], events: bool) -> Result<Decoded, NotJson> {
        decode(data, events)
    }

    fn wire(&self) -> Wire {
        Wire::OpenAi
    }
}

/// The one choice of a Chat Completions answer: its text (unescaped) and whether it stopped at
/// its token limit; `None` when it calls a tool, has several choices or another shape.
fn answer_text(body: &[u8]) -> Option<(std::borrow::Cow<'_, str>, bool)> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        /// Exactly one: several choices take the canonical path (no vector allocated).
        #[serde(borrow)]
        choices: [Choice<'a>; 1],
    }
    let a: Answer<'_> = serde_json::from_slice(body).ok()?;
    let [c] = a.choices;
    c.text()
}

/// [`complete`] and [`answer_text`] in one pass over the body, for an answer the JSON check
/// reads (it would otherwise read the body twice); a body of any other shape is read by them.
fn complete_with_text(body: &[u8]) -> (Complete, Option<(String, bool)>) {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow)]
        choices: [Choice<'a>; 1],
        usage: Option<Value>,
    }
    match serde_json::from_slice::<Answer<'_>>(body) {
        Ok(Answer {
            choices: [c],
            usage,
        }) => (
            Complete::Answer(usage.as_ref().and_then(usage_from_openai)),
            c.text().map(|(t, cut)| (t.into_owned(), cut)),
        ),
        Err(_) => (
            complete(body),
            answer_text(body).map(|(t, cut)| (t.into_owned(), cut)),
        ),
    }
}

/// A choice of a Chat Completions answer, as far as the JSON check reads it.
#[derive(serde::Deserialize)]
struct Choice<'a> {
    #[serde(borrow)]
    message: Message<'a>,
    #[serde(default, borrow)]
    finish_reason: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct Message<'a> {
    #[serde(default, borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<serde::de::IgnoredAny>>,
}

impl<'a> Choice<'a> {
    /// Its text and whether it stopped at its token limit; `None` when it calls a tool.
    fn text(self) -> Option<(std::borrow::Cow<'a, str>, bool)> {
        if self.message.tool_calls.is_some_and(|t| !t.is_empty()) {
            return None;
        }
        let cut = self.finish_reason.as_deref() == Some("length");
        Some((self.message.content.unwrap_or_default(), cut))
    }
}

#[cfg(test)]
mod tests;
