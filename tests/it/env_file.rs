//! `~/.config/baton/env`: the real `baton serve` started without the key in its environment (as
//! a login start or a service is) reads it from the file; a variable already set wins; a
//! readable-by-others file is warned about; no value is ever printed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::json;
use testkit::FakeUpstream;

fn start(
    config: &std::path::Path,
    xdg: &std::path::Path,
    home: &std::path::Path,
    extra: &[(&str, &str)],
) -> (std::process::Child, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(["serve", "--port", "0", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(home.join("data"))
        .env_clear()
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", xdg)
        .env("PATH", "/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    (child, url)
}

async fn ask(url: &str, home: &std::path::Path) -> u16 {
    let key = std::fs::read_to_string(home.join("data/gateway.key")).unwrap();
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .bearer_auth(key.trim())
        .json(&json!({"model": "auto", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn stop(child: std::process::Child) -> String {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn a_start_without_the_shells_exports_reads_keys_from_the_env_file() {
    let up = FakeUpstream::start("up").await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let xdg = dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("baton")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let file = xdg.join("baton/env");
    std::fs::write(
        &file,
        "# for Baton\nexport BT_ENVFILE_KEY=\"sk-from-the-env-file-123\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(
        &config,
        json!({"providers": [{"id": "up", "kind": "openai-compatible", "baseUrl": up.base_url(),
                              "models": ["m"], "keys": [{"env": "BT_ENVFILE_KEY"}]}]})
        .to_string(),
    )
    .unwrap();

    let (child, url) = start(&config, &xdg, &home, &[]);
    assert_eq!(ask(&url, &home).await, 200);
    let stderr = stop(child);
    let auth = up.received().last().unwrap().headers["authorization"].clone();
    assert_eq!(auth, "Bearer sk-from-the-env-file-123");
    assert!(
        stderr.contains("keys read from the env file") && stderr.contains("BT_ENVFILE_KEY"),
        "{stderr}"
    );
    assert!(
        stderr.contains("other users can read it: chmod 600"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("sk-from-the-env-file"),
        "no value is printed: {stderr}"
    );

    // A variable set in the environment wins over the file.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (child, url) = start(
        &config,
        &xdg,
        &home,
        &[("BT_ENVFILE_KEY", "sk-from-the-shell-456")],
    );
    assert_eq!(ask(&url, &home).await, 200);
    let stderr = stop(child);
    let auth = up.received().last().unwrap().headers["authorization"].clone();
    assert_eq!(auth, "Bearer sk-from-the-shell-456");
    assert!(!stderr.contains("chmod 600"), "{stderr}");
}
