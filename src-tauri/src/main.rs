//! Baton's desktop shell: runs the gateway in-process and wires it to a tray icon, a window
//! showing the web UI, native notifications and start at login. Every behaviour lives in the
//! `baton` core; this crate only connects it to the desktop. Without a display (or with
//! `--headless`) it runs just the gateway, like `baton serve`.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

mod host;
mod login;
mod menu_model;
mod notify;
mod shell;
mod state;
mod status;
mod tray;
mod update;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "baton-desktop", version, about = "Baton in the system tray")]
struct Args {
    /// Run only the gateway: no tray icon, no window (also automatic without a display).
    #[arg(long)]
    headless: bool,
    /// Configuration file (see config.example.json).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where Baton keeps its database and keys.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Listen address (default 127.0.0.1).
    #[arg(long)]
    host: Option<String>,
    /// Listen port (default 8787).
    #[arg(long)]
    port: Option<u16>,
    /// Wait for this process to exit first (a restart after an update).
    #[arg(long, hide = true)]
    wait_pid: Option<u32>,
}

fn has_display() -> bool {
    if cfg!(target_os = "linux") {
        ["DISPLAY", "WAYLAND_DISPLAY"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty()))
    } else {
        true
    }
}

/// jemalloc: a plain request takes an eighth fewer instructions than with glibc's malloc, at
/// the same memory (see Cargo.toml).
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    update::remember_exe();
    // Before anything else (no thread yet): keys kept in ~/.config/baton/env, which a start at
    // login needs (it does not run the shell's exports).
    let env_file = baton::config::env_file::load();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BATON_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        // One event, one line: control characters from outside (a model name, an upstream's
        // error) are escaped, so no colours either.
        .with_writer(baton::logs::stderr)
        .with_ansi(false)
        .init();
    baton::config::env_file::report(&env_file);
    let args = Args::parse();
    if let Some(pid) = args.wait_pid {
        update::wait_for_exit(pid);
    }
    let opts = baton::serve::ServeOptions {
        config: args.config,
        data_dir: args.data_dir,
        host: args.host,
        port: args.port,
    };
    if args.headless || !has_display() {
        tracing::info!(
            "{}: running the gateway only, without tray or window",
            if args.headless {
                "--headless"
            } else {
                "no display found (DISPLAY / WAYLAND_DISPLAY unset)"
            }
        );
        return baton::serve::run_headless(opts);
    }
    shell::run(opts)
}
