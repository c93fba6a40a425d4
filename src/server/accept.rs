//! The accept loop under the router: HTTP/1.1 connections with a timeout on reading request
//! headers (hyper applies it while a keep-alive connection waits for its next request too, so
//! it also closes idle connections), a cap on open connections that slow clients cannot hold
//! against the rest (`conns`), TCP_NODELAY, and a graceful
//! shutdown that lets in-flight requests finish. Request bodies have their own read limits
//! (`api::budget::read_body`). A connection upgraded to a WebSocket keeps its place in the
//! table (`api::websocket::ConnectionSlot`).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::conns::{Conn, Conns, Refused, Tracked};
use crate::config::ServerConfig;

/// How long a new connection may take to send its first request's headers before it can be
/// closed to make room for another (a legitimate client needs milliseconds; a flood of new
/// connections must not push one out in between).
const GRACE: Duration = Duration::from_millis(250);

/// Serves `app` on `listener` until `stop` is cancelled, then waits for open connections to
/// finish their requests (the caller bounds that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    cfg: &ServerConfig,
    stop: CancellationToken,
) {
    let conns = Conns::new(
        connection_cap(cfg.max_connections),
        cfg.max_connections_per_peer,
        GRACE,
    );
    // Every connection's task, so a shutdown can wait for them (hyper-util's GracefulShutdown
    // cannot watch a connection that may be upgraded to a WebSocket).
    let tasks = tokio_util::task::TaskTracker::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(cfg.header_timeout_ms))
        // Room above the router's own URI and header limits (16 KiB, 64 KiB), which answer in
        // the API's error shape; hyper's limits, further out, can only send a bare status.
        .max_buf_size(1024 * 1024)
        .max_headers(1024)
        .keep_alive(true);
    let mut warned = Warned::default();
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: try again soon.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let Some(conn) = place(&conns, peer.ip(), cfg, &mut warned, &stop).await else {
            if stop.is_cancelled() {
                break;
            }
            continue;
        };
        // Streams are many small writes: without TCP_NODELAY, Nagle's algorithm holds each
        // chunk back until the client's delayed ACK (~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let evicted = conn.evicted();
        let conn = Arc::new(conn);
        let svc = tracked(app.clone(), conn.clone(), peer.ip());
        // Upgrades: Codex's Responses WebSocket transport.
        let http_conn = http
            .serve_connection(TokioIo::new(tcp), svc)
            .with_upgrades();
        let stopping = stop.clone();
        tasks.spawn(async move {
            let mut http_conn = std::pin::pin!(http_conn);
            tokio::select! {
                r = http_conn.as_mut() => if let Err(e) = r {
                    tracing::debug!(error = %e, "client connection ended with an error");
                },
                // Shutting down: the request in flight finishes, then the connection closes.
                _ = stopping.cancelled() => {
                    http_conn.as_mut().graceful_shutdown();
                    if let Err(e) = http_conn.await {
                        tracing::debug!(error = %e, "client connection ended with an error");
                    }
                },
                // Closed to make room for another client (see `conns`).
                _ = evicted.cancelled() => {}
            }
            drop(conn);
        });
    }
    drop(listener);
    tasks.close();
    tasks.wait().await;
}

/// Descriptors kept for everything but client connections: the database, logs, the runtime,
/// upstream connections and CLI pipes (half of what is left goes to those too).
const RESERVED_FDS: u64 = 64;

/// `server.maxConnections`, kept under the open-file limit: the soft limit is raised to the
/// hard one where the system allows, and when even that leaves too few descriptors the cap is
/// lowered (logged), so a full table makes room by closing an idle connection instead of
/// `accept` failing and `/health` going unanswered.
fn connection_cap(configured: usize) -> usize {
    let Some(limit) = open_file_limit() else {
        return configured;
    };
    let room = (limit.saturating_sub(RESERVED_FDS) / 2).max(16) as usize;
    if configured > room {
        tracing::warn!(
            configured,
            cap = room,
            open_file_limit = limit,
            "server.maxConnections is more than the open-file limit leaves room for: at most {room} client connections (raise the limit, e.g. LimitNOFILE= in a systemd unit, for more)"
        );
        return room;
    }
    configured
}

/// The open-file limit, the soft one raised to the hard one first.
#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        tracing::debug!(from = soft, to = hard, "open-file limit raised");
        return Some(hard);
    }
    Some(soft)
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

/// When the table last had to make room or turn a connection away (logged once a minute).
#[derive(Default)]
struct Warned {
    full: Option<Instant>,
    evicted: Option<Instant>,
    peer: Option<Instant>,
}

fn once_a_minute(at: &mut Option<Instant>) -> bool {
    let due = at.is_none_or(|t| t.elapsed() >= Duration::from_secs(60));
    if due {
        *at = Some(Instant::now());
    }
    due
}

/// A place in the connection table for a new connection from `peer`, waiting while every
/// connection is serving a request; `None` when the connection is turned away (its peer holds
/// its whole share) or Baton is stopping.
async fn place(
    conns: &Arc<Conns>,
    peer: IpAddr,
    cfg: &ServerConfig,
    warned: &mut Warned,
    stop: &CancellationToken,
) -> Option<Conn> {
    loop {
        let changed = conns.changed();
        match conns.admit(peer) {
            Ok(a) => {
                if a.evicted && once_a_minute(&mut warned.evicted) {
                    tracing::warn!(
                        max = cfg.max_connections,
                        open = conns.open(),
                        "connection limit reached (server.maxConnections): closing connections that have not sent a request, or idle ones, to make room"
                    );
                }
                return Some(a.conn);
            }
            Err(Refused::PeerFull) => {
                if once_a_minute(&mut warned.peer) {
                    tracing::warn!(%peer, max = cfg.max_connections_per_peer, "a peer holds its whole share of connections (server.maxConnectionsPerPeer): its new connections are closed");
                }
                return None;
            }
            Err(Refused::Full) => {
                if once_a_minute(&mut warned.full) {
                    tracing::warn!(
                        max = cfg.max_connections,
                        "connection limit reached (server.maxConnections) with every connection serving a request: new connections wait until one closes"
                    );
                }
                tokio::select! {
                    _ = changed => {}
                    // Connections within their grace become closable by time alone.
                    _ = tokio::time::sleep(conns.grace()) => {}
                    _ = stop.cancelled() => return None,
                }
            }
        }
    }
}

/// The router as one connection's service: each request counts the connection as serving until
/// its response body is sent or dropped.
fn tracked(
    app: axum::Router,
    conn: Arc<Conn>,
    peer: std::net::IpAddr,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = hyper::Response<Tracked>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone {
    hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(crate::api::Peer(peer));
        // A connection that may be upgraded lends its place in the table to the upgraded one.
        if req.headers().contains_key(hyper::header::UPGRADE) {
            let slot: Arc<dyn crate::api::websocket::Connection> = conn.clone();
            req.extensions_mut()
                .insert(crate::api::websocket::ConnectionSlot(slot));
        }
        let in_flight = conn.request();
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        async move {
            let resp = hyper::service::Service::call(&svc, req).await?;
            Ok(resp.map(|inner| Tracked {
                inner,
                _in_flight: in_flight,
            }))
        }
    })
}
