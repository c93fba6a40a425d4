//! `baton connect`: points Claude Code, Codex, Gemini CLI and opencode at Baton by editing their
//! own config files, and takes it back exactly.
//!
//! A connect is planned first ([`plan_connect`]): each file is read, parsed (a file that does not
//! parse is refused, never overwritten), Baton's entries are set in its syntax tree, and the
//! result is shown as a diff before anything is written. [`apply`] writes each file atomically
//! (through a temporary file and a rename, to the real file behind a symlink, keeping its mode)
//! after keeping the original in the journal (`<data dir>/connect/`), with the value each entry
//! had before. [`plan_undo`] puts the original back byte for byte when the file is as Baton left
//! it; when the user changed it since, it takes out only Baton's entries and keeps the rest.

mod apps;
pub mod doc;
mod journal;
mod types;

use std::path::{Path, PathBuf};

pub use apps::App;
use doc::{Doc, Val};
pub use journal::Manifest;
use journal::{FileRecord, Prior};
use types::{hex, value_sha};
pub use types::{ConnectError, Homes, Mode, Target};

/// The enabled providers that serve `app` on the client's own login (an Anthropic provider, or
/// ChatGPT's backend, with `credentials: "client"`): when there is one, connect defaults to
/// [`Mode::Login`].
pub fn login_providers<'a>(
    app: App,
    providers: impl IntoIterator<Item = &'a crate::config::ProviderConfig>,
) -> Vec<String> {
    use crate::config::Credentials;
    use crate::providers::kinds::{anthropic, chatgpt};
    let kind = match app {
        App::ClaudeCode => anthropic::KIND,
        App::Codex => chatgpt::KIND,
        App::GeminiCli | App::Opencode => return Vec::new(),
    };
    providers
        .into_iter()
        .filter(|p| p.enabled && p.kind == kind && p.credentials == Credentials::Client)
        .map(|p| p.name.clone().unwrap_or_else(|| p.id.clone()))
        .collect()
}

/// The mode to connect `app` in: the one asked for, else the client's own login when a
/// passthrough provider serves it (`login_providers`), else Baton's key.
pub fn choose_mode(
    app: App,
    asked: Option<Mode>,
    login_providers: &[String],
) -> Result<Mode, ConnectError> {
    let mode = asked.unwrap_or(if login_providers.is_empty() {
        Mode::Keys
    } else {
        Mode::Login
    });
    if mode == Mode::Login && !app.has_login_mode() {
        return Err(ConnectError::NoLogin(app));
    }
    Ok(mode)
}

/// The files `connect` writes for `app`.
pub fn files(app: App, homes: &Homes) -> Vec<PathBuf> {
    apps::files(app, homes)
}

/// Claude Code's status-line command: `'/path/to/baton' statusline`, with the address and the
/// data directory when they are not the defaults (Claude Code runs it through a shell, so each
/// part is quoted for one).
pub fn statusline_command(
    baton: &Path,
    origin: &str,
    data_dir: Option<&Path>,
) -> Result<String, String> {
    let quote = |s: &str| {
        shlex::try_quote(s)
            .map(|q| q.into_owned())
            .map_err(|e| format!("cannot quote {s:?} for a shell: {e}"))
    };
    let mut cmd = format!("{} statusline", quote(&baton.display().to_string())?);
    if origin != "http://127.0.0.1:8787" {
        cmd.push_str(&format!(" --url {}", quote(origin)?));
    }
    if let Some(d) = data_dir {
        cmd.push_str(&format!(" --data-dir {}", quote(&d.display().to_string())?));
    }
    Ok(cmd)
}

/// One file as it is and as it will be.
#[derive(Debug)]
pub struct FileChange {
    pub path: PathBuf,
    pub before: Option<String>,
    /// `None`: the file is removed (Baton created it, and undo takes it away).
    pub after: Option<String>,
    record: FileRecord,
    /// Undo puts the original back byte for byte (else only Baton's entries come out).
    exact: bool,
}

