//! Where the secrets an admin-API body names may go: key variables from Baton's environment
//! only to where they belong, stored secrets only with the provider and origin they were saved
//! for, never Baton's own keys. The config file (which the user writes on disk) is not bound by
//! these rules; what the admin key sends is.

use super::error::ApiError;
use crate::config::ProviderConfig;
use crate::gateway::Core;
use crate::i18n::msg;

/// What the rules compare a body against: the variables that hold Baton's own keys, and the
/// providers that already declare where a variable goes (the config file's and the live
/// configuration's).
pub struct Bounds {
    own: Vec<String>,
    declared: Vec<ProviderConfig>,
}

impl Bounds {
    /// A running gateway's.
    pub(crate) fn of(core: &Core) -> Self {
        let mut declared = core.file_config.providers.clone();
        declared.extend(
            core.routing
                .snapshot
                .load()
                .providers
                .iter()
                .map(|p| p.config.clone()),
        );
        Self {
            own: baton_key_vars(core),
            declared,
        }
    }

    /// For `baton config import`, which runs without a gateway: the data directory's live
    /// providers (the config file's seeded among them) declare, and Baton's own variables are
    /// the ones it always reads.
    pub fn offline(live: Vec<ProviderConfig>) -> Self {
        Self {
            own: OWN_VARS.iter().map(|v| v.to_string()).collect(),
            declared: live,
        }
    }
}

/// The variables Baton reads its own keys from, whatever the config file says.
const OWN_VARS: [&str; 2] = ["BATON_ADMIN_KEY", "BATON_GATEWAY_KEY"];

