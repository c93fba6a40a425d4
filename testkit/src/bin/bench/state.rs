//! `bench --state`: the Redis backend against SQLite, same fake upstream, same run.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use testkit::{Behavior, FakeUpstream};

use super::{
    closed_loop, fixed_rate, pct, proc_cpu_secs, row, start_baton, tempfile_dir, KillOnDrop,
};

/// `bench --state`: Baton's added latency with the Redis backend against SQLite (the default),
/// same fake upstream, same run. The key is metered and the provider has `maxConcurrency`, so
/// every request takes the shared paths (admission, lease, spending).
/// Long because it is one measured run: two gateways (SQLite, Redis), alternating rounds,
/// the report.
pub(super) async fn state_bench(baton_bin: &str, n: usize) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redis = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server (apt install redis-server)");
    let _redis = KillOnDrop(redis);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let fake = FakeUpstream::start("bench").await;
    fake.unchecked_for_benchmarks();
    fake.always(Behavior::Ok);
    let key = "bt-bench-key-0000000000000000000000000000000";
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .tcp_nodelay(true)
        .build()
        .unwrap();
    let direct_url = format!("{}/chat/completions", fake.base_url());
    closed_loop(&client, &direct_url, key, 2_000, 16).await;
    let d = fixed_rate(&client, &direct_url, key, 500, 5).await;
    // Both gateways up at once, measured in alternating rounds (the order rotating), each
    // figure the median of its rounds: this machine's drift (and Redis sharing the load
    // generator's core) moves one run by more than the backends differ.
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut gateways = Vec::new();
    for backend in ["sqlite", "redis"] {
        let dir = tempfile_dir().join(backend);
        std::fs::create_dir_all(&dir).unwrap();
        let config = json!({
            "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench",
                "policy": {"rpm": 100_000_000, "tpm": 1_000_000_000_000u64, "budget": {"dayTokens": 1_000_000_000_000_000u64}}}],
            "state": {"backend": backend, "redis": {"url": format!("redis://127.0.0.1:{port}"), "prefix": "bench"}},
            "providers": [{"id": "fake", "kind": "openai-compatible", "baseUrl": fake.base_url(), "models": ["m"], "maxConcurrency": 256}],
            "log": {"retentionDays": 1},
        });
        gateways.push(start_baton(baton_bin, &dir, &config, &[("BENCH_KEY", key)]));
    }
    // Let the Redis instance connect before measuring.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for (_, _, url) in &gateways {
        closed_loop(&client, url, key, 2_000, 16).await;
    }
    // Per backend: each round's throughput and CPU seconds per 1,000 requests; and Redis's own
    // CPU in the Redis rounds (it shares the load generator's core here).
    let mut runs = [Vec::new(), Vec::new()];
    let mut redis_cpu = Vec::new();
    for r in 0..rounds {
        for k in 0..2 {
            let b = (r + k) % 2;
            let (_, pid, url) = &gateways[b];
            let (cpu0, server0) = (proc_cpu_secs(*pid), redis_server_cpu(port));
            let c = closed_loop(&client, url, key, n / rounds, 32).await;
            let cpu = (proc_cpu_secs(*pid) - cpu0) / c.count as f64 * 1000.0;
            runs[b].push((c.count as f64 / c.secs, cpu));
            if b == 1 {
                let server = redis_server_cpu(port) - server0;
                redis_cpu.push(server / c.count as f64 * 1000.0);
            }
        }
    }
    let median = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median_of(v.iter().map(f).collect());
    let mut latency = Vec::new();
    for (_, _, url) in &gateways {
        latency.push(fixed_rate(&client, url, key, 500, 5).await);
    }
    drop(gateways);
    println!("## Shared state: Redis backend against SQLite ({n} requests closed-loop in {rounds} alternating rounds, medians; 2,500 at 500 req/s; metered key, maxConcurrency set)\n");
    println!("| measure | SQLite (local) | Redis (shared) | ratio |\n|---|---|---|---|");
    let (s, r) = (&latency[0], &latency[1]);
    row(
        "throughput (32 conns)",
        median(&runs[0], |x| x.0),
        median(&runs[1], |x| x.0),
        "req/s",
    );
    row(
        "CPU seconds per 1,000 requests",
        median(&runs[0], |x| x.1),
        median(&runs[1], |x| x.1),
        "s",
    );
    if redis_cpu.iter().all(|s| s.is_finite()) {
        println!(
            "| Redis server's CPU seconds per 1,000 requests | | {:.3} s | |",
            median_of(redis_cpu)
        );
    }
    let ratios: Vec<String> = runs[0]
        .iter()
        .zip(&runs[1])
        .map(|(s, r)| format!("{:.2}", r.0 / s.0))
        .collect();
    row("p50 at 500 req/s", s.p50, r.p50, "ms");
    row("p99 at 500 req/s", s.p99, r.p99, "ms");
    row(
        "added p50 (minus direct)",
        s.p50 - d.p50,
        r.p50 - d.p50,
        "ms",
    );
    row(
        "added p99 (minus direct)",
        s.p99 - d.p99,
        r.p99 - d.p99,
        "ms",
    );
    println!(
        "\nThroughput ratio of each round, Redis ÷ SQLite: {}.",
        ratios.join(", ")
    );
    println!(
        "Direct to the fake upstream: p50 {:.3} ms, p99 {:.3} ms.",
        d.p50, d.p99
    );
}

fn median_of(mut x: Vec<f64>) -> f64 {
    x.sort_by(|a, b| a.total_cmp(b));
    pct(&x, 0.5)
}

/// The Redis server's CPU seconds so far (`INFO cpu` through `redis-cli`, which Debian's
/// redis-server brings); NaN when it cannot be read.
fn redis_server_cpu(port: u16) -> f64 {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "INFO", "cpu"])
        .output();
    let Ok(out) = out else {
        return f64::NAN;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
    };
    match (field("used_cpu_user:"), field("used_cpu_sys:")) {
        (Some(u), Some(s)) => u + s,
        _ => f64::NAN,
    }
}
