//! What an upstream kind's folder implements and registers (a leaf of the kinds' vocabulary):
//! the API's seam ([`UpstreamKind`], its stream [`Decode`]r and [`Framing`]), the platform's
//! ([`Platform`], [`Native`] for a vendor's own API), what a request carries ([`Outbound`]),
//! and [`register!`]. The registry and the entry points that use them are `kinds/mod.rs`.

use serde_json::{Map, Value};

use crate::canonical::search::{SearchHit, WebSearch};
use crate::canonical::{ChatRequest, ChatResponse, Wire};
use crate::limits::Classified;
use crate::providers::codec::{Complete, Decoded, NotJson};
use crate::providers::{ApiKey, ClientCredential, ModelInfo, ProviderEntry};

/// The client's body exactly as it came, when its dialect keeps that body unchanged and it
/// names `model` once among keys each written once: an upstream of the same API is sent
/// these bytes with only the model's value replaced ([`Outbound::verbatim`]),
/// instead of the parsed body written out again — nothing the client wrote is lost or
/// reordered, and a large body is not serialised a second time.
#[derive(Debug, Clone)]
pub struct Verbatim {
    pub wire: Wire,
    pub bytes: bytes::Bytes,
    /// Where the top-level `model` value (its JSON text, quotes included) lies in `bytes`;
    /// none when the client named no model in its body (Gemini's is in the URL).
    pub model: Option<std::ops::Range<usize>>,
}

/// What the client asked for, in the forms an upstream may take it in.
pub struct Outbound<'a> {
    /// The request in Chat Completions form, when it was made: the client's own body when it
    /// spoke that API, else made from `canonical` by the first upstream of that API that needs
    /// it ([`Outbound::openai_body`]).
    pub openai: &'a std::sync::OnceLock<Map<String, Value>>,
    /// The client's own body and its API, when it spoke another than Chat Completions: sent
    /// unchanged (but for the model) to upstreams of that API.
    pub original: Option<(Wire, &'a Map<String, Value>)>,
    /// The client's body as it came ([`Verbatim`]); read through [`Outbound::verbatim`].
    pub verbatim: Option<&'a Verbatim>,
    /// The client's own credential and identification headers, for providers with
    /// `credentials: "client"` (sent instead of any key of Baton's).
    pub client: Option<&'a ClientCredential>,
    /// `anthropic-beta` from the client, for Anthropic upstreams.
    pub anthropic_beta: Option<&'a str>,
    pub canonical: &'a ChatRequest,
    pub stream: bool,
    pub request_id: &'a str,
    /// Which of the client's thinking blocks may go to this account (kinds that sign their
    /// reasoning).
    pub thinking: crate::providers::thinking::Keep<'a>,
    /// When the request is made (Unix ms, from the routing clock): what a signature is dated.
    pub now_ms: i64,
}

impl<'a> Outbound<'a> {
    /// The client's bytes for `body`, when `body` is the client's own body in `wire` as it
    /// came (the very map the request holds, not a copy changed on the way): sent with only
    /// the model replaced.
    pub fn verbatim(&self, wire: Wire, body: &Map<String, Value>) -> Option<&'a Verbatim> {
        let v = self.verbatim.filter(|v| v.wire == wire)?;
        let own = match wire {
            Wire::OpenAi => self.openai.get(),
            _ => self.original.filter(|(w, _)| *w == wire).map(|(_, b)| b),
        }?;
        std::ptr::eq(own, body).then_some(v)
    }

    /// The request in Chat Completions form (made now, once per request, if it was not yet).
    pub fn openai_body(&self) -> &'a Map<String, Value> {
        let canonical = self.canonical;
        self.openai
            .get_or_init(|| crate::canonical::openai::request_to_openai(canonical))
    }
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
    /// Its vendor as OpenTelemetry's GenAI conventions name it (`gen_ai.provider.name`).
    fn gen_ai_system(&self) -> &'static str {
        "openai"
    }
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
    /// [`UpstreamKind::complete`], and for an answer the JSON check will read, the answer's
    /// text and whether it stopped at its token limit, read in the same pass without building
    /// the canonical answer (the check needs no more) when it has the plain shape: one answer,
    /// no tool call. No text: the check reads it through [`UpstreamKind::answer`].
    fn complete_with_text(&self, body: &[u8]) -> (Complete, Option<(String, bool)>) {
        (self.complete(body), None)
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

/// Where and how one vendor's service is called; its bytes are its API's.
pub trait Platform: Sync {
    /// The API it speaks.
    fn api(&self) -> &'static dyn UpstreamKind;
    /// Its service as OpenTelemetry's GenAI conventions name it (`gen_ai.provider.name`):
    /// its API's vendor unless the platform is a cloud's own.
    fn gen_ai_system(&self) -> &'static str {
        self.api().gen_ai_system()
    }
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
    /// Whether it counts tokens: its API's count ([`UpstreamKind::count_request`]) at the API's
    /// own address, or in its own form ([`Platform::count_shape`]).
    fn counts_tokens(&self) -> bool {
        !self.own_auth()
    }
    /// Its own address and form for the token count its API built for `model` (Bedrock's
    /// CountTokens, Vertex AI's `count-tokens`); `false`: this model is not counted there (the
    /// local estimate stands).
    fn count_shape(
        &self,
        _p: &ProviderEntry,
        _model: &str,
        _req: &mut reqwest::Request,
    ) -> Result<bool, Classified> {
        Ok(true)
    }
    /// How an answer with this content type is framed.
    fn framing(&self, _content_type: Option<&str>) -> Framing {
        self.api().framing()
    }
    /// It is the vendor's own backend its client was written for (ChatGPT's, for Codex): the
    /// client's body goes as its client wrote it, nothing reshaped for the vendor's public API.
    fn backend(&self) -> bool {
        false
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
        inventory::submit!(crate::providers::kinds::contract::Registered {
            spec: &$spec,
            platform: $platform,
        });
    };
}
pub(crate) use register;

/// The platform of a provider's kind, as its folder registered it; `None` for a subscription
/// CLI.
pub fn platform(kind: crate::config::ProviderKind) -> Option<&'static dyn Platform> {
    inventory::iter::<Registered>
        .into_iter()
        .find(|r| kind.is(r.spec))
        .map(|r| r.platform)
}

/// A cloud kind's region: the one the provider gives, else what `from_host` reads in its base
/// URL's host (Bedrock's and Vertex AI's regional endpoints name theirs).
pub(crate) fn region_of(
    base_url: &str,
    given: Option<&str>,
    from_host: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    if let Some(r) = given.filter(|r| !r.is_empty()) {
        return Some(r.to_string());
    }
    let rest = base_url.split_once("://")?.1;
    from_host(rest.split(['/', ':', '?']).next()?)
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
