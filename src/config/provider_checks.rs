//! One provider's checks (the config file's and the admin API's): its id, address or
//! executable, models, keys, headers and credentials, each problem naming its JSON path.

use std::collections::HashSet;
use std::path::Path;

use super::error::ConfigError;
use super::file::RESERVED_MODEL_NAMES;
use super::provider::ProviderConfig;
use super::refs::{check_env_name, check_header, check_secret_ref};

/// Every problem with one provider that a form shows beside its field at once: the id, the
/// address (or executable) and the model list are checked on their own, then the rest in
/// order (its first problem). Empty when the provider is valid.
pub fn provider_problems(p: &ProviderConfig, path: &str, file: &Path) -> Vec<ConfigError> {
    let err = |field: &str, msg: String| ConfigError::field(file, format!("{path}.{field}"), msg);
    let mut out: Vec<ConfigError> = Vec::new();
    let mut push = |e: ConfigError| {
        let key = |e: &ConfigError| match e {
            ConfigError::Field { path, .. } => path.clone(),
            other => other.to_string(),
        };
        if !out.iter().any(|o| key(o) == key(&e)) {
            out.push(e);
        }
    };
    if let Err(m) = check_id(&p.id) {
        push(err("id", m));
    }
    let address = if p.kind.is_cli() {
        validate_cli(p, &err)
    } else {
        validate_url(p, &err)
    };
    if let Err(e) = address {
        push(e);
    }
    if p.models.is_empty() {
        push(err(
            "models",
            crate::i18n::msg("list at least one model", &[]),
        ));
    }
    if let Err(e) = validate_provider(p, path, file) {
        push(e);
    }
    out
}

/// Long because it is a flat list of independent checks, each naming its field.
pub fn validate_provider(p: &ProviderConfig, path: &str, file: &Path) -> Result<(), ConfigError> {
    let err = |field: &str, msg: String| ConfigError::field(file, format!("{path}.{field}"), msg);
    check_id(&p.id).map_err(|m| err("id", m))?;
    if RESERVED_MODEL_NAMES.contains(&p.id.as_str()) {
        return Err(err(
            "id",
            crate::i18n::msg("`{id}` is reserved", &[("id", &p.id)]),
        ));
    }
    if p.kind.is_cli() {
        validate_cli(p, &err)?;
    } else {
        validate_url(p, &err)?;
    }
    if p.models.is_empty() {
        return Err(err(
            "models",
            crate::i18n::msg("list at least one model", &[]),
        ));
    }
    validate_credentials(p, &err)?;
    for (window, share) in &p.reserve {
        let id_ok = !window.is_empty()
            && window
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !id_ok {
            return Err(err(
                &format!("reserve.{window}"),
                crate::i18n::msg("name a usage window by its id: `5h`, `7d`, `7d_opus`, `1d` (as `baton status` lists them)", &[]),
            ));
        }
        if !(share.is_finite() && *share > 0.0 && *share < 1.0) {
            return Err(err(
                &format!("reserve.{window}"),
                crate::i18n::msg("the share to keep is a fraction between 0 and 1 (0.1 keeps the last 10 %), not {share}", &[("share", &share.to_string())]),
            ));
        }
    }
    let mut seen = HashSet::new();
    for (i, m) in p.models.iter().enumerate() {
        let id = m.id();
        if id.trim().is_empty() {
            return Err(err(
                &format!("models[{i}]"),
                crate::i18n::msg("model name must not be empty", &[]),
            ));
        }
        if !seen.insert(id) {
            return Err(err(
                &format!("models[{i}]"),
                crate::i18n::msg("`{id}` is listed twice", &[("id", id)]),
            ));
        }
        if let super::provider::ModelEntry::Detailed(d) = m {
            if d.price.is_some_and(|p| !p.is_valid()) {
                return Err(err(
                    &format!("models[{i}].price"),
                    crate::i18n::msg(
                        "input and output are USD per million tokens: numbers of 0 or more",
                        &[],
                    ),
                ));
            }
        }
    }
    for (i, k) in p.keys.iter().enumerate() {
        check_secret_ref(k).map_err(|(field, m)| {
            err(
                &if field.is_empty() {
                    format!("keys[{i}]")
                } else {
                    format!("keys[{i}].{field}")
                },
                m,
            )
        })?;
    }
    if p.max_concurrency == Some(0) {
        return Err(err(
            "maxConcurrency",
            crate::i18n::msg("must be at least 1 (leave it out for no limit)", &[]),
        ));
    }
    for (name, value) in &p.headers {
        check_header(name, value).map_err(|(at, m)| err(&at, m))?;
    }
    if let Some(zone) = &p.day_reset {
        if jiff::tz::TimeZone::get(zone).is_err() {
            return Err(err(
                "dayReset",
                crate::i18n::msg(
                    "`{zone}` is not an IANA time zone (e.g. America/Los_Angeles, UTC)",
                    &[("zone", &zone.to_string())],
                ),
            ));
        }
    }
    let t = &p.timeouts;
    for (field, v) in [
        ("timeouts.connectMs", t.connect_ms),
        ("timeouts.firstByteMs", t.first_byte_ms),
        ("timeouts.idleMs", t.idle_ms),
    ] {
        if v < 100 {
            return Err(err(field, crate::i18n::msg("must be at least 100 ms", &[])));
        }
    }
    Ok(())
}

