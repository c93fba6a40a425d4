//! Keys typed into the UI land in the OS credential store when one answers. Run by
//! `scripts/test` (with `--ignored`) inside a D-Bus session with an unlocked gnome-keyring
//! (Secret Service); elsewhere the file fallback is what the other tests cover.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

#[tokio::test]
#[ignore = "needs a Secret Service: scripts/test runs it with --ignored inside gnome-keyring"]
async fn typed_keys_go_to_the_secret_service() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(dir.path(), json!({})).await;
    let r = baton
        .http
        .post(format!("{}/admin/providers", baton.url))
        .header("x-admin-key", &baton.admin_key)
        .json(&json!({"id": "p", "kind": "openai-compatible", "baseUrl": up.base_url(), "models": ["m"],
            "newKeys": ["sk-in-the-keyring-4242"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    let id = v["config"]["keys"][0]["stored"]
        .as_str()
        .unwrap()
        .to_string();
    let file = std::fs::read_to_string(dir.path().join("secrets.json")).unwrap();
    assert!(
        !file.contains("sk-in-the-keyring"),
        "the value is not in the file: {file}"
    );
    assert_eq!(baton.handle.core.secrets.location(&id), Some("os"));
    let entry = keyring::Entry::new("dev.baton.gateway", &id).unwrap();
    assert_eq!(entry.get_password().unwrap(), "sk-in-the-keyring-4242");
    // Used upstream.
    assert_eq!(baton.chat("p/m", "hi").await.status(), 200);
    let auth = up.received()[0]
        .headers
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(auth, "Bearer sk-in-the-keyring-4242");
    // Deleting the provider removes the credential.
    let r = baton
        .http
        .delete(format!("{}/admin/providers/p", baton.url))
        .header("x-admin-key", &baton.admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert!(
        entry.get_password().is_err(),
        "credential removed from the OS store"
    );
    baton.stop().await;
}
