//! The router's vocabulary (a leaf): the request it is handed, what an attempt and a dispatch
//! produce, a provider's concurrency slot, and the trait the fallback loop reaches upstreams
//! through. The loop and its parts are the other files; `mod.rs` is the entry point.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};
use tokio::sync::OwnedSemaphorePermit;

use super::snapshot::Target;
use crate::canonical::{ChatRequest, Needs, Usage};
use crate::limits::Classified;
use crate::providers::outbound::Wire;
use crate::providers::ProviderEntry;

/// Largest non-streamed upstream body accepted.
pub(crate) const MAX_UPSTREAM_BODY: usize = 64 * 1024 * 1024;
/// Longest error body read for classification.
pub(crate) const MAX_ERROR_BODY: usize = 64 * 1024;
/// Events buffered before the first content event; past this the stream is committed anyway.
pub(crate) const MAX_PRELUDE_EVENTS: usize = 64;

/// A client request after parsing and authentication.
#[derive(Clone)]
pub struct Inbound {
    /// The request in Chat Completions form: the client's own body when it spoke that API,
    /// else made from the canonical request the first time an upstream of that API needs it
    /// ([`Inbound::openai_body`]); a request served in its own API or another never builds it.
    pub openai: std::sync::OnceLock<Map<String, Value>>,
    /// The client's own body when it spoke another API than Chat Completions: sent unchanged
    /// (but for the model) to upstreams of that API, keeping what has no canonical form
    /// (thinking signatures, cache control, stored conversations).
    pub original: Option<Original>,
    /// The client's body as it came, for an upstream of its API (`providers::outbound::Verbatim`);
    /// none for a request Baton made, and never on a copy (see [`ClientBytes`]).
    pub verbatim: ClientBytes,
    /// The client's own credential, for providers with `credentials: "client"`.
    pub client: Option<crate::providers::ClientCredential>,
    /// `anthropic-beta` from the client, passed to Anthropic upstreams.
    pub anthropic_beta: Option<String>,
    pub canonical: ChatRequest,
    pub needs: Needs,
    /// Per-request deadline from `x-gateway-timeout-ms`, overriding `routing.requestTimeoutMs`.
    pub deadline_ms: Option<u64>,
    /// The conversation this request belongs to (`affinity`): where it is served is remembered.
    pub conversation: Option<super::affinity::Conversation>,
    /// Whether it goes where its conversation was last served (a named conversation, or an
    /// unnamed one past its first turn: `Conversation::follows_unnamed`).
    pub follows: bool,
    /// The request continues a conversation its API's server stores (the dialect says so):
    /// only an upstream of the client's own API can take it.
    pub continues: Option<Continues>,
    /// The check of the JSON the client asked for (`canonical.output`), its schema compiled
    /// the first time an answer is checked ([`Inbound::expect`]).
    pub expect: std::sync::OnceLock<Option<crate::structured::Expect>>,
    /// Its trace context (`telemetry`): Baton's trace, or the client's `traceparent` relayed.
    pub trace: Option<std::sync::Arc<crate::telemetry::Trace>>,
    /// Its capture, when one is armed (`capture`): upstream requests and answers are kept in it.
    pub capture: Option<std::sync::Arc<crate::capture::Capture>>,
}

/// The client's bytes, held by the request they came with. A copy of an [`Inbound`] is made to
/// change it (a schema told as text, a search round, a resumed stream), so a clone holds none:
/// whatever it sends is written out from what it holds, never the client's bytes.
#[derive(Debug, Default)]
pub struct ClientBytes(pub Option<crate::providers::outbound::Verbatim>);

impl Clone for ClientBytes {
    fn clone(&self) -> Self {
        Self(None)
    }
}

/// A conversation stored upstream that the request continues.
#[derive(Debug, Clone)]
pub struct Continues {
    /// Why other upstreams are passed over, for Activity.
    pub why: &'static str,
    /// The answer when no upstream of the client's API can take it.
    pub failure: Failure,
}

/// A client's own request body and the API it is in.
#[derive(Debug, Clone)]
pub struct Original {
    pub wire: Wire,
    pub body: Map<String, Value>,
}

