//! The headless `baton` binary: `baton serve` runs the gateway without any GUI.

use std::path::PathBuf;
use std::process::ExitCode;

/// `print!` for a command's output: a reader that went away (`baton status | head -1`) ends the
/// command quietly, where `print!` would panic on the broken pipe.
macro_rules! out {
    ($($t:tt)*) => {
        $crate::cli::write_out(format_args!($($t)*))
    };
}

/// `println!` the same way.
macro_rules! outln {
    () => {
        $crate::cli::write_out(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::cli::write_out(format_args!("{}\n", format_args!($($t)*)))
    };
}

mod cli;

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
    /// Show a running Baton's providers in routing order: state, cooldowns, share of its limit
    /// used, in-flight. Exits 0 only when a request on a gateway key can be served now.
    Status(StatusArgs),
    /// One short line for a client's status bar: the provider serving this session, its usage
    /// window and today's cost. Reads Claude Code's status-line JSON on stdin (its
    /// `statusLine` command); prints "Baton off" when Baton cannot be reached.
    Statusline(GatewayArgs),
    /// Point Claude Code, Codex, Gemini CLI or opencode at Baton by writing their own config
    /// files (the change is shown first, the original kept); --undo puts the files back.
    Connect(ConnectArgs),
    /// Which well-known providers have a key here, which subscription CLIs are installed, and where
    /// to sign up for the rest (with their free tiers).
    Keys {
        /// Print stable JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Send one cheap real request per provider key and model; print latency or the classified error.
    Probe(ProbeArgs),
    /// Send a captured request (Settings → Tracing → Capture) to the running Baton again, as it
    /// came or pinned to another provider, and print how the answer differs from the captured
    /// one. Exits 0 when they are the same (ids and timestamps aside), 1 when they differ.
    Replay(ReplayArgs),
    /// Run the gateway as a background service of your user account that starts at login and
    /// restarts if it fails (a systemd user unit on Linux, a launchd agent on macOS, a Task
    /// Scheduler task on Windows).
    Service {
        #[command(subcommand)]
        command: ServiceCommand,
    },
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

/// How to reach a running Baton (`status`, `statusline`).
#[derive(clap::Args)]
struct GatewayArgs {
    /// Base URL of the running Baton [default: the listen address set in Settings, else
    /// http://127.0.0.1:8787].
    #[arg(long, env = "BATON_URL")]
    url: Option<String>,
    /// Data directory holding admin.key [default: the platform data dir].
    #[arg(long, env = "BATON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The admin key itself (instead of reading admin.key).
    #[arg(long, env = "BATON_ADMIN_KEY", hide_env_values = true)]
    admin_key: Option<String>,
}

#[derive(clap::Args)]
#[command(
    after_help = "Files written:\n  claude-code  ~/.claude/settings.json (or $CLAUDE_CONFIG_DIR): env ANTHROPIC_BASE_URL and the key\n  codex        ~/.codex/config.toml (or $CODEX_HOME): a \"baton\" model provider, made the default\n  opencode     ~/.config/opencode/opencode.json(c): a \"baton\" provider and model\n\nExamples:\n  baton connect claude-code --dry-run\n  baton connect codex --yes\n  baton connect claude-code --undo"
)]
struct ConnectArgs {
    /// The client to set up.
    #[arg(value_parser = ["claude-code", "codex", "gemini-cli", "opencode"])]
    client: String,
    /// Put the client's files back as they were before Baton connected it.
    #[arg(long)]
    undo: bool,
    /// Show the change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Write without asking.
    #[arg(long, short)]
    yes: bool,
    /// The client keeps its own subscription login (Claude, ChatGPT), forwarded by Baton to a
    /// passthrough provider [default when such a provider is configured].
    #[arg(long, conflicts_with = "keys")]
    login: bool,
    /// The client uses Baton's gateway key and Baton's providers.
    #[arg(long)]
    keys: bool,
    /// Also install Baton's status line in Claude Code.
    #[arg(long)]
    statusline: bool,
    /// Base URL of Baton [default: the listen address set in Settings, else http://127.0.0.1:8787].
    #[arg(long, env = "BATON_URL")]
    url: Option<String>,
    /// Data directory holding gateway.key and the connect journal [default: the platform data dir].
    #[arg(long, env = "BATON_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Environment variable holding the gateway key (when the config file names one).
    #[arg(long, value_name = "VAR")]
    key_env: Option<String>,
    /// Configuration file whose first gateway key to use.
    #[arg(long, short, env = "BATON_CONFIG")]
    config: Option<PathBuf>,
}

#[derive(clap::Args)]
struct StatusArgs {
    #[command(flatten)]
    gateway: GatewayArgs,
    /// Print stable JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  baton replay req_4f2a9c\n  baton replay req_4f2a9c --provider groq"
)]
struct ReplayArgs {
    /// The captured request's id (its `x-request-id`, shown in Activity).
    id: String,
    /// Send it to this provider (its id) instead of where the client's model leads.
    #[arg(long, value_name = "ID")]
    provider: Option<String>,
    #[command(flatten)]
    gateway: GatewayArgs,
    /// The gateway key to send it with [default: gateway.key in the data directory].
    #[arg(long, env = "BATON_GATEWAY_KEY", hide_env_values = true)]
    gateway_key: Option<String>,
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
    /// Put failed targets into cooldown in the running Baton (probing alone changes nothing).
    #[arg(long)]
    apply: bool,
    /// Base URL of the running Baton, for --apply.
    #[arg(long, env = "BATON_URL", default_value = "http://127.0.0.1:8787")]
    url: String,
    /// The admin key, for --apply (instead of reading admin.key).
    #[arg(long, env = "BATON_ADMIN_KEY", hide_env_values = true)]
    admin_key: Option<String>,
}