fn validate_url(
    p: &ProviderConfig,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let url = p.base_url.trim();
    if url.is_empty() {
        return Err(err(
            "baseUrl",
            crate::i18n::msg(
                "kind `{kind}` needs `baseUrl`, e.g. https://api.openai.com/v1",
                &[("kind", p.kind.as_str())],
            ),
        ));
    }
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return Err(err(
            "baseUrl",
            crate::i18n::msg(
                "`{url}` must start with https:// (or http:// for local servers)",
                &[("url", url)],
            ),
        ));
    };
    if rest.is_empty() || rest.starts_with('/') || url.contains(char::is_whitespace) {
        return Err(err(
            "baseUrl",
            crate::i18n::msg("`{url}` has no host", &[("url", url)]),
        ));
    }
    if url.ends_with("/chat/completions") || url.ends_with("/messages") {
        return Err(err(
            "baseUrl",
            crate::i18n::msg("give the base URL without `/chat/completions` or `/messages` (e.g. https://api.openai.com/v1)", &[]),
        ));
    }
    validate_own(p, err)?;
    validate_proxy(p, err)?;
    for (field, set) in [
        ("executable", p.executable.is_some()),
        ("env", !p.env.is_empty()),
        ("flattenHistory", p.flatten_history),
    ] {
        if set {
            let kinds: Vec<&str> = super::kind::ProviderKind::all()
                .iter()
                .filter(|k| k.is_cli())
                .map(|k| k.as_str())
                .collect();
            return Err(err(
                field,
                crate::i18n::msg(
                    "only these kinds take `{field}`: {kinds}",
                    &[("field", field), ("kinds", &kinds.join(", "))],
                ),
            ));
        }
    }
    Ok(())
}

/// A provider's `proxy`: a URL Baton can reach it at, with no credentials written into it.
fn validate_proxy(
    p: &ProviderConfig,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    if let Some(login) = &p.proxy_login {
        if p.proxy.is_none() {
            return Err(err(
                "proxyLogin",
                crate::i18n::msg(
                    "`proxyLogin` is the login of the provider's `proxy`: give the proxy too",
                    &[],
                ),
            ));
        }
        if login.stored.is_none() {
            check_env_name(&login.env).map_err(|m| err("proxyLogin.env", m))?;
        }
    }
    let Some(proxy) = &p.proxy else {
        return Ok(());
    };
    let parsed = reqwest::Url::parse(proxy.trim()).ok();
    let usable = parsed.as_ref().is_some_and(|u| {
        matches!(u.scheme(), "http" | "https" | "socks5" | "socks5h") && u.host_str().is_some()
    });
    if !usable {
        return Err(err(
            "proxy",
            crate::i18n::msg(
                "`{proxy}` is not a proxy address: give http://HOST:PORT, https://…, socks5://… or socks5h://…",
                &[("proxy", proxy)],
            ),
        ));
    }
    if parsed.is_some_and(|u| !u.username().is_empty() || u.password().is_some()) {
        return Err(err(
            "proxy",
            crate::i18n::msg("a proxy's user and password are secrets, and the configuration keeps none: give them by reference as `proxyLogin` ({\"env\": \"VARIABLE\"} holding USER:PASSWORD)", &[]),
        ));
    }
    Ok(())
}

