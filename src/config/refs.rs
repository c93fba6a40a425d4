//! References to secrets in the configuration (keys, secret headers, a CLI's secret variables):
//! what they may name, and how one is read. The configuration holds references only, never a
//! secret.

use super::provider::{HeaderValue, SecretRef};

/// One of a provider's `headers`: a valid name, and text that is not a secret, or a reference
/// to one. The error names the field (`headers.X-Proxy-Token`).
pub(super) fn check_header(name: &str, value: &HeaderValue) -> Result<(), (String, String)> {
    let at = format!("headers.{name}");
    if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err((at, crate::i18n::msg("is not a valid header name", &[])));
    }
    match value {
        HeaderValue::Text(text) => {
            if http::HeaderValue::from_str(text).is_err() {
                return Err((at, crate::i18n::msg("value must be visible ASCII", &[])));
            }
            if is_secret_header(name) || crate::redact::looks_like_credential(text) {
                return Err((
                    at,
                    crate::i18n::msg("looks like a secret, and the configuration keeps none: give it as {\"env\": \"VARIABLE\"} (Baton sends the variable's value, masked and redacted like a key), or type it into the UI's form", &[]),
                ));
            }
            Ok(())
        }
        HeaderValue::Secret(r) => check_secret_ref(r).map_err(|(field, m)| {
            (
                if field.is_empty() {
                    at.clone()
                } else {
                    format!("{at}.{field}")
                },
                m,
            )
        }),
    }
}

/// A key or secret header: a variable's name, or a stored secret's id, not both. The error
/// names the field (`env`, or empty for the reference as a whole).
pub(super) fn check_secret_ref(r: &SecretRef) -> Result<(), (&'static str, String)> {
    match (&r.stored, r.env.is_empty()) {
        (None, _) => check_env_name(&r.env).map_err(|m| ("env", m)),
        (Some(_), true) => Ok(()),
        (Some(_), false) => Err((
            "",
            crate::i18n::msg("give either `env` or `stored`, not both", &[]),
        )),
    }
}

/// Header names that carry credentials: their values are secrets whatever they look like.
pub fn is_secret_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "authorization" | "proxy-authorization" | "cookie"
    ) || [
        "key",
        "token",
        "secret",
        "password",
        "auth",
        "credential",
        "signature",
    ]
    .iter()
    .any(|w| n.contains(w))
}

pub(crate) fn check_env_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else if name.len() > 20 && !name.contains('_') {
        Err(crate::i18n::msg("looks like a secret, not a variable name: put the key in an environment variable and name that variable here", &[]))
    } else {
        Err(crate::i18n::msg(
            "`{name}` is not an environment variable name (letters, digits and `_`)",
            &[("name", name)],
        ))
    }
}

impl HeaderValue {
    /// Its value: text as written, a secret read from its variable or the secret store
    /// (trimmed; `None` when unset or empty).
    pub fn read(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        match self {
            HeaderValue::Text(t) => Some(t.clone()),
            HeaderValue::Secret(r) => env(&r.lookup_name())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()),
        }
    }

    /// How a value that could not be read is named where it is reported: its field, and the
    /// variable a secret was to come from.
    pub fn missing(&self, at: &str) -> String {
        match self {
            HeaderValue::Secret(r) if r.stored.is_none() => format!("{at} ({})", r.env),
            _ => at.to_string(),
        }
    }

    pub fn is_secret(&self) -> bool {
        matches!(self, HeaderValue::Secret(_))
    }
}
