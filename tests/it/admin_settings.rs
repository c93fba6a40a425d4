//! Settings through the admin API: gateway keys made and revoked, notification preferences,
//! windowed stats, pause and the desktop link, and what each model name routes to.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn gateway_keys_are_made_shown_once_and_revoked_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)]}),
    )
    .await;
    let admin = Admin(&baton);
    let (st, v) = admin
        .send(
            Method::POST,
            "/admin/keys",
            Some(json!({"label": "laptop"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let key = v["key"].as_str().unwrap().to_string();
    let id = v["id"].as_str().unwrap().to_string();
    assert!(key.starts_with("bt-"));
    let (st, _) = admin
        .send(
            Method::POST,
            "/admin/keys",
            Some(json!({"label": "laptop"})),
        )
        .await;
    assert_eq!(st, 409, "labels are unique");
    let (st, _) = admin
        .send(Method::POST, "/admin/keys", Some(json!({"label": ""})))
        .await;
    assert_eq!(st, 422);
    let (_, list) = admin.send(Method::GET, "/admin/keys", None).await;
    assert!(
        !list.to_string().contains(&key),
        "listed only masked: {list}"
    );
    assert_eq!(list["ui"][0]["label"], "laptop");
    assert_eq!(list["fixed"][0]["label"], "generated");
    // The new key works at once, is logged under its label, and the hash alone is on disk.
    let chat = |k: String| {
        let b = &baton;
        async move {
            b.http
                .post(format!("{}/v1/chat/completions", b.url))
                .bearer_auth(k)
                .json(&chat_body("auto", "hi", false))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(chat(key.clone()).await, 200);
    assert_eq!(baton.log().await[0].client, "ui:laptop");
    let db = std::fs::read(dir.path().join("baton.db")).unwrap();
    assert!(
        !db.windows(key.len()).any(|w| w == key.as_bytes()),
        "the key itself is not stored"
    );
    let (st, _) = admin
        .send(Method::DELETE, &format!("/admin/keys/{id}"), None)
        .await;
    assert_eq!(st, 204);
    assert_eq!(chat(key.clone()).await, 401, "revoked at once");
    let (st, _) = admin
        .send(Method::DELETE, &format!("/admin/keys/{id}"), None)
        .await;
    assert_eq!(st, 404);
    assert_eq!(
        chat(baton.key.clone()).await,
        200,
        "the generated key still works"
    );
    baton.stop().await;
}

#[tokio::test]
async fn notification_settings_and_windowed_stats() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    let admin = Admin(&baton);
    let (_, s) = admin.send(Method::GET, "/admin/settings", None).await;
    assert_eq!(s["notifications"]["failover"], true);
    assert_eq!(s["notifications"]["cooldownEnded"], true, "on by default");
    assert_eq!(s["server"]["address"], baton.handle.addr.to_string());
    let (st, s) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"notifications": {"cooldownEnded": false}})),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(
        (
            s["notifications"]["cooldownEnded"].as_bool(),
            s["notifications"]["failover"].as_bool()
        ),
        (Some(false), Some(true))
    );
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"notifications": {"sometimes": true}})),
        )
        .await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (422, Some("notifications.sometimes"))
    );
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"notifications": {"failover": "yes"}})),
        )
        .await;
    assert_eq!(st, 422);
    // Usage-window thresholds: whole percentages, kept sorted; anything else says what to send.
    assert_eq!(s["notifications"]["quotaThresholds"], json!([80, 95]));
    for bad in [
        json!([]),
        json!([0]),
        json!([101]),
        json!("80"),
        json!([50, 60, 70, 80, 90]),
    ] {
        let (st, v) = admin
            .send(
                Method::PUT,
                "/admin/settings",
                Some(json!({"notifications": {"quotaThresholds": bad}})),
            )
            .await;
        assert_eq!(
            (st, v["error"]["param"].as_str()),
            (422, Some("notifications.quotaThresholds")),
            "{bad}"
        );
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("such as 80, 95"));
    }
    // The UI says its language: the admin API's messages come back in it (the same problem,
    // the same field), and in English without one.
    for (lang, words) in [
        ("ja,en;q=0.8", "1〜100 の整数を 1〜4 個指定してください"),
        ("zh-CN", "请给出 1 到 4 个 1 到 100 之间的整数百分比"),
        ("de-DE, en;q=0.5", "Give one to four whole percentages"),
    ] {
        let r = admin
            .req(Method::PUT, "/admin/settings")
            .header("accept-language", lang)
            .json(&json!({"notifications": {"quotaThresholds": [0]}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["param"], "notifications.quotaThresholds");
        let m = v["error"]["message"].as_str().unwrap();
        assert!(m.starts_with(words), "{lang}: {m}");
    }
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"notifications": {"quotaThresholds": [90, 70, 90], "quotaBack": false}})),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v["notifications"]["quotaThresholds"], json!([70, 90]));
    assert_eq!(v["notifications"]["quotaBack"], false);

    a.script([Behavior::rate_limited(Some(60))]);
    for _ in 0..3 {
        served_by(&baton).await;
    }
    let (_, st) = admin.send(Method::GET, "/admin/stats", None).await;
    assert_eq!(st["hour"]["a"]["calls"], 1);
    assert_eq!(st["hour"]["a"]["failures"], 1);
    assert_eq!(st["hour"]["b"]["served"], 3);
    assert_eq!(st["day"]["b"]["calls"], 3);
    assert!(st["hour"]["b"]["p50Ms"].is_u64());
    baton.stop().await;
    // Preferences persist.
    let baton = Baton::start(dir.path(), json!({})).await;
    let (_, s) = Admin(&baton)
        .send(Method::GET, "/admin/settings", None)
        .await;
    assert_eq!(s["notifications"]["cooldownEnded"], false);
    assert_eq!(s["notifications"]["quotaThresholds"], json!([70, 90]));
    baton.stop().await;
}

