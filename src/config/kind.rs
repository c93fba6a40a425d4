//! The kinds of provider, as the configuration and the UI know them. Each kind is described by
//! its own folder (`providers/kinds/<kind>/`, `providers/cli/<program>/`) in a [`KindSpec`] it
//! registers there; nothing here names one. A [`ProviderKind`] is one registered kind: what it
//! is called, shown as and asks for in the form, read from its spec.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::canonical::Wire;

/// Whose API a login belongs to, or a provider serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Anthropic,
    OpenAi,
    Google,
    /// Another service (an OpenAI-compatible server elsewhere), or a login of no known shape.
    Other,
}

impl Vendor {
    /// Its name for the UI; `None` for another service.
    pub fn id(self) -> Option<&'static str> {
        match self {
            Vendor::Anthropic => Some("anthropic"),
            Vendor::OpenAi => Some("openai"),
            Vendor::Google => Some("google"),
            Vendor::Other => None,
        }
    }
}

/// A hint the form shows, translated where it is shown: its text (a catalogue key) and the
/// values of its `{name}` marks, which are never translated (addresses, variables, commands).
#[derive(Debug, Clone, Copy)]
pub struct Hint {
    pub text: &'static str,
    pub values: &'static [(&'static str, &'static str)],
}

/// A provider's own fields, as a kind's check reads them.
#[derive(Debug, Clone, Copy)]
pub struct Own<'a> {
    pub base_url: &'a str,
    pub region: Option<&'a str>,
    pub project: Option<&'a str>,
    pub api_version: Option<&'a str>,
}

/// A provider as a kind that may adopt it reads it ([`KindSpec::adopts`]).
#[derive(Debug, Clone, Copy)]
pub struct Adoptable<'a> {
    /// The kind it was written as.
    pub kind: &'a str,
    pub base_url: &'a str,
    /// It calls with the client's own login (`credentials: "client"`).
    pub client_login: bool,
}

/// A kind's own check of a provider: the field that is wrong and what to do, if any is.
pub type Check = fn(&Own) -> Result<(), (&'static str, String)>;

/// What a subscription CLI kind runs and lets through.
#[derive(Debug)]
pub struct CliSpec {
    /// The program's name on `PATH`.
    pub program: &'static str,
    /// The variables a provider's `env` may set: the ones the CLI documents for its own
    /// configuration directory and its own keys. Nothing else: loader and runtime options
    /// (`NODE_OPTIONS`, `LD_PRELOAD`, `GIT_CONFIG_*`…) would let whoever edits a provider run
    /// code, and base-URL and proxy variables would send the CLI's login elsewhere.
    pub env_allowed: &'static [&'static str],
    /// Baton's own environment variables the CLI is given beside the common ones (where its
    /// login lives).
    pub env_passed: &'static [&'static str],
    /// Where its daily quotas reset when it does not say (an IANA zone).
    pub day_reset_zone: Option<&'static str>,
    /// What to run to log it in.
    pub login_hint: &'static str,
}

/// Everything the configuration, the checks and the UI know of one kind, declared in its
/// folder.
#[derive(Debug)]
pub struct KindSpec {
    /// Its name in the configuration (`kind`).
    pub name: &'static str,
    /// Where the UI lists it (lower first).
    pub order: u16,
    /// What it is, for the configuration's schema.
    pub doc: &'static str,
    /// Its name for people, a catalogue key (`i18n::n_`).
    pub label: &'static str,
    /// Its badge: two letters at most.
    pub badge: &'static str,
    /// The API an HTTP kind speaks; `None` for a subscription CLI.
    pub wire: Option<Wire>,
    /// Whose logins it takes (`Other`: decided by the provider's host).
    pub vendor: Vendor,
    /// What an HTTP kind's `baseUrl` looks like, for the form's hint.
    pub base_url_example: Option<&'static str>,
    /// The form's hint under the address (`{example}` is the example, `{model}` the sample
    /// model).
    pub base_url_hint: Option<Hint>,
    /// The form's hint for a key typed in.
    pub key_hint: Option<Hint>,
    /// What the form says when the provider has no key.
    pub no_key_hint: Option<Hint>,
    /// A model it takes, for the form's hint.
    pub sample_model: Option<&'static str>,
    /// The fields of its own it takes beside the common ones (the form shows `project` and
    /// `region`; `apiVersion` and `awsProfile` are file-only).
    pub fields: &'static [&'static str],
    /// A key of its may be a credentials file's JSON (a Google service account's key).
    pub credentials_file: bool,
    /// It can call with the client's own login (`credentials: "client"`).
    pub client_login: bool,
    /// It calls only with the client's own login (a subscription's backend, whose token Baton
    /// never holds).
    pub login_only: bool,
    /// A provider written as another kind that is really this one (written before this kind
    /// existed): read as this kind wherever a configuration is read.
    pub adopts: Option<fn(&Adoptable) -> bool>,
    /// Its own check of a provider's address and fields, after the common ones.
    pub check: Option<Check>,
    /// For a subscription CLI kind: what it runs.
    pub cli: Option<CliSpec>,
}

impl KindSpec {
    /// The spec's defaults, for a folder to fill in.
    pub const BASE: KindSpec = KindSpec {
        name: "",
        order: u16::MAX,
        doc: "",
        label: "",
        badge: "",
        wire: None,
        vendor: Vendor::Other,
        base_url_example: None,
        base_url_hint: None,
        key_hint: None,
        no_key_hint: None,
        sample_model: None,
        fields: &[],
        credentials_file: false,
        client_login: false,
        login_only: false,
        adopts: None,
        check: None,
        cli: None,
    };
}

