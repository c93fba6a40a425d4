//! Subscription CLIs as providers: Claude Code (`claude -p`), Codex (`codex exec`) and Gemini
//! CLI (`gemini -p`). Each call spawns the CLI directly (never through a shell) in a fresh empty
//! directory with a minimal environment, its own tools disabled, and reads its JSON event lines
//! as they arrive.

pub mod claude;
pub mod codex;
pub mod decode;
mod exec;
pub mod gemini;
pub mod limits;
pub mod program;
pub mod run;
pub mod state;
mod status;

use std::ffi::OsString;

use crate::canonical::{ChatRequest, Part, Role};
use crate::config::ProviderKind;

pub use exec::{environment, passed_env, resolve_executable};
pub use run::{CliItem, CliProcesses, CliRun};
pub use state::CliStatus;
pub use status::{check as check_status, locate, login_hint, login_state};

/// Where a CLI kind's daily quotas reset when the provider does not say (Gemini CLI's at
/// Pacific midnight, like the Gemini API's).
pub fn day_reset_zone(kind: ProviderKind) -> Option<&'static str> {
    kind.spec().cli.as_ref().and_then(|c| c.day_reset_zone)
}

/// Why a request cannot go to a CLI as it stands: the CLIs take one prompt, not a conversation.
pub fn shape_problem(req: &ChatRequest, flatten_history: bool) -> Option<String> {
    if !req.tools.is_empty() {
        return Some(
            "a subscription CLI provider cannot take tool definitions (its own tools are disabled)"
                .into(),
        );
    }
    let has_image = req
        .messages
        .iter()
        .any(|m| m.content.iter().any(|p| matches!(p, Part::Image { .. })));
    if has_image {
        return Some("a subscription CLI provider cannot take images".into());
    }
    let tool_turns = req.messages.iter().any(|m| {
        m.role == Role::Tool
            || m.content
                .iter()
                .any(|p| matches!(p, Part::ToolCall { .. } | Part::ToolResult { .. }))
    });
    if tool_turns {
        return Some("a subscription CLI provider cannot take tool calls or tool results".into());
    }
    let single = req.messages.len() == 1 && req.messages[0].role == Role::User;
    if !single && !flatten_history {
        return Some("a subscription CLI provider takes one user message (plus an optional system message); this request has a multi-turn history. Set `flattenHistory: true` on the provider to send it as one transcript".into());
    }
    if req.messages.is_empty() {
        return Some("the request has no user message".into());
    }
    None
}

/// The prompt text sent on the CLI's stdin: the user message, or with `flattenHistory` a
/// transcript of the whole conversation.
pub fn prompt_text(req: &ChatRequest) -> String {
    let text_of = |m: &crate::canonical::Message| {
        m.content
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let [only] = req.messages.as_slice() {
        return text_of(only);
    }
    let mut out = String::from(
        "The conversation so far is below. Reply to the last user message as the assistant.\n",
    );
    for m in &req.messages {
        let who = match m.role {
            Role::User => "User",
            Role::Assistant => "Assistant",
            Role::Tool => "Tool",
        };
        out.push_str(&format!("\n{who}: {}\n", text_of(m)));
    }
    out
}

/// The argument vector for one call, as its kind's program builds it (the prompt itself goes
/// on stdin, so it can never be read as a flag and is not limited by the kernel's argument
/// size).
pub fn command_args(kind: ProviderKind, model: &str, system: Option<&str>) -> Vec<OsString> {
    program::of(kind)
        .map(|p| p.args(model, system))
        .unwrap_or_default()
        .into_iter()
        .map(OsString::from)
        .collect()
}

/// The prompt on stdin and the system prompt for the CLI; one with no flag for a system prompt
/// gets it leading the prompt.
pub fn stdin_and_system(kind: ProviderKind, req: &ChatRequest) -> (String, Option<String>) {
    let mut system: Vec<String> = req.system.clone();
    // A CLI has no structured-output setting: the JSON asked for is an instruction, and its
    // answer is checked like any other (`structured`).
    if let Some(format) = &req.output {
        system.push(crate::structured::instruction(format));
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    let prompt = prompt_text(req);
    let lead = program::of(kind).is_some_and(|p| p.system_in_prompt());
    match system {
        Some(s) if lead => (format!("{s}\n\n{prompt}"), None),
        s => (prompt, s),
    }
}

#[cfg(test)]
mod tests;
