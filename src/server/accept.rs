//! The accept loop under the router: HTTP/1.1 connections with a timeout on reading request
//! headers (hyper applies it while a keep-alive connection waits for its next request too, so
//! it also closes idle connections), a cap on open connections, TCP_NODELAY, and a graceful
//! shutdown that lets in-flight requests finish. Request bodies have their own read limits
//! (`api::openai::read_body`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;

/// Serves `app` on `listener` until `stop` is cancelled, then waits for open connections to
/// finish their requests (the caller bounds that wait).
pub(crate) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    cfg: &ServerConfig,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(cfg.header_timeout_ms))
        // Room above the router's own URI and header limits (16 KiB, 64 KiB), which answer in
        // the API's error shape; hyper's limits, further out, can only send a bare status.
        .max_buf_size(1024 * 1024)
        .max_headers(1024)
        .keep_alive(true);
    let mut warned: Option<Instant> = None;
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(s) => s,
            Err(_) => {
                if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                    warned = Some(Instant::now());
                    tracing::warn!(
                        max = cfg.max_connections,
                        "connection limit reached (server.maxConnections): new connections wait until one closes"
                    );
                }
                tokio::select! {
                    s = slots.clone().acquire_owned() => match s {
                        Ok(s) => s,
                        Err(_) => break,
                    },
                    _ = stop.cancelled() => break,
                }
            }
        };
        let (tcp, _peer) = tokio::select! {
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
        // Streams are many small writes: without TCP_NODELAY, Nagle's algorithm holds each
        // chunk back until the client's delayed ACK (~40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let conn = http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "client connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
