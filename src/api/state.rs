//! The HTTP surface's vocabulary: the state every handler gets, the peer's address, the gateway
//! key's check. A leaf: `api/mod.rs` assembles the routes from its files, and they take these
//! from here, not from it.

use std::net::SocketAddr;
use std::sync::Arc;

use super::error::ApiError;
use crate::gateway::Core;

/// The address a request came from (a request extension the accept loop adds).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::IpAddr);

#[derive(Clone)]
pub struct AppState {
    pub core: Arc<Core>,
    /// The address the gateway actually listens on (the config may say port 0).
    pub addr: SocketAddr,
    pub(super) allowed_hosts: Arc<Vec<String>>,
    /// Concurrent inbound requests and the memory budget they share.
    pub inbound: Arc<super::budget::Inbound>,
}

pub(super) fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The client the presented gateway key belongs to (found where the client's API presents it:
/// `Dialect::presented_key`), or a 401.
pub fn authenticate(
    core: &Core,
    presented: Option<&str>,
) -> Result<Arc<crate::clients::Client>, ApiError> {
    presented
        .and_then(|k| core.keys.client(k))
        .ok_or_else(ApiError::unauthorized)
}

/// `local` (SQLite only), or whether the shared Redis answers (`up` / `down`).
pub(crate) fn shared_state(core: &Core) -> &'static str {
    match core.routing.shared.is_up() {
        None => "local",
        Some(true) => "up",
        Some(false) => "down",
    }
}
