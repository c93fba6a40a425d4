//! A provider's definition in the config file: kind, URL, keys (as references, never the
//! secrets), models with their capabilities and prices, limits and timeouts.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::kind::ProviderKind;

/// Where a secret comes from. Secrets are never written into the configuration file itself.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// Name of the environment variable that holds the secret.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env: String,
    /// Id of a secret typed into the UI and kept in the data directory's secret store (set by
    /// Baton, not by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<String>,
}

impl SecretRef {
    /// A stable, non-secret identifier used in logs, cooldowns and the admin API.
    pub fn label(&self) -> String {
        match &self.stored {
            Some(id) => format!("stored:{id}"),
            None => format!("env:{}", self.env),
        }
    }

    /// The name the secret is looked up by: the variable, or the stored secret's id behind
    /// [`crate::secrets::LOOKUP_PREFIX`].
    pub fn lookup_name(&self) -> String {
        match &self.stored {
            Some(id) => format!("{}{id}", crate::secrets::LOOKUP_PREFIX),
            None => self.env.clone(),
        }
    }
}

/// A value in a provider's `headers` or a CLI provider's `env`: text sent as written (nothing
/// secret: OpenRouter's `HTTP-Referer`, a version, a config directory), or a secret by
/// reference, like a key (`{"env": "VAR"}`, or a value typed into the UI and kept in the secret
/// store). The config never holds the secret.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(untagged)]
pub enum HeaderValue {
    Text(String),
    Secret(SecretRef),
}

/// By hand, for errors that say what to write (an untagged enum's only says "no variant").
impl<'de> Deserialize<'de> for HeaderValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => Ok(HeaderValue::Text(s)),
            v @ serde_json::Value::Object(_) => serde_json::from_value(v)
                .map(HeaderValue::Secret)
                .map_err(D::Error::custom),
            _ => Err(D::Error::custom(
                "a header value is text, or {\"env\": \"VARIABLE\"} for a secret",
            )),
        }
    }
}

/// Whose credential calls a provider.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Credentials {
    #[default]
    Baton,
    Client,
}

impl Credentials {
    pub fn is_baton(&self) -> bool {
        *self == Credentials::Baton
    }
}

/// What to do when a subscription serves past its window from paid extra usage.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Overage {
    #[default]
    Avoid,
    Allow,
}

