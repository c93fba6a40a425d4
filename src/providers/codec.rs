//! What reading an HTTP upstream's answer yields, for every kind: a complete 2xx body's verdict
//! ([`Complete`]) and one stream event decoded into what routing and the stream pump need
//! ([`Decoded`]: content seen, finish, usage, an error, the canonical events when someone needs
//! them), with the helpers the kinds' decoders share. Each kind reads its own format
//! (`providers/kinds/`); the attempt and the pump contain no per-format code.

use serde_json::Value;

use crate::canonical::{StreamEvent, Usage};

/// An error an upstream put in a 2xx answer or a stream: the HTTP status it stands for and its
/// body as JSON (not yet redacted: the attempt redacts before anything else sees it).
#[derive(Debug)]
pub struct UpstreamError {
    pub status: u16,
    pub body: Value,
}

impl UpstreamError {
    /// The human part of the error, for an explicit error event.
    pub fn message(&self) -> &str {
        self.body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("upstream error")
    }
}

/// What a complete (non-streamed) 2xx body turned out to be.
#[derive(Debug)]
pub enum Complete {
    /// An answer, with the usage it reported.
    Answer(Option<Usage>),
    /// An error in a 2xx body.
    Error(UpstreamError),
    /// Neither: what it is not, in words.
    NotAnswer(&'static str),
}

/// One stream event, decoded once.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The stream's own terminator (`[DONE]`, `message_stop`).
    pub end: bool,
    pub error: Option<UpstreamError>,
    /// Carries part of the answer (text, a tool call, the finish): the stream can be committed.
    pub content: bool,
    pub finish: bool,
    pub usage: Option<Usage>,
    /// Bytes of answer text, for estimating tokens when no usage comes.
    pub text_bytes: usize,
    /// An OpenAI usage-only chunk (no choices): Baton asked for it on the client's behalf.
    pub usage_only: bool,
    /// The canonical events, when asked for (translating, resuming, before the commit).
    pub events: Vec<StreamEvent>,
    /// A thinking block's seal (Anthropic's signature, or a redacted block's data), for the
    /// book of who signed what (`thinking`).
    pub seal: Option<String>,
}

impl Decoded {
    pub(crate) fn from_events(events: Vec<StreamEvent>) -> Self {
        let mut d = Decoded::default();
        for e in &events {
            match e {
                StreamEvent::TextDelta(t) => d.text_bytes += t.len(),
                StreamEvent::Finish(_) => d.finish = true,
                StreamEvent::Usage(u) => d.usage = Some(*u),
                _ => {}
            }
            d.content |= e.is_content();
        }
        d.events = events;
        d
    }
}

/// An event whose data is not JSON.
#[derive(Debug, PartialEq, Eq)]
pub struct NotJson;

/// A searcher for a byte string, built once (building one per search showed in profiles).
macro_rules! token {
    ($s:literal) => {{
        static F: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new($s));
        &*F
    }};
}
pub(crate) use token;

/// Whether a quoted JSON token such as `"usage"` occurs in `data`. Inside a JSON string quotes
/// are escaped, so a hit is a key or a whole string value, never part of text.
pub(crate) fn has(data: &[u8], token: &memchr::memmem::Finder) -> bool {
    token.find(data).is_some()
}

/// Checks that `data` is JSON without building a tree.
pub(crate) fn check_json(data: &[u8]) -> Result<(), NotJson> {
    serde_json::from_slice::<serde::de::IgnoredAny>(data)
        .map(|_| ())
        .map_err(|_| NotJson)
}

/// Parses `data` into a tree.
pub(crate) fn parse(data: &[u8]) -> Result<Value, NotJson> {
    serde_json::from_slice(data).map_err(|_| NotJson)
}
