//! A stand-in for the subscription CLIs in tests. Copied into a temp dir as `claude`, `codex`
//! or `gemini`, it acts as that CLI (chosen by its file name) and prints the real CLI's output
//! format, exit codes and error texts (from `tests/fixtures/cli/`, captured from the real CLIs).
//!
//! Environment:
//! - `FAKE_CLI_DIR`: a directory with `modes` (one mode per line: call N uses line N, the last
//!   line repeats) and where each call appends its invocation to `calls.jsonl`. Without it,
//!   `<dir>/<name>` beside the `bin` folder the fake was copied into (`<dir>/bin/claude` uses
//!   `<dir>/claude`): Baton passes a CLI none of its own variables, as it would not pass them to
//!   the real one.
//!
//! Modes: `ok`, `ok-slow`, `nologin`, `limit`, `overloaded`, `capacity` (Gemini sleeps on a
//! quota), `netfail` (Codex retries forever), `hang`, `print-then-hang`, `huge`, `slow-limit`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

const CLAUDE_NOLOGIN: &str =
    include_str!("../../../tests/fixtures/cli/claude-nologin-stream-json.out");
const CLAUDE_LIMIT: &str =
    include_str!("../../../tests/fixtures/cli/claude-fake-oauth-429unified.out");
const CLAUDE_529: &str = include_str!("../../../tests/fixtures/cli/claude-fake-err529.out");
const CODEX_LIMIT: &str = include_str!("../../../tests/fixtures/cli/codex-fake-err429.out");
const CODEX_401: &str = include_str!("../../../tests/fixtures/cli/codex-fake-err401.out");
const CODEX_401_ERR: &str = include_str!("../../../tests/fixtures/cli/codex-fake-err401.err");
const GEMINI_DAILY: &str =
    include_str!("../../../tests/fixtures/cli/gemini-fake-429daily-stream-json.out");
const GEMINI_DAILY_ERR: &str =
    include_str!("../../../tests/fixtures/cli/gemini-fake-429daily-stream-json.err");
const GEMINI_NOLOGIN_ERR: &str =
    include_str!("../../../tests/fixtures/cli/gemini-nologin-stream-json.err");
const GEMINI_CAPACITY: &str =
    include_str!("../../../tests/fixtures/cli/gemini-fake-429capacity-stream-json.out");
const GEMINI_CAPACITY_ERR: &str =
    include_str!("../../../tests/fixtures/cli/gemini-fake-429capacity-stream-json.err");

