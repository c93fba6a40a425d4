//! `bench --scale`'s transports: Codex's WebSocket against the HTTP stream of the same turn,
//! and 1,000 long streams at once with the idle keep-alive connections after them.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::json;

use super::scale::{client, post_json, KEY};
use super::{pct, proc_cpu_secs, proc_kb, start_baton};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A Responses turn over Codex's WebSocket: ms to the first text delta and to the end.
async fn ws_turn(ws: &mut Ws, turn: &serde_json::Value) -> (f64, f64) {
    use tokio_tungstenite::tungstenite::Message;
    let t = Instant::now();
    ws.send(Message::Text(turn.to_string().into()))
        .await
        .unwrap();
    let mut first = None;
    loop {
        let Message::Text(text) = ws.next().await.unwrap().unwrap() else {
            continue;
        };
        let text = text.as_str();
        if first.is_none() && text.contains("\"response.output_text.delta\"") {
            first = Some(t.elapsed().as_secs_f64() * 1000.0);
        }
        if text.contains("\"response.completed\"")
            || text.contains("\"response.failed\"")
            || text.contains("\"type\":\"error\"")
        {
            assert!(text.contains("\"response.completed\""), "{text}");
            let end = t.elapsed().as_secs_f64() * 1000.0;
            return (first.unwrap_or(end), end);
        }
    }
}