/// The kinds' own fields: each on the kinds that take it, a region well formed, then the
/// kind's own check (Azure's API version, Bedrock's and Vertex AI's region, Vertex's project).
fn validate_own(
    p: &ProviderConfig,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (field, set) in [
        ("apiVersion", p.api_version.is_some()),
        ("awsProfile", p.aws_profile.is_some()),
        ("project", p.project.is_some()),
        ("region", p.region.is_some()),
    ] {
        if set && !p.kind.fields().contains(&field) {
            let kinds = super::kind::ProviderKind::taking(field).join(", ");
            return Err(err(
                field,
                crate::i18n::msg(
                    "only these kinds take `{field}`: {kinds}",
                    &[("field", field), ("kinds", &kinds)],
                ),
            ));
        }
    }
    if let Some(r) = &p.region {
        let ok = !r.is_empty()
            && r.len() <= 32
            && r.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            return Err(err(
                "region",
                crate::i18n::msg(
                    "`{v}` is not a region: give one such as us-east-1",
                    &[("v", r)],
                ),
            ));
        }
    }
    let own = super::kind::Own {
        base_url: &p.base_url,
        region: p.region.as_deref(),
        project: p.project.as_deref(),
        api_version: p.api_version.as_deref(),
    };
    p.kind.check(&own).map_err(|(field, m)| err(field, m))
}

/// The subscription CLI kinds: no URL or keys (the CLI has its own login), a sane executable
/// and environment.
fn validate_cli(
    p: &ProviderConfig,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let kind = p.kind.as_str();
    if !p.base_url.trim().is_empty() {
        return Err(err(
            "baseUrl",
            crate::i18n::msg(
                "a {kind} provider runs the CLI and has no base URL; remove `baseUrl`",
                &[("kind", kind)],
            ),
        ));
    }
    if !p.keys.is_empty() {
        return Err(err(
            "keys",
            crate::i18n::msg("a {kind} provider uses the CLI's own login; remove `keys` (log the CLI in instead)", &[("kind", kind)]),
        ));
    }
    if !p.headers.is_empty() {
        return Err(err(
            "headers",
            crate::i18n::msg(
                "a {kind} provider sends no HTTP headers; remove `headers`",
                &[("kind", kind)],
            ),
        ));
    }
    for (field, set) in [
        ("proxy", p.proxy.is_some()),
        ("proxyLogin", p.proxy_login.is_some()),
    ] {
        if set {
            return Err(err(
                field,
                crate::i18n::msg(
                    "a {kind} provider runs the CLI, which uses its own network settings; remove `{field}`",
                    &[("kind", kind), ("field", field)],
                ),
            ));
        }
    }
    if let Some(exe) = &p.executable {
        check_executable(p, exe, err)?;
    }
    let allowed = p.kind.cli_env_allowed();
    for (name, value) in &p.env {
        check_env_name(name).map_err(|m| err(&format!("env.{name}"), m))?;
        if !allowed.contains(&name.as_str()) {
            return Err(err(
                &format!("env.{name}"),
                crate::i18n::msg(
                    "a {kind} provider may set only its own configuration and key variables ({allowed}); `{name}` is not one of them",
                    &[("kind", kind), ("allowed", &allowed.join(", ")), ("name", name)],
                ),
            ));
        }
        check_env_value(name, value).map_err(|(at, m)| err(&at, m))?;
    }
    Ok(())
}

/// A CLI provider's `env` value: text that is not a secret (a directory, a project), or a
/// secret by reference, as a key is. A key variable's literal value is refused: the
/// configuration keeps no secret, and an export or the admin API would show it.
fn check_env_value(
    name: &str,
    value: &super::provider::HeaderValue,
) -> Result<(), (String, String)> {
    let at = format!("env.{name}");
    match value {
        super::provider::HeaderValue::Text(text) => {
            if text.contains('\0') {
                return Err((at, crate::i18n::msg("value must not contain NUL", &[])));
            }
            let key_variable = name.ends_with("_KEY") || name.ends_with("_TOKEN");
            if key_variable || crate::redact::looks_like_credential(text) {
                return Err((
                    at,
                    crate::i18n::msg("looks like a secret, and the configuration keeps none: give it as {\"env\": \"VARIABLE\"} (Baton passes the variable's value to the CLI, masked and redacted like a key)", &[]),
                ));
            }
            Ok(())
        }
        super::provider::HeaderValue::Secret(r) => {
            super::refs::check_secret_ref(r).map_err(|(field, m)| {
                (
                    if field.is_empty() {
                        at.clone()
                    } else {
                        format!("{at}.{field}")
                    },
                    m,
                )
            })
        }
    }
}

