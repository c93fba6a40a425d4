//! Subscription CLIs as providers: Claude Code (`claude -p`), Codex (`codex exec`) and Gemini
//! CLI (`gemini -p`). Each call spawns the CLI directly (never through a shell) in a fresh empty
//! directory with a minimal environment, its own tools disabled, and reads its JSON event lines
//! as they arrive.

pub mod claude;
pub mod codex;
pub mod decode;
pub mod gemini;
pub mod limits;
pub mod program;
pub mod run;
mod status;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::canonical::{ChatRequest, Part, Role};
use crate::config::ProviderKind;

pub use run::{CliItem, CliProcesses, CliRun};
pub use status::{check as check_status, locate, login_hint, login_state, CliStatus};

/// Interpreters a known CLI launcher may name on its `#!` line (npm installs `node` scripts).
const LAUNCHERS: &[&str] = &["node", "nodejs", "bun", "deno"];

/// Finds `name_or_path` (a name on `search_path`, or an absolute path) and checks that it is
/// a regular executable file and either a native binary or a known launcher script — a shell
/// wrapper could run anything, so it is refused.
pub fn resolve_executable(
    name_or_path: &str,
    search_path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    let found = if name_or_path.starts_with('/') {
        PathBuf::from(name_or_path)
    } else {
        let dirs = search_path.ok_or("PATH is not set")?;
        std::env::split_paths(dirs)
            .map(|d| d.join(name_or_path))
            .find(|p| is_executable_file(p))
            .ok_or_else(|| format!("`{name_or_path}` is not installed (not found on PATH)"))?
    };
    let real = std::fs::canonicalize(&found)
        .map_err(|e| format!("`{}` cannot be opened: {e}", found.display()))?;
    if !is_executable_file(&real) {
        return Err(format!("`{}` is not an executable file", found.display()));
    }
    let mut head = [0u8; 256];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(&real)
            .map_err(|e| format!("`{}` cannot be read: {e}", real.display()))?;
        f.read(&mut head).unwrap_or(0)
    };
    if let Some(rest) = head[..n].strip_prefix(b"#!") {
        let line = rest.split(|b| *b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let interp = words.next().unwrap_or_default();
        let program = if interp.ends_with("/env") {
            words.find(|w| !w.starts_with('-')).unwrap_or_default()
        } else {
            interp
        };
        let base = program.rsplit('/').next().unwrap_or_default();
        if !LAUNCHERS.contains(&base) {
            return Err(format!(
                "`{}` is a `{base}` script; Baton runs only native executables or node/bun/deno launchers, never shell wrappers. Point `executable` at the real CLI",
                real.display()
            ));
        }
    }
    // Keep the name the user's PATH gave (npm's bin links resolve their own package paths).
    Ok(found)
}

fn is_executable_file(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

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
    let system = (!req.system.is_empty()).then(|| req.system.join("\n\n"));
    let prompt = prompt_text(req);
    let lead = program::of(kind).is_some_and(|p| p.system_in_prompt());
    match system {
        Some(s) if lead => (format!("{s}\n\n{prompt}"), None),
        s => (prompt, s),
    }
}

/// Environment variables passed through to a CLI: what it needs to find its login and reach
/// the network, nothing of Baton's own (provider keys, gateway keys).
pub fn passed_env(kind: ProviderKind) -> impl Iterator<Item = &'static str> {
    const COMMON: &[&str] = &[
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LC_ALL",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "DBUS_SESSION_BUS_ADDRESS",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "NO_PROXY",
        "https_proxy",
        "http_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "NODE_EXTRA_CA_CERTS",
    ];
    let own: &[&str] = kind.spec().cli.as_ref().map_or(&[], |c| c.env_passed);
    COMMON.iter().chain(own).copied()
}

/// The environment one CLI call gets: the passed-through variables, `TZ=UTC` (so the reset
/// times a CLI prints are unambiguous), no colour, then the provider's own `env`.
pub fn environment(
    kind: ProviderKind,
    extra: &[(String, crate::providers::Secret)],
    get: &dyn Fn(&str) -> Option<OsString>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = passed_env(kind)
        .filter_map(|k| get(k).map(|v| (OsString::from(k), v)))
        .collect();
    env.push(("TZ".into(), "UTC".into()));
    env.push(("NO_COLOR".into(), "1".into()));
    for (k, v) in extra {
        env.retain(|(name, _)| name != k.as_str());
        env.push((k.into(), v.expose().into()));
    }
    env
}

#[cfg(test)]
mod tests;
