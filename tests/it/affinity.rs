//! Conversation affinity: a conversation's turns stay on one key (and, for `auto`, one
//! provider) so the provider's prompt cache stays warm; a failover moves it once and it stays;
//! it is forgotten when idle; two instances sharing Redis agree.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use crate::common::*;
use crate::redis_pair::*;
use baton::clock::ManualClock;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// Turn `n` of a conversation: a long system prompt (worth caching) and the turns so far.
fn turn(system: &str, n: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": system})];
    for i in 0..n {
        messages.push(json!({"role": "user", "content": format!("question {i}")}));
        messages.push(json!({"role": "assistant", "content": format!("answer {i}")}));
    }
    messages.push(json!({"role": "user", "content": format!("question {n}")}));
    json!({"model": "auto", "messages": messages})
}

fn system(name: &str) -> String {
    format!(
        "You are agent {name}. {}",
        "Follow the house rules. ".repeat(400)
    )
}

#[tokio::test]
async fn every_turn_of_a_conversation_uses_one_key_and_a_cooling_key_moves_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let keys = [
        ("BT_AFF_K1", "k-one"),
        ("BT_AFF_K2", "k-two"),
        ("BT_AFF_K3", "k-three"),
    ];
    let clock = Arc::new(ManualClock::new(baton::clock::unix_ms()));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"providers": [keyed("a", &a, 1, &keys)]}),
        Some(clock.clone()),
    )
    .await;
    // Two conversations interleaved, ten turns each, with short one-off requests between.
    let (alice, bob) = (system("alice"), system("bob"));
    for n in 0..10 {
        for s in [&alice, &bob] {
            assert_eq!(baton.post(turn(s, n)).send().await.unwrap().status(), 200);
        }
        assert_eq!(baton.chat("auto", "one-off").await.status(), 200);
        clock.advance(30_000);
    }
    let sent = auths(&a);
    let of =
        |k: usize| -> Vec<&str> { sent.iter().skip(k).step_by(3).map(String::as_str).collect() };
    let (alice_keys, bob_keys, one_offs) = (of(0), of(1), of(2));
    assert!(
        alice_keys.iter().all(|k| *k == alice_keys[0]),
        "{alice_keys:?}"
    );
    assert!(bob_keys.iter().all(|k| *k == bob_keys[0]), "{bob_keys:?}");
    assert_ne!(
        alice_keys[0], bob_keys[0],
        "new conversations still spread over the keys"
    );
    let distinct: std::collections::HashSet<&&str> = one_offs.iter().collect();
    assert!(
        distinct.len() > 1,
        "short one-off requests keep the round-robin: {one_offs:?}"
    );

    // Alice's key hits its limit: her turn moves to another key once, and stays there, even
    // after the limit is over.
    a.script([Behavior::rate_limited(Some(60))]);
    let before = a.received().len();
    assert_eq!(
        baton.post(turn(&alice, 10)).send().await.unwrap().status(),
        200
    );
    let moved = auths(&a)[before + 1].clone();
    assert_eq!(auths(&a)[before], alice_keys[0], "tried on its key first");
    assert_ne!(moved, alice_keys[0]);
    clock.advance(120_000);
    for n in 11..14 {
        assert_eq!(
            baton.post(turn(&alice, n)).send().await.unwrap().status(),
            200
        );
    }
    assert_eq!(
        &auths(&a)[before + 2..],
        [moved.clone(), moved.clone(), moved]
    );
    baton.stop().await;
}

/// A plain SDK chat names no session and its prompt is short: its turns still stay on the key
/// its first turn used (remembered by system prompt, tools and first user turn), while two
/// such chats start on different keys and identical one-off requests keep the round-robin.
#[tokio::test]
async fn a_short_unnamed_chat_stays_on_the_key_of_its_first_turn() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let keys = [
        ("BT_AFF_S1", "s-one"),
        ("BT_AFF_S2", "s-two"),
        ("BT_AFF_S3", "s-three"),
    ];
    let baton = Baton::start(dir.path(), json!({"providers": [keyed("a", &a, 1, &keys)]})).await;
    for n in 0..6 {
        for s in ["You are terse.", "You are a poet."] {
            assert_eq!(baton.post(turn(s, n)).send().await.unwrap().status(), 200);
        }
        // Two pings a round: four requests against three keys, so that a plain round-robin
        // cannot land every turn of a chat on one key by chance.
        for _ in 0..2 {
            assert_eq!(baton.chat("auto", "ping").await.status(), 200);
        }
    }
    let sent = auths(&a);
    let of = |k: usize| -> std::collections::HashSet<&str> {
        sent.iter().skip(k).step_by(4).map(String::as_str).collect()
    };
    let (terse, poet) = (of(0), of(1));
    let pings: std::collections::HashSet<&str> = of(2).union(&of(3)).copied().collect();
    assert_eq!(terse.len(), 1, "6 turns, one key: {terse:?}");
    assert_eq!(poet.len(), 1, "{poet:?}");
    assert_ne!(terse, poet, "two chats still spread over the keys");
    assert!(pings.len() > 1, "one-off requests rotate: {pings:?}");
}