impl FileChange {
    pub fn changes(&self) -> bool {
        self.before != self.after
    }

    /// A unified diff of the change with `secrets` (and any credential shape) masked.
    pub fn diff(&self, secrets: &[&str]) -> String {
        let r = crate::redact::Redactor::default();
        r.set_secrets(secrets);
        let (a, b) = (
            self.before.as_deref().unwrap_or(""),
            self.after.as_deref().unwrap_or(""),
        );
        let name = self.path.display().to_string();
        let d = similar::TextDiff::from_lines(a, b)
            .unified_diff()
            .context_radius(3)
            .header(
                if self.before.is_some() {
                    &name
                } else {
                    "/dev/null"
                },
                if self.after.is_some() {
                    &name
                } else {
                    "/dev/null"
                },
            )
            .to_string();
        r.string(d)
    }
}

/// What connect or undo will do, before it does it.
#[derive(Debug)]
pub struct Plan {
    pub app: App,
    pub undo: bool,
    pub files: Vec<FileChange>,
    /// Things the user should know (an entry left alone, a backup kept).
    pub notes: Vec<String>,
    mode: Mode,
}

impl Plan {
    pub fn changes(&self) -> bool {
        self.files.iter().any(FileChange::changes)
    }

    /// A digest of every file's before and after: the UI's preview is written only if a new
    /// plan has the same one.
    pub fn fingerprint(&self) -> String {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for f in &self.files {
            for part in [&f.before, &f.after] {
                ctx.update(part.as_deref().map_or(b"\x00".as_slice(), str::as_bytes));
                ctx.update(b"\x01");
            }
        }
        hex(ctx.finish().as_ref())
    }
}

