//! The admin state view and clearing cooldowns by hand.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn state_shows_keys_masked_cooldowns_and_health_and_cooldowns_clear_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    std::env::set_var("BT_ADM_K1", "sk-first-secret-aaaa");
    std::env::set_var("BT_ADM_K2", "sk-second-secret-bbbb");
    let mut pa = provider("a", &a.base_url(), 10);
    pa["keys"] = json!([{"env": "BT_ADM_K1"}, {"env": "BT_ADM_K2"}, {"env": "BT_ADM_MISSING"}]);
    let baton = Baton::start(dir.path(), json!({"providers": [pa]})).await;

    let url = format!("{}/admin/state", baton.url);
    assert_eq!(baton.http.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        baton
            .http
            .get(&url)
            .bearer_auth(&baton.key)
            .send()
            .await
            .unwrap()
            .status(),
        401,
        "the gateway key is not the admin key"
    );

    a.script([Behavior::rate_limited(Some(600))]);
    assert_eq!(baton.chat("auto", "x").await.status(), 200);
    let state = baton.admin_state().await;
    let text = state.to_string();
    assert!(
        !text.contains("first-secret") && !text.contains("second-secret"),
        "secrets never in admin answers"
    );
    let p = &state["providers"][0];
    assert_eq!(p["id"], "a");
    let keys = p["keys"].as_array().unwrap();
    assert_eq!(keys[0]["masked"], "sk-…aaaa");
    assert_eq!(keys[0]["cooldown"]["class"], "rate");
    assert!(keys[0]["cooldown"]["remainingMs"].as_i64().unwrap() > 590_000);
    assert_eq!(keys[0]["health"]["failures"]["rate"], 1);
    assert_eq!(keys[1]["health"]["successes"], 1);
    assert_eq!(keys[1]["cooldown"], Value::Null);
    assert_eq!(keys[2]["missing"], true);
    assert_eq!(p["health"]["calls"], 2);
    assert_eq!(p["breaker"]["state"], "closed");
    assert_eq!(p["models"][0]["health"]["outputTokens"], 7);

    // Clear by hand: the key is used again on the next request.
    let r = baton
        .http
        .delete(format!(
            "{}/admin/cooldowns?provider=a&key=env:BT_ADM_K1",
            baton.url
        ))
        .header("x-admin-key", &baton.admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["cleared"], 1);
    let before = a.hits();
    let _ = baton.chat("auto", "x").await;
    let _ = baton.chat("auto", "x").await;
    let used: Vec<String> = a.received()[before..]
        .iter()
        .map(|r| r.headers["authorization"].to_str().unwrap().to_string())
        .collect();
    assert!(
        used.iter().any(|h| h.ends_with("sk-first-secret-aaaa")),
        "cleared key back in rotation: {used:?}"
    );
    let r = baton
        .http
        .delete(format!("{}/admin/cooldowns?provider=nope", baton.url))
        .header("x-admin-key", &baton.admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // Without `provider` every cooldown is cleared, as the README says; a key without its
    // provider and a malformed query are 400s in the API's own error shape.
    a.script([Behavior::rate_limited(Some(600))]);
    let _ = baton.chat("auto", "x").await;
    assert!(baton
        .admin_state()
        .await
        .to_string()
        .contains("\"class\":\"rate\""));
    let clear = |q: &str| {
        baton
            .http
            .delete(format!("{}/admin/cooldowns{q}", baton.url))
            .header("x-admin-key", &baton.admin_key)
            .send()
    };
    let r = clear("").await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["cleared"], 1);
    assert!(!baton
        .admin_state()
        .await
        .to_string()
        .contains("\"class\":\"rate\""));
    let r = clear("?key=env:BT_ADM_K1").await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["param"], "provider", "{e}");
    let r = clear("?provider=a&provider=b").await.unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["param"], "query", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("The query string is not valid"),
        "{e}"
    );
    baton.stop().await;
}

/// A client's own model name that nothing serves: the 404 says how to map it.
#[tokio::test]
async fn an_agents_own_model_name_gets_a_404_that_says_how_to_map_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10)]}),
    )
    .await;
    for (model, words) in [
        (
            "claude-opus-4-8[1m]",
            "\"Map Claude Code's names\" on Baton's Connect screen, or add \"claude-*\"",
        ),
        ("gpt-5.5", "\"Map Codex's names\""),
        ("llama-nonexistent", ""),
    ] {
        let r = baton.chat(model, "hi").await;
        assert_eq!(r.status(), 404, "{model}");
        let e: Value = r.json().await.unwrap();
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains("Use one of: auto, a, a/a-model."), "{msg}");
        if words.is_empty() {
            assert!(!msg.contains("Connect"), "{msg}");
        } else {
            assert!(msg.contains(words), "{msg}");
        }
    }
    baton.stop().await;
}

