//! The one line a user reads when Baton fails over: what happened to the provider (in words
//! matched to the limit it hit) and when it is back, in the user's zone.

use super::{Classified, ErrorClass};

/// The notification line for a failover from `from` to `to` (display names). The reset shows
/// as a clock time when it falls on the same day as `now_ms` in `tz`, with its date otherwise.
pub fn failover_message(
    from: &str,
    to: &str,
    c: &Classified,
    tz: &jiff::tz::TimeZone,
    now_ms: i64,
) -> String {
    let lower = c.reason.to_ascii_lowercase();
    let what = match c.class {
        ErrorClass::Rate => {
            if lower.contains("session limit") || lower.contains("5-hour limit") {
                "session limit reached"
            } else if lower.contains("subscription limit") {
                "subscription limit reached"
            } else if lower.contains("weekly limit") {
                "weekly limit reached"
            } else if lower.contains("daily quota") {
                "daily quota used up"
            } else if lower.contains("usage limit") {
                "usage limit reached"
            } else {
                "rate limit reached"
            }
        }
        ErrorClass::Auth => "is not logged in or its key was rejected",
        ErrorClass::Billing => "is out of credit",
        ErrorClass::Overloaded => "is overloaded",
        ErrorClass::Model => "does not serve this model",
        ErrorClass::ContentPolicy => "refused the request",
        ErrorClass::Request | ErrorClass::Transient => "failed",
    };
    match c
        .reset_at_ms
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
    {
        Some(at) => {
            let local = at.to_zoned_datetime(tz.clone());
            let today = jiff::Timestamp::from_millisecond(now_ms)
                .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
                .to_zoned_datetime(tz.clone())
                .date();
            let when = if local.date() == today {
                local.strftime("%H:%M").to_string()
            } else {
                local.strftime("%b %-d, %H:%M").to_string()
            };
            format!("{from} {what} — back at {when}; now using {to}")
        }
        None => format!("{from} {what}; now using {to}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::ErrorClass;

    use crate::clock::ms;

    fn capped(reset: &str) -> Classified {
        Classified {
            class: ErrorClass::Rate,
            reason: "Claude Code session limit reached".into(),
            reset_at_ms: Some(ms(reset)),
            context_length: false,
            per_model: false,
            timeout: false,
            too_large: false,
        }
    }

    #[test]
    fn the_reset_is_dated_relative_to_the_given_now_in_the_zone() {
        let ny = jiff::tz::TimeZone::get("America/New_York").unwrap_or(jiff::tz::TimeZone::UTC);
        let utc = jiff::tz::TimeZone::UTC;
        // Same local day: a clock time only.
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2026-12-31T23:30:00Z"),
            &utc,
            ms("2026-12-31T20:00:00Z"),
        );
        assert_eq!(
            m,
            "Claude session limit reached — back at 23:30; now using Codex"
        );
        // Over midnight into the new year: the date is named.
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2027-01-01T00:30:00Z"),
            &utc,
            ms("2026-12-31T23:59:59.999Z"),
        );
        assert!(m.contains("back at Jan 1, 00:30"), "{m}");
        // The same instants in New York are both on 31 Dec (19:00 local).
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2027-01-01T00:30:00Z"),
            &ny,
            ms("2026-12-31T23:59:59.999Z"),
        );
        assert!(m.contains("back at 19:30;"), "{m}");
        // Leap day to 1 March.
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2028-03-01T08:00:00Z"),
            &utc,
            ms("2028-02-29T22:00:00Z"),
        );
        assert!(m.contains("back at Mar 1, 08:00"), "{m}");
        // The fall-back day in New York is 25 hours long: 23:30 local is still "today".
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2026-11-02T04:30:00Z"),
            &ny,
            ms("2026-11-01T04:30:00Z"),
        );
        assert!(m.contains("back at 23:30;"), "{m}");
    }
}
