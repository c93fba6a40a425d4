//! The documented key file, `~/.config/baton/env` (`$XDG_CONFIG_HOME/baton/env`; the platform's
//! config directory elsewhere): `NAME=value` lines, read at every start of `baton` and the tray
//! app. A start at login or a service does not run the shell's `export`s; keys kept in
//! environment variables go here instead, and a variable already set in the environment wins.
//! Values are never logged or printed; a line that is not `NAME=value` is reported by number.

use std::path::PathBuf;

/// Where the file is looked for.
pub fn path() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(dirs::config_dir)
        .map(|d| d.join("baton").join("env"))
}

/// What a load found: the variables it set (names only) and what the user should fix.
#[derive(Debug, Default, PartialEq)]
pub struct Loaded {
    pub set: Vec<String>,
    pub warnings: Vec<String>,
}

/// `NAME=value` pairs of the file's text, with `export ` and matching quotes allowed, `#`
/// comments and blank lines skipped; a bad line becomes a warning naming its number.
pub fn parse(text: &str) -> (Vec<(String, String)>, Vec<String>) {
    let mut pairs = Vec::new();
    let mut warnings = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((name, value)) = line.split_once('=') else {
            warnings.push(format!("line {}: not NAME=value", n + 1));
            continue;
        };
        let name = name.trim();
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            warnings.push(format!("line {}: {name:?} is not a variable name", n + 1));
            continue;
        }
        let value = value.trim();
        let unquoted = ['"', '\'']
            .iter()
            .find_map(|q| {
                value
                    .strip_prefix(*q)
                    .and_then(|v| v.strip_suffix(*q))
                    .filter(|_| value.len() >= 2)
            })
            .unwrap_or(value);
        pairs.push((name.to_string(), unquoted.to_string()));
    }
    (pairs, warnings)
}

/// Reads the file (when there is one) into this process's environment. Call it first thing in
/// `main`, before any thread starts.
pub fn load() -> Loaded {
    let Some(path) = path() else {
        return Loaded::default();
    };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Loaded::default();
    };
    let (pairs, mut warnings) = parse(&text);
    for w in &mut warnings {
        *w = format!("{}: {w}", path.display());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o077 != 0 {
            warnings.push(format!(
                "{} holds keys and other users can read it: chmod 600 {}",
                path.display(),
                path.display()
            ));
        }
    }
    let mut set = Vec::new();
    for (name, value) in pairs {
        if std::env::var_os(&name).is_none() {
            // Safe here: called before any other thread exists (see above).
            std::env::set_var(&name, value);
            set.push(name);
        }
    }
    Loaded { set, warnings }
}

/// The variables the file gives (names only), e.g. to tell which keys a login start will have.
pub fn names() -> Vec<String> {
    path()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| parse(&t).0.into_iter().map(|(n, _)| n).collect())
        .unwrap_or_default()
}

/// Logs what a load did (after logging is set up): the names it set, and each warning.
pub fn report(loaded: &Loaded) {
    if !loaded.set.is_empty() {
        tracing::info!(variables = %loaded.set.join(", "), "keys read from the env file");
    }
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn names_values_quotes_exports_and_bad_lines() {
        let (pairs, warnings) = parse(
            "# keys\nGROQ_API_KEY=gsk-1\nexport OPENAI_API_KEY = \"sk-2 x\"\n\nA='b=c'\n1BAD=x\nno equals\nB=\n",
        );
        assert_eq!(
            pairs,
            [
                ("GROQ_API_KEY".to_string(), "gsk-1".to_string()),
                ("OPENAI_API_KEY".to_string(), "sk-2 x".to_string()),
                ("A".to_string(), "b=c".to_string()),
                ("B".to_string(), String::new()),
            ]
        );
        assert_eq!(
            warnings,
            [
                "line 6: \"1BAD\" is not a variable name",
                "line 7: not NAME=value"
            ]
        );
        assert!(
            !warnings.join(" ").contains("gsk-1"),
            "values are never in a warning"
        );
    }
}
