//! `baton keys` with a controlled environment: keys found by variable, CLIs found on PATH, sign-up
//! pages and free tiers for the rest, no secret printed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::Value;

#[test]
fn keys_reports_found_missing_and_installed() {
    let bin = tempfile::tempdir().unwrap();
    // Fake CLIs printing what the real ones print for `claude auth status` (logged out) and
    // `codex login status` (logged in).
    let claude = bin.path().join("claude");
    std::fs::write(&claude, "#!/bin/sh\nprintf '{\\n  \"loggedIn\": false,\\n  \"authMethod\": \"none\"\\n}\\n'\nexit 1\n").unwrap();
    let codex = bin.path().join("codex");
    std::fs::write(&codex, "#!/bin/sh\necho 'Logged in using ChatGPT'\n").unwrap();
    let gemini = bin.path().join("gemini");
    std::fs::write(&gemini, "#!/bin/sh\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in [&claude, &codex, &gemini] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    std::fs::write(home.path().join(".gemini/oauth_creds.json"), "{}").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["keys", "--json"])
        .env_clear()
        .env("PATH", format!("{}:/bin:/usr/bin", bin.path().display()))
        .env("HOME", home.path())
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
    assert_eq!(row("claude-cli")["status"], "cli-logged-out");
    assert_eq!(row("claude-cli")["found"], claude.display().to_string());
    assert!(row("claude-cli")["hint"]
        .as_str()
        .unwrap()
        .contains("/login"));
    assert_eq!(row("codex-cli")["status"], "cli-logged-in");
    assert_eq!(
        row("gemini-cli")["status"],
        "cli-logged-in",
        "stored OAuth credentials"
    );
    assert_eq!(row("ollama")["status"], "no-key-needed");
}