/// Reads `path` as text (`None` when it does not exist).
fn read(path: &Path) -> Result<Option<String>, ConnectError> {
    match std::fs::read(path) {
        Ok(b) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| ConnectError::Unreadable {
                path: path.to_path_buf(),
                detail: "it is not UTF-8 text".into(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConnectError::Read {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Plans pointing `app` at `target`. A second connect keeps the first one's original: undo
/// always goes back to the file as it was before Baton ever touched it.
pub fn plan_connect(
    app: App,
    homes: &Homes,
    target: &Target,
    journal_dir: &Path,
) -> Result<Plan, ConnectError> {
    let earlier = journal::load(journal_dir, app)?;
    let mut files = Vec::new();
    for spec in apps::specs(app, homes, target)? {
        let before = read(&spec.path)?;
        let mut doc = Doc::parse(spec.format, before.as_deref().unwrap_or("")).map_err(|e| {
            ConnectError::Unreadable {
                path: spec.path.clone(),
                detail: e.to_string(),
            }
        })?;
        let old = earlier.as_ref().and_then(|m| m.file(&spec.path));
        let mut prior = Vec::new();
        for (key, val) in &spec.entries {
            let was = old
                .and_then(|o| o.prior.iter().find(|p| p.key == *key))
                .map(|p| p.value.clone())
                .unwrap_or_else(|| doc.get(key));
            set(&mut doc, &spec.path, key, Some(val))?;
            prior.push(Prior {
                key: key.iter().map(|s| s.to_string()).collect(),
                value: was,
                wrote: value_sha(&val.to_json()),
            });
        }
        // An entry an earlier connect wrote that this one does not (the other mode's
        // credential) goes back to what it was.
        for p in old.map(|o| o.prior.as_slice()).unwrap_or_default() {
            if !spec.entries.iter().any(|(k, _)| *k == p.key) {
                let key: Vec<&str> = p.key.iter().map(String::as_str).collect();
                set(
                    &mut doc,
                    &spec.path,
                    &key,
                    p.value.clone().map(Val::Json).as_ref(),
                )?;
            }
        }
        let after = doc.render();
        let record = FileRecord::new(&spec.path, old, before.is_some(), &after, prior);
        files.push(FileChange {
            path: spec.path,
            before,
            after: Some(after),
            record,
            exact: true,
        });
    }
    let notes = match app {
        App::GeminiCli => vec![
            // Said in the user's language where it is shown (the Connect screen).
            crate::i18n::n_("Gemini CLI reads ~/.gemini/.env only in folders you trust (it asks the first time you start it in one); in others it does not reach Baton.").to_string(),
        ],
        _ => Vec::new(),
    };
    Ok(Plan {
        app,
        undo: false,
        files,
        notes,
        mode: target.mode,
    })
}

fn set(doc: &mut Doc, path: &Path, key: &[&str], val: Option<&Val>) -> Result<(), ConnectError> {
    doc.set(key, val).map_err(|e| ConnectError::Unreadable {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// Plans taking `app` back to how its files were before Baton connected it.
pub fn plan_undo(app: App, journal_dir: &Path) -> Result<Plan, ConnectError> {
    let manifest = journal::load(journal_dir, app)?.ok_or(ConnectError::NotConnected(app))?;
    let mut files = Vec::new();
    let mut notes = Vec::new();
    for rec in &manifest.files {
        let before = read(&rec.path)?;
        let (after, exact) = journal::undone(journal_dir, app, rec, before.as_deref(), &mut notes)?;
        files.push(FileChange {
            path: rec.path.clone(),
            before,
            after,
            record: rec.clone(),
            exact,
        });
    }
    Ok(Plan {
        app,
        undo: true,
        files,
        notes,
        mode: Mode::Keys,
    })
}

/// Writes a plan: each file checked against the plan's "before" first (a file that changed in
/// between is not touched); for a connect the originals and the journal are saved before any
/// file is written, so an interrupted connect can still be undone. Returns the files that were
/// readable by others and were made private (0600) because they now hold a key, with the mode
/// each had.
pub fn apply(plan: &Plan, journal_dir: &Path) -> Result<Vec<(PathBuf, u32)>, ConnectError> {
    for f in &plan.files {
        if read(&f.path)? != f.before {
            return Err(ConnectError::Changed {
                path: f.path.clone(),
            });
        }
    }
    if plan.undo {
        for f in &plan.files {
            journal::write_back(&f.path, f.after.as_deref(), &f.record)?;
        }
        let done: Vec<_> = plan.files.iter().map(|f| (&f.record, f.exact)).collect();
        return journal::forget(journal_dir, plan.app, &done).map(|()| Vec::new());
    }
    let mut records = Vec::new();
    for f in &plan.files {
        let mut rec = f.record.clone();
        journal::keep_original(journal_dir, plan.app, &mut rec, f.before.as_deref())?;
        rec.created_dirs.extend(journal::missing_dirs(&f.path));
        records.push(rec);
    }
    journal::save(journal_dir, plan.app, plan.mode, records)?;
    let mut tightened = Vec::new();
    for f in plan.files.iter().filter(|f| f.changes()) {
        if let Some(mode) = journal::write_file(&f.path, f.after.as_deref().unwrap_or_default())? {
            tightened.push((f.path.clone(), mode));
        }
    }
    Ok(tightened)
}

/// A model name the client asks for by default (`None`: it asks for Baton's `auto`).
pub fn sample_model(app: App) -> Option<&'static str> {
    match app {
        App::ClaudeCode => Some("claude-sonnet-4-5"),
        App::Codex => Some("gpt-5.5"),
        App::GeminiCli => Some("gemini-2.5-pro"),
        App::Opencode => None,
    }
}

/// The names of the clients Baton has connected (for the tray).
pub fn connected_names(journal_dir: &Path) -> Vec<&'static str> {
    App::ALL
        .into_iter()
        .filter(|a| journal::manifest_path(journal_dir, *a).is_file())
        .map(App::name)
        .collect()
}

/// The journal of `app`, when Baton has connected it.
pub fn connected(app: App, journal_dir: &Path) -> Result<Option<Manifest>, ConnectError> {
    journal::load(journal_dir, app)
}

#[cfg(test)]
mod tests;