/// Registers the hooks the desktop shell would (a Start-at-login switch and a restart), as
/// flags the test reads: (autostart on, restart asked).
fn desktop_link(
    baton: &Baton,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let on = Arc::new(AtomicBool::new(false));
    let (get, set) = (on.clone(), on.clone());
    let restarted = Arc::new(AtomicBool::new(false));
    let r2 = restarted.clone();
    baton
        .handle
        .core
        .desktop
        .store(Some(Arc::new(baton::DesktopLink {
            autostart: Box::new(move || get.load(Ordering::SeqCst)),
            set_autostart: Box::new(move |v| {
                set.store(v, Ordering::SeqCst);
                Ok(())
            }),
            restart: Box::new(move || r2.store(true, Ordering::SeqCst)),
            relaunch: Box::new(|| {}),
        })));
    (on, restarted)
}

#[tokio::test]
async fn pause_answers_503_and_the_desktop_link_reaches_the_shell() {
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)]}),
    )
    .await;
    let admin = Admin(&baton);
    // Headless: no desktop, so no Start at login.
    let (_, v) = admin.send(Method::GET, "/admin/desktop", None).await;
    assert_eq!(v["present"], false);
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/desktop",
            Some(json!({"autostart": true})),
        )
        .await;
    assert_eq!(st, 409);
    let (st, v) = admin
        .send(Method::POST, "/admin/desktop/restart", None)
        .await;
    assert_eq!((st, v["error"]["code"].as_str()), (409, Some("no_desktop")));
    // The shell registers its hooks; the UI's toggle goes through them.
    let (on, restarted) = desktop_link(&baton);
    let (st, _) = admin
        .send(Method::POST, "/admin/desktop/restart", None)
        .await;
    assert_eq!(st, 202);
    assert!(restarted.load(Ordering::SeqCst));
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/desktop",
            Some(json!({"autostart": true})),
        )
        .await;
    assert_eq!((st, v["autostart"].as_bool()), (200, Some(true)));
    assert!(on.load(Ordering::SeqCst));
    // Paused from the tray: a clear 503 in the client's format, then back.
    baton.handle.core.paused.store(true, Ordering::SeqCst);
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "paused");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Resume routing"));
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "auto", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["type"], "error",
        "Anthropic clients get Anthropic's error shape: {v}"
    );
    baton.handle.core.paused.store(false, Ordering::SeqCst);
    assert_eq!(baton.chat("auto", "hi").await.status(), 200);
    baton.stop().await;
}

#[tokio::test]
async fn routes_show_what_each_model_name_leads_to() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let mut off = provider("b", &up.base_url(), 5);
    off["enabled"] = json!(false);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10), off],
            "routes": {"fast": {"targets": ["a"], "resumeOnBreak": true}}, "modelMap": {"claude-*": "fast"}}),
    )
    .await;
    let (st, v) = Admin(&baton).send(Method::GET, "/admin/routes", None).await;
    assert_eq!(st, 200);
    assert_eq!(
        v["auto"].as_array().unwrap().len(),
        1,
        "a disabled provider is not in auto: {v}"
    );
    assert_eq!(v["auto"][0]["provider"], "a");
    assert_eq!(v["routes"]["fast"]["targets"], json!(["a"]));
    assert_eq!(v["routes"]["fast"]["resumeOnBreak"], true);
    assert_eq!(
        v["modelMap"][0],
        json!({"pattern": "claude-*", "route": "fast", "owner": "file", "missing": false})
    );
    assert_eq!(v["routes"]["fast"]["owner"], "file");
    baton.stop().await;
}

