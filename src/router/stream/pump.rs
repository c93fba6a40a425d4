//! A committed stream's state (a leaf of the stream module): what `stream.rs` pumps to the
//! client, and what `resume.rs` needs to continue it on another target after a break.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::source::Source;
use crate::canonical::Usage;
use crate::router::record::Record;
use crate::router::snapshot::Target;
use crate::router::types::Slot;

/// The client's stream encoder: its dialect's events, error and end frames. The pump holds
/// it and knows no dialect.
pub type Out = Box<dyn crate::canonical::StreamEncode>;

pub(super) struct Pump {
    pub(super) source: Source,
    pub(super) queued: VecDeque<Bytes>,
    pub(super) rec: Record,
    pub(super) target: Target,
    pub(super) _slot: Slot,
    pub(super) finish_seen: bool,
    pub(super) ended: bool,
    pub(super) resume: Option<Resume>,
    /// Present when the stream may resume on another target.
    pub(super) parts: Option<Box<Parts>>,
    pub(super) client_wants_usage: bool,
    pub(super) prompt_tokens: u64,
    /// Some usage was reported; otherwise the end estimates it from the bytes of content.
    pub(super) usage_seen: bool,
    pub(super) content_bytes: u64,
    pub(super) out: Out,
    /// The JSON the client asked for, and the answer's text so far, checked at the end.
    pub(super) json: Option<Box<Json>>,
    /// The check's verdict, said in a comment before the stream's end (`baton-output: …`).
    pub(super) verdict: Option<String>,
}

/// A JSON-mode stream's check: what was asked, and the text gathered to check at the end.
pub(super) struct Json {
    pub(super) expect: crate::structured::Expect,
    pub(super) seen: crate::structured::StreamText,
}

/// What a stream needs to continue elsewhere after a break.
pub struct Resume {
    pub routing: Arc<crate::router::context::Routing>,
    /// The client's original request body.
    pub body: Map<String, Value>,
    /// Candidates that declared prefill support, in order.
    pub targets: VecDeque<Target>,
    /// Estimated prompt tokens, for an attempt that broke before reporting its usage.
    pub prompt_tokens: u64,
}

/// A resumable stream's bookkeeping: the parts so far, so the answer reads as one and every
/// part's tokens count.
#[derive(Default)]
pub(super) struct Parts {
    /// Text forwarded so far.
    pub(super) text: String,
    /// Where the current attempt's text starts in `text`.
    pub(super) attempt_start: usize,
    /// The first attempt's chunk id, kept on every continuation.
    pub(super) id: Option<String>,
    /// Usage the current attempt reported, if any.
    pub(super) attempt_usage: Option<Usage>,
    /// Tokens of the attempts that broke (reported, else estimated).
    pub(super) carried: Usage,
    pub(super) prompt_tokens: u64,
    /// Targets that served a part, and why each one before the last broke.
    pub(super) chain: Vec<String>,
    pub(super) breaks: Vec<String>,
}
