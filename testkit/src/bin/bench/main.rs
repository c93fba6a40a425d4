//! Benchmark: direct-to-upstream vs through Baton, measured in the same run on the same fake
//! upstream. Reports throughput, latency percentiles, time to first byte, Baton's CPU seconds per
//! 1,000 requests and its memory, as ratios to direct. Run with `scripts/bench`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bodies::body;
use futures_util::StreamExt;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

mod bodies;
mod cache;
mod compare;
mod first_byte;
mod hedge;
mod scale;
mod state;
mod streams;

struct Stats {
    count: usize,
    secs: f64,
    p50: f64,
    p99: f64,
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn stats(mut lat_ms: Vec<f64>, secs: f64) -> Stats {
    lat_ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Stats {
        count: lat_ms.len(),
        secs,
        p50: pct(&lat_ms, 0.5),
        p99: pct(&lat_ms, 0.99),
    }
}

fn proc_cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn proc_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Closed loop: `concurrency` workers send `total` requests as fast as answers come back.
async fn closed_loop(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    total: usize,
    concurrency: usize,
) -> Stats {
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, key, next) = (
            client.clone(),
            url.to_string(),
            key.to_string(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let payload = body(false);
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                let t = Instant::now();
                let r = client
                    .post(&url)
                    .bearer_auth(&key)
                    .header("content-type", "application/json")
                    .body(payload.clone())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                let _ = r.bytes().await.unwrap();
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    stats(all, started.elapsed().as_secs_f64())
}

/// Alternates direct and through-Baton in `rounds` short rounds of `secs` each (the order
/// swapping every round), so drift in this machine's speed falls on both sides alike.
async fn interleaved_rate(
    client: &reqwest::Client,
    direct: &str,
    baton: &str,
    key: &str,
    rate: u64,
    rounds: u64,
    secs: u64,
) -> (Stats, Stats) {
    let (mut d, mut b) = (Vec::new(), Vec::new());
    let (mut dt, mut bt) = (0.0, 0.0);
    for round in 0..rounds {
        for side in 0..2 {
            let to_baton = (side + round) % 2 == 1;
            let (url, lat, t) = if to_baton {
                (baton, &mut b, &mut bt)
            } else {
                (direct, &mut d, &mut dt)
            };
            let (samples, took) = fixed_rate_raw(client, url, key, rate, secs).await;
            lat.extend(samples);
            *t += took;
        }
    }
    (stats(d, dt), stats(b, bt))
}

/// The same for streams: `total` per side, in `rounds` rounds.
async fn interleaved_streams(
    client: &reqwest::Client,
    direct: &str,
    baton: &str,
    key: &str,
    total: usize,
    concurrency: usize,
    rounds: usize,
) -> ((Stats, Stats), (Stats, Stats)) {
    let (mut d, mut b) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for round in 0..rounds {
        for side in 0..2 {
            let to_baton = (side + round) % 2 == 1;
            let (url, acc) = if to_baton {
                (baton, &mut b)
            } else {
                (direct, &mut d)
            };
            let (ttfb, full) = streams_raw(client, url, key, total / rounds, concurrency).await;
            acc.0.extend(ttfb);
            acc.1.extend(full);
        }
    }
    (
        (stats(d.0, 0.0), stats(d.1, 0.0)),
        (stats(b.0, 0.0), stats(b.1, 0.0)),
    )
}

/// Open loop: one request every `1/rate` s for `secs` s; per request, the time to the first
/// answer token (streams; the whole answer otherwise) and to the end. Latency without the
/// queueing a saturating closed loop adds.
async fn open_loop(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    rate: u64,
    secs: u64,
    stream: bool,
) -> (Vec<f64>, Vec<f64>) {
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    for _ in 0..rate * secs {
        tick.tick().await;
        let (client, url, key) = (client.clone(), url.to_string(), key.to_string());
        tasks.push(tokio::spawn(async move {
            let (first, full) = timed(&client, &url, &key, stream).await;
            (
                if stream {
                    first.unwrap_or(f64::NAN)
                } else {
                    full
                },
                full,
            )
        }));
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for t in tasks {
        let (x, y) = t.await.unwrap();
        if x.is_finite() {
            a.push(x);
        }
        b.push(y);
    }
    (a, b)
}

/// Streams at a fixed rate, direct and through Baton alternating in rounds.
async fn interleaved_stream_rate(
    client: &reqwest::Client,
    direct: &str,
    baton: &str,
    key: &str,
    rate: u64,
    rounds: u64,
) -> (Stats, Stats) {
    let (mut d, mut b) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for side in 0..2 {
            let to_baton = (side + round) % 2 == 1;
            let url = if to_baton { baton } else { direct };
            let (ttfb, _) = open_loop(client, url, key, rate, 1, true).await;
            if to_baton {
                b.extend(ttfb);
            } else {
                d.extend(ttfb);
            }
        }
    }
    (stats(d, 0.0), stats(b, 0.0))
}

/// Open loop: one request every `1/rate` s for `secs` seconds.
async fn fixed_rate(client: &reqwest::Client, url: &str, key: &str, rate: u64, secs: u64) -> Stats {
    let (all, took) = fixed_rate_raw(client, url, key, rate, secs).await;
    stats(all, took)
}

async fn fixed_rate_raw(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    rate: u64,
    secs: u64,
) -> (Vec<f64>, f64) {
    let started = Instant::now();
    let (_, full) = open_loop(client, url, key, rate, secs, false).await;
    (full, started.elapsed().as_secs_f64())
}

/// Streams: time to first byte and full-stream time, `total` requests at `concurrency`.
async fn streams(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    total: usize,
    concurrency: usize,
) -> (Stats, Stats) {
    let started = Instant::now();
    let (a, b) = streams_raw(client, url, key, total, concurrency).await;
    let secs = started.elapsed().as_secs_f64();
    (stats(a, secs), stats(b, secs))
}

async fn streams_raw(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    total: usize,
    concurrency: usize,
) -> (Vec<f64>, Vec<f64>) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (client, url, key, next) = (
            client.clone(),
            url.to_string(),
            key.to_string(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let (mut ttfb, mut full) = (Vec::new(), Vec::new());
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                let (first, whole) = timed(&client, &url, &key, true).await;
                ttfb.extend(first);
                full.push(whole);
            }
            (ttfb, full)
        }));
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for t in tasks {
        let (x, y) = t.await.unwrap();
        a.extend(x);
        b.extend(y);
    }
    (a, b)
}

