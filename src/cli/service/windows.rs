//! Windows: a Task Scheduler task ("Baton") started at logon and restarted on failure, created
//! from a task XML with `schtasks /Create /XML`. Written from the Task Scheduler schema; not run
//! on this project's (Linux) machines.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::spec::{Manager, Spec};

pub const TASK: &str = "Baton";

pub struct TaskScheduler;

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One argument quoted for a Windows command line (CommandLineToArgvW's rules).
pub fn win_quote(arg: &str) -> String {
    if !arg.is_empty() && !arg.chars().any(|c| c == ' ' || c == '\t' || c == '"') {
        return arg.to_string();
    }
    let mut out = String::from("\"");
    let mut backslashes = 0;
    for c in arg.chars() {
        match c {
            '\\' => backslashes += 1,
            '"' => {
                out.push_str(&"\\".repeat(backslashes * 2 + 1));
                out.push('"');
                backslashes = 0;
            }
            c => {
                out.push_str(&"\\".repeat(backslashes));
                out.push(c);
                backslashes = 0;
            }
        }
    }
    out.push_str(&"\\".repeat(backslashes * 2));
    out.push('"');
    out
}

fn schtasks(args: &[&str]) -> Result<String, String> {
    let out = Command::new("schtasks")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run schtasks: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(format!(
            "`schtasks {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Manager for TaskScheduler {
    fn name(&self) -> &'static str {
        "Task Scheduler task"
    }

    fn path(&self) -> Result<PathBuf, String> {
        // The task's XML is kept beside Baton's data, the one schtasks imported.
        Ok(baton::default_data_dir().join("baton-task.xml"))
    }

    fn render(&self, spec: &Spec) -> String {
        let args: Vec<String> = spec.args().iter().map(|a| win_quote(a)).collect();
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by `baton service install`; remove with `baton service uninstall`. -->
<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">
  <RegistrationInfo><Description>Baton LLM gateway</Description></RegistrationInfo>
  <Triggers><LogonTrigger><Enabled>true</Enabled></LogonTrigger></Triggers>
  <Principals><Principal id="Author"><LogonType>InteractiveToken</LogonType><RunLevel>LeastPrivilege</RunLevel></Principal></Principals>
  <Settings>
    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>
    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>
    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>
    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>
    <RestartOnFailure><Interval>PT1M</Interval><Count>999</Count></RestartOnFailure>
    <Hidden>true</Hidden>
  </Settings>
  <Actions Context="Author">
    <Exec>
      <Command>{cmd}</Command>
      <Arguments>{args}</Arguments>
    </Exec>
  </Actions>
</Task>
"#,
            cmd = xml_escape(&spec.exe.display().to_string()),
            args = xml_escape(&args.join(" ")),
        )
    }

    fn enable(&self, path: &Path, no_start: bool) -> Result<(), String> {
        let p = path.display().to_string();
        schtasks(&["/Create", "/F", "/TN", TASK, "/XML", &p])?;
        if !no_start {
            schtasks(&["/Run", "/TN", TASK])?;
        }
        Ok(())
    }

    fn disable(&self, _path: &Path) -> Result<(), String> {
        let _ = schtasks(&["/End", "/TN", TASK]);
        schtasks(&["/Delete", "/F", "/TN", TASK]).map(|_| ())
    }

    fn state(&self, _path: &Path) -> Result<(bool, bool), String> {
        match schtasks(&["/Query", "/TN", TASK, "/FO", "LIST"]) {
            Ok(out) => Ok((true, out.contains("Running"))),
            Err(_) => Ok((false, false)),
        }
    }

    fn takes_env_file(&self) -> bool {
        false
    }

    fn logs_hint(&self) -> String {
        "Event Viewer → Task Scheduler history for the task \"Baton\"".into()
    }

    fn command_line(&self, text: &str) -> Option<String> {
        let cmd = text.split("<Command>").nth(1)?.split("</Command>").next()?;
        let args = text
            .split("<Arguments>")
            .nth(1)?
            .split("</Arguments>")
            .next()?;
        Some(format!("{cmd} {args}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_by_the_windows_rules() {
        assert_eq!(win_quote(r"C:\baton\config.json"), r"C:\baton\config.json");
        assert_eq!(win_quote(r"C:\My Files\"), r#""C:\My Files\\""#);
        assert_eq!(win_quote(r#"a"b"#), r#""a\"b""#);
        assert_eq!(win_quote(""), r#""""#);
    }

    #[test]
    fn the_task_starts_at_logon_and_restarts_on_failure() {
        let spec = Spec {
            exe: r"C:\Program Files\Baton\baton.exe".into(),
            config: None,
            data_dir: r"C:\Users\me\AppData\Roaming\baton".into(),
            host: None,
            port: Some(8787),
            env_file: None,
        };
        let xml = TaskScheduler.render(&spec);
        assert!(xml.contains("<LogonTrigger>"));
        assert!(xml.contains("<RestartOnFailure>"));
        assert!(xml.contains(r"<Command>C:\Program Files\Baton\baton.exe</Command>"));
        assert!(xml.contains(r"<Arguments>serve --data-dir C:\Users\me\AppData\Roaming\baton --port 8787</Arguments>"), "{xml}");
    }
}
