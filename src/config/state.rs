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

impl StateConfig {
    pub(super) fn validate(
        &self,
        err: &dyn Fn(String, String) -> super::error::ConfigError,
    ) -> Result<(), super::error::ConfigError> {
        let state = self;
        use StateBackend;
        let Some(redis) = &state.redis else {
            if state.backend == StateBackend::Redis {
                return Err(err(
                    "state.redis".into(),
                    "the redis backend needs {\"url\": \"redis://127.0.0.1:6379\"}".into(),
                ));
            }
            return Ok(());
        };
        let url = reqwest::Url::parse(&redis.url).map_err(|e| {
            err(
                "state.redis.url".into(),
                format!(
                    "`{}` is not a URL ({e}); use redis://host:port/db or rediss://… for TLS",
                    redis.url
                ),
            )
        })?;
        if !matches!(url.scheme(), "redis" | "rediss") {
            return Err(err(
                "state.redis.url".into(),
                format!("scheme `{}` is not redis:// or rediss://", url.scheme()),
            ));
        }
        if url.password().is_some() || !url.username().is_empty() {
            return Err(err(
                "state.redis.url".into(),
                "credentials must not be written into the configuration: put the password in an environment variable named by `passwordEnv` (and the user in `usernameEnv`)".into(),
            ));
        }
        for (field, v) in [
            ("passwordEnv", &redis.password_env),
            ("usernameEnv", &redis.username_env),
        ] {
            if let Some(v) = v {
                super::refs::check_env_name(v)
                    .map_err(|m| err(format!("state.redis.{field}"), m))?;
            }
        }
        if redis.prefix.is_empty()
            || !redis
                .prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(err(
                "state.redis.prefix".into(),
                "use letters, digits and - _ . : only".into(),
            ));
        }
        Ok(())
    }
}
