//! An upstream that echoes the credential it received (as some proxies and misconfigured servers
//! do) never makes Baton the leak: on every status, through both inbound APIs, streamed or not,
//! the secret is masked in what the client gets, in Baton's logs, in `/admin/state` and
//! `/admin/log`, and in the database files. Credential shapes Baton does not know (another
//! service's key, a bearer token, a JWT) are masked the same way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

/// Not shaped like any known credential: only the exact-value match can catch it.
const SECRET: &str = "corp-proxy-credential-7f3a9c2e5b1d";
const FOREIGN: [&str; 3] = [
    "sk-ant-api03-ZXhhbXBsZS1rZXktZm9yLXRlc3Rz",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEyMyJ9.c2lnbmF0dXJlLWJ5dGVz",
    "AIzaSyD-exampleExampleExample0123456",
];

fn leaks(haystack: &[u8]) -> Vec<&'static str> {
    let mut found = Vec::new();
    for s in std::iter::once(SECRET).chain(FOREIGN) {
        if memchr::memmem::find(haystack, s.as_bytes()).is_some() {
            found.push(s);
        }
    }
    found
}

fn echoing(status: u16) -> Behavior {
    Behavior::Status {
        status,
        body: json!({"error": {
            "message": format!("invalid upstream credential Bearer {SECRET}; also tried {} {} {}",
                FOREIGN[0], FOREIGN[1], FOREIGN[2]),
            "type": "invalid_request_error",
            "code": format!("echo {SECRET}"),
        }}),
        headers: vec![("retry-after".into(), "30".into())],
    }
}

/// Clears the provider's cooldown and breaker so the next request reaches the upstream again.
async fn clear(b: &Baton) {
    let (st, v) = Admin(b)
        .send(Method::DELETE, "/admin/cooldowns?provider=echo", None)
        .await;
    assert_eq!(st, 200, "{v}");
}

#[tokio::test]
async fn an_upstream_that_echoes_its_credential_never_leaks_it() {
    let logs = Captured::install();
    std::env::set_var("BATON_TEST_ECHO_KEY", SECRET);
    let up = FakeUpstream::start("echo").await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = provider("echo", &up.base_url(), 1);
    p["keys"] = json!([{"env": "BATON_TEST_ECHO_KEY"}]);
    let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;

    let mut answers: Vec<u8> = Vec::new();
    for status in [400, 401, 403, 404, 413, 422, 429, 500, 503] {
        for stream in [false, true] {
            // OpenAI Chat Completions.
            up.always(echoing(status));
            let r = baton
                .post(chat_body("echo-model", "hi", stream))
                .send()
                .await
                .unwrap();
            let st = r.status().as_u16();
            let body = r.bytes().await.unwrap();
            assert!(st >= 400, "status {status} stream {stream}: {st}");
            assert!(
                leaks(&body).is_empty(),
                "OpenAI answer to {status} (stream {stream}): {}",
                String::from_utf8_lossy(&body)
            );
            answers.extend_from_slice(&body);
            clear(&baton).await;
            // Anthropic Messages.
            up.always(echoing(status));
            let r = baton
                .messages(
                    json!({"model": "echo-model", "max_tokens": 16, "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}]}),
                )
                .send()
                .await
                .unwrap();
            let body = r.bytes().await.unwrap();
            assert!(
                leaks(&body).is_empty(),
                "Anthropic answer to {status} (stream {stream}): {}",
                String::from_utf8_lossy(&body)
            );
            answers.extend_from_slice(&body);
            clear(&baton).await;
        }
    }
    // The masked form says what was there without the value.
    let text = String::from_utf8_lossy(&answers);
    assert!(text.contains("[redacted]"), "{text}");
    assert!(text.contains("sk-ant-[redacted]"), "{text}");

    // A cooldown learned from an echoing 429 stays in force with its reason masked.
    up.always(echoing(429));
    let _ = baton
        .post(chat_body("echo-model", "hi", false))
        .send()
        .await
        .unwrap();
    let state = baton.admin_state().await.to_string();
    assert!(leaks(state.as_bytes()).is_empty(), "/admin/state: {state}");
    assert!(
        state.contains("[redacted]"),
        "the reason is kept, masked: {state}"
    );
    let (st, log) = Admin(&baton)
        .send(Method::GET, "/admin/log?limit=200", None)
        .await;
    assert_eq!(st, 200);
    let log = log.to_string();
    assert!(leaks(log.as_bytes()).is_empty(), "/admin/log: {log}");
    assert!(log.contains("[redacted]"), "{log}");

    baton.stop().await;
    let mut db = Vec::new();
    for f in ["baton.db", "baton.db-wal"] {
        if let Ok(b) = std::fs::read(dir.path().join(f)) {
            db.extend(b);
        }
    }
    assert!(!db.is_empty());
    assert!(
        leaks(&db).is_empty(),
        "the database files hold {:?}",
        leaks(&db)
    );
    let logged = logs.bytes();
    assert!(!logged.is_empty(), "logs were captured");
    assert!(leaks(&logged).is_empty(), "logs hold {:?}", leaks(&logged));
    assert!(up.hits() >= 36);
}
