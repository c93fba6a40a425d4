//! The local last resort: a loopback OpenAI-compatible server (Ollama's port by default) serves
//! only after every configured provider, and only when enabled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

#[tokio::test]
async fn local_server_serves_last_and_only_when_enabled() {
    for enabled in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let cloud = FakeUpstream::start("cloud").await;
        let local = FakeUpstream::start("local").await;
        let baton = Baton::start(
            dir.path(),
            json!({"providers": [provider("cloud", &cloud.base_url(), 10)],
                "localFallback": {"enabled": enabled, "baseUrl": local.base_url()}}),
        )
        .await;
        if enabled {
            // Detection runs in the background after start.
            assert!(
                eventually(5, || baton
                    .handle
                    .core
                    .routing
                    .snapshot
                    .load()
                    .provider("local")
                    .is_some())
                .await
            );
            assert_eq!(
                header(&baton.chat("auto", "x").await, "x-gateway-provider"),
                "cloud",
                "cloud first"
            );
        }
        cloud.script([Behavior::rate_limited(Some(60))]);
        let r = baton.chat("auto", "x").await;
        if enabled {
            assert_eq!(
                header(&r, "x-gateway-provider"),
                "local",
                "the last resort while cloud cools"
            );
            assert_eq!(
                header(&r, "x-gateway-model"),
                "local-model",
                "models come from the server's list"
            );
        } else {
            assert_eq!(r.status(), 429, "off by default: nothing local is used");
            assert_eq!(local.hits(), 0);
        }
        baton.stop().await;
    }
}

#[test]
fn local_fallback_must_be_on_this_machine() {
    let e = baton::config::parse_str(
        r#"{"localFallback": {"enabled": true, "baseUrl": "http://10.0.0.5:11434/v1"}}"#,
        std::path::Path::new("c.json"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("localFallback.baseUrl") && e.contains("loopback"),
        "{e}"
    );
}
