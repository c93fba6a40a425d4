//! Everything Baton derives from the date, with the clock pinned at the edges (SQLite backend):
//! client budgets renew at UTC midnight and at the month's and the year's end, and count each
//! request once on the 1st (the day and the month start together) also after a restart that
//! rebuilds them from the log; leap day; a key expires at its exact instant; usage buckets are
//! UTC days; a provider's declared daily quota resets at midnight in its `dayReset` zone on both
//! DST days. No test here reads the real clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::*;
use baton::clock::ManualClock;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::FakeUpstream;

fn at(rfc3339: &str) -> i64 {
    rfc3339.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

async fn start_at(dir: &std::path::Path, providers: Value, clock: &Arc<ManualClock>) -> Baton {
    Baton::start_with_clock(dir, json!({"providers": providers}), Some(clock.clone())).await
}

async fn make_key(b: &Baton, policy: Value) -> (String, String) {
    let mut body = policy;
    body["label"] = json!("team");
    let (st, v) = Admin(b).send(Method::POST, "/admin/keys", Some(body)).await;
    assert_eq!(st, 201, "{v}");
    (
        v["id"].as_str().unwrap().to_string(),
        v["key"].as_str().unwrap().to_string(),
    )
}

/// The key's spending as `/admin/keys` shows it: (day tokens, month tokens).
async fn usage(b: &Baton, id: &str) -> (u64, u64) {
    let (_, keys) = Admin(b).send(Method::GET, "/admin/keys", None).await;
    let k = keys["ui"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
        .clone();
    (
        k["usage"]["dayTokens"].as_u64().unwrap(),
        k["usage"]["monthTokens"].as_u64().unwrap(),
    )
}

async fn status_and_retry(b: &Baton, key: &str) -> (u16, String) {
    let r = b.chat_as(key, "auto").await;
    (r.status().as_u16(), header(&r, "retry-after").to_string())
}

/// At each month end (the year's end and February's in a leap year among them): 30 tokens a day
/// and 100 a month; each answer is 18 tokens.
#[tokio::test]
async fn budgets_renew_at_each_month_end_and_count_the_1st_once() {
    let up = FakeUpstream::start("a").await;
    for (last_second, next_first) in [
        ("2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"),
        ("2028-02-29T23:59:59Z", "2028-03-01T00:00:00Z"),
        ("2026-11-30T23:59:59Z", "2026-12-01T00:00:00Z"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(at(last_second)));
        let providers = json!([provider("a", &up.base_url(), 1)]);
        let baton = start_at(dir.path(), providers.clone(), &clock).await;
        let (id, key) = make_key(
            &baton,
            json!({"budget": {"dayTokens": 30, "monthTokens": 100}}),
        )
        .await;
        assert_eq!(status_and_retry(&baton, &key).await.0, 200);
        assert_eq!(status_and_retry(&baton, &key).await.0, 200);
        assert_eq!(
            status_and_retry(&baton, &key).await,
            (429, "1".to_string()),
            "{last_second}: spent until midnight, one second away"
        );
        clock.set(at(last_second) + 999);
        assert_eq!(status_and_retry(&baton, &key).await.0, 429, "{last_second}");

        // The 1st: a new day and a new month, each counting the request once.
        clock.set(at(next_first));
        assert_eq!(status_and_retry(&baton, &key).await.0, 200, "{next_first}");
        assert_eq!(usage(&baton, &id).await, (18, 18), "{next_first}");
        baton.stop().await;
        // Rebuilt from the log at start-up on the 1st: still once each, and the previous
        // month's spending is not in the new one.
        let baton = start_at(dir.path(), providers, &clock).await;
        assert_eq!(
            usage(&baton, &id).await,
            (18, 18),
            "{next_first} after a restart"
        );
        assert_eq!(status_and_retry(&baton, &key).await.0, 200);
        assert_eq!(usage(&baton, &id).await, (36, 36));
        assert_eq!(status_and_retry(&baton, &key).await.0, 429);
        baton.stop().await;
    }
}

#[tokio::test]
async fn the_month_budget_carries_over_midnight_and_renews_on_the_1st() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(at("2027-02-27T23:59:59Z")));
    let baton = start_at(
        dir.path(),
        json!([provider("a", &up.base_url(), 1)]),
        &clock,
    )
    .await;
    let (id, key) = make_key(&baton, json!({"budget": {"monthTokens": 40}})).await;
    for _ in 0..2 {
        assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    }
    // 28 Feb 2027 (not a leap year): the day renews, the month does not.
    clock.set(at("2027-02-28T00:00:00Z"));
    assert_eq!(usage(&baton, &id).await, (0, 36));
    assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    let (st, retry) = status_and_retry(&baton, &key).await;
    assert_eq!(st, 429);
    assert_eq!(retry, "86400", "the month renews on 1 March, a day away");
    clock.set(at("2027-03-01T00:00:00Z"));
    assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    assert_eq!(usage(&baton, &id).await, (18, 18));
    baton.stop().await;
}

