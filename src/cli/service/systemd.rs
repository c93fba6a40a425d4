//! A systemd user unit (`~/.config/systemd/user/baton.service`), enabled and started with
//! `systemctl --user`. Its log is the journal (`journalctl --user -u baton`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::spec::{Manager, Spec};

pub const UNIT: &str = "baton.service";

pub struct Systemd;

/// One word of an `ExecStart=` line, quoted by systemd's rules: `%` is a specifier and `$` an
/// environment reference (both doubled), and a word with spaces, quotes or backslashes is
/// double-quoted with C-style escapes.
pub fn quote(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let plain = !escaped.is_empty()
        && !escaped
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';'));
    if plain {
        return escaped;
    }
    let mut out = String::from("\"");
    for c in escaped.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A path in a unit's `KEY=value` line (one value, not a command line): specifiers doubled.
fn value(path: &Path) -> String {
    path.display().to_string().replace('%', "%%")
}

fn systemctl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run systemctl: {e} (is this a systemd system?)"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() {
        Ok(stdout)
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let hint = if stderr.contains("Failed to connect to bus") {
            " (systemd's user manager cannot be reached from here: there is no login session of this user, as under su or sudo. Log in as this user (ssh or a desktop), or have root run `loginctl enable-linger USER`, then try again.)"
        } else {
            ""
        };
        Err(format!(
            "`systemctl --user {}` failed: {}{hint}",
            args.join(" "),
            if stderr.is_empty() { &stdout } else { &stderr }
        ))
    }
}

impl Manager for Systemd {
    fn name(&self) -> &'static str {
        "systemd user unit"
    }

    fn path(&self) -> Result<PathBuf, String> {
        let base = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            .ok_or("neither XDG_CONFIG_HOME nor HOME is set")?;
        Ok(base.join("systemd/user").join(UNIT))
    }

    fn render(&self, spec: &Spec) -> String {
        let exec: Vec<String> = std::iter::once(spec.exe.display().to_string())
            .chain(spec.args())
            .map(|w| quote(&w))
            .collect();
        let env_file = spec
            .env_file
            .as_deref()
            .map(|f| format!("EnvironmentFile={}\n", value(f)))
            .unwrap_or_default();
        format!(
            "# Written by `baton service install`; remove with `baton service uninstall`.
[Unit]
Description=Baton LLM gateway

[Service]
Type=exec
ExecStart={exec}
{env_file}WorkingDirectory={data}
# A failure restarts it; a configuration error (exit status 2) waits for a fix instead.
Restart=on-failure
RestartSec=3
RestartPreventExitStatus=2
# SIGTERM lets in-flight requests finish and the request log flush.
KillSignal=SIGTERM
TimeoutStopSec=45
NoNewPrivileges=true
# stderr (Baton's log) goes to the journal: journalctl --user -u baton
StandardOutput=journal
StandardError=journal
SyslogIdentifier=baton

[Install]
WantedBy=default.target
",
            exec = exec.join(" "),
            data = value(&spec.data_dir),
        )
    }

    fn enable(&self, _path: &Path, no_start: bool) -> Result<(), String> {
        systemctl(&["daemon-reload"])?;
        if no_start {
            systemctl(&["enable", UNIT])?;
        } else {
            // A reinstall with other options restarts into them.
            systemctl(&["enable", UNIT])?;
            systemctl(&["restart", UNIT])?;
        }
        Ok(())
    }

    fn disable(&self, _path: &Path) -> Result<(), String> {
        let r = systemctl(&["disable", "--now", UNIT]);
        let _ = systemctl(&["daemon-reload"]);
        r.map(|_| ())
    }

    fn state(&self, _path: &Path) -> Result<(bool, bool), String> {
        // `is-enabled`/`is-active` exit non-zero for "disabled"/"inactive": read their words.
        let word = |verb: &str| -> Result<String, String> {
            let out = Command::new("systemctl")
                .args(["--user", verb, UNIT])
                .output()
                .map_err(|e| format!("cannot run systemctl: {e}"))?;
            let w = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if w.is_empty() {
                Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
            } else {
                Ok(w)
            }
        };
        let enabled = word("is-enabled")?;
        let active = word("is-active")?;
        Ok((enabled == "enabled", active == "active"))
    }

    fn logs_hint(&self) -> String {
        "journalctl --user -u baton".into()
    }

    fn command_line(&self, text: &str) -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .map(str::to_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_plain_and_others_are_quoted_by_systemds_rules() {
        assert_eq!(quote("/usr/bin/baton"), "/usr/bin/baton");
        assert_eq!(quote("/home/a b/x"), "\"/home/a b/x\"");
        assert_eq!(quote("50%"), "50%%");
        assert_eq!(quote("$HOME"), "$$HOME");
        assert_eq!(quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn the_unit_restarts_on_failure_and_logs_to_the_journal() {
        let spec = Spec {
            exe: "/usr/bin/baton".into(),
            config: Some("/home/me/my config.json".into()),
            data_dir: "/home/me/.local/share/baton".into(),
            host: None,
            port: Some(9000),
            env_file: Some("/home/me/.config/baton/env".into()),
        };
        let unit = Systemd.render(&spec);
        assert!(unit.contains("ExecStart=/usr/bin/baton serve --config \"/home/me/my config.json\" --data-dir /home/me/.local/share/baton --port 9000\n"), "{unit}");
        assert!(unit.contains("Restart=on-failure\n"));
        assert!(unit.contains("RestartPreventExitStatus=2\n"));
        assert!(unit.contains("EnvironmentFile=/home/me/.config/baton/env\n"));
        assert!(unit.contains("StandardError=journal\n"));
        assert!(unit.contains("WantedBy=default.target\n"));
        assert_eq!(
            Systemd.command_line(&unit).as_deref(),
            Some("/usr/bin/baton serve --config \"/home/me/my config.json\" --data-dir /home/me/.local/share/baton --port 9000")
        );
    }
}
