//! What a subscription CLI kind's folder implements ([`Program`]) and registers ([`register!`]):
//! how the CLI is called, how its output lines read, how its login is checked. The rest of the
//! CLI machinery (spawning, the environment, streaming) is the same for every CLI and asks the
//! registry for the kind's part; nothing outside a CLI's folder names it.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use crate::canonical::{StopReason, Usage};
use crate::config::kind::KindSpec;
use crate::config::ProviderKind;
use crate::limits::windows::Window;

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
    Window(Window),
}

/// One call's reader of the CLI's JSON event lines, with what it must remember between them.
pub trait Lines: Send {
    /// Steps for one line of type `t`, and whether the line matters for classifying a failure.
    fn line(&mut self, t: &str, v: &Value) -> (Vec<Step>, bool);
}

/// A subscription CLI: one per folder.
pub trait Program: Sync {
    /// The vendor whose model the CLI runs, as OpenTelemetry's GenAI conventions name it.
    fn gen_ai_system(&self) -> &'static str;
    /// The argument vector for one call (the prompt goes on stdin). Every value is attached
    /// to its flag with `=`, so a model or system prompt starting with `-` stays a value.
    fn args(&self, model: &str, system: Option<&str>) -> Vec<String>;
    /// It has no flag for a system prompt: the system prompt leads the prompt.
    fn system_in_prompt(&self) -> bool {
        false
    }
    /// A reader for one call's output.
    fn lines(&self) -> Box<dyn Lines>;
    /// Whether it is logged in (`None`: it cannot tell), running it at `path` with `env`
    /// (no shell) or reading `lookup`'s variables.
    fn logged_in(
        &self,
        path: &Path,
        env: &[(OsString, OsString)],
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Option<bool>;
    /// Its login's usage windows, where it tells them without a request.
    fn windows(&self, _path: &Path, _env: &[(OsString, OsString)]) -> Vec<Window> {
        Vec::new()
    }
    /// A stderr line that means it is about to sleep on a limit instead of failing: Baton
    /// fails over at once instead.
    fn stderr_is_fatal(&self, _line: &str) -> bool {
        false
    }
}

/// A CLI kind's registration, submitted from its folder by [`register!`].
pub struct Registered {
    pub spec: &'static KindSpec,
    pub program: &'static dyn Program,
}

inventory::collect!(Registered);

/// Registers a CLI kind from its folder: its spec and its program. The folder's `pub mod` line
/// in `providers/cli/mod.rs` is the only line outside it that a new CLI adds.
macro_rules! register {
    ($spec:path, $program:expr) => {
        inventory::submit!(crate::config::kind::Registered(&$spec));
        inventory::submit!(crate::providers::cli::program::Registered {
            spec: &$spec,
            program: $program,
        });
    };
}
pub(crate) use register;

/// The program of a CLI kind; `None` for an HTTP kind.
pub fn of(kind: ProviderKind) -> Option<&'static dyn Program> {
    inventory::iter::<Registered>
        .into_iter()
        .find(|r| kind.is(r.spec))
        .map(|r| r.program)
}

/// The CLI kind that runs `program` (a catalog entry's `cli`).
pub fn running(program: &str) -> Option<(ProviderKind, &'static dyn Program)> {
    inventory::iter::<Registered>
        .into_iter()
        .find(|r| r.spec.cli.as_ref().is_some_and(|c| c.program == program))
        .map(|r| (ProviderKind::of(r.spec), r.program))
}
