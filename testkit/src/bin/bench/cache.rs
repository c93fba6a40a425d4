//! `bench --cache [OLD]`: the prompt-cache hit ratio of plain multi-turn chats (no session
//! named, a short system prompt, as an SDK sends them) through Baton on one provider with three
//! keys, against a fake that keeps a prompt cache per key (`model_prompt_cache`). With an old
//! build given, both are measured in the same run.

use serde_json::{json, Value};
use testkit::FakeUpstream;

use super::{start_baton, tempfile_dir};

const CHATS: usize = 20;
const TURNS: usize = 6;
const KEYS: [(&str, &str); 3] = [
    ("BENCH_CACHE_K1", "sk-bench-one"),
    ("BENCH_CACHE_K2", "sk-bench-two"),
    ("BENCH_CACHE_K3", "sk-bench-three"),
];

/// One build: cached ÷ prompt tokens over every turn after the first, and the mean number of
/// keys a chat's turns used.
async fn one(bin: &str) -> (f64, f64) {
    let fake = FakeUpstream::start("cache").await;
    fake.model_prompt_cache();
    let dir = tempfile_dir().join(format!("cache-{}", rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = json!({"providers": [{"id": "fake", "kind": "openai-compatible",
        "baseUrl": fake.base_url(), "models": ["m"],
        "keys": KEYS.iter().map(|(n, _)| json!({"env": n})).collect::<Vec<_>>()}],
        "log": {"retentionDays": 1}});
    let (child, _pid, url) = start_baton(bin, &dir, &config, &KEYS);
    let key = std::fs::read_to_string(dir.join("data/gateway.key"))
        .unwrap()
        .trim()
        .to_string();
    let client = reqwest::Client::new();
    let mut histories: Vec<Vec<Value>> = (0..CHATS)
        .map(|c| vec![json!({"role": "system", "content": format!("You are assistant number {c}. Answer briefly.")})])
        .collect();
    let (mut cached, mut prompt) = (0u64, 0u64);
    for turn in 0..TURNS {
        // Conversations interleave, as concurrent users' do.
        for (c, history) in histories.iter_mut().enumerate() {
            history.push(json!({"role": "user", "content": format!("Question {turn} of chat {c}: {}", "tell me more. ".repeat(20))}));
            let body = serde_json::to_vec(&json!({"model": "m", "messages": history})).unwrap();
            let r = client
                .post(&url)
                .bearer_auth(&key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            let r: Value = serde_json::from_slice(&r).unwrap();
            let answer = r["choices"][0]["message"]["content"].clone();
            history.push(json!({"role": "assistant", "content": answer}));
            if turn > 0 {
                cached += r["usage"]["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0);
                prompt += r["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
            }
        }
    }
    // Keys per chat, from what the fake received (a chat is named by its system prompt).
    let mut keys: std::collections::HashMap<String, std::collections::HashSet<String>> =
        Default::default();
    for r in fake.received() {
        let system = r.body["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let auth = r
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        keys.entry(system).or_default().insert(auth);
    }
    let mean_keys = keys.values().map(|k| k.len() as f64).sum::<f64>() / keys.len().max(1) as f64;
    drop(child);
    let _ = std::fs::remove_dir_all(&dir);
    (cached as f64 / prompt.max(1) as f64, mean_keys)
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

pub(super) async fn cache_bench(new_bin: &str, old_bin: Option<&str>) {
    println!(
        "## Prompt-cache hits: {CHATS} plain chats × {TURNS} turns, one provider with {} keys\n",
        KEYS.len()
    );
    println!("| build | cached ÷ prompt tokens (turns 2–{TURNS}) | keys per chat |\n|---|---|---|");
    let mut sides = vec![("new", new_bin)];
    if let Some(old) = old_bin {
        sides.insert(0, ("old", old));
    }
    for (name, bin) in sides {
        let (ratio, keys) = one(bin).await;
        println!("| {name} | {:.1} % | {keys:.2} |", ratio * 100.0);
    }
}
