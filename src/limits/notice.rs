//! The one line a user reads when Baton fails over: what happened to the provider (in words
//! matched to the limit it hit) and when it is back, in the user's zone.

use super::classified::Classified;
use crate::i18n::{clock_time, n_, tr, Locale};
use crate::verdict::ErrorClass;

/// The notification line for a failover from `from` to `to` (display names), in the user's
/// language. The reset shows as a clock time when it falls on the same day as `now_ms` in `tz`,
/// with its date otherwise.
pub fn failover_message(
    from: &str,
    to: &str,
    c: &Classified,
    tz: &jiff::tz::TimeZone,
    now_ms: i64,
    loc: Locale,
) -> String {
    let lower = c.reason.to_ascii_lowercase();
    let what = match c.class {
        ErrorClass::Rate => {
            if lower.contains("session limit") || lower.contains("5-hour limit") {
                n_("{from} session limit reached")
            } else if lower.contains("subscription limit") {
                n_("{from} subscription limit reached")
            } else if lower.contains("weekly limit") {
                n_("{from} weekly limit reached")
            } else if lower.contains("daily quota") {
                n_("{from} daily quota used up")
            } else if lower.contains("usage limit") {
                n_("{from} usage limit reached")
            } else {
                n_("{from} rate limit reached")
            }
        }
        ErrorClass::Auth => n_("{from} is not logged in or its key was rejected"),
        ErrorClass::Billing => n_("{from} is out of credit"),
        ErrorClass::Overloaded => n_("{from} is overloaded"),
        ErrorClass::Model => n_("{from} does not serve this model"),
        ErrorClass::ContentPolicy => n_("{from} refused the request"),
        ErrorClass::InvalidOutput => n_("{from} answered JSON that does not fit the request"),
        ErrorClass::Request | ErrorClass::Transient => n_("{from} failed"),
    };
    let what = tr(loc.lang, what, &[("from", from)]);
    match c.reset_at_ms.map(|ms| clock_time(ms, tz, now_ms, loc)) {
        Some(when) => tr(
            loc.lang,
            "{what} — back at {when}; now using {to}",
            &[("what", &what), ("when", &when), ("to", to)],
        ),
        None => tr(
            loc.lang,
            "{what}; now using {to}",
            &[("what", &what), ("to", to)],
        ),
    }
}

/// The line for a usage-window notice: "Claude Max: 81 % of the 5 h window used — resets
/// 15:00", "Claude Max: 5 h window spent — back at 15:00", "Claude Max: 5 h window is back".
pub fn quota_message(
    name: &str,
    notice: &super::usage::Notice,
    tz: &jiff::tz::TimeZone,
    now_ms: i64,
    loc: Locale,
) -> String {
    use super::usage::Notice;
    let when = |w: &super::windows::Window| w.resets_at_ms.map(|r| clock_time(r, tz, now_ms, loc));
    let named = |w: &super::windows::Window| super::window_label::label_in(&w.label, loc.lang);
    match notice {
        // The share used now, which may be past the threshold crossed.
        Notice::Threshold { window, percent } => {
            let pct = window
                .used
                .map_or(i64::from(*percent), |u| (u * 100.0).round() as i64)
                .to_string();
            let label = named(window);
            let args = [("name", name), ("percent", &pct), ("window", &label)];
            match when(window) {
                Some(w) => tr(
                    loc.lang,
                    "{name}: {percent} % of the {window} window used — resets {when}",
                    &[args.as_slice(), &[("when", &w)]].concat(),
                ),
                None => tr(
                    loc.lang,
                    "{name}: {percent} % of the {window} window used",
                    &args,
                ),
            }
        }
        Notice::Capped { window } => {
            let label = named(window);
            let args = [("name", name), ("window", label.as_str())];
            match when(window) {
                Some(w) => tr(
                    loc.lang,
                    "{name}: {window} window spent — back at {when}",
                    &[args.as_slice(), &[("when", &w)]].concat(),
                ),
                None => tr(loc.lang, "{name}: {window} window spent", &args),
            }
        }
        Notice::Back { window } => tr(
            loc.lang,
            "{name}: {window} window is back",
            &[("name", name), ("window", &named(window))],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::ErrorClass;

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
            Locale::ENGLISH,
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
            Locale::ENGLISH,
        );
        assert!(m.contains("back at Jan 1, 00:30"), "{m}");
        // The same instants in New York are both on 31 Dec (19:00 local).
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2027-01-01T00:30:00Z"),
            &ny,
            ms("2026-12-31T23:59:59.999Z"),
            Locale::ENGLISH,
        );
        assert!(m.contains("back at 19:30;"), "{m}");
        // Leap day to 1 March.
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2028-03-01T08:00:00Z"),
            &utc,
            ms("2028-02-29T22:00:00Z"),
            Locale::ENGLISH,
        );
        assert!(m.contains("back at Mar 1, 08:00"), "{m}");
        // The fall-back day in New York is 25 hours long: 23:30 local is still "today".
        let m = failover_message(
            "Claude",
            "Codex",
            &capped("2026-11-02T04:30:00Z"),
            &ny,
            ms("2026-11-01T04:30:00Z"),
            Locale::ENGLISH,
        );
        assert!(m.contains("back at 23:30;"), "{m}");
    }
}
