//! `baton service install|status|uninstall` on Linux: the unit it writes passes
//! `systemd-analyze verify` without a warning, its `ExecStart` line (unquoted by systemd's rules)
//! starts a gateway that answers and stops cleanly on SIGTERM, and `systemctl --user` is driven
//! as systemd expects. This machine has no systemd user manager (no `systemd --user` without
//! systemd as PID 1), so `systemctl` is a fake on PATH that keeps state and refuses what the real
//! one refuses (an unknown verb, a unit file that does not exist).
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
# systemctl --user VERB [--now] UNIT, as the real one answers them.
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
[ "$1" = "--user" ] || { echo "only --user here" >&2; exit 1; }
shift
state="$FAKE_SYSTEMCTL_STATE"
unit_dir="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
case "$1" in
  daemon-reload) exit 0 ;;
  enable)
    [ -f "$unit_dir/$2" ] || { echo "Failed to enable unit: Unit file $2 does not exist." >&2; exit 1; }
    touch "$state.enabled"; exit 0 ;;
  restart|start) touch "$state.active"; exit 0 ;;
  disable)
    [ "$2" = "--now" ] && rm -f "$state.active"
    rm -f "$state.enabled"; exit 0 ;;
  is-enabled)
    if [ -f "$state.enabled" ]; then echo enabled; exit 0; else echo disabled; exit 1; fi ;;
  is-active)
    if [ -f "$state.active" ]; then echo active; exit 0; else echo inactive; exit 3; fi ;;
  *) echo "Unknown command verb '$1'." >&2; exit 1 ;;
esac
"#;

struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bin: PathBuf,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        // A space and a `%` in every path: both must survive systemd's quoting.
        let root = dir.path().join("my home %h");
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let fake = bin.join("systemctl");
        std::fs::write(&fake, FAKE_SYSTEMCTL).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        Home {
            _dir: dir,
            root,
            bin,
        }
    }

    fn unit(&self) -> PathBuf {
        self.root.join(".config/systemd/user/baton.service")
    }

    fn baton(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("HOME", &self.root)
            .env("FAKE_SYSTEMCTL_LOG", self.root.join("systemctl.log"))
            .env("FAKE_SYSTEMCTL_STATE", self.root.join("state"))
            .output()
            .unwrap()
    }

    fn systemctl_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("systemctl.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Splits an `ExecStart=` value the way systemd does (systemd.service(5), "Command lines"):
/// words separated by spaces, double quotes with C escapes, then `%%` and `$$` undone.
fn exec_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
            continue;
        }
        let mut w = String::new();
        if c == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => w.push('\n'),
                        Some('t') => w.push('\t'),
                        Some(o) => w.push(o),
                        None => panic!("a dangling backslash in {line}"),
                    },
                    c => w.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                assert!(
                    c != '"' && c != '\\',
                    "an unquoted quote or backslash in {line}"
                );
                w.push(c);
                chars.next();
            }
        }
        words.push(w.replace("%%", "%").replace("$$", "$"));
    }
    words
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_config(home: &Home, key_env: &str) -> PathBuf {
    let config = home.root.join("my config.json");
    std::fs::write(
        &config,
        serde_json::to_string(&json!({
            "server": {"port": 0},
            "providers": [{"id": "groq", "kind": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1",
                           "models": ["llama"], "keys": [{"env": key_env}]}],
        }))
        .unwrap(),
    )
    .unwrap();
    config
}

