//! The WebSocket transport (Codex's `GET /v1/responses` upgraded), bounded like the HTTP it
//! sits beside. An upgraded connection:
//!
//! - keeps its place in the connection table (`server.maxConnections` and the per-peer share):
//!   idle between turns it may be closed to make room like an idle keep-alive connection, and
//!   it counts as serving while a turn runs ([`Connection`]);
//! - reads through a meter (`meter`): bytes of a message still arriving are charged to the
//!   memory budget as they come, and a message must arrive like a request body (no silence
//!   over `server.bodyTimeoutMs`, and after that long 16 KiB/s on average);
//! - takes frames and messages up to `server.maxBodyBytes`, and no more;
//! - answers pings within a small write buffer: a client that stops reading what it is sent is
//!   disconnected after `server.bodyTimeoutMs` instead of being buffered for;
//! - is closed after `server.webSocketIdleMs` without a message, when its key is disabled,
//!   expired or deleted (with the API's error first), and when Baton stops.
//!
//! Each message it hands over comes with the charge its bytes took, for the one admission
//! (`api::admit`) to go on from.

pub(crate) mod meter;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;
use tokio_util::sync::CancellationToken;

use super::budget::Charge;
use super::error::ApiError;
use super::state::AppState;
use meter::{Meter, Metered};

/// A connection's place in the server's connection table, lent to the request that upgrades
/// it (a request extension the accept loop adds): the upgraded connection keeps it.
pub trait Connection: Send + Sync {
    /// Cancelled when the table closes the connection to make room.
    fn closed(&self) -> CancellationToken;
    /// Marks the connection serving until the guard is dropped.
    fn serving(&self) -> Box<dyn Send>;
}

/// The request extension that carries a connection's place.
#[derive(Clone)]
pub struct ConnectionSlot(pub Arc<dyn Connection>);

/// Outgoing messages go out in frames of at most this many bytes, each written before the
/// next, so the write buffer stays small whatever the message.
const FRAGMENT: usize = 32 * 1024;
/// What may wait in the write buffer: a fragment and the answer to a ping. A client sending
/// pings it never reads the answers to gets no more buffered than this.
const WRITE_BUFFER: usize = 32 * 1024;
const MAX_WRITE_BUFFER: usize = 128 * 1024;
/// Read in chunks this large (an idle connection holds no more).
const READ_BUFFER: usize = 16 * 1024;
/// Bytes per second a message must average once `server.bodyTimeoutMs` has passed (as a body).
const MIN_RATE: u64 = 16 * 1024;

/// The handshake's answer, or why it is refused; once upgraded, `serve` has the socket.
pub(crate) fn accept<F, Fut>(
    state: &AppState,
    mut req: Request,
    serve: F,
) -> Result<Response, ApiError>
where
    F: FnOnce(Socket) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let accept = handshake(req.headers())?;
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(not_an_upgrade());
    };
    let conn = req.extensions().get::<ConnectionSlot>().cloned();
    let limits = Limits::of(&state.core.server);
    let budget = state.inbound.clone();
    tokio::spawn(async move {
        let io = match on_upgrade.await {
            Ok(io) => io,
            Err(e) => {
                tracing::debug!(error = %e, "WebSocket upgrade failed");
                return;
            }
        };
        let meter = Meter::new(budget);
        let io = Metered::new(TokioIo::new(io), meter.clone());
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER)
            .write_buffer_size(WRITE_BUFFER)
            .max_write_buffer_size(MAX_WRITE_BUFFER)
            .max_message_size(Some(limits.max_message))
            .max_frame_size(Some(limits.max_message));
        let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        serve(Socket {
            ws,
            meter,
            conn,
            limits,
        })
        .await;
    });
    let mut resp = Response::new(axum::body::Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let hs = resp.headers_mut();
    hs.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    hs.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        hs.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    Ok(resp)
}

/// An upgrade's headers checked (RFC 6455, version 13); the `Sec-WebSocket-Accept` it gets.
fn handshake(h: &HeaderMap) -> Result<String, ApiError> {
    let is = |name: header::HeaderName, want: &str| {
        h.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(want)))
        })
    };
    if !is(header::UPGRADE, "websocket") || !is(header::CONNECTION, "upgrade") {
        return Err(not_an_upgrade());
    }
    if h.get(header::SEC_WEBSOCKET_VERSION)
        .map(HeaderValue::as_bytes)
        != Some(b"13")
    {
        let mut e = ApiError::invalid(
            "sec-websocket-version",
            "Only WebSocket version 13 is spoken here (Sec-WebSocket-Version: 13).",
        );
        e.status = StatusCode::UPGRADE_REQUIRED;
        e.headers.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return Err(e);
    }
    let Some(key) = h.get(header::SEC_WEBSOCKET_KEY) else {
        return Err(ApiError::invalid(
            "sec-websocket-key",
            "A WebSocket upgrade needs a Sec-WebSocket-Key header.",
        ));
    };
    Ok(tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()))
}

