//! Incremental server-sent-events reader over an upstream body. Each byte is scanned once
//! (a cursor remembers where the last scan stopped), events are bounded in size, and every
//! read is bounded by the provider's idle timeout.

use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt, Stream, StreamExt};

/// Largest single event accepted from an upstream.
pub const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// An upstream body: HTTP (errors already described in words) or a CLI's translated output.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// One complete event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    /// The event exactly as received, including its terminating blank line.
    pub raw: Bytes,
    /// The `data:` lines joined by `\n`, if any.
    pub data: Option<Bytes>,
}

impl SseEvent {
    pub fn is_done(&self) -> bool {
        self.data.as_deref() == Some(b"[DONE]")
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SseError {
    #[error("no data from upstream for {0} ms")]
    Idle(u64),
    #[error("upstream connection failed: {0}")]
    Transport(String),
    #[error("upstream answer is larger than Baton accepts")]
    TooLarge,
}

pub struct SseReader {
    body: ByteStream,
    buf: BytesMut,
    /// Where the next unscanned line starts (relative to `buf`).
    scan: usize,
    idle: Duration,
    eof: bool,
    /// A transport error found while looking ahead, reported by the next read.
    failed: Option<String>,
}

impl SseReader {
    /// The reader for a kind's stream framing (`kinds::Framing`): the one place that names
    /// the framings, so a kind with another one needs no change in the attempt or the pump.
    pub fn framed(framing: super::kinds::Framing, body: ByteStream, idle: Duration) -> Self {
        match framing {
            super::kinds::Framing::Sse => Self::new(body, idle),
            super::kinds::Framing::AwsEventStream => {
                Self::new(super::eventstream::as_sse(body, MAX_EVENT_BYTES), idle)
            }
        }
    }

    pub fn new(body: ByteStream, idle: Duration) -> Self {
        Self {
            body,
            buf: BytesMut::with_capacity(8 * 1024),
            scan: 0,
            idle,
            eof: false,
            failed: None,
        }
    }

    /// The next event; `Ok(None)` at a clean end of the body.
    pub async fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        loop {
            if let Some(ev) = self.take_event() {
                return Ok(Some(ev));
            }
            if self.eof {
                // A final event without its blank line still counts.
                if self.buf.iter().any(|b| !b.is_ascii_whitespace()) {
                    self.buf.extend_from_slice(b"\n\n");
                    continue;
                }
                return Ok(None);
            }
            if self.buf.len() > MAX_EVENT_BYTES {
                return Err(SseError::TooLarge);
            }
            self.fill().await?;
        }
    }

    /// The next event if it has already arrived in full, without waiting: from the buffer, or
    /// from body chunks the connection already holds (an upstream that sends a burst arrives
    /// as one chunk per event). A transport error met here is kept for the next read.
    pub fn buffered_event(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(ev) = self.take_event() {
                return Some(ev);
            }
            if self.eof || self.failed.is_some() || self.buf.len() > MAX_EVENT_BYTES {
                return None;
            }
            match self.body.next().now_or_never()? {
                None => self.eof = true,
                Some(Err(e)) => self.failed = Some(e),
                Some(Ok(chunk)) => self.buf.extend_from_slice(&chunk),
            }
        }
    }

    /// Appends the next chunk of the body to the buffer, or notes its end; bounded by the idle
    /// timeout.
    async fn fill(&mut self) -> Result<(), SseError> {
        if let Some(e) = self.failed.take() {
            return Err(SseError::Transport(e));
        }
        match tokio::time::timeout(self.idle, self.body.next()).await {
            Err(_) => Err(SseError::Idle(self.idle.as_millis() as u64)),
            Ok(None) => {
                self.eof = true;
                Ok(())
            }
            Ok(Some(Err(e))) => Err(SseError::Transport(e)),
            Ok(Some(Ok(chunk))) => {
                self.buf.extend_from_slice(&chunk);
                Ok(())
            }
        }
    }

    /// Reads the whole remaining body as plain bytes (for JSON answers), bounded by `max`.
    pub async fn read_to_end(&mut self, max: usize) -> Result<Bytes, SseError> {
        while !self.eof {
            if self.buf.len() > max {
                return Err(SseError::TooLarge);
            }
            self.fill().await?;
        }
        if self.buf.len() > max {
            return Err(SseError::TooLarge);
        }
        self.scan = 0;
        Ok(self.buf.split().freeze())
    }