#[tokio::test]
async fn auto_keeps_a_conversation_on_the_provider_it_failed_over_to_until_it_goes_idle() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        FakeUpstream::start("a").await,
        FakeUpstream::start("b").await,
    );
    let clock = Arc::new(ManualClock::new(baton::clock::unix_ms()));
    let baton = Baton::start_with_clock(
        dir.path(),
        json!({"routing": {"affinity": {"ttlMs": 300000}},
            "providers": [provider("a", &a.base_url(), 1), provider("b", &b.base_url(), 2)]}),
        Some(clock.clone()),
    )
    .await;
    let codex = |n: usize| {
        baton
            .http
            .post(format!("{}/v1/responses", baton.url))
            .bearer_auth(&baton.key)
            .header("session-id", "codex-session-1")
            .json(&json!({"model": "auto", "input": format!("turn {n}")}))
    };
    let served = |r: &reqwest::Response| header(r, "x-gateway-provider").to_string();
    assert_eq!(served(&codex(0).send().await.unwrap()), "a");
    a.script([Behavior::rate_limited(Some(30))]);
    assert_eq!(served(&codex(1).send().await.unwrap()), "b", "failover");
    clock.advance(60_000);
    // a is back, but the conversation's cache is warm on b: it stays there.
    for n in 2..5 {
        assert_eq!(served(&codex(n).send().await.unwrap()), "b", "turn {n}");
        clock.advance(60_000);
    }
    // Another conversation goes by the configured order.
    let other = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .header("session-id", "codex-session-2")
        .json(&json!({"model": "auto", "input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(served(&other), "a");
    // Idle past the cache's lifetime: the conversation follows the order again.
    clock.advance(300_001);
    assert_eq!(served(&codex(5).send().await.unwrap()), "a");
    // Affinity off: the order decides every turn.
    baton.stop().await;
    let dir2 = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir2.path(),
        json!({"routing": {"affinity": {"enabled": false}},
            "providers": [provider("a", &a.base_url(), 1), provider("b", &b.base_url(), 2)]}),
    )
    .await;
    a.script([Behavior::rate_limited(Some(60))]);
    let first = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .header("session-id", "s")
        .json(&json!({"model": "auto", "input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(served(&first), "b");
    baton.stop().await;
}

#[tokio::test]
async fn two_instances_sharing_redis_keep_a_conversation_on_one_key() {
    let rdir = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(rdir.path());
    let a = FakeUpstream::start("a").await;
    let keys = [
        ("BT_AFFR_K1", "r-one"),
        ("BT_AFFR_K2", "r-two"),
        ("BT_AFFR_K3", "r-three"),
    ];
    let (one, two, _dirs) = pair(&redis, "aff", json!([keyed("a", &a, 1, &keys)])).await;
    // Instance one serves the conversation's first turn (after a one-off moved its round-robin).
    assert_eq!(one.chat("auto", "one-off").await.status(), 200);
    let s = system("carol");
    assert_eq!(one.post(turn(&s, 0)).send().await.unwrap().status(), 200);
    let first = auths(&a)[1].clone();
    // The note reaches Redis in the background.
    let mut conn = redis.conn().await;
    let mut noted = false;
    for _ in 0..200 {
        let found: Vec<String> = redis::cmd("KEYS")
            .arg("aff:affinity:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        if !found.is_empty() {
            noted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(noted, "the conversation is noted in Redis");
    // Every later turn, on either instance, uses that key.
    for n in 1..6 {
        let b = if n % 2 == 1 { &two } else { &one };
        assert_eq!(b.post(turn(&s, n)).send().await.unwrap().status(), 200);
    }
    let used = &auths(&a)[2..];
    assert!(used.iter().all(|k| *k == first), "{first} then {used:?}");
    one.stop().await;
    two.stop().await;
}

/// Affinity is per client key: a team member who names another's session (the same
/// `prompt_cache_key`) gets a conversation of their own, not the other's key.
#[tokio::test]
async fn a_session_name_steers_only_its_own_clients_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let keys = [("BT_AFF_C1", "k-one"), ("BT_AFF_C2", "k-two")];
    let baton = Baton::start(dir.path(), json!({"providers": [keyed("a", &a, 1, &keys)]})).await;
    let (st, v) = Admin(&baton)
        .send(
            reqwest::Method::POST,
            "/admin/keys",
            Some(json!({"label": "bob"})),
        )
        .await;
    assert_eq!(st, 201, "{v}");
    let alice = baton.key.clone();
    let bob = v["key"].as_str().unwrap().to_string();
    let ask = |key: &str| {
        baton
            .http
            .post(format!("{}/v1/chat/completions", baton.url))
            .bearer_auth(key)
            .json(&json!({"model": "auto", "prompt_cache_key": "shared-name",
                "messages": [{"role": "user", "content": "hi"}]}))
    };
    for _ in 0..3 {
        assert_eq!(ask(&alice).send().await.unwrap().status(), 200);
    }
    assert_eq!(ask(&bob).send().await.unwrap().status(), 200);
    let sent = auths(&a);
    assert!(
        sent[..3].iter().all(|k| k == &sent[0]),
        "alice's turns on one key: {sent:?}"
    );
    assert_ne!(
        sent[3], sent[0],
        "bob's request was not steered onto alice's key: {sent:?}"
    );
    baton.stop().await;
}
