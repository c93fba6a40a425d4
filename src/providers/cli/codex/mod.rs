//! Codex (`codex exec`) as a provider, on its own ChatGPT login: the `codex-cli` kind. Called
//! with `--json`, read-only and ephemeral, the prompt on stdin; its login checked with
//! `codex login status`, and its usage windows read from its app server ([`super::limits`]).

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use super::decode::finished;
use super::program::{Lines, Program, Step};
use super::status::run_quietly;
use crate::config::kind::{CliSpec, KindSpec};
use crate::config::ProviderKind;
use crate::i18n::n_;
use crate::limits::windows::Window;

/// The `codex-cli` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "codex-cli",
    order: 100,
    doc: "The Codex CLI (`codex exec`), using its own ChatGPT login.",
    label: n_("Codex CLI"),
    badge: "CX",
    sample_model: Some("gpt-5-codex"),
    cli: Some(CliSpec {
        program: "codex",
        env_allowed: &["CODEX_HOME", "OPENAI_API_KEY", "CODEX_API_KEY"],
        env_passed: &["CODEX_HOME"],
        day_reset_zone: None,
        login_hint: crate::i18n::n_("run `codex login`"),
    }),
    ..KindSpec::BASE
};

/// The `codex-cli` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

/// Codex's program.
pub struct Codex;

super::program::register!(SPEC, &Codex);

impl Program for Codex {
    fn gen_ai_system(&self) -> &'static str {
        "openai"
    }

    fn args(&self, model: &str, system: Option<&str>) -> Vec<String> {
        let mut a: Vec<String> = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox=read-only",
            "--ephemeral",
        ]
        .map(String::from)
        .into();
        a.push(format!("--model={model}"));
        if let Some(s) = system {
            // The value is TOML; a JSON string literal is a valid TOML basic string.
            let lit = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
            a.push("--config".into());
            a.push(format!("developer_instructions={lit}"));
        }
        // `-` reads the prompt from stdin.
        a.push("-".into());
        a
    }

    fn lines(&self) -> Box<dyn Lines> {
        Box::new(Reader)
    }

    /// `codex login status` exits 0 and does not say "not logged in".
    fn logged_in(
        &self,
        path: &Path,
        env: &[(OsString, OsString)],
        _lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Option<bool> {
        let (ok, out) = run_quietly(path, &["login", "status"], env)?;
        Some(ok && !out.to_ascii_lowercase().contains("not logged in"))
    }

    fn windows(&self, path: &Path, env: &[(OsString, OsString)]) -> Vec<Window> {
        super::limits::codex_windows(path, env)
    }
}

/// One call's output (Codex's events need no memory).
struct Reader;

impl Lines for Reader {
    fn line(&mut self, t: &str, v: &Value) -> (Vec<Step>, bool) {
        match t {
            "item.completed" | "item.updated" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if t == "item.completed"
                    && item.get("type").and_then(Value::as_str) == Some("agent_message")
                {
                    if let Some(text) = item.get("text").and_then(Value::as_str) {
                        return (vec![Step::Text(text.to_string())], false);
                    }
                }
                (Vec::new(), false)
            }
            "turn.completed" => (
                finished(
                    v.get("usage").unwrap_or(&Value::Null),
                    "cached_input_tokens",
                ),
                false,
            ),
            "turn.failed" => (vec![Step::Failed], true),
            "error" => {
                let msg = v.get("message").and_then(Value::as_str).unwrap_or_default();
                if msg.contains("waiting for network") {
                    let reason = format!("network unreachable: {msg}");
                    return (vec![Step::Transient(reason)], true);
                }
                (Vec::new(), true)
            }
            _ => (Vec::new(), false),
        }
    }
}
