//! The calling client's own credential (`credentials: "client"` providers): which headers
//! carry it, whose account and vendor it is, and that it goes nowhere else.

use super::secret::{ApiKey, Secret};

/// The calling client's own credential (a subscription login, when Baton's key came in
/// `x-baton-key`), for providers with `credentials: "client"`: held for this request only,
/// never stored, logged or sent to any other provider.
#[derive(Debug, Clone)]
pub struct ClientCredential {
    /// Cooldowns and health are per account: `id` is a non-secret digest of the account
    /// (`client:3f9a…`: the account ChatGPT's header or Claude Code's body names, else the login
    /// itself); `secret` the credential.
    pub key: ApiKey,
    /// The headers that carry it and the client's own identification, as they came.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// The Baton key it came with (for the account id only).
    baton_key: Secret,
    /// Whose login it is: it goes only to that vendor's providers.
    pub vendor: Vendor,
}

pub use crate::config::kind::Vendor;

/// The vendor a login's shape names: Anthropic's `sk-ant-…` keys and `sk-ant-oat…` logins,
/// OpenAI's `sk-…` keys and ChatGPT's JWT logins (with `chatgpt-account-id`), Google's `AIza…`
/// keys and `ya29.…` tokens.
fn vendor_of_login(secret: &str, chatgpt_account: bool) -> Vendor {
    let jwt = is_jwt(secret);
    if secret.starts_with("sk-ant-") {
        Vendor::Anthropic
    } else if chatgpt_account || secret.starts_with("sk-") || jwt {
        Vendor::OpenAi
    } else if secret.starts_with("AIza") || secret.starts_with("ya29.") {
        Vendor::Google
    } else {
        Vendor::Other
    }
}

/// Who a provider's upstream is: its kind's vendor, and for a kind of none (an
/// OpenAI-compatible server) by host.
pub fn vendor_of_provider(p: &crate::config::ProviderConfig) -> Vendor {
    let by_kind = p.kind.spec().vendor;
    if by_kind != Vendor::Other {
        return by_kind;
    }
    let host = reqwest::Url::parse(&p.base_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
        .unwrap_or_default();
    let openai = ["openai.com", "chatgpt.com"]
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")));
    if openai {
        Vendor::OpenAi
    } else {
        Vendor::Other
    }
}

/// The header a client puts Baton's key in when Authorization / x-api-key carry its own
/// subscription credential (for `credentials: "client"` providers).
pub const BATON_KEY_HEADER: &str = "x-baton-key";

/// The headers clients present keys in besides `Authorization`, named once: a name written
/// as text is parsed and checked again on every lookup.
pub static BATON_KEY: http::HeaderName = http::HeaderName::from_static(BATON_KEY_HEADER);
pub static X_API_KEY: http::HeaderName = http::HeaderName::from_static("x-api-key");
pub static X_GOOG_API_KEY: http::HeaderName = http::HeaderName::from_static("x-goog-api-key");

/// Headers a client's own request carries that its subscription backend expects back.
const CLIENT_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "chatgpt-account-id",
    "x-app",
    "user-agent",
    "originator",
    "session_id",
    "session-id",
    "openai-beta",
];

