//! The headless `baton` binary: `baton serve` runs the gateway without any GUI.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "One local endpoint for every LLM you pay for or get free",
    long_about = "Baton is an OpenAI-compatible LLM gateway on 127.0.0.1:8787. Point any OpenAI client's base URL at http://127.0.0.1:8787/v1, ask for model \"auto\", and Baton sends each request to the best provider that can take it now, failing over on rate limits and outages.",
    after_help = "Examples:\n  baton serve --config config.json\n  baton serve --port 9000 --data-dir /tmp/baton\n  baton config schema > config.schema.json"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway in the foreground (no tray, no window).
    Serve(ServeArgs),
    /// Show a running Baton's providers in routing order: state, cooldowns, quota, in-flight.
    Status(StatusArgs),
    /// Send one cheap real request per provider key and model; print latency or the classified error.
    Probe(ProbeArgs),
    /// Work with configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(clap::Args)]
struct ServeArgs {
    /// JSON configuration file; its providers are (re)defined from it at every start.
    #[arg(long, short, env = "BATON_CONFIG")]
    config: Option<PathBuf>,
    /// Where the database and generated keys live [default: the platform data dir, e.g. ~/.local/share/baton].
    #[arg(long, env = "BATON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Address to listen on (overrides server.host).
    #[arg(long)]
    host: Option<String>,
    /// Port to listen on (overrides server.port; 0 picks a free port).
    #[arg(long)]
    port: Option<u16>,
}

