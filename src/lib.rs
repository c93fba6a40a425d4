//! Baton: one local endpoint for every LLM a developer pays for or gets free.
//!
//! The gateway core: inbound APIs, the canonical chat model, upstream adapters, routing with safe
//! failover, limit handling, SQLite state and events. Shells (the `baton` binary, the Tauri tray
//! app) only wire it up.

pub mod api;
pub mod auth;
pub mod canonical;
pub mod capture;
pub mod catalog;
pub mod clients;
pub mod clock;
pub mod config;
pub mod connect;
pub mod events;
pub(crate) mod gateway;
pub mod i18n;
pub mod limits;
pub mod logs;
pub mod verdict;

pub(crate) mod metrics;
pub(crate) mod pricing;
pub mod providers;
pub mod redact;
pub(crate) mod router;
pub mod search;
pub(crate) mod secrets;
pub mod serve;
mod server;
pub(crate) mod shared;
pub(crate) mod stats;
pub mod store;
pub(crate) mod structured;
pub mod telemetry;
pub mod tokens;
pub mod update;

pub use gateway::summary;
pub use gateway::{Core, DesktopLink, StartError, StartOptions};
pub use server::{start, GatewayHandle};

/// The platform's data directory for Baton (`~/.local/share/baton` on Linux).
pub fn default_data_dir() -> std::path::PathBuf {
    dirs::data_dir()
        .or_else(|| dirs::home_dir().map(|h| h.join(".local/share")))
        .unwrap_or_else(|| std::path::PathBuf::from("."))
        .join("baton")
}

/// This build's version, read at run time from a marker in the binary's data. Identical to
/// `CARGO_PKG_VERSION`, except that the update tests make a "next version" of a built binary by
/// rewriting the marker's bytes (same length) instead of building it twice.
pub fn version() -> &'static str {
    const MARKER: &str = concat!("\0BATON_VERSION=", env!("CARGO_PKG_VERSION"), "\0");
    let marker: &'static str = std::hint::black_box(MARKER);
    marker
        .trim_matches('\0')
        .strip_prefix("BATON_VERSION=")
        .unwrap_or(env!("CARGO_PKG_VERSION"))
}
