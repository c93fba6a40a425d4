//! The external fault-injection benchmark's shape, as a test of our own: a fault-injecting fake
//! upstream (`a`, first in line) and a healthy one (`b`), driven through Baton with its default
//! settings — no timeouts, retries or fallbacks tuned. Each scenario says what a client must
//! see; all sixteen must pass. They run concurrently (each on its own gateway), so the two that
//! wait out the default 30 s silence bound cost 30 s together.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// A provider with Baton's defaults: only what every provider must say.
fn plain(id: &str, url: &str, priority: i64) -> Value {
    json!({"id": id, "kind": "openai-compatible", "baseUrl": url,
        "models": [format!("{id}-model")], "priority": priority})
}

struct Lab {
    a: FakeUpstream,
    b: FakeUpstream,
    baton: Baton,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Lab {
    async fn start() -> Self {
        let a = FakeUpstream::start("a").await;
        let b = FakeUpstream::start("b").await;
        let dir = tempfile::tempdir().unwrap();
        let baton = Baton::start(
            dir.path(),
            json!({"providers": [plain("a", &a.base_url(), 1), plain("b", &b.base_url(), 2)]}),
        )
        .await;
        Lab {
            a,
            b,
            baton,
            // Longer than any default bound, so Baton, not the client, decides.
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()
                .unwrap(),
            _dir: dir,
        }
    }

    async fn send(&self, text: &str, stream: bool) -> Result<(u16, String, String), String> {
        let r = self
            .http
            .post(format!("{}/v1/chat/completions", self.baton.url))
            .bearer_auth(&self.baton.key)
            .json(&chat_body("auto", text, stream))
            .send()
            .await
            .map_err(|e| format!("transport error: {e}"))?;
        let status = r.status().as_u16();
        let provider = header(&r, "x-gateway-provider").to_string();
        let body = r.text().await.map_err(|e| format!("body error: {e}"))?;
        Ok((status, provider, body))
    }

    /// A non-streamed request that must succeed; returns the serving provider.
    async fn ok(&self, text: &str) -> Result<String, String> {
        let (status, provider, body) = self.send(text, false).await?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        let content = v
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str);
        if status != 200 || content != Some(&format!("{provider}: {text}")) {
            return Err(format!("{status} from {provider:?}: {body}"));
        }
        Ok(provider)
    }

    /// A streamed request that must complete with `[DONE]`; returns the serving provider.
    async fn ok_stream(&self, text: &str) -> Result<String, String> {
        let (status, provider, body) = self.send(text, true).await?;
        let events = sse_data(&body);
        if status != 200
            || events.last().map(String::as_str) != Some("[DONE]")
            || stream_text(&events) != format!("{provider}: {text}")
        {
            return Err(format!("{status} from {provider:?}: {body}"));
        }
        Ok(provider)
    }

    /// A streamed request whose upstream breaks after content: the content so far, then the
    /// explicit `stream_interrupted` event and no `[DONE]`.
    async fn interrupted(&self, text: &str) -> Result<(), String> {
        let (status, provider, body) = self.send(text, true).await?;
        let events = sse_data(&body);
        let last = events.last().cloned().unwrap_or_default();
        let content = stream_text(&events);
        if status != 200
            || provider != "a"
            || content.is_empty()
            || !format!("a: {text}").starts_with(&content)
            || !last.contains("\"stream_interrupted\"")
            || events.iter().any(|e| e == "[DONE]")
        {
            return Err(format!("{status} from {provider:?}: {body}"));
        }
        Ok(())
    }

    async fn provider_state(&self, id: &str) -> Value {
        let s = self.baton.admin_state().await;
        s["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .cloned()
            .unwrap()
    }

    async fn log(&self) -> Vec<baton::store::LogRow> {
        self.baton.log().await
    }
}

fn check(cond: bool, what: impl Into<String>) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what.into())
    }
}

fn status_429(retry_after: Option<u64>) -> Behavior {
    Behavior::rate_limited(retry_after)
}

fn error(status: u16, kind: &str, code: &str, message: &str) -> Behavior {
    Behavior::Status {
        status,
        body: json!({"error": {"message": message, "type": kind, "param": "messages", "code": code}}),
        headers: vec![],
    }
}

type Run = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