/// The same turn as an HTTP stream (`POST /v1/responses`).
async fn http_turn(client: &reqwest::Client, url: &str, turn: &serde_json::Value) -> (f64, f64) {
    let t = Instant::now();
    let r = post_json(client, url, turn.to_string()).await;
    assert_eq!(r.status(), 200);
    let mut s = r.bytes_stream();
    let mut first = None;
    while let Some(c) = s.next().await {
        let c = c.unwrap();
        if first.is_none() && c.windows(26).any(|w| w == b"response.output_text.delta") {
            first = Some(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let end = t.elapsed().as_secs_f64() * 1000.0;
    (first.unwrap_or(end), end)
}

/// Codex's WebSocket transport against the HTTP stream of the same turn: 8 clients at once,
/// each its own socket or connection, alternating rounds; CPU per turn and first byte.
/// Long because it is one table: two transports, rounds, the report.
pub(super) async fn websocket(baton_bin: &str, dir: &std::path::Path, mock: &str) {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let d = dir.join("ws");
    std::fs::create_dir_all(&d).unwrap();
    let config = json!({"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": format!("{mock}/v1"), "models": ["m"]}],
        "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}], "log": {"retentionDays": 1}});
    let (_baton, pid, url) = start_baton(baton_bin, &d, &config, &[("BENCH_KEY", KEY)]);
    let http_url = url.replace("/chat/completions", "/responses");
    let ws_url = http_url.replacen("http://", "ws://", 1);
    let turn = json!({"model": "m", "stream": true, "input": [{"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "Say hello to the benchmark"}]}]});
    let ws_turn_msg = {
        let mut t = turn.clone();
        t["type"] = json!("response.create");
        t
    };
    let client = client();
    let turns: usize = std::env::var("BENCH_WS_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let (mut ws_first, mut http_first, mut ws_cpu, mut http_cpu) = (vec![], vec![], 0.0, 0.0);
    for round in 0..4 {
        for side in 0..2 {
            let over_ws = (side + round) % 2 == 0;
            let c0 = proc_cpu_secs(pid);
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let (client, http_url, ws_url, turn, ws_turn_msg) = (
                    client.clone(),
                    http_url.clone(),
                    ws_url.clone(),
                    turn.clone(),
                    ws_turn_msg.clone(),
                );
                tasks.push(tokio::spawn(async move {
                    let mut firsts = Vec::new();
                    if over_ws {
                        let mut req = ws_url.into_client_request().unwrap();
                        req.headers_mut()
                            .insert("authorization", format!("Bearer {KEY}").parse().unwrap());
                        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
                        for _ in 0..turns / 32 {
                            firsts.push(ws_turn(&mut ws, &ws_turn_msg).await.0);
                        }
                    } else {
                        for _ in 0..turns / 32 {
                            firsts.push(http_turn(&client, &http_url, &turn).await.0);
                        }
                    }
                    firsts
                }));
            }
            let mut firsts = Vec::new();
            for t in tasks {
                firsts.extend(t.await.unwrap());
            }
            let cpu = proc_cpu_secs(pid) - c0;
            if over_ws {
                ws_first.extend(firsts);
                ws_cpu += cpu;
            } else {
                http_first.extend(firsts);
                http_cpu += cpu;
            }
        }
    }
    ws_first.sort_by(|a, b| a.partial_cmp(b).unwrap());
    http_first.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let per_turn = |cpu: f64, n: usize| cpu / n as f64 * 1e6;
    let (wc, hc) = (
        per_turn(ws_cpu, ws_first.len()),
        per_turn(http_cpu, http_first.len()),
    );
    println!("### Codex's WebSocket against the HTTP stream of the same turn (Responses API, 8 at once, 4 alternating rounds)\n");
    println!(
        "| measure | HTTP stream | WebSocket | WebSocket ÷ HTTP | target |\n|---|---|---|---|---|"
    );
    println!(
        "| CPU per turn | {hc:.1} µs | {wc:.1} µs | {:.2}x | <= 1.10x |",
        wc / hc
    );
    let (hp, wp) = (pct(&http_first, 0.5), pct(&ws_first, 0.5));
    println!(
        "| first text delta p50 | {hp:.3} ms | {wp:.3} ms | {:.2}x | <= 1.10x |",
        wp / hp
    );
    let (hp, wp) = (pct(&http_first, 0.99), pct(&ws_first, 0.99));
    println!(
        "| first text delta p99 | {hp:.3} ms | {wp:.3} ms | {:.2}x | |\n",
        wp / hp
    );
}

/// 1,000 long streams at once (a chunk every 100 ms for `BENCH_STREAM_SECS`, a minute unless
/// told): Baton's resident memory while they run and how it moves; then 1,000 idle keep-alive
/// connections and what each costs.
/// Long because it is one table: the streams, the sampler, the idle connections.
pub(super) async fn streams(baton_bin: &str, dir: &std::path::Path, mock: &str) {
    let secs: u64 = std::env::var("BENCH_STREAM_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let model = format!("slow-{}x100", secs * 10);
    let d = dir.join("streams");
    std::fs::create_dir_all(&d).unwrap();
    let config = json!({"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": format!("{mock}/v1"), "models": [model]}],
        "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}], "log": {"retentionDays": 1},
        // 256 requests and 512 connections at once unless told: a team carrying 1,000
        // agents' streams says so.
        "server": {"maxConcurrentRequests": 2000, "maxConnections": 4000}});
    let (_baton, pid, url) = start_baton(baton_bin, &d, &config, &[("BENCH_KEY", KEY)]);
    let client = client();
    // Warm: the allocator's arenas and the log's first writes.
    for _ in 0..50 {
        http_chat(&client, &url, "auto").await;
    }
    let before = proc_kb(pid, "VmRSS:");
    let body = json!({"model": model, "stream": true, "messages": [{"role": "user", "content": "Think for a minute"}]}).to_string();
    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let r = post_json(&client, &url, body).await;
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
            let mut s = r.bytes_stream();
            let mut n = 0usize;
            while let Some(c) = s.next().await {
                n += c.unwrap().len();
            }
            n
        }));
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    while !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        samples.push((started.elapsed().as_secs_f64(), proc_kb(pid, "VmRSS:")));
    }
    for t in tasks {
        assert!(t.await.unwrap() > 0);
    }
    let peak = samples.iter().map(|s| s.1).max().unwrap_or(0);
    let at = |f: f64| {
        samples
            .iter()
            .find(|s| s.0 >= f * secs as f64)
            .map_or(0, |s| s.1)
    };
    let (early, late) = (at(0.25), at(0.95));
    println!(
        "### 1,000 long streams at once (a chunk every 100 ms for {secs} s) and idle connections\n"
    );
    println!("| measure | value | target |\n|---|---|---|");
    println!("| RSS before | {:.1} MiB | |", before as f64 / 1024.0);
    println!(
        "| RSS peak while 1,000 streams run | {:.1} MiB | <= 64 MiB |",
        peak as f64 / 1024.0
    );
    println!(
        "| per open stream | {:.1} KiB | |",
        (peak.saturating_sub(before)) as f64 / 1000.0
    );
    println!(
        "| RSS growth from {:.0} s to {:.0} s of the run, per minute | {:+.2} MiB | none |",
        0.25 * secs as f64,
        0.95 * secs as f64,
        (late as f64 - early as f64) / 1024.0 / (0.7 * secs as f64 / 60.0)
    );
    // Idle keep-alive connections: each made one request, then waits.
    let idle_before = proc_kb(pid, "VmRSS:");
    let addr = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut conns = Vec::new();
    for _ in 0..1000 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = s.read(&mut buf).await.unwrap();
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
        conns.push(s);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_after = proc_kb(pid, "VmRSS:");
    println!(
        "| per idle keep-alive connection (1,000 open) | {:.1} KiB | |\n",
        idle_after.saturating_sub(idle_before) as f64 / 1000.0
    );
    drop(conns);
}

async fn http_chat(client: &reqwest::Client, url: &str, model: &str) {
    let r = post_json(
        client,
        url,
        json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}).to_string(),
    )
    .await;
    let _ = r.bytes().await.unwrap();
}
