//! Table test over real provider error texts (tests/fixtures/limit-messages.json, copied from
//! the shared reference fixtures): each must give its class and reset instant under a fixed clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use baton::limits::{classify_cli, classify_http, ResetContext};
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde_json::Value;

fn ms(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_millisecond()
}

#[test]
fn every_fixture_gets_its_class_and_reset_instant() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/limit-messages.json"
    ))
    .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for c in cases {
        let id = c["id"].as_str().unwrap();
        let zone = |k: &str| {
            c.get(k)
                .and_then(Value::as_str)
                .map(|z| TimeZone::get(z).unwrap())
        };
        let ctx = ResetContext {
            now_ms: ms(c["now"].as_str().unwrap()),
            local_tz: zone("localTz").unwrap_or(TimeZone::UTC),
            day_reset: zone("dayReset"),
        };
        let got = if let Some(status) = c.get("status").and_then(Value::as_u64) {
            let mut headers = http::HeaderMap::new();
            for (k, v) in c
                .get("headers")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                headers.insert(
                    http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.as_str().unwrap().parse().unwrap(),
                );
            }
            let body = match &c["body"] {
                Value::String(s) => s.clone().into_bytes(),
                v => serde_json::to_vec(v).unwrap(),
            };
            classify_http(status as u16, &headers, &body, &ctx)
        } else {
            let out = c
                .get("stdout")
                .or_else(|| c.get("text"))
                .and_then(Value::as_str)
                .unwrap();
            classify_cli(
                out,
                c.get("exitCode").and_then(Value::as_i64).map(|e| e as i32),
                &ctx,
            )
        };
        let want_class = c["expect"]["class"].as_str().unwrap();
        let want_reset = c["expect"]["resetAt"].as_str().map(ms);
        let reset_ok = match (want_reset, got.reset_at_ms) {
            (None, None) => true,
            (Some(w), Some(g)) => (w - g).abs() <= 1_000,
            _ => false,
        };
        if got.class.as_str() != want_class || !reset_ok {
            failures.push(format!(
                "{id}: want {want_class} {:?}, got {} {:?} ({})",
                c["expect"]["resetAt"].as_str(),
                got.class.as_str(),
                got.reset_at_ms
                    .map(|m| Timestamp::from_millisecond(m).unwrap().to_string()),
                got.reason
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases wrong:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

fn at(now: &str, text: &str, local: &str, day_reset: Option<&str>) -> Option<String> {
    let ctx = ResetContext {
        now_ms: ms(now),
        local_tz: TimeZone::get(local).unwrap(),
        day_reset: day_reset.map(|z| TimeZone::get(z).unwrap()),
    };
    baton::limits::reset::from_text(text, &ctx)
        .or_else(|| baton::limits::reset::from_window(text, &ctx))
        .map(|m| Timestamp::from_millisecond(m).unwrap().to_string())
}

#[test]
fn reset_texts_and_dst_days() {
    // Spring forward in Los Angeles (2026-03-08): midnight after the change is UTC-7.
    assert_eq!(
        at(
            "2026-03-08T12:00:00Z",
            "requests per day (RPD) exceeded",
            "UTC",
            Some("America/Los_Angeles")
        )
        .as_deref(),
        Some("2026-03-09T07:00:00Z")
    );
    // The day before, midnight is still PST (UTC-8).
    assert_eq!(
        at(
            "2026-03-07T12:00:00Z",
            "daily limit",
            "UTC",
            Some("America/Los_Angeles")
        )
        .as_deref(),
        Some("2026-03-08T08:00:00Z")
    );
    // Berlin falls back on 2026-10-25: the next midnight is CET (UTC+1).
    assert_eq!(
        at(
            "2026-10-25T12:00:00Z",
            "PerDay quota",
            "UTC",
            Some("Europe/Berlin")
        )
        .as_deref(),
        Some("2026-10-25T23:00:00Z")
    );
    // Berlin springs forward on 2026-03-29: the next midnight is CEST (UTC+2).
    assert_eq!(
        at(
            "2026-03-29T12:00:00Z",
            "PerDay quota",
            "UTC",
            Some("Europe/Berlin")
        )
        .as_deref(),
        Some("2026-03-29T22:00:00Z")
    );
    // A clock time in a zone on the day its clocks change.
    assert_eq!(
        at(
            "2026-03-08T06:00:00Z",
            "resets 3am (America/Los_Angeles)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-03-08T10:00:00Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "Please try again in 2m59.52s.",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-11-29T22:02:59.52Z")
    );
    assert_eq!(
        at("2026-11-29T22:00:00Z", "Please retry in 37.5s", "UTC", None).as_deref(),
        Some("2026-11-29T22:00:37.5Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "retry after 20 seconds",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-11-29T22:00:20Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "reset at 1pm (Etc/GMT+5)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-11-30T18:00:00Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "resets Dec 4, 8:56am (America/New_York)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-12-04T13:56:00Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "try again at Jul 5th, 2026 8:19 PM",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-07-05T20:19:00Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "usage limit reached|1767225600",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
    assert_eq!(
        at(
            "2026-11-29T22:00:00Z",
            "Requests per minute limit exceeded",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-11-29T22:01:00Z")
    );
    assert_eq!(
        at("2026-11-29T22:00:00Z", "something went wrong", "UTC", None),
        None
    );
}

#[test]
fn reset_texts_at_month_and_year_ends_and_on_leap_days() {
    // A daily limit late on 31 Dec resets at the new year's first instant.
    assert_eq!(
        at("2026-12-31T23:30:00Z", "daily limit", "UTC", None).as_deref(),
        Some("2027-01-01T00:00:00Z")
    );
    // At the last millisecond of a day, "12am" is the next instant, a millisecond away.
    assert_eq!(
        at("2026-12-31T23:59:59.999Z", "resets 12am", "UTC", None).as_deref(),
        Some("2027-01-01T00:00:00Z")
    );
    // At the first instant of a day, "12am" is already past: the next day's.
    assert_eq!(
        at("2026-12-01T00:00:00Z", "resets 12am", "UTC", None).as_deref(),
        Some("2026-12-02T00:00:00Z")
    );
    // A date without a year late in December is next year's.
    assert_eq!(
        at(
            "2026-12-31T20:00:00Z",
            "resets Jan 2, 9:00am (UTC)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2027-01-02T09:00:00Z")
    );
    // 29 February: this year's in a leap year; in another year the next leap year's.
    assert_eq!(
        at(
            "2028-02-28T22:00:00Z",
            "resets Feb 29, 8:00am (UTC)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2028-02-29T08:00:00Z")
    );
    assert_eq!(
        at(
            "2027-02-28T22:00:00Z",
            "resets Feb 29, 8:00am (UTC)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2028-02-29T08:00:00Z")
    );
    // A Pacific daily quota on leap day: midnight in Los Angeles, on 1 March.
    assert_eq!(
        at(
            "2028-02-29T23:00:00Z",
            "requests per day (RPD) exceeded",
            "UTC",
            Some("America/Los_Angeles")
        )
        .as_deref(),
        Some("2028-03-01T08:00:00Z")
    );
    // Los Angeles falls back on 2026-11-01: its next midnight is PST (UTC-8), 25 h after the last.
    assert_eq!(
        at(
            "2026-11-01T07:00:00Z",
            "daily limit",
            "UTC",
            Some("America/Los_Angeles")
        )
        .as_deref(),
        Some("2026-11-02T08:00:00Z")
    );
    // A clock time in New York on its fall-back day is EST (UTC-5).
    assert_eq!(
        at(
            "2026-11-01T12:00:00Z",
            "resets 3pm (America/New_York)",
            "UTC",
            None
        )
        .as_deref(),
        Some("2026-11-01T20:00:00Z")
    );
}
