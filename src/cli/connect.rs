//! `baton connect CLIENT [--undo]`: writes the client's own config so it reaches this Baton,
//! after showing the change; `--undo` puts the files back. The work is `baton::connect`'s; this
//! finds the address, the key and the mode, and talks to the person at the terminal.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use baton::connect::{self, App, ConnectError, Homes, Mode, Plan, Target};

use super::commands::CmdResult;

/// What `baton connect` was asked.
pub struct ConnectOptions {
    pub client: String,
    pub undo: bool,
    pub dry_run: bool,
    pub yes: bool,
    /// `Some(Login)` / `Some(Keys)` when the user chose; else decided from the providers.
    pub mode: Option<Mode>,
    pub statusline: bool,
    pub url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub key_env: Option<String>,
    pub config: Option<PathBuf>,
}

pub fn run(o: ConnectOptions) -> CmdResult {
    let app = App::parse(&o.client).map_err(|e| e.to_string())?;
    let dir = o.data_dir.clone().unwrap_or_else(baton::default_data_dir);
    let journal = dir.join("connect");
    // Read once: the connect needs it, undo only to mask it in the diff.
    let key = gateway_key(&o, &dir);
    let plan = if o.undo {
        connect::plan_undo(app, &journal)
    } else {
        let target = target(app, &o, &dir, key.clone()?)?;
        let homes = Homes::from_env().ok_or_else(|| ConnectError::NoHome.to_string())?;
        connect::plan_connect(app, &homes, &target, &journal)
    }
    .map_err(|e| e.to_string())?;
    show(&plan, key.as_deref().ok());
    if !plan.changes() && !plan.undo {
        outln!("{} already points at Baton: nothing to write.", app.name());
        return Ok(ExitCode::SUCCESS);
    }
    if o.dry_run {
        outln!("Dry run: nothing was written.");
        return Ok(ExitCode::SUCCESS);
    }
    if !o.yes && !confirm(&plan)? {
        outln!("Nothing was written.");
        return Ok(ExitCode::from(1));
    }
    let tightened = connect::apply(&plan, &journal).map_err(|e| e.to_string())?;
    for f in &plan.files {
        match (&f.after, plan.undo) {
            (None, _) => outln!("Removed {} (Baton had created it).", f.path.display()),
            (Some(_), true) => outln!("Restored {}.", f.path.display()),
            (Some(_), false) => outln!("Wrote {}.", f.path.display()),
        }
    }
    for (path, mode) in &tightened {
        outln!(
            "Made {} private (mode {mode:o} → 600): it holds a key, and others could read it.",
            path.display()
        );
    }
    if !plan.undo {
        // The undo reads this data directory's journal: a --data-dir given here goes with it.
        let dir_flag = o
            .data_dir
            .as_ref()
            .map(|d| format!(" --data-dir {}", shell_word(&d.display().to_string())))
            .unwrap_or_default();
        outln!(
            "{} now reaches Baton. To put the files back: baton connect {} --undo{dir_flag}",
            app.name(),
            app.id()
        );
        if let Some(hint) = unmapped_hint(app, &o, &dir) {
            outln!("{hint}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// When the running Baton would answer the client's own model names with 404: what to do.
/// Silent when Baton cannot be asked (connect works without it running).
fn unmapped_hint(app: App, o: &ConnectOptions, dir: &Path) -> Option<String> {
    let url = super::commands::gateway_url(o.url.clone(), dir);
    let key = super::commands::admin_key_of(Some(dir.to_path_buf()), None).ok()?;
    let list = super::commands::runtime()
        .ok()?
        .block_on(super::status::admin_json(
            &url,
            &key,
            "/admin/connect",
            &[],
            std::time::Duration::from_secs(2),
        ))?;
    let me = list["clients"]
        .as_array()?
        .iter()
        .find(|c| c["id"] == app.id())?;
    (me["namesServed"] == false).then(|| {
        format!(
            "Next: {} asks for its own model names ({}…), which no provider serves yet: map them on Baton's Connect screen (\"Map {}'s names\") or in modelMap, or its requests get 404.",
            app.name(),
            connect::sample_model(app).unwrap_or_default(),
            app.name()
        )
    })
}

/// The address, key and mode the client is pointed at.
fn target(app: App, o: &ConnectOptions, dir: &Path, key: String) -> Result<Target, String> {
    let origin = super::commands::gateway_url(o.url.clone(), dir)
        .trim_end_matches('/')
        .trim_end_matches("/v1")
        .to_string();
    let login = match o.mode {
        Some(_) => Vec::new(),
        None => {
            let providers = super::commands::live_providers(dir).unwrap_or_default();
            connect::login_providers(app, &providers)
        }
    };
    let mode =
        connect::choose_mode(app, o.mode, &login).map_err(|e| format!("{e}; drop --login"))?;
    if o.mode.is_none() && mode == Mode::Login {
        outln!(
            "{} will use its own login through {} (pass --keys to use Baton's providers instead).",
            app.name(),
            login.join(", ")
        );
    }
    let statusline = match (o.statusline, app) {
        (false, _) => None,
        (true, App::ClaudeCode) => Some(statusline_command(o, &origin)?),
        (true, _) => {
            return Err("--statusline is for claude-code (Claude Code's status line)".into())
        }
    };
    Ok(Target {
        origin,
        key,
        mode,
        statusline,
    })
}

/// The gateway key: `--key-env`, else the config file's first gateway key, else the one Baton
/// generated in the data directory.
fn gateway_key(o: &ConnectOptions, dir: &Path) -> Result<String, String> {
    let env = match (&o.key_env, &o.config) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(file)) => baton::config::load_file(file)
            .map_err(|e| e.to_string())?
            .gateway_keys
            .first()
            .map(|k| k.env.clone()),
        (None, None) => None,
    };
    if let Some(var) = env {
        return std::env::var(&var)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| format!("the gateway key's variable {var} is not set in this shell"));
    }
    let path = dir.join(baton::auth::GATEWAY_KEY_FILE);
    std::fs::read_to_string(&path)
        .map(|k| k.trim().to_string())
        .map_err(|_| {
            format!(
                "no gateway key at {}: start Baton once (baton serve, or the tray app) so it makes one, or pass --key-env VAR",
                path.display()
            )
        })
}

/// Claude Code's status line runs this very binary (with an absolute data directory).
fn statusline_command(o: &ConnectOptions, origin: &str) -> Result<String, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot tell where this baton binary is: {e}"))?;
    let dir = match &o.data_dir {
        Some(d) => Some(std::path::absolute(d).map_err(|e| format!("{}: {e}", d.display()))?),
        None => None,
    };
    connect::statusline_command(&exe, origin, dir.as_deref())
}

