//! `state`: where the state several instances share lives (SQLite here, or a Redis).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateConfig {
    #[serde(default)]
    pub backend: StateBackend,
    /// Required when `backend` is `redis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisConfig>,
}

impl StateConfig {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StateBackend {
    #[default]
    Sqlite,
    Redis,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisConfig {
    /// `redis://host:port/db`, or `rediss://…` for TLS. No password here: use `passwordEnv`.
    pub url: String,
    /// Environment variable holding the Redis password (and `usernameEnv` for ACL users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_env: Option<String>,
    /// For `rediss://` with a private CA: PEM file of the CA that signed the server's
    /// certificate (otherwise the usual web roots are trusted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Prefix of every key and channel, so several gateways can share one Redis.
    #[serde(default = "default_redis_prefix")]
    pub prefix: String,
}

fn default_redis_prefix() -> String {
    "baton".into()
}
