//! The admin key must not run code: a CLI provider runs only the CLI it names (`claude`,
//! `codex`, `gemini`), with only the environment variables that CLI documents for its own
//! configuration and keys — whether it is saved, tested, or only checked by the Add form.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::json;

/// A program that, if Baton ever ran it, leaves a mark.
fn trap(dir: &std::path::Path, name: &str) -> (String, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let mark = dir.join(format!("{name}.ran"));
    let exe = dir.join(name);
    std::fs::write(&exe, format!("#!/bin/sh\ntouch {}\n", mark.display())).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    (exe.display().to_string(), mark)
}

#[tokio::test]
async fn only_the_cli_runs_with_only_its_own_variables() {
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": []})).await;
    let admin = Admin(&baton);
    let (git, git_ran) = trap(dir.path(), "git");
    let bodies = [
        (
            json!({"id": "x", "kind": "claude-cli", "executable": git, "models": ["sonnet"]}),
            "executable",
        ),
        (
            json!({"id": "x", "kind": "codex-cli", "executable": "node", "models": ["gpt-5"]}),
            "executable",
        ),
        (
            json!({"id": "x", "kind": "claude-cli", "models": ["sonnet"],
            "env": {"NODE_OPTIONS": "--import=data:text/javascript,process.exit(7)"}}),
            "env.NODE_OPTIONS",
        ),
        (
            json!({"id": "x", "kind": "codex-cli", "models": ["gpt-5"],
            "env": {"GIT_CONFIG_COUNT": "1"}}),
            "env.GIT_CONFIG_COUNT",
        ),
        (
            json!({"id": "x", "kind": "claude-cli", "models": ["sonnet"],
            "env": {"ANTHROPIC_BASE_URL": "http://attacker.invalid"}}),
            "env.ANTHROPIC_BASE_URL",
        ),
        (
            json!({"id": "x", "kind": "gemini-cli", "models": ["gemini-2.5-pro"],
            "env": {"LD_PRELOAD": "/tmp/x.so"}}),
            "env.LD_PRELOAD",
        ),
    ];
    for (body, param) in bodies {
        for path in ["/admin/providers", "/admin/test"] {
            let (st, v) = admin.send(Method::POST, path, Some(body.clone())).await;
            assert_eq!(st, 422, "{path} {body}: {v}");
            assert_eq!(v["error"]["param"], param, "{v}");
        }
    }
    // The Add form's check runs nothing either.
    let (st, v) = admin
        .send(
            Method::POST,
            "/admin/cli-check",
            Some(json!({"kind": "claude-cli", "executable": git})),
        )
        .await;
    assert_eq!(st, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("runs `claude`"),
        "{v}"
    );
    assert!(!git_ran.exists(), "nothing was run");
    // The CLI's own variables are accepted.
    let (st, v) = admin
        .send(
            Method::POST,
            "/admin/providers",
            Some(json!({"id": "cc", "kind": "claude-cli",
            "executable": dir.path().join("bin/claude").display().to_string(), "models": ["sonnet"],
            "env": {"CLAUDE_CONFIG_DIR": dir.path().display().to_string()}})),
        )
        .await;
    assert!(st == 200 || st == 201, "{st} {v}");
    baton.stop().await;
}

/// Testing or checking a CLI provider that is not saved runs nothing until the user agreed:
/// the test answers 428 naming what would run, the form's check only looks for the program.
#[tokio::test]
async fn nothing_runs_for_an_unsaved_cli_until_the_user_agrees() {
    let clis = crate::cli::FakeClis::new();
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(dir.path(), json!({"providers": []})).await;
    let admin = Admin(&baton);
    let claude = clis.exe("claude");
    let body =
        json!({"id": "cc", "kind": "claude-cli", "executable": claude, "models": ["sonnet"]});

    let (st, v) = admin
        .send(Method::POST, "/admin/test", Some(body.clone()))
        .await;
    assert_eq!(st, 428, "{v}");
    assert_eq!(v["error"]["code"], "confirmation_required", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("`{claude} --version`")), "{v}");
    assert!(msg.contains("confirmRun"), "{v}");
    let mut wrong = body.clone();
    wrong["confirmRun"] = json!("yes");
    let (st, v) = admin.send(Method::POST, "/admin/test", Some(wrong)).await;
    assert_eq!(
        (st, v["error"]["param"].as_str()),
        (422, Some("confirmRun")),
        "{v}"
    );
    // The form's check finds the program without running it (only running tells a version).
    let check = json!({"kind": "claude-cli", "executable": claude});
    let (st, v) = admin
        .send(Method::POST, "/admin/cli-check", Some(check.clone()))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (&v["ran"], &v["executable"]),
        (&json!(false), &json!(claude)),
        "{v}"
    );
    assert!(v.get("version").is_none(), "{v}");
    assert!(clis.calls("claude").is_empty(), "no prompt ran");

    // Agreed: it runs.
    let mut run = check;
    run["run"] = json!(true);
    let (st, v) = admin
        .send(Method::POST, "/admin/cli-check", Some(run))
        .await;
    assert_eq!((st, &v["ran"]), (200, &json!(true)), "{v}");
    assert!(v["version"].is_string(), "{v}");
    let mut agreed = body.clone();
    agreed["confirmRun"] = json!(true);
    let (st, v) = admin.send(Method::POST, "/admin/test", Some(agreed)).await;
    assert_eq!((st, &v["ok"]), (200, &json!(true)), "{v}");
    assert_eq!(clis.calls("claude").len(), 1, "the test's one prompt");
    baton.stop().await;
}

#[test]
fn a_config_file_is_held_to_the_same_rules() {
    let p = |extra: serde_json::Value| {
        let mut v = json!({"id": "x", "kind": "gemini-cli", "models": ["gemini-2.5-pro"]});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value::<baton::config::ProviderConfig>(v).unwrap()
    };
    let check = |c: &baton::config::ProviderConfig| {
        baton::config::validate::validate_provider(
            c,
            "providers[0]",
            std::path::Path::new("c.json"),
        )
    };
    assert!(check(&p(json!({"executable": "/opt/gemini/bin/gemini"}))).is_ok());
    assert!(check(&p(json!({"executable": "gemini"}))).is_ok());
    assert!(check(&p(
        json!({"env": {"GEMINI_API_KEY": {"env": "MY_GEMINI_KEY"}}})
    ))
    .is_ok());
    assert!(check(&p(json!({"env": {"GOOGLE_CLOUD_PROJECT": "my-project"}}))).is_ok());
    // A key's literal value is not configuration: it would be shown and exported.
    let e = check(&p(json!({"env": {"GEMINI_API_KEY": "k"}}))).unwrap_err();
    assert!(e.to_string().contains("{\"env\""), "{e}");
    let e = check(&p(json!({"executable": "/usr/bin/python3"}))).unwrap_err();
    assert!(e.to_string().contains("runs `gemini`"), "{e}");
    let e = check(&p(json!({"env": {"HTTPS_PROXY": "http://x"}}))).unwrap_err();
    assert!(e.to_string().contains("GEMINI_CLI_HOME"), "{e}");
}