#[tokio::test]
async fn model_discovery_finds_configured_models_that_disappeared() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let mut pa = provider("a", &a.base_url(), 10);
    pa["models"] = json!(["a-model", "retired-model"]);
    let baton = Baton::start(dir.path(), json!({"providers": [pa]})).await;
    // Start-up discovery runs in the background; wait for it through the admin state.
    let mut found = Value::Null;
    for _ in 0..100 {
        found = baton.admin_state().await["providers"][0]["discovery"].clone();
        if !found.is_null() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(found["models"], json!(["a-model"]));
    assert_eq!(found["missing"], json!(["retired-model"]));
    // On demand, for one provider.
    let r = baton
        .http
        .post(format!("{}/admin/discover?provider=a", baton.url))
        .bearer_auth(&baton.admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["a"]["missing"], json!(["retired-model"]));
    let r = baton
        .http
        .post(format!("{}/admin/discover?provider=nope", baton.url))
        .bearer_auth(&baton.admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = baton
        .http
        .post(format!("{}/admin/discover", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "admin key only");
    baton.stop().await;
}

#[tokio::test]
async fn pause_is_visible_to_health_state_events_and_requests_and_resumes() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    let mut rx = baton.handle.events().subscribe();
    let pause = |body: serde_json::Value| {
        baton
            .http
            .put(format!("{}/admin/pause", baton.url))
            .bearer_auth(&baton.admin_key)
            .json(&body)
            .send()
    };
    let r = pause(json!({"paused": true})).await.unwrap();
    assert_eq!(r.status(), 200);
    let health = baton
        .http
        .get(format!("{}/health", baton.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 503, "a paused gateway is not healthy");
    let v: serde_json::Value = health.json().await.unwrap();
    assert_eq!(v["status"], "paused", "{v}");
    assert_eq!(baton.admin_state().await["paused"], true);
    assert_eq!(baton.chat("auto", "hi").await.status(), 503);
    assert_eq!(
        rx.try_recv().unwrap(),
        baton::events::Event::Paused { paused: true }
    );
    // Bad bodies say what to send; nothing changes.
    for bad in [
        json!({}),
        json!({"paused": "no"}),
        json!({"paused": false, "x": 1}),
    ] {
        let r = pause(bad).await.unwrap();
        assert_eq!(r.status(), 400);
        let v: serde_json::Value = r.json().await.unwrap();
        assert!(
            v["error"]["message"].as_str().unwrap().contains("paused"),
            "{v}"
        );
    }
    assert_eq!(baton.admin_state().await["paused"], true);
    // Without the admin key: 401.
    let r = baton
        .http
        .put(format!("{}/admin/pause", baton.url))
        .json(&json!({"paused": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = pause(json!({"paused": false})).await.unwrap();
    assert_eq!(r.status(), 200);
    let health = baton
        .http
        .get(format!("{}/health", baton.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    baton.stop().await;
}

#[tokio::test]
async fn every_admin_route_wants_the_admin_key_before_reading_anything() {
    let dir = tempfile::tempdir().unwrap();
    let up = testkit::FakeUpstream::start("a").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)]}),
    )
    .await;
    let routes = [
        ("GET", "/admin/state"),
        ("GET", "/admin/statusline"),
        ("GET", "/admin/providers"),
        ("POST", "/admin/providers"),
        ("PUT", "/admin/providers/a"),
        ("PATCH", "/admin/providers/a"),
        ("DELETE", "/admin/providers/a"),
        ("POST", "/admin/providers/a/test"),
        ("POST", "/admin/test"),
        ("PUT", "/admin/order"),
        ("GET", "/admin/export"),
        ("POST", "/admin/import"),
        ("GET", "/admin/log"),
        ("GET", "/admin/events"),
        ("GET", "/admin/setup"),
        ("GET", "/admin/stats"),
        ("GET", "/admin/routes"),
        ("PUT", "/admin/routes/x"),
        ("DELETE", "/admin/routes/x"),
        ("PUT", "/admin/model-map/x"),
        ("DELETE", "/admin/model-map/x"),
        ("GET", "/admin/keys"),
        ("POST", "/admin/keys"),
        ("PATCH", "/admin/keys/x"),
        ("DELETE", "/admin/keys/x"),
        ("GET", "/admin/usage"),
        ("GET", "/metrics"),
        ("GET", "/admin/settings"),
        ("PUT", "/admin/settings"),
        ("GET", "/admin/desktop"),
        ("PUT", "/admin/desktop"),
        ("POST", "/admin/desktop/restart"),
        ("POST", "/admin/discover"),
        ("POST", "/admin/cli-check"),
        ("PUT", "/admin/pause"),
        ("POST", "/admin/cooldowns"),
        ("DELETE", "/admin/cooldowns"),
    ];
    for (method, path) in routes {
        for key in [None, Some(baton.key.clone())] {
            let mut rb = baton
                .http
                .request(method.parse().unwrap(), format!("{}{path}", baton.url))
                .header("content-type", "application/json")
                .body("{\"enabled\": false}");
            if let Some(k) = &key {
                rb = rb.bearer_auth(k);
            }
            let r = rb.send().await.unwrap();
            assert_eq!(r.status(), 401, "{method} {path} with {key:?}");
            let v: serde_json::Value = r.json().await.unwrap();
            assert_eq!(v["error"]["code"], "invalid_admin_key", "{method} {path}");
        }
    }
    // Nothing changed.
    assert_eq!(baton.admin_state().await["providers"][0]["enabled"], true);
    baton.stop().await;
}