/// One kind's registration, submitted from its folder (`inventory::submit!`): the registry is
/// the set of folders compiled in.
pub struct Registered(pub &'static KindSpec);

inventory::collect!(Registered);

/// The kinds compiled in, in the order the UI offers them.
static ALL: LazyLock<Vec<ProviderKind>> = LazyLock::new(|| {
    let mut all: Vec<ProviderKind> = inventory::iter::<Registered>
        .into_iter()
        .map(|r| ProviderKind(r.0))
        .collect();
    all.sort_by_key(|k| (k.0.order, k.0.name));
    all
});

/// Their names, for a configuration's error.
static NAMES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| ALL.iter().map(|k| k.0.name).collect());

/// A provider's kind: one of the registered [`KindSpec`]s.
#[derive(Clone, Copy)]
pub struct ProviderKind(&'static KindSpec);

impl ProviderKind {
    /// The kind a folder declares (its `KIND` constant).
    pub const fn of(spec: &'static KindSpec) -> Self {
        Self(spec)
    }

    /// Every kind compiled in, in the UI's order.
    pub fn all() -> &'static [ProviderKind] {
        &ALL
    }

    /// The kind called `name` in the configuration.
    pub fn named(name: &str) -> Option<ProviderKind> {
        ALL.iter().copied().find(|k| k.0.name == name)
    }

    /// Its spec, as its folder declared it.
    pub fn spec(self) -> &'static KindSpec {
        self.0
    }

    /// Whether `spec` is this kind's.
    pub fn is(self, spec: &KindSpec) -> bool {
        std::ptr::eq(self.0, spec) || self.0.name == spec.name
    }

    /// The format an HTTP provider speaks; `None` for subscription CLIs.
    pub fn wire(self) -> Option<Wire> {
        self.0.wire
    }

    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    /// Whether this kind runs a local subscription CLI instead of calling an HTTP API.
    pub fn is_cli(self) -> bool {
        self.0.cli.is_some()
    }

    /// The variables a CLI provider's `env` may set ([`CliSpec::env_allowed`]).
    pub fn cli_env_allowed(self) -> &'static [&'static str] {
        self.0.cli.as_ref().map_or(&[], |c| c.env_allowed)
    }

    /// The kind's name for people (the UI's kind list and badges), translated where it is shown.
    pub fn label(self) -> &'static str {
        self.0.label
    }

    /// Its badge: two letters at most.
    pub fn badge(self) -> &'static str {
        self.0.badge
    }

    /// What an HTTP kind's `baseUrl` looks like, for the form's hint.
    pub fn base_url_example(self) -> Option<&'static str> {
        self.0.base_url_example
    }

    /// The fields of its own it takes beside the common ones.
    pub fn fields(self) -> &'static [&'static str] {
        self.0.fields
    }

    /// Whether a key of its may be a credentials file's JSON (a Google service account's key).
    pub fn takes_credentials_file(self) -> bool {
        self.0.credentials_file
    }

    /// Its own check of a provider of its ([`KindSpec::check`]).
    pub fn check(self, own: &Own) -> Result<(), (&'static str, String)> {
        self.0.check.map_or(Ok(()), |c| c(own))
    }

    /// Whether it can call with the client's own login (`credentials: "client"`): the vendors
    /// whose subscriptions clients log in to.
    pub fn takes_client_login(self) -> bool {
        self.0.client_login
    }

    /// A model it takes, for the form's hint.
    pub fn sample_model(self) -> Option<&'static str> {
        self.0.sample_model
    }

    /// The CLI's program name on `PATH`, for the CLI kinds.
    pub fn cli_program(self) -> Option<&'static str> {
        self.0.cli.as_ref().map(|c| c.program)
    }

    /// Whether it calls only with the client's own login.
    pub fn login_only(self) -> bool {
        self.0.login_only
    }

    /// The kind a provider written as `p` is read as: the kind that adopts it, else its own.
    pub fn adopting(self, base_url: &str, client_login: bool) -> ProviderKind {
        let p = Adoptable {
            kind: self.0.name,
            base_url,
            client_login,
        };
        ALL.iter()
            .copied()
            .find(|k| k.0.adopts.is_some_and(|a| a(&p)))
            .unwrap_or(self)
    }

    /// The names of the kinds that take `field`, for a message saying which do.
    pub fn taking(field: &str) -> Vec<&'static str> {
        ALL.iter()
            .filter(|k| k.0.fields.contains(&field))
            .map(|k| k.0.name)
            .collect()
    }
}

impl PartialEq for ProviderKind {
    fn eq(&self, other: &Self) -> bool {
        self.is(other.0)
    }
}

impl Eq for ProviderKind {}

impl std::hash::Hash for ProviderKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::named(s).ok_or_else(|| {
            format!(
                "unknown kind `{s}`, expected one of {}",
                NAMES
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }
}

impl Serialize for ProviderKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name)
    }
}

impl<'de> Deserialize<'de> for ProviderKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Self::named(&name).ok_or_else(|| serde::de::Error::unknown_variant(&name, NAMES.as_slice()))
    }
}

impl JsonSchema for ProviderKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProviderKind".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let one_of: Vec<serde_json::Value> = ALL
            .iter()
            .map(|k| {
                serde_json::json!({
                    "const": k.0.name,
                    "description": k.0.doc,
                    "type": "string",
                })
            })
            .collect();
        schemars::json_schema!({
            "description": "Upstream API kinds.",
            "oneOf": one_of,
        })
    }
}