impl Overage {
    pub fn is_avoid(&self) -> bool {
        *self == Overage::Avoid
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderConfig {
    /// Unique id: lowercase letters, digits, `-`, `_`, `.`; used in `provider/model` names.
    pub id: String,
    /// Display name (defaults to the id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub kind: ProviderKind,
    /// Base URL up to and including the version segment, e.g. `https://api.groq.com/openai/v1`.
    /// Required for the HTTP kinds; CLI kinds have none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_url: String,
    /// Azure OpenAI: the `api-version` of its deployment URLs (default `2024-10-21`, the GA
    /// version); not used with a `…/openai/v1` base URL, which takes none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// AWS Bedrock and Google Vertex AI: the region (default: the one the base URL names,
    /// `bedrock-runtime.REGION.amazonaws.com`, `REGION-aiplatform.googleapis.com`; needed for a
    /// private endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Google Vertex AI: the Google Cloud project whose models are called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// AWS Bedrock without a key: the profile of the shared credentials file to use (default
    /// `AWS_PROFILE`, else `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws_profile: Option<String>,
    /// HTTP kinds: an outbound proxy for this provider's requests only (`http://`, `https://`,
    /// `socks5://` or `socks5h://`, e.g. a company's egress proxy). A proxy that does not
    /// answer fails the attempt before its first byte, and the request fails over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// HTTP kinds: the login of a `proxy` that asks for one, `USER:PASSWORD`, by reference
    /// (`{"env": "CORP_PROXY_LOGIN"}`), sent as its `Proxy-Authorization`. The configuration
    /// never holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_login: Option<SecretRef>,
    /// CLI kinds: the executable, a name looked up on `PATH` or an absolute path (default: the
    /// CLI's own name on `PATH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
    /// CLI kinds: extra environment variables for the CLI (e.g. `CLAUDE_CONFIG_DIR`). The CLI
    /// otherwise gets only PATH, HOME, TZ, locale and its own config variables. A key variable
    /// (`ANTHROPIC_API_KEY`…) is a secret by reference (`{"env": "VAR"}`), as a key is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, HeaderValue>,
    /// CLI kinds: render a multi-turn conversation into one transcript prompt instead of
    /// refusing it (the CLI then sees earlier turns as text, not as real turns).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flatten_history: bool,
    /// API keys, tried round-robin. Empty for keyless servers such as a local Ollama.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<SecretRef>,
    /// Models in preference order: names, or objects with capabilities.
    pub models: Vec<ModelEntry>,
    /// Lower is tried first for `auto`.
    #[serde(default = "default_priority")]
    pub priority: i64,
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Whether `auto` may use this provider (it can still be pinned or used in routes).
    #[serde(default = "default_true")]
    pub auto: bool,
    /// Requests in flight at once; unlimited when absent (1 for CLI kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Extra headers sent upstream: text (OpenRouter's `HTTP-Referer`), or a secret by
    /// reference (`{"env": "PROXY_TOKEN"}`), which is sent, masked and redacted like a key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, HeaderValue>,
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Capabilities that apply to every model unless the model entry overrides them.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// IANA zone whose midnight resets this provider's daily quotas (Gemini:
    /// `America/Los_Angeles`); UTC when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_reset: Option<String>,
    /// What a rate limit applies to. When absent, Baton cools the key, or the key and model
    /// when the error names a per-model limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_scope: Option<LimitScope>,
    /// After a per-model limit, try this provider's next model before leaving the provider.
    #[serde(default = "default_true")]
    pub model_fallback: bool,
    /// Immediate retries on the same target after a lone 500 or connection reset.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The last share of a usage window kept for requests pinned to this provider (its id or
    /// `provider/model`): `{"7d": 0.1}` keeps the last 10 % of the weekly window. Window ids:
    /// `5h`, `7d`, `7d_opus`, `1d`… (as `baton status` lists them).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub reserve: std::collections::BTreeMap<String, f64>,
    /// Per-key limits of a free tier, counted locally to demote a key before it hits them.
    #[serde(default, skip_serializing_if = "is_default_limits")]
    pub limits: crate::limits::quota::DeclaredLimits,
    /// Price tier of this provider's models that state neither `tier` nor a price (subscription
    /// CLIs and loopback servers are `free` unless told otherwise). A client key's `maxTier`
    /// keeps failover below its tier; models of unknown tier are kept away from such keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<crate::pricing::Tier>,
    /// Whose credential calls this provider: Baton's own keys (`baton`, the default), or the
    /// calling client's own (`client`: Claude Code's or Codex's subscription login, forwarded
    /// unchanged; the client then authenticates to Baton with `x-baton-key`). Baton never stores
    /// a client's credential; cooldowns are kept per account.
    #[serde(default, skip_serializing_if = "Credentials::is_baton")]
    pub credentials: Credentials,
    /// A Claude subscription whose window is spent may go on serving from paid extra usage.
    /// `avoid` (the default) treats that as the cap: later requests go to the other providers
    /// until the window resets, and the user is told once; `allow` keeps using it.
    #[serde(default, skip_serializing_if = "Overage::is_avoid")]
    pub overage: Overage,
    /// When this provider is a request's first candidate and slow to answer, send the request
    /// to the next candidate too (`true`) or never (`false`); unset follows the route or
    /// `routing.hedge.enabled`. A subscription passed through and a CLI are never hedged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hedge: Option<bool>,
}

fn is_default_limits(l: &crate::limits::quota::DeclaredLimits) -> bool {
    *l == crate::limits::quota::DeclaredLimits::default()
}

/// The scope a provider's rate limits apply to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum LimitScope {
    /// Each API key separately (most providers).
    Key,
    /// Each key and model separately (e.g. Groq: per organization and model).
    KeyModel,
    /// Each model, across keys.
    Model,
    /// The whole provider (e.g. OpenRouter free models: per account).
    Provider,
}

impl ProviderConfig {
    /// Reads it as the kind that adopts it, if one does (a provider written before its kind
    /// existed: `openai-responses` on Codex's login at ChatGPT is `chatgpt`). Every place a
    /// configuration is read calls this, so routing sees one kind.
    pub fn adopt_kind(&mut self) {
        self.kind = self
            .kind
            .adopting(&self.base_url, self.credentials == Credentials::Client);
    }

    pub fn display_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }

    /// A subscription: a CLI on its own login, or an API called with the client's login. Its
    /// caps always matter to the user (a 5-hour window is not a per-minute blip).
    pub fn is_subscription(&self) -> bool {
        self.kind.is_cli() || self.credentials == Credentials::Client
    }

