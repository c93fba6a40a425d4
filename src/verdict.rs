//! The names of how things went: an attempt's [`Outcome`], a failure's [`ErrorClass`] and why
//! a scope cools ([`Cause`]). Typed from the classifier to the store, the events, the admin
//! API and the desktop shell, and written with the same names everywhere (`rate`, `auth`,
//! `breaker`…). A leaf module: `limits`, `events` and the store all name these.

/// Display, Serialize and Deserialize by the type's `as_str` name (`parse` reads it back), so
/// the names on the wire, in the store and in the UI are the enum's, checked on the way in.
macro_rules! by_name {
    ($t:ty, $what:literal) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                <$t>::parse(&s).ok_or_else(|| {
                    serde::de::Error::custom(format!(concat!("unknown ", $what, " `{}`"), s))
                })
            }
        }
    };
}

/// What kind of failure an attempt hit; each class has its own consequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request itself is wrong: back to the client, nothing cools.
    Request,
    /// Key rejected: that key is out until the user fixes it.
    Auth,
    /// Out of credit: waiting a minute does not help.
    Billing,
    /// Model unknown or unavailable for this provider.
    Model,
    /// Rate or quota limit.
    Rate,
    /// Provider says it is overloaded.
    Overloaded,
    /// 5xx, connection failure, timeout, malformed answer.
    Transient,
    /// The provider refused on policy grounds.
    ContentPolicy,
    /// The answer is not the JSON the client asked for (`structured`): the next candidate is
    /// tried; nothing cools, since the provider is well.
    InvalidOutput,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Request => "request",
            ErrorClass::Auth => "auth",
            ErrorClass::Billing => "billing",
            ErrorClass::Model => "model",
            ErrorClass::Rate => "rate",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::Transient => "transient",
            ErrorClass::ContentPolicy => "content_policy",
            ErrorClass::InvalidOutput => "invalid_output",
        }
    }

    /// Whether another provider could succeed where this one failed.
    pub fn fails_over(self) -> bool {
        !matches!(self, ErrorClass::Request | ErrorClass::ContentPolicy)
    }

    pub const ALL: [ErrorClass; 9] = [
        ErrorClass::Request,
        ErrorClass::Auth,
        ErrorClass::Billing,
        ErrorClass::Model,
        ErrorClass::Rate,
        ErrorClass::Overloaded,
        ErrorClass::Transient,
        ErrorClass::ContentPolicy,
        ErrorClass::InvalidOutput,
    ];

    /// The class named `s` (its `as_str` name).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// How one attempt ended: it served the answer, it was passed over without sending, or it
/// failed with an error class. Stored, logged and shown by name (`ok`, `skipped`, `rate`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    Skipped,
    /// Sent, then cancelled before it answered because a hedge beside it answered first
    /// (`routing.hedge`): neither a success nor a failure of the provider.
    Outrun,
    Failed(ErrorClass),
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Skipped => "skipped",
            Outcome::Outrun => "outrun",
            Outcome::Failed(c) => c.as_str(),
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ok" => Some(Outcome::Ok),
            "skipped" => Some(Outcome::Skipped),
            "outrun" => Some(Outcome::Outrun),
            other => ErrorClass::parse(other).map(Outcome::Failed),
        }
    }

    /// Something was sent (not passed over).
    pub fn sent(self) -> bool {
        self != Outcome::Skipped
    }

    /// It says something of the provider's health: it answered, or it failed (not passed
    /// over, not cancelled for a hedge that answered first).
    pub fn judged(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Failed(_))
    }
}

by_name!(Outcome, "attempt outcome");

/// Why a scope cools: the class of the failure that started it, or its breaker (transient
/// failures in a row). Stored, sent between instances and shown by name (`rate`, `breaker`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    Failed(ErrorClass),
    Breaker,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Failed(c) => c.as_str(),
            Cause::Breaker => "breaker",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "breaker" => Some(Cause::Breaker),
            other => ErrorClass::parse(other).map(Cause::Failed),
        }
    }

    /// A rate or quota limit, or credit run out: the provider's own limit, not a fault.
    pub fn is_limit(self) -> bool {
        matches!(
            self,
            Cause::Failed(ErrorClass::Rate) | Cause::Failed(ErrorClass::Billing)
        )
    }
}

impl From<ErrorClass> for Cause {
    fn from(c: ErrorClass) -> Self {
        Cause::Failed(c)
    }
}

impl PartialEq<ErrorClass> for Cause {
    fn eq(&self, other: &ErrorClass) -> bool {
        *self == Cause::Failed(*other)
    }
}

by_name!(Cause, "cooldown cause");
by_name!(ErrorClass, "error class");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_go_by_name_and_unknown_names_are_refused() {
        for c in ErrorClass::ALL
            .into_iter()
            .map(Cause::Failed)
            .chain([Cause::Breaker])
        {
            let json = serde_json::to_string(&c).unwrap_or_default();
            assert_eq!(json, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<Cause>(&json).ok(), Some(c));
        }
        assert!(Cause::Failed(ErrorClass::Rate).is_limit());
        assert!(!Cause::Breaker.is_limit());
        assert_eq!(Cause::Failed(ErrorClass::Auth), ErrorClass::Auth);
        assert!(serde_json::from_str::<Cause>("\"sideways\"")
            .is_err_and(|e| e.to_string().contains("unknown cooldown cause `sideways`")));
    }
}
