//! A Claude subscription whose window is spent can go on serving from paid extra usage. With
//! the provider's `overage` at its default (`avoid`), the answer that shows it (unified status
//! rejected, overage allowed and in use) is the last one: the account cools until the window
//! resets, the next request goes to the other provider, and the user is told once. With
//! `"overage": "allow"` the subscription keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use crate::usage::{claude_code, quota_events, subscription_then_other, unified, Sub};
use testkit::Behavior;

fn from_overage(reset_s: i64) -> Behavior {
    let mut h = unified(1.0, reset_s, "rejected");
    h.push((
        "anthropic-ratelimit-unified-overage-status".into(),
        "allowed".into(),
    ));
    h.push((
        "anthropic-ratelimit-unified-overage-in-use".into(),
        "true".into(),
    ));
    Behavior::OkHeaders(h)
}

#[tokio::test]
async fn paid_extra_usage_is_a_cap_unless_allowed() {
    let Sub {
        _dir,
        start,
        clock,
        sub,
        _other,
        baton,
    } = subscription_then_other().await;
    let mut rx = baton.handle.events().subscribe();
    let reset = start / 1000 + 2 * 3600;
    sub.script([from_overage(reset), from_overage(reset)]);
    // Served (already billed), and the last one from extra usage.
    let r = claude_code(&baton, "past the window").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "claude-max");
    let r = claude_code(&baton, "next").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "other");
    assert_eq!(sub.hits(), 1, "the subscription was not asked again");
    let told: Vec<_> = quota_events(&mut rx)
        .into_iter()
        .filter(|(kind, _, _)| kind == "overage")
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(
        told[0].2.contains("instead of paid extra usage until"),
        "{}",
        told[0].2
    );
    // The window's reset passes: back on the subscription.
    clock.advance(2 * 3600 * 1000 + 1000);
    sub.always(Behavior::Ok);
    let r = claude_code(&baton, "after the reset").send().await.unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "claude-max");
    baton.stop().await;
}

#[tokio::test]
async fn allowed_overage_keeps_the_subscription_serving() {
    let sub = testkit::FakeUpstream::start("claude").await;
    sub.only_subscription(crate::usage::ALICE);
    let other = testkit::FakeUpstream::start("other").await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        serde_json::json!({"providers": [
            {"id": "claude-max", "kind": "anthropic", "baseUrl": sub.base_url(),
             "credentials": "client", "models": ["*"], "priority": 1, "overage": "allow"},
            {"id": "other", "kind": "openai-compatible", "baseUrl": other.base_url(),
             "models": ["other-model"], "priority": 2}],
         "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    let reset = chrono_free_now() + 3600;
    sub.always(from_overage(reset));
    for i in 0..3 {
        let r = claude_code(&baton, &format!("turn {i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(header(&r, "x-gateway-provider"), "claude-max", "turn {i}");
    }
    assert_eq!(other.hits(), 0);
    baton.stop().await;
}

fn chrono_free_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
