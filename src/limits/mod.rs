//! Upstream error classification, reset-time parsing and the cooldown table.

pub mod breaker;
mod classified;
mod classify;
mod cooldown;
mod notice;
pub mod quota;
pub mod reset;
pub mod usage;
pub mod window_label;
pub mod windows;

pub use crate::i18n::clock_time;
pub use crate::verdict::{Cause, ErrorClass, Outcome};
pub use classify::{classify_cli, classify_http};
pub use cooldown::{CooldownEntry, Cooldowns, Mirror, Persist, Scope, MAX_SCOPES};
pub use notice::{failover_message, quota_message};

pub use reset::ResetContext;

#[cfg(test)]
pub(crate) use classified::headers;
pub(crate) use classified::truncate;
pub use classified::{classify_timeout, classify_transport, parse_go_duration_ms, Classified};

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;

    #[test]
    fn durations() {
        assert_eq!(parse_go_duration_ms("1m30s"), Some(90_000));
        assert_eq!(parse_go_duration_ms("6ms"), Some(6));
        assert_eq!(parse_go_duration_ms("2.5s"), Some(2_500));
        assert_eq!(parse_go_duration_ms("1h2m"), Some(3_720_000));
        assert_eq!(parse_go_duration_ms("soon"), None);
        assert_eq!(parse_go_duration_ms(""), None);
    }

    #[test]
    fn retry_after_forms() {
        let now = 1_700_000_000_000;
        assert_eq!(
            reset::from_headers(&headers(&[("retry-after", "20")]), now),
            Some(now + 20_000)
        );
        assert_eq!(
            reset::from_headers(&headers(&[("retry-after-ms", "1500")]), now),
            Some(now + 1_500)
        );
        assert_eq!(
            reset::from_headers(
                &headers(&[("retry-after", "Tue, 14 Nov 2023 22:13:40 GMT")]),
                now
            ),
            Some(1_700_000_020_000)
        );
        assert_eq!(
            reset::from_headers(&headers(&[("x-ratelimit-reset-requests", "1m30s")]), now),
            Some(now + 90_000)
        );
        assert_eq!(reset::from_headers(&HeaderMap::new(), now), None);
    }

    #[test]
    fn fail_over_or_not() {
        let ctx = ResetContext::new(0);
        let h = HeaderMap::new();
        let c = classify_http(
            400,
            &h,
            br#"{"error":{"message":"temperature must be <= 2"}}"#,
            &ctx,
        );
        assert_eq!((c.class, c.context_length), (ErrorClass::Request, false));
        assert!(!c.class.fails_over());
        assert!(classify_http(500, &h, b"oops", &ctx).class.fails_over());
        assert_eq!(classify_http(404, &h, b"{}", &ctx).class, ErrorClass::Model);
    }

    #[test]
    fn outcomes_round_trip_by_name() {
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::parse(c.as_str()), Some(c));
        }
        for o in [
            Outcome::Ok,
            Outcome::Skipped,
            Outcome::Outrun,
            Outcome::Failed(ErrorClass::ContentPolicy),
        ] {
            let json = serde_json::to_string(&o).unwrap();
            assert_eq!(serde_json::from_str::<Outcome>(&json).unwrap(), o, "{json}");
        }
        assert_eq!(
            serde_json::to_string(&Outcome::Failed(ErrorClass::Rate)).unwrap(),
            "\"rate\""
        );
        assert!(serde_json::from_str::<Outcome>("\"sideways\"").is_err());
    }
}
