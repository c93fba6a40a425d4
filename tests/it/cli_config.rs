//! `baton config export` / `import`: the live configuration round-trips as JSON without
//! secrets, and an invalid import changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_import_round_trip_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let a = FakeUpstream::start("a").await;
    let z = FakeUpstream::start("z").await;
    std::env::set_var("BT_EXPORT_KEY", "sk-export-secret-5555");
    let mut pa = provider("a", &a.base_url(), 10);
    pa["keys"] = json!([{"env": "BT_EXPORT_KEY"}]);
    let config = json!({"providers": [pa.clone()]});
    let baton = Baton::start(&data, config.clone()).await;
    baton.stop().await;
    let d = data.display().to_string();

    // An invalid file is refused and changes nothing.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, json!({"providers": [{"id": "Z!", "kind": "openai-compatible", "baseUrl": "x", "models": ["m"]}]}).to_string()).unwrap();
    let (code, _, err) = run(&["config", "import", bad.to_str().unwrap(), "--data-dir", &d]);
    assert_eq!(code, 2);
    assert!(
        err.contains("providers[0].id") && err.contains("nothing was imported"),
        "{err}"
    );
    let (_, out, _) = run(&["config", "export", "--data-dir", &d]);
    let exported: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(exported["providers"].as_array().unwrap().len(), 1);

    // A valid one adds its providers.
    let good = dir.path().join("good.json");
    std::fs::write(
        &good,
        json!({"providers": [provider("z", &z.base_url(), 50)]}).to_string(),
    )
    .unwrap();
    let (code, out, err) = run(&["config", "import", good.to_str().unwrap(), "--data-dir", &d]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("imported 1 provider(s): z"));

    let (code, out, _) = run(&["config", "export", "--data-dir", &d]);
    assert_eq!(code, 0);
    assert!(!out.contains("sk-export-secret"), "no secret in the export");
    let exported: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = exported["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "z"]);
    assert_eq!(
        exported["providers"][0]["keys"],
        json!([{"env": "BT_EXPORT_KEY"}])
    );
    // The export is itself a valid configuration file.
    let file = dir.path().join("exported.json");
    std::fs::write(&file, &out).unwrap();
    let (code, out, err) = run(&["config", "check", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");

    // The imported provider serves after the next start.
    let baton = Baton::start(&data, config).await;
    let r = baton.chat("z", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "z");
    baton.stop().await;
}

/// A reader that goes away (`baton config schema | head -1`, `baton status | head -1`) ends a
/// command quietly and successfully, not with a panic about a broken pipe.
#[test]
fn a_closed_pipe_ends_a_command_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["config", "schema"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}
