//! The CLIs' JSON event lines (`--output-format stream-json` / `--json`) as canonical steps.

use serde_json::Value;

use crate::canonical::{StopReason, Usage};
use crate::config::ProviderKind;

/// What one output line means.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Text(String),
    Usage(Usage),
    Finish(StopReason),
    /// The CLI reported a failure: classify what it printed.
    Failed,
    /// Stop it now: it would only retry (network down).
    Transient(String),
    /// The CLI reported one of its account's limit windows (Claude's `rate_limit_event`).
    Window(crate::limits::windows::Window),
}

pub struct Decoder {
    kind: ProviderKind,
    /// Claude: text already arrived as partial-message deltas, so the whole message that
    /// follows must not be sent again.
    streamed: bool,
    stop: Option<StopReason>,
}

impl Decoder {
    pub fn new(kind: ProviderKind) -> Self {
        Self {
            kind,
            streamed: false,
            stop: None,
        }
    }

    /// Steps for one stdout line, and whether the line matters for classifying a failure.
    pub fn line(&mut self, v: &Value) -> (Vec<Step>, bool) {
        let t = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match self.kind {
            ProviderKind::ClaudeCli => self.claude(t, v),
            ProviderKind::CodexCli => codex(t, v),
            ProviderKind::GeminiCli => gemini(t, v),
            _ => (Vec::new(), false),
        }
    }

    fn claude(&mut self, t: &str, v: &Value) -> (Vec<Step>, bool) {
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

fn codex(t: &str, v: &Value) -> (Vec<Step>, bool) {
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

fn gemini(t: &str, v: &Value) -> (Vec<Step>, bool) {
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

/// Usage from a final event (`input_tokens` counts the cached part too), then the end.
fn finished(u: &Value, cached_field: &str) -> Vec<Step> {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n(cached_field);
    vec![
        Step::Usage(Usage {
            input_tokens: n("input_tokens").saturating_sub(cached),
            output_tokens: n("output_tokens"),
            cached_input_tokens: cached,
            cache_write_tokens: 0,
        }),
        Step::Finish(StopReason::Stop),
    ]
}

/// Whether a stderr line is worth keeping for classification (not a stack frame or banner).
pub fn stderr_worth_keeping(line: &str) -> bool {
    let l = line.trim();
    !(l.is_empty()
        || l.starts_with("at ")
        || l.starts_with("Warning: 256-color")
        || l.starts_with("Ripgrep is not available")
        || l.starts_with("WARNING: proceeding")
        || l.starts_with("Reading additional input from stdin")
        || l.contains("codex_api::endpoint")
        || l == "{"
        || l == "}")
}

/// A stderr line that means the CLI is about to sleep on a limit instead of failing: Gemini
/// CLI waits out capacity errors ("Your quota will reset after 2h13m47s.. Retrying after
/// 8050934ms"). Baton fails over at once instead.
pub fn stderr_is_fatal(kind: ProviderKind, line: &str) -> bool {
    if kind != ProviderKind::GeminiCli {
        return false;
    }
    let lower = line.to_ascii_lowercase();
    if lower.contains("quota will reset after") || lower.contains("exhausted your") {
        return true;
    }
    // "Retrying after 8050934ms": anything over half a minute is not worth waiting for.
    lower
        .split("retrying after ")
        .nth(1)
        .and_then(|rest| rest.split("ms").next())
        .and_then(|n| n.trim().parse::<u64>().ok())
        .is_some_and(|ms| ms >= 30_000)
}
