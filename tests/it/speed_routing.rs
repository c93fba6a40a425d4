//! Routing by measured speed (`order: "speed"`, for `auto` or a route): among candidates of
//! equal priority the one answering fastest now goes first, from a decaying average of live
//! answers; one not measured yet is tried once first, so each gets measured. The provider card
//! shows the figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// Named so that `auto`'s own order (by id among equal priority) puts the slowest first.
const SPEEDS: [(&str, u64); 3] = [("a-slow", 300), ("b-fast", 20), ("c-middle", 120)];

async fn fakes() -> Vec<FakeUpstream> {
    let mut out = Vec::new();
    for (name, ms) in SPEEDS {
        let f = FakeUpstream::start(name).await;
        f.always(Behavior::Delay(ms));
        out.push(f);
    }
    out
}

/// The three, of equal priority.
fn providers(fakes: &[FakeUpstream]) -> Value {
    json!(fakes
        .iter()
        .zip(SPEEDS)
        .map(|(f, (name, _))| provider(name, &f.base_url(), 1))
        .collect::<Vec<_>>())
}

async fn served(baton: &Baton, model: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        let r = baton.chat(model, &format!("hello {i}")).await;
        assert_eq!(r.status(), 200);
        out.push(header(&r, "x-gateway-provider").to_string());
    }
    out
}

#[tokio::test]
async fn auto_ordered_by_speed_goes_to_the_fastest_once_each_is_measured() {
    let fakes = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": providers(&fakes), "routing": {"order": "speed"}}),
    )
    .await;
    assert_eq!(
        served(&baton, "auto", 6).await,
        ["a-slow", "b-fast", "c-middle", "b-fast", "b-fast", "b-fast"],
        "each measured once, then the fastest"
    );
    let state = baton.admin_state().await;
    let speed = |id: &str| {
        state["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .unwrap()["speed"]
            .clone()
    };
    let (slow, fast) = (speed("a-slow"), speed("b-fast"));
    assert!(
        slow["ttftMs"].as_f64().unwrap() > 250.0 && fast["ttftMs"].as_f64().unwrap() < 150.0,
        "{slow} {fast}"
    );
    assert_eq!(fast["samples"], 4);
    assert!(fast["tokensPerS"].as_f64().unwrap() > 0.0, "{fast}");
    baton.stop().await;
}

#[tokio::test]
async fn a_route_says_its_own_order_and_others_keep_theirs() {
    let fakes = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": providers(&fakes),
            "routes": {"quick": {"targets": ["c-middle", "a-slow", "b-fast"], "order": "speed"},
                       "listed": ["c-middle", "b-fast"]}}),
    )
    .await;
    assert_eq!(
        served(&baton, "quick", 5).await,
        ["c-middle", "a-slow", "b-fast", "b-fast", "b-fast"]
    );
    // A route without the order keeps its list's order, though b-fast is known to be faster.
    assert_eq!(served(&baton, "listed", 2).await, ["c-middle", "c-middle"]);
    // And `auto` without `routing.order` is ordered as before.
    assert_eq!(served(&baton, "auto", 2).await, ["a-slow", "a-slow"]);
    baton.stop().await;
}
