//! `/admin/update` from a headless Baton and its input rules (the whole update, from a check to
//! the restart into a new build, is tests/desktop/test_update.py against the real tray app).

use crate::common::*;
use reqwest::Method;
use serde_json::json;
use testkit::FakeUpstream;

#[tokio::test]
async fn updates_are_off_by_default_belong_to_the_desktop_and_take_only_safe_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)]}),
    )
    .await;
    let admin = Admin(&baton);
    let (st, v) = admin.send(Method::GET, "/admin/update", None).await;
    assert_eq!(st, 200);
    assert_eq!(v["enabled"], false, "off until the user turns it on: {v}");
    assert_eq!(
        v["supported"], false,
        "headless: the desktop app updates itself"
    );
    assert_eq!(v["current"], env!("CARGO_PKG_VERSION"));
    let (st, v) = admin.send(Method::POST, "/admin/update/check", None).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("updates_off")),
        "{v}"
    );

    for (body, param, why) in [
        (json!({"enabled": "yes"}), "enabled", "true or false"),
        (
            json!({"url": "ftp://example.com/latest.json"}),
            "url",
            "https",
        ),
        (
            json!({"url": "http://example.com/latest.json"}),
            "url",
            "https",
        ),
        (json!({"url": "not a url"}), "url", "not an address"),
        (json!({"channel": "beta"}), "channel", "unknown field"),
    ] {
        let (st, v) = admin.send(Method::PUT, "/admin/update", Some(body)).await;
        assert_eq!(st, 422, "{v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains(why), "{v}");
    }
    // Loopback may be plain http (a local mirror); the setting persists.
    let (st, v) = admin
        .send(
            Method::PUT,
            "/admin/update",
            Some(json!({"enabled": true, "url": "http://127.0.0.1:9/latest.json"})),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["enabled"], true);
    let (st, v) = admin.send(Method::POST, "/admin/update/check", None).await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("no_desktop")),
        "{v}"
    );
    let (st, v) = admin
        .send(Method::POST, "/admin/update/install", None)
        .await;
    assert_eq!(
        (st, v["error"]["code"].as_str()),
        (409, Some("no_desktop")),
        "{v}"
    );
    let (_, v) = admin
        .send(Method::PUT, "/admin/update", Some(json!({"url": ""})))
        .await;
    assert!(
        v["url"].is_null(),
        "\"\" goes back to the built-in address: {v}"
    );
}
