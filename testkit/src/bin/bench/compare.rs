//! `bench NEW --compare OLD`: two builds of Baton, same fake upstream, alternating rounds.

use std::sync::Arc;

use serde_json::json;
use testkit::{Behavior, FakeUpstream};

use super::{
    closed_loop, interleaved_stream_rate, proc_cpu_secs, start_shared, streams_raw, tempfile_dir,
};

/// Streams per measured round in `--compare` (20 content chunks each).
const STREAM_CHUNKS: usize = 20;

/// `bench NEW --compare OLD`: the CPU Baton spends per 1,000 plain requests and per 1,000
/// streams (20 content chunks, OpenAI in and out; an Anthropic client on an OpenAI upstream,
/// translated; and paced a chunk every 2 ms, as a model sends them), for two builds in the same run, alternating in rounds so drift in this
/// machine's speed falls on both. Both are pinned to the same core when `BENCH_BATON_CPU` is set.
/// Long because it is one measured run: both builds started, then each phase in alternating
/// rounds, then the report.
pub(super) async fn compare_bench(old_bin: &str, new_bin: &str, n: usize) {
    let fake = FakeUpstream::start("bench").await;
    fake.unchecked_for_benchmarks();
    let dir = tempfile_dir();
    let key = super::SHARED_KEY;
    let mut sides = Vec::new();
    for (name, bin) in [("old", old_bin), ("new", new_bin)] {
        let (child, pid, url) = start_shared(bin, &dir, name, &fake);
        sides.push((child, pid, url, key.to_string()));
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let streams_n = (n / 4).max(1_000);
    let rounds = 5;
    // [side][measure] = (cpu seconds, count)
    let mut cpu = [[(0.0f64, 0usize); 4]; 2];
    for round in 0..=rounds {
        for i in 0..2 {
            let side = if round % 2 == 0 { i } else { 1 - i };
            let (_, pid, url, key) = &sides[side];
            let messages_url = url.replace("/chat/completions", "/messages");
            // Round 0 warms both up and is not counted.
            let (plain, streams) = if round == 0 {
                (2_000, 500)
            } else {
                (n / rounds, streams_n / rounds)
            };
            let only_streams = std::env::var("BENCH_ONLY").is_ok_and(|v| v == "streams");
            fake.always(Behavior::Ok);
            let c0 = proc_cpu_secs(*pid);
            let plain = if only_streams { 0 } else { plain };
            let s = closed_loop(&client, url, key, plain, 32).await;
            let c1 = proc_cpu_secs(*pid);
            fake.always(Behavior::SlowStream {
                chunks: STREAM_CHUNKS,
                delay_ms: 0,
            });
            let (_, full) = streams_raw(&client, url, key, streams, 8).await;
            let c2 = proc_cpu_secs(*pid);
            let translated = if only_streams {
                0
            } else {
                anthropic_streams(&client, &messages_url, key, streams, 8).await
            };
            let c3 = proc_cpu_secs(*pid);
            // Paced like a real model: a chunk every 2 ms, so nothing can be gathered.
            fake.always(Behavior::SlowStream {
                chunks: STREAM_CHUNKS,
                delay_ms: 2,
            });
            let (_, paced) = streams_raw(&client, url, key, streams / 4, 32).await;
            let c4 = proc_cpu_secs(*pid);
            if round > 0 {
                cpu[side][3].0 += c4 - c3;
                cpu[side][3].1 += paced.len();
                let m = &mut cpu[side];
                m[0].0 += c1 - c0;
                m[0].1 += s.count;
                m[1].0 += c2 - c1;
                m[1].1 += full.len();
                m[2].0 += c3 - c2;
                m[2].1 += translated;
            }
        }
    }
    // Time to first token, old and new alternating in rounds at 200 streams/s.
    fake.always(Behavior::Ok);
    let (to, tn) = interleaved_stream_rate(&client, &sides[0].2, &sides[1].2, key, 200, 10).await;
    println!("## Same-run comparison ({n} plain requests, {streams_n} streams of {STREAM_CHUNKS} chunks per build; {rounds} alternating rounds; Baton pinned to CPU {})\n",
        std::env::var("BENCH_BATON_CPU").unwrap_or_else(|_| "any".into()));
    println!("| CPU seconds per 1,000 | old | new | new ÷ old |\n|---|---|---|---|");
    let per = |(s, c): (f64, usize)| s / c.max(1) as f64 * 1000.0;
    for (i, name) in [
        "plain requests",
        "streams (OpenAI in and out)",
        "streams (Anthropic client, OpenAI upstream)",
        "streams paced 2 ms a chunk (OpenAI in and out)",
    ]
    .iter()
    .enumerate()
    {
        let (o, nw) = (per(cpu[0][i]), per(cpu[1][i]));
        println!("| {name} | {o:.4} | {nw:.4} | {:.2}x |", nw / o);
    }
    println!(
        "\n| time to first token at 200 streams/s | old | new | new ÷ old |\n|---|---|---|---|"
    );
    println!(
        "| p50 | {:.3} ms | {:.3} ms | {:.2}x |",
        to.p50,
        tn.p50,
        tn.p50 / to.p50
    );
    println!(
        "| p99 | {:.3} ms | {:.3} ms | {:.2}x |",
        to.p99,
        tn.p99,
        tn.p99 / to.p99
    );
    drop(sides);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Anthropic Messages streams through Baton (translated from the OpenAI upstream); returns how
/// many completed with `message_stop`.
async fn anthropic_streams(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    total: usize,
    concurrency: usize,
) -> usize {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    let payload = serde_json::to_vec(&json!({"model": "auto", "stream": true, "max_tokens": 64,
        "messages": [{"role": "user", "content": "Say hello to the benchmark"}]}))
    .unwrap();
    for _ in 0..concurrency {
        let (client, url, key, next, payload) = (
            client.clone(),
            url.to_string(),
            key.to_string(),
            next.clone(),
            payload.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut done = 0;
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                let body = client
                    .post(&url)
                    .header("x-api-key", &key)
                    .header("anthropic-version", "2023-06-01")
                    .header("content-type", "application/json")
                    .body(payload.clone())
                    .send()
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                assert!(
                    memchr_find(&body, b"message_stop"),
                    "translated stream did not finish: {}",
                    String::from_utf8_lossy(&body)
                );
                done += 1;
            }
            done
        }));
    }
    let mut all = 0;
    for t in tasks {
        all += t.await.unwrap();
    }
    all
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}
