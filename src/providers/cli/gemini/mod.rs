//! Gemini CLI (`gemini`, headless) as a provider, on its own Google login or key: the
//! `gemini-cli` kind. Called with `--output-format=stream-json` in plan mode, the prompt on
//! stdin (it has no system-prompt flag); its login is a key variable or stored OAuth
//! credentials; a capacity wait it announces on stderr is failed over at once.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use super::decode::finished;
use super::program::{Lines, Program, Step};
use crate::config::kind::{CliSpec, KindSpec};
use crate::config::ProviderKind;
use crate::i18n::n_;

/// The `gemini-cli` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "gemini-cli",
    order: 110,
    doc: "The Gemini CLI (`gemini -p`), using its own Google login or key.",
    label: n_("Gemini CLI"),
    badge: "GC",
    sample_model: Some("gemini-2.5-pro"),
    cli: Some(CliSpec {
        program: "gemini",
        env_allowed: &[
            "GEMINI_CLI_HOME",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_GENAI_USE_VERTEXAI",
        ],
        env_passed: &[
            "GEMINI_CLI_HOME",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ],
        // Its daily quotas reset at Pacific midnight, like the Gemini API's.
        day_reset_zone: Some("America/Los_Angeles"),
        login_hint: crate::i18n::n_(
            "run `gemini` once in a terminal to log in (or set GEMINI_API_KEY)",
        ),
    }),
    ..KindSpec::BASE
};

/// The `gemini-cli` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

/// Gemini CLI's program.
pub struct GeminiCli;

super::program::register!(SPEC, &GeminiCli);

impl Program for GeminiCli {
    fn gen_ai_system(&self) -> &'static str {
        "gcp.gemini"
    }

    fn args(&self, model: &str, _system: Option<&str>) -> Vec<String> {
        let mut a: Vec<String> = [
            "--output-format=stream-json",
            "--skip-trust",
            "--approval-mode=plan",
        ]
        .map(String::from)
        .into();
        a.push(format!("--model={model}"));
        // An empty `--prompt` selects headless mode; the prompt is read from stdin.
        a.push("--prompt=".into());
        a
    }

    fn system_in_prompt(&self) -> bool {
        true
    }

    fn lines(&self) -> Box<dyn Lines> {
        Box::new(Reader)
    }

    /// A key variable, or OAuth credentials stored under its home.
    fn logged_in(
        &self,
        _path: &Path,
        _env: &[(OsString, OsString)],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Option<bool> {
        let key = [
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_GENAI_USE_GCA",
        ]
        .iter()
        .any(|v| lookup(v).is_some_and(|x| !x.trim().is_empty()));
        let home = lookup("GEMINI_CLI_HOME").or_else(|| lookup("HOME"));
        let creds = home.is_some_and(|h| {
            let dir = Path::new(&h).join(".gemini");
            dir.join("oauth_creds.json").is_file()
        });
        Some(key || creds)
    }

    /// It waits out capacity errors ("Your quota will reset after 2h13m47s.. Retrying after
    /// 8050934ms"): anything over half a minute is not worth waiting for.
    fn stderr_is_fatal(&self, line: &str) -> bool {
        let lower = line.to_ascii_lowercase();
        if lower.contains("quota will reset after") || lower.contains("exhausted your") {
            return true;
        }
        lower
            .split("retrying after ")
            .nth(1)
            .and_then(|rest| rest.split("ms").next())
            .and_then(|n| n.trim().parse::<u64>().ok())
            .is_some_and(|ms| ms >= 30_000)
    }
}

/// One call's output (Gemini's events need no memory).
struct Reader;

impl Lines for Reader {
    fn line(&mut self, t: &str, v: &Value) -> (Vec<Step>, bool) {
        match t {
            "message" if v.get("role").and_then(Value::as_str) == Some("assistant") => {
                match v.get("content").and_then(Value::as_str) {
                    Some(text) => (vec![Step::Text(text.to_string())], false),
                    None => (Vec::new(), false),
                }
            }
            "result" => {
                if v.get("status").and_then(Value::as_str) != Some("success") {
                    return (vec![Step::Failed], true);
                }
                (
                    finished(v.get("stats").unwrap_or(&Value::Null), "cached"),
                    false,
                )
            }
            "error" => (Vec::new(), true),
            _ => (Vec::new(), false),
        }
    }
}
