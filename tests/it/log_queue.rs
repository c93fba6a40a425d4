//! A stalled database (another process holds its write lock) never stalls requests or grows
//! memory without bound: at most `log.maxQueuedRows` rows wait, the oldest are dropped and
//! counted in `/metrics`, and the newest reach the log once the database is back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::json;
use testkit::FakeUpstream;

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
