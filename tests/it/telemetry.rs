//! OpenTelemetry traces (`telemetry`): a collector on loopback decodes the OTLP/HTTP protobuf
//! Baton exports with the project's own definitions (`opentelemetry-proto`) and checks the
//! spans of a request that failed over, the GenAI attributes, the client's `traceparent`
//! continued and each attempt's passed upstream, sampling, and that nothing secret is in them.

use std::sync::{Arc, Mutex};

use crate::common::*;
use axum::body::Bytes;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use prost::Message;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// An OTLP/HTTP collector: every export decoded, its raw bytes kept.
#[derive(Clone, Default)]
pub struct Collector {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
    raw: Arc<Mutex<Vec<u8>>>,
    headers: Arc<Mutex<Vec<http::HeaderMap>>>,
    pub url: String,
}

impl Collector {
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut c = Collector {
            url: format!("http://{}/v1/traces", listener.local_addr().unwrap()),
            ..Collector::default()
        };
        let me = c.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |headers: http::HeaderMap, body: Bytes| {
                let me = me.clone();
                async move {
                    // OTLP/HTTP protobuf, as the specification has it.
                    assert_eq!(headers["content-type"], "application/x-protobuf");
                    let req = ExportTraceServiceRequest::decode(body.as_ref())
                        .expect("an OTLP ExportTraceServiceRequest");
                    me.raw.lock().unwrap().extend_from_slice(&body);
                    me.headers.lock().unwrap().push(headers);
                    for rs in req.resource_spans {
                        let service = rs
                            .resource
                            .iter()
                            .flat_map(|r| &r.attributes)
                            .find(|a| a.key == "service.name")
                            .map(|a| text(a.value.as_ref().and_then(|v| v.value.as_ref())))
                            .unwrap_or_default();
                        for ss in rs.scope_spans {
                            for s in ss.spans {
                                me.spans.lock().unwrap().push((service.clone(), s));
                            }
                        }
                    }
                    (
                        http::StatusCode::OK,
                        [("content-type", "application/x-protobuf")],
                        "",
                    )
                }
            }),
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        c.url = c.url.clone();
        c
    }

    pub fn spans(&self) -> Vec<Span> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .map(|(_, s)| s.clone())
            .collect()
    }

    pub fn services(&self) -> Vec<String> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }

    pub fn raw(&self) -> Vec<u8> {
        self.raw.lock().unwrap().clone()
    }

    pub fn headers(&self) -> Vec<http::HeaderMap> {
        self.headers.lock().unwrap().clone()
    }

    /// Waits until `n` spans arrived (the batch processor sends every 2 s).
    pub async fn wait_for(&self, n: usize) -> Vec<Span> {
        let me = self.clone();
        assert!(
            eventually(15, || me.spans.lock().unwrap().len() >= n).await,
            "{} spans arrived, {n} expected",
            self.spans().len()
        );
        self.spans()
    }
}

fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(Any::ArrayValue(a)) => a
            .values
            .iter()
            .map(|v| text(v.value.as_ref()))
            .collect::<Vec<_>>()
            .join(","),
        _ => String::new(),
    }
}