/// Long because it is the fake CLI's table: one arm per recorded output a test can ask for
/// (`FAKE_CLI_MODE`), each printing the real CLI's bytes.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let me = Path::new(&args[0])
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let rest = &args[1..];
    if rest.first().map(String::as_str) == Some("__sleep") {
        std::thread::sleep(Duration::from_secs(3600));
        return;
    }
    let dir = std::env::var_os("FAKE_CLI_DIR")
        .map(PathBuf::from)
        .or_else(|| beside_bin(&args[0]));
    if rest.iter().any(|a| a == "--version" || a == "-v") {
        println!(
            "{}",
            match me.as_str() {
                "claude" => "2.1.197 (Claude Code)",
                "codex" => "codex-cli 0.171.0",
                _ => "0.61.0",
            }
        );
        return;
    }
    let mode_all = dir
        .as_ref()
        .and_then(|d| std::fs::read_to_string(d.join("modes")).ok())
        .unwrap_or_default();
    let status_mode = mode_all.lines().last().unwrap_or("ok").trim().to_string();
    if me == "claude" && rest.first().map(String::as_str) == Some("auth") {
        let logged_in = status_mode != "nologin";
        println!(
            "{{\n  \"loggedIn\": {logged_in},\n  \"authMethod\": \"{}\"\n}}",
            if logged_in { "claude.ai" } else { "none" }
        );
        std::process::exit(if logged_in { 0 } else { 1 });
    }
    if me == "codex" && rest.first().map(String::as_str) == Some("login") {
        if status_mode == "nologin" {
            eprintln!("Not logged in");
            std::process::exit(1);
        }
        eprintln!("Logged in using ChatGPT");
        return;
    }
    if me == "codex" && rest.first().map(String::as_str) == Some("app-server") {
        // `FAKE_CLI_DIR/codex-limits`: "<5h used percent> <weekly used percent>".
        let limits = dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("codex-limits")).ok())
            .unwrap_or_else(|| "42 17".into());
        app_server(&limits);
        return;
    }

    let mut prompt = String::new();
    let _ = std::io::stdin().read_to_string(&mut prompt);
    let index = dir.as_deref().map(claim_call_index).unwrap_or(0);
    let modes: Vec<&str> = mode_all
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let mode = modes
        .get(index)
        .or(modes.last())
        .copied()
        .unwrap_or("ok")
        .to_string();
    let mut grandchild = None;
    if matches!(
        mode.as_str(),
        "hang" | "print-then-hang" | "capacity" | "netfail"
    ) {
        // A child of our own, as node CLIs have: killing only the direct child would leave it.
        grandchild = std::process::Command::new(&args[0])
            .arg("__sleep")
            .spawn()
            .ok()
            .map(|c| c.id());
    }
    if let Some(d) = &dir {
        let cwd = std::env::current_dir().unwrap_or_default();
        let entries = std::fs::read_dir(&cwd).map(|r| r.count()).unwrap_or(0);
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        let line = serde_json::json!({
            "cli": me, "argv": rest, "stdin": prompt, "cwd": cwd, "cwdEntries": entries,
            "env": env, "pid": std::process::id(), "grandchild": grandchild, "mode": mode,
        });
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(d.join("calls.jsonl"))
        {
            // One write of the whole line: with O_APPEND it cannot interleave with another
            // call's (writeln! may write the line and its newline separately).
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
    let model = rest
        .iter()
        .find_map(|a| a.strip_prefix("--model="))
        .unwrap_or("default")
        .to_string();
    let answer = format!("Hello from fake {me} ({model}): {}", prompt.trim());
    match (me.as_str(), mode.as_str()) {
        (_, "ok" | "ok-slow") => ok(&me, &model, &answer, mode == "ok-slow"),
        // A Claude answer whose login reports N % of its 5-hour window used (the
        // `rate_limit_event` Claude Code prints when the API's headers carry it).
        ("claude", m) if m.starts_with("used:") => {
            let n: f64 = m[5..].parse().unwrap_or(0.0);
            let at = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() + 3600)
                .unwrap_or_default();
            let status = if n >= 100.0 {
                "rejected"
            } else if n >= 80.0 {
                "allowed_warning"
            } else {
                "allowed"
            };
            line(
                serde_json::json!({"type":"rate_limit_event","rate_limit_info":{"status":status,"resetsAt":at,
                "rateLimitType":"five_hour","utilization":n / 100.0,"isUsingOverage":false}}),
            );
            ok(&me, &model, &answer, false)
        }
        (_, "huge") => ok(&me, &model, &"x".repeat(4096).repeat(512), false),
        (_, "hang") => sleep_forever(),
        (_, "print-then-hang") => {
            partial(&me, &model, "The first words");
            sleep_forever();
        }
        (_, "slow-limit") => {
            std::thread::sleep(Duration::from_millis(300));
            limit(&me)
        }
        (_, "limit") => limit(&me),
        ("claude", "limit-soon") => claude_limit_in(3600),
        ("claude", "nologin") => exit_with(CLAUDE_NOLOGIN, "", 1),
        ("codex", "nologin") => exit_with(CODEX_401, CODEX_401_ERR, 1),
        (_, "nologin") => exit_with("", GEMINI_NOLOGIN_ERR, 41),
        ("claude", "overloaded") => exit_with(CLAUDE_529, "", 1),
        (_, "capacity") => {
            print!("{GEMINI_CAPACITY}");
            eprint!("{GEMINI_CAPACITY_ERR}");
            flush();
            sleep_forever();
        }
        (_, "netfail") => {
            println!("{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}");
            println!("{{\"type\":\"turn.started\"}}");
            loop {
                println!("{{\"type\":\"error\",\"message\":\"Reconnecting... waiting for network (Connection failed: error sending request)\"}}");
                flush();
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        (_, other) => {
            eprintln!("fake-cli: unknown mode {other}");
            std::process::exit(2);
        }
    }
}

/// Each call takes the next free index (atomic file creation, safe across parallel calls).
fn claim_call_index(dir: &Path) -> usize {
    (0..10_000)
        .find(|i| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(dir.join(format!("call-{i}")))
                .is_ok()
        })
        .unwrap_or(0)
}

fn flush() {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn exit_with(out: &str, err: &str, code: i32) -> ! {
    print!("{out}");
    eprint!("{err}");
    flush();
    std::process::exit(code);
}

fn limit(me: &str) -> ! {
    match me {
        "claude" => exit_with(CLAUDE_LIMIT, "", 1),
        "codex" => exit_with(CODEX_LIMIT, "", 1),
        _ => exit_with(GEMINI_DAILY, GEMINI_DAILY_ERR, 173),
    }
}

/// Claude's subscription cap as the real CLI prints it, resetting `secs` from now (UTC).
fn claude_limit_in(secs: u64) -> ! {
    use serde_json::json;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let at = now + secs;
    let (h, m) = ((at % 86_400) / 3600, (at % 3600) / 60);
    let (h12, ampm) = match h {
        0 => (12, "am"),
        1..=11 => (h, "am"),
        12 => (12, "pm"),
        _ => (h - 12, "pm"),
    };
    let text = format!("You've hit your session limit · resets {h12}:{m:02}{ampm} (UTC)");
    line(json!({"type":"system","subtype":"init","model":"claude-sonnet-5","tools":[]}));
    line(
        json!({"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":at,"rateLimitType":"five_hour","isUsingOverage":false}}),
    );
    line(
        json!({"type":"assistant","message":{"model":"<synthetic>","role":"assistant","content":[{"type":"text","text":text}]}}),
    );
    line(
        json!({"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":text}),
    );
    std::process::exit(1);
}

/// Codex's app server as 0.171.0 speaks it: JSON-RPC lines, `initialize` first, then
/// `account/rateLimits/read` answered with the login's windows.
fn app_server(limits: &str) {
    use serde_json::json;
    let mut nums = limits
        .split_whitespace()
        .map(|n| n.parse::<f64>().unwrap_or(0.0));
    let (five, week) = (nums.next().unwrap_or(0.0), nums.next().unwrap_or(0.0));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut input = String::new();
    loop {
        input.clear();
        if std::io::stdin().read_line(&mut input).unwrap_or(0) == 0 {
            return;
        }
        let Ok(req) = serde_json::from_str::<serde_json::Value>(&input) else {
            continue;
        };
        match req["method"].as_str() {
            Some("initialize") => line(
                json!({"id": req["id"], "result": {"userAgent": "baton/0.171.0",
                "codexHome": "/home/user/.codex", "platformFamily": "unix", "platformOs": "linux"}}),
            ),
            Some("account/rateLimits/read") => {
                let limits = json!({"limitId": "codex", "limitName": null,
                    "primary": {"usedPercent": five, "windowDurationMins": 300, "resetsAt": now + 3600},
                    "secondary": {"usedPercent": week, "windowDurationMins": 10080, "resetsAt": now + 3 * 86_400},
                    "credits": {"hasCredits": false, "unlimited": false, "balance": "0"},
                    "planType": "plus", "rateLimitReachedType": null});
                line(json!({"id": req["id"], "result": {"rateLimits": limits,
                    "rateLimitsByLimitId": {"codex": limits}}}));
            }
            _ => {}
        }
    }
}

fn line(v: serde_json::Value) {
    println!("{v}");
    flush();
}

/// Start of an answer with one piece of text (then the caller hangs).
fn partial(me: &str, model: &str, text: &str) {
    use serde_json::json;
    match me {
        "claude" => {
            line(json!({"type":"system","subtype":"init","model":model,"tools":[]}));
            line(
                json!({"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_fake","type":"message","role":"assistant","model":model,"content":[],"usage":{"input_tokens":12,"output_tokens":1}}}}),
            );
            line(
                json!({"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}}),
            );
        }
        "codex" => {
            line(json!({"type":"thread.started","thread_id":"t"}));
            line(json!({"type":"turn.started"}));
            line(
                json!({"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":text}}),
            );
        }
        _ => {
            line(json!({"type":"init","session_id":"s","model":model}));
            line(json!({"type":"message","role":"assistant","content":text,"delta":true}));
        }
    }
}

