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
