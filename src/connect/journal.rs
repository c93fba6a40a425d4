//! The journal of `baton connect` (`<data dir>/connect/`): per client, the original bytes of
//! every file it changed and, per entry, the value it replaced. Kept private to the user (the
//! originals may hold the user's own keys). Files are written through a temporary file and a
//! rename, so a crash leaves either the old file or the new one, never half of one.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::doc::{Doc, Format, Val};
use super::types::{sha, value_sha, App, ConnectError, Mode};

/// What one connect of one client wrote.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub app: String,
    pub mode: String,
    pub at_ms: i64,
    pub files: Vec<FileRecord>,
}

impl Manifest {
    pub fn file(&self, path: &Path) -> Option<&FileRecord> {
        self.files.iter().find(|f| f.path == path)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileRecord {
    pub path: PathBuf,
    /// Whether the file existed before Baton's first connect.
    pub existed: bool,
    /// The original's name in the journal, when it existed.
    pub backup: Option<String>,
    /// SHA-256 of the text Baton wrote: the file is "as Baton left it" while it matches.
    pub written: String,
    pub prior: Vec<Prior>,
    /// Folders Baton created for the file (removed on undo when empty).
    pub created_dirs: Vec<PathBuf>,
}

/// One entry: its value before Baton's first connect, and a digest of what Baton put there.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Prior {
    pub key: Vec<String>,
    pub value: Option<Value>,
    pub wrote: String,
}

impl FileRecord {
    pub fn new(
        path: &Path,
        old: Option<&FileRecord>,
        exists: bool,
        after: &str,
        prior: Vec<Prior>,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            existed: old.map_or(exists, |o| o.existed),
            backup: old.and_then(|o| o.backup.clone()),
            written: sha(after),
            prior,
            created_dirs: old.map(|o| o.created_dirs.clone()).unwrap_or_default(),
        }
    }

    fn format(&self) -> Format {
        super::apps::format_of(&self.path)
    }
}

pub fn manifest_path(dir: &Path, app: App) -> PathBuf {
    dir.join(format!("{}.json", app.id()))
}

