//! What connecting a client is about (a leaf): where clients keep their configuration, which
//! credential they send, what they are pointed at, what can go wrong, and the digests the
//! journal keeps.

use std::path::{Path, PathBuf};

/// The clients `baton connect` can set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum App {
    ClaudeCode,
    Codex,
    GeminiCli,
    Opencode,
}

impl App {
    pub const ALL: [App; 4] = [App::ClaudeCode, App::Codex, App::GeminiCli, App::Opencode];

    pub fn id(self) -> &'static str {
        match self {
            App::ClaudeCode => "claude-code",
            App::Codex => "codex",
            App::GeminiCli => "gemini-cli",
            App::Opencode => "opencode",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            App::ClaudeCode => "Claude Code",
            App::Codex => "Codex",
            App::GeminiCli => "Gemini CLI",
            App::Opencode => "opencode",
        }
    }

    pub fn parse(s: &str) -> Result<Self, ConnectError> {
        App::ALL
            .into_iter()
            .find(|a| a.id() == s)
            .ok_or_else(|| ConnectError::UnknownApp(s.to_string()))
    }

    /// The subscription its own login is ("ChatGPT", "Claude"), for a client with one.
    pub fn plan(self) -> Option<&'static str> {
        match self {
            App::ClaudeCode => Some("Claude"),
            App::Codex => Some("ChatGPT"),
            App::GeminiCli | App::Opencode => None,
        }
    }

    /// Whether the client can reach Baton on the client's own login (a passthrough provider).
    pub fn has_login_mode(self) -> bool {
        matches!(self, App::ClaudeCode | App::Codex)
    }
}

/// Where each client keeps its configuration, from the environment the client itself reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Homes {
    pub claude: PathBuf,
    pub codex: PathBuf,
    pub gemini: PathBuf,
    pub opencode: PathBuf,
}

impl Homes {
    /// The locations under `home` when no client variable moves them.
    pub fn under(home: &Path) -> Self {
        Self {
            claude: home.join(".claude"),
            codex: home.join(".codex"),
            gemini: home.join(".gemini"),
            opencode: home.join(".config").join("opencode"),
        }
    }

    /// `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_CONFIG_HOME` as the clients read them.
    pub fn from_env() -> Option<Self> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("HOME").or_else(dirs::home_dir)?;
        let mut h = Self::under(&home);
        if let Some(d) = var("CLAUDE_CONFIG_DIR") {
            h.claude = d;
        }
        if let Some(d) = var("CODEX_HOME") {
            h.codex = d;
        }
        if let Some(d) = var("XDG_CONFIG_HOME") {
            h.opencode = d.join("opencode");
        }
        Some(h)
    }
}

/// Which credential the client sends to Baton.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Baton's gateway key; Baton's providers serve the client.
    Keys,
    /// The client's own subscription login, forwarded to a passthrough provider; Baton's key
    /// goes in a header of its own.
    Login,
}

impl Mode {
    pub fn id(self) -> &'static str {
        match self {
            Mode::Keys => "keys",
            Mode::Login => "login",
        }
    }
}

/// What the client is pointed at.
#[derive(Clone, Debug)]
pub struct Target {
    /// `http://127.0.0.1:8787`: no trailing slash, no path.
    pub origin: String,
    /// The gateway key the client presents.
    pub key: String,
    pub mode: Mode,
    /// Claude Code's status-line command, when it is to be installed.
    pub statusline: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("unknown client `{0}`: choose claude-code, codex, gemini-cli or opencode")]
    UnknownApp(String),
    #[error("{} has no login of its own to pass through", .0.name())]
    NoLogin(App),
    #[error("cannot find your home directory (HOME is not set)")]
    NoHome,
    #[error("{}: cannot read it ({source})", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {detail}. Baton does not overwrite a file it cannot read: fix it (or move it away) and connect again.", path.display())]
    Unreadable { path: PathBuf, detail: String },
    #[error("{}: cannot write it ({source}); nothing was changed", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: it changed since the preview; look at the change again before writing", path.display())]
    Changed { path: PathBuf },
    #[error("Baton has not connected {} on this machine: there is nothing to undo", .0.name())]
    NotConnected(App),
    #[error("the record of what Baton wrote ({}) is unreadable: {detail}", path.display())]
    Journal { path: PathBuf, detail: String },
}

pub(super) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(super) fn sha(text: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref())
}

pub(super) fn value_sha(v: &serde_json::Value) -> String {
    sha(&v.to_string())
}
