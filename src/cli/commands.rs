//! The `baton` subcommands other than `serve`. Each returns the exit status, or an error message
//! that the binary prints once (exit status 2).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use baton::config::{self, ConfigFile, ProviderConfig};
use baton::store::Store;

pub type CmdResult = Result<ExitCode, String>;

pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

fn data_dir(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(baton::default_data_dir)
}

/// Opens the database of a Baton that has run in `dir`.
fn existing_store(dir: &Path) -> Result<Store, String> {
    if !dir.join("baton.db").exists() {
        return Err(format!(
            "no configuration: {} holds no Baton database; pass --config FILE or the --data-dir of a Baton that has run",
            dir.display()
        ));
    }
    Store::open(dir, &Default::default()).map_err(|e| e.to_string())
}

pub fn live_providers(dir: &Path) -> Result<Vec<ProviderConfig>, String> {
    let store = existing_store(dir)?;
    let stored = store.load_providers().map_err(|e| e.to_string())?;
    let mut providers: Vec<ProviderConfig> = stored.iter().map(|s| s.effective()).collect();
    providers.sort_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)));
    Ok(providers)
}

/// `baton status`: 0 when some enabled provider is ready, 1 when none is.
/// The running gateway's base URL: the one given (`--url`, `BATON_URL`), else the listen
/// address set in Settings (kept in the data directory), else `http://127.0.0.1:8787`. A
/// gateway listening on every address is asked on loopback.
pub fn gateway_url(given: Option<String>, dir: &Path) -> String {
    if let Some(u) = given {
        return u;
    }
    let listen = Store::setting_at(dir, baton::store::LISTEN_SETTING);
    let host = listen
        .as_ref()
        .and_then(|l| l.get("host")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "127.0.0.1".into());
    let port = listen
        .as_ref()
        .and_then(|l| l.get("port")?.as_u64())
        .unwrap_or(8787);
    let host = match host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".to_string(),
        "::" | "[::]" => "[::1]".to_string(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.to_string(),
    };
    format!("http://{host}:{port}")
}

/// The admin key given, else the one in the data directory's `admin.key`.
pub fn admin_key_of(dir: Option<PathBuf>, given: Option<String>) -> Result<String, String> {
    if let Some(k) = given {
        return Ok(k);
    }
    let path = data_dir(dir).join(baton::auth::ADMIN_KEY_FILE);
    let k = std::fs::read_to_string(&path).map_err(|e| {
        super::status::StatusError::Key {
            path: path.display().to_string(),
            reason: e.to_string(),
        }
        .to_string()
    })?;
    Ok(k.trim().to_string())
}

/// `baton statusline`: one short line for a client's status bar (Claude Code's `statusLine`
/// command gets its session's JSON on stdin). Never an error trace: when Baton cannot be
/// reached, the line says "Baton off".
pub fn statusline(
    url: Option<String>,
    dir: Option<PathBuf>,
    admin_key: Option<String>,
) -> CmdResult {
    use std::io::{IsTerminal, Read};
    let mut input = String::new();
    if !std::io::stdin().is_terminal() {
        let _ = std::io::stdin().take(1 << 20).read_to_string(&mut input);
    }
    let session = serde_json::from_str::<serde_json::Value>(&input)
        .ok()
        .and_then(|v| v.get("session_id")?.as_str().map(str::to_string));
    let url = gateway_url(url, &data_dir(dir.clone()));
    let line = admin_key_of(dir, admin_key).ok().and_then(|key| {
        runtime()
            .ok()?
            .block_on(super::status::statusline(&url, &key, session.as_deref()))
    });
    let line = line.unwrap_or_else(|| "Baton off".to_string());
    // One line of visible text, whatever a provider's name holds.
    let clean: String = line.chars().filter(|c| !c.is_control()).take(200).collect();
    outln!("{clean}");
    Ok(ExitCode::SUCCESS)
}

