//! Editing the live configuration through the admin API: validation that names the field,
//! changes applied to routing on the next request, secrets never echoed, the whole-order
//! reorder, the Test button, the log and the event stream (export and import:
//! `admin_transfer.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn providers_are_added_validated_toggled_reordered_and_deleted_live() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10)]}),
    )
    .await;
    let admin = Admin(&baton);

    // Validation names the field.
    let (st, v) = admin
        .send(Method::POST, "/admin/providers", Some(json!({"id": "b", "kind": "openai-compatible", "baseUrl": "ftp://nope", "models": ["b-model"]})))
        .await;
    assert_eq!(st, 422);
    assert_eq!(v["error"]["param"], "baseUrl");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("https://"),
        "{v}"
    );
    let (st, v) = admin
        .send(Method::POST, "/admin/providers", Some(json!({"id": "b", "kind": "openai-compatible", "baseUrl": b.base_url(), "models": ["b-model"], "priority": "high"})))
        .await;
    assert_eq!((st, v["error"]["param"].as_str()), (422, Some("priority")));
    let (st, v) = admin
        .send(Method::POST, "/admin/providers", Some(json!({"id": "a", "kind": "openai-compatible", "baseUrl": b.base_url(), "models": ["m"]})))
        .await;
    assert_eq!((st, v["error"]["param"].as_str()), (422, Some("id")), "{v}");

    // A typed key is stored, used, and never shown.
    let (st, v) = admin
        .send(Method::POST, "/admin/providers", Some(json!({"id": "b", "kind": "openai-compatible", "baseUrl": b.base_url(), "models": ["b-model"], "priority": 5, "newKeys": ["sk-typed-secret-1234"]})))
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["owner"], "ui");
    assert_eq!(v["keys"][0]["masked"], "sk-…1234");
    let text = v.to_string();
    assert!(
        !text.contains("sk-typed-secret-1234"),
        "secret echoed: {text}"
    );
    assert_eq!(
        served_by(&baton).await,
        "b",
        "priority 5 goes first, at once"
    );
    assert_eq!(
        b.received()[0]
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer sk-typed-secret-1234")
    );
    let secrets = std::fs::read_to_string(dir.path().join("secrets.json")).unwrap();
    assert!(secrets.contains("sk-typed-secret-1234"));
    let (_, state) = admin.send(Method::GET, "/admin/providers", None).await;
    assert!(!state.to_string().contains("sk-typed-secret-1234"));

    // Toggle off: `auto` skips it on the very next request.
    let (st, v) = admin
        .send(
            Method::PATCH,
            "/admin/providers/b",
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!((st, v["enabled"].as_bool()), (200, Some(false)));
    assert_eq!(served_by(&baton).await, "a");
    let (st, _) = admin
        .send(
            Method::PATCH,
            "/admin/providers/b",
            Some(json!({"priority": 1})),
        )
        .await;
    assert_eq!(st, 422);
    admin
        .send(
            Method::PATCH,
            "/admin/providers/b",
            Some(json!({"enabled": true})),
        )
        .await;

    // Reorder: one call with the whole order.
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/order",
            Some(json!({"order": ["a", "b"]})),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(served_by(&baton).await, "a");
    let (st, v) = admin
        .send(Method::PUT, "/admin/order", Some(json!({"order": ["b"]})))
        .await;
    assert_eq!(st, 409);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("leaves out a"),
        "{v}"
    );
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/order",
            Some(json!({"order": ["b", "a", "ghost"]})),
        )
        .await;
    assert_eq!(st, 409);

    // Update keeps the stored key when the body lists it, and cannot rename.
    let (_, state) = admin.send(Method::GET, "/admin/providers", None).await;
    let def = state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "b")
        .unwrap()["config"]
        .clone();
    assert!(def["keys"][0]["stored"].is_string(), "{def}");
    let mut changed = def.clone();
    changed["models"] = json!(["b-model", "b-large"]);
    let (st, v) = admin
        .send(Method::PUT, "/admin/providers/b", Some(changed.clone()))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    changed["id"] = json!("c");
    let (st, _) = admin
        .send(Method::PUT, "/admin/providers/b", Some(changed))
        .await;
    assert_eq!(st, 409);

    // The file's provider: toggles yes, edits and deletes no.
    let (st, v) = admin.send(Method::DELETE, "/admin/providers/a", None).await;
    assert_eq!(st, 409);
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("config file"));
    let (st, _) = admin
        .send(Method::PUT, "/admin/providers/a", Some(json!({"id": "a", "kind": "openai-compatible", "baseUrl": a.base_url(), "models": ["x"]})))
        .await;
    assert_eq!(st, 409);

    // Delete: gone from routing, its secret removed; a stale update gets 404.
    let (st, v) = admin.send(Method::DELETE, "/admin/providers/b", None).await;
    assert_eq!(st, 204, "{v}");
    assert!(!std::fs::read_to_string(dir.path().join("secrets.json"))
        .unwrap()
        .contains("sk-typed"));
    let (st, _) = admin
        .send(Method::PUT, "/admin/providers/b", Some(def))
        .await;
    assert_eq!(st, 404);
    let (st, _) = admin
        .send(
            Method::PATCH,
            "/admin/providers/b",
            Some(json!({"enabled": true})),
        )
        .await;
    assert_eq!(st, 404);
    assert_eq!(served_by(&baton).await, "a");
    baton.stop().await;

    // Everything persisted: the same data directory starts with the UI's changes.
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10)]}),
    )
    .await;
    let st = baton.admin_state().await;
    let ids: Vec<&str> = st["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a"]);
    baton.stop().await;
}

