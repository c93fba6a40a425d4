//! Settings: notification preferences and the desktop link (client keys are in `clients`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Map, Value};

use super::error::ApiError;
use super::json::{object_body, JsonBody};
use super::state::AppState;
use crate::events::Notification;
use crate::gateway::Core;
use crate::i18n::{tr, Lang};

/// Which notifications are on, and the usage-window thresholds (percent used) that notify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyPrefs {
    pub off: Vec<Notification>,
    pub thresholds: Vec<u8>,
}

impl Default for NotifyPrefs {
    fn default() -> Self {
        Self {
            off: Vec::new(),
            thresholds: crate::limits::usage::DEFAULT_THRESHOLDS.to_vec(),
        }
    }
}

impl NotifyPrefs {
    pub fn wants(&self, n: Notification) -> bool {
        !self.off.contains(&n)
    }
}

/// The setting for the usage-window thresholds that notify (percent used).
const THRESHOLDS: &str = "quotaThresholds";

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal("store_failed", e)
}

fn invalid(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::field(param, message)
}

/// The notification preferences, typed: what the desktop shell asks before it notifies.
pub fn notify_prefs(core: &Core) -> NotifyPrefs {
    let stored = stored(core);
    NotifyPrefs {
        off: Notification::ALL
            .into_iter()
            .filter(|n| stored.get(n.name()).and_then(Value::as_bool) == Some(false))
            .collect(),
        thresholds: thresholds_in(&stored),
    }
}

/// The notification preferences with defaults filled in, as the admin API shows them.
pub fn notifications(core: &Core) -> Map<String, Value> {
    let prefs = notify_prefs(core);
    let mut m: Map<String, Value> = Notification::ALL
        .into_iter()
        .map(|n| (n.name().to_string(), Value::Bool(prefs.wants(n))))
        .collect();
    m.insert(THRESHOLDS.into(), json!(prefs.thresholds));
    m
}

fn thresholds_in(stored: &Value) -> Vec<u8> {
    stored
        .get(THRESHOLDS)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_u64)
                .filter_map(|n| u8::try_from(n).ok())
                .collect()
        })
        .unwrap_or_else(|| crate::limits::usage::DEFAULT_THRESHOLDS.to_vec())
}

/// Hands the stored thresholds to the usage book (at start and when they change).
pub fn apply_thresholds(core: &Core) {
    core.routing
        .usage
        .set_thresholds(thresholds_in(&stored(core)));
}

