//! `bench --scale`: how Baton's cost grows with what users actually send (issue #51) — body
//! size on the passthrough and translated paths, client keys, providers and their keys, Codex's
//! WebSocket against the HTTP stream of the same turn, and many long streams and idle
//! connections. Every figure is a ratio or a difference within one run, against testkit's
//! `bench-mock` (the cheapest upstream; it runs beside the load on the other core).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;

use super::streams::{streams, websocket};
use super::{pct, proc_cpu_secs, start_baton, tempfile_dir, KillOnDrop};

/// The gateway key every Baton of this bench accepts (`BENCH_KEY`).
pub(super) const KEY: &str = "bt-scale-key-00000000000000000000000000000000";

/// Long because it is the bench's report: its sections in the order they print.
pub(super) async fn scale_bench(baton_bin: &str) {
    let (_mock, mock) = start_mock();
    let dir = tempfile_dir();
    println!(
        "## Scale (Baton pinned to CPU {}; bench-mock and the load on the other core)\n",
        std::env::var("BENCH_BATON_CPU").unwrap_or_else(|_| "any".into())
    );
    // BENCH_SCALE=bodies,keys,ws,streams picks sections (all unless told).
    let only = std::env::var("BENCH_SCALE").unwrap_or_default();
    let wants = |s: &str| only.is_empty() || only.split(',').any(|o| o == s);
    if wants("bodies") {
        bodies(baton_bin, &dir, &mock).await;
    }
    if wants("keys") {
        keys_and_providers(baton_bin, &dir, &mock).await;
    }
    if wants("ws") {
        websocket(baton_bin, &dir, &mock).await;
    }
    if wants("streams") {
        streams(baton_bin, &dir, &mock).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `bench-mock` (built beside this binary); its base URL.
pub(super) fn start_mock() -> (KillOnDrop, String) {
    let exe = std::env::current_exe()
        .unwrap()
        .with_file_name("bench-mock");
    let mut child = Command::new(&exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", exe.display()));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.split_whitespace().last().unwrap().to_string();
    (KillOnDrop(child), base)
}

pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(2048)
        .tcp_nodelay(true)
        .build()
        .unwrap()
}

/// A Messages API body of about `size` bytes the way an agent's turn is one: a system prompt,
/// tools, and a conversation of ~1 KB turns (text with quotes, newlines and non-ASCII), the
/// last from the user. `thinking`: as Claude Code sends it with thinking on, each assistant
/// turn beginning with its signed thinking block.
pub(super) fn messages_body(model: &str, size: usize, thinking: bool) -> Vec<u8> {
    let line = "Reading src/router/mod.rs: the \"dispatch\" loop tries each target in turn — \
                see line 42.\n";
    let turn: String = line.repeat(1000 / line.len() + 1);
    let mut messages = Vec::new();
    let mut used = 600;
    while used < size || messages.len() % 2 == 0 {
        let role = if messages.len() % 2 == 0 {
            "user"
        } else {
            "assistant"
        };
        let mut content = vec![json!({"type": "text", "text": turn})];
        if thinking && role == "assistant" {
            // A signature is ~400 characters of base64.
            let signature = format!("{:0>400}", messages.len());
            content.insert(0, json!({"type": "thinking",
                "thinking": "The dispatch loop decides the order; read it first.", "signature": signature}));
            used += 500;
        }
        messages.push(json!({"role": role, "content": content}));
        used += turn.len() + 60;
    }
    let tools: Vec<_> = ["read_file", "write_file", "run_shell"]
        .iter()
        .map(|n| json!({"name": n, "description": format!("{n}: a tool of the agent's."),
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}))
        .collect();
    let mut body = json!({"model": model, "max_tokens": 64, "system": "You are a coding agent.",
        "tools": tools, "messages": messages});
    if thinking {
        body["max_tokens"] = json!(2048);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    }
    serde_json::to_vec(&body).unwrap()
}

async fn post_messages(client: &reqwest::Client, url: &str, body: &[u8]) -> f64 {
    let t = Instant::now();
    let r = client
        .post(url)
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
    let _ = r.bytes().await.unwrap();
    t.elapsed().as_secs_f64() * 1000.0
}

/// `body` POSTed as JSON with the bench's gateway key.
pub(super) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    client
        .post(url)
        .bearer_auth(KEY)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Body size: Messages bodies of 1 KB to 2 MB, one at a time, direct to the mock, through
/// Baton to an Anthropic upstream (passthrough) and to a Chat Completions one (translated), and,
/// when `relay-floor` was built beside this binary, through the two floors: a TCP relay (the
/// extra hop and the body's second trip over loopback, no HTTP) and the least HTTP gateway on
/// Baton's stack (which parses the body and writes it out again). The passthrough body names
/// the model as the upstream serves it, as Claude Code does: the mock's own body, the same bytes
/// direct and through Baton. One request to each path in turn (the order rotating), so this
/// machine's drift falls on every path alike.
/// Long because it is one table: five paths, five sizes.
async fn bodies(baton_bin: &str, dir: &std::path::Path, mock: &str) {
    let d = dir.join("bodies");
    std::fs::create_dir_all(&d).unwrap();
    let config = json!({"providers": [
            {"id": "pass", "kind": "anthropic", "baseUrl": format!("{mock}/v1"), "keys": [{"env": "BENCH_UP"}], "models": ["m"]},
            {"id": "tr", "kind": "openai-compatible", "baseUrl": format!("{mock}/v1"), "models": ["t"]}],
        "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}],
        "log": {"retentionDays": 1}});
    let envs = [("BENCH_KEY", KEY), ("BENCH_UP", "sk-ant-bench-upstream")];
    let (_baton, pid, url) = start_baton(baton_bin, &d, &config, &envs);
    let messages = |url: String| url.replace("/chat/completions", "/messages");
    // (url, which body: 0 names the model the mock and the passthrough route serve, 1 the
    // translated route's)
    let mut paths = vec![
        (format!("{mock}/v1/messages"), 0),
        (messages(url.clone()), 0),
        (messages(url), 1),
    ];
    let mut floors = Vec::new();
    if let Some(floor) = super::first_byte::floor_bin() {
        for mode in ["raw", "http"] {
            let fd = d.join(format!("floor-{mode}"));
            std::fs::create_dir_all(&fd).unwrap();
            let mut envs = envs.to_vec();
            envs.push(("RELAY_FLOOR", mode));
            let (child, _, url) = start_baton(&floor, &fd, &config, &envs);
            floors.push(child);
            paths.push((messages(url), 0));
        }
    }
    let client = client();
    println!("### Body size (Messages API, one request at a time, to each path in turn; p50 of each path)\n");
    println!("| body | direct p50 | passthrough p50 | added | translated p50 | added | floor: TCP relay, added | floor: HTTP relay, added | CPU-ms per MB passthrough | translated |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (label, size, thinking) in [
        ("1 KB", 1_000, false),
        ("100 KB", 100_000, false),
        ("500 KB", 500_000, false),
        ("500 KB, thinking on", 500_000, true),
        ("2 MB", 2_000_000, false),
    ] {
        let n = (40_000_000 / size).clamp(20, 300);
        let bodies = [
            messages_body("m", size, thinking),
            messages_body("tr/t", size, thinking),
        ];
        let (mut lat, mut cpu) = (vec![vec![]; paths.len()], vec![0.0; paths.len()]);
        for (url, body) in &paths {
            for _ in 0..3 {
                post_messages(&client, url, &bodies[*body]).await;
            }
        }
        for i in 0..n {
            for k in 0..paths.len() {
                let at = (i + k) % paths.len();
                let (url, body) = &paths[at];
                // Baton's CPU, read around its own requests only (it idles during the others).
                let c0 = proc_cpu_secs(pid);
                lat[at].push(post_messages(&client, url, &bodies[*body]).await);
                cpu[at] += proc_cpu_secs(pid) - c0;
            }
        }
        let p50: Vec<f64> = lat
            .iter_mut()
            .map(|l| {
                l.sort_by(|a, b| a.partial_cmp(b).unwrap());
                pct(l, 0.5)
            })
            .collect();
        let mb =
            |i: usize| cpu[i] * 1000.0 / ((lat[i].len() * bodies[paths[i].1].len()) as f64 / 1e6);
        let floor = |i: usize| {
            p50.get(i)
                .map_or("—".to_string(), |p| format!("{:+.3} ms", p - p50[0]))
        };
        println!(
            "| {label} | {:.3} ms | {:.3} ms | {:+.3} ms | {:.3} ms | {:+.3} ms | {} | {} | {:.1} | {:.1} |",
            p50[0],
            p50[1],
            p50[1] - p50[0],
            p50[2],
            p50[2] - p50[0],
            floor(3),
            floor(4),
            mb(1),
            mb(2)
        );
    }
    println!("\nTargets: 500 KB passthrough adds <= 1 ms p50, translated <= 3 ms. Thinking on: Claude Code's turns with thinking, each assistant turn beginning with its signed block. The passthrough body names the model as the upstream serves it (as Claude Code does), so it is the very body sent direct and to the floors. The TCP relay is the extra hop alone (the body crosses loopback twice), the HTTP relay the least gateway on Baton's stack (axum, hyper, reqwest; it parses the body and writes it out again).\n");
}

/// Closed loop of `n` plain Chat Completions requests at 32 connections; Baton's CPU seconds
/// per 1,000.
async fn cpu_per_1000(client: &reqwest::Client, url: &str, pid: u32, n: usize, model: &str) -> f64 {
    let body = json!({"model": model, "messages": [{"role": "user", "content": "Say hello to the benchmark"}]}).to_string();
    let c0 = proc_cpu_secs(pid);
    let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (client, url, body, next) =
            (client.clone(), url.to_string(), body.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                let r = post_json(&client, &url, body.clone()).await;
                assert_eq!(r.status(), 200, "{}", r.text().await.unwrap_or_default());
                let _ = r.bytes().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    (proc_cpu_secs(pid) - c0) / n as f64 * 1000.0
}

/// Two Batons, `small` and `large`, the same plain request alternating between them in rounds:
/// each one's CPU seconds per 1,000 (medians of the rounds).
async fn alternate(
    client: &reqwest::Client,
    (small, large): ((u32, &str), (u32, &str)),
    model: &str,
) -> (f64, f64) {
    let n: usize = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    for (pid, url) in [small, large] {
        cpu_per_1000(client, url, pid, 2_000, model).await;
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..4 {
        for side in 0..2 {
            let ((pid, url), acc) = if (side + round) % 2 == 0 {
                (small, &mut a)
            } else {
                (large, &mut b)
            };
            acc.push(cpu_per_1000(client, url, pid, n / 4, model).await);
        }
    }
    a.sort_by(|x, y| x.partial_cmp(y).unwrap());
    b.sort_by(|x, y| x.partial_cmp(y).unwrap());
    (pct(&a, 0.5), pct(&b, 0.5))
}

/// 1 against 1,000 client keys, and 1 provider with 1 key against 200 providers of 5 keys each
/// (every one serving the model `auto` resolves to).
/// Long because it is one table: four gateways, two comparisons.
async fn keys_and_providers(baton_bin: &str, dir: &std::path::Path, mock: &str) {
    let provider = |i: usize, keys: usize| {
        let keys: Vec<_> = (0..keys)
            .map(|k| json!({"env": format!("BENCH_P{i}_K{k}")}))
            .collect();
        json!({"id": format!("p{i}"), "kind": "openai-compatible", "baseUrl": format!("{mock}/v1"), "models": ["m"], "keys": keys})
    };
    let mut many_keys: Vec<(String, String)> = (0..1000)
        .map(|i| {
            (
                format!("BENCH_CLIENT_{i}"),
                format!("bt-scale-client-{i:06}-0000000000000000000000000"),
            )
        })
        .collect();
    many_keys.push(("BENCH_KEY".into(), KEY.into()));
    let mut gateway_keys: Vec<_> = (0..1000)
        .map(|i| json!({"env": format!("BENCH_CLIENT_{i}"), "label": format!("member {i}")}))
        .collect();
    gateway_keys.push(json!({"env": "BENCH_KEY", "label": "bench"}));
    let provider_keys: Vec<(String, String)> = (0..200)
        .flat_map(|i| {
            (0..5).map(move |k| {
                (
                    format!("BENCH_P{i}_K{k}"),
                    format!("sk-bench-{i}-{k}-000000000000"),
                )
            })
        })
        .chain([("BENCH_KEY".to_string(), KEY.to_string())])
        .collect();
    let start = |name: &str, config: serde_json::Value, envs: &[(String, String)]| {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let envs: Vec<(&str, &str)> = envs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        start_baton(baton_bin, &d, &config, &envs)
    };
    let one_key = [
        ("BENCH_KEY".to_string(), KEY.to_string()),
        ("BENCH_P0_K0".into(), "sk-bench-0-0-000000000000".into()),
    ];
    let (_a, pa, ua) = start(
        "keys-1",
        json!({"providers": [provider(0, 1)], "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}], "log": {"retentionDays": 1}}),
        &one_key,
    );
    let mut envs = many_keys.clone();
    envs.push(("BENCH_P0_K0".into(), "sk-bench-0-0-000000000000".into()));
    let (_b, pb, ub) = start(
        "keys-1000",
        json!({"providers": [provider(0, 1)], "gatewayKeys": gateway_keys, "log": {"retentionDays": 1}}),
        &envs,
    );
    let client = client();
    println!("### Keys and providers (plain Chat Completions, 32 connections; CPU seconds per 1,000, medians of 4 alternating rounds)\n");
    println!("| comparison | small | large | large ÷ small | target |\n|---|---|---|---|---|");
    let (s, l) = alternate(&client, ((pa, &ua), (pb, &ub)), "auto").await;
    println!(
        "| 1 vs 1,000 client keys | {s:.4} | {l:.4} | {:.2}x | <= 1.10x |",
        l / s
    );
    drop((_a, _b));
    let (_c, pc, uc) = start(
        "providers-1",
        json!({"providers": [provider(0, 1)], "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}], "log": {"retentionDays": 1}}),
        &one_key,
    );
    let providers: Vec<_> = (0..200).map(|i| provider(i, 5)).collect();
    let (_d, pd, ud) = start(
        "providers-200",
        json!({"providers": providers, "gatewayKeys": [{"env": "BENCH_KEY", "label": "bench"}], "log": {"retentionDays": 1}}),
        &provider_keys,
    );
    let (s, l) = alternate(&client, ((pc, &uc), (pd, &ud)), "auto").await;
    println!("| 1 provider × 1 key vs 200 providers × 5 keys (`auto`) | {s:.4} | {l:.4} | {:.2}x | <= 1.10x |", l / s);
    let (s, l) = alternate(&client, ((pc, &uc), (pd, &ud)), "p0/m").await;
    println!("| the same, the request pinned to one provider (`p0/m`) | {s:.4} | {l:.4} | {:.2}x | <= 1.10x |\n", l / s);
}
