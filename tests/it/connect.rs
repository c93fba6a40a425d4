//! `baton connect` and the Connect screen's API: the client's own file written with the rest
//! kept, the values it holds reach Baton, the key never shows, and undo gives back the same
//! bytes. (The real Claude Code and Codex reading those files: `real_clis_connect`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::{run_baton, Admin, Baton};

const SETTINGS: &str =
    "{\n  \"includeCoAuthoredBy\": false,\n  \"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}\n";

async fn gateway(dir: &Path) -> (Baton, testkit::FakeUpstream) {
    let up = testkit::FakeUpstream::start("up").await;
    let b = Baton::start(
        dir,
        json!({"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": up.base_url(),
            "models": ["up-model"]}], "modelMap": {"claude-*": "up"}}),
    )
    .await;
    (b, up)
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// `baton connect CLIENT --url … --data-dir … EXTRA…` for the Baton `b` (data in `data`), as
/// the user whose home is `home`: exit code, stdout, stderr.
pub(crate) async fn connect_cli(
    b: &Baton,
    data: &Path,
    home: &Path,
    client: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let home: &'static str = Box::leak(home.display().to_string().into_boxed_str());
    let data = data.display().to_string();
    let mut a = args(&["connect", client, "--url", &b.url, "--data-dir", &data]);
    a.extend(args(extra));
    run_baton(a, vec![("HOME", home)]).await
}

