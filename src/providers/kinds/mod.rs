//! The upstream seam, cut in two. An API ([`UpstreamKind`], keyed by the `Wire` it speaks, one
//! folder each): what the bytes look like — the body built, a complete answer and a stream's
//! events read, its framing, its quirks as declared capabilities. A platform ([`Platform`],
//! keyed by the provider's kind): where and how that API is called — the URL for a model, the
//! authentication put on the built request, where its models are listed. A vendor's own API
//! served natively is both at once ([`Native`]); a second vendor of an existing API (Azure
//! OpenAI's Chat Completions) is a platform of its own over that API, so a client speaking the
//! same API still gets its bytes relayed untouched. Routing, the UI's Test, `baton probe` and
//! token counting reach every kind through [`platform`] and [`of`]; nothing outside this folder
//! names one.
//!
//! Adding a kind that speaks an existing API: a folder here with its `KindSpec` and its
//! `Platform`, registered from the folder by [`register!`], and its `pub mod` line below. A new
//! API: a `Wire` variant and a folder implementing `UpstreamKind`, one line in [`of`].

pub mod anthropic;
pub mod azure_openai;
pub mod bedrock;
pub mod gemini;
pub mod openai_compat;
pub mod openai_responses;
pub mod vertex;

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
    /// When the request is made (Unix ms, from the routing clock): what a signature is dated.
    pub now_ms: i64,
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
    /// AWS event-stream frames (`providers::eventstream`), read as server-sent events.
    AwsEventStream,
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

/// Whether a provider of `kind` can run a web search by itself (its API has one built in).
pub fn searches(kind: crate::config::ProviderKind) -> bool {
    platform(kind).is_some_and(|p| {
        p.searches()
            && p.api()
                .search_request("m", "q", &WebSearch::default())
                .is_some()
    })
}

/// The API of an HTTP provider; `None` for a subscription CLI.
pub fn of_provider(p: &crate::config::ProviderConfig) -> Option<&'static dyn UpstreamKind> {
    p.kind.wire().map(of)
}

/// Where and how one vendor's service is called; its bytes are its API's.
pub trait Platform: Sync {
    /// The API it speaks.
    fn api(&self) -> &'static dyn UpstreamKind;
    /// Where a request for `model` goes (`None`: the base URL is not a URL); `stream` for
    /// platforms that stream at another address.
    fn url(&self, p: &ProviderEntry, _model: &str, _stream: bool) -> Option<reqwest::Url> {
        p.chat_url.clone()
    }
    /// Whether it authenticates its own way ([`Platform::sign`]) rather than as its API does
    /// (a bearer key, `x-api-key`, `x-goog-api-key`).
    fn own_auth(&self) -> bool {
        false
    }
    /// Its changes to a request its API built (where the model goes, what its body must
    /// carry), before it is signed; platforms with their own authentication only.
    fn shape(&self, _req: &mut reqwest::Request) -> Result<(), Classified> {
        Ok(())
    }
    /// The credential its requests carry, made from the provider's key (or, without one, what
    /// its vendor's tools would find) before a request is built: Vertex AI's access token,
    /// exchanged for a service account's key. `None`: the key is sent as it is.
    fn exchange<'a>(
        &'a self,
        _client: &'a reqwest::Client,
        _p: &'a ProviderEntry,
        _key: Option<&'a ApiKey>,
        _now_ms: i64,
    ) -> Option<futures_util::future::BoxFuture<'a, Result<ApiKey, Classified>>> {
        None
    }
    /// Its authentication on a request built without a key (headers, and for a platform that
    /// signs its requests, over the whole request, dated `now_ms`). Without a key, a platform
    /// may find the credentials its vendor's own tools would.
    fn sign(
        &self,
        _req: &mut reqwest::Request,
        _p: &ProviderEntry,
        _key: Option<&ApiKey>,
        _now_ms: i64,
    ) -> Result<(), Classified> {
        Ok(())
    }
    /// Where it lists its models (`None`: it has no list Baton reads; its configured models
    /// are the ones there are).
    fn models_url(&self, p: &ProviderEntry) -> Option<String> {
        Some(format!(
            "{}/models",
            p.config.base_url.trim_end_matches('/')
        ))
    }
    /// The names its own id for a model stands for (Bedrock's
    /// `us.anthropic.claude-sonnet-4-5-20250929-v1:0` is `claude-sonnet-4-5-20250929`): a
    /// request for one of them can be served by that model here.
    fn serves(&self, _model: &str) -> Vec<String> {
        Vec::new()
    }
    /// Whether its API's token count ([`UpstreamKind::count_request`]) is served at the
    /// API's own address on it.
    fn counts_tokens(&self) -> bool {
        !self.own_auth()
    }
    /// How an answer with this content type is framed.
    fn framing(&self, _content_type: Option<&str>) -> Framing {
        self.api().framing()
    }
    /// Whether its API's own web search ([`UpstreamKind::search_request`]) runs on it.
    fn searches(&self) -> bool {
        true
    }
}