    /// Every secret this provider refers to, with the JSON path that names it: its keys
    /// (`keys[0]`), its secret headers (`headers.X-Proxy-Token`) and a CLI's secret variables
    /// (`env.ANTHROPIC_API_KEY`).
    pub fn secret_refs(&self) -> impl Iterator<Item = (String, &SecretRef)> {
        let keys = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| (format!("keys[{i}]"), k));
        let headers = self.headers.iter().filter_map(|(n, v)| match v {
            HeaderValue::Secret(r) => Some((format!("headers.{n}"), r)),
            HeaderValue::Text(_) => None,
        });
        let env = self.env.iter().filter_map(|(n, v)| match v {
            HeaderValue::Secret(r) => Some((format!("env.{n}"), r)),
            HeaderValue::Text(_) => None,
        });
        keys.chain(headers).chain(env)
    }

    /// The ids of the secrets this provider keeps in the secret store.
    pub fn stored_ids(&self) -> Vec<String> {
        self.secret_refs()
            .filter_map(|(_, r)| r.stored.clone())
            .collect()
    }

    /// `maxConcurrency`, defaulting to one call at a time for a CLI (each is a process on a
    /// personal subscription).
    pub fn concurrency(&self) -> Option<u32> {
        self.max_concurrency
            .or_else(|| self.kind.is_cli().then_some(1))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum ModelEntry {
    Name(String),
    Detailed(ModelDetail),
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelDetail {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<bool>,
    /// Honours a JSON schema (`response_format` and its kin); `false`: it is told the schema
    /// in its system prompt instead, and its answer checked all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<bool>,
    /// Largest `max_tokens` the model accepts; larger requests are capped to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// List price in USD per million tokens (else the catalog's, when it knows the model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<crate::pricing::Price>,
    /// Price tier, when it should not follow from the price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<crate::pricing::Tier>,
    /// Other names this model answers to: the same model as its own vendor names it, so a
    /// request for that name can be served here too (an Azure deployment of `gpt-4o` serves
    /// `gpt-4o`; the request goes out under this entry's `id`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<String>,
}

impl ModelEntry {
    pub fn id(&self) -> &str {
        match self {
            ModelEntry::Name(n) => n,
            ModelEntry::Detailed(d) => &d.id,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capabilities {
    /// Accepts `tools` / tool messages.
    #[serde(default = "default_true")]
    pub tools: bool,
    /// Accepts image content parts.
    #[serde(default = "default_true")]
    pub images: bool,
    /// Honours a JSON schema for its answer (`response_format`, `output_config.format`…). A
    /// small model or a server without the feature (`false`) is told the schema in its system
    /// prompt instead, as a subscription CLI is; its answer is checked all the same.
    #[serde(default = "default_true")]
    pub structured_output: bool,
    /// Context window in tokens; unknown when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// Continues a trailing assistant message (needed to resume a broken stream here).
    #[serde(default)]
    pub prefill: bool,
    /// Largest `max_tokens` the provider's models accept; larger requests (Claude Code asks
    /// for 32k-64k) are capped to it instead of being rejected upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// The tool call ids the provider accepts in a conversation: any (the default), or
    /// exactly nine letters and digits (Mistral's rule: "Tool call id was … but must be a-z,
    /// A-Z, 0-9, with a length of 9"). Ids other providers made are rewritten to fit, the
    /// same way on every turn.
    #[serde(default, skip_serializing_if = "ToolCallIds::is_any")]
    pub tool_call_ids: ToolCallIds,
}

/// What tool call ids a provider takes (`capabilities.toolCallIds`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ToolCallIds {
    /// Any id (OpenAI's rule).
    #[default]
    Any,
    /// Exactly nine ASCII letters and digits (Mistral's rule).
    NineAlphanumerics,
}

impl ToolCallIds {
    fn is_any(&self) -> bool {
        *self == ToolCallIds::Any
    }
}

impl Default for Capabilities {
    fn default() -> Self {
        Self {
            tools: true,
            images: true,
            structured_output: true,
            context_window: None,
            prefill: false,
            max_output_tokens: None,
            tool_call_ids: ToolCallIds::Any,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Timeouts {
    /// TCP/TLS connect.
    #[serde(default = "default_connect")]
    pub connect_ms: u64,
    /// Streamed requests: from sending the request to the response headers (a streaming
    /// server sends them at once). For a subscription CLI: to its first output (120 s unless
    /// set: the program starts first).
    #[serde(default = "default_first_byte")]
    pub first_byte_ms: u64,
    /// Longest silence between any two chunks of a stream, before the first content too:
    /// keep-alives and reasoning deltas count as activity, so a model that streams its
    /// thinking keeps going while a silent upstream fails over. Also bounds silences while a
    /// non-streamed body arrives.
    #[serde(default = "default_idle")]
    pub idle_ms: u64,
    /// Non-streamed requests, while `firstByteMs` is left at its default: from sending the
    /// request to the answer's headers. A server sends them with the whole answer, so this
    /// covers the model's work.
    #[serde(default = "default_answer")]
    pub answer_ms: u64,
}

impl Timeouts {
    /// How long to wait for the response headers: `firstByteMs`, except that a non-streamed
    /// request (whose headers come only with the whole answer) gets `answerMs` while
    /// `firstByteMs` is left at its default.
    pub fn headers_ms(&self, stream: bool) -> u64 {
        if stream || self.first_byte_ms != DEFAULT_FIRST_BYTE_MS {
            self.first_byte_ms
        } else {
            self.answer_ms.max(self.first_byte_ms)
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect_ms: default_connect(),
            first_byte_ms: default_first_byte(),
            idle_ms: default_idle(),
            answer_ms: default_answer(),
        }
    }
}

pub(super) fn default_priority() -> i64 {
    100
}
pub(super) fn default_true() -> bool {
    true
}
pub(super) fn default_connect() -> u64 {
    10_000
}
/// `timeouts.firstByteMs` when not set (CLI providers then get 120 s for their first output).
pub const DEFAULT_FIRST_BYTE_MS: u64 = 30_000;
pub(super) fn default_first_byte() -> u64 {
    DEFAULT_FIRST_BYTE_MS
}
pub(super) fn default_idle() -> u64 {
    30_000
}
pub(super) fn default_answer() -> u64 {
    300_000
}

/// `retries` when not given: one retry on another key or the same target.
pub(super) fn default_retries() -> u32 {
    1
}