impl ClientCredential {
    /// The client's credential, when it authenticated to Baton with `x-baton-key` and sent
    /// its own in Authorization, x-api-key or x-goog-api-key.
    pub fn from_headers(h: &http::HeaderMap) -> Option<Self> {
        static CHATGPT_ACCOUNT: http::HeaderName =
            http::HeaderName::from_static("chatgpt-account-id");
        let baton_key = h.get(&BATON_KEY)?.to_str().ok()?.trim();
        let secret = h
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(strip_scheme)
            .or_else(|| {
                [&X_API_KEY, &X_GOOG_API_KEY]
                    .into_iter()
                    .find_map(|n| h.get(n).and_then(|v| v.to_str().ok()))
                    .map(str::trim)
            })
            // Baton's own key sent twice is not a login, and never leaves.
            .filter(|s| !s.is_empty() && *s != baton_key)?;
        // The account: ChatGPT names it (stable across token refreshes); otherwise the login.
        let account = h
            .get(&CHATGPT_ACCOUNT)
            .and_then(|v| v.to_str().ok())
            .filter(|a| !a.is_empty())
            .unwrap_or(secret);
        let chatgpt_account = h.contains_key(&CHATGPT_ACCOUNT);
        let headers = h
            .iter()
            .filter(|(name, _)| {
                let n = name.as_str();
                CLIENT_HEADERS.contains(&n) || n.starts_with("x-codex-")
            })
            // Baton's own key never leaves, whichever header carries it (x-api-key beside a
            // login, or as the login itself).
            .filter(|(_, v)| v.to_str().map_or(true, |v| strip_scheme(v) != baton_key))
            .map(|(n, v)| {
                let mut v = v.clone();
                v.set_sensitive(true);
                (n.clone(), v)
            })
            .collect();
        Some(Self {
            key: ApiKey {
                id: account_id(baton_key, account),
                secret: Secret::new(secret),
            },
            headers,
            baton_key: Secret::new(baton_key),
            vendor: vendor_of_login(secret, chatgpt_account),
        })
    }

    /// A login of no known shape belongs to the vendor whose API the client spoke.
    pub fn spoken_to(mut self, vendor: Vendor) -> Self {
        if self.vendor == Vendor::Other {
            self.vendor = vendor;
        }
        self
    }

    /// Whether this login may go to `p`: only to its own vendor's providers.
    pub fn fits(&self, p: &crate::config::ProviderConfig) -> bool {
        vendor_of_provider(p) == self.vendor
    }

    /// The account Claude Code names in its request body (`metadata.user_id`, a JSON text with
    /// `account_uuid`; older versions `user_…_account_<uuid>_session_…`), which outlives the
    /// login's refreshes, so a capped account stays capped after Claude Code renews its token.
    pub fn with_account_in(mut self, body: &serde_json::Map<String, serde_json::Value>) -> Self {
        let Some(user) = body
            .get("metadata")
            .and_then(|m| m.get("user_id"))
            .and_then(serde_json::Value::as_str)
        else {
            return self;
        };
        let account = match serde_json::from_str::<serde_json::Value>(user) {
            Ok(v) => v
                .get("account_uuid")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            Err(_) => user
                .split_once("_account_")
                .map(|(_, rest)| rest.split("_session_").next().unwrap_or(rest).to_string()),
        };
        if let Some(a) = account.filter(|a| !a.is_empty()) {
            self.key.id = account_id(self.baton_key.expose(), &a);
        }
        self
    }
}

/// A JSON Web Token's shape (a ChatGPT login, a Microsoft Entra ID access token): three
/// base64url parts, the first `eyJ`.
pub(crate) fn is_jwt(secret: &str) -> bool {
    secret.starts_with("eyJ") && secret.matches('.').count() == 2
}

/// An Authorization value without its scheme, whatever its case (`Bearer`, `bearer`, `BEARER`).
pub(crate) fn strip_scheme(v: &str) -> &str {
    // A header's text is visible ASCII, spaces and tabs (`HeaderValue::to_str`), so ASCII
    // whitespace is all there is to trim, without decoding characters.
    let v = v.trim_ascii();
    match v.split_once(' ') {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("bearer") => rest.trim_ascii(),
        _ => v,
    }
}

/// What a client's own account is named by where a key of Baton's would be (`client:3f9a…`).
const ACCOUNT_PREFIX: &str = "client:";

/// Whether a key id names a client's own account rather than a key of Baton's.
pub fn is_account(key: &str) -> bool {
    key.starts_with(ACCOUNT_PREFIX)
}

/// A non-secret id for an account (`client:3f9a…`): a digest, never the account itself. The
/// account is the client's word, so it counts only together with the Baton key that came with
/// it: one team member naming another's account cannot cool that member's subscription.
fn account_id(baton_key: &str, account: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(baton_key.as_bytes());
    ctx.update(b"\n");
    ctx.update(account.as_bytes());
    let digest = ctx.finish();
    let id: String = digest.as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{ACCOUNT_PREFIX}{id}")
}