/// A normal answer in the CLI's stream format, text in a few pieces.
fn ok(me: &str, model: &str, answer: &str, slow: bool) {
    use serde_json::json;
    let pieces: Vec<String> = {
        let chars: Vec<char> = answer.chars().collect();
        let n = chars.len().div_ceil(3).max(1);
        chars.chunks(n).map(|c| c.iter().collect()).collect()
    };
    let pause = || {
        if slow {
            std::thread::sleep(Duration::from_millis(150));
        }
    };
    match me {
        "claude" => {
            line(
                json!({"type":"system","subtype":"init","model":model,"tools":[],"claude_code_version":"2.1.197"}),
            );
            line(
                json!({"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_fake","type":"message","role":"assistant","model":model,"content":[],"usage":{"input_tokens":12,"output_tokens":1}}}}),
            );
            line(
                json!({"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}),
            );
            for p in &pieces {
                pause();
                line(
                    json!({"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":p}}}),
                );
            }
            line(
                json!({"type":"assistant","message":{"id":"msg_fake","type":"message","role":"assistant","model":model,"content":[{"type":"text","text":answer}]}}),
            );
            line(json!({"type":"stream_event","event":{"type":"content_block_stop","index":0}}));
            line(
                json!({"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}}),
            );
            line(json!({"type":"stream_event","event":{"type":"message_stop"}}));
            line(
                json!({"type":"result","subtype":"success","is_error":false,"result":answer,"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":7}}),
            );
        }
        "codex" => {
            line(json!({"type":"thread.started","thread_id":"t"}));
            line(
                json!({"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `x` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}),
            );
            line(json!({"type":"turn.started"}));
            pause();
            line(
                json!({"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":answer}}),
            );
            line(
                json!({"type":"turn.completed","usage":{"input_tokens":12,"cached_input_tokens":0,"output_tokens":7,"reasoning_output_tokens":0}}),
            );
        }
        _ => {
            line(
                json!({"type":"init","timestamp":"2026-11-29T22:53:48.595Z","session_id":"s","model":model}),
            );
            line(json!({"type":"message","role":"user","content":"…"}));
            for p in &pieces {
                pause();
                line(json!({"type":"message","role":"assistant","content":p,"delta":true}));
            }
            line(
                json!({"type":"result","status":"success","stats":{"total_tokens":38,"input_tokens":24,"output_tokens":14,"cached":0,"input":24,"duration_ms":234,"tool_calls":0}}),
            );
        }
    }
}

/// `<dir>/<name>` for a fake run as `<dir>/bin/<name>`, when that folder exists.
fn beside_bin(exe: &str) -> Option<PathBuf> {
    let exe = Path::new(exe);
    let name = exe.file_name()?;
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    let dir = bin.parent()?.join(name);
    dir.is_dir().then_some(dir)
}