#[derive(Subcommand)]
enum ServiceCommand {
    /// Write the service definition, register it to start at login, and start it now. Running it
    /// again with other options replaces the definition and restarts the service.
    #[command(
        after_help = "On Linux the unit is ~/.config/systemd/user/baton.service and its log is the journal\n(journalctl --user -u baton). To start it at boot without logging in (a headless machine):\n  loginctl enable-linger \"$USER\"\n\nExamples:\n  baton service install --config ~/baton.json\n  baton service install --env-file ~/.config/baton/env --port 9000\n  baton service install --dry-run"
    )]
    Install(cli::service::InstallOptions),
    /// Stop the service and remove its definition (Baton's data and configuration are kept).
    Uninstall,
    /// Whether the service is installed and running, and what it runs. Exit status: 0 running,
    /// 3 installed but not running, 4 not installed.
    Status {
        /// Print stable JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a configuration file and report the first problem with its JSON path.
    Check { file: PathBuf },
    /// Print the JSON schema of the configuration file.
    Schema,
    /// Print the configuration reference (every key, its type, default and meaning) as
    /// Markdown, from the JSON schema (the book's config-reference.md).
    Reference,
    /// Print the JSON schema of the provider catalog (catalog/providers.json).
    CatalogSchema,
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
    /// Add the providers of FILE to the live configuration, under the rules the web UI's import
    /// follows (validated first; nothing changes on error). Takes effect at the next start.
    Import {
        file: PathBuf,
        #[arg(long, env = "BATON_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Overwrite providers that already exist (without it, nothing is imported when one does).
        #[arg(long)]
        replace: bool,
    },
}

/// `baton config …`.
fn config_command(command: ConfigCommand) -> cli::commands::CmdResult {
    use cli::commands;
    fn print(v: &impl serde::Serialize) -> cli::commands::CmdResult {
        outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        Ok(ExitCode::SUCCESS)
    }
    match command {
        ConfigCommand::Check { file } => commands::config_check(&file),
        ConfigCommand::Export { data_dir, config } => commands::config_export(data_dir, config),
        ConfigCommand::Import {
            file,
            data_dir,
            replace,
        } => commands::config_import(&file, data_dir, replace),
        ConfigCommand::CatalogSchema => print(&baton::catalog::json_schema()),
        ConfigCommand::Schema => print(&baton::config::json_schema()),
        ConfigCommand::Reference => {
            out!("{}", baton::config::reference::markdown());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// jemalloc: a plain request takes an eighth fewer instructions than with glibc's malloc, at
/// the same memory (see Cargo.toml).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // Before anything else (no thread yet): keys kept in ~/.config/baton/env.
    let env_file = baton::config::env_file::load();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("BATON_LOG").unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(baton::logs::stderr)
        .with_ansi(false)
        .init();
    baton::config::env_file::report(&env_file);
    use cli::commands;
    let result = match cli.command {
        Command::Serve(args) => return serve(args),
        Command::Keys { json } => commands::keys(json),
        Command::Connect(a) => cli::connect::run(cli::connect::ConnectOptions {
            client: a.client,
            undo: a.undo,
            dry_run: a.dry_run,
            yes: a.yes,
            mode: match (a.login, a.keys) {
                (true, _) => Some(baton::connect::Mode::Login),
                (_, true) => Some(baton::connect::Mode::Keys),
                _ => None,
            },
            statusline: a.statusline,
            url: a.url,
            data_dir: a.data_dir,
            key_env: a.key_env,
            config: a.config,
        }),
        Command::Status(StatusArgs { gateway: g, json }) => {
            commands::status(g.url, g.data_dir, g.admin_key, json)
        }
        Command::Statusline(a) => commands::statusline(a.url, a.data_dir, a.admin_key),
        Command::Probe(a) => commands::probe(commands::ProbeOptions {
            config: a.config,
            data_dir: a.data_dir,
            providers: a.providers,
            all_models: a.all_models,
            json: a.json,
            watch: a.watch,
            apply: a.apply,
            url: a.url,
            admin_key: a.admin_key,
        }),
        Command::Replay(a) => commands::replay(commands::ReplayOptions {
            id: a.id,
            provider: a.provider,
            url: a.gateway.url,
            data_dir: a.gateway.data_dir,
            admin_key: a.gateway.admin_key,
            gateway_key: a.gateway_key,
        }),
        Command::Service { command } => match command {
            ServiceCommand::Install(o) => cli::service::install(o),
            ServiceCommand::Uninstall => cli::service::uninstall(),
            ServiceCommand::Status { json } => cli::service::status(json),
        },
        Command::Config { command } => config_command(command),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })
}

fn serve(args: ServeArgs) -> ExitCode {
    baton::serve::run_headless(baton::serve::ServeOptions {
        config: args.config,
        data_dir: args.data_dir,
        host: args.host,
        port: args.port,
    })
}