/// A vendor's own API, served where its base URL says and authenticated as the API is.
pub struct Native(pub &'static dyn UpstreamKind);

impl Platform for Native {
    fn api(&self) -> &'static dyn UpstreamKind {
        self.0
    }
}

/// An HTTP kind's registration, submitted from its folder by [`register!`].
pub struct Registered {
    pub spec: &'static crate::config::kind::KindSpec,
    pub platform: &'static dyn Platform,
}

inventory::collect!(Registered);

/// Registers an HTTP kind from its folder: its spec (what the configuration and the UI know of
/// it) and its platform (how it is called). The folder's `pub mod` line in this file is the
/// only line outside it that a new kind adds.
macro_rules! register {
    ($spec:path, $platform:expr) => {
        inventory::submit!(crate::config::kind::Registered(&$spec));
        inventory::submit!(crate::providers::kinds::Registered {
            spec: &$spec,
            platform: $platform,
        });
    };
}
pub(crate) use register;

/// The platform of a provider's kind; `None` for a subscription CLI.
pub fn platform(kind: crate::config::ProviderKind) -> Option<&'static dyn Platform> {
    inventory::iter::<Registered>
        .into_iter()
        .find(|r| kind.is(r.spec))
        .map(|r| r.platform)
}

/// A request for `model` on `p`, built by its API and authenticated by its platform.
pub fn request(
    client: &reqwest::Client,
    p: &ProviderEntry,
    model: &ModelInfo,
    key: Option<&ApiKey>,
    o: &Outbound,
) -> Result<reqwest::RequestBuilder, Classified> {
    let Some(platform) = platform(p.config.kind) else {
        return Err(crate::limits::classify_transport("not an HTTP provider"));
    };
    let Some(url) = platform.url(p, &model.id, o.stream) else {
        return Err(crate::limits::classify_transport(
            "provider base URL is not a valid URL",
        ));
    };
    if !platform.own_auth() {
        return platform.api().request(client, &url, p, model, key, o);
    }
    let rb = platform.api().request(client, &url, p, model, None, o)?;
    signed(client, platform, p, rb, key, o.now_ms, true)
}

/// Any request to `p` (a model list, a token count) with its platform's authentication and the
/// provider's configured headers.
pub fn authorize(
    client: &reqwest::Client,
    p: &ProviderEntry,
    rb: reqwest::RequestBuilder,
    key: Option<&ApiKey>,
    now_ms: i64,
) -> Result<reqwest::RequestBuilder, Classified> {
    let Some(platform) = platform(p.config.kind) else {
        return Err(crate::limits::classify_transport("not an HTTP provider"));
    };
    if !platform.own_auth() {
        return Ok(platform.api().authorize(rb, p, key));
    }
    let rb = platform.api().authorize(rb, p, None);
    signed(client, platform, p, rb, key, now_ms, false)
}

/// A request its platform shaped (a model call: `chat`) and signed.
fn signed(
    client: &reqwest::Client,
    platform: &dyn Platform,
    p: &ProviderEntry,
    rb: reqwest::RequestBuilder,
    key: Option<&ApiKey>,
    now_ms: i64,
    chat: bool,
) -> Result<reqwest::RequestBuilder, Classified> {
    let mut req = rb
        .build()
        .map_err(|e| crate::limits::classify_transport(e.to_string()))?;
    if chat {
        platform.shape(&mut req)?;
    }
    // A client's own login (`credentials: "client"`) is its own authentication.
    if p.config.credentials.is_baton() {
        platform.sign(&mut req, p, key, now_ms)?;
    }
    Ok(reqwest::RequestBuilder::from_parts(client.clone(), req))
}

/// The credential `p`'s platform makes of `key` for a request at `now_ms` (an exchanged access
/// token), when it makes one; `None`: send the key as it is.
pub async fn exchanged(
    client: &reqwest::Client,
    p: &ProviderEntry,
    key: Option<&ApiKey>,
    now_ms: i64,
) -> Result<Option<ApiKey>, Classified> {
    if !p.config.credentials.is_baton() {
        return Ok(None);
    }
    match platform(p.config.kind).and_then(|k| k.exchange(client, p, key, now_ms)) {
        Some(made) => made.await.map(Some),
        None => Ok(None),
    }
}

/// Puts a credential on `req` as `name: value`, marked sensitive so no debug output shows it:
/// every platform that authenticates its own way does it here.
pub(crate) fn put_secret(
    req: &mut reqwest::Request,
    name: reqwest::header::HeaderName,
    value: &str,
) -> Result<(), Classified> {
    let mut v = reqwest::header::HeaderValue::from_str(value).map_err(|_| {
        crate::limits::classify_transport("the credential is not a valid header value")
    })?;
    v.set_sensitive(true);
    req.headers_mut().insert(name, v);
    Ok(())
}

/// How `p`'s answer with `content_type` is framed.
pub fn framing(p: &crate::config::ProviderConfig, content_type: Option<&str>) -> Framing {
    platform(p.kind).map_or(Framing::Sse, |k| k.framing(content_type))
}

#[cfg(test)]
mod tests;
