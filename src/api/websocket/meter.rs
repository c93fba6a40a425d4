//! What a WebSocket client makes Baton hold before a message is whole: the upgraded
//! connection's bytes pass through a [`Metered`] stream that reads the frame headers as they go
//! by (the WebSocket library still parses everything) and so knows, at every moment, how many
//! bytes of data messages have been read and not yet handed to the server, and since when a
//! message has been arriving. Those bytes are charged to the gateway's memory budget as they
//! are read, exactly as an HTTP body is: when the budget is spent the read fails and the
//! connection closes, instead of memory growing. Control frames (pings) cost nothing here; their
//! answers are bounded on the write side.
//!
//! The write side notes since when the client has not been taking what is written to it, so a
//! client that never reads is disconnected instead of being written to for ever.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::api::budget::{Charge, Inbound};

/// The longest frame header: 2 bytes, an 8-byte length and a 4-byte mask.
const MAX_HEADER: usize = 14;

/// Where the frame reader is.
#[derive(Default)]
struct Frames {
    header: [u8; MAX_HEADER],
    have: usize,
    /// Payload bytes of the current frame still to come.
    left: u64,
    /// The current frame carries data (text, binary or a continuation), and whether it ends
    /// its message.
    data: bool,
    fin: bool,
}

/// One connection's account.
#[derive(Default)]
struct Account {
    frames: Frames,
    /// Bytes of data frames read and not yet taken by the server (whole messages waiting in
    /// `done`, then the one arriving).
    pending: usize,
    /// Sizes of whole messages read, oldest first, not yet taken.
    done: std::collections::VecDeque<usize>,
    /// Bytes of the message arriving now, and when its first byte and its latest came.
    arriving: usize,
    started: Option<Instant>,
    latest: Option<Instant>,
    charge: Charge,
    /// Reading failed because the budget could not hold what arrived.
    refused: bool,
    /// Since when writes have been waiting on the client.
    write_blocked: Option<Instant>,
}

/// The account shared by the stream and the connection's task.
#[derive(Clone)]
pub(crate) struct Meter {
    inner: Arc<Mutex<Account>>,
    budget: Arc<Inbound>,
}

/// A message arriving: how long since its first byte, how many bytes so far, and how long
/// since the last one.
pub(crate) struct Arriving {
    pub bytes: usize,
    pub for_ms: u64,
    pub silent_ms: u64,
}

impl Meter {
    pub(crate) fn new(budget: Arc<Inbound>) -> Self {
        Self {
            inner: Arc::default(),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Account> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Accounts for bytes just read; an error when the budget cannot hold them.
    fn read(&self, bytes: &[u8]) -> io::Result<()> {
        let mut a = self.lock();
        let before = a.pending;
        let now = Instant::now();
        let mut i = 0;
        while i < bytes.len() {
            i += a.step(&bytes[i..], now);
        }
        let more = a.pending - before;
        if more == 0 {
            return Ok(());
        }
        let held = a.charge.units_bytes();
        let need = a.pending.saturating_sub(held);
        if need == 0 {
            return Ok(());
        }
        let mut charge = std::mem::take(&mut a.charge);
        let r = self.budget.charge(&mut charge, need);
        a.charge = charge;
        r.map_err(|_| {
            a.refused = true;
            io::Error::other("the memory budget is spent")
        })
    }

    /// The next whole message was taken by the server: its bytes leave this account, with
    /// their charge, which the admission goes on from.
    pub(crate) fn take(&self) -> Charge {
        let mut a = self.lock();
        let Some(bytes) = a.done.pop_front() else {
            return Charge::default();
        };
        a.pending = a.pending.saturating_sub(bytes);
        let keep = a.pending;
        a.charge.split_beyond(keep)
    }

    /// The message arriving now, if one is.
    pub(crate) fn arriving(&self) -> Option<Arriving> {
        let a = self.lock();
        let started = a.started?;
        let ms = |t: Instant| t.elapsed().as_millis() as u64;
        Some(Arriving {
            bytes: a.arriving,
            for_ms: ms(started),
            silent_ms: a.latest.map_or(0, ms),
        })
    }

    /// How long writes have waited on a client that is not reading, if they are waiting.
    pub(crate) fn write_blocked_ms(&self) -> Option<u64> {
        self.lock()
            .write_blocked
            .map(|t| t.elapsed().as_millis() as u64)
    }

    /// Whether a read failed because the budget could not hold what arrived.
    pub(crate) fn refused(&self) -> bool {
        self.lock().refused
    }

    fn wrote(&self, blocked: bool) {
        let mut a = self.lock();
        match (blocked, a.write_blocked) {
            (true, None) => a.write_blocked = Some(Instant::now()),
            (false, Some(_)) => a.write_blocked = None,
            _ => {}
        }
    }
}

impl Account {
    /// Reads what it can of `bytes` into the frame in progress; returns how many it used.
    fn step(&mut self, bytes: &[u8], now: Instant) -> usize {
        let f = &mut self.frames;
        if f.left > 0 {
            let n = (f.left.min(bytes.len() as u64)) as usize;
            f.left -= n as u64;
            if f.data {
                self.pending += n;
                self.arriving += n;
                self.latest = Some(now);
            }
            if f.left == 0 {
                self.frame_done();
            }
            return n;
        }
        // Gathering a header: its length is known from its first two bytes.
        let need = if f.have < 2 {
            2
        } else {
            header_len(f.header[1])
        };
        let n = (need - f.have).min(bytes.len());
        f.header[f.have..f.have + n].copy_from_slice(&bytes[..n]);
        f.have += n;
        if f.have < 2 || f.have < header_len(f.header[1]) {
            return n;
        }
        let opcode = f.header[0] & 0x0f;
        f.fin = f.header[0] & 0x80 != 0;
        f.data = opcode <= 2;
        f.left = payload_len(&f.header[..f.have]);
        let header = f.have;
        f.have = 0;
        if f.data {
            if self.started.is_none() {
                self.started = Some(now);
            }
            self.latest = Some(now);
            self.pending += header;
            self.arriving += header;
        }
        if self.frames.left == 0 {
            self.frame_done();
        }
        n
    }

    fn frame_done(&mut self) {
        if self.frames.data && self.frames.fin {
            let whole = std::mem::take(&mut self.arriving);
            self.done.push_back(whole);
            self.started = None;
            self.latest = None;
        }
    }
}

/// A header's length from its second byte: the extended length and the mask.
fn header_len(b1: u8) -> usize {
    let ext = match b1 & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    2 + ext + if b1 & 0x80 != 0 { 4 } else { 0 }
}

fn payload_len(h: &[u8]) -> u64 {
    match h[1] & 0x7f {
        126 => u64::from(u16::from_be_bytes([h[2], h[3]])),
        127 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[2..10]);
            u64::from_be_bytes(b)
        }
        n => u64::from(n),
    }
}