fn journal_err(path: &Path, e: impl std::fmt::Display) -> ConnectError {
    ConnectError::Journal {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

pub fn load(dir: &Path, app: App) -> Result<Option<Manifest>, ConnectError> {
    let path = manifest_path(dir, app);
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| journal_err(&path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(journal_err(&path, e)),
    }
}

pub fn save(dir: &Path, app: App, mode: Mode, files: Vec<FileRecord>) -> Result<(), ConnectError> {
    let m = Manifest {
        app: app.id().into(),
        mode: mode.id().into(),
        at_ms: crate::clock::unix_ms(),
        files,
    };
    let path = manifest_path(dir, app);
    let text = serde_json::to_string_pretty(&m).map_err(|e| journal_err(&path, e))?;
    private_dir(dir)?;
    write_file(&path, &text).map(drop)
}

fn private_dir(dir: &Path) -> Result<(), ConnectError> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
    b.create(dir).map_err(|e| journal_err(dir, e))
}

/// Keeps the file's original in the journal, the first time Baton changes it.
pub fn keep_original(
    dir: &Path,
    app: App,
    rec: &mut FileRecord,
    before: Option<&str>,
) -> Result<(), ConnectError> {
    let Some(text) = before.filter(|_| rec.backup.is_none() && rec.existed) else {
        return Ok(());
    };
    let folder = dir.join(app.id());
    private_dir(&folder)?;
    let file = rec
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file");
    let name = format!(
        "{}.{}.orig",
        file,
        &sha(&rec.path.display().to_string())[..8]
    );
    write_file(&folder.join(&name), text)?;
    rec.backup = Some(name);
    Ok(())
}

/// The text a file goes back to on undo (`None`: remove it), given what it holds now. Exact
/// when the file is as Baton left it (or gone); otherwise only Baton's entries are taken out.
pub fn undone(
    dir: &Path,
    app: App,
    rec: &FileRecord,
    now: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(Option<String>, bool), ConnectError> {
    let exact = now.is_none_or(|t| sha(t) == rec.written);
    if exact {
        if !rec.existed {
            return Ok((None, true));
        }
        let path = dir
            .join(app.id())
            .join(rec.backup.as_deref().unwrap_or_default());
        let text = std::fs::read_to_string(&path).map_err(|e| journal_err(&path, e))?;
        return Ok((Some(text), true));
    }
    let now = now.unwrap_or_default();
    let mut doc = Doc::parse(rec.format(), now).map_err(|e| ConnectError::Unreadable {
        path: rec.path.clone(),
        detail: e.to_string(),
    })?;
    for p in &rec.prior {
        let key: Vec<&str> = p.key.iter().map(String::as_str).collect();
        if doc.get(&key).map(|v| value_sha(&v)) != Some(p.wrote.clone()) {
            notes.push(format!(
                "{}: left `{}` as it is (it changed since Baton wrote it)",
                rec.path.display(),
                p.key.join(".")
            ));
            continue;
        }
        doc.set(&key, p.value.clone().map(Val::Json).as_ref())
            .map_err(|e| ConnectError::Unreadable {
                path: rec.path.clone(),
                detail: e.to_string(),
            })?;
    }
    notes.push(format!(
        "{} changed since Baton connected {}: only Baton's entries were taken out, the rest stays{}",
        rec.path.display(),
        app.name(),
        match &rec.backup {
            Some(b) => format!(" (the original is kept at {})", dir.join(app.id()).join(b).display()),
            None => String::new(),
        }
    ));
    Ok((Some(doc.render()), false))
}

/// Undo's write: the file's text back, or the file (and the folders Baton made) removed.
pub fn write_back(path: &Path, text: Option<&str>, rec: &FileRecord) -> Result<(), ConnectError> {
    match text {
        Some(t) => write_file(path, t).map(drop),
        None => {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ConnectError::Write {
                        path: path.to_path_buf(),
                        source: e,
                    })
                }
            }
            // Deepest first; a folder the user has put something in since stays.
            for d in rec.created_dirs.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
            Ok(())
        }
    }
}

/// Drops the journal of `app` once undone; originals of an inexact undo are kept.
pub fn forget(dir: &Path, app: App, done: &[(&FileRecord, bool)]) -> Result<(), ConnectError> {
    for (rec, exact) in done {
        if let (Some(b), true) = (&rec.backup, exact) {
            let _ = std::fs::remove_file(dir.join(app.id()).join(b));
        }
    }
    let _ = std::fs::remove_dir(dir.join(app.id()));
    let path = manifest_path(dir, app);
    std::fs::remove_file(&path).map_err(|e| journal_err(&path, e))
}

/// The folders above `path` that do not exist yet, outermost first.
pub fn missing_dirs(path: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = path
        .ancestors()
        .skip(1)
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// Writes `text` to `path` atomically: to the real file behind a symlink (a dotfiles link
/// stays a link), with the file's mode kept (0600 for a new one: it holds a key). A file that
/// will hold a key is made private (0600) when it was readable by others; the mode it had is
/// returned then, so the user is told.
pub fn write_file(path: &Path, text: &str) -> Result<Option<u32>, ConnectError> {
    let err = |e: std::io::Error| ConnectError::Write {
        path: path.to_path_buf(),
        source: e,
    };
    let real = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).map_err(err)?,
        _ => path.to_path_buf(),
    };
    let parent = real.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(err)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".baton-connect-")
        .tempfile_in(parent)
        .map_err(err)?;
    tmp.write_all(text.as_bytes()).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    // tempfile creates 0600; an existing file keeps its own mode, unless others could read
    // the key it now holds.
    let mut tightened = None;
    if let Ok(m) = std::fs::metadata(&real) {
        let mut perms = m.permissions();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = perms.mode() & 0o777;
            if mode & 0o077 != 0 && crate::redact::looks_like_credential(text) {
                tightened = Some(mode);
                perms.set_mode(0o600);
            }
        }
        std::fs::set_permissions(tmp.path(), perms).map_err(err)?;
    }
    tmp.persist(&real).map_err(|e| err(e.error))?;
    Ok(tightened)
}