impl Inbound {
    /// The prompt as the client sent it (its API's own fields), for spans that carry content.
    pub fn prompt(&self) -> String {
        let body = match &self.original {
            Some(o) => Some(&o.body),
            None => self.openai.get(),
        };
        let Some(body) = body else {
            return String::new();
        };
        let fields: serde_json::Map<String, serde_json::Value> = [
            "system",
            "instructions",
            "systemInstruction",
            "messages",
            "input",
            "contents",
        ]
        .iter()
        .filter_map(|k| body.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
        serde_json::to_string(&fields).unwrap_or_default()
    }

    /// A new span id for an upstream attempt when Baton traces this request (0 otherwise).
    pub fn attempt_span(&self) -> u64 {
        self.trace.as_ref().map_or(0, |t| t.attempt_span())
    }

    /// The request in Chat Completions form, made now if it was not yet.
    pub fn openai_body(&self) -> &Map<String, Value> {
        self.openai
            .get_or_init(|| crate::canonical::openai::request_to_openai(&self.canonical))
    }

    /// The check its answers take, when the client asked for JSON.
    pub fn expect(&self) -> Option<&crate::structured::Expect> {
        self.expect
            .get_or_init(|| {
                self.canonical
                    .output
                    .as_ref()
                    .map(crate::structured::Expect::new)
            })
            .as_ref()
    }

    /// This request for a model that does not honour a JSON schema: the JSON asked for is
    /// told in its system prompt instead, and the request is translated from the canonical
    /// one (the client's own body would ask for the format natively). Its answer is checked
    /// against `expect` all the same. `None` when nothing needs to change.
    pub fn instructed_for(&self, model: &crate::providers::ModelInfo) -> Option<Inbound> {
        let format = self.canonical.output.as_ref()?;
        if model.structured_output || self.continues.is_some() {
            return None;
        }
        let mut canonical = self.canonical.clone();
        canonical
            .system
            .push(crate::structured::instruction(format));
        canonical.output = None;
        Some(Inbound {
            openai: std::sync::OnceLock::new(),
            original: None,
            canonical,
            expect: std::sync::OnceLock::new(),
            ..self.clone()
        })
    }

    /// The client's own body, when it spoke `wire`.
    pub fn original(&self, wire: Wire) -> Option<&Map<String, Value>> {
        self.original
            .as_ref()
            .filter(|o| o.wire == wire)
            .map(|o| &o.body)
    }
}

/// A concurrency slot on a provider, released when the answer is complete.
pub struct Slot {
    _permit: Option<OwnedSemaphorePermit>,
    /// The slot every instance counts, when state is shared.
    _lease: Option<crate::shared::Lease>,
    provider: Arc<ProviderEntry>,
}

impl Slot {
    pub(crate) fn new(provider: Arc<ProviderEntry>, permit: Option<OwnedSemaphorePermit>) -> Self {
        provider.runtime.in_flight.fetch_add(1, Ordering::Relaxed);
        Self {
            _permit: permit,
            _lease: None,
            provider,
        }
    }

