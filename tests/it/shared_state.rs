//! Two gateways sharing state through a real `redis-server` on loopback: a 429 seen by one cools
//! the key for both, a client's budget spent across both is counted once, `maxConcurrency`
//! holds across both, and when Redis stops both keep answering and converge when it returns.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::redis_pair;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use redis_pair::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

fn cooling(b: &Baton, provider: &str) -> Option<i64> {
    b.handle
        .core
        .routing
        .cooldowns
        .active()
        .into_iter()
        .find(|c| c.scope.provider == provider)
        .map(|c| c.until_ms)
}

#[tokio::test]
async fn a_limit_seen_by_one_instance_cools_that_key_for_both() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let limited = FakeUpstream::start("limited").await;
    let flaky = FakeUpstream::start("flaky").await;
    let spare = FakeUpstream::start("spare").await;
    limited.always(Behavior::rate_limited(Some(120)));
    flaky.always(Behavior::status(500));
    let (a, b, _dirs) = pair(
        &redis,
        "t1",
        json!([
            provider("limited", &limited.base_url(), 1),
            provider("flaky", &flaky.base_url(), 2),
            provider("spare", &spare.base_url(), 3)
        ]),
    )
    .await;
    // A's request meets the 429 and fails over; B, asked right after, never calls that key.
    let r = a.chat_as(OPS_KEY, "auto").await;
    assert_eq!(r.status(), 200);
    let hits = limited.hits();
    assert!(hits >= 1);
    let r = b.chat_as(OPS_KEY, "auto").await;
    assert_eq!(r.status(), 200);
    assert_eq!(limited.hits(), hits, "B did not call the key A saw limited");
    let until_a = cooling(&a, "limited").unwrap();
    assert_eq!(
        cooling(&b, "limited"),
        Some(until_a),
        "the same reset instant on both"
    );
    assert_eq!(
        until_a,
        at(PINNED) + 120_000,
        "Retry-After: 120 from the pinned now"
    );
    let log = b.log().await;
    let skip = log[0]
        .attempts
        .iter()
        .find(|x| x.provider == "limited")
        .unwrap();
    assert_eq!(skip.class.as_str(), "skipped", "{:?}", log[0].attempts);

    // Breaker states travel too: A opens flaky's breaker; B skips flaky without calling it.
    for _ in 0..3 {
        let _ = a.chat_as(OPS_KEY, "flaky").await;
    }
    assert!(
        eventually(2, || cooling(&b, "flaky").is_some()).await,
        "breaker shared"
    );
    let flaky_hits = flaky.hits();
    let r = b.chat_as(OPS_KEY, "flaky").await;
    // Out after failures, not rate-limited: a 502 that says it is cooling until the trial.
    assert_eq!(r.status(), 502, "failing, not rate-limited");
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cooling until"),
        "{v}"
    );
    assert_eq!(
        flaky.hits(),
        flaky_hits,
        "B did not call a provider whose breaker A opened"
    );

    // Clearing by hand on B clears it on A.
    let (st, _) = Admin(&b)
        .send(Method::DELETE, "/admin/cooldowns?provider=limited", None)
        .await;
    assert_eq!(st, 200);
    assert!(
        eventually(2, || cooling(&a, "limited").is_none()).await,
        "clear shared"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_budget_spent_across_both_instances_is_counted_once() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let (a, b, _dirs) = pair(&redis, "t2", json!([provider("up", &up.base_url(), 1)])).await;
    // Each answer is 18 tokens; the team may use 50 a day. A, B, A spend 54.
    for (i, inst) in [&a, &b, &a].into_iter().enumerate() {
        let r = inst.chat_as(TEAM_KEY, "auto").await;
        assert_eq!(r.status(), 200, "request {i}");
        // The spend reaches Redis in the background; the next admission reads it.
        let want = 18 * (i as i64 + 1);
        let day = baton::clients::utc_day(at(PINNED)).0;
        let got = field_becomes(&redis, &format!("t2:budget:team:day:{day}"), "t", want).await;
        assert_eq!(got, want, "each request counted exactly once");
    }
    // The month's hash is its own, though the month and the day start at the same instant.
    let month = baton::clients::utc_month(at(PINNED)).0;
    assert_eq!(month, baton::clients::utc_day(at(PINNED)).0);
    let mut conn = redis.conn().await;
    let in_month: Option<i64> =
        redis::AsyncCommands::hget(&mut conn, format!("t2:budget:team:month:{month}"), "t")
            .await
            .unwrap();
    assert_eq!(in_month, Some(54));
    for inst in [&a, &b] {
        let r = inst.chat_as(TEAM_KEY, "auto").await;
        assert_eq!(r.status(), 429);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "budget_exceeded", "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("54 of 50 tokens"),
            "{v}"
        );
    }
    assert_eq!(up.hits(), 3);
    // Other clients are not affected.
    assert_eq!(b.chat_as(OPS_KEY, "auto").await.status(), 200);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn max_concurrency_holds_across_instances() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("slow").await;
    up.always(Behavior::Delay(300));
    let mut p = provider("slow", &up.base_url(), 1);
    p["maxConcurrency"] = json!(2);
    let (a, b, _dirs) = pair(&redis, "t3", json!([p])).await;
    let mut jobs = Vec::new();
    for i in 0..8 {
        let inst = if i % 2 == 0 { &a } else { &b };
        jobs.push(inst.chat_as(OPS_KEY, "auto"));
    }
    let results = futures_util::future::join_all(jobs).await;
    for r in &results {
        assert_eq!(r.status(), 200);
    }
    assert_eq!(up.hits(), 8);
    assert_eq!(
        up.max_in_flight(),
        2,
        "never more than 2 at once across both instances"
    );
    // Every lease was given back.
    let mut conn = redis.conn().await;
    let left: i64 = redis::AsyncCommands::zcard(&mut conn, "t3:inflight:slow")
        .await
        .unwrap();
    assert!(eventually(2, || left == 0).await, "{left} leases left");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn both_keep_answering_while_redis_is_down_and_converge_when_it_returns() {
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start(tmp.path());
    let first = FakeUpstream::start("first").await;
    let second = FakeUpstream::start("second").await;
    let (a, b, _dirs) = pair(
        &redis,
        "t4",
        json!([
            provider("first", &first.base_url(), 1),
            provider("second", &second.base_url(), 2)
        ]),
    )
    .await;
    assert_eq!(a.chat_as(TEAM_KEY, "auto").await.status(), 200);
    assert_eq!(b.chat_as(TEAM_KEY, "auto").await.status(), 200);

    redis.stop();
    // Not one request fails: metered keys fall back to local limits, slots to local ones.
    for i in 0..6 {
        let inst = if i % 2 == 0 { &a } else { &b };
        let key = if i < 2 { TEAM_KEY } else { OPS_KEY };
        let r = inst.chat_as(key, "auto").await;
        assert_eq!(r.status(), 200, "request {i} while Redis is down");
    }
    assert!(
        eventually(3, || a.handle.core.routing.shared.is_up() == Some(false)
            && b.handle.core.routing.shared.is_up() == Some(false))
        .await
    );
    // A learns of a limit while Redis is away; B cannot know yet.
    first.script([Behavior::rate_limited(Some(300))]);
    let r = a.chat_as(OPS_KEY, "auto").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "second");
    assert!(cooling(&a, "first").is_some());
    assert!(cooling(&b, "first").is_none());

    redis.run();
    assert!(
        eventually(10, || a.handle.core.routing.shared.is_up() == Some(true)
            && b.handle.core.routing.shared.is_up() == Some(true))
        .await,
        "both reconnect"
    );
    // Converged: B has A's cooldown with the same reset, and Redis counts every token the
    // team spent, before, during and after the outage.
    assert!(eventually(5, || cooling(&b, "first") == cooling(&a, "first")).await);
    let hits = first.hits();
    assert_eq!(b.chat_as(OPS_KEY, "auto").await.status(), 200);
    assert_eq!(
        first.hits(),
        hits,
        "B honours the cooldown A learned while Redis was down"
    );
    let mut total = 0;
    for inst in [&a, &b] {
        total += inst
            .log()
            .await
            .iter()
            .filter(|r| r.client_key == "team")
            .map(|r| r.input_tokens.unwrap_or(0) + r.output_tokens.unwrap_or(0))
            .sum::<u64>();
    }
    assert_eq!(total, 4 * 18);
    let day = baton::clients::utc_day(at(PINNED)).0;
    let key = format!("t4:budget:team:day:{day}");
    let in_redis = field_becomes(&redis, &key, "t", total as i64).await as u64;
    assert_eq!(
        in_redis, total,
        "spending while Redis was down is added once it returns"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn declared_quota_is_counted_across_instances() {
    let tmp = tempfile::tempdir().unwrap();
    let redis = RedisServer::start(tmp.path());
    let free = FakeUpstream::start("free").await;
    let paid = FakeUpstream::start("paid").await;
    let mut p = provider("free", &free.base_url(), 1);
    // A daily limit: a minute boundary falling inside the test cannot split the count.
    p["limits"] = json!({"rpd": 4});
    let (a, b, _dirs) = pair(
        &redis,
        "t5",
        json!([p, provider("paid", &paid.base_url(), 2)]),
    )
    .await;
    // Two requests through each instance use the free tier's four a day between them.
    for inst in [&a, &b, &a, &b] {
        let r = inst.chat_as(OPS_KEY, "auto").await;
        assert_eq!(header(&r, "x-gateway-provider"), "free");
    }
    let score = |x: &Baton| {
        let snap = x.handle.core.routing.snapshot.load();
        let p = snap.providers.iter().find(|p| p.id() == "free").unwrap();
        p.runtime
            .quota
            .score("", at(PINNED), &p.config.limits, p.quota_day(at(PINNED)).0)
    };
    assert!(
        eventually(2, || score(&a) == Some(0.0)).await,
        "{:?}",
        score(&a)
    );
    // So A moves on before the free tier answers 429, though it sent only two itself.
    let r = a.chat_as(OPS_KEY, "auto").await;
    assert_eq!(header(&r, "x-gateway-provider"), "paid");
    assert_eq!(free.hits(), 4);
    a.stop().await;
    b.stop().await;
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let st = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl is installed");
    assert!(st.success(), "openssl {args:?}");
}

#[tokio::test]
async fn tls_with_a_private_ca_and_a_password_from_the_environment() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A private CA and a certificate for localhost signed by it.
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        d,
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=Baton test CA",
            ],
        ]
        .concat(),
    );
    openssl(
        d,
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    std::fs::write(d.join("ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "ext",
        ],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--tls-cert-file",
            "server.pem",
            "--tls-key-file",
            "server.key",
            "--tls-ca-cert-file",
            "ca.pem",
            "--tls-auth-clients",
            "no",
            "--requirepass",
            "s3cret-for-tests",
        ])
        .current_dir(d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut redis = RedisServer {
        port,
        dir: d.to_path_buf(),
        child: Some(child),
    };
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    std::env::set_var("BATON_TEST_REDIS_PASSWORD", "s3cret-for-tests");
    std::env::set_var("BATON_TEST_REDIS_WRONG", "not-the-password");
    let up = FakeUpstream::start("up").await;
    let start = |password_env: &'static str| {
        let ca = d.join("ca.pem");
        let url = format!("rediss://localhost:{port}");
        let upstream = up.base_url();
        async move {
            let dir = tempfile::tempdir().unwrap();
            let mut cfg = json!({"providers": [provider("up", &upstream, 1)]});
            cfg["state"] = json!({"backend": "redis", "redis": {"url": url, "caFile": ca, "passwordEnv": password_env, "prefix": "t6"}});
            let b = Baton::start(dir.path(), cfg).await;
            (b, dir)
        }
    };
    let (good, _d1) = start("BATON_TEST_REDIS_PASSWORD").await;
    assert!(
        eventually(5, || good.handle.core.routing.shared.is_up() == Some(true)).await,
        "TLS with the private CA and the password"
    );
    good.handle.core.routing.cooldowns.start(
        baton::limits::Scope {
            provider: "up".into(),
            key: None,
            model: Some("x".into()),
        },
        baton::clock::unix_ms() + 60_000,
        baton::limits::ErrorClass::Rate.into(),
        "test",
    );
    good.handle.core.routing.shared.barrier().await;
    // A wrong password: Redis refuses, and the gateway serves on its own state.
    let (wrong, _d2) = start("BATON_TEST_REDIS_WRONG").await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(wrong.handle.core.routing.shared.is_up(), Some(false));
    assert_eq!(wrong.chat("auto", "hi").await.status(), 200);
    assert!(
        wrong.handle.core.routing.cooldowns.active().is_empty(),
        "nothing read without the password"
    );
    // A third with the right password reads the cooldown the first one wrote.
    let (third, _d3) = start("BATON_TEST_REDIS_PASSWORD").await;
    assert!(
        eventually(5, || !third
            .handle
            .core
            .routing
            .cooldowns
            .active()
            .is_empty())
        .await
    );
    for b in [good, wrong, third] {
        b.stop().await;
    }
    redis.stop();
}