#[tokio::test]
async fn the_cli_writes_claude_codes_settings_that_reach_baton_and_undo_restores_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, SETTINGS).unwrap();
    let cc = |extra: &'static [&'static str]| {
        connect_cli(&b, dir.path(), home.path(), "claude-code", extra)
    };

    // Without a terminal and without --yes nothing is written, and the diff shows no key.
    let (code, out, err) = cc(&[]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(out.contains("+    \"ANTHROPIC_BASE_URL\""), "{out}");
    assert!(
        !out.contains(&b.key),
        "the key is masked in the preview: {out}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), SETTINGS);

    let (code, out, err) = cc(&["--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    // The undo it prints carries the data directory whose journal it reads.
    let undo_line = format!(
        "baton connect claude-code --undo --data-dir {}",
        dir.path().display()
    );
    assert!(out.contains(&undo_line), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(v["includeCoAuthoredBy"], false);
    assert_eq!(v["permissions"]["allow"][0], "Bash(ls:*)");

    // What Claude Code will send with these settings is served.
    let env = &v["env"];
    let r = b
        .http
        .post(format!(
            "{}/v1/messages",
            env["ANTHROPIC_BASE_URL"].as_str().unwrap()
        ))
        .bearer_auth(env["ANTHROPIC_AUTH_TOKEN"].as_str().unwrap())
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 50,
            "messages": [{"role": "user", "content": "say hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    // Again: nothing to do.
    let (code, out, _) = cc(&["--yes"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("already points at Baton"), "{out}");

    // The printed command itself undoes it (with --yes, as there is no terminal here).
    let mut undo: Vec<String> = undo_line
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect();
    undo.push("--yes".into());
    let home_s: &'static str = Box::leak(home.path().display().to_string().into_boxed_str());
    let (code, out, err) = run_baton(undo, vec![("HOME", home_s)]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        std::fs::read_to_string(&settings).unwrap(),
        SETTINGS,
        "byte for byte"
    );
    let (code, _, err) = cc(&["--yes", "--undo"]).await;
    assert_eq!(code, 2);
    assert!(err.contains("nothing to undo"), "{err}");
    b.stop().await;
}

#[tokio::test]
async fn the_cli_says_when_the_clients_model_names_still_need_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let (code, out, err) = connect_cli(&b, dir.path(), home.path(), "codex", &["--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Next: Codex asks for its own model names"),
        "{out}"
    );
    let (code, out, err) =
        connect_cli(&b, dir.path(), home.path(), "claude-code", &["--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("Next:"), "claude-* is mapped here: {out}");
    b.stop().await;
}

#[tokio::test]
async fn the_cli_refuses_a_file_it_cannot_parse_and_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "model = \"gpt-5\"\n[model_providers\n").unwrap();
    let (code, out, err) = connect_cli(&b, dir.path(), home.path(), "codex", &["--yes"]).await;
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("config.toml") && err.contains("not valid TOML"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "model = \"gpt-5\"\n[model_providers\n"
    );
    b.stop().await;
}

fn point_at(b: &Baton, home: &Path) {
    b.handle
        .core
        .client_homes
        .store(Some(std::sync::Arc::new(baton::connect::Homes::under(
            home,
        ))));
}

#[tokio::test]
async fn the_api_previews_then_writes_only_what_was_shown() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    point_at(&b, home.path());
    let a = Admin(&b);
    let config = home.path().join(".codex/config.toml");

    let (s, list) = a.send(Method::GET, "/admin/connect", None).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["writable"], true);
    let codex = list["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "codex")
        .unwrap();
    assert_eq!(codex["files"][0], config.display().to_string());
    assert_eq!(codex["connected"], Value::Null);
    // Claude Code's names are mapped in this config, Codex's are not.
    assert_eq!(codex["namesServed"], false);
    let cc = list["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "claude-code")
        .unwrap();
    assert_eq!(cc["namesServed"], true);

    let (s, p) = a
        .send(
            Method::POST,
            "/admin/connect/codex",
            Some(json!({"dryRun": true})),
        )
        .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["files"][0]["action"], "create");
    let diff = p["files"][0]["diff"].as_str().unwrap();
    assert!(diff.contains("+[model_providers.baton]"), "{diff}");
    assert!(
        !p.to_string().contains(&b.key),
        "the key never leaves in a response"
    );
    assert!(!config.exists(), "a preview writes nothing");

    let (s, e) = a
        .send(Method::POST, "/admin/connect/codex", Some(json!({})))
        .await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (428, Some("confirmation_required")),
        "{e}"
    );
    let (s, e) = a
        .send(
            Method::POST,
            "/admin/connect/codex",
            Some(json!({"fingerprint": "0"})),
        )
        .await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (409, Some("changed_since_preview")),
        "{e}"
    );
    assert!(!config.exists());

    let (s, w) = a
        .send(
            Method::POST,
            "/admin/connect/codex",
            Some(json!({"fingerprint": p["fingerprint"]})),
        )
        .await;
    assert_eq!((s, &w["written"]), (200, &json!(true)), "{w}");
    let doc: toml_edit::DocumentMut = std::fs::read_to_string(&config).unwrap().parse().unwrap();
    assert_eq!(
        doc["model_providers"]["baton"]["base_url"].as_str(),
        Some(format!("{}/v1", b.url).as_str())
    );
    assert_eq!(
        doc["model_providers"]["baton"]["experimental_bearer_token"].as_str(),
        Some(b.key.as_str())
    );
    let (_, list) = a.send(Method::GET, "/admin/connect", None).await;
    let codex = list["clients"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "codex")
        .unwrap();
    assert_eq!(codex["connected"]["mode"], "keys");

    // Undo, the same two steps; the file Baton created is gone.
    let (s, p) = a
        .send(
            Method::POST,
            "/admin/connect/codex/undo",
            Some(json!({"dryRun": true})),
        )
        .await;
    assert_eq!(
        (s, &p["files"][0]["action"]),
        (200, &json!("remove")),
        "{p}"
    );
    let (s, _) = a
        .send(
            Method::POST,
            "/admin/connect/codex/undo",
            Some(json!({"fingerprint": p["fingerprint"]})),
        )
        .await;
    assert_eq!(s, 200);
    assert!(!config.exists());
    let (s, e) = a
        .send(
            Method::POST,
            "/admin/connect/codex/undo",
            Some(json!({"dryRun": true})),
        )
        .await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (409, Some("not_connected")),
        "{e}"
    );
    b.stop().await;
}

#[tokio::test]
async fn the_api_says_what_is_wrong_with_each_bad_request() {
    let dir = tempfile::tempdir().unwrap();
    let (b, _up) = gateway(dir.path()).await;
    let home = tempfile::tempdir().unwrap();
    point_at(&b, home.path());
    let a = Admin(&b);
    let settings = home.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{\"env\": ").unwrap();
    let cases = [
        (
            "/admin/connect/cursor",
            json!({"dryRun": true}),
            404,
            "unknown_client",
            "claude-code",
        ),
        (
            "/admin/connect/gemini-cli",
            json!({"mode": "login", "dryRun": true}),
            422,
            "invalid_field",
            "no login of its own",
        ),
        (
            "/admin/connect/claude-code",
            json!({"dryRun": true}),
            422,
            "unreadable_file",
            "settings.json",
        ),
        (
            "/admin/connect/codex",
            json!({"mode": "sideways", "dryRun": true}),
            422,
            "",
            "\"keys\" or \"login\"",
        ),
        (
            "/admin/connect/opencode",
            json!({"mode": "login", "dryRun": true}),
            422,
            "",
            "no login of its own",
        ),
        (
            "/admin/connect/codex",
            json!({"statusline": true, "dryRun": true}),
            422,
            "",
            "Claude Code's",
        ),
        (
            "/admin/connect/codex",
            json!({"dryrun": true}),
            400,
            "",
            "fingerprint",
        ),
    ];
    for (path, body, status, code, words) in cases {
        let (s, e) = a.send(Method::POST, path, Some(body.clone())).await;
        assert_eq!(s, status, "{path} {body}: {e}");
        if !code.is_empty() {
            assert_eq!(e["error"]["code"], code, "{e}");
        }
        assert!(
            e["error"]["message"].as_str().unwrap().contains(words),
            "{path} {body}: {e}"
        );
    }
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{\"env\": ");
    // Without the admin key: nothing.
    let r = b
        .http
        .get(format!("{}/admin/connect", b.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    b.stop().await;
}

/// Writes come only from the machine Baton runs on: a peer on another address may preview but
/// not write. (Needs an address other than loopback on this machine, as CI machines have.)
#[tokio::test]
async fn a_write_from_another_machine_is_refused() {
    let Some(ip) = local_non_loopback_ip() else {
        panic!("this machine has no address other than loopback to test from");
    };
    let dir = tempfile::tempdir().unwrap();
    let up = testkit::FakeUpstream::start("up").await;
    // Listening beyond loopback needs a configured gateway key (the helper reads gateway.key).
    std::env::set_var(
        "BATON_TEST_CONNECT_TEAM_KEY",
        "bt-team-key-for-the-connect-test",
    );
    std::fs::write(
        dir.path().join("gateway.key"),
        "bt-team-key-for-the-connect-test",
    )
    .unwrap();
    let config = json!({"server": {"host": "0.0.0.0", "allowedHosts": [ip.to_string()]},
        "gatewayKeys": [{"env": "BATON_TEST_CONNECT_TEAM_KEY"}],
        "providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": up.base_url(),
        "models": ["up-model"]}]});
    let config = baton::config::parse_str(&config.to_string(), Path::new("t.json")).unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let options = baton::StartOptions {
        config,
        data_dir: dir.path().to_path_buf(),
        clock: None,
    };
    let handle = baton::start(options, listener).await.unwrap();
    let admin_key = std::fs::read_to_string(dir.path().join("admin.key")).unwrap();
    let home = tempfile::tempdir().unwrap();
    handle
        .core
        .client_homes
        .store(Some(std::sync::Arc::new(baton::connect::Homes::under(
            home.path(),
        ))));
    let http = reqwest::Client::new();
    let port = handle.addr.port();
    let url = format!("http://{ip}:{port}/admin/connect/codex");
    let send = |body: Value| {
        http.post(&url)
            .header("x-admin-key", admin_key.trim())
            .json(&body)
            .send()
    };
    let p: Value = send(json!({"dryRun": true}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let r = send(json!({"fingerprint": p["fingerprint"]}))
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "not_this_machine");
    assert!(!home.path().join(".codex").exists());
    handle.shutdown().await;
}

/// The address this machine would use toward the outside (no packet is sent).
fn local_non_loopback_ip() -> Option<std::net::IpAddr> {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    s.connect("192.0.2.1:9").ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}
