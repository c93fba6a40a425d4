//! Semantic checks that serde cannot express; every error names the JSON path and what is allowed.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;

use super::error::ConfigError;
use super::file::ConfigFile;
use super::provider_checks::check_id;
pub use super::provider_checks::{provider_problems, validate_provider};
use super::refs::check_env_name;

pub use super::file::RESERVED_MODEL_NAMES;

/// The whole file: each section in turn, stopping at the first problem.
pub fn validate(config: &ConfigFile, file: &Path) -> Result<(), ConfigError> {
    let err = |path: String, msg: String| ConfigError::field(file, path, msg);
    validate_server(config, &err)?;
    config.state.validate(&err)?;
    validate_gateway_keys(config, &err)?;
    validate_routing(config, &err)?;
    let ids = validate_providers(config, file, &err)?;
    validate_routes(config, &ids, &err)?;
    validate_local_fallback(config, &ids, &err)?;
    validate_model_map(config, &ids, &err)?;
    if let Some(p) = config.web_search.as_ref().and_then(|w| w.problem()) {
        return Err(err("webSearch".into(), p));
    }
    match config.telemetry.as_ref().and_then(|t| t.problem()) {
        Some(p) => Err(err("telemetry".into(), p)),
        None => Ok(()),
    }
}

type Err<'a> = &'a dyn Fn(String, String) -> ConfigError;

/// The server's counts and durations that have a floor.
fn minimums(server: &super::file::ServerConfig, err: Err<'_>) -> Result<(), ConfigError> {
    for (field, value, min, message) in [
        (
            "server.maxJsonValues",
            server.max_json_values as u64,
            1000,
            crate::i18n::n_("must be at least 1000"),
        ),
        (
            "server.maxConcurrentRequests",
            server.max_concurrent_requests as u64,
            1,
            "must be at least 1",
        ),
        (
            "server.maxConnections",
            server.max_connections as u64,
            1,
            "must be at least 1",
        ),
        (
            "server.maxConnectionsPerPeer",
            server.max_connections_per_peer as u64,
            1,
            "must be at least 1",
        ),
        (
            "server.webSocketIdleMs",
            server.web_socket_idle_ms,
            1000,
            crate::i18n::n_("must be at least 1000"),
        ),
    ] {
        if value < min {
            return Err(err(field.into(), crate::i18n::msg(message, &[])));
        }
    }
    Ok(())
}

fn validate_server(config: &ConfigFile, err: Err<'_>) -> Result<(), ConfigError> {
    let server = &config.server;
    if server.host.trim().is_empty() {
        return Err(err(
            "server.host".into(),
            crate::i18n::msg("must not be empty", &[]),
        ));
    }
    if server.max_body_bytes < 1024 {
        return Err(err(
            "server.maxBodyBytes".into(),
            crate::i18n::msg("must be at least 1024 bytes", &[]),
        ));
    }
    for (field, ms) in [
        ("server.headerTimeoutMs", server.header_timeout_ms),
        ("server.bodyTimeoutMs", server.body_timeout_ms),
    ] {
        if !(100..=3_600_000).contains(&ms) {
            return Err(err(
                field.into(),
                crate::i18n::msg("must be between 100 and 3600000 milliseconds", &[]),
            ));
        }
    }
    if server.memory_budget_bytes < 16 * 1024 * 1024 {
        return Err(err(
            "server.memoryBudgetBytes".into(),
            crate::i18n::msg("must be at least 16777216 (16 MiB)", &[]),
        ));
    }
    minimums(server, err)?;
    if !is_loopback_host(&server.host) && config.gateway_keys.is_empty() {
        return Err(err(
            "server.host".into(),
            crate::i18n::msg(
                "`{host}` is not a loopback address; listening beyond this machine requires `gatewayKeys` so that nobody else can use your providers",
                &[("host", &server.host)],
            ),
        ));
    }
    if is_unspecified(&server.host) && server.allowed_hosts.is_empty() {
        return Err(err(
            "server.allowedHosts".into(),
            format!(
                "listening on `{}` requires the host names clients use (e.g. [\"gateway.example.lan\"]) so that the DNS-rebinding guard can check the Host header",
                server.host
            ),
        ));
    }
    Ok(())
}

fn validate_gateway_keys(config: &ConfigFile, err: Err<'_>) -> Result<(), ConfigError> {
    let mut labels = HashSet::new();
    for (i, k) in config.gateway_keys.iter().enumerate() {
        check_env_name(&k.env).map_err(|m| err(format!("gatewayKeys[{i}].env"), m))?;
        if !labels.insert(k.label()) {
            return Err(err(
                format!("gatewayKeys[{i}].label"),
                format!(
                    "`{}` names two keys; labels identify keys in usage and limits",
                    k.label()
                ),
            ));
        }
        // Allow lists may name providers added later in the UI: only the numbers are checked.
        k.policy
            .validate(&|_| true)
            .map_err(|e| err(format!("gatewayKeys[{i}].policy.{}", e.param), e.message))?;
    }
    Ok(())
}