pub fn status(
    url: Option<String>,
    dir: Option<PathBuf>,
    admin_key: Option<String>,
    json: bool,
) -> CmdResult {
    use super::status;
    let url = &gateway_url(url, &data_dir(dir.clone()));
    let key = admin_key_of(dir, admin_key)?;
    let state = runtime()?
        .block_on(status::fetch(url, &key))
        .map_err(|e| e.to_string())?;
    let summary = status::Summary::of(&state);
    let rows = &summary.providers;
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&summary).unwrap_or_default()
        );
    } else if rows.is_empty() {
        outln!("No providers configured.");
    } else {
        out!("{}", summary.headline(state.now_ms).unwrap_or_default());
        out!(
            "{}",
            status::render(rows, state.now_ms, status::use_color())
        );
        out!("{}", status::render_windows(rows, state.now_ms));
    }
    // 0: a request with a gateway key can be served now.
    Ok(if summary.servable {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The providers `baton probe` tries: the ones named (any), else every enabled one, from the
/// config file given or the live configuration.
fn probe_targets(o: &ProbeOptions) -> Result<Vec<config::ProviderConfig>, String> {
    let mut providers = match &o.config {
        Some(path) => {
            config::load_file(path)
                .map_err(|e| e.to_string())?
                .providers
        }
        None => live_providers(&data_dir(o.data_dir.clone()))?,
    };
    let unknown: Vec<&String> = o
        .providers
        .iter()
        .filter(|id| !providers.iter().any(|p| &p.id == *id))
        .collect();
    if !unknown.is_empty() {
        let known: Vec<&str> = providers.iter().map(|p| p.id.as_str()).collect();
        return Err(format!(
            "unknown provider {unknown:?}; configured: {}",
            known.join(", ")
        ));
    }
    if !o.providers.is_empty() {
        providers.retain(|p| o.providers.contains(&p.id));
    }
    providers.retain(|p| p.enabled || o.providers.contains(&p.id));
    Ok(providers)
}

/// The running Baton's summary, if one answers at `url` within two seconds.
fn gateway_summary(
    rt: &tokio::runtime::Runtime,
    url: &str,
    admin_key: &str,
) -> Option<baton::summary::Summary> {
    let state = rt.block_on(super::status::admin_json(
        url,
        admin_key,
        "/admin/state",
        &[],
        std::time::Duration::from_secs(2),
    ))?;
    serde_json::from_value(state.get("summary")?.clone()).ok()
}

/// What `baton probe` should probe.
pub struct ProbeOptions {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub providers: Vec<String>,
    pub all_models: bool,
    pub json: bool,
    pub watch: Option<u64>,
    /// Put failed targets into cooldown in the Baton running at `url`.
    pub apply: bool,
    pub url: String,
    pub admin_key: Option<String>,
}

/// `baton probe`: 0 when every probe succeeded, 1 when any failed.
pub fn probe(o: ProbeOptions) -> CmdResult {
    use super::probe;
    let providers = probe_targets(&o)?;
    let rt = runtime()?;
    let tty = std::io::stderr().is_terminal();
    // The running Baton's admin key, if there is one: its summary is shown beside the verdicts
    // (and `--apply` needs it).
    let key = o.admin_key.clone().or_else(|| {
        std::fs::read_to_string(data_dir(o.data_dir.clone()).join(baton::auth::ADMIN_KEY_FILE))
            .ok()
            .map(|k| k.trim().to_string())
    });
    loop {
        let mut results = rt.block_on(probe::run(&providers, o.all_models, |done, total, what| {
            if tty {
                let line = if done < total {
                    format!("probing [{}/{total}] {what}", done + 1)
                } else {
                    String::new()
                };
                eprint!("\r\x1b[2K{line}");
                let _ = std::io::stderr().flush();
            }
        }));
        if let Some(s) = key.as_deref().and_then(|k| gateway_summary(&rt, &o.url, k)) {
            probe::attach(&mut results, &s);
        }
        if o.json {
            outln!(
                "{}",
                serde_json::to_string_pretty(&results).unwrap_or_default()
            );
        } else {
            out!("{}", probe::render(&results, super::status::use_color()));
        }
        if o.apply {
            let key = key.as_deref().ok_or_else(|| {
                format!(
                    "--apply needs the admin key (admin.key in {}, or --admin-key)",
                    data_dir(o.data_dir.clone()).display()
                )
            })?;
            let n = rt.block_on(probe::apply(&results, &o.url, key))?;
            eprintln!("applied {n} cooldown(s) to the Baton at {}", o.url);
        }
        match o.watch {
            Some(secs) => {
                std::thread::sleep(std::time::Duration::from_secs(secs.max(1)));
                outln!();
            }
            None => {
                return Ok(if results.iter().all(probe::ProbeResult::fine) {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                })
            }
        }
    }
}

/// `baton config check FILE`.
pub fn config_check(file: &Path) -> CmdResult {
    let c = config::load_file(file).map_err(|e| e.to_string())?;
    outln!(
        "{}: OK ({} providers, {} routes)",
        file.display(),
        c.providers.len(),
        c.routes.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `baton config export`: the live providers plus the settings of `--config`, without secrets.
pub fn config_export(dir: Option<PathBuf>, config_file: Option<PathBuf>) -> CmdResult {
    let mut out = match &config_file {
        Some(path) => config::load_file(path).map_err(|e| e.to_string())?,
        None => ConfigFile::default(),
    };
    out.providers = live_providers(&data_dir(dir))?;
    out.schema = Some("./config.schema.json".into());
    outln!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

/// `baton config import FILE`: under the rules of the admin API's import (`POST
/// /admin/import`), since what it writes is live configuration like the UI's edits: the file
/// validated as a whole, each key bound to where it belongs (a variable from Baton's
/// environment goes only where the catalog or the config file sends it), providers the config
/// file owns left alone, existing ones overwritten only with `--replace`. Nothing changes on
/// error.
pub fn config_import(file: &Path, dir: Option<PathBuf>, replace: bool) -> CmdResult {
    let config = config::load_file(file).map_err(|e| format!("{e}\nnothing was imported"))?;
    let store = Store::open(&data_dir(dir), &Default::default()).map_err(|e| e.to_string())?;
    let stored = store.load_providers().map_err(|e| e.to_string())?;
    let live: Vec<_> = stored.iter().map(|s| s.effective()).collect();
    let bounds = baton::api::key_refs::Bounds::offline(live.clone());
    let plan = baton::store::ProviderImport::sort(&stored, &config.providers);
    for (i, p) in config.providers.iter().enumerate() {
        if plan.file_owned.contains(&p.id) {
            continue;
        }
        let old = live.iter().find(|c| c.id == p.id);
        baton::api::key_refs::check_key_refs(&bounds, p, old).map_err(|e| {
            let at = e.param.clone().unwrap_or_default();
            format!("providers[{i}].{at}: {}\nnothing was imported", e.message)
        })?;
    }
    for id in &plan.file_owned {
        eprintln!(
            "skipped {id}: defined in the config file Baton runs with, which wins at every start"
        );
    }
    if !plan.replaced.is_empty() && !replace {
        return Err(format!(
            "{} already exist(s) here; import again with --replace to overwrite them\nnothing was imported",
            plan.replaced.join(", ")
        ));
    }
    let taking = plan.taking;
    store
        .import_providers(&taking, baton::clock::unix_ms())
        .map_err(|e| format!("{e}\nnothing was imported"))?;
    let ids: Vec<&str> = taking.iter().map(|p| p.id.as_str()).collect();
    outln!(
        "imported {} provider(s): {} — Baton uses them from its next start",
        ids.len(),
        ids.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// `baton keys`: always 0 (a report, not a check).
pub fn keys(json: bool) -> CmdResult {
    let catalog =
        baton::catalog::load().map_err(|e| format!("the built-in catalog is unreadable: {e}"))?;
    let env = |name: &str| std::env::var(name).ok();
    let rows = super::keys::check(&catalog, &env, &super::keys::which);
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
    } else {
        out!("{}", super::keys::render(&rows, super::status::use_color()));
    }
    Ok(ExitCode::SUCCESS)
}

/// What `baton replay` is given.
pub struct ReplayOptions {
    pub id: String,
    pub provider: Option<String>,
    pub url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub admin_key: Option<String>,
    pub gateway_key: Option<String>,
}

/// `baton replay`: 0 when the answer is the same, 1 when it differs.
pub fn replay(o: ReplayOptions) -> CmdResult {
    let dir = data_dir(o.data_dir.clone());
    let url = gateway_url(o.url, &dir);
    let admin = admin_key_of(o.data_dir, o.admin_key)?;
    let gateway = match o.gateway_key {
        Some(k) => k,
        None => {
            let path = dir.join(baton::auth::GATEWAY_KEY_FILE);
            std::fs::read_to_string(&path)
                .map(|k| k.trim().to_string())
                .map_err(|e| {
                    format!(
                        "cannot read the gateway key {}: {e}. Pass --gateway-key (or BATON_GATEWAY_KEY) when the config file sets the keys.",
                        path.display()
                    )
                })?
        }
    };
    let (report, same) = runtime()?.block_on(super::replay::run(super::replay::Replay {
        url: &url,
        admin_key: &admin,
        gateway_key: &gateway,
        id: &o.id,
        provider: o.provider.as_deref(),
    }))?;
    out!("{report}");
    Ok(if same {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    })
}
