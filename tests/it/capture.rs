//! Capture and replay: a streamed request that failed over, captured because one of its
//! providers was being captured, holds what the client sent, the canonical request, each
//! upstream exchange (the stream as it came) and what the client got — with no piece of any
//! key in it (echoed by an upstream whole, JSON-escaped, as a bearer token, or cut across
//! stream events) — readable by the user only; `baton replay` sends it again to another
//! provider and shows the difference.

use std::os::unix::fs::PermissionsExt;

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

const KEY: &str = "sk-proj-Q7vX2mZpT0r4n9Wq5Ls8Hb3Yc6Kd1FgEj";

/// No run of six characters or more of `secret` is in `text`.
fn no_piece_of(secret: &str, text: &str) {
    for w in secret.as_bytes().windows(6) {
        let w = std::str::from_utf8(w).unwrap();
        assert!(!text.contains(w), "{w:?} (part of a key) is in the capture");
    }
}

#[tokio::test]
async fn a_failed_over_stream_is_captured_without_its_keys_and_replayed_elsewhere() {
    let (first, second, third) = (
        FakeUpstream::start("first").await,
        FakeUpstream::start("second").await,
        FakeUpstream::start("third").await,
    );
    // The first echoes its key in its refusal: as a bearer token and JSON-escaped.
    first.always(Behavior::Status {
        status: 429,
        body: json!({"error": {"message": format!(
            "Rate limit for Bearer {KEY}; key {}", KEY.replace('Q', "\\u0051"))}}),
        headers: vec![("retry-after".into(), "60".into())],
    });
    // The second says the key in its answer, cut across stream events.
    second.always(Behavior::Text(format!(
        "your key is {} {} ok",
        &KEY[..13],
        &KEY[13..]
    )));
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [keyed("first", &first, 1, &[("BATON_CAPTURE_KEY", KEY)]),
                             provider("second", &second.base_url(), 2),
                             provider("third", &third.base_url(), 3)]}),
    )
    .await;
    let admin = Admin(&baton);
    // Nothing is captured until asked.
    let r = baton
        .post(chat_body("third", "before", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, v) = admin.send(Method::GET, "/admin/captures", None).await;
    assert_eq!(v["captures"], json!([]), "{v}");

    for (body, param) in [
        (json!({"provider": "first", "minutes": 0}), "minutes"),
        (json!({"provider": "nobody", "minutes": 5}), "provider"),
        (json!({"clientKey": "k_nobody", "minutes": 5}), "clientKey"),
        (json!({"minutes": 5}), "provider"),
    ] {
        let (s, v) = admin
            .send(Method::POST, "/admin/captures/rules", Some(body))
            .await;
        assert_eq!(s, 422, "{v}");
        assert_eq!(v["error"]["param"], param, "{v}");
    }
    let (s, v) = admin
        .send(
            Method::POST,
            "/admin/captures/rules",
            Some(json!({"provider": "first", "minutes": 30})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["rules"][0]["provider"], "first");

    let r = baton
        .post(chat_body("auto", "hello there", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let id = header(&r, "x-request-id").to_string();
    let streamed = r.text().await.unwrap();
    assert!(stream_text(&sse_data(&streamed)).starts_with("your key is"));

    let listed = eventually(10, || {
        dir.path()
            .join("captures")
            .join(format!("{id}.json"))
            .exists()
    })
    .await;
    assert!(listed, "the capture was written");
    let meta = std::fs::metadata(dir.path().join("captures").join(format!("{id}.json"))).unwrap();
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "readable by the user only"
    );
    let dmeta = std::fs::metadata(dir.path().join("captures")).unwrap();
    assert_eq!(dmeta.permissions().mode() & 0o777, 0o700);

    let resp = admin
        .req(Method::GET, &format!("/admin/captures/{id}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "content-disposition").contains(&format!("baton-capture-{id}.json")));
    let text = resp.text().await.unwrap();
    no_piece_of(KEY, &text);
    no_piece_of(&baton.key, &text);
    let c: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(c["client"]["method"], "POST");
    assert_eq!(c["client"]["url"], "/v1/chat/completions");
    assert!(c["client"]["body"]
        .as_str()
        .unwrap()
        .contains("hello there"));
    let auth = c["client"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h[0] == "authorization")
        .unwrap();
    assert_eq!(auth[1], "[redacted]");
    assert!(c["canonical"].as_str().unwrap().contains("ChatRequest"));
    let attempts = c["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{c:#}");
    assert_eq!(attempts[0]["provider"], "first");
    assert_eq!(attempts[0]["response"]["status"], 429);
    assert!(attempts[0]["request"]["url"]
        .as_str()
        .unwrap()
        .ends_with("/chat/completions"));
    assert!(attempts[0]["response"]["body"]
        .as_str()
        .unwrap()
        .contains("Rate limit"));
    assert_eq!(attempts[1]["provider"], "second");
    assert_eq!(attempts[1]["response"]["status"], 200);
    assert!(attempts[1]["response"]["body"]
        .as_str()
        .unwrap()
        .contains("data: "));
    assert_eq!(c["answer"]["status"], 200);
    assert!(c["answer"]["body"].as_str().unwrap().contains("[DONE]"));
    assert_eq!(c["log"]["provider"], "second");

    // Activity links to it.
    let (_, log) = admin.send(Method::GET, "/admin/log?limit=10", None).await;
    let row = log["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap();
    assert_eq!(row["captured"], true);
    let other = log["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] != id.as_str())
        .unwrap();
    assert!(other.get("captured").is_none());

    // Replayed on another provider: the difference is shown, exit 1.
    let args = |extra: &[&str]| {
        let mut a = vec![
            "replay".to_string(),
            id.clone(),
            "--url".into(),
            baton.url.clone(),
            "--data-dir".into(),
            dir.path().display().to_string(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let (code, out, err) = run_baton(args(&["--provider", "third"]), vec![]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("HTTP 200 from third"), "{out}");
    assert!(out.contains("captured  HTTP 200 from second"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with('+') && l.contains("third")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with('-') && l.contains("your")),
        "{out}"
    );
    assert!(third.received().last().unwrap().body["messages"]
        .to_string()
        .contains("hello there"));
    // A capture that is not there is said.
    let (code, _, err) = run_baton(
        vec![
            "replay".into(),
            "req_none".into(),
            "--url".into(),
            baton.url.clone(),
            "--data-dir".into(),
            dir.path().display().to_string(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("no capture of request req_none"), "{err}");

    // Stopped, then deleted.
    let (s, v) = admin
        .send(Method::DELETE, "/admin/captures/rules", None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["rules"], json!([]));
    let (s, _) = admin
        .send(Method::DELETE, &format!("/admin/captures/{id}"), None)
        .await;
    assert_eq!(s, 204);
    let (s, v) = admin
        .send(Method::GET, &format!("/admin/captures/{id}"), None)
        .await;
    assert_eq!(s, 404, "{v}");
    let (s, _) = admin
        .send(Method::GET, "/admin/captures/..%2Fbaton.db", None)
        .await;
    assert_eq!(s, 404, "a capture id is never a path");
    baton.stop().await;
}

#[tokio::test]
async fn a_client_keys_requests_are_captured_and_rules_end_on_time_and_survive_a_restart() {
    let fake = FakeUpstream::start("one").await;
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"providers": [provider("one", &fake.base_url(), 1)]});
    let baton = Baton::start(dir.path(), config.clone()).await;
    let admin = Admin(&baton);
    let (s, k) = admin
        .send(Method::POST, "/admin/keys", Some(json!({"label": "alice"})))
        .await;
    assert_eq!(s, 201, "{k}");
    let (kid, secret) = (
        k["id"].as_str().unwrap().to_string(),
        k["key"].as_str().unwrap().to_string(),
    );
    let (s, v) = admin
        .send(
            Method::POST,
            "/admin/captures/rules",
            Some(json!({"clientKey": kid, "minutes": 1})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let r = baton.chat_as(&secret, "auto").await;
    assert_eq!(r.status(), 200);
    let id = header(&r, "x-request-id").to_string();
    // Another client's request is not captured.
    let r = baton.chat("auto", "hi").await;
    let other = header(&r, "x-request-id").to_string();
    assert!(
        eventually(10, || dir
            .path()
            .join(format!("captures/{id}.json"))
            .exists())
        .await
    );
    let text = std::fs::read_to_string(dir.path().join(format!("captures/{id}.json"))).unwrap();
    no_piece_of(&secret, &text);
    assert!(!dir.path().join(format!("captures/{other}.json")).exists());
    // Replayed as it came: the same answer (ids and timestamps aside), exit 0.
    let (code, out, err) = run_baton(
        vec![
            "replay".into(),
            id.clone(),
            "--url".into(),
            baton.url.clone(),
            "--data-dir".into(),
            dir.path().display().to_string(),
        ],
        vec![],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("The answers are the same"), "{out}");
    baton.stop().await;

    // After a restart the rule still runs until its end.
    let baton = Baton::start(dir.path(), config).await;
    let (_, v) = Admin(&baton)
        .send(Method::GET, "/admin/captures", None)
        .await;
    assert_eq!(v["rules"][0]["clientKey"], kid.as_str(), "{v}");
    assert_eq!(v["captures"].as_array().unwrap().len(), 1, "{v}");
    baton.stop().await;
}