fn validate_routing(config: &ConfigFile, err: Err<'_>) -> Result<(), ConfigError> {
    let r = &config.routing;
    if r.default_cooldown_ms == 0 {
        return Err(err(
            "routing.defaultCooldownMs".into(),
            crate::i18n::msg("must be at least 1", &[]),
        ));
    }
    if r.request_timeout_ms < 1000 {
        return Err(err(
            "routing.requestTimeoutMs".into(),
            crate::i18n::msg("must be at least 1000 (one second)", &[]),
        ));
    }
    let h = &r.hedge;
    if !(h.budget_percent.is_finite() && (0.0..=100.0).contains(&h.budget_percent)) {
        return Err(err(
            "routing.hedge.budgetPercent".into(),
            crate::i18n::msg("must be a percentage from 0 to 100", &[]),
        ));
    }
    if matches!(h.after, super::file::HedgeAfter::Ms(ms) if ms < 10) {
        return Err(err(
            "routing.hedge.after".into(),
            crate::i18n::msg("must be at least 10 (milliseconds) or \"p95\"", &[]),
        ));
    }
    if h.unmeasured_ms < 10 {
        return Err(err(
            "routing.hedge.unmeasuredMs".into(),
            crate::i18n::msg("must be at least 10 (milliseconds)", &[]),
        ));
    }
    Ok(())
}

/// Each provider, and that ids are unique; returns the ids.
fn validate_providers<'c>(
    config: &'c ConfigFile,
    file: &Path,
    err: Err<'_>,
) -> Result<HashSet<&'c str>, ConfigError> {
    let mut ids = HashSet::new();
    for (i, p) in config.providers.iter().enumerate() {
        validate_provider(p, &format!("providers[{i}]"), file)?;
        if !ids.insert(p.id.as_str()) {
            return Err(err(
                format!("providers[{i}].id"),
                format!(
                    "`{}` is used by more than one provider; ids must be unique",
                    p.id
                ),
            ));
        }
    }
    Ok(ids)
}

fn validate_routes(
    config: &ConfigFile,
    ids: &HashSet<&str>,
    err: Err<'_>,
) -> Result<(), ConfigError> {
    for (name, route) in &config.routes {
        let entries = route.targets();
        let path = format!("routes.{name}");
        check_id(name).map_err(|m| {
            err(
                path.clone(),
                crate::i18n::msg("route name {m}", &[("m", &m.to_string())]),
            )
        })?;
        if RESERVED_MODEL_NAMES.contains(&name.as_str()) {
            return Err(err(
                path,
                crate::i18n::msg(
                    "`{name}` is built in and cannot be redefined",
                    &[("name", &name.to_string())],
                ),
            ));
        }
        if ids.contains(name.as_str()) {
            return Err(err(
                path,
                crate::i18n::msg(
                    "`{name}` is already a provider id; pick another route name",
                    &[("name", &name.to_string())],
                ),
            ));
        }
        if entries.is_empty() {
            return Err(err(
                path,
                crate::i18n::msg("must list at least one provider or provider/model", &[]),
            ));
        }
        for (j, entry) in entries.iter().enumerate() {
            let head = entry.split('/').next().unwrap_or_default();
            let known = ids.contains(head)
                || (!entry.contains('/')
                    && config.routes.contains_key(entry.as_str())
                    && entry != name)
                || entry == "auto";
            if !known {
                return Err(err(
                    format!("{path}[{j}]"),
                    crate::i18n::msg(
                        "`{entry}` names no provider or route; use `provider`, `provider/model` or a route name (providers: {providers})",
                        &[("entry", entry), ("providers", &list(ids.iter().copied()))],
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn validate_local_fallback(
    config: &ConfigFile,
    ids: &HashSet<&str>,
    err: Err<'_>,
) -> Result<(), ConfigError> {
    let lf = &config.local_fallback;
    if lf.enabled {
        let host = lf
            .base_url
            .strip_prefix("http://")
            .or_else(|| lf.base_url.strip_prefix("https://"))
            .and_then(|r| r.split(['/', ':']).next())
            .unwrap_or_default();
        if !is_loopback_host(host) {
            return Err(err(
                "localFallback.baseUrl".into(),
                format!("`{}` must be a loopback address (127.0.0.1 or localhost): the last resort is a server on this machine", lf.base_url),
            ));
        }
        if ids.contains(super::file::LOCAL_PROVIDER_ID) {
            return Err(err(
                "localFallback".into(),
                format!(
                    "a provider already has the id `{}`; rename it or turn localFallback off",
                    super::file::LOCAL_PROVIDER_ID
                ),
            ));
        }
    }
    Ok(())
}

fn validate_model_map(
    config: &ConfigFile,
    ids: &HashSet<&str>,
    err: Err<'_>,
) -> Result<(), ConfigError> {
    for (pattern, target) in &config.model_map {
        let path = format!("modelMap.{pattern}");
        if pattern.trim().is_empty() {
            return Err(err(
                path,
                crate::i18n::msg("the model name pattern must not be empty", &[]),
            ));
        }
        let head = target.split('/').next().unwrap_or_default();
        let known =
            target == "auto" || ids.contains(head) || config.routes.contains_key(target.as_str());
        if !known {
            return Err(err(
                path,
                crate::i18n::msg("`{target}` names no provider or route; map to \"auto\", a route, a provider or \"provider/model\"", &[("target", &target.to_string())]),
            ));
        }
    }
    Ok(())
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut v: Vec<&str> = items.collect();
    v.sort_unstable();
    if v.is_empty() {
        "none configured".into()
    } else {
        v.join(", ")
    }
}

/// True for `localhost`, `127.0.0.0/8` and `::1`.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn is_unspecified(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified())
}