    /// Cuts one complete event off the buffer if a blank line has arrived.
    fn take_event(&mut self) -> Option<SseEvent> {
        let mut line_start = self.scan;
        while let Some(off) = memchr::memchr(b'\n', &self.buf[line_start..]) {
            let nl = line_start + off;
            let line = &self.buf[line_start..nl];
            let blank = line.is_empty() || line == b"\r";
            if blank {
                let raw = self.buf.split_to(nl + 1).freeze();
                self.scan = 0;
                if raw.iter().all(|b| *b == b'\n' || *b == b'\r') {
                    // Stray blank lines between events.
                    line_start = 0;
                    continue;
                }
                let data = data_of(&raw);
                return Some(SseEvent { raw, data });
            }
            line_start = nl + 1;
        }
        self.scan = line_start;
        None
    }
}

fn data_of(raw: &Bytes) -> Option<Bytes> {
    let mut single: Option<Bytes> = None;
    let mut joined: Option<Vec<u8>> = None;
    let mut pos = 0;
    for line in raw.split(|b| *b == b'\n') {
        let start = pos;
        pos += line.len() + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(rest) = line.strip_prefix(b"data:") else {
            continue;
        };
        let rest = rest.strip_prefix(b" ").unwrap_or(rest);
        let offset = start + (line.len() - rest.len());
        match (&mut single, &mut joined) {
            (None, None) => single = Some(raw.slice(offset..offset + rest.len())),
            (Some(first), None) => {
                let mut v = first.to_vec();
                v.push(b'\n');
                v.extend_from_slice(rest);
                joined = Some(v);
            }
            (_, Some(v)) => {
                v.push(b'\n');
                v.extend_from_slice(rest);
            }
        }
    }
    joined.map(Bytes::from).or(single)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(chunks: Vec<&'static [u8]>) -> SseReader {
        let s = futures_util::stream::iter(chunks.into_iter().map(|c| Ok(Bytes::from_static(c))));
        SseReader::new(Box::pin(s), Duration::from_secs(5))
    }

    #[tokio::test]
    async fn splits_events_across_chunk_boundaries() {
        let mut r = reader(vec![
            b"data: {\"a\":",
            b"1}\n",
            b"\n: keep-alive\n\ndata: x\r\ndata: y\r\n\r\n",
            b"data: [DONE]\n\n",
        ]);
        let e1 = r.next_event().await.expect("ok").expect("event");
        assert_eq!(e1.data.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(&e1.raw[..], b"data: {\"a\":1}\n\n");
        let e2 = r.next_event().await.expect("ok").expect("event");
        assert_eq!(e2.data, None, "comment has no data");
        let e3 = r.next_event().await.expect("ok").expect("event");
        assert_eq!(e3.data.as_deref(), Some(&b"x\ny"[..]));
        let e4 = r.next_event().await.expect("ok").expect("event");
        assert!(e4.is_done());
        assert_eq!(r.next_event().await, Ok(None));
    }

    #[tokio::test]
    async fn buffered_events_are_taken_without_waiting_and_a_break_is_kept_for_the_next_read() {
        let items: Vec<Result<Bytes, String>> = vec![
            Ok(Bytes::from_static(b"data: 1\n\n")),
            Ok(Bytes::from_static(b"data: 2\n\ndata: 3\n\n")),
            Err("reset".into()),
        ];
        // Ready chunks, then a body that has nothing yet.
        let body = futures_util::stream::iter(items).chain(futures_util::stream::pending());
        let mut r = SseReader::new(Box::pin(body), Duration::from_secs(5));
        assert_eq!(
            r.next_event().await.unwrap().unwrap().data.as_deref(),
            Some(&b"1"[..])
        );
        assert_eq!(r.buffered_event().unwrap().data.as_deref(), Some(&b"2"[..]));
        assert_eq!(r.buffered_event().unwrap().data.as_deref(), Some(&b"3"[..]));
        assert_eq!(r.buffered_event(), None, "the error is not an event");
        assert_eq!(r.buffered_event(), None);
        assert_eq!(
            r.next_event().await,
            Err(SseError::Transport("reset".into())),
            "the error found while looking ahead is not lost"
        );
        let quiet = futures_util::stream::pending::<Result<Bytes, String>>();
        let mut r = SseReader::new(Box::pin(quiet), Duration::from_secs(5));
        assert_eq!(r.buffered_event(), None, "nothing has arrived: no wait");
    }

    #[tokio::test]
    async fn unterminated_last_event_is_delivered() {
        let mut r = reader(vec![b"data: tail"]);
        let e = r.next_event().await.expect("ok").expect("event");
        assert_eq!(e.data.as_deref(), Some(&b"tail"[..]));
        assert_eq!(r.next_event().await, Ok(None));
    }

    #[tokio::test]
    async fn idle_upstream_times_out() {
        let s = futures_util::stream::pending();
        let mut r = SseReader::new(Box::pin(s), Duration::from_millis(20));
        assert_eq!(r.next_event().await, Err(SseError::Idle(20)));
    }
}
