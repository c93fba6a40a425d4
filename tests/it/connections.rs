//! Client connections cannot be held open for free: headers that trickle and idle keep-alive
//! connections are closed after `server.headerTimeoutMs`, a body that stalls or trickles gets a
//! 408 after `server.bodyTimeoutMs`, and at most `server.maxConnections` are open at once (the
//! next waits, and the limit is logged) — so a slow client cannot make Baton unreachable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

fn connect(url: &str) -> TcpStream {
    let s = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    // Far longer than any timeout under test: a read that hits it means the server held on.
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Reads until the server closes the connection; returns what it sent. Panics if it never does.
fn read_until_closed(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return String::from_utf8_lossy(&out).into_owned(),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return String::from_utf8_lossy(&out).into_owned()
            }
            Err(e) => panic!("the server kept the connection open: {e}; got {out:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_idle_clients_are_cut_off_and_connections_are_capped() {
    let logs = Captured::install();
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)],
               "server": {"headerTimeoutMs": 500, "bodyTimeoutMs": 500, "maxConnections": 3}}),
    )
    .await;
    let url = baton.url.clone();
    let key = baton.key.clone();

    tokio::task::spawn_blocking(move || {
        // Headers that never finish: closed, with nothing sent back.
        let mut s = connect(&url);
        s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .unwrap();
        read_until_closed(&mut s);

        // An idle keep-alive connection: one answer, then closed.
        let mut s = connect(&url);
        s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let got = read_until_closed(&mut s);
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");

        // A body that stops: 408 in OpenAI's shape, and the connection is closed.
        let mut s = connect(&url);
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"model\":"
        )
        .unwrap();
        let got = read_until_closed(&mut s);
        assert!(got.starts_with("HTTP/1.1 408"), "{got}");
        let body: Value = serde_json::from_str(got.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "request_timeout", "{body}");

        // A body that trickles a byte every 200 ms (never silent for 500 ms): 408 all the same.
        let mut s = connect(&url);
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        )
        .unwrap();
        s.set_nonblocking(false).unwrap();
        let mut writer = s.try_clone().unwrap();
        let trickle = std::thread::spawn(move || {
            for _ in 0..50 {
                if writer.write_all(b" ").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let got = read_until_closed(&mut s);
        assert!(got.starts_with("HTTP/1.1 408"), "{got}");
        trickle.join().unwrap();
    })
    .await
    .unwrap();

    // Three connections that send nothing take every slot; a real request takes the place of
    // the oldest of them once it is past its grace to send a request, and is answered.
    let url = baton.url.clone();
    let idle: Vec<TcpStream> = (0..3).map(|_| connect(&url)).collect();
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 200);
    drop(idle);
    let logged = String::from_utf8_lossy(&logs.bytes()).into_owned();
    assert!(
        logged.contains("connection limit reached"),
        "the limit is logged: {logged}"
    );
    // Everything still works after all that.
    assert_eq!(baton.chat("auto", "again").await.status(), 200);
    baton.stop().await;
}

/// One slow client holding connection after connection open (trickling header bytes, or
/// sending one request and then idling on keep-alive, and reopening each one the moment it is
/// closed) cannot lock a legitimate request out: a new connection takes the place of one that
/// is doing nothing, so the request is served while 1,000 of them are open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_slow_connections_that_reopen_do_not_lock_out_a_real_request() {
    let _heavy = MEMORY_HEAVY.lock().await;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    // A header timeout far longer than the test: only making room can serve the request.
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)],
               "server": {"headerTimeoutMs": 120000}}),
    )
    .await;
    let addr = baton.url.trim_start_matches("http://").to_string();
    let stop = tokio_util::sync::CancellationToken::new();
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut attackers = Vec::new();
    for i in 0..1000 {
        let (addr, stop, opened) = (addr.clone(), stop.clone(), opened.clone());
        attackers.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let Ok(mut s) = tokio::net::TcpStream::connect(&addr).await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let first: &[u8] = if i % 2 == 0 {
                    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                } else {
                    b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                };
                if s.write_all(first).await.is_err() {
                    continue;
                }
                let mut buf = [0u8; 1024];
                // Trickle a byte a second (or idle after the answer) until closed, then reopen.
                loop {
                    tokio::select! {
                        r = s.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { break },
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {
                            if i % 2 == 0 && s.write_all(b"x").await.is_err() { break }
                        }
                        _ = stop.cancelled() => return,
                    }
                }
            }
        }));
    }
    // Wait until the attack holds more than the whole table (512 by default).
    for _ in 0..200 {
        if opened.load(std::sync::atomic::Ordering::Relaxed) >= 600 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(opened.load(std::sync::atomic::Ordering::Relaxed) >= 600);
    // Each request on a connection of its own: an idle keep-alive connection may itself be
    // closed to make room (as the header timeout closes it), and a client that reuses it in
    // that instant sees a reset; what is under test is that a new connection gets in.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for n in 0..3 {
        // Generous: without making room, the request would wait for the 120 s header timeout.
        let send = fresh
            .post(format!("{}/v1/chat/completions", baton.url))
            .bearer_auth(&baton.key)
            .json(&chat_body("auto", "hi", false))
            .send();
        let r = tokio::time::timeout(Duration::from_secs(20), send)
            .await
            .unwrap_or_else(|_| panic!("request {n} was locked out by slow connections"))
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    stop.cancel();
    for a in attackers {
        let _ = a.await;
    }
    baton.stop().await;
}