#[tokio::test]
async fn a_key_expires_at_its_exact_instant() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let expiry = "2028-02-29T23:59:59.999Z";
    let clock = Arc::new(ManualClock::new(at(expiry) - 1));
    let baton = start_at(
        dir.path(),
        json!([provider("a", &up.base_url(), 1)]),
        &clock,
    )
    .await;
    let (_, key) = make_key(&baton, json!({"expiresAt": expiry})).await;
    assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    clock.set(at(expiry));
    let r = baton.chat_as(&key, "auto").await;
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "key_expired", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2028-02-29 23:59:59 UTC"),
        "{v}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn usage_buckets_are_utc_days_across_the_year_end() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(at("2026-12-31T23:59:59.999Z")));
    let baton = start_at(
        dir.path(),
        json!([provider("a", &up.base_url(), 1)]),
        &clock,
    )
    .await;
    let (id, key) = make_key(&baton, json!({})).await;
    assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    clock.set(at("2027-01-01T00:00:00Z"));
    assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    let (st, v) = Admin(&baton)
        .send(
            Method::GET,
            &format!("/admin/usage?bucket=day&client={id}"),
            None,
        )
        .await;
    assert_eq!(st, 200, "{v}");
    let rows: Vec<(i64, u64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["startMs"].as_i64().unwrap(),
                r["requests"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (at("2026-12-31T00:00:00Z"), 1),
            (at("2027-01-01T00:00:00Z"), 2)
        ]
    );
    // The default window is the 30 days before the pinned now, not before today.
    assert_eq!(v["untilMs"], at("2027-01-01T00:00:00Z") + 1);
    baton.stop().await;
}

