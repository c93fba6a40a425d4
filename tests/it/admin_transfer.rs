//! Export and import of the live configuration through the admin API: no secrets in the
//! export, a round trip that restores it, and the same machine's file providers skipped (with
//! a replace asked first).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::FakeUpstream;

#[tokio::test]
async fn export_has_no_secrets_and_import_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("x").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 10)], "routes": {"fast": ["a"]}}),
    )
    .await;
    let admin = Admin(&baton);
    let (st, _) = admin
        .send(
            Method::POST,
            "/admin/providers",
            Some(
                json!({"id": "typed", "kind": "openai-compatible", "baseUrl": up.base_url(),
            "models": ["m"], "keys": [{"env": "BATON_SOME_API_KEY"}], "newKeys": ["sk-never-exported-9999"]}),
            ),
        )
        .await;
    assert_eq!(st, 201);
    let r = admin
        .req(Method::GET, "/admin/export")
        .send()
        .await
        .unwrap();
    assert!(header(&r, "content-disposition").contains("baton-config.json"));
    let exported = r.text().await.unwrap();
    assert!(!exported.contains("sk-never-exported"), "{exported}");
    assert!(
        !exported.contains("\"stored\""),
        "machine-local secret ids are not exported"
    );
    let v: Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(v["routes"]["fast"], json!(["a"]));
    assert_eq!(
        v["providers"][1]["keys"],
        json!([{"env": "BATON_SOME_API_KEY"}])
    );
    // The export is a valid config file.
    baton::config::parse_str(&exported, std::path::Path::new("export.json"))
        .expect("export parses");

    // Import into a fresh Baton: validated first, then applied at once.
    let dir2 = tempfile::tempdir().unwrap();
    let other = Baton::start(dir2.path(), json!({})).await;
    let admin2 = Admin(&other);
    let bad = exported.replace("openai-compatible", "open-ai");
    let r = admin2
        .req(Method::POST, "/admin/import")
        .body(bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert!(
        other.admin_state().await["providers"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing imported on error"
    );
    let r = admin2
        .req(Method::POST, "/admin/import")
        .body(exported)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let ids: Vec<String> = other.admin_state().await["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["a", "typed"]);
    let r = other.chat("a/a-model", "hi").await;
    assert_eq!(r.status(), 200, "imported provider serves at once");
    other.stop().await;
    baton.stop().await;
}

#[tokio::test]
async fn export_then_import_on_the_same_machine_skips_file_providers_and_asks_before_replacing() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)]}),
    )
    .await;
    let admin = Admin(&baton);
    let (st, _) = admin
        .send(
            Method::POST,
            "/admin/providers",
            Some(json!({"id": "mine", "kind": "openai-compatible", "baseUrl": up.base_url(), "models": ["m"]})),
        )
        .await;
    assert_eq!(st, 201);
    let exported = admin
        .req(Method::GET, "/admin/export")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let import = |q: &'static str| {
        admin
            .req(Method::POST, &format!("/admin/import{q}"))
            .body(exported.clone())
            .send()
    };
    // `mine` exists: asked first, nothing changes.
    let r = import("").await.unwrap();
    assert_eq!(r.status(), 409);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "import_conflict", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("mine"),
        "{v}"
    );
    assert!(
        !v["error"]["message"].as_str().unwrap().contains("a,"),
        "{v}"
    );
    // Replacing: `mine` is replaced, `a` (the config file's) is skipped, not an error.
    let r = import("?replace=true").await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["imported"], json!(["mine"]), "{v}");
    assert_eq!(v["replaced"], json!(["mine"]), "{v}");
    assert_eq!(v["skipped"][0]["id"], "a", "{v}");
    let r = import("?replace=maybe").await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(baton.chat("a/a-model", "hi").await.status(), 200);
    baton.stop().await;
}

/// The repository's own example imports through Settings → Import: its numbered second key
/// (`GROQ_API_KEY_2`) is read as Groq's key variable, sent only to Groq.
#[tokio::test]
async fn the_example_config_imports_and_a_numbered_key_goes_only_to_its_provider() {
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.json"))
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = Baton::start(dir.path(), json!({})).await;
    let admin = Admin(&b);
    let r = admin
        .req(Method::POST, "/admin/import")
        .body(example)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let state = b.admin_state().await;
    let groq = state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "groq")
        .unwrap();
    assert_eq!(groq["config"]["keys"][1]["env"], "GROQ_API_KEY_2", "{groq}");
    // The same variable to another host is refused.
    let body = json!({"id": "elsewhere", "kind": "openai-compatible", "baseUrl": "https://attacker.example/v1",
        "models": ["m"], "keys": [{"env": "GROQ_API_KEY_2"}]});
    let (status, e) = admin
        .send(Method::POST, "/admin/providers", Some(body))
        .await;
    assert_eq!(status, 422, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not a key Baton sends"),
        "{e}"
    );
    b.stop().await;
}