/// The notification preferences as stored (empty: all defaults).
fn stored(core: &Core) -> Value {
    core.store
        .setting("notifications")
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `quotaThresholds`: one to four whole percentages between 1 and 100.
fn parse_thresholds(v: &Value) -> Result<Value, ApiError> {
    let param = format!("notifications.{THRESHOLDS}");
    let bad = || {
        invalid(
            &param,
            crate::i18n::msg(
                "Give one to four whole percentages between 1 and 100, such as 80, 95.",
                &[],
            ),
        )
    };
    let a = v.as_array().ok_or_else(bad)?;
    if a.is_empty() || a.len() > 4 {
        return Err(bad());
    }
    let mut out: Vec<u64> = Vec::new();
    for n in a {
        let n = n
            .as_u64()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(bad)?;
        out.push(n);
    }
    out.sort_unstable();
    out.dedup();
    Ok(json!(out))
}

/// `GET /admin/settings`.
pub async fn get(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let next = core
        .store
        .setting(crate::store::LISTEN_SETTING)
        .map_err(internal)?;
    Ok(Json(json!({
        "notifications": notifications(core),
        "language": language(core),
        "server": {"address": state.addr.to_string(), "host": core.server.host, "port": state.addr.port(),
            // What the next start listens on when it was set here (else the config file's).
            "next": next,
            "change": "set the address here (used from the next start), or server.host / server.port in the config file, or --host / --port (which win)"},
    })))
}

object_body!(
    /// The settings' body.
    SettingsPatch,
    r#"{"notifications": {"failover": true, …}, "listen": {"host": "127.0.0.1", "port": 8787}}"#
);

object_body!(
    /// The Start at login toggle's body.
    AutostartBody,
    r#"{"autostart": true|false}"#
);

/// `PUT /admin/settings` with `{"notifications": {"failover": bool, …}}`.
pub async fn put(
    State(state): State<AppState>,
    JsonBody(SettingsPatch(v)): JsonBody<SettingsPatch>,
) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    if let Some(k) = v
        .keys()
        .find(|k| !["notifications", "listen", "language"].contains(&k.as_str()))
    {
        return Err(invalid(
            k,
            crate::i18n::msg(
                "`{k}` cannot be set here; `notifications`, `listen` and `language` can",
                &[("k", &k.to_string())],
            ),
        ));
    }
    if let Some(l) = v.get("language") {
        set_language(core, l)?;
        return Ok(Json(json!({"language": language(core)})));
    }
    if let Some(l) = v.get("listen") {
        let listen = set_listen(core, l)?;
        let warning = port_warning(&listen, state.addr);
        return Ok(Json(json!({"listen": listen, "warning": warning,
            "applies": "from the next start (Restart gateway in the tray, or restart baton serve)"})));
    }
    let Some(Value::Object(n)) = v.get("notifications") else {
        return Err(invalid("notifications", "send an object of true/false"));
    };
    let mut current = notifications(core);
    for (k, val) in n {
        if k == THRESHOLDS {
            current.insert(k.clone(), parse_thresholds(val)?);
            continue;
        }
        if Notification::parse(k).is_none() {
            let mut known: Vec<&str> = Notification::ALL
                .into_iter()
                .map(Notification::name)
                .collect();
            known.push(THRESHOLDS);
            return Err(invalid(
                &format!("notifications.{k}"),
                format!("unknown; known: {}", known.join(", ")),
            ));
        }
        let Some(on) = val.as_bool() else {
            return Err(invalid(
                &format!("notifications.{k}"),
                "must be true or false",
            ));
        };
        current.insert(k.clone(), Value::Bool(on));
    }
    core.store
        .set_setting("notifications", &Value::Object(current.clone()))
        .map_err(internal)?;
    apply_thresholds(core);
    Ok(Json(json!({"notifications": current})))
}

/// The language setting as the admin API shows it: the choice, what `auto` gives on this system,
/// and the languages there are.
fn language(core: &Core) -> Value {
    use crate::i18n::{Lang, Locale};
    let system = crate::i18n::system_locales();
    json!({
        "chosen": core.language_choice(),
        "system": Locale::resolve("auto", &system).lang.tag(),
        "available": Lang::ALL.map(|l| json!({"id": l.tag(), "name": l.native_name()})),
    })
}

/// `{"language": "auto" | "en" | "ja" | "zh-CN"}`: the UI's, the tray's and the notifications'.
fn set_language(core: &Core, v: &Value) -> Result<(), ApiError> {
    let known = || {
        let tags: Vec<&str> = crate::i18n::Lang::ALL.map(crate::i18n::Lang::tag).to_vec();
        crate::i18n::msg(
            "send \"auto\" (the system's language) or one of {tags}",
            &[("tags", &tags.join(", "))],
        )
    };
    let Some(tag) = v.as_str() else {
        return Err(invalid("language", known()));
    };
    if tag != "auto" && crate::i18n::Lang::parse(tag).is_none() {
        return Err(invalid(
            "language",
            crate::i18n::msg(
                "`{tag}` is not a language Baton has; {known}",
                &[("tag", tag), ("known", &known())],
            ),
        ));
    }
    core.store
        .set_setting(crate::i18n::SETTING, &Value::String(tag.into()))
        .map_err(internal)?;
    core.apply_language();
    // The tray's menu and tooltip are rebuilt in the new language.
    core.routing
        .events
        .emit(crate::events::Event::ConfigChanged);
    Ok(())
}

/// Start at login runs this very binary: when it lives in a Cargo build directory (`target/…`
/// or the `baton-target` cache), `cargo clean` would silently break the next login's start.
pub fn build_dir_warning(exe: &std::path::Path, l: Lang) -> Option<String> {
    let parts: Vec<&str> = exe
        .components()
        .filter_map(|c| c.as_os_str().to_str())
        .collect();
    let in_build = parts.windows(2).any(|w| {
        (w[0] == "target" || w[0].ends_with("-target")) && (w[1] == "debug" || w[1] == "release")
    });
    in_build.then(|| tr(l,
        "It starts {path}, which is in a build directory: `cargo clean` or a rebuild elsewhere would stop it starting. Copy the app somewhere stable (e.g. ~/.local/bin) and turn this on from there.",
        &[("path", &exe.display().to_string())],
    ))
}