#[tokio::test]
async fn the_listen_address_set_in_settings_is_used_from_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)]}),
    )
    .await;
    let admin = Admin(&baton);
    // Bad input names the field.
    for (body, param) in [
        (
            json!({"listen": {"host": "127.0.0.1", "port": 0}}),
            "listen.port",
        ),
        (
            json!({"listen": {"host": "127.0.0.1", "port": 70000}}),
            "listen.port",
        ),
        (json!({"listen": {"host": "", "port": 8790}}), "listen.host"),
        (
            json!({"listen": {"host": "not a host", "port": 8790}}),
            "listen.host",
        ),
        // Beyond loopback only with gateway keys from the config file.
        (
            json!({"listen": {"host": "0.0.0.0", "port": 8790}}),
            "listen.host",
        ),
        (
            json!({"listen": {"host": "127.0.0.1", "port": 8790, "tls": true}}),
            "listen.tls",
        ),
        (json!({"listen": "127.0.0.1:8790"}), "listen"),
    ] {
        let (st, v) = admin
            .send(Method::PUT, "/admin/settings", Some(body.clone()))
            .await;
        assert_eq!(
            (st, v["error"]["param"].as_str()),
            (422, Some(param)),
            "{body}: {v}"
        );
    }
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"listen": {"host": "localhost", "port": 8790}})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    // Saved with a word of warning where the next start would fail: a port another program
    // holds now, a port that needs administrator rights.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (st, w) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"listen": {"host": "127.0.0.1", "port": port}})),
        )
        .await;
    assert_eq!(st, 200, "{w}");
    assert!(
        w["warning"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("Another program is using port {port}")),
        "{w}"
    );
    let (st, w) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"listen": {"host": "127.0.0.1", "port": 80}})),
        )
        .await;
    assert_eq!(st, 200, "{w}");
    let warning = w["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("administrator rights") || warning.contains("port 80 now"),
        "{w}"
    );
    let (st, _) = admin
        .send(
            Method::PUT,
            "/admin/settings",
            Some(json!({"listen": {"host": "localhost", "port": 8790}})),
        )
        .await;
    assert_eq!(st, 200);
    let (_, v) = admin.send(Method::GET, "/admin/settings", None).await;
    assert_eq!(
        v["server"]["next"],
        json!({"host": "localhost", "port": 8790})
    );
    baton.stop().await;
    // The next start reads it (the command line still wins).
    let opts = baton::serve::ServeOptions {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let c = opts.load().unwrap();
    assert_eq!((c.server.host.as_str(), c.server.port), ("localhost", 8790));
    let opts = baton::serve::ServeOptions {
        data_dir: Some(dir.path().to_path_buf()),
        port: Some(9100),
        ..Default::default()
    };
    assert_eq!(opts.load().unwrap().server.port, 9100);
}

/// Turning on Start at login names the keys Baton reads from environment variables it has now:
/// a login start does not run the shell's exports. A key pasted into Baton is not named.
#[tokio::test]
async fn start_at_login_names_the_keys_a_login_start_may_not_see() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            keyed("shellkeyed", &up, 10, &[("BT_LOGIN_ENV_KEY", "sk-from-the-shell")]),
            provider("keyless", &up.base_url(), 20),
        ]}),
    )
    .await;
    desktop_link(&baton);
    let admin = Admin(&baton);
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/desktop",
            Some(json!({"autostart": true})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let warning = v["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("BT_LOGIN_ENV_KEY") && warning.contains("NAME=value"),
        "{v}"
    );
    // A provider of the config file cannot take a pasted key: it is not offered.
    assert!(!warning.contains("credential store"), "{v}");
    assert!(
        !warning.contains("sk-from-the-shell"),
        "never the key itself"
    );
    // One made in the UI can: pasting its key is offered, for it alone.
    std::env::set_var("BATON_LOGIN_ENV_UI_KEY", "sk-ui-from-the-shell");
    let (st, v) = admin
        .send(
            Method::POST,
            "/admin/providers",
            Some(
                json!({"id": "uikeyed", "kind": "openai-compatible", "baseUrl": up.base_url(),
                "models": ["m"], "keys": [{"env": "BATON_LOGIN_ENV_UI_KEY"}]}),
            ),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    admin
        .send(
            Method::PUT,
            "/admin/desktop",
            Some(json!({"autostart": false})),
        )
        .await;
    let (_, v) = admin
        .send(
            Method::PUT,
            "/admin/desktop",
            Some(json!({"autostart": true})),
        )
        .await;
    let warning = v["warning"].as_str().unwrap_or_default();
    let offer = warning
        .split_once("credential store")
        .map(|(_, after)| after)
        .unwrap_or_default();
    assert!(
        offer.contains("BATON_LOGIN_ENV_UI_KEY") && !offer.contains("BT_LOGIN_ENV_KEY,"),
        "{v}"
    );
    // Turning it off says nothing.
    let (_, v) = admin
        .send(
            Method::PUT,
            "/admin/desktop",
            Some(json!({"autostart": false})),
        )
        .await;
    assert_eq!(v["warning"], Value::Null, "{v}");
}