#[test]
fn install_writes_a_unit_systemd_accepts_whose_command_serves_and_stops_cleanly() {
    let home = Home::new();
    let config = write_config(&home, "BT_SERVICE_GROQ_KEY");
    let data = home.root.join("data dir");
    let port = free_port();
    let out = home.baton(&[
        "service",
        "install",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
        "--port",
        &port.to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The key comes from the shell, which a service does not have: said, by name only.
    assert!(
        text(&out.stderr).contains("these keys will be missing: BT_SERVICE_GROQ_KEY"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("journalctl --user -u baton"));
    assert_eq!(
        home.systemctl_calls(),
        [
            "--user daemon-reload",
            "--user enable baton.service",
            "--user restart baton.service"
        ]
    );
    let unit = std::fs::read_to_string(home.unit()).unwrap();

    // systemd's own check, as the user manager would load it: no warning at all.
    let runtime = home.root.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let verify = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(home.unit())
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("HOME", &home.root)
        .output()
        .expect("systemd-analyze (package systemd) is needed to check the unit");
    assert!(
        verify.status.success() && text(&verify.stderr).trim().is_empty(),
        "systemd-analyze verify: {}{}\n{unit}",
        text(&verify.stdout),
        text(&verify.stderr)
    );

    // The unit's command line, run as systemd would run it.
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    let words = exec_words(exec);
    assert_eq!(
        words[1..],
        [
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--data-dir",
            data.to_str().unwrap(),
            "--port",
            &port.to_string()
        ]
    );
    assert!(Path::new(&words[0]).is_absolute());
    let working_dir = unit
        .lines()
        .find_map(|l| l.strip_prefix("WorkingDirectory="))
        .unwrap()
        .replace("%%", "%");
    assert_eq!(Path::new(&working_dir), data);
    let mut child = Command::new(&words[0])
        .args(&words[1..])
        .env_clear()
        .env("HOME", &home.root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains(&format!("listening on http://127.0.0.1:{port}")),
        "{line}"
    );
    let health = ureq_get(port, "/health");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    // systemd stops it with SIGTERM (KillSignal): a clean exit, not a failure to restart on.
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    assert!(status.success(), "SIGTERM ends it cleanly: {status}");
    assert!(data.join("baton.db").exists());

    // status reads the unit and asks systemctl.
    let out = home.baton(&["service", "status", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["installed"], true);
    assert_eq!(v["enabled"], true);
    assert_eq!(v["active"], true);
    assert_eq!(v["command"], exec);

    // uninstall stops and disables it, removes the unit, keeps the data.
    let out = home.baton(&["service", "uninstall"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!home.unit().exists());
    assert!(data.join("baton.db").exists(), "the data directory is kept");
    assert!(home
        .systemctl_calls()
        .contains(&"--user disable --now baton.service".to_string()));
    let out = home.baton(&["service", "status"]);
    assert_eq!(out.status.code(), Some(4), "not installed");
    assert!(text(&out.stdout).contains("not installed"));
}

/// A raw HTTP GET (the test needs nothing more than the status line).
fn ureq_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn an_env_file_gives_the_keys_and_a_bad_config_writes_nothing() {
    let home = Home::new();
    let config = write_config(&home, "BT_SERVICE_KEY_IN_FILE");
    let env_file = home.root.join("baton.env");
    std::fs::write(
        &env_file,
        "# keys for the service\nBT_SERVICE_KEY_IN_FILE=gsk-not-printed\n",
    )
    .unwrap();
    let out = home.baton(&[
        "service",
        "install",
        "--no-start",
        "--config",
        config.to_str().unwrap(),
        "--env-file",
        env_file.to_str().unwrap(),
        "--data-dir",
        home.root.join("data").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(!all.contains("will be missing"), "{all}");
    assert!(all.contains("other users can read it: chmod 600"), "{all}");
    assert!(!all.contains("gsk-not-printed"));
    let unit = std::fs::read_to_string(home.unit()).unwrap();
    assert!(unit.contains("EnvironmentFile="), "{unit}");
    assert!(
        !unit.contains("gsk-not-printed"),
        "the unit names the file, never a key"
    );
    // --no-start registers without starting.
    assert!(!home
        .systemctl_calls()
        .iter()
        .any(|c| c.contains("restart") || c.contains("start ")));

    // A broken configuration: refused with the reason, the installed unit left as it was.
    let bad = home.root.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"providers": [{"id": "x", "kind": "no-such-kind"}]}"#,
    )
    .unwrap();
    let out = home.baton(&["service", "install", "--config", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("the service would not start"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(home.unit()).unwrap(), unit);
    let out = home.baton(&["service", "install", "--config", "/nonexistent/baton.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no such file"));

    // --dry-run prints and writes nothing.
    let other = Home::new();
    let out = other.baton(&["service", "install", "--dry-run", "--data-dir", "/tmp/x"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("ExecStart="));
    assert!(!other.unit().exists());
    assert!(other.systemctl_calls().is_empty());
}

#[test]
fn without_a_user_manager_the_unit_is_written_and_the_error_says_what_to_do() {
    let home = Home::new();
    // A systemctl that cannot reach the user manager, worded as the real one on this machine.
    std::fs::write(
        home.bin.join("systemctl"),
        "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n",
    )
    .unwrap();
    let out = home.baton(&[
        "service",
        "install",
        "--data-dir",
        home.root.join("d").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("Failed to connect to bus"), "{err}");
    assert!(
        err.contains("loginctl enable-linger"),
        "it says how to get a user manager: {err}"
    );
    assert!(err.contains("baton service uninstall"), "{err}");
    assert!(home.unit().exists());
    let out = home.baton(&["service", "status", "--json"]);
    assert_eq!(out.status.code(), Some(3), "installed, state unknown");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["installed"], true);
    assert!(
        v["note"].as_str().unwrap().contains("Failed to connect"),
        "{v}"
    );
    let out = home.baton(&["service", "uninstall"]);
    assert!(out.status.success());
    assert!(!home.unit().exists());
}
