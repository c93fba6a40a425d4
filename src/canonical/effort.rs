//! How hard a model should think, across formats: OpenAI's `reasoning_effort`, the Responses
//! API's `reasoning.effort`, Anthropic's `thinking.budget_tokens` (and Claude Code's
//! `output_config.effort`), Gemini's `thinkingConfig.thinkingBudget`. A request translated to
//! another format asks its target for the same effort in the target's own terms, where the
//! target thinks at all (by its model's name); elsewhere the ask is left out, as a model that
//! does not reason would refuse it.

use serde_json::{json, Map, Value};

/// The effort levels every format can say.
pub const LEVELS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh"];

/// The effort an Anthropic request asks for: Claude Code's `output_config.effort`, else its
/// thinking budget in levels.
pub fn from_anthropic(body: &Map<String, Value>) -> Option<String> {
    if let Some(e) = body
        .get("output_config")
        .and_then(|o| o.get("effort"))
        .and_then(Value::as_str)
        .filter(|e| LEVELS.contains(e))
    {
        return Some(e.to_string());
    }
    let budget = body.get("thinking")?.get("budget_tokens")?.as_u64()?;
    Some(
        match budget {
            0..=2048 => "low",
            2049..=8192 => "medium",
            _ => "high",
        }
        .to_string(),
    )
}

/// An effort level named in a request (`reasoning_effort`, `reasoning.effort`).
pub fn level(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|e| LEVELS.contains(e))
        .map(str::to_string)
}

fn model_name(model: &str) -> String {
    model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase()
}

/// OpenAI's reasoning models, which take `reasoning_effort`.
pub fn openai_reasons(model: &str) -> bool {
    let m = model_name(model);
    ["o1", "o3", "o4", "gpt-5", "gpt-6"]
        .iter()
        .any(|p| m.starts_with(p))
        || m.contains("codex")
}

/// Claude models that think (3.7 and every later one).
pub fn claude_thinks(model: &str) -> bool {
    let m = model_name(model);
    m.starts_with("claude")
        && !["claude-2", "claude-instant", "claude-3-", "claude-3.5"]
            .iter()
            .any(|p| m.starts_with(p) && !m.starts_with("claude-3-7"))
}

/// Gemini models that think (2.5 and later).
pub fn gemini_thinks(model: &str) -> bool {
    let m = model_name(model);
    m.starts_with("gemini-2.5") || m.starts_with("gemini-3")
}

/// Anthropic's thinking for an effort, within the answer's `max_tokens` (the budget must stay
/// below it, and at least 1,024): `None` for no thinking.
pub fn anthropic_thinking(effort: &str, max_tokens: u64) -> Option<Value> {
    let want: u64 = match effort {
        "low" => 1024,
        "medium" => 4096,
        "high" => 16_384,
        "xhigh" => 32_000,
        _ => return None,
    };
    let budget = want.min(max_tokens.saturating_sub(1));
    (budget >= 1024).then(|| json!({"type": "enabled", "budget_tokens": budget}))
}

/// Gemini's thinking budget for an effort.
pub fn gemini_budget(effort: &str) -> Option<u64> {
    Some(match effort {
        "none" | "minimal" => 0,
        "low" => 1024,
        "medium" => 8192,
        "high" | "xhigh" => 24_576,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efforts_map_between_the_formats_where_models_think() {
        let obj = |v: Value| v.as_object().cloned().unwrap_or_default();
        assert_eq!(
            from_anthropic(&obj(
                json!({"thinking": {"type": "enabled", "budget_tokens": 10000}})
            )),
            Some("high".into())
        );
        assert_eq!(
            from_anthropic(&obj(
                json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}})
            )),
            Some("medium".into())
        );
        assert_eq!(
            from_anthropic(&obj(json!({"thinking": {"type": "adaptive"}}))),
            None
        );
        assert_eq!(level(Some(&json!("turbo"))), None);
        assert!(claude_thinks("claude-sonnet-4-5") && claude_thinks("claude-3-7-sonnet-latest"));
        assert!(!claude_thinks("claude-3-5-sonnet-latest") && !claude_thinks("claude-3-haiku"));
        assert!(openai_reasons("o3-mini") && openai_reasons("openai/gpt-5.1-codex"));
        assert!(!openai_reasons("gpt-4o") && !openai_reasons("llama-3.3-70b"));
        assert!(gemini_thinks("gemini-2.5-pro") && !gemini_thinks("gemini-2.0-flash"));
        assert_eq!(
            anthropic_thinking("high", 64000),
            Some(json!({"type": "enabled", "budget_tokens": 16384}))
        );
        assert_eq!(
            anthropic_thinking("high", 3000),
            Some(json!({"type": "enabled", "budget_tokens": 2999})),
            "within the answer's own limit"
        );
        assert_eq!(anthropic_thinking("high", 1000), None, "no room to think");
        assert_eq!(anthropic_thinking("none", 64000), None);
        assert_eq!(gemini_budget("minimal"), Some(0));
    }
}
