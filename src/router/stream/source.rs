//! Where a committed stream's events come from: an HTTP upstream's SSE body, each event decoded
//! once by the upstream kind's codec, or a subscription CLI's output, which is canonical from
//! the start (the CLI's own lines were decoded by `providers::cli`) and has no wire format to
//! pass through: the pump encodes it straight into the client's format.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use crate::canonical::StreamEvent;
use crate::providers::cli::{run::CliRun, CliItem};
use crate::providers::codec::Decoded;
use crate::providers::kinds::Decode;
use crate::providers::outbound::Wire;
use crate::providers::sse::{SseEvent, SseReader};
use crate::redact::Redactor;

pub enum Source {
    Sse {
        reader: SseReader,
        codec: Box<dyn Decode>,
    },
    Cli(CliEvents),
    /// Nothing more: the whole answer is in the prelude (a hosted search's answer, made of
    /// several complete rounds).
    Finished,
}

/// What the source gave next.
pub(crate) enum Next {
    /// One event: its bytes as received (empty for a CLI) and, unless it was a comment or
    /// keep-alive, what it decoded to.
    Event(Bytes, Option<Decoded>),
    /// The upstream's body ended.
    End,
    /// The upstream broke, stalled or sent something unreadable: why.
    Broke(String),
}

impl Source {
    /// The format of the source's bytes; `None` when it has none (a CLI).
    pub fn wire(&self) -> Option<Wire> {
        match self {
            Source::Sse { codec, .. } => Some(codec.wire()),
            Source::Cli(_) | Source::Finished => None,
        }
    }

    /// The next event, waiting for it (bounded by the idle timeout). `events`: whether the
    /// canonical events are needed (an SSE codec may skip building them otherwise).
    pub(crate) async fn next(&mut self, events: bool) -> Next {
        match self {
            Source::Sse { reader, codec } => match reader.next_event().await {
                Ok(Some(ev)) => decode(codec, ev, events),
                Ok(None) => Next::End,
                Err(e) => Next::Broke(e.to_string()),
            },
            Source::Cli(cli) => cli.next().await,
            Source::Finished => Next::End,
        }
    }

    /// An event that has already arrived, without waiting.
    pub(crate) fn buffered(&mut self, events: bool) -> Option<Next> {
        match self {
            Source::Sse { reader, codec } => {
                reader.buffered_event().map(|ev| decode(codec, ev, events))
            }
            Source::Cli(cli) => cli.buffered(),
            Source::Finished => None,
        }
    }
}

fn decode(codec: &mut Box<dyn Decode>, ev: SseEvent, events: bool) -> Next {
    let Some(data) = &ev.data else {
        return Next::Event(ev.raw, None);
    };
    match codec.decode(data, events) {
        Ok(d) => Next::Event(ev.raw, Some(d)),
        // An event that is not JSON after content has reached the client would crash the
        // client's parser (the official SDKs raise mid-stream): end explicitly instead.
        Err(_) => Next::Broke("the upstream sent an event that is not JSON".into()),
    }
}

/// A running CLI's items as canonical stream events. Its finish is followed by the end of the
/// stream at once (the CLI may take a moment to exit after its answer).
pub struct CliEvents {
    run: CliRun,
    idle: Duration,
    redactor: Arc<Redactor>,
    end_next: bool,
}

impl CliEvents {
    pub(crate) fn new(run: CliRun, idle: Duration, redactor: Arc<Redactor>) -> Self {
        Self {
            run,
            idle,
            redactor,
            end_next: false,
        }
    }

    async fn next(&mut self) -> Next {
        if let Some(end) = self.end() {
            return end;
        }
        match tokio::time::timeout(self.idle, self.run.next()).await {
            Err(_) => Next::Broke(format!(
                "the CLI went silent for {} ms",
                self.idle.as_millis()
            )),
            Ok(None) => Next::Broke("the CLI stopped mid-answer".into()),
            Ok(Some(item)) => self.item(item),
        }
    }

    fn buffered(&mut self) -> Option<Next> {
        self.end()
            .or_else(|| self.run.try_next().map(|i| self.item(i)))
    }

    fn end(&mut self) -> Option<Next> {
        std::mem::take(&mut self.end_next).then(|| {
            Next::Event(
                Bytes::new(),
                Some(Decoded {
                    end: true,
                    ..Decoded::default()
                }),
            )
        })
    }

    /// One CLI item as a decoded event (a failure breaks the stream with its redacted reason).
    pub(crate) fn item(&mut self, item: CliItem) -> Next {
        let event = match item {
            CliItem::Text(t) => StreamEvent::TextDelta(t),
            CliItem::Usage(u) => StreamEvent::Usage(u),
            CliItem::Finish(stop) => {
                self.end_next = true;
                StreamEvent::Finish(stop)
            }
            CliItem::Failed(c) => return Next::Broke(self.redactor.string(c.reason)),
            // Claude reports its windows before the answer (read by the attempt); one after
            // the answer has begun is not news worth holding the stream for.
            CliItem::Window(_) => return Next::Event(Bytes::new(), None),
        };
        Next::Event(Bytes::new(), Some(Decoded::from_events(vec![event])))
    }
}
