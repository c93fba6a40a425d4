//! The admin key cannot read other secrets by pointing a provider at a server it chooses: a
//! provider body may name only API-key variables (never `PATH`, never Baton's own keys), and a
//! key typed into the UI stays bound to the provider and host it was saved for.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

fn body(id: &str, url: &str, keys: Value) -> Value {
    json!({"id": id, "kind": "openai-compatible", "baseUrl": url, "models": ["m"], "keys": keys})
}

/// Every request the fake received carried none of these values.
fn never_sent(up: &FakeUpstream, values: &[&str]) {
    for r in up.received() {
        let auth = r
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        for v in values {
            assert!(!auth.contains(v), "sent {auth}");
        }
    }
}

#[tokio::test]
async fn provider_bodies_may_only_name_key_variables_and_stored_keys_stay_on_their_host() {
    std::env::set_var(
        "BATON_TEST_TEAM_VAR",
        "bt-team-secret-for-the-admin-secrets-test",
    );
    std::env::set_var(
        "BATON_MYPROXY_API_KEY",
        "sk-proxy-key-for-admin-secrets-0000",
    );
    std::env::set_var(
        "AWS_SECRET_ACCESS_KEY",
        "aws-secret-for-admin-secrets-test-9",
    );
    std::env::set_var("GITHUB_TOKEN", "ghp_githubtokenforadminsecretstest00");
    std::env::set_var("FILEPROXY_API_KEY", "sk-file-proxy-key-for-admin-secrets");
    let home = FakeUpstream::start("home").await;
    let attacker = FakeUpstream::start("attacker").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("gateway.key"),
        "bt-team-secret-for-the-admin-secrets-test",
    )
    .unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"gatewayKeys": [{"env": "BATON_TEST_TEAM_VAR", "label": "team"}],
               "providers": [{"id": "filep", "kind": "openai-compatible", "baseUrl": home.base_url(),
                              "models": ["m"], "keys": [{"env": "FILEPROXY_API_KEY"}]}]}),
    )
    .await;
    let admin = Admin(&baton);

    // Process variables and Baton's own keys are refused, by test, create and import alike.
    for (var, why) in [
        ("PATH", "does not look like an API-key variable"),
        ("HOME", "does not look like an API-key variable"),
        ("BATON_TEST_TEAM_VAR", "Baton's own keys"),
        ("BATON_ADMIN_KEY", "Baton's own keys"),
        // Key-shaped, but not a key Baton sends there: other programs' secrets, a vendor's key
        // to a server that is not the vendor's, the file's key to another host.
        ("AWS_SECRET_ACCESS_KEY", "goes only where"),
        ("GITHUB_TOKEN", "goes only where"),
        ("OPENAI_API_KEY", "goes only where"),
        ("FILEPROXY_API_KEY", "goes only where"),
    ] {
        let b = body("evil", &attacker.base_url(), json!([{"env": var}]));
        for path in ["/admin/test", "/admin/providers"] {
            let (st, v) = admin.send(Method::POST, path, Some(b.clone())).await;
            assert_eq!(st, 422, "{path} {var}: {v}");
            assert_eq!(v["error"]["param"], "keys[0].env", "{v}");
            assert!(v["error"]["message"].as_str().unwrap().contains(why), "{v}");
        }
        let import = json!({"providers": [b]}).to_string();
        let r = admin
            .req(Method::POST, "/admin/import")
            .body(import)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "import {var}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["param"], "providers[0].keys[0].env", "{v}");
    }
    assert_eq!(attacker.hits(), 0, "nothing was sent anywhere");
    let (_, providers) = admin.send(Method::GET, "/admin/providers", None).await;
    assert_eq!(
        providers["providers"].as_array().unwrap().len(),
        1,
        "nothing was saved besides the file's provider"
    );

    // A variable the user named for Baton goes anywhere; the file's key goes to the file's
    // host; a vendor's key to its vendor (saved only: nothing leaves this machine here).
    for (env, url) in [
        ("BATON_MYPROXY_API_KEY", home.base_url()),
        ("FILEPROXY_API_KEY", format!("{}/", home.base_url())),
    ] {
        let b = body("proxy", &url, json!([{"env": env}]));
        let (st, v) = admin.send(Method::POST, "/admin/test", Some(b)).await;
        assert_eq!(st, 200, "{env}: {v}");
    }
    let b = body(
        "oai",
        "https://api.openai.com/v1",
        json!([{"env": "OPENAI_API_KEY"}]),
    );
    let (st, v) = admin.send(Method::POST, "/admin/providers", Some(b)).await;
    assert_eq!(st, 201, "{v}");
    let (st, _) = admin
        .send(Method::DELETE, "/admin/providers/oai", None)
        .await;
    assert!((200..300).contains(&st), "{st}");
    never_sent(&home, &["aws-secret", "ghp_"]);

    // A key typed into the UI is stored for its provider and host.
    let mut b = body("home", &home.base_url(), json!([]));
    b["newKeys"] = json!(["sk-typed-key-bound-to-home-1111"]);
    let (st, v) = admin.send(Method::POST, "/admin/providers", Some(b)).await;
    assert_eq!(st, 201, "{v}");
    let (_, state) = admin.send(Method::GET, "/admin/providers", None).await;
    let saved = state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "home")
        .unwrap()["config"]
        .clone();
    let stored = saved["keys"][0].clone();
    assert!(stored["stored"].is_string(), "{saved}");

    // Re-pointing the provider at another host keeps no stored key: it must be typed again.
    let mut moved = saved.clone();
    moved["baseUrl"] = json!(attacker.base_url());
    for (method, path) in [
        (Method::PUT, "/admin/providers/home"),
        (Method::POST, "/admin/test"),
    ] {
        let (st, v) = admin.send(method, path, Some(moved.clone())).await;
        assert_eq!(st, 422, "{path}: {v}");
        assert_eq!(v["error"]["param"], "keys[0]", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("type it again"),
            "{v}"
        );
    }
    // Nor does it follow the provider from https to http on the same host (in the clear).
    let port = home.addr.port();
    let mut tls = body("tls", &format!("https://127.0.0.1:{port}/v1"), json!([]));
    tls["newKeys"] = json!(["sk-typed-key-bound-to-tls-2222"]);
    let (st, v) = admin
        .send(Method::POST, "/admin/providers", Some(tls))
        .await;
    assert_eq!(st, 201, "{v}");
    let (_, state) = admin.send(Method::GET, "/admin/providers", None).await;
    let mut plain = state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "tls")
        .unwrap()["config"]
        .clone();
    plain["baseUrl"] = json!(format!("http://127.0.0.1:{port}/v1"));
    let (st, v) = admin
        .send(Method::PUT, "/admin/providers/tls", Some(plain))
        .await;
    assert_eq!(st, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("https://127.0.0.1"),
        "{v}"
    );
    // Another provider cannot borrow it either, on any host.
    let thief = body("thief", &home.base_url(), json!([stored.clone()]));
    for path in ["/admin/test", "/admin/providers"] {
        let (st, v) = admin.send(Method::POST, path, Some(thief.clone())).await;
        assert_eq!(st, 422, "{path}: {v}");
        assert_eq!(v["error"]["param"], "keys[0].stored", "{v}");
    }
    assert_eq!(attacker.hits(), 0);
    never_sent(&attacker, &["sk-typed-key", "bt-team-secret"]);

    // The same host with another path, or a retyped key on a new host, is fine.
    let mut same_host = saved.clone();
    same_host["baseUrl"] = json!(format!("{}/", home.base_url()));
    let (st, v) = admin
        .send(Method::PUT, "/admin/providers/home", Some(same_host))
        .await;
    assert_eq!(st, 200, "{v}");
    let mut retyped = moved.clone();
    retyped["keys"] = json!([]);
    retyped["newKeys"] = json!(["sk-a-new-key-for-the-new-host-22"]);
    let (st, v) = admin
        .send(Method::PUT, "/admin/providers/home", Some(retyped))
        .await;
    assert_eq!(st, 200, "{v}");
    baton.stop().await;
}