/// A span's attribute as text ("" when absent).
pub fn attr(s: &Span, key: &str) -> String {
    s.attributes
        .iter()
        .find(|a| a.key == key)
        .map(|a| text(a.value.as_ref().and_then(|v| v.value.as_ref())))
        .unwrap_or_default()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";

fn traced(collector: &Collector, extra: Value) -> Value {
    let mut t = json!({"enabled": true, "endpoint": collector.url, "serviceName": "baton-test"});
    if let (Some(t), Some(e)) = (t.as_object_mut(), extra.as_object()) {
        t.extend(e.clone());
    }
    t
}

#[tokio::test]
async fn a_failed_over_stream_is_one_trace_with_a_span_per_attempt() {
    let collector = Collector::start().await;
    let (first, second) = (
        FakeUpstream::start("first").await,
        FakeUpstream::start("second").await,
    );
    first.always(Behavior::Status {
        status: 429,
        body: json!({"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}),
        headers: vec![("retry-after".into(), "30".into())],
    });
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("first", &first.base_url(), 1),
                             provider("second", &second.base_url(), 2)],
               "telemetry": traced(&collector, json!({}))}),
    )
    .await;
    let r = baton
        .post(chat_body("auto", "hello there", true))
        .header("traceparent", format!("00-{TRACE}-{CALLER}-01"))
        .header("tracestate", "caller=1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        stream_text(&sse_data(&r.text().await.unwrap())),
        "second: hello there"
    );

    let spans = collector.wait_for(3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    assert!(
        spans.iter().all(|s| hex(&s.trace_id) == TRACE),
        "one trace, the caller's"
    );
    assert!(collector.services().iter().all(|s| s == "baton-test"));
    let server: Vec<&Span> = spans
        .iter()
        .filter(|s| s.kind == SpanKind::Server as i32)
        .collect();
    assert_eq!(server.len(), 1);
    let req = server[0];
    assert_eq!(
        hex(&req.parent_span_id),
        CALLER,
        "the caller's span is the parent"
    );
    assert_eq!(req.trace_state, "caller=1");
    assert_eq!(attr(req, "gen_ai.operation.name"), "chat");
    assert_eq!(attr(req, "gen_ai.request.model"), "auto");
    assert_eq!(attr(req, "gen_ai.response.model"), "second-model");
    assert_eq!(attr(req, "gen_ai.provider.name"), "openai");
    assert_eq!(attr(req, "gen_ai.response.finish_reasons"), "stop");
    assert!(
        attr(req, "gen_ai.usage.input_tokens")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(
        attr(req, "gen_ai.usage.output_tokens")
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert_eq!(attr(req, "baton.attempts"), "2");
    assert_eq!(attr(req, "http.response.status_code"), "200");
    // No content unless asked for.
    assert_eq!(attr(req, "gen_ai.input.messages"), "");

    let mut attempts: Vec<&Span> = spans
        .iter()
        .filter(|s| s.kind == SpanKind::Client as i32)
        .collect();
    attempts.sort_by_key(|s| s.start_time_unix_nano);
    assert_eq!(attempts.len(), 2);
    for a in &attempts {
        assert_eq!(
            a.parent_span_id, req.span_id,
            "an attempt is the request's child"
        );
        assert!(a.start_time_unix_nano >= req.start_time_unix_nano);
        assert!(a.end_time_unix_nano <= req.end_time_unix_nano);
    }
    let (failed, served) = (attempts[0], attempts[1]);
    assert_eq!(attr(failed, "baton.provider"), "first");
    assert_eq!(attr(failed, "error.type"), "rate");
    assert_eq!(attr(failed, "http.response.status_code"), "429");
    assert_eq!(failed.status.as_ref().unwrap().code, 2, "an error status");
    assert_eq!(attr(served, "baton.provider"), "second");
    assert_eq!(attr(served, "error.type"), "");
    assert_eq!(attr(served, "gen_ai.response.model"), "second-model");
    assert_eq!(served.name, "chat second-model");

    // Each upstream was called as the child of its attempt's span.
    let sent = |f: &FakeUpstream| {
        f.received()
            .last()
            .unwrap()
            .headers
            .get("traceparent")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        sent(&first),
        format!("00-{TRACE}-{}-01", hex(&failed.span_id))
    );
    assert_eq!(
        sent(&second),
        format!("00-{TRACE}-{}-01", hex(&served.span_id))
    );
    assert_eq!(
        second.received().last().unwrap().headers["tracestate"],
        "caller=1"
    );
    baton.stop().await;
}

#[tokio::test]
async fn off_relays_the_callers_context_and_sampling_keeps_the_callers_decision() {
    let fake = FakeUpstream::start("one").await;
    let dir = tempfile::tempdir().unwrap();
    // Off (the default): nothing exported, the caller's context passed on as it came.
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("one", &fake.base_url(), 1)]}),
    )
    .await;
    let tp = format!("00-{TRACE}-{CALLER}-01");
    let r = baton
        .post(chat_body("auto", "hi", false))
        .header("traceparent", &tp)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        fake.received().last().unwrap().headers["traceparent"],
        tp.as_str()
    );
    let r = baton
        .post(chat_body("auto", "hi", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(fake
        .received()
        .last()
        .unwrap()
        .headers
        .get("traceparent")
        .is_none());
    baton.stop().await;

    // On with no share sampled: only a caller that sampled its trace is traced.
    let collector = Collector::start().await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("one", &fake.base_url(), 1)],
               "telemetry": traced(&collector, json!({"sampleRate": 0.0}))}),
    )
    .await;
    for (flags, n) in [("00", 0), ("01", 2)] {
        let r = baton
            .post(chat_body("auto", "hi", false))
            .header("traceparent", format!("00-{TRACE}-{CALLER}-{flags}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        if n == 0 {
            // Not sampled: the caller's context goes on untouched.
            assert_eq!(
                fake.received().last().unwrap().headers["traceparent"],
                format!("00-{TRACE}-{CALLER}-00").as_str()
            );
        }
    }
    let r = baton
        .post(chat_body("auto", "hi", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spans = collector.wait_for(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(
        collector.spans().len(),
        2,
        "only the sampled caller's request: {spans:#?}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn spans_carry_no_secret_and_content_only_when_asked() {
    let collector = Collector::start().await;
    let fake = FakeUpstream::start("echo").await;
    let key = "sk-proj-SPANSECRET0123456789abcdefghij";
    // The upstream echoes the key it was sent in its error: escaped, and in a bearer token.
    fake.script([Behavior::Status {
        status: 400,
        body: json!({"error": {"message": format!("bad key Bearer {key} ({})", key.replace('S', "\\u0053"))}}),
        headers: vec![],
    }]);
    let dir = tempfile::tempdir().unwrap();
    let header_key = "collector-token-0123456789";
    std::env::set_var("BATON_TEST_OTLP_TOKEN", header_key);
    let p = keyed("echo", &fake, 1, &[("BATON_TEST_SPAN_KEY", key)]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [p],
               "telemetry": traced(&collector, json!({"captureContent": true,
                   "headers": {"x-collector-token": "BATON_TEST_OTLP_TOKEN"}}))}),
    )
    .await;
    let r = baton
        .post(chat_body("auto", "first question", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = baton
        .post(chat_body("auto", "second question", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let spans = collector.wait_for(4).await;
    let raw = String::from_utf8_lossy(&collector.raw()).into_owned();
    for part in [&key[8..20], &key[20..], header_key] {
        assert!(!raw.contains(part), "{part} reached the collector");
    }
    assert!(
        collector
            .headers()
            .iter()
            .all(|h| h["x-collector-token"] == header_key),
        "the header is sent to the collector"
    );
    let served = spans
        .iter()
        .find(|s| {
            s.kind == SpanKind::Server as i32 && attr(s, "http.response.status_code") == "200"
        })
        .unwrap();
    assert!(attr(served, "gen_ai.input.messages").contains("second question"));
    assert_eq!(
        attr(served, "gen_ai.output.messages"),
        "echo: second question"
    );
    let failed = spans
        .iter()
        .find(|s| {
            s.kind == SpanKind::Server as i32 && attr(s, "http.response.status_code") == "400"
        })
        .unwrap();
    assert_eq!(attr(failed, "error.type"), "request");
    baton.stop().await;
}

#[tokio::test]
async fn settings_turn_tracing_on_keep_the_header_value_secret_and_say_what_is_wrong() {
    use reqwest::Method;
    let collector = Collector::start().await;
    let fake = FakeUpstream::start("one").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("one", &fake.base_url(), 1)]}),
    )
    .await;
    let admin = Admin(&baton);
    let (s, v) = admin.send(Method::GET, "/admin/telemetry", None).await;
    assert_eq!(s, 200);
    assert_eq!(v["enabled"], false);
    assert_eq!(v["exporting"], false);
    for (body, param, words) in [
        (
            json!({"enabled": true, "sampleRate": 2}),
            "sampleRate",
            "between 0 and 1",
        ),
        (
            json!({"enabled": true, "endpoint": "ftp://x"}),
            "endpoint",
            "http",
        ),
        (
            json!({"enabled": true, "endpoint": "http://collector.example:4318",
                "headers": [{"name": "x-token", "value": "abcdefghijkl"}]}),
            "endpoint",
            "https",
        ),
        (
            json!({"enabled": true, "headers": [{"name": "x-token"}]}),
            "headers",
            "needs a value",
        ),
        (
            json!({"enabled": true, "headers": [{"name": "bad name", "env": "X"}]}),
            "headers",
            "header name",
        ),
        (
            json!({"enabled": true, "headers": [{"name": "x-token", "env": "not-a-variable"}]}),
            "headers",
            "not an environment variable name",
        ),
    ] {
        let (s, v) = admin
            .send(Method::PUT, "/admin/telemetry", Some(body.clone()))
            .await;
        assert_eq!(s, 422, "{body} → {v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(words),
            "{v}"
        );
    }
    // A collector that is not there: saved, with a warning.
    let (s, v) = admin
        .send(
            Method::PUT,
            "/admin/telemetry",
            Some(json!({"enabled": true, "endpoint": "http://127.0.0.1:9/v1/traces"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert!(
        v["warning"]
            .as_str()
            .unwrap()
            .contains("did not take a test export"),
        "{v}"
    );
    let token = "collector-secret-value-42";
    let (s, v) = admin
        .send(
            Method::PUT,
            "/admin/telemetry",
            Some(json!({"enabled": true, "endpoint": collector.url,
                          "headers": [{"name": "X-Token", "value": token}]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["warning"], Value::Null, "{v}");
    assert_eq!(v["exporting"], true);
    assert_eq!(v["headers"][0]["name"], "x-token");
    assert_eq!(v["headers"][0]["stored"], true);
    assert!(!v.to_string().contains(token));
    let r = baton
        .post(chat_body("auto", "hi", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    collector.wait_for(2).await;
    assert!(collector
        .headers()
        .iter()
        .any(|h| h.get("x-token").is_some_and(|v| v == token)));
    // The export (config download) never carries the value.
    let (_, export) = admin.send(Method::GET, "/admin/export", None).await;
    assert!(!export.to_string().contains(token));
    // Off again: nothing more is sent.
    let (s, v) = admin
        .send(
            Method::PUT,
            "/admin/telemetry",
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["exporting"], false);
    baton.stop().await;
}