#[tokio::test]
async fn concurrent_reorders_leave_one_whole_order() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let ids = ["p1", "p2", "p3", "p4"];
    let providers: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| provider(id, &up.base_url(), i as i64))
        .collect();
    let baton = Baton::start(dir.path(), json!({"providers": providers})).await;
    let admin = Admin(&baton);
    let orders = [
        ["p4", "p3", "p2", "p1"],
        ["p2", "p1", "p4", "p3"],
        ["p3", "p4", "p1", "p2"],
    ];
    let mut jobs = Vec::new();
    for round in 0..5 {
        for o in orders {
            let r = admin
                .req(Method::PUT, "/admin/order")
                .json(&json!({"order": o}));
            jobs.push(tokio::spawn(async move {
                (round, r.send().await.unwrap().status().as_u16())
            }));
        }
    }
    for j in jobs {
        assert_eq!(j.await.unwrap().1, 200);
    }
    let st = baton.admin_state().await;
    let now: Vec<String> = st["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    let prios: Vec<i64> = st["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["priority"].as_i64().unwrap())
        .collect();
    assert!(
        orders
            .iter()
            .any(|o| o.iter().map(|s| s.to_string()).collect::<Vec<_>>() == now),
        "a mix of orders: {now:?}"
    );
    assert_eq!(prios, [10, 20, 30, 40]);
    baton.stop().await;
}

#[tokio::test]
async fn test_button_tries_saved_and_unsaved_providers() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)]}),
    )
    .await;
    let admin = Admin(&baton);
    let (st, v) = admin
        .send(Method::POST, "/admin/providers/a/test", None)
        .await;
    assert_eq!((st, v["ok"].as_bool()), (200, Some(true)), "{v}");
    assert!(v["latencyMs"].is_u64());
    up.script([Behavior::status(401)]);
    let (_, v) = admin
        .send(Method::POST, "/admin/providers/a/test", None)
        .await;
    assert_eq!(
        (v["ok"].as_bool(), v["class"].as_str()),
        (Some(false), Some("auth")),
        "{v}"
    );
    // Unsaved: the form's body with a typed key, nothing stored.
    let (st, v) = admin
        .send(Method::POST, "/admin/test", Some(json!({"id": "new", "kind": "openai-compatible", "baseUrl": up.base_url(), "models": ["m"], "newKeys": ["sk-form-key-5555"]})))
        .await;
    assert_eq!((st, v["ok"].as_bool()), (200, Some(true)), "{v}");
    let last = up.received().last().unwrap().clone();
    assert_eq!(
        last.headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer sk-form-key-5555")
    );
    assert!(
        !dir.path().join("secrets.json").exists(),
        "a test stores nothing"
    );
    let (st, v) = admin.send(Method::POST, "/admin/test", Some(json!({"id": "new", "kind": "openai-compatible", "baseUrl": "nope", "models": ["m"]}))).await;
    assert_eq!((st, v["error"]["param"].as_str()), (422, Some("baseUrl")));
    let (st, _) = admin
        .send(Method::POST, "/admin/providers/ghost/test", None)
        .await;
    assert_eq!(st, 404);
    baton.stop().await;
}

