//! What one client key may do: the policy stored with the key and edited in the admin API.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::pricing::Tier;

/// Limits and permissions of a client key. Every field is optional: an empty policy allows
/// everything, without limits.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientPolicy {
    /// Route names, provider ids and `provider/model` targets this key may use; empty: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Requests per minute (a token bucket: bursts up to a minute's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Tokens (prompt + completion) per minute. A request is admitted while the bucket is not
    /// empty; its actual tokens are taken when it finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u64>,
    /// Spending limits per UTC day and month.
    #[serde(default, skip_serializing_if = "Budget::is_empty")]
    pub budget: Budget,
    /// Highest price tier this key's requests may be served from, failover included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tier: Option<Tier>,
    /// Unix milliseconds after which the key no longer works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<i64>,
    /// A disabled key is refused (403) until enabled again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
}

/// Budgets: tokens and estimated US dollars (from model prices) per UTC day and month.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub month_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day_usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub month_usd: Option<f64>,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        *self == Budget::default()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{param}: {message}")]
pub struct PolicyError {
    pub param: String,
    pub message: String,
}

fn bad(param: &str, message: impl Into<String>) -> PolicyError {
    PolicyError {
        param: param.to_string(),
        message: message.into(),
    }
}

impl ClientPolicy {
    /// Checks the numbers; `known` says whether an `allow` entry names a route, provider or
    /// `provider/model` that exists.
    pub fn validate(&self, known: &dyn Fn(&str) -> bool) -> Result<(), PolicyError> {
        for (i, a) in self.allow.iter().enumerate() {
            if a.trim().is_empty() {
                return Err(bad(
                    &format!("allow[{i}]"),
                    crate::i18n::msg("must not be empty", &[]),
                ));
            }
            if !known(a) {
                return Err(bad(
                    &format!("allow[{i}]"),
                    crate::i18n::msg(
                        "`{a}` is not a route, provider or provider/model of this gateway",
                        &[("a", &a.to_string())],
                    ),
                ));
            }
        }
        if self.rpm == Some(0) {
            return Err(bad(
                "rpm",
                crate::i18n::msg("must be 1 or more (leave it out for no limit)", &[]),
            ));
        }
        if self.tpm == Some(0) {
            return Err(bad(
                "tpm",
                crate::i18n::msg("must be 1 or more (leave it out for no limit)", &[]),
            ));
        }
        let b = &self.budget;
        for (name, v) in [("dayTokens", b.day_tokens), ("monthTokens", b.month_tokens)] {
            if v == Some(0) {
                return Err(bad(
                    &format!("budget.{name}"),
                    crate::i18n::msg("must be 1 or more (leave it out for no limit)", &[]),
                ));
            }
        }
        for (name, v) in [("dayUsd", b.day_usd), ("monthUsd", b.month_usd)] {
            if v.is_some_and(|v| !v.is_finite() || v <= 0.0) {
                return Err(bad(
                    &format!("budget.{name}"),
                    crate::i18n::msg(
                        "must be a positive number of US dollars (leave it out for no limit)",
                        &[],
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Whether a request for `requested` (a route name, provider or `provider/model`) may be
    /// served by `provider`/`model`.
    pub fn allows(&self, requested: &str, provider: &str, model: &str) -> bool {
        self.allow.is_empty()
            || self.allow.iter().any(|a| {
                a == requested
                    || a == provider
                    || a.strip_prefix(provider)
                        .and_then(|r| r.strip_prefix('/'))
                        .is_some_and(|m| m == model)
            })
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether this key has rate limits or budgets to track.
    pub fn is_metered(&self) -> bool {
        self.rpm.is_some() || self.tpm.is_some() || !self.budget.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_lists_match_routes_providers_and_targets() {
        let p = ClientPolicy {
            allow: vec!["cheap".into(), "groq".into(), "openrouter/x:free".into()],
            ..Default::default()
        };
        assert!(p.allows("cheap", "anything", "m"));
        assert!(p.allows("auto", "groq", "llama"));
        assert!(p.allows("auto", "openrouter", "x:free"));
        assert!(!p.allows("auto", "openrouter", "y"));
        assert!(!p.allows("auto", "groqx", "m"));
        assert!(ClientPolicy::default().allows("auto", "p", "m"));
    }

    #[test]
    fn numbers_are_checked() {
        let ok = |_: &str| true;
        let p = ClientPolicy {
            rpm: Some(0),
            ..Default::default()
        };
        assert_eq!(p.validate(&ok).unwrap_err().param, "rpm");
        let p = ClientPolicy {
            budget: Budget {
                day_usd: Some(-1.0),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(p.validate(&ok).unwrap_err().param, "budget.dayUsd");
        let p = ClientPolicy {
            allow: vec!["nope".into()],
            ..Default::default()
        };
        assert_eq!(p.validate(&|_| false).unwrap_err().param, "allow[0]");
    }
}
