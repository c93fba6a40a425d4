//! How a CLI is found and what it is given (a leaf of the CLI machinery): its executable
//! resolved and checked (never a shell wrapper), and the environment one call gets.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::config::ProviderKind;

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