fn not_an_upgrade() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "invalid_request_error",
        "method_not_allowed",
        "GET /v1/responses is Codex's WebSocket transport (send Upgrade: websocket); create a response with POST /v1/responses.",
    )
}

/// The bounds of one connection, from the server's settings.
#[derive(Clone, Copy)]
struct Limits {
    max_message: usize,
    /// Silence allowed inside a message, and how long writes may wait on the client.
    stall_ms: u64,
    idle_ms: u64,
}

impl Limits {
    fn of(s: &crate::config::ServerConfig) -> Self {
        Self {
            max_message: s.max_body_bytes,
            stall_ms: s.body_timeout_ms,
            idle_ms: s.web_socket_idle_ms,
        }
    }

    /// How often the bounds are checked.
    fn tick(&self) -> Duration {
        Duration::from_millis((self.stall_ms.min(self.idle_ms) / 4).clamp(20, 1000))
    }
}

/// An upgraded connection.
pub(crate) struct Socket {
    ws: WebSocketStream<Metered<TokioIo<hyper::upgrade::Upgraded>>>,
    meter: Meter,
    conn: Option<ConnectionSlot>,
    limits: Limits,
}

/// What the connection brought next.
pub(crate) enum Next {
    /// A text message, with the charge its bytes took.
    Text(Bytes, Charge),
    /// A binary message (its bytes are let go at once).
    Binary,
    /// The connection is over, and why.
    End(End),
}

/// Why a connection ends.
#[derive(Debug)]
pub(crate) enum End {
    /// The client closed it or went away.
    Gone,
    Stopping,
    /// The connection table closed it to make room.
    MadeRoom,
    Idle,
    /// A message stalled or trickled.
    Slow(String),
    /// A message or frame over `server.maxBodyBytes`.
    TooBig(String),
    /// The memory budget could not hold what was arriving.
    Budget,
    /// The client has not read what it was sent.
    NotReading,
    /// The key is no longer valid: the API's error for it.
    Revoked(Box<ApiError>),
    Broken(String),
}

impl Socket {
    /// Marks the connection serving (not closed to make room) until the guard is dropped.
    pub(crate) fn serving(&self) -> Option<Box<dyn Send>> {
        self.conn.as_ref().map(|c| c.0.serving())
    }