#[derive(clap::Args)]
struct StatusArgs {
    /// Base URL of the running Baton.
    #[arg(long, env = "BATON_URL", default_value = "http://127.0.0.1:8787")]
    url: String,
    /// Data directory holding admin.key [default: the platform data dir].
    #[arg(long, env = "BATON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The admin key itself (instead of reading admin.key).
    #[arg(long, env = "BATON_ADMIN_KEY", hide_env_values = true)]
    admin_key: Option<String>,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct ProbeArgs {
    /// Configuration file whose providers to probe [default: the live providers in the data directory].
    #[arg(long, short, env = "BATON_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory holding the live configuration [default: the platform data dir].
    #[arg(long, env = "BATON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Only these providers (repeatable).
    #[arg(long = "provider", value_name = "ID")]
    providers: Vec<String>,
    /// Probe every model, not just each provider's first.
    #[arg(long)]
    all_models: bool,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Probe again every SECS seconds until interrupted.
    #[arg(long, value_name = "SECS")]
    watch: Option<u64>,
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a configuration file and report the first problem with its JSON path.
    Check { file: PathBuf },
    /// Print the JSON schema of the configuration file.
    Schema,
    /// Print the live configuration (providers as stored, with your toggles and order) as JSON.
    /// Secrets are never included: keys appear as the environment variables they come from.
    Export {
        /// Data directory of the Baton to export [default: the platform data dir].
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Configuration file for the settings that are not stored (server, routing, routes, modelMap).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Add the providers of FILE to the live configuration (validated first; nothing changes on
    /// error). Takes effect at the next start.
    Import {
        file: PathBuf,
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("BATON_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Status(args) => status(args),
        Command::Probe(args) => probe(args),
        Command::Config { command } => match command {
            ConfigCommand::Check { file } => match baton::config::load_file(&file) {
                Ok(c) => {
                    println!(
                        "{}: OK ({} providers, {} routes)",
                        file.display(),
                        c.providers.len(),
                        c.routes.len()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            },
            ConfigCommand::Export { data_dir, config } => config_export(data_dir, config),
            ConfigCommand::Import { file, data_dir } => config_import(&file, data_dir),
            ConfigCommand::Schema => {
                let schema = baton::config::json_schema();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&schema).unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
        },
    }
}

/// Exit status: 0 when some enabled provider is ready, 1 when none is, 2 when Baton could not
/// be asked.
fn status(args: StatusArgs) -> ExitCode {
    use baton::cli::status;
    let key = match args.admin_key {
        Some(k) => k,
        None => {
            let path = args
                .data_dir
                .unwrap_or_else(baton::default_data_dir)
                .join(baton::auth::ADMIN_KEY_FILE);
            match std::fs::read_to_string(&path) {
                Ok(k) => k.trim().to_string(),
                Err(e) => {
                    let err = status::StatusError::Key {
                        path: path.display().to_string(),
                        reason: e.to_string(),
                    };
                    eprintln!("error: {err}");
                    return ExitCode::from(2);
                }
            }
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let state = match rt.block_on(status::fetch(&args.url, &key)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rows = status::rows(&state);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).unwrap_or_default()
        );
    } else if rows.is_empty() {
        println!("No providers configured.");
    } else {
        print!("{}", status::render(&rows, status::use_color()));
    }
    if rows.iter().any(|r| r.state == "ready") {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Exit status: 0 when every probe succeeded, 1 when any failed, 2 on a configuration error.
fn probe(args: ProbeArgs) -> ExitCode {
    use baton::cli::probe;
    use std::io::{IsTerminal, Write};
    let mut providers = match &args.config {
        Some(path) => match baton::config::load_file(path) {
            Ok(c) => c.providers,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => {
            let dir = args
                .data_dir
                .clone()
                .unwrap_or_else(baton::default_data_dir);
            if !dir.join("baton.db").exists() {
                eprintln!("error: no configuration: pass --config FILE, or --data-dir of a Baton that has run ({} has no baton.db)", dir.display());
                return ExitCode::from(2);
            }
            let store = match baton::store::Store::open(&dir, &Default::default()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            };
            match store.load_providers() {
                Ok(p) => p.iter().map(|s| s.effective()).collect(),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::from(2);
                }
            }
        }
    };
    if !args.providers.is_empty() {
        let unknown: Vec<&String> = args
            .providers
            .iter()
            .filter(|id| !providers.iter().any(|p| &p.id == *id))
            .collect();
        if !unknown.is_empty() {
            let known: Vec<&str> = providers.iter().map(|p| p.id.as_str()).collect();
            eprintln!(
                "error: unknown provider {unknown:?}; configured: {}",
                known.join(", ")
            );
            return ExitCode::from(2);
        }
        providers.retain(|p| args.providers.contains(&p.id));
    }
    providers.retain(|p| p.enabled || args.providers.contains(&p.id));
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let tty = std::io::stderr().is_terminal();
    loop {
        let results = rt.block_on(probe::run(
            &providers,
            args.all_models,
            |done, total, what| {
                if tty {
                    let line = if done < total {
                        format!("probing [{}/{total}] {what}", done + 1)
                    } else {
                        String::new()
                    };
                    eprint!("\r\x1b[2K{line}");
                    let _ = std::io::stderr().flush();
                }
            },
        ));
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&results).unwrap_or_default()
            );
        } else {
            print!(
                "{}",
                probe::render(&results, baton::cli::status::use_color())
            );
        }
        let failed = results.iter().any(|r| !r.ok());
        match args.watch {
            Some(secs) => {
                std::thread::sleep(std::time::Duration::from_secs(secs.max(1)));
                println!();
            }
            None => {
                return if failed {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                }
            }
        }
    }
}

fn open_store(data_dir: Option<PathBuf>) -> Result<baton::store::Store, String> {
    let dir = data_dir.unwrap_or_else(baton::default_data_dir);
    if !dir.join("baton.db").exists() {
        return Err(format!(
            "{} holds no Baton database; pass --data-dir of a Baton that has run",
            dir.display()
        ));
    }
    baton::store::Store::open(&dir, &Default::default()).map_err(|e| e.to_string())
}

fn config_export(data_dir: Option<PathBuf>, config: Option<PathBuf>) -> ExitCode {
    let mut out = match &config {
        Some(path) => match baton::config::load_file(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => baton::config::ConfigFile::default(),
    };
    let store = match open_store(data_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match store.load_providers() {
        Ok(stored) => {
            let mut providers: Vec<_> = stored.iter().map(|s| s.effective()).collect();
            providers.sort_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)));
            out.providers = providers;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    out.schema = Some("./config.schema.json".into());
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    ExitCode::SUCCESS
}

fn config_import(file: &std::path::Path, data_dir: Option<PathBuf>) -> ExitCode {
    let config = match baton::config::load_file(file) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}\nnothing was imported");
            return ExitCode::from(2);
        }
    };
    let dir = data_dir.unwrap_or_else(baton::default_data_dir);
    let store = match baton::store::Store::open(&dir, &Default::default()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match store.import_providers(&config.providers, baton::clock::unix_ms()) {
        Ok(()) => {
            let ids: Vec<&str> = config.providers.iter().map(|p| p.id.as_str()).collect();
            println!(
                "imported {} provider(s): {} — Baton uses them from its next start",
                ids.len(),
                ids.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}\nnothing was imported");
            ExitCode::from(2)
        }
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let mut config = match &args.config {
        Some(path) => match baton::config::load_file(path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        None => baton::config::ConfigFile::default(),
    };
    if let Some(h) = args.host {
        config.server.host = h;
    }
    if let Some(p) = args.port {
        config.server.port = p;
    }
    let origin = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from("<command line>"));
    if let Err(e) = baton::config::validate(&config, &origin) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let data_dir = args.data_dir.unwrap_or_else(baton::default_data_dir);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        let addr = format!("{}:{}", config.server.host, config.server.port);
        let listener = match tokio::net::TcpListener::bind(&addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("error: cannot listen on {addr}: {e}. Is another Baton running? Pick another port with --port.");
                return ExitCode::FAILURE;
            }
        };
        let opts = baton::StartOptions { config, data_dir: data_dir.clone(), clock: None };
        let handle = match baton::start(opts, listener).await {
            Ok(h) => h,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(key) = &handle.generated_key {
            eprintln!(
                "\nA gateway key was generated for this machine (shown once; also in {}):\n\n    {key}\n\nPoint clients at http://{}/v1 with this key as their API key.\n",
                data_dir.join(baton::auth::GATEWAY_KEY_FILE).display(),
                handle.addr
            );
        }
        // Machine-readable line for scripts and tests that start Baton on port 0.
        println!("listening on http://{}", handle.addr);
        shutdown_signal().await;
        tracing::info!("shutting down: finishing in-flight requests");
        handle.shutdown().await;
        ExitCode::SUCCESS
    })
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
