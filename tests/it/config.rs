//! The configuration file: the shipped example parses, the committed schema is current, and
//! every mistake is reported with its file, JSON path and what is allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use baton::config::{load_file, parse_str, ConfigError};

fn root(file: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(file)
}

#[test]
fn example_config_parses_and_covers_every_section() {
    let c = load_file(&root("config.example.json")).expect("config.example.json is valid");
    assert_eq!(c.providers.len(), 9);
    for kind in [
        "claude-cli",
        "codex-cli",
        "gemini-cli",
        "openai-compatible",
        "openai-responses",
        "azure-openai",
    ] {
        assert!(
            c.providers.iter().any(|p| p.kind.as_str() == kind),
            "shows a {kind} provider"
        );
    }
    assert!(c.routes.contains_key("coding"));
    assert_eq!(c.server.port, 8787);
    assert!(!c.gateway_keys.is_empty());
    assert!(
        c.providers.iter().any(|p| !p.enabled),
        "shows a disabled provider"
    );
}

#[test]
fn committed_schema_matches_the_code() {
    let committed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root("config.schema.json")).unwrap())
            .unwrap();
    // Not assert_eq!: printing two whole schemas helps nobody.
    assert!(
        committed == baton::config::json_schema(),
        "config.schema.json is stale: run `baton config schema > config.schema.json`"
    );
}