    /// The next message, or why the connection ends; `valid` says whether the key still is
    /// (asked as time passes).
    pub(crate) async fn next(
        &mut self,
        stopping: &CancellationToken,
        valid: &(dyn Fn() -> Result<(), ApiError> + Sync),
    ) -> Next {
        let closed = self
            .conn
            .as_ref()
            .map_or_else(CancellationToken::new, |c| c.0.closed());
        let mut tick = tokio::time::interval(self.limits.tick());
        let since = tokio::time::Instant::now();
        loop {
            let msg = tokio::select! {
                m = self.ws.next() => m,
                _ = tick.tick() => {
                    if let Some(end) = self.overdue(since, valid) {
                        return Next::End(end);
                    }
                    continue;
                }
                _ = stopping.cancelled() => return Next::End(End::Stopping),
                _ = closed.cancelled() => return Next::End(End::MadeRoom),
            };
            return match msg {
                None | Some(Ok(Message::Close(_))) => Next::End(End::Gone),
                Some(Ok(Message::Text(t))) => Next::Text(Bytes::from(t), self.meter.take()),
                Some(Ok(Message::Binary(_))) => {
                    drop(self.meter.take());
                    Next::Binary
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => Next::End(self.broken(e)),
            };
        }
    }

    /// Which bound, if any, the connection is over now.
    fn overdue(
        &self,
        since: tokio::time::Instant,
        valid: &(dyn Fn() -> Result<(), ApiError> + Sync),
    ) -> Option<End> {
        if let Err(e) = valid() {
            return Some(End::Revoked(Box::new(e)));
        }
        let l = &self.limits;
        if self
            .meter
            .write_blocked_ms()
            .is_some_and(|ms| ms > l.stall_ms)
        {
            return Some(End::NotReading);
        }
        match self.meter.arriving() {
            Some(a) if a.silent_ms > l.stall_ms => Some(End::Slow(format!(
                "a message stopped arriving ({} bytes, then nothing for server.bodyTimeoutMs = {} ms)",
                a.bytes, l.stall_ms
            ))),
            Some(a) if a.for_ms > l.stall_ms
                && (a.bytes as u64) < (a.for_ms - l.stall_ms) * MIN_RATE / 1000 =>
            {
                Some(End::Slow(format!(
                    "a message arrived too slowly ({} bytes in {} ms)",
                    a.bytes, a.for_ms
                )))
            }
            Some(_) => None,
            None if since.elapsed() > Duration::from_millis(l.idle_ms) => Some(End::Idle),
            None => None,
        }
    }

    fn broken(&self, e: tokio_tungstenite::tungstenite::Error) -> End {
        use tokio_tungstenite::tungstenite::error::{CapacityError, Error};
        if self.meter.refused() {
            return End::Budget;
        }
        match e {
            Error::Capacity(CapacityError::MessageTooLong { size, max_size }) => End::TooBig(
                format!("a message of {size} bytes is over server.maxBodyBytes ({max_size})"),
            ),
            Error::Capacity(c) => End::TooBig(c.to_string()),
            Error::ConnectionClosed | Error::AlreadyClosed => End::Gone,
            Error::Io(e) if e.kind() != std::io::ErrorKind::Other => End::Gone,
            other => End::Broken(other.to_string()),
        }
    }

    /// Sends a text message, in frames of [`FRAGMENT`] bytes; an error when the client is gone
    /// or has not read for `server.bodyTimeoutMs`.
    pub(crate) async fn send(&mut self, text: String) -> Result<(), End> {
        let stall = Duration::from_millis(self.limits.stall_ms);
        if text.len() <= FRAGMENT {
            return self.write(Message::Text(text.into()), stall).await;
        }
        let bytes = Bytes::from(text);
        let mut at = 0;
        while at < bytes.len() {
            let end = (at + FRAGMENT).min(bytes.len());
            let opcode = if at == 0 { Data::Text } else { Data::Continue };
            let frame = Frame::message(
                bytes.slice(at..end),
                OpCode::Data(opcode),
                end == bytes.len(),
            );
            self.write(Message::Frame(frame), stall).await?;
            at = end;
        }
        Ok(())
    }

    /// Queues a text message without writing it out yet (a burst of events goes out in one
    /// write at the next [`Socket::flush`]); a long one is sent in frames at once.
    pub(crate) async fn feed(&mut self, text: String) -> Result<(), End> {
        if text.len() > FRAGMENT {
            return self.send(text).await;
        }
        let stall = Duration::from_millis(self.limits.stall_ms);
        done(tokio::time::timeout(stall, self.ws.feed(Message::Text(text.into()))).await)
    }

    /// Writes out what [`Socket::feed`] queued.
    pub(crate) async fn flush(&mut self) -> Result<(), End> {
        let stall = Duration::from_millis(self.limits.stall_ms);
        done(tokio::time::timeout(stall, self.ws.flush()).await)
    }

    async fn write(&mut self, msg: Message, stall: Duration) -> Result<(), End> {
        done(tokio::time::timeout(stall, self.ws.send(msg)).await)
    }

    /// Ends the connection, telling the client why (`error`, when the API has an error event
    /// for it, goes first) and logging what was not the client's own doing.
    pub(crate) async fn end(mut self, end: End, error: Option<String>) {
        let (code, reason) = match &end {
            End::Gone => return,
            End::Stopping => (CloseCode::Away, "Baton is stopping".to_string()),
            End::MadeRoom => (
                CloseCode::Again,
                "connection limit reached (server.maxConnections): reconnect".to_string(),
            ),
            End::Idle => (
                CloseCode::Normal,
                "idle (server.webSocketIdleMs)".to_string(),
            ),
            End::Slow(why) => (CloseCode::Policy, why.clone()),
            End::TooBig(why) => (CloseCode::Size, why.clone()),
            End::Budget => (
                CloseCode::Again,
                "Baton is holding as much request data as it may (server.memoryBudgetBytes)"
                    .to_string(),
            ),
            End::NotReading => (CloseCode::Policy, "the client stopped reading".to_string()),
            End::Revoked(e) => (CloseCode::Policy, e.message.clone()),
            End::Broken(why) => (CloseCode::Protocol, why.clone()),
        };
        match &end {
            End::Budget | End::NotReading | End::Slow(_) | End::TooBig(_) | End::Broken(_) => {
                tracing::warn!(reason = %reason, "WebSocket connection closed");
            }
            _ => tracing::debug!(reason = %reason, "WebSocket connection closed"),
        }
        if matches!(end, End::NotReading) {
            return; // nothing more can be written to it
        }
        let stall = Duration::from_millis(self.limits.stall_ms.min(1000));
        if let Some(text) = error {
            let _ = self.write(Message::Text(text.into()), stall).await;
        }
        // A close reason is at most 123 bytes.
        let reason = crate::limits::truncate(&reason, 120).to_string();
        let close = Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }));
        let _ = self.write(close, stall).await;
    }
}

/// The headers of an upgrade that belong to the WebSocket handshake, not to each request.
pub(crate) const HANDSHAKE_HEADERS: [&str; 7] = [
    "connection",
    "upgrade",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "content-length",
];

/// The upgrade's headers as each request carried on the connection has them.
pub(crate) fn request_headers(upgrade: &HeaderMap) -> HeaderMap {
    let mut h = upgrade.clone();
    for name in HANDSHAKE_HEADERS {
        h.remove(name);
    }
    h
}

/// A write's outcome: the client gone, or not reading for `server.bodyTimeoutMs`.
fn done(
    r: Result<Result<(), tokio_tungstenite::tungstenite::Error>, tokio::time::error::Elapsed>,
) -> Result<(), End> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(End::Gone),
        Err(_) => Err(End::NotReading),
    }
}
