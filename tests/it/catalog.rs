//! The shipped provider catalog: schema, safe URLs, complete entries, the providers the product
//! promises to cover.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use baton::catalog::{self, FLAGS};

#[test]
fn catalog_is_valid_and_complete() {
    let cat = catalog::load().expect("catalog/providers.json parses");
    let mut ids = std::collections::HashSet::new();
    for p in &cat.providers {
        let at = |what: &str| format!("{}: {what}", p.id);
        assert!(ids.insert(p.id.clone()), "{}", at("duplicate id"));
        assert!(
            !p.models.is_empty()
                && p.models
                    .iter()
                    .chain(&p.fallback_models)
                    .all(|m| !m.trim().is_empty()),
            "{}",
            at("models")
        );
        assert!(
            p.signup.starts_with("https://") && !p.signup.contains(char::is_whitespace),
            "{}",
            at("sign-up URL must be https")
        );
        assert!(
            p.source.starts_with("https://"),
            "{}",
            at("source must be an https URL")
        );
        let local = p.flags.iter().any(|f| f == "local");
        match (&p.base_url, p.kind.ends_with("-cli")) {
            (Some(url), false) => {
                let ok = url.starts_with("https://")
                    || (local
                        && (url.starts_with("http://127.0.0.1")
                            || url.starts_with("http://localhost")));
                assert!(
                    ok,
                    "{}",
                    at("base URL must be https (loopback http only for local servers)")
                );
            }
            (None, true) => assert!(
                p.cli.is_some(),
                "{}",
                at("a CLI entry names its executable")
            ),
            _ => panic!("{}", at("API providers need a base URL; CLIs none")),
        }
        if let Some(env) = &p.key_env {
            assert!(
                env.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                at("key variable name")
            );
        }
        for f in &p.flags {
            assert!(
                FLAGS.contains(&f.as_str()),
                "{}",
                at(&format!("unknown flag {f}"))
            );
        }
        if let Some(t) = &p.free_tier {
            assert!(
                ["key", "model", "provider"].contains(&t.scope.as_str()),
                "{}",
                at("free-tier scope")
            );
        }
        if let Some(z) = &p.day_reset {
            assert!(
                jiff::tz::TimeZone::get(z).is_ok(),
                "{}",
                at("dayReset zone")
            );
        }
        if let Some(d) = &p.checked {
            assert!(
                d.parse::<jiff::civil::Date>().is_ok(),
                "{}",
                at("checked must be YYYY-MM-DD")
            );
        }
    }
    for must in [
        "openai",
        "anthropic",
        "gemini",
        "groq",
        "cerebras",
        "mistral",
        "openrouter",
        "deepseek",
        "together",
        "fireworks",
        "siliconflow",
        "zhipu",
        "nvidia",
        "huggingface",
        "github",
        "ollama",
        "claude-cli",
        "codex-cli",
        "gemini-cli",
    ] {
        assert!(ids.contains(must), "catalog covers {must}");
    }
}

#[test]
fn committed_catalog_schema_matches_the_code() {
    let committed: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/catalog/providers.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert!(
        committed == catalog::json_schema(),
        "catalog/providers.schema.json is stale: run `baton config catalog-schema`"
    );
}

/// Every HTTP service of the catalog, started from its preset in the form and saved unchanged,
/// is taken: its key variable is one Baton sends there (the Bedrock preset's
/// `AWS_BEARER_TOKEN_BEDROCK` once was refused for not ending in `_KEY`).
#[tokio::test]
async fn every_http_preset_saved_as_it_comes_is_taken() {
    use crate::common::{Admin, Baton};
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), serde_json::json!({"providers": []})).await;
    let admin = Admin(&baton);
    let (_, setup) = admin.send(reqwest::Method::GET, "/admin/setup", None).await;
    let presets = setup["presets"].as_array().expect("presets");
    let mut refused = Vec::new();
    let mut saved = 0;
    for p in presets {
        let mut provider = p["provider"].clone();
        if provider.get("baseUrl").and_then(|b| b.as_str()).is_none() {
            continue; // a subscription CLI: its own test checks the executable
        }
        // What the form asks the user for and no preset can know: Vertex AI's project.
        let kind = provider["kind"].as_str().unwrap_or_default().to_string();
        if kind.starts_with("vertex-") {
            provider["project"] = serde_json::json!("acme-prod-1");
        }
        let (st, v) = admin
            .send(
                reqwest::Method::POST,
                "/admin/providers",
                Some(provider.clone()),
            )
            .await;
        if st == 201 {
            saved += 1;
        } else {
            refused.push(format!(
                "{}: {st} {}",
                provider["id"], v["error"]["message"]
            ));
        }
    }
    assert!(
        refused.is_empty(),
        "presets refused as they come: {refused:#?}"
    );
    assert!(saved >= 10, "only {saved} presets tried");
    baton.stop().await;
}
