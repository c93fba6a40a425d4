//! The CLIs' JSON event lines (`--output-format stream-json` / `--json`) as canonical steps.

use serde_json::Value;

use super::program::Lines;
use crate::canonical::{StopReason, Usage};
use crate::config::ProviderKind;

pub use super::program::Step;

/// One call's reader of a CLI's output lines: its kind's own ([`super::program::Lines`]).
pub struct Decoder {
    lines: Option<Box<dyn Lines>>,
}

impl Decoder {
    pub fn new(kind: ProviderKind) -> Self {
        Self {
            lines: super::program::of(kind).map(|p| p.lines()),
        }
    }

    /// Steps for one stdout line, and whether the line matters for classifying a failure.
    pub fn line(&mut self, v: &Value) -> (Vec<Step>, bool) {
        let t = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match &mut self.lines {
            Some(l) => l.line(t, v),
            None => (Vec::new(), false),
        }
    }
}

/// Usage from a final event (`input_tokens` counts the cached part too), then the end.
pub(super) fn finished(u: &Value, cached_field: &str) -> Vec<Step> {
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

/// A stderr line that means the CLI is about to sleep on a limit instead of failing (its
/// kind's [`super::program::Program::stderr_is_fatal`]): Baton fails over at once instead.
pub fn stderr_is_fatal(kind: ProviderKind, line: &str) -> bool {
    super::program::of(kind).is_some_and(|p| p.stderr_is_fatal(line))
}
