//! One [`UpstreamKind`] per HTTP upstream API, each in its own folder: how a request is built
//! (URL, authentication, body), how a complete answer and a stream's events are read, how its
//! stream is framed, and its quirks as declared capabilities. Routing, the UI's Test, `baton
//! probe` and token counting reach every kind through [`of`]; nothing outside this folder
//! names one.
//!
//! Adding a kind: its `ProviderKind` (with `wire()`), a `Wire` variant if it speaks a new API,
//! a folder here implementing `UpstreamKind` (its unit tests beside it), and one line in [`of`].

pub mod anthropic;
pub mod gemini;
pub mod openai_compat;
pub mod openai_responses;

use serde_json::{Map, Value};

use super::codec::{Complete, Decoded, NotJson};
use super::{ApiKey, ModelInfo, ProviderEntry};
use crate::canonical::search::{SearchHit, WebSearch};
use crate::canonical::{ChatRequest, ChatResponse, Wire};
use crate::limits::Classified;

/// What the client asked for, in the forms an upstream may take it in.
pub struct Outbound<'a> {
    /// The request in OpenAI form (the client's own body when it spoke OpenAI).
    pub openai_body: &'a Map<String, Value>,
    /// The client's own body and its API, when it spoke another than Chat Completions: sent
    /// unchanged (but for the model) to upstreams of that API.
    pub original: Option<(Wire, &'a Map<String, Value>)>,
    /// The client's own credential and identification headers, for providers with
    /// `credentials: "client"` (sent instead of any key of Baton's).
    pub client: Option<&'a super::ClientCredential>,
    /// `anthropic-beta` from the client, for Anthropic upstreams.
    pub anthropic_beta: Option<&'a str>,
    pub canonical: &'a ChatRequest,
    pub stream: bool,
    pub request_id: &'a str,
    /// Which of the client's thinking blocks may go to this account (kinds that sign their
    /// reasoning).
    pub thinking: super::thinking::Keep<'a>,
}

impl Outbound<'_> {
    /// The client's own body, when it spoke `wire`.
    pub fn original(&self, wire: Wire) -> Option<&Map<String, Value>> {
        self.original.filter(|(w, _)| *w == wire).map(|(_, b)| b)
    }

    /// Whether the client spoke another API than Chat Completions (its effort was translated).
    pub fn translated(&self) -> bool {
        self.original.is_some()
    }
}

/// How a kind's stream is framed on the wire (`providers::sse` reads each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events.
    Sse,
}

/// A stream's decoder: the state a kind needs across its events.
pub trait Decode: Send {
    /// Decodes one event's `data`. With `events` false (a same-format hop after the commit) a
    /// decoder may skip building a JSON tree for events that carry nothing it must know.
    fn decode(&mut self, data: &[u8], events: bool) -> Result<Decoded, NotJson>;
    /// The format of the events it reads.
    fn wire(&self) -> Wire;
}

/// An HTTP upstream API.
pub trait UpstreamKind: Sync {
    /// The API it speaks: a client speaking the same one gets its bytes untouched.
    fn wire(&self) -> Wire;
    /// Where requests go under the provider's `baseUrl` (completed per model where the model
    /// is in the path).
    fn chat_path(&self) -> &'static str;
    /// The request for `model` with `key` (none for a `credentials: "client"` provider).
    fn request(
        &self,
        client: &reqwest::Client,
        url: &reqwest::Url,
        p: &ProviderEntry,
        model: &ModelInfo,
        key: Option<&ApiKey>,
        o: &Outbound,
    ) -> Result<reqwest::RequestBuilder, Classified>;
    /// Its authentication and the provider's configured headers, on any request to it.
    fn authorize(
        &self,
        rb: reqwest::RequestBuilder,
        p: &ProviderEntry,
        key: Option<&ApiKey>,
    ) -> reqwest::RequestBuilder;
    /// Its own token count of `req` for `model` (`own`: the client's body when it spoke this
    /// API; `headers`: the client's, for the kind's own ones), unauthorised; `None` when the
    /// kind cannot count.
    fn count_request(
        &self,
        _client: &reqwest::Client,
        _base: &str,
        _model: &str,
        _req: &ChatRequest,
        _own: Option<&Map<String, Value>>,
        _headers: &http::HeaderMap,
    ) -> Option<reqwest::RequestBuilder> {
        None
    }
    /// What a complete 2xx body is.
    fn complete(&self, body: &[u8]) -> Complete;
    /// A complete answer in canonical form, for a client of another API.
    fn answer(&self, v: &Value) -> Option<ChatResponse>;
    /// A decoder for one stream.
    fn decoder(&self) -> Box<dyn Decode>;
    /// How its stream is framed.
    fn framing(&self) -> Framing {
        Framing::Sse
    }
    /// Its answers name their id and model (else Baton fills them in).
    fn names_answers(&self) -> bool {
        true
    }
    /// It signs its reasoning: thinking blocks go back only to the account that signed them,
    /// and a refused signature is worth one retry without them.
    fn signs_reasoning(&self) -> bool {
        false
    }
    /// A broken stream can be continued on it from a prefill of what was already said.
    fn resumes_from_prefill(&self) -> bool {
        false
    }
    /// A request (in this API's own shape, for `model`) that has it run its own web search for
    /// `query`, when it has one: a provider used as Baton's search service.
    fn search_request(
        &self,
        _model: &str,
        _query: &str,
        _opts: &WebSearch,
    ) -> Option<Map<String, Value>> {
        None
    }
    /// What its own web search found, read from a complete answer to `search_request`.
    fn search_hits(&self, _answer: &Value) -> Vec<SearchHit> {
        Vec::new()
    }
}

/// What a provider asked to search is told.
pub(crate) fn search_prompt(query: &str) -> String {
    format!("Search the web for: {query}\nThen list what you found, one line per page, quoting the passage that answers.")
}

/// A complete answer's body in `wire`, in canonical form (`None` when it is not one).
pub fn answer_from(wire: Wire, body: &[u8]) -> Option<ChatResponse> {
    serde_json::from_slice(body)
        .ok()
        .and_then(|v| of(wire).answer(&v))
}

/// The kind that speaks `wire`.
pub fn of(wire: Wire) -> &'static dyn UpstreamKind {
    match wire {
        Wire::OpenAi => &openai_compat::OpenAiCompatible,
        Wire::Responses => &openai_responses::OpenAiResponses,
        Wire::Anthropic => &anthropic::Anthropic,
        Wire::Gemini => &gemini::Gemini,
    }
}

/// The kind of an HTTP provider; `None` for a subscription CLI.
pub fn of_provider(p: &crate::config::ProviderConfig) -> Option<&'static dyn UpstreamKind> {
    p.kind.wire().map(of)
}

#[cfg(test)]
mod tests;
