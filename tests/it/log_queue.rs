//! A stalled database (another process holds its write lock) never stalls requests or grows
//! memory without bound: at most `log.maxQueuedRows` rows wait, the oldest are dropped and
//! counted in `/metrics`, and the newest reach the log once the database is back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::json;
use testkit::{Behavior, FakeUpstream};

async fn dropped(b: &Baton) -> u64 {
    let r = Admin(b).req(Method::GET, "/metrics").send().await.unwrap();
    let text = r.text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("baton_log_rows_dropped_total "))
        .map(|v| v.trim().parse::<f64>().unwrap() as u64)
        .unwrap_or_else(|| panic!("no drop counter in {text}"))
}

#[tokio::test]
async fn a_stalled_database_drops_the_oldest_waiting_rows_and_keeps_serving() {
    let up = FakeUpstream::start("a").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &up.base_url(), 1)], "log": {"maxQueuedRows": 50}}),
    )
    .await;
    for _ in 0..3 {
        assert_eq!(baton.chat("auto", "warm").await.status(), 200);
    }
    assert_eq!(baton.log().await.len(), 3);
    assert_eq!(dropped(&baton).await, 0);

    // Another process takes the database's write lock and holds it.
    let db = rusqlite::Connection::open(dir.path().join("baton.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let mut last_id = String::new();
    for i in 0..300 {
        let r = baton.chat("auto", &format!("during {i}")).await;
        assert_eq!(
            r.status(),
            200,
            "request {i} is answered while the database is stalled"
        );
        last_id = header(&r, "x-request-id").to_string();
    }
    let gone = dropped(&baton).await;
    assert!(gone >= 200, "dropped {gone}");
    db.execute_batch("ROLLBACK").unwrap();
    drop(db);

    // Once the database answers, what waited is written: the newest rows, not the oldest.
    baton.handle.core.store.writer().flush().await;
    let db = rusqlite::Connection::open(dir.path().join("baton.db")).unwrap();
    let count = |db: &rusqlite::Connection| -> usize {
        db.query_row("SELECT COUNT(*) FROM request_log", [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap() as usize
    };
    let during = count(&db) - 3;
    assert!(
        during <= 300 - gone as usize,
        "{during} rows after {gone} dropped"
    );
    assert!(during >= 50, "the newest waiting rows are kept: {during}");
    let kept: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM request_log WHERE id = ?1",
            [&last_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kept, 1, "the last request is in the log");
    // And the gateway keeps logging as usual.
    assert_eq!(baton.chat("auto", "after").await.status(), 200);
    baton.handle.core.store.writer().flush().await;
    assert_eq!(count(&db), 3 + during + 1);
    baton.stop().await;
}

/// A rate limit while another process holds the database's write lock: the failover does not
/// wait for the disk (the cooldown is in force in memory at once), and once the lock is gone
/// the writer thread saves the cooldown by itself, with no other request to wake it.
#[tokio::test]
async fn a_locked_database_never_holds_a_failover_and_the_cooldown_lands_after() {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    assert_eq!(baton.chat("auto", "warm").await.status(), 200);
    a.script([Behavior::rate_limited(Some(3600))]);

    let db = rusqlite::Connection::open(dir.path().join("baton.db")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    // Generous: only a failover that waits for the lock (which is never released while this
    // waits) runs out of it.
    let r = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        baton.chat("auto", "while locked"),
    )
    .await
    .expect("the failover is answered while the database is locked");
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    let r = baton.chat("auto", "again").await;
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    assert_eq!(a.hits(), 2, "the cooldown is in force without the disk");

    db.execute_batch("ROLLBACK").unwrap();
    let rows = |db: &rusqlite::Connection| -> i64 {
        db.query_row(
            "SELECT COUNT(*) FROM cooldowns WHERE provider = 'a'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    let mut saved = rows(&db);
    for _ in 0..300 {
        if saved == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        saved = rows(&db);
    }
    assert_eq!(
        saved, 1,
        "the cooldown reaches the disk once the lock is released"
    );
    drop(db);
    baton.stop().await;

    // And it outlives a restart.
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("a", &a.base_url(), 10), provider("b", &b.base_url(), 20)]}),
    )
    .await;
    assert_eq!(
        header(&baton.chat("auto", "after").await, "x-gateway-provider"),
        "b"
    );
    assert_eq!(a.hits(), 2);
    baton.stop().await;
}
