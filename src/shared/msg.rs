//! The message the instances exchange through Redis (and the cooldowns hash holds): who sent
//! it and the change, tagged by `op` on the wire.

use serde::{Deserialize, Serialize};

use crate::limits::quota::SharedCounts;
use crate::limits::{Cause, CooldownEntry, Scope};

/// A message to the other instances: who sent it and the change.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SharedMsg {
    pub(super) origin: String,
    #[serde(flatten)]
    pub(super) change: Change,
}

/// A change published to the other instances, tagged by `op` on the wire (`set`, `clear`,
/// `quota`, `key`). The cooldowns hash holds the `set` of each cooling scope.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Change {
    /// A scope cools until `until_ms`.
    Set {
        provider: String,
        #[serde(default)]
        key: Option<String>,
        #[serde(default)]
        model: Option<String>,
        until_ms: i64,
        class: Cause,
        #[serde(default)]
        reason: String,
    },
    /// A scope's cooldown ended.
    Clear {
        provider: String,
        #[serde(default)]
        key: Option<String>,
        #[serde(default)]
        model: Option<String>,
    },
    /// Every instance's counts for a provider key.
    Quota {
        provider: String,
        key: String,
        counts: SharedCounts,
    },
    /// A client key made, changed or revoked through the admin API.
    Key {
        client_key: Box<crate::store::SyncedKey>,
    },
}

impl SharedMsg {
    pub(super) fn new(origin: &str, change: Change) -> Self {
        Self {
            origin: origin.to_string(),
            change,
        }
    }
}

impl Change {
    /// A cooldown's entry as it travels.
    pub(super) fn set(e: &CooldownEntry) -> Self {
        Change::Set {
            provider: e.scope.provider.clone(),
            key: e.scope.key.clone(),
            model: e.scope.model.clone(),
            until_ms: e.until_ms,
            class: e.class,
            reason: e.reason.clone(),
        }
    }

    /// The cooldown a `set` stands for (its arrival time is set where it arrives).
    pub(super) fn cooldown(self) -> Option<CooldownEntry> {
        match self {
            Change::Set {
                provider,
                key,
                model,
                until_ms,
                class,
                reason,
            } => Some(CooldownEntry {
                scope: Scope {
                    provider,
                    key,
                    model,
                },
                until_ms,
                class,
                reason,
                since_ms: 0,
            }),
            _ => None,
        }
    }
}

pub(super) fn cooldown_field(s: &Scope) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}",
        s.provider,
        s.key.as_deref().unwrap_or(""),
        s.model.as_deref().unwrap_or("")
    )
}

pub(super) fn scope_of(field: &str) -> Option<Scope> {
    let mut it = field.split('\u{1f}');
    let provider = it.next()?.to_string();
    let key = it.next().filter(|s| !s.is_empty()).map(str::to_string);
    let model = it.next().filter(|s| !s.is_empty()).map(str::to_string);
    Some(Scope {
        provider,
        key,
        model,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cooldown_fields_round_trip() {
        let s = Scope {
            provider: "groq".into(),
            key: Some("GROQ_API_KEY".into()),
            model: None,
        };
        assert_eq!(scope_of(&cooldown_field(&s)), Some(s));
    }

    #[test]
    fn a_message_keeps_the_names_on_the_wire() {
        let m = SharedMsg::new(
            "i1",
            Change::Clear {
                provider: "groq".into(),
                key: None,
                model: Some("m".into()),
            },
        );
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"origin": "i1", "op": "clear", "provider": "groq", "key": null, "model": "m"})
        );
        // A `set` from an instance before this change (its extra fields and all) still reads.
        let old = r#"{"origin":"i0","op":"set","provider":"groq","key":null,"model":null,"until_ms":5,"class":"rate","reason":"429","counts":null}"#;
        let e = serde_json::from_str::<SharedMsg>(old)
            .unwrap()
            .change
            .cooldown()
            .unwrap();
        assert_eq!(
            (e.until_ms, e.class),
            (5, Cause::Failed(crate::limits::ErrorClass::Rate))
        );
        // A cause this version does not know is not misread as another.
        let newer = old.replace("\"rate\"", "\"solar_flare\"");
        assert!(serde_json::from_str::<SharedMsg>(&newer).is_err());
    }
}