/// Binds the keys an admin-API body names to where they belong, so the admin key cannot read
/// other secrets by pointing a provider at a server of its choosing:
/// - `env` must look like an API-key variable (`…_API_KEY`, `…_KEY`, `…_TOKEN`, `…_SECRET`),
///   never `PATH`-like process variables nor one holding Baton's own keys (gateway keys, the
///   admin key, Redis credentials); and it goes only where it belongs: to the origin the
///   catalog names it for, to an origin where the config file (or the live configuration)
///   already sends it, or anywhere when the user named it `BATON_…` for that purpose. So
///   `AWS_SECRET_ACCESS_KEY` or `GITHUB_TOKEN` from Baton's environment cannot be sent to a
///   server of the admin key's choosing;
/// - `stored` (a key typed into the UI earlier) may only be kept by the provider it was saved
///   for, and only while its `baseUrl` stays at the same origin (scheme, host, port): a new
///   host, or `http` where it was `https`, needs the key typed again.
pub fn check_key_refs(
    bounds: &Bounds,
    config: &ProviderConfig,
    existing: Option<&ProviderConfig>,
) -> Result<(), ApiError> {
    let own = &bounds.own;
    for (at, k) in config.secret_refs() {
        let name = k.env.trim();
        if !name.is_empty() {
            if own.iter().any(|o| o == name) {
                return Err(ApiError::field(
                    format!("{at}.env"),
                    msg("`{name}` holds one of Baton's own keys, which are never sent to a provider; name the provider's API-key variable", &[("name", name)]),
                ));
            }
            let declared = declared_for(bounds, name, &config.base_url);
            // The catalog's own variable for this service is a key whatever its name says
            // (`AWS_BEARER_TOKEN_BEDROCK`).
            let catalogs = catalog_sends(name, &config.base_url);
            if !looks_like_key_var(name) && !declared && !catalogs {
                return Err(ApiError::field(
                    format!("{at}.env"),
                    msg("`{name}` does not look like an API-key variable; name one ending in _API_KEY, _KEY, _TOKEN or _SECRET, or type the key into the form", &[("name", name)]),
                ));
            }
            if !declared && !name.starts_with(OPEN_PREFIX) && !catalogs {
                return Err(ApiError::field(
                    format!("{at}.env"),
                    msg(
                        "`{name}` is not a key Baton sends to {host}: a variable from Baton's environment goes only where the catalog or the config file sends it (OPENAI_API_KEY to https://api.openai.com), or is one you named {prefix}… for any provider. Type the key into the form, rename the variable, or declare this provider in the config file",
                        &[
                            ("name", name),
                            ("host", &host_of(&config.base_url).unwrap_or_else(|| msg("this address", &[]))),
                            ("prefix", OPEN_PREFIX),
                        ],
                    ),
                ));
            }
        }
        if let Some(id) = &k.stored {
            let Some(old) = existing.filter(|e| e.stored_ids().contains(id)) else {
                return Err(ApiError::field(
                    format!("{at}.stored"),
                    msg("this stored secret belongs to another provider or does not exist; type it again", &[]),
                ));
            };
            let (was, now) = (host_of(&old.base_url), host_of(&config.base_url));
            if was != now {
                return Err(ApiError::field(
                    at,
                    msg(
                        "the stored key was saved for {was}; to send a key to {now}, type it again",
                        &[
                            ("was", &was.unwrap_or_else(|| msg("another address", &[]))),
                            ("now", &now.unwrap_or_else(|| msg("the new address", &[]))),
                        ],
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Variables that hold Baton's own keys (never a provider's).
fn baton_key_vars(core: &Core) -> Vec<String> {
    let f = &core.file_config;
    let mut v: Vec<String> = f.gateway_keys.iter().map(|k| k.env.clone()).collect();
    v.extend(OWN_VARS.iter().map(|v| v.to_string()));
    if let Some(r) = &f.state.redis {
        v.extend(r.password_env.iter().cloned());
        v.extend(r.username_env.iter().cloned());
    }
    v
}

/// `OPENAI_API_KEY`, `GROQ_KEY`, `HF_TOKEN`, `MY_SECRET`: upper-case words ending in a key word.
fn looks_like_key_var(name: &str) -> bool {
    let name = unnumbered(name);
    let upper = name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    upper
        && ["_API_KEY", "_KEY", "_TOKEN", "_SECRET", "_APIKEY"]
            .iter()
            .any(|suffix| name.len() > suffix.len() && name.ends_with(suffix))
}

/// A second or third key of the same kind (`GROQ_API_KEY_2`, as `config.example.json` shows) is
/// read as the variable it numbers (`GROQ_API_KEY`).
fn unnumbered(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((base, n))
            if !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// Variables named this way are the user's own keys for any provider (set in Baton's
/// environment for that purpose); others go only where they are declared.
pub(crate) const OPEN_PREFIX: &str = "BATON_";

/// Whether a provider at the same origin as `base_url`, in the configuration file or the live
/// configuration, already names `name`: the user's file (or an earlier edit the same rules
/// allowed) sent it there.
fn declared_for(bounds: &Bounds, name: &str, base_url: &str) -> bool {
    let origin = host_of(base_url);
    let declares = |c: &ProviderConfig| {
        c.secret_refs().any(|(_, k)| k.env == name)
            && origin.is_some()
            && host_of(&c.base_url) == origin
    };
    bounds.declared.iter().any(declares)
}

/// Whether the shipped catalog names `name` as the key of the provider at `base_url`'s origin
/// (`OPENAI_API_KEY` for `https://api.openai.com`). A catalog URL whose first host label is
/// `YOUR-RESOURCE` stands for every resource of that service (`AZURE_OPENAI_API_KEY` for any
/// `https://NAME.openai.azure.com`).
fn catalog_sends(name: &str, base_url: &str) -> bool {
    let Some(origin) = host_of(base_url) else {
        return false;
    };
    crate::catalog::entries().iter().any(|e| {
        e.key_env.as_deref() == Some(unnumbered(name))
            && e.base_url
                .as_deref()
                .and_then(host_of)
                .is_some_and(|o| same_origin(&o, &origin))
    })
}

/// `catalog` is `origin`, or names every resource of a service (`https://your-resource.…`),
/// or is an AWS regional endpoint of the same service in another region
/// (`https://bedrock-runtime.us-east-1.amazonaws.com` for `…eu-west-1…`: one key for them all).
fn same_origin(catalog: &str, origin: &str) -> bool {
    if catalog == origin {
        return true;
    }
    let aws = |o: &str| -> Option<(String, String)> {
        let host = o.strip_prefix("https://")?.strip_suffix(".amazonaws.com")?;
        let (service, region) = host.split_once('.')?;
        let region_like = region.split('-').count() >= 3
            && region
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        (region_like && !service.is_empty()).then(|| (service.to_string(), region.to_string()))
    };
    if let (Some((a, _)), Some((b, _))) = (aws(catalog), aws(origin)) {
        return a == b;
    }
    let Some(rest) = catalog.strip_prefix("https://your-resource.") else {
        return false;
    };
    origin
        .strip_prefix("https://")
        .and_then(|o| o.split_once('.'))
        .is_some_and(|(label, tail)| !label.is_empty() && tail == rest)
}

/// The host (and port) a base URL points at, lower-cased.
/// Where a key goes: scheme, host and port (`https://api.x` and `http://api.x` are two places:
/// a key saved for the first must not follow a provider to the second, in the clear).
fn host_of(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    u.host_str()?;
    Some(u.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::same_origin;

    #[test]
    fn a_catalog_origin_stands_for_every_resource_or_region_of_its_service() {
        let bedrock = "https://bedrock-runtime.us-east-1.amazonaws.com";
        assert!(same_origin(bedrock, bedrock));
        assert!(same_origin(
            bedrock,
            "https://bedrock-runtime.eu-west-1.amazonaws.com"
        ));
        assert!(same_origin(
            bedrock,
            "https://bedrock-runtime.ap-northeast-1.amazonaws.com"
        ));
        assert!(
            !same_origin(bedrock, "https://s3.eu-west-1.amazonaws.com"),
            "another service"
        );
        assert!(
            !same_origin(bedrock, "http://bedrock-runtime.eu-west-1.amazonaws.com"),
            "in the clear"
        );
        assert!(!same_origin(
            bedrock,
            "https://bedrock-runtime.eu-west-1.amazonaws.com.evil.example"
        ));
        assert!(!same_origin(bedrock, "https://evil.example"));
        let azure = "https://your-resource.openai.azure.com";
        assert!(same_origin(azure, "https://acme.openai.azure.com"));
        assert!(!same_origin(
            azure,
            "https://acme.openai.azure.com.evil.example"
        ));
    }
}
