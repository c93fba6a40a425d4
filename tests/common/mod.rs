//! Shared helpers: start a real gateway on 127.0.0.1:0 with a temporary data directory and
//! talk to it over HTTP.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use baton::{GatewayHandle, StartOptions};
use serde_json::{json, Value};

pub struct Baton {
    pub handle: GatewayHandle,
    pub url: String,
    pub key: String,
    pub admin_key: String,
    pub http: reqwest::Client,
}

impl Baton {
    pub async fn start(dir: &Path, config: Value) -> Self {
        Self::start_with_clock(dir, config, None).await
    }

    /// Starts with a clock the test moves by hand (cooldowns, breaker, resets never wait).
    pub async fn start_with_clock(
        dir: &Path,
        config: Value,
        clock: Option<std::sync::Arc<dyn baton::clock::Clock>>,
    ) -> Self {
        let config: baton::config::ConfigFile =
            baton::config::parse_str(&config.to_string(), Path::new("test.json"))
                .expect("valid test config");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let handle = baton::start(
            StartOptions {
                config,
                data_dir: dir.to_path_buf(),
                clock,
            },
            listener,
        )
        .await
        .expect("gateway starts");
        let key = std::fs::read_to_string(dir.join("gateway.key"))
            .unwrap()
            .trim()
            .to_string();
        let admin_key = std::fs::read_to_string(dir.join("admin.key"))
            .unwrap()
            .trim()
            .to_string();
        Baton {
            url: format!("http://{}", handle.addr),
            key,
            admin_key,
            handle,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    pub fn post(&self, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/v1/chat/completions", self.url))
            .bearer_auth(&self.key)
            .json(&body)
    }

    /// A Messages API request, authenticated as an Anthropic SDK does.
    pub fn messages(&self, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/v1/messages", self.url))
            .header("x-api-key", &self.key)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
    }

    /// A Messages API `count_tokens` request, authenticated as an Anthropic SDK does.
    pub fn count_tokens(&self, body: Value) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}/v1/messages/count_tokens", self.url))
            .header("x-api-key", &self.key)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
    }

    /// A chat request for `model` made with client key `key`.
    pub async fn chat_as(&self, key: &str, model: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/v1/chat/completions", self.url))
            .bearer_auth(key)
            .json(&chat_body(model, "hi", false))
            .send()
            .await
            .unwrap()
    }

    pub async fn chat(&self, model: &str, text: &str) -> reqwest::Response {
        self.post(chat_body(model, text, false))
            .send()
            .await
            .unwrap()
    }

    pub async fn admin_state(&self) -> serde_json::Value {
        let r = self
            .http
            .get(format!("{}/admin/state", self.url))
            .bearer_auth(&self.admin_key)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// `baton status` against this gateway, its admin key read from `dir` (its data directory).
    pub fn status_args(&self, dir: &Path) -> Vec<String> {
        vec![
            "status".into(),
            "--url".into(),
            self.url.clone(),
            "--data-dir".into(),
            dir.display().to_string(),
        ]
    }

    /// `GET /metrics` as text.
    pub async fn metrics(&self) -> String {
        let r = self
            .http
            .get(format!("{}/metrics", self.url))
            .bearer_auth(&self.admin_key)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.text().await.unwrap()
    }

    pub async fn stop(self) {
        self.handle.shutdown().await;
    }

    /// Waits until the writer has flushed, then returns the newest log rows.
    pub async fn log(&self) -> Vec<baton::store::LogRow> {
        self.handle.core.store.writer().flush().await;
        self.handle.core.store.recent_requests(100).unwrap()
    }
}

pub fn chat_body(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]})
}

pub fn provider(id: &str, base_url: &str, priority: i64) -> Value {
    json!({"id": id, "kind": "openai-compatible", "baseUrl": base_url,
        "models": [format!("{id}-model")], "priority": priority,
        "timeouts": {"connectMs": 2000, "firstByteMs": 3000, "idleMs": 3000}})
}

/// `claude-sub`, a Claude subscription passed through on `fake` (`credentials: "client"`, any
/// model the client names), first in the order: it serves only clients that bring their login.
pub fn login_only(fake: &testkit::FakeUpstream) -> Value {
    json!({"id": "claude-sub", "kind": "anthropic", "baseUrl": fake.base_url(),
        "credentials": "client", "models": ["*"], "priority": 1})
}

/// A provider on `fake` with these keys, each read from its environment variable (set here).
pub fn keyed(id: &str, fake: &testkit::FakeUpstream, prio: i64, vars: &[(&str, &str)]) -> Value {
    for (name, value) in vars {
        std::env::set_var(name, value);
    }
    let mut p = provider(id, &fake.base_url(), prio);
    p["keys"] = json!(vars
        .iter()
        .map(|(n, _)| json!({"env": n}))
        .collect::<Vec<_>>());
    p
}

/// The key each request to `f` carried, in order.
pub fn auths(f: &testkit::FakeUpstream) -> Vec<String> {
    f.received()
        .iter()
        .map(|r| {
            r.headers["authorization"]
                .to_str()
                .unwrap()
                .trim_start_matches("Bearer ")
                .to_string()
        })
        .collect()
}

pub fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Splits an SSE body into its `data:` payloads.
pub fn sse_data(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|ev| {
            ev.lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_string)
        })
        .collect()
}

/// Concatenated `delta.content` of an OpenAI stream.
pub fn stream_text(events: &[String]) -> String {
    events
        .iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .filter_map(|v| {
            v.pointer("/choices/0/delta/content")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}

/// Polls `f` until it is true or `secs` pass; returns the last value.
pub async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the real `baton` binary off the async runtime (a gateway in this process keeps
/// serving); returns exit code, stdout, stderr.
pub async fn run_baton(
    args: Vec<String>,
    envs: Vec<(&'static str, &'static str)>,
) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
        cmd.args(&args)
            .env("NO_COLOR", "1")
            .env_remove("BATON_ADMIN_KEY");
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// The admin API with the admin key in a header.
pub struct Admin<'a>(pub &'a Baton);

impl Admin<'_> {
    pub fn req(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.0
            .http
            .request(method, format!("{}{path}", self.0.url))
            .header("x-admin-key", &self.0.admin_key)
    }
    pub async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut r = self.req(method, path);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Sends one `auto` request and returns the provider that served it.
pub async fn served_by(b: &Baton) -> String {
    let r = b.chat("auto", "hi").await;
    assert_eq!(r.status(), 200);
    header(&r, "x-gateway-provider").to_string()
}

/// Everything the test process logs (through `tracing`), for asserting on what was written.
#[derive(Clone, Default)]
pub struct Captured(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    /// Everything the test process logs at debug level and above, in one buffer every test
    /// shares (a subscriber is global to the process, and all the tests run in one).
    pub fn install() -> Self {
        static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
        LOGS.get_or_init(|| {
            let logs = Captured::default();
            let writer = logs.clone();
            let _ = tracing_subscriber::fmt()
                .with_env_filter("debug,hyper=info,reqwest=info,h2=info,rustls=info")
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .try_init();
            logs
        })
        .clone()
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

/// Held by the tests that load this process's memory heavily or measure it (RSS is the whole
/// test process's): they do not overlap, so one's load is not read as the other's leak.
pub static MEMORY_HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