/// The upgraded connection, metered.
pub(crate) struct Metered<IO> {
    io: IO,
    meter: Meter,
}

impl<IO> Metered<IO> {
    pub(crate) fn new(io: IO, meter: Meter) -> Self {
        Self { io, meter }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Metered<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let got = &buf.filled()[before..];
            if !got.is_empty() {
                return Poll::Ready(self.meter.read(got));
            }
        }
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Metered<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.meter.wrote(r.is_pending());
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.meter.wrote(r.is_pending());
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerConfig;

    fn meter(budget: usize) -> Meter {
        Meter::new(Arc::new(Inbound::new(&ServerConfig {
            memory_budget_bytes: budget,
            ..ServerConfig::default()
        })))
    }

    /// A masked client frame.
    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![(u8::from(fin) << 7) | opcode];
        match payload.len() {
            n if n < 126 => f.push(0x80 | n as u8),
            n if n < 65536 => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&[1, 2, 3, 4]);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn data_bytes_are_counted_until_taken_and_pings_cost_nothing() {
        let m = meter(1 << 20);
        let text = frame(true, 1, &[b'x'; 300]);
        let ping = frame(true, 9, b"hi");
        // Byte by byte, as a slow client sends them.
        for b in ping.iter().chain(&text).chain(&ping) {
            m.read(&[*b]).unwrap();
        }
        assert!(m.arriving().is_none(), "the message is whole");
        assert_eq!(m.lock().pending, text.len());
        let charge = m.take();
        assert_eq!(charge.units_bytes(), 1024, "its charge goes with it");
        assert_eq!(m.lock().pending, 0);
    }

    #[test]
    fn a_fragmented_message_is_arriving_across_pings_until_its_last_fragment() {
        let m = meter(1 << 20);
        let first = frame(false, 1, &[b'a'; 70_000]);
        m.read(&first).unwrap();
        m.read(&frame(true, 9, b"")).unwrap();
        let a = m.arriving().expect("still arriving");
        assert_eq!(a.bytes, first.len());
        m.read(&frame(true, 0, b"end")).unwrap();
        assert!(m.arriving().is_none());
        assert_eq!(m.lock().done.len(), 1);
    }

    #[test]
    fn a_frame_that_declares_more_than_the_budget_fails_the_read_as_it_arrives() {
        let m = meter(64 * 1024);
        let big = frame(true, 2, &vec![0u8; 100_000]);
        let (head, rest) = big.split_at(50_000);
        m.read(head).unwrap();
        assert!(m.read(rest).is_err(), "the budget cannot hold it");
        assert!(m.refused());
    }
}