fn err(text: &str) -> String {
    match parse_str(text, Path::new("my.json")) {
        Ok(_) => panic!("expected an error for {text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn errors_name_file_path_and_fix() {
    let p = |extra: &str| {
        format!(
            r#"{{"providers":[{{"id":"a","kind":"openai-compatible","baseUrl":"https://x.example/v1","models":["m"]{extra}}}]}}"#
        )
    };
    assert_eq!(
        err(&p(r#","prority":1"#)),
        "my.json: providers[0].prority: unknown field `prority`, expected one of `id`, `name`, `kind`, `baseUrl`, `apiVersion`, `region`, `project`, `awsProfile`, `proxy`, `proxyLogin`, `executable`, `env`, `flattenHistory`, `keys`, `models`, `priority`, `enabled`, `auto`, `maxConcurrency`, `headers`, `timeouts`, `capabilities`, `dayReset`, `limitScope`, `modelFallback`, `retries`, `reserve`, `limits`, `tier`, `credentials`, `overage`, `hedge`"
    );
    assert!(
        err(&p(r#","keys":[{"env":"sk-abcdefghijklmnopqrstuvwxyz"}]"#))
            .contains("providers[0].keys[0].env")
    );
    assert!(err(&p(r#","maxConcurrency":0"#))
        .contains("providers[0].maxConcurrency: must be at least 1"));
    assert!(err(r#"{"providers":[{"id":"a","kind":"openai-compatible","baseUrl":"ftp://x","models":["m"]}]}"#)
        .contains("providers[0].baseUrl: `ftp://x` must start with https://"));
    assert!(err(
        r#"{"providers":[{"id":"a","kind":"openai-compatible","baseUrl":"https://x","models":[]}]}"#
    )
    .contains("providers[0].models: list at least one model"));
    assert!(err(r#"{"routes":{"r":["nope"]}}"#)
        .contains("routes.r[0]: `nope` names no provider or route"));
    assert!(err(r#"{"server":{"host":"0.0.0.0"}}"#).contains("server.host"));
    assert!(err(r#"{"server":{"port":70000}}"#).starts_with("my.json: server.port:"));
    let dup = r#"{"providers":[{"id":"a","kind":"openai-compatible","baseUrl":"https://x","models":["m"]},{"id":"a","kind":"openai-compatible","baseUrl":"https://y","models":["m"]}]}"#;
    assert!(err(dup).contains("providers[1].id: `a` is used by more than one provider"));
    match parse_str("{\n  \"server\": {,\n}", Path::new("my.json")) {
        Err(ConfigError::Syntax { line, .. }) => assert_eq!(line, 2),
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn non_loopback_listen_requires_keys_and_host_names() {
    let ok =
        r#"{"server":{"host":"0.0.0.0","allowedHosts":["gw.lan"]},"gatewayKeys":[{"env":"K"}]}"#;
    assert!(parse_str(ok, Path::new("c.json")).is_ok());
    assert!(
        err(r#"{"server":{"host":"0.0.0.0"},"gatewayKeys":[{"env":"K"}]}"#)
            .contains("server.allowedHosts")
    );
}

#[test]
fn catalog_references_fill_what_the_provider_leaves_out() {
    let c = parse_str(
        r#"{"providers": [
            {"id": "groq", "catalog": "groq"},
            {"id": "my-openrouter", "catalog": "openrouter", "models": ["my/model:free"], "priority": 5},
            {"id": "mistral", "catalog": "mistral", "capabilities": {"images": false}}
        ]}"#,
        Path::new("c.json"),
    )
    .expect("valid");
    let g = &c.providers[0];
    assert_eq!(g.base_url, "https://api.groq.com/openai/v1");
    assert_eq!(g.kind, baton::providers::kinds::openai_compat::KIND);
    assert_eq!(g.keys[0].env, "GROQ_API_KEY");
    assert_eq!(g.models[0].id(), "llama-3.3-70b-versatile");
    assert_eq!(g.limit_scope, Some(baton::config::LimitScope::KeyModel));
    let o = &c.providers[1];
    assert_eq!(o.models.len(), 1, "the user's own models win");
    assert_eq!(o.models[0].id(), "my/model:free");
    assert_eq!(o.day_reset.as_deref(), Some("UTC"));
    // Mistral's tool call id rule comes with it, beside the user's own capabilities.
    let m = &c.providers[2];
    assert_eq!(
        m.capabilities.tool_call_ids,
        baton::config::ToolCallIds::NineAlphanumerics
    );
    assert!(!m.capabilities.images);
    assert_eq!(
        c.providers[0].capabilities.tool_call_ids,
        baton::config::ToolCallIds::Any
    );
    assert!(err(r#"{"providers": [{"id": "x", "catalog": "nope"}]}"#)
        .contains("providers[0].catalog: `nope` is not in the catalog"));
    assert!(
        err(r#"{"providers": [{"id": "x", "catalog": "claude-cli"}]}"#)
            .contains("subscription CLI")
    );
}

#[test]
fn cli_providers_take_an_executable_not_a_url_or_keys() {
    let ok = r#"{"providers":[{"id":"claude","kind":"claude-cli","models":["sonnet"],"env":{"CLAUDE_CONFIG_DIR":"/home/u/.claude-work"}}]}"#;
    let c = parse_str(ok, Path::new("c.json")).expect("valid");
    assert_eq!(c.providers[0].concurrency(), Some(1), "one call at a time");
    let cli = |extra: &str| {
        format!(r#"{{"providers":[{{"id":"c","kind":"codex-cli","models":["gpt-5"]{extra}}}]}}"#)
    };
    assert!(err(&cli(r#","baseUrl":"https://x""#))
        .contains("providers[0].baseUrl: a codex-cli provider runs the CLI and has no base URL"));
    assert!(err(&cli(r#","keys":[{"env":"OPENAI_API_KEY"}]"#))
        .contains("providers[0].keys: a codex-cli provider uses the CLI's own login"));
    assert!(err(&cli(r#","executable":"bin/codex""#)).contains("is a relative path"));
    assert!(err(&cli(r#","executable":"codex --yolo""#)).contains("arguments are not allowed"));
    assert!(err(&cli(r#","env":{"BAD-NAME":"x"}"#)).contains("providers[0].env.BAD-NAME"));
    // And the HTTP kinds refuse the CLI fields.
    assert!(err(r#"{"providers":[{"id":"a","kind":"openai-compatible","baseUrl":"https://x","models":["m"],"executable":"claude"}]}"#)
        .contains("providers[0].executable: only these kinds take `executable`: claude-cli, codex-cli, gemini-cli"));
    assert!(
        err(r#"{"providers":[{"id":"a","kind":"openai-compatible","models":["m"]}]}"#)
            .contains("providers[0].baseUrl: kind `openai-compatible` needs `baseUrl`")
    );
}
