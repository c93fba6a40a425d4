//! Claude Code (`claude -p`) as a provider, on its own subscription login: the `claude-cli`
//! kind. Called with `--output-format=stream-json` and partial messages, its own tools off, one
//! turn, nothing persisted; its login checked with `claude auth status`.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use super::program::{Lines, Program, Step};
use super::status::run_quietly;
use crate::canonical::StopReason;
use crate::config::kind::{CliSpec, KindSpec};
use crate::config::ProviderKind;
use crate::i18n::n_;

/// The `claude-cli` kind.
pub static SPEC: KindSpec = KindSpec {
    name: "claude-cli",
    order: 90,
    doc: "The Claude Code CLI (`claude -p`), using its own subscription login.",
    label: n_("Claude Code CLI"),
    badge: "CC",
    sample_model: Some("sonnet"),
    cli: Some(CliSpec {
        program: "claude",
        env_allowed: &[
            "CLAUDE_CONFIG_DIR",
            "ANTHROPIC_API_KEY",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ],
        env_passed: &["CLAUDE_CONFIG_DIR"],
        day_reset_zone: None,
        login_hint: crate::i18n::n_(
            "run `claude` and log in with /login (or set ANTHROPIC_API_KEY)",
        ),
    }),
    ..KindSpec::BASE
};

/// The `claude-cli` kind.
pub const KIND: ProviderKind = ProviderKind::of(&SPEC);

/// Claude Code's program.
pub struct Claude;

super::program::register!(SPEC, &Claude);

impl Program for Claude {
    fn gen_ai_system(&self) -> &'static str {
        "anthropic"
    }

    fn args(&self, model: &str, system: Option<&str>) -> Vec<String> {
        let mut a: Vec<String> = [
            "-p",
            "--output-format=stream-json",
            "--verbose",
            "--include-partial-messages",
            "--tools=",
            "--max-turns=1",
            "--no-session-persistence",
            "--setting-sources=",
        ]
        .map(String::from)
        .into();
        a.push(format!("--model={model}"));
        if let Some(s) = system {
            a.push(format!("--system-prompt={s}"));
        }
        a
    }

    fn lines(&self) -> Box<dyn Lines> {
        Box::new(Reader::default())
    }

    /// `claude auth status` answers JSON with `loggedIn`.
    fn logged_in(
        &self,
        path: &Path,
        env: &[(OsString, OsString)],
        _lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Option<bool> {
        let (_, out) = run_quietly(path, &["auth", "status"], env)?;
        serde_json::from_str::<Value>(&out)
            .ok()?
            .get("loggedIn")?
            .as_bool()
    }
}

/// One call's output.
#[derive(Default)]
struct Reader {
    /// Text already arrived as partial-message deltas, so the whole message that follows must
    /// not be sent again.
    streamed: bool,
    stop: Option<StopReason>,
}

impl Lines for Reader {
    fn line(&mut self, t: &str, v: &Value) -> (Vec<Step>, bool) {
        match t {
            "stream_event" => {
                let ev = v.get("event").unwrap_or(&Value::Null);
                match ev.get("type").and_then(Value::as_str) {
                    Some("content_block_delta") => {
                        let d = ev.get("delta").unwrap_or(&Value::Null);
                        if d.get("type").and_then(Value::as_str) == Some("text_delta") {
                            if let Some(text) = d.get("text").and_then(Value::as_str) {
                                self.streamed = true;
                                return (vec![Step::Text(text.to_string())], false);
                            }
                        }
                    }
                    Some("message_delta") => {
                        if let Some(r) = ev.pointer("/delta/stop_reason").and_then(Value::as_str) {
                            self.stop = Some(claude_stop(r));
                        }
                    }
                    _ => {}
                }
                (Vec::new(), false)
            }
            "assistant" => {
                // Errors come as a "<synthetic>" assistant message; its text is not an answer.
                let m = v.get("message").unwrap_or(&Value::Null);
                if self.streamed || m.get("model").and_then(Value::as_str) == Some("<synthetic>") {
                    return (Vec::new(), false);
                }
                let text: String = m
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect();
                if text.is_empty() {
                    (Vec::new(), false)
                } else {
                    self.streamed = true;
                    (vec![Step::Text(text)], false)
                }
            }
            // Kept for classifying a failure, and read as the account's window.
            "rate_limit_event" => (
                crate::limits::windows::from_cli_event(v)
                    .map(Step::Window)
                    .into_iter()
                    .collect(),
                true,
            ),
            "result" => {
                if v.get("is_error").and_then(Value::as_bool) == Some(true) {
                    return (vec![Step::Failed], true);
                }
                let mut steps = Vec::new();
                if let Some(u) = v.get("usage") {
                    steps.push(Step::Usage(
                        crate::canonical::anthropic::usage_from_anthropic(u),
                    ));
                }
                let stop = v
                    .get("stop_reason")
                    .and_then(Value::as_str)
                    .map(claude_stop)
                    .or(self.stop.take())
                    .unwrap_or(StopReason::Stop);
                steps.push(Step::Finish(stop));
                (steps, false)
            }
            _ => (Vec::new(), false),
        }
    }
}

fn claude_stop(r: &str) -> StopReason {
    match r {
        "end_turn" | "stop_sequence" => StopReason::Stop,
        "max_tokens" => StopReason::Length,
        "refusal" => StopReason::ContentFilter,
        other => StopReason::Other(other.to_string()),
    }
}