#[tokio::test]
async fn log_pages_and_filters_and_events_stream_live() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    let admin = Admin(&baton);
    let mut events = admin
        .req(Method::GET, "/admin/events")
        .send()
        .await
        .unwrap();
    assert_eq!(header(&events, "content-type"), "text/event-stream");
    a.script([Behavior::rate_limited(Some(60))]);
    assert_eq!(served_by(&baton).await, "b");
    for _ in 0..3 {
        served_by(&baton).await;
    }
    // The event stream carried the cooldown and the failover.
    let mut seen = String::new();
    while !(seen.contains("event: cooldown_started") && seen.contains("event: failover")) {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(5), events.chunk())
            .await
            .expect("events arrive")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"provider\":\"a\""), "{seen}");

    let (st, v) = admin.send(Method::GET, "/admin/log?limit=2", None).await;
    assert_eq!(st, 200);
    assert_eq!(v["rows"].as_array().unwrap().len(), 2);
    let (_, v) = admin
        .send(Method::GET, "/admin/log?limit=2&offset=2", None)
        .await;
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let first = &rows[1];
    assert_eq!(
        first["attempts"][0]["class"], "rate",
        "the oldest row has the attempt chain"
    );
    let (_, v) = admin.send(Method::GET, "/admin/log?provider=a", None).await;
    assert_eq!(
        v["rows"].as_array().unwrap().len(),
        4,
        "tried on the way counts (a was skipped or failed)"
    );
    let (_, v) = admin
        .send(Method::GET, "/admin/log?outcome=error", None)
        .await;
    assert!(v["rows"].as_array().unwrap().is_empty());
    let (st, _) = admin.send(Method::GET, "/admin/log?limit=0", None).await;
    assert_eq!(st, 400);
    let (st, _) = admin
        .send(Method::GET, "/admin/log?outcome=maybe", None)
        .await;
    assert_eq!(st, 400);
    baton.stop().await;
}

#[tokio::test]
async fn admin_api_needs_the_admin_key_in_a_header_and_sends_no_cors() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({})).await;
    for (method, path) in [
        (Method::POST, "/admin/providers"),
        (Method::PUT, "/admin/order"),
        (Method::GET, "/admin/export"),
        (Method::GET, "/admin/events"),
    ] {
        let r = baton
            .http
            .request(method.clone(), format!("{}{path}", baton.url))
            .header("origin", "https://evil.example")
            .header("cookie", format!("admin={}", baton.admin_key))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{method} {path}");
        assert!(r.headers().get("access-control-allow-origin").is_none());
    }
    // The gateway key is not the admin key.
    let r = baton
        .http
        .get(format!("{}/admin/export", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Preflight gets no permission either.
    let r = baton
        .http
        .request(Method::OPTIONS, format!("{}/admin/order", baton.url))
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "PUT")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // The UI is served with a strict CSP.
    let r = baton
        .http
        .get(format!("{}/ui/", baton.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(header(&r, "content-security-policy").contains("script-src 'self'"));
    baton.stop().await;
}

/// Edits read, then write. While the log writer commits under load, such a transaction must
/// wait for the write lock, not fail with "database is locked" (a deferred transaction cannot
/// upgrade past another writer's commit, and SQLite's busy timeout does not help there).
#[tokio::test]
async fn edits_succeed_while_the_log_writer_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 1), provider("b", &b.base_url(), 2)]}),
    )
    .await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..4 {
        let (http, url, key, stop) = (
            baton.http.clone(),
            baton.url.clone(),
            baton.key.clone(),
            stop.clone(),
        );
        load.push(tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = http
                    .post(format!("{url}/v1/chat/completions"))
                    .bearer_auth(&key)
                    .json(&chat_body("auto", "hi", false))
                    .send()
                    .await;
            }
        }));
    }
    let admin = Admin(&baton);
    for i in 0..60 {
        let (st, v) = admin
            .send(
                Method::POST,
                "/admin/providers",
                Some(json!({"id": "c", "kind": "openai-compatible", "baseUrl": b.base_url(), "models": ["m"]})),
            )
            .await;
        assert_eq!(st, 201, "create {i}: {v}");
        let (st, v) = admin
            .send(
                Method::PATCH,
                "/admin/providers/c",
                Some(json!({"enabled": false})),
            )
            .await;
        assert_eq!(st, 200, "toggle {i}: {v}");
        let (st, v) = admin.send(Method::DELETE, "/admin/providers/c", None).await;
        assert_eq!(st, 204, "delete {i}: {v}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    assert!(
        a.hits() + b.hits() > 60,
        "the log writer was busy meanwhile"
    );
}

/// An empty provider form: every field with a problem is named at once (a form shows each
/// beside its field), the first as `param`.
#[tokio::test]
async fn every_problem_with_a_provider_is_named_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({})).await;
    let (status, e) = Admin(&baton)
        .send(
            Method::POST,
            "/admin/providers",
            Some(json!({"id": "", "kind": "openai-compatible", "baseUrl": "", "models": []})),
        )
        .await;
    assert_eq!(status, 422, "{e}");
    assert_eq!(e["error"]["param"], "id", "{e}");
    let params: Vec<&str> = e["error"]["details"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["param"].as_str().unwrap())
        .collect();
    assert_eq!(params, ["id", "baseUrl", "models"], "{e}");
    // One problem: no list, just the field.
    let (status, e) = Admin(&baton)
        .send(
            Method::POST,
            "/admin/providers",
            Some(json!({"id": "ok", "kind": "openai-compatible", "baseUrl": "https://x.example/v1", "models": []})),
        )
        .await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (422, Some("models")),
        "{e}"
    );
    assert!(e["error"]["details"].is_null(), "{e}");
    baton.stop().await;
}