#[tokio::test]
async fn client_keys_made_on_one_instance_work_on_all() {
    let tmp = tempfile::tempdir().unwrap();
    let mut redis = RedisServer::start(tmp.path());
    let up = FakeUpstream::start("up").await;
    let (a, b, _dirs) = pair(&redis, "t7", json!([provider("up", &up.base_url(), 1)])).await;
    let (st, made) = Admin(&a)
        .send(
            Method::POST,
            "/admin/keys",
            Some(json!({"label": "alice", "rpm": 1})),
        )
        .await;
    assert_eq!(st, 201, "{made}");
    let key = made["key"].as_str().unwrap().to_string();
    let id = made["id"].as_str().unwrap().to_string();
    let works_on = |x: &Baton| x.handle.core.keys.client(&key).is_some();
    assert!(
        eventually(3, || works_on(&b)).await,
        "B knows the key A made"
    );
    // One request a minute, across both; what is left comes from the shared bucket.
    let r = b.chat_as(&key, "auto").await;
    assert_eq!(r.status(), 200);
    let left = |name: &str| {
        r.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(
        (
            left("x-ratelimit-limit-requests").as_deref(),
            left("x-ratelimit-remaining-requests").as_deref()
        ),
        (Some("1"), Some("0"))
    );
    assert_eq!(a.chat_as(&key, "auto").await.status(), 429);
    // A limit changed on B applies on A; a revocation on B locks the key out of A.
    let (st, _) = Admin(&b)
        .send(
            Method::PATCH,
            &format!("/admin/keys/{id}"),
            Some(json!({"rpm": null})),
        )
        .await;
    assert_eq!(st, 200);
    assert!(
        eventually(3, || a
            .handle
            .core
            .keys
            .client(&key)
            .is_some_and(|c| c.policy.rpm.is_none()))
        .await
    );
    assert_eq!(a.chat_as(&key, "auto").await.status(), 200);
    let (st, _) = Admin(&b)
        .send(Method::DELETE, &format!("/admin/keys/{id}"), None)
        .await;
    assert_eq!(st, 204);
    assert!(eventually(3, || !works_on(&a)).await, "revoked everywhere");
    assert_eq!(a.chat_as(&key, "auto").await.status(), 401);

    // A key made while Redis is away reaches the others once it is back.
    redis.stop();
    assert!(eventually(3, || a.handle.core.routing.shared.is_up() == Some(false)).await);
    let (st, made) = Admin(&a)
        .send(Method::POST, "/admin/keys", Some(json!({"label": "bob"})))
        .await;
    assert_eq!(st, 201);
    let bob = made["key"].as_str().unwrap().to_string();
    assert_eq!(
        a.chat_as(&bob, "auto").await.status(),
        200,
        "works here at once"
    );
    assert!(b.handle.core.keys.client(&bob).is_none());
    redis.run();
    assert!(
        eventually(10, || b.handle.core.keys.client(&bob).is_some()).await,
        "B learns of bob"
    );
    assert_eq!(b.chat_as(&bob, "auto").await.status(), 200);
    a.stop().await;
    b.stop().await;
}
