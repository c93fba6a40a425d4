//! Work taken from Redis ahead, on two gateways sharing a real `redis-server`: a client that
//! sends fast takes its requests from the shared bucket in batches (`shared/permits.rs`), a busy
//! provider's concurrency slots are leased several at once and reused (`shared/slots.rs`) — one
//! round trip for many requests — and the shared limits still hold across both instances.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::redis_pair;

use crate::common::*;
use redis_pair::*;
use reqwest::Method;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

/// Scripts Redis has run (admission, spending and leases; nothing else here runs one).
async fn scripts_run(redis: &RedisServer) -> i64 {
    let mut conn = redis.conn().await;
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<i64>()
                .ok()
        })
        .sum()
}

/// Spending writes Redis took under `prefix` (each leaves its once-only marker for a day).
async fn spending_writes(redis: &RedisServer, prefix: &str) -> usize {
    let mut conn = redis.conn().await;
    let keys: Vec<String> = redis::AsyncCommands::keys(&mut conn, format!("{prefix}:spent:*"))
        .await
        .unwrap();
    keys.len()
}

/// The shared counter of `key`'s spending on the pair's (pinned) day, under `prefix`.
fn day_counter(inst: &Baton, prefix: &str, key: &str) -> String {
    let id = inst.handle.core.keys.client(key).unwrap().id.clone();
    let day = baton::clients::utc_day(at(PINNED)).0;
    format!("{prefix}:budget:{id}:day:{day}")
}

/// One request as `key`: its answer's headers and the tokens it spent.
async fn spent_once(inst: &Baton, key: &str) -> (reqwest::header::HeaderMap, i64) {
    let r = inst.chat_as(key, "auto").await;
    assert_eq!(r.status(), 200);
    let headers = r.headers().clone();
    let answer: serde_json::Value = r.json().await.unwrap();
    (headers, answer["usage"]["total_tokens"].as_i64().unwrap())
}

/// A key made on `a` with `rpm`, once `b` knows it too.
async fn key_with_rpm(a: &Baton, b: &Baton, rpm: u32) -> String {
    let (st, made) = Admin(a)
        .send(
            Method::POST,
            "/admin/keys",
            Some(json!({"label": "fast", "rpm": rpm})),
        )
        .await;
    assert_eq!(st, 201, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    assert!(
        eventually(3, || b.handle.core.keys.client(&key).is_some()).await,
        "B knows the key A made"
    );
    key
}

#[tokio::test]
async fn a_fast_client_asks_redis_once_a_batch_not_once_a_request() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let (a, b, _dirs) = pair(&redis, "p1", json!([provider("up", &up.base_url(), 1)])).await;
    let key = key_with_rpm(&a, &b, 100_000).await;
    let before = scripts_run(&redis).await;
    let mut remaining = Vec::new();
    let mut tokens = 0;
    for _ in 0..200 {
        let (headers, spent) = spent_once(&a, &key).await;
        let left = headers["x-ratelimit-remaining-requests"].to_str().unwrap();
        remaining.push(left.parse::<u64>().unwrap());
        tokens += spent;
    }
    // Every request's tokens reach the shared counters, once: while its batches were granted
    // far from the limits, the client's spending went in gathered writes (`shared/gather.rs`),
    // not one script a request.
    let counted = field_becomes(&redis, &day_counter(&a, "p1", &key), "t", tokens).await;
    assert_eq!(counted, tokens, "all of the spending, counted once");
    let spendings = spending_writes(&redis, "p1").await;
    assert!(
        (1..100).contains(&spendings),
        "{spendings} spending writes for 200 requests"
    );
    let admissions = scripts_run(&redis).await - before - spendings as i64;
    // 1, 2, 4 … 64 at a time (the pair's clock stands still, so each batch runs out within
    // its lifetime): 8 round trips for 200 requests, where there were 200.
    assert!(
        (5..=20).contains(&admissions),
        "{admissions} admission round trips for 200 requests"
    );
    // The headers say what the shared bucket has left, never more than before.
    assert!(remaining.windows(2).all(|w| w[1] <= w[0]), "{remaining:?}");
    assert!(*remaining.last().unwrap() < 100_000 - 199);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn spending_still_gathered_is_written_before_the_gateway_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let (a, b, _dirs) = pair(&redis, "p5", json!([provider("up", &up.base_url(), 1)])).await;
    let key = key_with_rpm(&a, &b, 100_000).await;
    let mut tokens = 0;
    for _ in 0..40 {
        tokens += spent_once(&a, &key).await.1;
    }
    let counter = day_counter(&a, "p5", &key);
    // The last requests' spending is still waiting for its write: stopping writes it.
    a.stop().await;
    let mut conn = redis.conn().await;
    let counted: Option<i64> = redis::AsyncCommands::hget(&mut conn, counter, "t")
        .await
        .unwrap();
    assert_eq!(counted, Some(tokens), "read at once, without waiting");
    b.stop().await;
}

