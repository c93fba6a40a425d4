//! What `baton connect` writes for each client: which file, in which format, and the entries.
//! Each entry is a key path and the value Baton wants there; everything else in the file is the
//! user's and stays as it is.

use std::path::{Path, PathBuf};

use super::doc::{Format, Val};
pub use super::types::App;
use super::types::{ConnectError, Homes, Mode, Target};

/// One file to edit and the entries Baton wants in it.
pub struct FileSpec {
    pub path: PathBuf,
    pub format: Format,
    pub entries: Entries,
}

/// The files `app` reads its configuration from.
pub fn files(app: App, homes: &Homes) -> Vec<PathBuf> {
    match app {
        App::ClaudeCode => vec![homes.claude.join("settings.json")],
        App::Codex => vec![homes.codex.join("config.toml")],
        App::Opencode => vec![opencode_file(&homes.opencode)],
        // Its auth type in settings.json; where and with what key in `.env`, which it reads
        // in folders the user trusts (it has no setting for a base URL).
        App::GeminiCli => vec![
            homes.gemini.join("settings.json"),
            homes.gemini.join(".env"),
        ],
    }
}

/// A config file's format, by its name.
pub fn format_of(path: &Path) -> Format {
    match (
        path.extension().and_then(|e| e.to_str()),
        path.file_name().and_then(|n| n.to_str()),
    ) {
        (Some("toml"), _) => Format::Toml,
        (_, Some(".env")) => Format::Env,
        _ => Format::Json,
    }
}

/// The files and entries that point `app` at `target`.
pub fn specs(app: App, homes: &Homes, target: &Target) -> Result<Vec<FileSpec>, ConnectError> {
    let mut entries = match app {
        App::ClaudeCode => vec![claude_code(target)],
        App::Codex => vec![codex(target)],
        App::Opencode => vec![opencode(target)],
        App::GeminiCli => gemini_cli(target),
    };
    Ok(files(app, homes)
        .into_iter()
        .zip(entries.drain(..))
        .map(|(path, entries)| FileSpec {
            format: format_of(&path),
            path,
            entries,
        })
        .collect())
}

type Entries = Vec<(Vec<&'static str>, Val)>;

fn claude_code(target: &Target) -> Entries {
    let key = target.key.as_str();
    let mut entries = vec![(vec!["env", "ANTHROPIC_BASE_URL"], Val::str(&target.origin))];
    entries.push(match target.mode {
        // Claude Code's own login stays the credential; Baton's key rides in a header.
        Mode::Login => (
            vec!["env", "ANTHROPIC_CUSTOM_HEADERS"],
            Val::str(format!("x-baton-key: {key}")),
        ),
        // A bearer token needs no "use this API key?" approval, unlike ANTHROPIC_API_KEY.
        Mode::Keys => (vec!["env", "ANTHROPIC_AUTH_TOKEN"], Val::str(key)),
    });
    if let Some(cmd) = &target.statusline {
        entries.push((
            vec!["statusLine"],
            Val::obj([("type", Val::str("command")), ("command", Val::str(cmd))]),
        ));
    }
    entries
}

fn codex(target: &Target) -> Entries {
    let key = target.key.as_str();
    let mut provider = vec![
        ("name", Val::str("Baton")),
        ("base_url", Val::str(format!("{}/v1", target.origin))),
        ("wire_api", Val::str("responses")),
    ];
    match target.mode {
        // Codex sends its ChatGPT login; Baton's key rides in a header of its own.
        Mode::Login => {
            provider.push(("requires_openai_auth", Val::Bool(true)));
            provider.push(("http_headers", Val::obj([("x-baton-key", Val::str(key))])));
        }
        Mode::Keys => provider.push(("experimental_bearer_token", Val::str(key))),
    }
    let provider = Val::Obj(
        provider
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    );
    // The default provider. (Codex 0.171 refuses the older top-level `profile` key: profiles
    // are now files of their own, chosen with `--profile`.)
    vec![
        (vec!["model_provider"], Val::str("baton")),
        (vec!["model_providers", "baton"], provider),
    ]
}

/// Gemini CLI: the Gemini API on a key (`gemini-api-key`, the auth type that reads
/// `GOOGLE_GEMINI_BASE_URL`), Baton's address and key in `~/.gemini/.env`.
fn gemini_cli(target: &Target) -> Vec<Entries> {
    vec![
        vec![(
            vec!["security", "auth", "selectedType"],
            Val::str("gemini-api-key"),
        )],
        vec![
            (vec!["GOOGLE_GEMINI_BASE_URL"], Val::str(&target.origin)),
            (vec!["GEMINI_API_KEY"], Val::str(&target.key)),
        ],
    ]
}

fn opencode(target: &Target) -> Entries {
    let options = Val::obj([
        ("baseURL", Val::str(format!("{}/v1", target.origin))),
        ("apiKey", Val::str(&target.key)),
    ]);
    let provider = Val::obj([
        ("npm", Val::str("@ai-sdk/openai-compatible")),
        ("name", Val::str("Baton")),
        ("options", options),
        (
            "models",
            Val::obj([("auto", Val::obj([("name", Val::str("Baton (auto)"))]))]),
        ),
    ]);
    vec![
        (vec!["provider", "baton"], provider),
        (vec!["model"], Val::str("baton/auto")),
    ]
}

/// opencode reads `opencode.jsonc` or `opencode.json`: the one that exists, else the plain one.
fn opencode_file(dir: &Path) -> PathBuf {
    let jsonc = dir.join("opencode.jsonc");
    if jsonc.exists() {
        jsonc
    } else {
        dir.join("opencode.json")
    }
}
