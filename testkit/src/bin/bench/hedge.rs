//! `bench BATON --hedge`: the slow-first-token scenario with hedging off and on, in one run.
//! Two providers of the same model: the first answers one stream in ten after 5 s (a free tier
//! under load, a cold model), the second at once. The same scripted sequence of streams goes
//! through Baton twice, `routing.hedge` off and then on (a hedge after 500 ms, a budget of 15 %
//! of requests), eight at a time; reported: the time to the first content byte (p50, p95,
//! p99) and the extra upstream requests hedging sent against its budget.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use testkit::{Behavior, FakeUpstream};

use super::{pct, start_baton, tempfile_dir, timed, SHARED_KEY};

/// One stream in this many is slow on the first provider.
const EVERY: usize = 10;
const SLOW_MS: u64 = 5_000;
const AFTER_MS: u64 = 500;
const BUDGET_PERCENT: f64 = 15.0;
const CONCURRENCY: usize = 8;

pub(super) async fn hedge_bench(bin: &str, n: usize) {
    let first = FakeUpstream::start("first").await;
    let second = FakeUpstream::start("second").await;
    second.always(Behavior::Ok);
    let dir = tempfile_dir();
    let mut rows = Vec::new();
    for (name, on) in [("hedging off", false), ("hedging on", true)] {
        // The same sequence for both: which requests are slow depends on their order only.
        first.script((0..n).map(|i| {
            if i % EVERY == EVERY - 1 {
                Behavior::Delay(SLOW_MS)
            } else {
                Behavior::Ok
            }
        }));
        first.always(Behavior::Ok);
        let sent_before = second.hits();
        let timeouts = json!({"firstByteMs": 30_000, "idleMs": 30_000});
        let config = json!({
            "providers": [
                {"id": "first", "kind": "openai-compatible", "baseUrl": first.base_url(),
                 "models": ["m"], "priority": 1, "timeouts": timeouts},
                {"id": "second", "kind": "openai-compatible", "baseUrl": second.base_url(),
                 "models": ["m"], "priority": 2, "timeouts": timeouts}],
            "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}],
            "routing": {"hedge": {"enabled": on, "after": AFTER_MS, "budgetPercent": BUDGET_PERCENT}},
            "log": {"retentionDays": 1}});
        let sub = dir.join(if on { "on" } else { "off" });
        std::fs::create_dir_all(&sub).unwrap();
        let (child, _, url) = start_baton(bin, &sub, &config, &[("BENCH_KEY", SHARED_KEY)]);
        let mut ttft = run(&url, n).await;
        drop(child);
        ttft.sort_by(f64::total_cmp);
        let extra = second.hits() - sent_before;
        rows.push((name, ttft, extra));
    }
    println!(
        "\n### Hedging: one stream in {EVERY} slow ({SLOW_MS} ms to first token) on the first provider, {n} streams, {CONCURRENCY} at a time\n"
    );
    println!("| | TTFT p50 | TTFT p95 | TTFT p99 | extra upstream requests |");
    println!("|---|---|---|---|---|");
    for (name, t, extra) in &rows {
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {:.1} ms | {extra} ({:.1} % of requests) |",
            pct(t, 0.5),
            pct(t, 0.95),
            pct(t, 0.99),
            *extra as f64 * 100.0 / n as f64
        );
    }
    let (off, on) = (pct(&rows[0].1, 0.95), pct(&rows[1].1, 0.95));
    println!(
        "\nTTFT p95 with hedging on ÷ off: {:.2} ({:.0} % lower); hedge after {AFTER_MS} ms, budget {BUDGET_PERCENT} %",
        on / off,
        (1.0 - on / off) * 100.0
    );
}

/// `n` streams through `url`, `CONCURRENCY` at a time, in order: each one's time to its first
/// content byte, ms.
async fn run(url: &str, n: usize) -> Vec<f64> {
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let (client, url, next) = (client.clone(), url.to_string(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < n {
                let (first, _) = timed(&client, &url, SHARED_KEY, true).await;
                out.push(first.expect("a content chunk"));
            }
            out
        }));
    }
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}