fn show(plan: &Plan, key: Option<&str>) {
    let secrets: Vec<&str> = key.into_iter().collect();
    for f in &plan.files {
        if f.changes() {
            out!("{}", f.diff(&secrets));
        } else {
            outln!("{}: unchanged", f.path.display());
        }
    }
    for n in &plan.notes {
        outln!("note: {n}");
    }
}

/// Asks at a terminal; refuses to guess when nobody can answer.
fn confirm(plan: &Plan) -> Result<bool, String> {
    if !std::io::stdin().is_terminal() {
        return Err(
            "not writing without a yes: pass --yes to write, or --dry-run to only look".into(),
        );
    }
    let what = if plan.undo {
        "Put these files back"
    } else {
        "Write these changes"
    };
    out!("{what}? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "Yes"))
}

/// `word` as one word for a POSIX shell (quoted as the status-line command is, by `shlex`;
/// a word no shell can hold, with a NUL, is left as it is).
fn shell_word(word: &str) -> String {
    shlex::try_quote(word).map_or_else(|_| word.to_string(), |q| q.into_owned())
}

#[cfg(test)]
mod tests {
    /// Each path reads back as the one word it was: as it is when plain, quoted otherwise.
    #[test]
    fn a_path_is_one_shell_word() {
        assert_eq!(super::shell_word("/home/me/.baton"), "/home/me/.baton");
        for path in ["/tmp/my data", "/tmp/it's", "$HOME", "/tmp/a\"b`c`"] {
            let quoted = super::shell_word(path);
            assert_ne!(quoted, path, "{path} is quoted");
            assert_eq!(
                shlex::split(&quoted),
                Some(vec![path.to_string()]),
                "{quoted}"
            );
        }
    }
}
