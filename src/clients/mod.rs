//! Client keys for teams: who may call Baton, what each key may use, and the limits enforced
//! before any upstream is called — request and token rates (token buckets), daily and monthly
//! budgets in tokens and estimated dollars, a price-tier cap that failover never exceeds, expiry
//! and a disabled switch. A client that keeps sending bad requests is throttled alone.

pub mod limiter;
mod policy;

pub use policy::{Budget, ClientPolicy, PolicyError};

/// An authenticated client: a key from the configuration, the data directory or the admin API.
#[derive(Debug, Clone, PartialEq)]
pub struct Client {
    /// Stable id: `k_…` for keys made through the admin API, the label otherwise.
    pub id: String,
    /// What the request log shows (`ui:alice` for admin-made keys).
    pub label: String,
    pub policy: ClientPolicy,
}

impl Client {
    /// A key with no limits (configuration and generated keys).
    pub fn unlimited(label: &str) -> Self {
        Self {
            id: label.to_string(),
            label: label.to_string(),
            policy: ClientPolicy::default(),
        }
    }
}

/// Start of the UTC day containing `ms`, and of the next.
pub fn utc_day(ms: i64) -> (i64, i64) {
    // UTC days are always 86,400,000 ms of Unix time: no zone lookup on the request path.
    let start = ms.div_euclid(86_400_000) * 86_400_000;
    (start, start + 86_400_000)
}

/// Start of the UTC month containing `ms`, and of the next.
pub fn utc_month(ms: i64) -> (i64, i64) {
    crate::clock::month_bounds(ms, &jiff::tz::TimeZone::UTC)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_utc_days_and_months() {
        // 2026-02-14T10:00:00Z
        let ms = 1_771_063_200_000;
        let (d0, d1) = utc_day(ms);
        assert_eq!(d1 - d0, 86_400_000);
        assert_eq!(d0 % 86_400_000, 0);
        let (m0, m1) = utc_month(ms);
        assert_eq!(
            jiff::Timestamp::from_millisecond(m0).unwrap().to_string(),
            "2026-02-01T00:00:00Z"
        );
        assert_eq!(
            jiff::Timestamp::from_millisecond(m1).unwrap().to_string(),
            "2026-03-01T00:00:00Z"
        );
    }
}
