//! The fallback loop without a network: a scripted upstream behind [`Upstream`] answers each
//! attempt, and the real loop (key choice, cooldowns, breaker, failover events, the stream
//! pump) decides. The gateway core is real (SQLite in a temporary directory, a manual clock);
//! no HTTP server or socket is involved.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::json;

use crate::providers::outbound::Wire;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::gateway::{Core, StartOptions};
use crate::providers::sse::SseReader;

mod able;

const NOW: i64 = 1_780_000_000_000; // a fixed instant: nothing here depends on today's date

/// One scripted answer.
enum Reply {
    /// A complete OpenAI answer.
    Ok,
    /// An HTTP error: status, headers, body (classified by the real classifier).
    Error(u16, Vec<(&'static str, String)>, &'static str),
    /// A stream: these events (SSE frames) then, if given, a transport break.
    Stream(Vec<&'static str>, Option<&'static str>),
}

/// Answers attempts from a script per target (`provider/model`) or key (`provider/model#key`),
/// and records every attempt it was asked for.
#[derive(Default)]
struct Script {
    plan: Mutex<HashMap<String, VecDeque<Reply>>>,
    calls: Mutex<Vec<String>>,
}

impl Script {
    fn on(self, at: &str, replies: Vec<Reply>) -> Self {
        self.plan
            .lock()
            .unwrap()
            .entry(at.to_string())
            .or_default()
            .extend(replies);
        self
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Upstream for (Script, Arc<Core>) {
    fn attempt<'a>(
        &'a self,
        t: &'a Target,
        key: Option<&'a crate::providers::ApiKey>,
        _inbound: &'a Inbound,
        _request_id: &'a str,
    ) -> impl std::future::Future<Output = Attempt> + Send + 'a {
        let (script, core) = self;
        let label = match key {
            Some(k) => format!("{}#{}", t.label(), k.id),
            None => t.label(),
        };
        script.calls.lock().unwrap().push(label.clone());
        let reply = {
            let mut plan = script.plan.lock().unwrap();
            plan.get_mut(&label)
                .and_then(VecDeque::pop_front)
                .or_else(|| plan.get_mut(&t.label()).and_then(VecDeque::pop_front))
                .unwrap_or_else(|| panic!("no scripted answer for {label}"))
        };
        let attempt = match reply {
            Reply::Ok => Attempt::Served(Answer::Complete(
                super::Reply::Wire(
                    Bytes::from_static(
                        br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#,
                    ),
                    Wire::OpenAi,
                ),
                None,
                None,
            )),
            Reply::Error(status, headers, body) => {
                let mut h = http::HeaderMap::new();
                for (k, v) in headers {
                    h.insert(k, v.parse().unwrap());
                }
                let c = limits::classify_http(
                    status,
                    &h,
                    body.as_bytes(),
                    &core.routing.reset_context(&t.provider),
                );
                Attempt::Failed {
                    classified: c,
                    status: Some(status),
                    body: Some(Bytes::from_static(body.as_bytes())),
                }
            }
            Reply::Stream(events, broken) => {
                let mut items: Vec<Result<Bytes, String>> = events
                    .into_iter()
                    .map(|e| Ok(Bytes::from(format!("data: {e}\n\n"))))
                    .collect();
                if let Some(why) = broken {
                    items.push(Err(why.to_string()));
                }
                let mut reader = SseReader::new(
                    Box::pin(futures_util::stream::iter(items)),
                    Duration::from_secs(5),
                );
                // As the real attempt does: hold events up to the first content.
                let mut codec = crate::providers::kinds::of(Wire::OpenAi).decoder();
                let mut prelude = Vec::new();
                let reader_ready = async {
                    loop {
                        let ev = reader.next_event().await.unwrap().unwrap();
                        let decoded = codec.decode(ev.data.as_ref().unwrap(), true).unwrap();
                        let content = decoded.content;
                        prelude.push(Held {
                            raw: ev.raw,
                            decoded,
                        });
                        if content {
                            break;
                        }
                    }
                };
                futures_util::FutureExt::now_or_never(reader_ready).expect("scripted stream");
                Attempt::Served(Answer::Stream {
                    source: stream::Source::Sse { reader, codec },
                    prelude,
                })
            }
        };
        std::future::ready(attempt)
    }
}

struct World {
    core: Arc<Core>,
    clock: Arc<ManualClock>,
    _dir: std::path::PathBuf,
}

/// A real core over `providers` (openai-compatible, never contacted) with a manual clock.
async fn world(name: &str, providers: serde_json::Value) -> World {
    let dir = std::env::temp_dir().join(format!(
        "baton-router-{name}-{}-{}",
        std::process::id(),
        NOW
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config: crate::config::ConfigFile =
        serde_json::from_value(json!({ "providers": providers })).unwrap();
    let clock = Arc::new(ManualClock::new(NOW));
    let (core, _) = crate::gateway::open(StartOptions {
        config,
        data_dir: dir.clone(),
        clock: Some(clock.clone()),
    })
    .await
    .unwrap();
    World {
        core,
        clock,
        _dir: dir,
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

fn provider(id: &str, keys: &[&str]) -> serde_json::Value {
    json!({"id": id, "kind": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1",
        "models": ["m"], "keys": keys.iter().map(|k| json!({"env": k})).collect::<Vec<_>>()})
}

fn inbound(stream: bool) -> Inbound {
    let mut body = Map::new();
    body.insert("model".into(), json!("auto"));
    body.insert("stream".into(), json!(stream));
    body.insert(
        "messages".into(),
        json!([{"role": "user", "content": "hi"}]),
    );
    let canonical = crate::canonical::openai::request_from_openai(&body).unwrap();
    Inbound {
        needs: canonical.needs(),
        canonical,
        openai: body.into(),
        original: None,
        verbatim: Default::default(),
        continues: None,
        expect: Default::default(),
        trace: None,
        capture: None,
        client: None,
        anthropic_beta: None,
        deadline_ms: None,
        conversation: None,
        follows: false,
    }
}

/// Sends one request through the real loop with `script` as the upstream.
async fn send(
    w: &World,
    script: Script,
    stream: bool,
) -> (Result<Served, Failure>, Record, Script) {
    let snap = w.core.routing.snapshot.load_full();
    let (targets, selection) = snap.resolve("auto").unwrap();
    let mut rec = Record::new(
        format!("req-{}", w.clock.now_ms()),
        w.clock.now_ms(),
        Arc::new(crate::clients::Client::unlimited("test")),
        "auto".into(),
        stream,
        &w.core.routing,
    );
    let up = (script, w.core.clone());
    let inbound = inbound(stream);
    let result = dispatch_via(
        &up,
        &w.core.routing,
        &snap,
        &inbound,
        targets,
        selection,
        &mut rec,
    )
    .await;
    (result, rec, up.0)
}

/// Sends one streamed request through the loop and relays the committed stream to an OpenAI
/// client; returns the writes the client got, one item per write.
async fn relayed(w: &World, script: Script) -> Vec<Bytes> {
    let (r, rec, _) = send(w, script, true).await;
    let Ok(Served::Stream(Streamed {
        target,
        source,
        prelude,
        slot,
        ..
    })) = r
    else {
        panic!("expected a stream");
    };
    let upstream = stream::Upstream {
        expect: None,
        source,
        prelude,
        client_wants_usage: false,
        prompt_tokens: 3,
    };
    let out: stream::Out = Box::new(crate::canonical::openai::stream::StreamEncoder::new(
        "t", "m", 0, false,
    ));
    let body = stream::body(upstream, slot, target, rec, None, out);
    futures_util::StreamExt::collect::<Vec<_>>(body)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

fn classes(rec: &Record) -> Vec<String> {
    rec.attempts().iter().map(|a| a.class.to_string()).collect()
}

fn served_by(r: &Result<Served, Failure>) -> String {
    match r {
        Ok(
            Served::Complete(Completed { target, .. }) | Served::Stream(Streamed { target, .. }),
        ) => target.label(),
        Err(f) => panic!("not served: {f:?}"),
    }
}

const RATE_BODY: &str = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;

#[tokio::test]
async fn a_rate_limited_key_moves_to_the_next_key_and_cools_for_what_the_provider_said() {
    std::env::set_var("ROUTER_T1_K1", "sk-one");
    std::env::set_var("ROUTER_T1_K2", "sk-two");
    let w = world(
        "keys",
        json!([provider("p", &["ROUTER_T1_K1", "ROUTER_T1_K2"])]),
    )
    .await;
    let script = Script::default()
        .on(
            "p/m#env:ROUTER_T1_K1",
            vec![Reply::Error(
                429,
                vec![("retry-after", "30".into())],
                RATE_BODY,
            )],
        )
        .on("p/m#env:ROUTER_T1_K2", vec![Reply::Ok, Reply::Ok]);
    let mut events = w.core.routing.events.subscribe();
    let (r, rec, script) = send(&w, script, false).await;
    assert_eq!(served_by(&r), "p/m");
    assert_eq!(classes(&rec), ["rate", "ok"]);
    assert_eq!(
        script.calls(),
        ["p/m#env:ROUTER_T1_K1", "p/m#env:ROUTER_T1_K2"]
    );
    assert_eq!(rec.attempts()[0].reset_at_ms, Some(NOW + 30_000));
    assert_eq!(rec.served_key(), Some("env:ROUTER_T1_K2"));
    // Another key of the same provider is not a failover: no event says so.
    while let Ok(ev) = events.try_recv() {
        assert!(
            !matches!(ev, crate::events::Event::Failover { .. }),
            "{ev:?}"
        );
    }
    drop(r);

    // The next request goes straight to the second key while the first cools…
    let (r, rec, script) = send(&w, script, false).await;
    assert_eq!(served_by(&r), "p/m");
    assert_eq!(script.calls().len(), 3, "{:?}", script.calls());
    assert_eq!(rec.served_key(), Some("env:ROUTER_T1_K2"));
    drop(r);
    // …and the first is back once the stated 30 s have passed.
    w.clock.advance(30_001);
    let script = script
        .on("p/m#env:ROUTER_T1_K1", vec![Reply::Ok])
        .on("p/m#env:ROUTER_T1_K2", vec![Reply::Ok]);
    let (r, _, script) = send(&w, script, false).await;
    drop(r);
    assert!(
        script.calls()[3..]
            .iter()
            .any(|c| c == "p/m#env:ROUTER_T1_K1"),
        "{:?}",
        script.calls()
    );
}

#[tokio::test]
async fn when_everything_is_rate_limited_the_client_learns_the_soonest_reset() {
    let w = world("soonest", json!([provider("a", &[]), provider("b", &[])])).await;
    let script = Script::default()
        .on(
            "a/m",
            vec![Reply::Error(
                429,
                vec![("retry-after", "120".into())],
                RATE_BODY,
            )],
        )
        .on(
            "b/m",
            vec![Reply::Error(
                429,
                vec![("retry-after", "45".into())],
                RATE_BODY,
            )],
        );
    let mut events = w.core.routing.events.subscribe();
    let (r, rec, script) = send(&w, script, false).await;
    match r {
        Err(Failure::Exhausted { retry_at_ms, .. }) => {
            assert_eq!(retry_at_ms, Some(NOW + 45_000))
        }
        other => panic!("expected exhausted, got {:?}", other.err()),
    }
    assert_eq!(classes(&rec), ["rate", "rate"]);
    // One failover was announced: a to b, with a's reset.
    let mut failovers = Vec::new();
    while let Ok(ev) = events.try_recv() {
        if let crate::events::Event::Failover {
            from,
            to,
            reset_at_ms,
            ..
        } = ev
        {
            failovers.push((from, to, reset_at_ms));
        }
    }
    assert_eq!(
        failovers,
        [("a/m".to_string(), "b/m".to_string(), Some(NOW + 120_000))]
    );

    // Asked again while both cool: no upstream is called, and the answer is the same reset.
    w.clock.advance(10_000);
    let (r, rec, script) = send(&w, script, false).await;
    match r {
        Err(Failure::Exhausted { retry_at_ms, .. }) => {
            assert_eq!(retry_at_ms, Some(NOW + 45_000))
        }
        other => panic!("expected exhausted, got {:?}", other.err()),
    }
    assert_eq!(classes(&rec), ["skipped", "skipped"]);
    assert_eq!(script.calls().len(), 2);
}

#[tokio::test]
async fn transient_failures_open_the_breaker_and_traffic_goes_elsewhere_without_asking() {
    let w = world(
        "breaker",
        json!([provider("flaky", &[]), provider("steady", &[])]),
    )
    .await;
    let err = r#"{"error":{"message":"upstream connect error","type":"server_error"}}"#;
    let mut script = Script::default();
    for _ in 0..3 {
        // A lone 500 is retried once on the spot, then the loop moves on.
        script = script
            .on("flaky/m", vec![Reply::Error(502, vec![], err)])
            .on("steady/m", vec![Reply::Ok]);
    }
    for _ in 0..3 {
        let (r, _, s) = send(&w, script, false).await;
        assert_eq!(served_by(&r), "steady/m");
        script = s;
    }
    let before = script.calls().len();
    // Three transient failures in a row (the default): the breaker is open.
    let (r, rec, script) = send(&w, script.on("steady/m", vec![Reply::Ok]), false).await;
    assert_eq!(served_by(&r), "steady/m");
    assert_eq!(classes(&rec), ["skipped", "ok"]);
    // Out for the breaker's first open period (30 s by default), the last failure as the reason.
    assert_eq!(rec.attempts()[0].reset_at_ms, Some(NOW + 30_000));
    assert!(
        rec.attempts()[0]
            .reason
            .as_deref()
            .unwrap()
            .contains("HTTP 502"),
        "{:?}",
        rec.attempts()[0]
    );
    assert_eq!(script.calls()[before..], ["steady/m"]);
}

#[tokio::test]
async fn a_stream_that_breaks_after_content_ends_with_an_explicit_error() {
    let w = world("break", json!([provider("p", &[])])).await;
    let script = Script::default().on(
        "p/m",
        vec![Reply::Stream(
            vec![
                r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}"#,
                r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
            ],
            Some("connection reset by peer"),
        )],
    );
    let chunks = relayed(&w, script).await;
    let text = String::from_utf8(chunks.concat()).unwrap();
    assert!(
        text.contains("\"content\":\"Hel\"") && text.contains("\"content\":\"lo\""),
        "{text}"
    );
    let last = text.trim_end().rsplit("\n\n").next().unwrap();
    let v: serde_json::Value = serde_json::from_str(last.strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(v["error"]["code"], "stream_interrupted", "{text}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("connection reset by peer"),
        "{v}"
    );
    assert!(
        !text.contains("[DONE]"),
        "a broken stream must not look finished: {text}"
    );
    // The break counts against the provider's breaker: with it, two more transient failures
    // open the breaker (three in a row, the default).
    let p = w.core.routing.snapshot.load().providers[0].clone();
    let breaker = p.runtime.breakers.get(p.breaker_scope("m"));
    let cfg = Default::default();
    assert!(breaker.failure(w.clock.now_ms(), &cfg).is_none());
    assert!(breaker.failure(w.clock.now_ms(), &cfg).is_some());
}

#[tokio::test]
async fn events_that_arrived_together_leave_in_one_write() {
    let w = world("burst", json!([provider("p", &[])])).await;
    let script = Script::default().on(
        "p/m",
        vec![Reply::Stream(
            vec![
                r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"a"},"finish_reason":null}]}"#,
                r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":null}]}"#,
                r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"c"},"finish_reason":null}]}"#,
                r#"{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
                "[DONE]",
            ],
            None,
        )],
    );
    let writes = relayed(&w, script).await;
    // The held-back first content, then everything else at once.
    assert_eq!(writes.len(), 2, "{writes:?}");
    let rest = String::from_utf8(writes[1].to_vec()).unwrap();
    assert!(
        rest.contains("\"content\":\"b\"")
            && rest.contains("\"content\":\"c\"")
            && rest.ends_with("data: [DONE]\n\n"),
        "{rest}"
    );
}