/// A secret a provider needs in a header (a proxy's token) is given by reference, like a key:
/// sent, never shown, exported or stored in the configuration, masked when an upstream echoes
/// it, and bound to its provider's host. Written as text, it is refused.
#[tokio::test]
async fn secret_headers_are_references_sent_but_never_shown_and_bound_to_their_host() {
    const FILE_SECRET: &str = "proxy-header-secret-from-env-5e1f0c";
    const TYPED: &str = "typed-header-secret-for-the-ui-9a7b";
    std::env::set_var("BATON_TEST_PROXY_TOKEN", FILE_SECRET);
    let up = FakeUpstream::start("hdr").await;
    let attacker = FakeUpstream::start("attacker").await;
    let dir = tempfile::tempdir().unwrap();
    let mut p = provider("hdr", &up.base_url(), 1);
    p["headers"] = json!({"X-Proxy-Token": {"env": "BATON_TEST_PROXY_TOKEN"},
                          "HTTP-Referer": "https://baton.local"});
    let baton = Baton::start(dir.path(), json!({"providers": [p]})).await;
    let admin = Admin(&baton);

    // Sent as its value; the text header as written.
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    let got = up.received();
    let h = &got.last().unwrap().headers;
    assert_eq!(h["x-proxy-token"], FILE_SECRET);
    assert_eq!(h["http-referer"], "https://baton.local");

    // An upstream that echoes it: masked for the client.
    up.script([Behavior::Status {
        status: 400,
        body: json!({"error": {"message": format!("bad proxy token {FILE_SECRET}"),
                               "type": "invalid_request_error"}}),
        headers: vec![],
    }]);
    let r = baton.chat("auto", "echo").await;
    let text = r.text().await.unwrap();
    assert!(!text.contains(FILE_SECRET), "{text}");
    assert!(text.contains("[redacted]"), "{text}");

    // A secret written as text is refused, by the admin API as by the config file.
    for (name, value) in [
        ("Authorization", "Basic dXNlcjpwYXNz"),
        ("X-Proxy-Token", "anything"),
        ("X-Trace", "Bearer abcdefghijklmnop"),
    ] {
        let mut b = body("lit", &up.base_url(), json!([]));
        b["headers"] = json!({ name: value });
        let (st, v) = admin.send(Method::POST, "/admin/providers", Some(b)).await;
        assert_eq!(st, 422, "{name}: {v}");
        assert_eq!(v["error"]["param"], format!("headers.{name}"), "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("env"),
            "{v}"
        );
    }
    let cfg = json!({"providers": [{"id": "a", "kind": "openai-compatible",
        "baseUrl": "https://x.example/v1", "models": ["m"],
        "headers": {"Authorization": "Bearer sk-literal-in-the-file-000000"}}]});
    let e = baton::config::parse_str(&cfg.to_string(), std::path::Path::new("my.json"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("providers[0].headers.Authorization: looks like a secret"),
        "{e}"
    );
    assert!(
        !e.contains("sk-literal"),
        "the error does not repeat it: {e}"
    );

    // Typed into the UI: stored, sent, never shown or exported.
    let mut b = body("ui", &up.base_url(), json!([]));
    b["newHeaders"] = json!({"X-Proxy-Token": TYPED});
    let (st, v) = admin.send(Method::POST, "/admin/providers", Some(b)).await;
    assert_eq!(st, 201, "{v}");
    let (_, list) = admin.send(Method::GET, "/admin/providers", None).await;
    let export = admin
        .req(Method::GET, "/admin/export")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for shown in [list.to_string(), export.clone()] {
        assert!(
            !shown.contains(TYPED) && !shown.contains(FILE_SECRET),
            "{shown}"
        );
    }
    let saved = list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "ui")
        .unwrap()["config"]
        .clone();
    assert!(
        saved["headers"]["X-Proxy-Token"]["stored"].is_string(),
        "{saved}"
    );
    let r = baton.chat("ui/m", "typed").await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        up.received().last().unwrap().headers["x-proxy-token"],
        TYPED
    );
    let db = std::fs::read(dir.path().join("baton.db")).unwrap();
    assert!(memchr::memmem::find(&db, TYPED.as_bytes()).is_none());

    // It stays with its host: moving the provider needs it typed again.
    let mut moved = saved.clone();
    moved["baseUrl"] = json!(attacker.base_url());
    let (st, v) = admin
        .send(Method::PUT, "/admin/providers/ui", Some(moved))
        .await;
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["error"]["param"], "headers.X-Proxy-Token", "{v}");
    assert_eq!(attacker.hits(), 0);
    baton.stop().await;
}