/// A free tier of 2 requests a day that resets at midnight in Los Angeles, in front of a paid
/// provider: on the fall-back day (25 hours) and the spring-forward day (23 hours) the free tier
/// is used again exactly when the Los Angeles day changes, not 24 hours later.
#[tokio::test]
async fn a_declared_daily_quota_resets_at_midnight_in_its_zone_on_dst_days() {
    let free = FakeUpstream::start("free").await;
    let paid = FakeUpstream::start("paid").await;
    for (day_start, next_day_start) in [
        // 1 Nov 2026 00:00 PDT → 2 Nov 00:00 PST: 25 hours.
        ("2026-11-01T07:00:00Z", "2026-11-02T08:00:00Z"),
        // 8 Mar 2026 00:00 PST → 9 Mar 00:00 PDT: 23 hours.
        ("2026-03-08T08:00:00Z", "2026-03-09T07:00:00Z"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut p = provider("free", &free.base_url(), 1);
        p["limits"] = json!({"rpd": 2});
        p["dayReset"] = json!("America/Los_Angeles");
        let clock = Arc::new(ManualClock::new(at(day_start) - 1));
        let baton = start_at(
            dir.path(),
            json!([p, provider("paid", &paid.base_url(), 2)]),
            &clock,
        )
        .await;
        let served = |r: &reqwest::Response| header(r, "x-gateway-provider").to_string();
        // The day before: both free requests, then paid.
        for want in ["free", "free", "paid"] {
            let r = baton.chat("auto", "hi").await;
            assert_eq!(served(&r), want, "{day_start} - 1 ms");
        }
        // Midnight in Los Angeles: the free tier is back.
        clock.set(at(day_start));
        for want in ["free", "free", "paid"] {
            let r = baton.chat("auto", "hi").await;
            assert_eq!(served(&r), want, "{day_start}");
        }
        // The last millisecond of that local day (24 hours after its start is still inside it
        // on the long day, and already the next day on the short one).
        clock.set(at(next_day_start) - 1);
        let r = baton.chat("auto", "hi").await;
        assert_eq!(served(&r), "paid", "{next_day_start} - 1 ms");
        clock.set(at(next_day_start));
        let r = baton.chat("auto", "hi").await;
        assert_eq!(served(&r), "free", "{next_day_start}");
        baton.stop().await;
    }
}

/// Usage in the browser's zone on its spring-forward day: Paris's 29 March 2026 is 23 hours
/// long, from 23:00 UTC the day before to 22:00 UTC; each request lands in its local day, and a
/// zone that does not exist is refused with the parameter named.
#[tokio::test]
async fn usage_days_follow_the_asked_zone_across_its_dst_change() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(at("2026-03-28T22:30:00Z")));
    let baton = start_at(
        dir.path(),
        json!([provider("a", &up.base_url(), 1)]),
        &clock,
    )
    .await;
    let (id, key) = make_key(&baton, json!({})).await;
    // Paris: 23:30 on the 28th; 00:30 and 23:30 (summer time) on the 29th; 00:30 on the 30th.
    for t in [
        "2026-03-28T22:30:00Z",
        "2026-03-28T23:30:00Z",
        "2026-03-29T21:30:00Z",
        "2026-03-29T22:30:00Z",
    ] {
        clock.set(at(t));
        assert_eq!(status_and_retry(&baton, &key).await.0, 200);
    }
    let rows = |v: &serde_json::Value| -> Vec<(i64, u64)> {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["startMs"].as_i64().unwrap(),
                    r["requests"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let admin = Admin(&baton);
    let q = format!(
        "/admin/usage?bucket=day&client={id}&sinceMs={}",
        at("2026-03-27T00:00:00Z")
    );
    let (st, v) = admin
        .send(Method::GET, &format!("{q}&tz=Europe/Paris"), None)
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["tz"], "Europe/Paris");
    assert_eq!(
        rows(&v),
        vec![
            (at("2026-03-27T23:00:00Z"), 1),
            (at("2026-03-28T23:00:00Z"), 2),
            (at("2026-03-29T22:00:00Z"), 1),
        ]
    );
    // Without a zone, UTC days as before.
    let (_, v) = admin.send(Method::GET, &q, None).await;
    assert_eq!(
        rows(&v),
        vec![
            (at("2026-03-28T00:00:00Z"), 2),
            (at("2026-03-29T00:00:00Z"), 2)
        ]
    );
    // Hours in a half-hour zone (India, +05:30) start at local whole hours.
    let (_, v) = admin
        .send(
            Method::GET,
            &format!(
                "/admin/usage?bucket=hour&client={id}&sinceMs={}&tz=Asia/Kolkata",
                at("2026-03-28T00:00:00Z")
            ),
            None,
        )
        .await;
    assert_eq!(rows(&v)[0], (at("2026-03-28T22:30:00Z"), 1), "{v}");
    let (st, v) = admin
        .send(Method::GET, &format!("{q}&tz=Mars/Olympus"), None)
        .await;
    assert_eq!((st, v["error"]["param"].as_str()), (400, Some("tz")), "{v}");
    baton.stop().await;
}
