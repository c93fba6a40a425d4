//! What `GET /admin/state` answers, as types: the server serializes them and `baton status`
//! deserializes the same types, so a renamed field breaks the build instead of the command.
//! Parts only the web UI reads (breaker detail, cooldown rows, models, discovery, the CLI's
//! facts, the definition) stay JSON values.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::providers::state::ProviderState;
use crate::stats::Health;

/// `GET /admin/state`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminState {
    pub now_ms: i64,
    /// In routing order.
    pub providers: Vec<ProviderView>,
    /// `local`, `up` or `down` (Redis).
    #[serde(default)]
    pub shared_state: String,
    #[serde(default)]
    pub paused: bool,
    /// The provider kinds this Baton knows, in the order the UI offers them.
    #[serde(default)]
    pub kinds: Vec<KindView>,
    /// What Baton can do right now: the one state every surface renders (each provider's
    /// `status` and `usage` below are its rows).
    pub summary: crate::gateway::summary::Summary,
}

/// A provider kind as the UI shows it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindView {
    pub id: String,
    pub label: String,
    pub badge: String,
    /// The program a CLI kind runs.
    pub program: Option<String>,
    pub sample_model: Option<String>,
    /// What its `baseUrl` looks like (HTTP kinds), for the form's hint.
    #[serde(default)]
    pub base_url_example: Option<String>,
    /// It can call with the client's own login (`credentials: "client"`).
    #[serde(default)]
    pub client_login: bool,
    /// It calls only with the client's own login.
    #[serde(default)]
    pub login_only: bool,
    /// Its own fields (`region`, `project`, …); the form shows the ones it has inputs for.
    #[serde(default)]
    pub fields: Vec<String>,
    /// The form's hints of its own: under the address, for a typed key, with no key.
    #[serde(default)]
    pub hints: KindHints,
    /// Whose logins it takes (`anthropic`, `openai`, `google`), for a kind of one vendor.
    #[serde(default)]
    pub vendor: Option<String>,
    /// It can run a web search by itself (a provider of it can be Baton's search service).
    #[serde(default)]
    pub searches: bool,
}

/// A kind's own hints, each translated where it is shown.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KindHints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<HintView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<HintView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_key: Option<HintView>,
}

/// A hint: its text (a catalogue key) and the values of its marks, never translated.
#[derive(Debug, Serialize, Deserialize)]
pub struct HintView {
    pub text: String,
    pub values: std::collections::BTreeMap<String, String>,
}

impl From<&crate::config::kind::Hint> for HintView {
    fn from(h: &crate::config::kind::Hint) -> Self {
        HintView {
            text: h.text.into(),
            values: h
                .values
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

impl KindView {
    pub fn all() -> Vec<Self> {
        crate::config::ProviderKind::all()
            .iter()
            .map(|k| KindView {
                id: k.as_str().into(),
                label: k.label().into(),
                badge: k.badge().into(),
                program: k.cli_program().map(str::to_string),
                sample_model: k.sample_model().map(str::to_string),
                base_url_example: k.base_url_example().map(str::to_string),
                client_login: k.takes_client_login(),
                login_only: k.login_only(),
                fields: k.fields().iter().map(|f| f.to_string()).collect(),
                hints: KindHints {
                    base_url: k.spec().base_url_hint.as_ref().map(HintView::from),
                    key: k.spec().key_hint.as_ref().map(HintView::from),
                    no_key: k.spec().no_key_hint.as_ref().map(HintView::from),
                },
                vendor: k.spec().vendor.id().map(str::to_string),
                searches: crate::providers::kinds::searches(*k),
            })
            .collect()
    }
}

/// One provider's live state and definition (no secrets: keys are masked, the definition only
/// names where keys come from).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderView {
    pub id: String,
    pub name: String,
    pub kind: String,
    pub enabled: bool,
    pub auto: bool,
    pub priority: i64,
    pub unavailable: Option<String>,
    /// The one computed state everyone shows (see `providers::state`).
    pub status: ProviderState,
    pub in_flight: u64,
    pub max_concurrency: Option<u32>,
    pub breaker: Value,
    pub cooldowns: Vec<Value>,
    pub keys: Vec<KeyView>,
    pub models: Vec<Value>,
    pub health: Health,
    /// How fast it answers now (its fastest model): time to the first token and tokens per
    /// second, decaying averages of live answers (`router::speed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<crate::router::speed::Speed>,
    pub discovery: Value,
    pub cli: Value,
    /// `file`, `ui` or `detected`.
    pub owner: String,
    /// Each account's limit windows (5-hour, weekly, per-minute…) with the binding one.
    #[serde(default)]
    pub usage: Vec<crate::limits::usage::AccountUsage>,
    pub config: Value,
}

/// One key of a provider: a usable one (masked, with its quota, cooldown and health), or one
/// whose environment variable is missing.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub id: String,
    pub masked: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_score: Option<f64>,
    #[serde(default)]
    pub cooldown: Option<Value>,
    /// Rejected by the provider (out until the user changes it).
    #[serde(default)]
    pub disabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<Health>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
