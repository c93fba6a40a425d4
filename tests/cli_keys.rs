//! `baton keys` with a controlled environment: keys found by variable, CLIs found on PATH, sign-up
//! pages and free tiers for the rest, no secret printed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

#[test]
fn keys_reports_found_missing_and_installed() {
    let bin = tempfile::tempdir().unwrap();
    let claude = bin.path().join("claude");
    std::fs::write(&claude, "#!/bin/sh\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["keys", "--json"])
        .env_clear()
        .env("PATH", bin.path())
        .env("GROQ_API_KEY", "gsk-keys-secret-777")
        .env("OPENROUTER_API_KEY", "   ")
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        !stdout.contains("gsk-keys-secret"),
        "the key value is never printed"
    );
    let rows: Value = serde_json::from_str(&stdout).unwrap();
    let row = |id: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(row("groq")["status"], "key-found");
    assert_eq!(row("groq")["found"], "$GROQ_API_KEY");
    assert_eq!(
        row("openrouter")["status"],
        "missing",
        "a blank variable is no key"
    );
    assert_eq!(
        row("openrouter")["freeTier"],
        "20 req/min, 50 req/day (per provider)"
    );
    assert_eq!(
        row("openai")["signup"],
        "https://platform.openai.com/signup"
    );
    assert_eq!(row("claude-cli")["status"], "cli-installed");
    assert_eq!(row("claude-cli")["found"], claude.display().to_string());
    assert_eq!(row("codex-cli")["status"], "missing");
    assert_eq!(row("ollama")["status"], "no-key-needed");
}