#[tokio::test]
async fn batches_on_two_instances_never_admit_more_than_the_shared_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let (a, b, _dirs) = pair(&redis, "p2", json!([provider("up", &up.base_url(), 1)])).await;
    // 300 a minute: batches of at most 3 (1 % of it). The clock stands still: nothing refills,
    // so exactly 300 may pass however the two instances share them.
    let key = key_with_rpm(&a, &b, 300).await;
    let (mut ok, mut limited) = (0, 0);
    for i in 0..330 {
        let inst = if i % 3 == 2 { &b } else { &a };
        match inst.chat_as(&key, "auto").await.status().as_u16() {
            200 => ok += 1,
            429 => limited += 1,
            s => panic!("request {i}: {s}"),
        }
    }
    assert_eq!((ok, limited), (300, 30));
    assert_eq!(up.hits(), 300);
    a.stop().await;
    b.stop().await;
}

async fn held(redis: &RedisServer, key: &str) -> i64 {
    let mut conn = redis.conn().await;
    redis::AsyncCommands::zcard(&mut conn, key).await.unwrap()
}

#[tokio::test]
async fn a_busy_provider_leases_its_slots_ahead_and_the_shared_limit_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("busy").await;
    up.always(Behavior::Delay(150));
    let mut p = provider("busy", &up.base_url(), 1);
    // 32 across both: slots are leased up to 2 at once (a sixteenth).
    p["maxConcurrency"] = json!(32);
    let (a, b, _dirs) = pair(&redis, "p3", json!([p])).await;
    for wave in 0..3 {
        let jobs = (0..48).map(|i| {
            let inst = if i % 2 == 0 { &a } else { &b };
            inst.chat_as(OPS_KEY, "auto")
        });
        for r in futures_util::future::join_all(jobs).await {
            assert_eq!(r.status(), 200, "wave {wave}");
        }
    }
    assert_eq!(up.hits(), 144);
    assert!(up.max_in_flight() <= 32, "{} at once", up.max_in_flight());
    // Slots nobody took within their lifetime go back: none is left held.
    let mut left = held(&redis, "p3:inflight:busy").await;
    for _ in 0..60 {
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        left = held(&redis, "p3:inflight:busy").await;
    }
    assert_eq!(left, 0, "slots left held in Redis");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn one_lease_serves_the_requests_that_follow_within_its_lifetime() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let mut p = provider("up", &up.base_url(), 1);
    p["maxConcurrency"] = json!(256);
    let (a, b, _dirs) = pair(&redis, "p4", json!([p])).await;
    let before = scripts_run(&redis).await;
    for _ in 0..60 {
        assert_eq!(a.chat_as(OPS_KEY, "auto").await.status(), 200);
    }
    let leases = scripts_run(&redis).await - before;
    // A slot given back is handed to the next request for 250 ms after its grant: a few round
    // trips for 60 requests one after another, where there were 60.
    assert!(leases < 40, "{leases} lease round trips for 60 requests");
    a.stop().await;
    b.stop().await;
}