fn scenarios() -> Vec<(&'static str, Run)> {
    vec![
        (
            "429 with Retry-After",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([status_429(Some(20))]);
                check(l.ok("one").await? == "b", "fails over to b")?;
                let a = l.provider_state("a").await;
                let until = a["cooldowns"][0]["untilMs"].as_i64().unwrap_or(0);
                let left = until - baton::clock::Clock::now_ms(&baton::clock::SystemClock);
                check(
                    (15_000..=21_000).contains(&left),
                    format!("a cools for the 20 s it said: {a}"),
                )?;
                check(
                    l.ok("two").await? == "b" && l.a.hits() == 1,
                    "a is not called while cooling",
                )
            }),
        ),
        (
            "429 without Retry-After",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([status_429(None)]);
                check(l.ok("one").await? == "b", "fails over to b")?;
                let a = l.provider_state("a").await;
                check(
                    a["cooldowns"].as_array().is_some_and(|c| !c.is_empty()),
                    format!("a cools for the default: {a}"),
                )?;
                check(
                    l.ok("two").await? == "b" && l.a.hits() == 1,
                    "a is not called while cooling",
                )
            }),
        ),
        (
            "persistent 429",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.always(status_429(Some(60)));
                for i in 0..5 {
                    check(
                        l.ok(&format!("q{i}")).await? == "b",
                        "every request served by b",
                    )?;
                }
                check(
                    l.a.hits() == 1,
                    format!("a was asked once, not {} times", l.a.hits()),
                )
            }),
        ),
        (
            "500 then 200",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::status(500)]);
                check(
                    l.ok("one").await? == "a",
                    "one immediate retry on the same provider",
                )?;
                check(l.a.hits() == 2 && l.b.hits() == 0, "a twice, b never")
            }),
        ),
        (
            "503",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([error(
                    503,
                    "server_error",
                    "service_unavailable",
                    "Service temporarily unavailable",
                )]);
                check(l.ok("one").await? == "b", "fails over to b")
            }),
        ),
        (
            "connection reset",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::Reset]);
                check(
                    l.ok("one").await? == "a",
                    "a lone reset is retried on the spot",
                )?;
                l.a.script([Behavior::Reset, Behavior::Reset]);
                check(l.ok_stream("two").await? == "b", "retried once, then b")
            }),
        ),
        (
            "no response",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::Hang]);
                let t = Instant::now();
                check(l.ok_stream("one").await? == "b", "fails over from silence")?;
                let s = t.elapsed().as_secs_f64();
                check(s < 35.0, format!("within the 30 s default, not {s:.1} s"))?;
                check(
                    l.a.hits() == 1,
                    "a silence is not retried on the same provider",
                )
            }),
        ),
        (
            "slow first token",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::Delay(6_000)]);
                check(
                    l.ok_stream("one").await? == "a",
                    "a slow but healthy provider keeps the request",
                )?;
                l.a.script([Behavior::Thinks(3_000)]);
                check(
                    l.ok_stream("two").await? == "a",
                    "so does a model that reasons first",
                )?;
                check(l.b.hits() == 0, "no failover")
            }),
        ),
        (
            "cut stream",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::StreamDies(2)]);
                l.interrupted("one two three").await?;
                let log = l.log().await;
                check(
                    log[0].attempts[0].class.as_str() == "transient",
                    format!("logged as a failure: {:?}", log[0].attempts),
                )
            }),
        ),
        (
            "stalled stream",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::StreamStalls(2)]);
                let t = Instant::now();
                l.interrupted("one two three").await?;
                let s = t.elapsed().as_secs_f64();
                check(
                    s < 35.0,
                    format!("ended after the 30 s idle default, not {s:.1} s"),
                )
            }),
        ),
        (
            "malformed chunk",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::StreamMalformed(2)]);
                l.interrupted("one two three").await?;
                // Before content it is a failed attempt like a dropped connection: retried once,
                // then the next provider; the client sees a clean answer either way.
                l.a.script([Behavior::StreamMalformed(0), Behavior::StreamMalformed(0)]);
                check(
                    l.ok_stream("four").await? == "b",
                    "before content: fails over",
                )?;
                check(
                    l.a.hits() == 3,
                    format!("a: the broken stream, then one retry: {}", l.a.hits()),
                )
            }),
        ),
        (
            "missing [DONE]",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([Behavior::StreamNoDone]);
                check(
                    l.ok_stream("one").await? == "a",
                    "a finished answer gets its [DONE]",
                )
            }),
        ),
        (
            "context length",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([error(400, "invalid_request_error", "context_length_exceeded",
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.")]);
                check(
                    l.ok("one").await? == "b",
                    "another model may take it (contextFallback)",
                )?;
                let a = l.provider_state("a").await;
                check(
                    a["cooldowns"].as_array().is_none_or(|c| c.is_empty()),
                    format!("nothing cools for a long prompt: {a}"),
                )
            }),
        ),
        (
            "content filter",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([error(
                    400,
                    "invalid_request_error",
                    "content_policy_violation",
                    "Your request was rejected as a result of our safety system.",
                )]);
                let (status, _, body) = l.send("one", false).await?;
                let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
                check(
                    status == 400 && v["error"]["code"] == "content_policy_violation",
                    format!("the provider's own code reaches the client: {status} {body}"),
                )?;
                check(
                    l.b.hits() == 0,
                    "not sent elsewhere by default (contentPolicyFallback off)",
                )?;
                check(l.ok("two").await? == "a", "and a stays in rotation")
            }),
        ),
        (
            "flapping provider",
            Box::pin(async {
                let l = Lab::start().await;
                for _ in 0..10 {
                    l.a.script([Behavior::status(500), Behavior::status(500), Behavior::Ok]);
                }
                for i in 0..10 {
                    let stream = i % 2 == 0;
                    let text = format!("q{i}");
                    if stream {
                        l.ok_stream(&text).await?;
                    } else {
                        l.ok(&text).await?;
                    }
                }
                Ok(())
            }),
        ),
        (
            "503 with model check",
            Box::pin(async {
                let l = Lab::start().await;
                l.a.script([error(
                    503,
                    "server_error",
                    "model_not_available",
                    "The model `a-model` is currently overloaded with other requests.",
                )]);
                let (status, provider, body) = l.send("one", false).await?;
                let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
                check(
                    status == 200 && provider == "b" && v["model"] == "b-model",
                    format!(
                        "the answer names the model that served it: {status} {provider} {body}"
                    ),
                )
            }),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_fault_scenarios_pass_with_default_settings() {
    let all = scenarios();
    assert_eq!(all.len(), 16);
    let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
    let handles: Vec<_> = all.into_iter().map(|(_, run)| tokio::spawn(run)).collect();
    let mut failed = Vec::new();
    for (name, h) in names.iter().zip(handles) {
        match h.await {
            Ok(Ok(())) => eprintln!("pass  {name}"),
            Ok(Err(e)) => failed.push(format!("FAIL  {name}: {e}")),
            Err(e) => failed.push(format!("FAIL  {name}: panicked: {e}")),
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
