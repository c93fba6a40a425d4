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
    match c.reset_at_ms.map(|ms| clock_time(ms, tz, now_ms)) {
        Some(when) => format!("{from} {what} — back at {when}; now using {to}"),
        None => format!("{from} {what}; now using {to}"),
    }
}

/// An instant as a user reads it: the clock time when it is today in `tz`, with its date
/// otherwise.
pub fn clock_time(ms: i64, tz: &jiff::tz::TimeZone, now_ms: i64) -> String {
    let Ok(at) = jiff::Timestamp::from_millisecond(ms) else {
        return String::new();
    };
    let local = at.to_zoned_datetime(tz.clone());
    let today = jiff::Timestamp::from_millisecond(now_ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_zoned_datetime(tz.clone())
        .date();
    if local.date() == today {
        local.strftime("%H:%M").to_string()
    } else {
        local.strftime("%b %-d, %H:%M").to_string()
    }
}

/// The line for a usage-window notice: "Claude Max: 81 % of the 5 h window used — resets
/// 15:00", "Claude Max: 5 h window spent — back at 15:00", "Claude Max: 5 h window is back".
pub fn quota_message(
    name: &str,
    notice: &super::usage::Notice,
    tz: &jiff::tz::TimeZone,
    now_ms: i64,
) -> String {
    use super::usage::Notice;
    let resets = |w: &super::windows::Window, word: &str| {
        w.resets_at_ms
            .map(|r| format!(" — {word} {}", clock_time(r, tz, now_ms)))
            .unwrap_or_default()
    };
    match notice {
        // The share used now, which may be past the threshold crossed.
        Notice::Threshold { window, percent } => format!(
            "{name}: {} % of the {} window used{}",
            window
                .used
                .map_or(i64::from(*percent), |u| (u * 100.0).round() as i64),
            window.label,
            resets(window, "resets")
        ),
        Notice::Capped { window } => format!(
            "{name}: {} window spent{}",
            window.label,
            resets(window, "back at")
        ),
        Notice::Back { window } => format!("{name}: {} window is back", window.label),
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
