//! A shared concurrency slot is never lost to a Redis that stalls: a grant whose answer did not
//! come in time (the instance went on alone) and a release that could not be sent are given
//! back when Redis answers again, instead of blocking the slot for every instance until the
//! lease's TTL (a minute). Under CPU load one slow answer was enough to make requests queue
//! for 30 s and fail (`shared_state::max_concurrency_holds_across_instances`, twice in CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

use crate::common::*;
use crate::redis_pair::*;

async fn held(redis: &RedisServer) -> i64 {
    let mut conn = redis.conn().await;
    redis::AsyncCommands::zcard(&mut conn, "t9:inflight:slow")
        .await
        .unwrap()
}

#[tokio::test]
async fn a_grant_redis_ran_after_the_instance_gave_up_is_given_back() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("slow").await;
    up.always(Behavior::Delay(700));
    let mut p = provider("slow", &up.base_url(), 1);
    p["maxConcurrency"] = json!(2);
    let (a, b, _dirs) = pair(&redis, "t9", json!([p])).await;
    let pid = Pid::from_raw(redis.child.as_ref().unwrap().id() as i32);
    // A takes a slot. Then Redis stops answering: B's request finds it silent, marks Redis
    // away and is served on its own, but its grant was sent and Redis runs it when it wakes.
    // Nobody holds that lease: B must give it back once Redis answers again, or it blocks a
    // slot for every instance until its TTL (a minute).
    let first = a.chat_as(OPS_KEY, "auto");
    let second = async {
        assert!(
            eventually(5, || up.hits() == 1).await,
            "the first request reached the upstream"
        );
        assert_eq!(held(&redis).await, 1, "the slot is taken in Redis");
        kill(pid, Signal::SIGSTOP).unwrap();
        let r = b.chat_as(OPS_KEY, "auto").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        kill(pid, Signal::SIGCONT).unwrap();
        r
    };
    let (r1, r2) = tokio::join!(first, second);
    assert_eq!((r1.status().as_u16(), r2.status().as_u16()), (200, 200));
    // Once Redis answers again the slot is given back (not after the lease's minute).
    let mut freed = false;
    for _ in 0..150 {
        if held(&redis).await == 0 {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        freed,
        "the unanswered grant was given back when Redis returned"
    );
    a.stop().await;
    b.stop().await;
}