/// Keys a start at login may not find: the enabled providers' keys read from environment
/// variables that this process has (a shell's `export`s, which a login session does not run).
/// Keys pasted into Baton are in the credential store and need nothing.
pub fn login_env_warning(core: &Core, l: Lang) -> Option<String> {
    let snap = core.routing.snapshot.load();
    let in_file = crate::config::env_file::names();
    // A provider from the config file takes its keys from the environment only: the UI cannot
    // store one for it, so it is not told to.
    let from_file: Vec<String> = core
        .store
        .load_providers()
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.owner == crate::store::Owner::File)
        .map(|s| s.config.id)
        .collect();
    let (mut names, mut pastable): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    for p in snap.providers.iter().filter(|p| p.config.enabled) {
        for k in &p.config.keys {
            let from_env = k.stored.is_none() && !k.env.is_empty() && !in_file.contains(&k.env);
            if from_env && std::env::var_os(&k.env).is_some() && !names.contains(&k.env.as_str()) {
                names.push(&k.env);
                if !from_file.iter().any(|id| id == p.id()) {
                    pastable.push(&k.env);
                }
            }
        }
    }
    let file = crate::config::env_file::path()
        .map_or("~/.config/baton/env".into(), |p| p.display().to_string());
    let mut out = tr(l,
        "A start at login does not run your shell's exports, so these keys may be missing then: {names}. Put NAME=value lines in {file} (Baton reads it at every start; chmod 600).",
        &[("names", &names.join(", ")), ("file", &file)],
    );
    if !pastable.is_empty() {
        out.push(' ');
        out.push_str(&tr(l,
            "Or paste these into Baton (Providers → Edit; they go to the credential store): {names}.",
            &[("names", &pastable.join(", "))],
        ));
    }
    (!names.is_empty()).then_some(out)
}

