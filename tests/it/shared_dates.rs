//! Shared state at the date's edges, on a real `redis-server` with the clock pinned: budgets
//! renew at midnight, the month's end and the year's end; counters written under the old key
//! layout (where the day and the month were one hash on the 1st) are migrated without losing
//! or doubling spending; a provider's daily quota is counted once in the day's first minute.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::redis_pair;

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use baton::clock::ManualClock;
use redis::AsyncCommands;
use redis_pair::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

async fn refused(b: &Baton) -> (u16, String, Value) {
    let r = b.chat_as(TEAM_KEY, "auto").await;
    let st = r.status().as_u16();
    let retry = header(&r, "retry-after").to_string();
    (st, retry, r.json().await.unwrap())
}

#[tokio::test]
async fn budgets_renew_at_midnight_on_the_last_day_of_the_year() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    // The last second of the year: the day, the month and the year end together.
    let clock = Arc::new(ManualClock::new(at("2026-12-31T23:59:59Z")));
    let (a, b, _dirs) = pair_at(
        &redis,
        "y1",
        json!([provider("up", &up.base_url(), 1)]),
        clock.clone(),
    )
    .await;
    for inst in [&a, &b, &a] {
        assert_eq!(inst.chat_as(TEAM_KEY, "auto").await.status(), 200);
    }
    let dec31 = at("2026-12-31T00:00:00Z");
    let dec = at("2026-12-01T00:00:00Z");
    assert_eq!(
        field_becomes(&redis, &format!("y1:budget:team:day:{dec31}"), "t", 54).await,
        54
    );
    assert_eq!(
        field_becomes(&redis, &format!("y1:budget:team:month:{dec}"), "t", 54).await,
        54
    );
    let (st, retry, v) = refused(&b).await;
    assert_eq!(st, 429, "{v}");
    assert_eq!(
        retry, "1",
        "the budget renews at the next UTC midnight, 1 s away"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("renews at 2027-01-01 00:00:00 UTC"),
        "{v}"
    );
    // The last millisecond of the year still belongs to the spent day.
    clock.set(at("2026-12-31T23:59:59.999Z"));
    assert_eq!(refused(&a).await.0, 429);
    // New Year: a new day and a new month, each with its own hash, though both start now.
    clock.set(at("2027-01-01T00:00:00Z"));
    for inst in [&a, &b] {
        assert_eq!(inst.chat_as(TEAM_KEY, "auto").await.status(), 200);
    }
    let jan1 = at("2027-01-01T00:00:00Z");
    for kind in ["day", "month"] {
        assert_eq!(
            field_becomes(&redis, &format!("y1:budget:team:{kind}:{jan1}"), "t", 36).await,
            36,
            "{kind}: each request counted once"
        );
    }
    // December is closed: its month total did not move.
    let mut conn = redis.conn().await;
    let old: i64 = conn
        .hget(format!("y1:budget:team:month:{dec}"), "t")
        .await
        .unwrap();
    assert_eq!(old, 54);
    // The keys expire a day after their period ends (measured from the pinned now).
    let ttl: i64 = conn
        .pttl(format!("y1:budget:team:day:{jan1}"))
        .await
        .unwrap();
    assert!((86_400_000..=2 * 86_400_000).contains(&ttl), "{ttl}");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn budgets_written_under_the_old_layout_are_migrated_once() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let mut conn = redis.conn().await;
    // On the 1st the old layout kept one hash for the day and the month, and every request
    // was added to it twice: 2 requests of 18 tokens show as 36 + 36.
    let first = at("2026-12-01T00:00:00Z");
    conn.hset_multiple::<_, _, _, ()>(format!("m1:budget:team:{first}"), &[("t", 72), ("u", 0)])
        .await
        .unwrap();
    // On another day of the month: a day hash and a month hash.
    let mid = at("2026-12-15T00:00:00Z");
    conn.hset_multiple::<_, _, _, ()>(format!("m2:budget:team:{mid}"), &[("t", 18), ("u", 0)])
        .await
        .unwrap();
    conn.hset_multiple::<_, _, _, ()>(format!("m2:budget:team:{first}"), &[("t", 40), ("u", 0)])
        .await
        .unwrap();
    // A provider's daily count under the old layout, and last month's hash (left to expire).
    conn.hset::<_, _, _, ()>(format!("m2:quota:up::{mid}"), "r", 3)
        .await
        .unwrap();
    let nov = at("2026-11-01T00:00:00Z");
    conn.hset::<_, _, _, ()>(format!("m2:budget:team:{nov}"), "t", 500)
        .await
        .unwrap();

    // The 1st: halved into both periods. 36 of 50 spent, so one more request fits and the
    // next is refused (before the fix every request was counted twice: refused at once).
    let clock = Arc::new(ManualClock::new(at("2026-12-01T10:00:00Z")));
    let (a, b, _d1) = pair_at(
        &redis,
        "m1",
        json!([provider("up", &up.base_url(), 1)]),
        clock,
    )
    .await;
    let exists: bool = conn
        .exists(format!("m1:budget:team:{first}"))
        .await
        .unwrap();
    assert!(!exists, "the old hash is gone");
    for kind in ["day", "month"] {
        let t: i64 = conn
            .hget(format!("m1:budget:team:{kind}:{first}"), "t")
            .await
            .unwrap();
        assert_eq!(t, 36, "{kind}");
    }
    let layout: i64 = conn.get("m1:layout").await.unwrap();
    assert_eq!(layout, 2);
    assert_eq!(a.chat_as(TEAM_KEY, "auto").await.status(), 200);
    assert_eq!(
        field_becomes(&redis, &format!("m1:budget:team:day:{first}"), "t", 54).await,
        54
    );
    let (st, _, v) = refused(&b).await;
    assert_eq!(st, 429, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("54 of 50"),
        "{v}"
    );
    a.stop().await;
    b.stop().await;

    // Mid-month: each hash goes to its own period; last month's is left alone.
    let clock = Arc::new(ManualClock::new(at("2026-12-15T10:00:00Z")));
    let mut p = provider("up", &up.base_url(), 1);
    p["limits"] = json!({"rpd": 100});
    let (a, b, _d2) = pair_at(&redis, "m2", json!([p.clone()]), clock.clone()).await;
    let day: i64 = conn
        .hget(format!("m2:budget:team:day:{mid}"), "t")
        .await
        .unwrap();
    let month: i64 = conn
        .hget(format!("m2:budget:team:month:{first}"), "t")
        .await
        .unwrap();
    assert_eq!((day, month), (18, 40));
    let quota: i64 = conn
        .hget(format!("m2:quota:up::day:{mid}"), "r")
        .await
        .unwrap();
    assert_eq!(quota, 3);
    let nov_left: i64 = conn
        .hget(format!("m2:budget:team:{nov}"), "t")
        .await
        .unwrap();
    assert_eq!(
        nov_left, 500,
        "a closed period is not moved into the current one"
    );
    a.stop().await;
    b.stop().await;

    // Migration runs once: an old-layout hash appearing later (an instance of the previous
    // version still writing) is not folded in again by a restart.
    conn.hset::<_, _, _, ()>(format!("m2:budget:team:{mid}"), "t", 7)
        .await
        .unwrap();
    let (a, b, _d3) = pair_at(&redis, "m2", json!([p]), clock).await;
    let day: i64 = conn
        .hget(format!("m2:budget:team:day:{mid}"), "t")
        .await
        .unwrap();
    assert_eq!(day, 18);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_daily_quota_is_counted_once_in_the_first_minute_of_a_day() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let free = FakeUpstream::start("free").await;
    let paid = FakeUpstream::start("paid").await;
    let mut p = provider("free", &free.base_url(), 1);
    p["limits"] = json!({"rpd": 4, "rpm": 10});
    // Midnight's first minute: the minute and the day start at the same instant.
    let midnight = at("2027-03-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(midnight + 30_000));
    let (a, b, _dirs) = pair_at(
        &redis,
        "q1",
        json!([p, provider("paid", &paid.base_url(), 2)]),
        clock,
    )
    .await;
    for inst in [&a, &b] {
        let r = inst.chat_as(OPS_KEY, "auto").await;
        assert_eq!(header(&r, "x-gateway-provider"), "free");
    }
    assert_eq!(
        field_becomes(&redis, &format!("q1:quota:free::day:{midnight}"), "r", 2).await,
        2
    );
    assert_eq!(
        field_becomes(&redis, &format!("q1:quota:free::minute:{midnight}"), "r", 2).await,
        2
    );
    // Two of four used: the free tier is still first (counted twice it looked spent).
    tokio::time::sleep(Duration::from_millis(100)).await;
    for inst in [&a, &b] {
        let r = inst.chat_as(OPS_KEY, "auto").await;
        assert_eq!(header(&r, "x-gateway-provider"), "free");
    }
    a.stop().await;
    b.stop().await;
}
