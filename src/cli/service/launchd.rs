//! macOS: a launchd agent (`~/Library/LaunchAgents/dev.baton.gateway.plist`) loaded with
//! `launchctl`, started at login and restarted when it exits with a failure. Written from
//! launchd.plist(5); not run on this project's (Linux) machines.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::spec::{Manager, Spec};

pub const LABEL: &str = "dev.baton.gateway";

pub struct Launchd;

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn launchctl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("launchctl")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run launchctl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(format!(
            "`launchctl {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn log_path(spec_data: &Path) -> PathBuf {
    spec_data.join("service.log")
}

impl Manager for Launchd {
    fn name(&self) -> &'static str {
        "launchd agent"
    }

    fn path(&self) -> Result<PathBuf, String> {
        let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
        Ok(PathBuf::from(home)
            .join("Library/LaunchAgents")
            .join(format!("{LABEL}.plist")))
    }

    fn render(&self, spec: &Spec) -> String {
        let args: String = std::iter::once(spec.exe.display().to_string())
            .chain(spec.args())
            .map(|a| format!("    <string>{}</string>\n", xml_escape(&a)))
            .collect();
        let log = xml_escape(&log_path(&spec.data_dir).display().to_string());
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by `baton service install`; remove with `baton service uninstall`. -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>{LABEL}</string>
  <key>ProgramArguments</key>
  <array>
{args}  </array>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ThrottleInterval</key>
  <integer>5</integer>
  <key>StandardErrorPath</key>
  <string>{log}</string>
  <key>StandardOutPath</key>
  <string>{log}</string>
</dict>
</plist>
"#
        )
    }

    fn enable(&self, path: &Path, no_start: bool) -> Result<(), String> {
        let p = path.display().to_string();
        // Unload first so a reinstall takes the new definition.
        let _ = launchctl(&["unload", &p]);
        if !no_start {
            launchctl(&["load", "-w", &p])?;
        }
        Ok(())
    }

    fn disable(&self, path: &Path) -> Result<(), String> {
        launchctl(&["unload", "-w", &path.display().to_string()]).map(|_| ())
    }

    fn state(&self, _path: &Path) -> Result<(bool, bool), String> {
        // `launchctl list LABEL` prints a dict with "PID" while it runs.
        match launchctl(&["list", LABEL]) {
            Ok(out) => Ok((true, out.contains("\"PID\""))),
            Err(_) => Ok((false, false)),
        }
    }

    fn takes_env_file(&self) -> bool {
        false
    }

    fn logs_hint(&self) -> String {
        "service.log in Baton's data directory".into()
    }

    fn command_line(&self, text: &str) -> Option<String> {
        let array = text.split("<array>").nth(1)?.split("</array>").next()?;
        let words: Vec<&str> = array
            .split("<string>")
            .skip(1)
            .filter_map(|s| s.split("</string>").next())
            .collect();
        Some(words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_runs_at_load_and_is_kept_alive_only_after_a_failure() {
        let spec = Spec {
            exe: "/Applications/Baton.app/Contents/MacOS/baton".into(),
            config: Some("/Users/me/R&D/config.json".into()),
            data_dir: "/Users/me/Library/Application Support/baton".into(),
            host: None,
            port: None,
            env_file: None,
        };
        let plist = Launchd.render(&spec);
        assert!(
            plist.contains("<string>/Users/me/R&amp;D/config.json</string>"),
            "{plist}"
        );
        assert!(plist.contains("<key>SuccessfulExit</key>\n    <false/>"));
        assert!(plist.contains("<key>RunAtLoad</key>\n  <true/>"));
        assert_eq!(
            Launchd.command_line(&plist).as_deref(),
            Some("/Applications/Baton.app/Contents/MacOS/baton serve --config /Users/me/R&amp;D/config.json --data-dir /Users/me/Library/Application Support/baton")
        );
    }
}