/// What to know when start at login is turned on: the binary's place, and the keys a login
/// start may not see.
pub fn autostart_warning(core: &Core) -> Option<String> {
    let l = core.locale().lang;
    let parts: Vec<String> = [
        std::env::current_exe()
            .ok()
            .and_then(|exe| build_dir_warning(&exe, l)),
        login_env_warning(core, l),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// `GET /admin/desktop`: whether Baton runs inside the desktop app, and its start-at-login state.
pub async fn desktop(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let core = &state.core;
    let link = core.desktop.load();
    Ok(Json(match link.as_deref() {
        Some(l) => json!({"present": true, "autostart": (l.autostart)(),
            "paused": core.paused.load(std::sync::atomic::Ordering::Relaxed)}),
        None => json!({"present": false}),
    }))
}

/// `PUT /admin/desktop` with `{"autostart": bool}`: the UI's Start at login toggle.
pub async fn set_desktop(
    State(state): State<AppState>,
    JsonBody(AutostartBody(v)): JsonBody<AutostartBody>,
) -> Result<Json<Value>, ApiError> {
    let link = desktop_link(
        &state.core,
        "Start at login is set by the desktop app; this Baton runs headless (baton serve).",
    )?;
    let Some(on) = v.get("autostart").and_then(Value::as_bool) else {
        return Err(invalid("autostart", "must be true or false"));
    };
    (link.set_autostart)(on).map_err(|e| ApiError::internal("autostart", e))?;
    let warning = on.then(|| autostart_warning(&state.core)).flatten();
    Ok(Json(
        json!({"present": true, "autostart": (link.autostart)(), "warning": warning}),
    ))
}

/// What the user should know about a new listen address before the restart: a port that needs
/// administrator rights, or one another program holds now. (Checked by trying to listen there
/// for a moment; the address Baton listens on now is not tried.)
fn port_warning(listen: &Value, now: std::net::SocketAddr) -> Option<String> {
    let host = listen["host"].as_str()?;
    let port = u16::try_from(listen["port"].as_u64()?).ok()?;
    if port == now.port() {
        return None;
    }
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    let privileged = port < 1024;
    match std::net::TcpListener::bind((host, port)) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Some(crate::i18n::msg("Another program is using port {port} now: Baton cannot start there until it is free.", &[("port", &port.to_string())])),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied || privileged => Some(crate::i18n::msg("Port {port} needs administrator rights on this system, so Baton will not be able to start there; pick a port from 1024 up (8787 is Baton's own).", &[("port", &port.to_string())])),
        Ok(_) if privileged => Some(crate::i18n::msg("Ports below 1024 need administrator rights on most systems: Baton can use {port} here only because it runs with them.", &[("port", &port.to_string())])),
        _ => None,
    }
}

/// Validates and keeps the listen address chosen in Settings: `{"host": "127.0.0.1", "port":
/// 8790}`. The config file's rules apply (a non-loopback host needs gateway keys).
fn set_listen(core: &Core, l: &Value) -> Result<Value, ApiError> {
    let Value::Object(m) = l else {
        return Err(invalid(
            "listen",
            "send {\"host\": \"127.0.0.1\", \"port\": 8787}",
        ));
    };
    if let Some(k) = m
        .keys()
        .find(|k| k.as_str() != "host" && k.as_str() != "port")
    {
        return Err(invalid(
            &format!("listen.{k}"),
            "unknown; send host and port",
        ));
    }
    let host = match m.get("host") {
        Some(Value::String(h)) if !h.trim().is_empty() && h.len() <= 253 => h.trim().to_string(),
        _ => {
            return Err(invalid(
                "listen.host",
                crate::i18n::msg("give an address such as 127.0.0.1 or localhost", &[]),
            ))
        }
    };
    let port = match m.get("port").and_then(Value::as_u64) {
        Some(p @ 1..=65535) => p as u16,
        _ => {
            return Err(invalid(
                "listen.port",
                crate::i18n::msg("must be a whole number from 1 to 65535", &[]),
            ))
        }
    };
    let mut config = core.file_config.clone();
    config.server.host = host.clone();
    config.server.port = port;
    crate::config::validate(&config, std::path::Path::new("settings")).map_err(|e| match e {
        crate::config::ConfigError::Field { path, message, .. } => {
            invalid(&path.replace("server.", "listen."), message)
        }
        other => invalid("listen", other.to_string()),
    })?;
    if host.parse::<std::net::IpAddr>().is_err() && host != "localhost" {
        return Err(invalid(
            "listen.host",
            crate::i18n::msg(
                "`{host}` is not an IP address (or localhost)",
                &[("host", &host.to_string())],
            ),
        ));
    }
    let v = json!({"host": host, "port": port});
    core.store
        .set_setting(crate::store::LISTEN_SETTING, &v)
        .map_err(internal)?;
    tracing::info!(%host, port, "listen address set for the next start");
    Ok(v)
}

/// `POST /admin/desktop/restart`: the desktop app restarts the gateway (the UI's "Restart now"
/// after changing the address). 409 when Baton runs headless.
pub async fn restart(State(state): State<AppState>) -> Result<StatusCode, ApiError> {
    let link = desktop_link(
        &state.core,
        "Only the desktop app can restart its gateway; restart baton serve yourself.",
    )?;
    (link.restart)();
    Ok(StatusCode::ACCEPTED)
}

/// The desktop shell's hooks, or a 409 `no_desktop` saying what to do instead (headless).
fn desktop_link(
    core: &Core,
    headless: &'static str,
) -> Result<std::sync::Arc<crate::DesktopLink>, ApiError> {
    core.desktop.load_full().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            "no_desktop",
            headless,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::build_dir_warning;
    use std::path::Path;

    #[test]
    fn a_binary_in_a_build_directory_gets_a_warning_an_installed_one_does_not() {
        for built in [
            "/home/u/src/baton/target/release/baton-desktop",
            "/home/u/.cache/baton-target/debug/baton-desktop",
        ] {
            let w = build_dir_warning(Path::new(built), crate::i18n::Lang::En).expect(built);
            assert!(w.contains("cargo clean") && w.contains(built), "{w}");
        }
        for installed in [
            "/usr/bin/baton-desktop",
            "/home/u/.local/bin/baton-desktop",
            "/opt/target/bin/baton",
        ] {
            assert_eq!(
                build_dir_warning(Path::new(installed), crate::i18n::Lang::En),
                None,
                "{installed}"
            );
        }
    }
}