/// One request read to its end: milliseconds to the first answer token (streams only; what a
/// user waits for, measured the same for both paths) and to the end.
async fn timed(client: &reqwest::Client, url: &str, key: &str, stream: bool) -> (Option<f64>, f64) {
    let t = Instant::now();
    let r = client
        .post(url)
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body(stream))
        .send()
        .await
        .unwrap();
    let mut s = r.bytes_stream();
    let mut first = None;
    while let Some(c) = s.next().await {
        let c = c.unwrap();
        if first.is_none() && stream && has_content(&c) {
            first = Some(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    (first, t.elapsed().as_secs_f64() * 1000.0)
}

fn has_content(chunk: &[u8]) -> bool {
    let pat = b"\"content\":\"";
    chunk
        .windows(pat.len() + 1)
        .any(|w| w.starts_with(pat) && w[pat.len()] != b'"')
}

fn row(name: &str, direct: f64, baton: f64, unit: &str) {
    println!(
        "| {name} | {direct:.3} {unit} | {baton:.3} {unit} | {:.2}x |",
        baton / direct
    );
}

/// Starts `baton serve` with `config` (pinned to `BENCH_BATON_CPU` when set); returns the
/// process, its pid and its chat URL.
fn start_baton(
    baton_bin: &str,
    dir: &std::path::Path,
    config: &serde_json::Value,
    envs: &[(&str, &str)],
) -> (KillOnDrop, u32, String) {
    let cfg = dir.join("config.json");
    std::fs::write(&cfg, config.to_string()).unwrap();
    // BENCH_WRAP runs Baton under a tool (e.g. `strace -c -f -o /tmp/st`), to look inside.
    let mut argv: Vec<String> = std::env::var("BENCH_WRAP")
        .map(|w| w.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    if let Ok(cpu) = std::env::var("BENCH_BATON_CPU") {
        argv.splice(0..0, ["taskset".to_string(), "-c".into(), cpu]);
    }
    argv.push(baton_bin.to_string());
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    let mut child = cmd
        .args([
            "serve",
            "--config",
            cfg.to_str().unwrap(),
            "--data-dir",
            dir.join("data").to_str().unwrap(),
            "--port",
            "0",
        ])
        .envs(envs.iter().copied())
        .env("BATON_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start baton");
    let stdout = child.stdout.take().unwrap();
    let pid = child.id();
    let child = KillOnDrop(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = format!(
        "{}/v1/chat/completions",
        line.split_whitespace().last().unwrap()
    );
    (child, pid, url)
}

/// One gateway key for every build a run starts, so requests can alternate between them.
const SHARED_KEY: &str = "bt-compare-key-000000000000000000000000000000";

/// Starts `bin` in `dir/name` with `fake` as its one provider, accepting [`SHARED_KEY`].
fn start_shared(
    bin: &str,
    dir: &std::path::Path,
    name: &str,
    fake: &FakeUpstream,
) -> (KillOnDrop, u32, String) {
    start_shared_with(bin, dir, name, fake, &[])
}

/// `start_shared` with more environment (`relay-floor`'s mode).
fn start_shared_with(
    bin: &str,
    dir: &std::path::Path,
    name: &str,
    fake: &FakeUpstream,
    envs: &[(&str, &str)],
) -> (KillOnDrop, u32, String) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let config = json!({"providers": [{"id": "fake", "kind": "openai-compatible", "baseUrl": fake.base_url(), "models": ["m"]}],
        "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}],
        "log": {"retentionDays": 1}});
    let mut all = vec![("BENCH_KEY", SHARED_KEY)];
    all.extend_from_slice(envs);
    start_baton(bin, &d, &config, &all)
}

/// Long because it is the benchmark script: its phases in the order the report prints them.
#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let baton_bin = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/release/baton".into());
    let n: usize = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let _ = rustls::crypto::ring::default_provider().install_default();
    if args.iter().any(|a| a == "--state") {
        state::state_bench(&baton_bin, n).await;
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--cache") {
        cache::cache_bench(&baton_bin, args.get(i + 1).map(String::as_str)).await;
        return;
    }
    if args.iter().any(|a| a == "--scale") {
        scale::scale_bench(&baton_bin).await;
        return;
    }
    if args.iter().any(|a| a == "--hedge") {
        let n = std::env::var("BENCH_REQUESTS").map_or(300, |_| n);
        hedge::hedge_bench(&baton_bin, n).await;
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--first-byte") {
        let baseline = args.get(i + 1).map(String::as_str);
        let n = std::env::var("BENCH_REQUESTS").map_or(2_000, |_| n);
        first_byte::first_byte_bench(&baton_bin, baseline, n).await;
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--compare") {
        let baseline = args
            .get(i + 1)
            .expect("--compare needs the baseline baton binary");
        compare::compare_bench(baseline, &baton_bin, n).await;
        return;
    }

    let fake = FakeUpstream::start("bench").await;
    fake.unchecked_for_benchmarks();
    fake.always(Behavior::Ok);
    let dir = tempfile_dir();
    // BENCH_BATON_CPU pins Baton to one core (the load generator and fake upstream get the other),
    // which measures "one core" honestly and keeps the two sides from stealing each other's time.
    let (child, pid, baton_url) = start_baton(
        &baton_bin,
        &dir,
        &json!({"providers": [{"id": "fake", "kind": "openai-compatible", "baseUrl": fake.base_url(), "models": ["m"]}],
            "log": {"retentionDays": 1}}),
        &[],
    );
    let key = std::fs::read_to_string(dir.join("data/gateway.key"))
        .unwrap()
        .trim()
        .to_string();
    let direct_url = format!("{}/chat/completions", fake.base_url());
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .tcp_nodelay(true)
        .build()
        .unwrap();

    // Warm up both paths.
    closed_loop(&client, &direct_url, &key, 2_000, 16).await;
    closed_loop(&client, &baton_url, &key, 2_000, 16).await;

    println!(
        "## Baton benchmark ({n} requests; Baton pinned to CPU {}; load generator and fake upstream in one process)\n",
        std::env::var("BENCH_BATON_CPU").unwrap_or_else(|_| "any".into())
    );
    println!("| measure | direct | through Baton | ratio |\n|---|---|---|---|");
    let d = closed_loop(&client, &direct_url, &key, n, 32).await;
    let cpu0 = proc_cpu_secs(pid);
    let b = closed_loop(&client, &baton_url, &key, n, 32).await;
    let cpu_per_1000 = (proc_cpu_secs(pid) - cpu0) / b.count as f64 * 1000.0;
    row(
        "non-streaming throughput (32 conns)",
        d.count as f64 / d.secs,
        b.count as f64 / b.secs,
        "req/s",
    );
    row("non-streaming p50 (32 conns)", d.p50, b.p50, "ms");
    row("non-streaming p99 (32 conns)", d.p99, b.p99, "ms");

    // Latency: direct and through Baton alternate in short rounds, so drift falls on both.
    let (d, b) = interleaved_rate(&client, &direct_url, &baton_url, &key, 1000, 5, 1).await;
    row("p50 at 1,000 req/s", d.p50, b.p50, "ms");
    row("p99 at 1,000 req/s", d.p99, b.p99, "ms");
    let added_p99 = b.p99 - d.p99;

    let (dr, br) = interleaved_stream_rate(&client, &direct_url, &baton_url, &key, 200, 5).await;
    row(
        "stream time to first token p50 at 200 streams/s",
        dr.p50,
        br.p50,
        "ms",
    );
    row(
        "stream time to first token p99 at 200 streams/s",
        dr.p99,
        br.p99,
        "ms",
    );
    let added_ttfb = br.p50 - dr.p50;
    let ((dt, df), (bt, bf)) =
        interleaved_streams(&client, &direct_url, &baton_url, &key, 2_000, 8, 5).await;
    row(
        "stream time to first token p50 (8 streams, closed loop)",
        dt.p50,
        bt.p50,
        "ms",
    );
    row(
        "stream time to first token p99 (8 streams, closed loop)",
        dt.p99,
        bt.p99,
        "ms",
    );
    row(
        "full stream p50 (8 streams, closed loop)",
        df.p50,
        bf.p50,
        "ms",
    );

    // 64 concurrent slow streams: sample Baton's resident memory while they run.
    fake.always(Behavior::SlowStream {
        chunks: 40,
        delay_ms: 25,
    });
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        for _ in 0..150 {
            peak = peak.max(proc_kb(pid, "VmRSS:"));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        peak
    });
    streams(&client, &baton_url, &key, 64, 64).await;
    let rss_peak_64 = sampler.await.unwrap();
    let hwm = proc_kb(pid, "VmHWM:");

    println!("\n| Baton itself | value | target |\n|---|---|---|");
    println!("| CPU seconds per 1,000 non-streaming requests | {cpu_per_1000:.4} | <= 0.08 |");
    println!("| added p99 at 1,000 req/s | {added_p99:.3} ms | <= 0.3 ms |");
    println!("| added time to first token (p50, 200 streams/s) | {added_ttfb:.3} ms | <= 0.3 ms |");
    println!(
        "| RSS during 64 concurrent streams | {:.1} MB | <= 30 MB |",
        rss_peak_64 as f64 / 1024.0
    );
    println!(
        "| peak RSS over the whole run (VmHWM) | {:.1} MB | |",
        hwm as f64 / 1024.0
    );
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("baton-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