/// A CLI provider's `executable`: one program, the CLI itself, by name or absolute path.
fn check_executable(
    p: &ProviderConfig,
    exe: &str,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let kind = p.kind.as_str();
    if exe.trim().is_empty() || exe.contains('\0') {
        return Err(err(
            "executable",
            crate::i18n::msg("give a program name on PATH or an absolute path", &[]),
        ));
    }
    if exe.contains('/') && !exe.starts_with('/') {
        return Err(err(
            "executable",
            crate::i18n::msg(
                "`{exe}` is a relative path; give an absolute path or a name on PATH",
                &[("exe", exe)],
            ),
        ));
    }
    if exe.contains(char::is_whitespace) && !exe.starts_with('/') {
        return Err(err(
            "executable",
            crate::i18n::msg(
                "`{exe}` is one program, not a command line: arguments are not allowed",
                &[("exe", exe)],
            ),
        ));
    }
    // Only the CLI itself: whoever edits a provider must not be able to run any other
    // program (`--version` and the login check run as soon as a provider is tested).
    let program = p.kind.cli_program().unwrap_or_default();
    let base = exe.rsplit(['/', '\\']).next().unwrap_or(exe);
    let stem = base
        .strip_suffix(".exe")
        .or_else(|| base.strip_suffix(".cmd"))
        .unwrap_or(base);
    if stem != program {
        return Err(err(
            "executable",
            crate::i18n::msg("a {kind} provider runs `{program}`: give `{program}` (found on PATH) or an absolute path ending in /{program}, not `{exe}`", &[("kind", kind), ("program", program), ("exe", exe)]),
        ));
    }
    Ok(())
}

pub(super) fn check_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(if id.is_empty() {
            crate::i18n::msg("is required: 1-64 characters of a-z, 0-9, `-`, `_` or `.`, starting with a letter or digit", &[])
        } else {
            crate::i18n::msg("`{id}` must be 1-64 characters of a-z, 0-9, `-`, `_` or `.`, starting with a letter or digit", &[("id", id)])
        })
    }
}

/// `credentials: "client"`: an HTTP provider with no keys of its own; `"*"` (any model the
/// client names) only there.
fn validate_credentials(
    p: &ProviderConfig,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<(), ConfigError> {
    let any_model = p.models.iter().any(|m| m.id() == "*");
    if p.credentials.is_baton() && p.kind.login_only() {
        return Err(err(
            "credentials",
            crate::i18n::msg("a {kind} provider calls only with the client's own login (Baton never holds that token): set `credentials` to `client`", &[("kind", p.kind.as_str())]),
        ));
    }
    if p.credentials.is_baton() {
        if any_model {
            return Err(err(
                "models",
                crate::i18n::msg("`*` (any model the client names) is for providers with credentials: \"client\"; list this provider's models", &[]),
            ));
        }
        return Ok(());
    }
    if p.kind.is_cli() {
        return Err(err(
            "credentials",
            crate::i18n::msg(
                "a subscription CLI uses its own login; `client` is for HTTP providers",
                &[],
            ),
        ));
    }
    if !p.kind.takes_client_login() {
        return Err(err(
            "credentials",
            crate::i18n::msg("a {kind} provider calls with your organization's key, not a client's own login; remove `credentials`", &[("kind", p.kind.as_str())]),
        ));
    }
    if !p.keys.is_empty() {
        return Err(err(
            "keys",
            crate::i18n::msg("a provider with credentials: \"client\" calls with the client's own credential and has no keys of its own; remove keys", &[]),
        ));
    }
    if any_model && p.models.len() > 1 {
        return Err(err(
            "models",
            crate::i18n::msg("`*` already means any model: list it alone", &[]),
        ));
    }
    Ok(())
}
