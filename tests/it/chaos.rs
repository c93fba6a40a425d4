//! Chaos: two upstreams, one injecting 30 % mixed faults (429, 500, 503, reset, no response,
//! cut mid-stream, stall before and after content), one healthy; 5,000 requests, half for
//! `auto` and half for a route that puts the flaky one first, half streamed, 32 at a time. No client-visible failure except the explicit post-content stream
//! error; no duplicated or mixed stream content; every stream ends with `[DONE]` or that error.
//! The faults are a fixed pseudo-random sequence, so a failure reproduces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use baton::clock::ManualClock;
use futures_util::StreamExt;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const REQUESTS: usize = 5_000;
const CONCURRENCY: usize = 32;

/// xorshift64: a fixed fault sequence without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn fault(r: &mut Rng) -> (&'static str, Behavior) {
    if r.next() % 100 >= 30 {
        return ("ok", Behavior::Ok);
    }
    match r.next() % 9 {
        0 => ("429", Behavior::rate_limited(Some(2))),
        1 => ("500", Behavior::status(500)),
        2 => (
            "503",
            Behavior::Status {
                status: 503,
                body: json!({"error": {"message": "Service temporarily unavailable", "type": "server_error", "code": null}}),
                headers: vec![("retry-after".into(), "2".into())],
            },
        ),
        3 => ("reset", Behavior::Reset),
        4 => ("no response", Behavior::Hang),
        5 => ("cut", Behavior::StreamDies(1 + (r.next() % 3) as usize)),
        6 => ("stall before content", Behavior::StreamStalls(0)),
        7 => ("stall", Behavior::StreamStalls(2)),
        _ => ("malformed", Behavior::StreamMalformed(1)),
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

enum Outcome {
    Ok(String),
    Interrupted,
}

async fn one(baton: &Baton, http: &reqwest::Client, i: usize) -> Result<Outcome, String> {
    let stream = i.is_multiple_of(2);
    let text = format!("q{i}");
    let r = http
        .post(format!("{}/v1/chat/completions", baton.url))
        .bearer_auth(&baton.key)
        .json(&chat_body(
            if i % 4 < 2 { "auto" } else { "chaos" },
            &text,
            stream,
        ))
        .send()
        .await
        .map_err(|e| format!("#{i}: transport: {e}"))?;
    let status = r.status().as_u16();
    let provider = header(&r, "x-gateway-provider").to_string();
    let body = r.text().await.map_err(|e| format!("#{i}: body: {e}"))?;
    if status != 200 {
        return Err(format!("#{i}: {status}: {body}"));
    }
    let want = format!("{provider}: {text}");
    if !stream {
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("#{i}: {e}: {body}"))?;
        let got = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str);
        return if got == Some(want.as_str()) {
            Ok(Outcome::Ok(provider))
        } else {
            Err(format!("#{i}: wrong answer from {provider}: {body}"))
        };
    }
    let events = sse_data(&body);
    let got = stream_text(&events);
    let last = events.last().map(String::as_str).unwrap_or("");
    let dones = events.iter().filter(|e| *e == "[DONE]").count();
    if last == "[DONE]" && dones == 1 && got == want {
        return Ok(Outcome::Ok(provider));
    }
    // The one allowed failure: content that is a true prefix of one provider's answer, then
    // the explicit error event, and no [DONE].
    if last.contains("\"stream_interrupted\"") && dones == 0 && want.starts_with(&got) {
        return Ok(Outcome::Interrupted);
    }
    Err(format!("#{i}: broken stream from {provider}: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_requests_through_thirty_percent_faults() {
    let _heavy = MEMORY_HEAVY.lock().await;
    let flaky = FakeUpstream::start("flaky").await;
    let healthy = FakeUpstream::start("healthy").await;
    flaky.forget_requests();
    healthy.forget_requests();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut injected: BTreeMap<&str, usize> = BTreeMap::new();
    // More behaviours than requests: retries and failovers use some too.
    flaky.script((0..REQUESTS * 2).map(|_| {
        let (name, b) = fault(&mut rng);
        *injected.entry(name).or_default() += 1;
        b
    }));
    let fast = json!({"connectMs": 1000, "firstByteMs": 1000, "idleMs": 300});
    let dir = tempfile::tempdir().unwrap();
    // Cooldowns last at least a second and the run takes a few: on the real clock each 429
    // or 503 would bench the flaky provider for a good part of it. The gateway's clock runs
    // 20x fast instead, so the faults keep coming (timeouts are real time, unaffected).
    let clock = Arc::new(ManualClock::new(1_800_000_000_000));
    let ticking = {
        let clock = clock.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                clock.advance(1_000);
            }
        })
    };
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({
            "providers": [
                {"id": "flaky", "kind": "openai-compatible", "baseUrl": flaky.base_url(),
                 "models": ["flaky-model"], "priority": 1, "timeouts": fast},
                {"id": "healthy", "kind": "openai-compatible", "baseUrl": healthy.base_url(),
                 "models": ["healthy-model"], "priority": 2, "timeouts": fast}],
            // `auto` ranks the healthy provider first once the flaky one's health drops; the
            // route keeps the user's order, so half the requests meet the flaky provider first.
            "routes": {"chaos": ["flaky", "healthy"]},
            // A patient breaker (its own tests are elsewhere) keeps the flaky provider in play.
            "routing": {"breaker": {"failures": 50}}
        }),
        Some(clock.clone()),
    )
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(CONCURRENCY)
        .build()
        .unwrap();
    // Warm up (connections, lazy statics) before the first RSS reading.
    for i in 0..CONCURRENCY {
        one(&baton, &http, REQUESTS + i).await.ok();
    }
    let rss_before = rss_kib();
    let results: Vec<Result<Outcome, String>> = futures_util::stream::iter(0..REQUESTS)
        .map(|i| {
            let (baton, http) = (&baton, &http);
            async move { one(baton, http, i).await }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let rss_after = rss_kib();
    let mut served: BTreeMap<String, usize> = BTreeMap::new();
    let mut interrupted = 0;
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(Outcome::Ok(p)) => *served.entry(p).or_default() += 1,
            Ok(Outcome::Interrupted) => interrupted += 1,
            Err(e) => failures.push(e),
        }
    }
    eprintln!(
        "chaos: {REQUESTS} requests, flaky called {} times from a script of {injected:?}, served {served:?}, \
         interrupted after content {interrupted}, failures {}; RSS {} MiB before, {} MiB after",
        flaky.hits(),
        failures.len(),
        rss_before / 1024,
        rss_after / 1024
    );
    assert!(
        failures.is_empty(),
        "{} client-visible failures, first: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(
        served.values().sum::<usize>() + interrupted,
        REQUESTS,
        "every request answered"
    );
    // How often the flaky provider is asked depends on when its health drops under load:
    // 983 to 1,263 calls in 16 runs of 5,000 (Dec 6, on 769169c and after), and 811 in a CI
    // run on a busy machine. A tenth is the bound that says it stayed in play (a provider
    // dropped from the route would get none) without failing on the machine's load.
    assert!(
        flaky.hits() > REQUESTS / 10 && served.get("flaky").copied().unwrap_or(0) > 100,
        "the flaky provider stayed in play: {} calls, served {served:?}",
        flaky.hits()
    );
    assert!(interrupted > 0, "post-content faults reached some streams");
    // Memory: 5,000 requests must not leave their bodies behind.
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
    // The gateway is still healthy and every request is in the log.
    let r = baton.chat("auto", "after").await;
    assert_eq!(r.status(), 200);
    baton.handle.core.store.writer().flush().await;
    let logged = baton
        .handle
        .core
        .store
        .recent_requests(REQUESTS * 2)
        .unwrap();
    assert!(
        logged.len() > REQUESTS,
        "every request logged: {}",
        logged.len()
    );
    ticking.abort();
    baton.stop().await;
}