    /// Holds the slot every instance counts too (shared state), given back with this one.
    pub(crate) fn hold(&mut self, lease: crate::shared::Lease) {
        self._lease = Some(lease);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.provider
            .runtime
            .in_flight
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A successful upstream answer.
pub enum Served {
    Complete(Completed),
    Stream(Streamed),
}

/// A whole answer.
pub struct Completed {
    pub target: Target,
    pub reply: Reply,
    pub usage: Option<Usage>,
    pub slot: Slot,
    /// How the JSON the client asked for turned out (`valid`, `repaired`), when it asked.
    pub output: Option<crate::structured::Checked>,
}

/// A stream committed after its first content.
pub struct Streamed {
    pub target: Target,
    /// The rest of the stream.
    pub source: super::stream::source::Source,
    /// The events held back until the first content, decoded once.
    pub prelude: Vec<Held>,
    pub slot: Slot,
    /// Candidates that may continue this stream if it breaks (route `resumeOnBreak`).
    pub resume: Vec<Target>,
    /// How the JSON the client asked for turned out, when the stream was read whole to check
    /// it (`routing.validateStreams`); else it is checked at its end.
    pub output: Option<crate::structured::Checked>,
}

/// A complete answer's body: the upstream's bytes in its wire format, or (from a CLI) canonical
/// already.
pub enum Reply {
    Wire(Bytes, Wire),
    Canonical(crate::canonical::ChatResponse),
}

/// Why no upstream answer can be given.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The upstream rejected the request itself; its own error goes back to the client.
    Client { status: u16, body: Bytes },
    /// An Anthropic message thread only an Anthropic server holds, and none can take it.
    ThreadNotFound(String),
    /// Every candidate is out for a stated time, not all of it limits (an overload's
    /// `Retry-After`, an open breaker): the client may try again at `retry_at_ms`.
    Unavailable { retry_at_ms: i64, summary: String },
    /// Every candidate failed or is cooling; `retry_at_ms` is set when all were rate-limited.
    Exhausted {
        retry_at_ms: Option<i64>,
        summary: String,
    },
    /// Nothing to route to (no providers, all disabled or unavailable).
    NoProvider(String),
    /// No candidate has the capabilities this request needs.
    Unsupported(String),
    /// The request continues a conversation stored upstream, and no candidate stores one.
    NoStoredConversation(String),
    /// Every candidate was busy for the whole queue wait, or the queue was full.
    Busy {
        retry_after_ms: u64,
        message: String,
    },
    /// The request's deadline passed.
    Deadline(u64),
}

/// What one attempt produced before the target and slot are attached.
pub(crate) enum Answer {
    /// A whole answer, its usage, and (read with it for the JSON check, where the kind could)
    /// its text and whether it stopped at its token limit.
    Complete(Reply, Option<Usage>, Option<(String, bool)>),
    Stream {
        source: super::stream::source::Source,
        prelude: Vec<Held>,
    },
}

/// One stream event held back before the commit: as received, and decoded.
pub struct Held {
    pub raw: Bytes,
    pub decoded: crate::providers::codec::Decoded,
}

pub(crate) enum Attempt {
    Served(Answer),
    Failed {
        classified: Classified,
        status: Option<u16>,
        body: Option<Bytes>,
    },
}

pub(crate) enum Pick {
    Go(usize),
    /// Out until this instant, why, and what kind of wait that is.
    Cooling(i64, String, Back),
}

/// What a candidate's absence means for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Back {
    /// A limit to wait out (rate or spending): "every candidate is rate-limited".
    Limit(i64),
    /// A stated or bounded wait after failures (overload with its `Retry-After`, an open
    /// breaker): the client may try again at this instant.
    At(i64),
    /// Out with no time to name (unreachable, a rejected key, no such model).
    Unknown,
}

/// How the fallback loop reaches an upstream: one call per attempt, up to the first content of
/// a stream or the whole answer. [`Live`] sends HTTP (the request built for the target's kind,
/// the answer read by its codec) or spawns a CLI; the loop's unit tests script answers.
pub(crate) trait Upstream: Sync {
    fn attempt<'a>(
        &'a self,
        t: &'a Target,
        key: Option<&'a crate::providers::ApiKey>,
        inbound: &'a Inbound,
        request_id: &'a str,
    ) -> impl std::future::Future<Output = Attempt> + Send + 'a;
}

/// How many hedges may be sent now: earned by requests that could be hedged, spent by hedges;
/// one is held from the start, so that the first slow request a user tries is hedged.
#[derive(Debug)]
pub struct HedgeBudget(std::sync::Mutex<f64>);

impl Default for HedgeBudget {
    fn default() -> Self {
        Self(std::sync::Mutex::new(1.0))
    }
}

impl HedgeBudget {
    /// A request that may be hedged earns `percent` / 100 of a hedge; at most `percent` hedges
    /// (at least one) are held, so a quiet hour does not become a burst.
    pub(crate) fn earn(&self, percent: f64) {
        if let Ok(mut b) = self.0.lock() {
            *b = (*b + percent / 100.0).min(percent.max(1.0));
        }
    }

    /// Takes one hedge, if one is held.
    pub(crate) fn spend(&self) -> bool {
        let Ok(mut b) = self.0.lock() else {
            return false;
        };
        if *b < 1.0 {
            return false;
        }
        *b -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::ClientBytes;
    use crate::providers::outbound::{Verbatim, Wire};

    /// A copy is made to change the request: it must write out what it holds.
    #[test]
    fn a_copy_of_a_request_never_carries_the_clients_bytes() {
        let own = ClientBytes(Some(Verbatim {
            wire: Wire::OpenAi,
            bytes: bytes::Bytes::from_static(br#"{"model":"m"}"#),
            model: Some(9..12),
        }));
        assert!(own.0.is_some());
        assert!(own.clone().0.is_none());
    }
}
