//! Named routes and `modelMap` made through the admin API (what the UI's Routing screen uses):
//! validated against the live providers with the field named, applied on the next request,
//! kept across a restart, exported, and never allowed to override or break what the config
//! file defines. Also: candidates passed over for what a request needs are in the log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::FakeUpstream;

fn config(a: &FakeUpstream, b: &FakeUpstream) -> Value {
    json!({
        "providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)],
        "routes": {"filed": ["a"]},
        "modelMap": {"gpt-4o": "a"}
    })
}

#[tokio::test]
async fn routes_and_model_map_are_made_changed_and_deleted_live() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(dir.path(), config(&a, &b)).await;
    let admin = Admin(&baton);

    // A new route, tried in the order given, used on the next request.
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/routes/fast",
            Some(json!({"targets": ["b", "a"]})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["targets"], json!(["b", "a"]));
    let r = baton.chat("fast", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    // Replaced: 200, and the new order holds at once.
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/routes/fast",
            Some(json!({"targets": ["a/a-model", "b"], "resumeOnBreak": true})),
        )
        .await;
    assert_eq!(st, 200);
    let r = baton.chat("fast", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "a");

    // Bad input names what to fix.
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/routes/fast",
            Some(json!({"targets": ["b", "nope"]})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (422, Some("targets[1]"))
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("nope"),
        "{v}"
    );
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/routes/fast",
            Some(json!({"targets": []})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (422, Some("targets")),
        "{v}"
    );
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/routes/auto",
            Some(json!({"targets": ["a"]})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (422, Some("name")),
        "{v}"
    );
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/routes/b",
            Some(json!({"targets": ["a"]})),
        )
        .await;
    assert_eq!(st, 422, "a provider's id is not a route name: {v}");
    let (st, v) = admin
        .send(Method::PUT, "/admin/routes/x", Some(json!({"target": "a"})))
        .await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (400, Some("targets")),
        "{v}"
    );
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/routes/filed",
            Some(json!({"targets": ["b"]})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("defined_in_file"))
    );
    // The failed attempts changed nothing.
    let r = baton.chat("fast", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "a");

    // Claude Code's model names, mapped with one glob (the `[1m]` suffix included).
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/model-map/claude-%2A",
            Some(json!({"target": "fast"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["pattern"], "claude-*");
    for name in ["claude-sonnet-4-5-20250929", "claude-opus-4-1[1m]"] {
        let r = baton.chat(name, "hi").await;
        assert_eq!(r.status(), 200, "{name}");
        assert_eq!(header(&r, "x-gateway-provider"), "a", "{name}");
    }
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/model-map/gpt-5",
            Some(json!({"target": "missing-route"})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (422, Some("target")),
        "{v}"
    );
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/model-map/gpt-4o",
            Some(json!({"target": "b"})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("defined_in_file"))
    );

    // The listing says who owns what.
    let (_, v) = admin.send(Method::GET, "/admin/routes", None).await;
    assert_eq!(v["routes"]["fast"]["owner"], "ui");
    assert_eq!(v["routes"]["fast"]["resumeOnBreak"], true);
    assert_eq!(v["routes"]["filed"]["owner"], "file");
    let map = v["modelMap"].as_array().unwrap();
    assert!(map
        .iter()
        .any(|m| m["pattern"] == "claude-*" && m["owner"] == "ui"));
    assert!(map
        .iter()
        .any(|m| m["pattern"] == "gpt-4o" && m["owner"] == "file"));

    // Export carries them; a restart keeps them.
    let (_, exported) = admin.send(Method::GET, "/admin/export", None).await;
    assert_eq!(
        exported["routes"]["fast"]["targets"],
        json!(["a/a-model", "b"])
    );
    assert_eq!(exported["modelMap"]["claude-*"], "fast");
    baton.stop().await;
    let baton = Baton::start(dir.path(), config(&a, &b)).await;
    let admin = Admin(&baton);
    let r = baton.chat("claude-haiku-4-5", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "a");

    // A provider made in the UI cannot be deleted while a route made in the UI uses it.
    let c = FakeUpstream::start("c").await;
    let (st, _) = admin
        .send(
            Method::POST,
            "/admin/providers",
            Some(provider("c", &c.base_url(), 30)),
        )
        .await;
    assert_eq!(st, 201);
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/routes/viac",
            Some(json!({"targets": ["c/c-model"]})),
        )
        .await;
    assert_eq!(st, 201);
    let (st, v) = admin.send(Method::DELETE, "/admin/providers/c", None).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("provider_in_use")),
        "{v}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("viac"),
        "{v}"
    );
    let (st, _) = admin.send(Method::DELETE, "/admin/routes/viac", None).await;
    assert_eq!(st, 204);
    let (st, _) = admin.send(Method::DELETE, "/admin/providers/c", None).await;
    assert_eq!(st, 204);

    // A route still mapped to cannot go; unmapped, it can.
    let (st, v) = admin.send(Method::DELETE, "/admin/routes/fast", None).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("route_in_use")),
        "{v}"
    );
    let (st, _) = admin
        .send(Method::DELETE, "/admin/model-map/claude-%2A", None)
        .await;
    assert_eq!(st, 204);
    let (st, _) = admin.send(Method::DELETE, "/admin/routes/fast", None).await;
    assert_eq!(st, 204);
    let (st, v) = admin.send(Method::DELETE, "/admin/routes/fast", None).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (404, Some("route_not_found"))
    );
    let r = baton.chat("fast", "hi").await;
    assert_eq!(r.status(), 404);
    let r = baton.chat("claude-haiku-4-5", "hi").await;
    assert_eq!(r.status(), 404, "the mapping is gone");
    baton.stop().await;
}

#[tokio::test]
async fn candidates_passed_over_for_what_the_request_needs_are_logged() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let mut notools = provider("a", &a.base_url(), 10);
    notools["models"] = json!([{"id": "a-model", "tools": false}]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [notools, provider("b", &b.base_url(), 20)]}),
    )
    .await;
    let mut body = chat_body("auto", "hi", false);
    body["tools"] =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert!(a.received().is_empty());
    let row = baton.log().await.into_iter().next().unwrap();
    let first = &row.attempts[0];
    assert_eq!(
        (first.provider.as_str(), first.class.as_str()),
        ("a", "skipped")
    );
    assert!(
        first.reason.as_deref().unwrap().contains("tool calls"),
        "{:?}",
        first.reason
    );
    assert_eq!(row.attempts[1].class.as_str(), "ok");
    baton.stop().await;
}

#[tokio::test]
async fn providers_added_without_a_priority_go_last_in_the_order_they_were_added() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    // The file's providers sit at 10 and 300: a new one goes after both, whatever its id.
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("m", &a.base_url(), 10), provider("n", &a.base_url(), 300)]}),
    )
    .await;
    let admin = Admin(&baton);
    for id in ["zeta", "alpha", "mid"] {
        let (st, v) = admin
            .send(
                Method::POST,
                "/admin/providers",
                Some(json!({"id": id, "kind": "openai-compatible", "baseUrl": a.base_url(), "models": ["x"]})),
            )
            .await;
        assert_eq!(st, 201, "{v}");
    }
    let (_, v) = admin.send(Method::GET, "/admin/providers", None).await;
    let ids: Vec<&str> = v["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m", "n", "zeta", "alpha", "mid"]);
    baton.stop().await;
}
