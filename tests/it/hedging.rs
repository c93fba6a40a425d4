//! Hedging (`routing.hedge`, off by default): a request whose first candidate has not answered
//! after the wait goes to the next candidate too; the first content wins, an error or an
//! answer cut before content never does, the loser is cancelled at once and logged (`outrun`)
//! with its prompt priced; a budget caps the extra requests; a subscription passed through and
//! a CLI never race.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

/// The first token the slow provider sends: long after any hedge's wait.
const SLOW_MS: u64 = 5_000;

/// `id` on `fake`, patient enough for a slow first token, its model priced.
fn patient(id: &str, fake: &FakeUpstream, priority: i64) -> Value {
    let mut p = provider(id, &fake.base_url(), priority);
    p["timeouts"] = json!({"connectMs": 2000, "firstByteMs": 20_000, "idleMs": 20_000});
    p["models"] = json!([{"id": format!("{id}-model"),
        "price": {"input": 1000.0, "output": 1000.0}}]);
    p
}

/// `slow` first, `fast` second, hedged after 200 ms with room for every request.
async fn hedged(
    dir: &std::path::Path,
    slow: &FakeUpstream,
    fast: &FakeUpstream,
    extra: Value,
) -> Baton {
    let mut config = json!({"providers": [patient("slow", slow, 1), patient("fast", fast, 2)],
        "routing": {"hedge": {"enabled": true, "after": 200, "budgetPercent": 100}}});
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    Baton::start(dir, config).await
}

async fn fakes() -> (FakeUpstream, FakeUpstream) {
    (
        FakeUpstream::start("slow").await,
        FakeUpstream::start("fast").await,
    )
}

#[tokio::test]
async fn a_slow_first_token_is_hedged_and_the_first_content_wins() {
    let (slow, fast) = fakes().await;
    slow.always(Behavior::Delay(SLOW_MS));
    let dir = tempfile::tempdir().unwrap();
    let baton = hedged(dir.path(), &slow, &fast, json!({})).await;
    for stream in [true, false] {
        let r = baton
            .post(chat_body("auto", "quick please", stream))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-gateway-provider"), "fast");
        let text = r.text().await.unwrap();
        let answer = if stream {
            stream_text(&sse_data(&text))
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(answer, "fast: quick please");
        // The loser is cancelled at once: its connection is closed long before it would
        // have answered.
        assert!(
            eventually(3, || slow.in_flight() == 0).await,
            "the slow attempt was cancelled"
        );
    }
    let log = baton.log().await;
    assert_eq!(log.len(), 2);
    for row in &log {
        let classes: Vec<_> = row.attempts.iter().map(|a| a.class.as_str()).collect();
        assert_eq!(classes, ["outrun", "ok"], "{:?}", row.attempts);
        let (lost, won) = (&row.attempts[0], &row.attempts[1]);
        assert_eq!((lost.provider.as_str(), lost.hedge), ("slow", false));
        assert_eq!((won.provider.as_str(), won.hedge), ("fast", true));
        assert!(lost.input_tokens.unwrap() > 0, "{lost:?}");
        assert!(lost
            .reason
            .as_deref()
            .unwrap()
            .contains("fast/fast-model answered first"));
        // Both prompts are priced: the served answer and the cancelled attempt's prompt.
        let served_only =
            (row.input_tokens.unwrap() + row.output_tokens.unwrap()) as f64 * 1000.0 / 1e6;
        let cost = row.cost_usd.unwrap();
        let lost_cost = lost.input_tokens.unwrap() as f64 * 1000.0 / 1e6;
        assert!(
            (cost - served_only - lost_cost).abs() < 1e-9,
            "{cost} = {served_only} + {lost_cost}"
        );
    }
    assert_eq!((slow.hits(), fast.hits()), (2, 2));
    baton.stop().await;
}

#[tokio::test]
async fn an_error_or_an_answer_cut_before_content_never_wins() {
    let (slow, fast) = fakes().await;
    slow.always(Behavior::Delay(1_500));
    fast.script([Behavior::status(500), Behavior::StreamDies(0)]);
    let dir = tempfile::tempdir().unwrap();
    let baton = hedged(dir.path(), &slow, &fast, json!({})).await;
    for stream in [false, true] {
        let r = baton
            .post(chat_body("auto", "hello", stream))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-gateway-provider"), "slow");
        let text = r.text().await.unwrap();
        let text = if stream {
            stream_text(&sse_data(&text))
        } else {
            text
        };
        assert!(text.contains("slow: hello"), "{text}");
    }
    for row in baton.log().await {
        let classes: Vec<_> = row
            .attempts
            .iter()
            .map(|a| (a.provider.as_str(), a.class.as_str(), a.hedge))
            .collect();
        assert_eq!(
            classes,
            [("fast", "transient", true), ("slow", "ok", false)],
            "the failed hedge is logged, the first attempt serves"
        );
    }
    assert_eq!(
        fast.hits(),
        2,
        "no retry on the spot while the race goes on"
    );
    baton.stop().await;
}

#[tokio::test]
async fn json_that_does_not_fit_never_wins_a_race() {
    let (slow, fast) = fakes().await;
    slow.always(Behavior::Delay(1_000));
    fast.always(Behavior::Text("Sure! Here it is: total is 42".into()));
    let dir = tempfile::tempdir().unwrap();
    let baton = hedged(dir.path(), &slow, &fast, json!({})).await;
    let mut body = chat_body("auto", "hello", false);
    body["response_format"] = json!({"type": "json_object"});
    let r = baton.post(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "slow");
    assert_eq!(header(&r, "x-baton-output"), "valid");
    let row = &baton.log().await[0];
    let classes: Vec<_> = row.attempts.iter().map(|a| a.class.as_str()).collect();
    assert_eq!(classes, ["invalid_output", "ok"], "{:?}", row.attempts);
    baton.stop().await;
}

#[tokio::test]
async fn the_budget_caps_the_extra_requests() {
    let (slow, fast) = fakes().await;
    slow.always(Behavior::Delay(400));
    let dir = tempfile::tempdir().unwrap();
    let baton = hedged(
        dir.path(),
        &slow,
        &fast,
        json!({"routing": {"hedge": {"enabled": true, "after": 50, "budgetPercent": 25}}}),
    )
    .await;
    for i in 0..8 {
        let r = baton.chat("auto", &format!("n{i}")).await;
        assert_eq!(r.status(), 200);
    }
    // One hedge held at the start, then each request earns a quarter of one: the first,
    // the fourth and the eighth requests are hedged, no more.
    assert_eq!(fast.hits(), 3, "hedges sent");
    assert_eq!(slow.hits(), 8, "every request went to its first candidate");
    let hedged_rows = baton
        .log()
        .await
        .iter()
        .filter(|r| r.attempts.iter().any(|a| a.hedge))
        .count();
    assert_eq!(hedged_rows, 3);
    baton.stop().await;
}

#[tokio::test]
async fn off_by_default_and_a_route_or_a_provider_says_its_own() {
    let (slow, fast) = fakes().await;
    slow.always(Behavior::Delay(600));
    let dir = tempfile::tempdir().unwrap();
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [patient("slow", &slow, 1), patient("fast", &fast, 2)],
            "routes": {"hedged": {"targets": ["slow", "fast"], "hedge": true},
                       "plain": ["slow", "fast"]},
            "routing": {"hedge": {"after": 100, "budgetPercent": 100}}}),
    )
    .await;
    for model in ["auto", "plain"] {
        let r = baton.chat(model, "hi").await;
        assert_eq!(header(&r, "x-gateway-provider"), "slow", "{model}");
    }
    assert_eq!(fast.hits(), 0, "not hedged unless turned on");
    let r = baton.chat("hedged", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "fast", "the route hedges");
    baton.stop().await;

    // A provider's own `hedge: false` keeps it from racing even where hedging is on.
    let dir = tempfile::tempdir().unwrap();
    let mut slow_p = patient("slow", &slow, 1);
    slow_p["hedge"] = json!(false);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [slow_p, patient("fast", &fast, 2)],
            "routing": {"hedge": {"enabled": true, "after": 100, "budgetPercent": 100}}}),
    )
    .await;
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "slow");
    assert_eq!(fast.hits(), 1, "only the route's hedge above");
    baton.stop().await;
}

#[tokio::test]
async fn a_login_passed_through_and_a_cli_never_race() {
    const TOKEN: &str = "sk-ant-oat01-alice-subscription-token";
    let (sub, fast) = (
        FakeUpstream::start("claude").await,
        FakeUpstream::start("fast").await,
    );
    sub.only_subscription(TOKEN);
    sub.always(Behavior::Delay(800));
    let clis = crate::cli::FakeClis::new();
    let dir = tempfile::tempdir().unwrap();
    let api = patient("fast", &fast, 2);
    let mut sub_p = login_only(&sub);
    sub_p["timeouts"] = json!({"firstByteMs": 20_000});
    let cli = clis.provider("claude", 3);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            sub_p,
            api],
         "modelMap": {"claude-*": "auto"},
         "routing": {"hedge": {"enabled": true, "after": 50, "budgetPercent": 100}}}),
    )
    .await;
    let r = baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-baton-key", &baton.key)
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
            "messages": [{"role": "user", "content": "mine"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "claude-sub",
        "{:?}",
        baton.log().await
    );
    assert_eq!(fast.hits(), 0, "the client's login is its own to spend");
    baton.stop().await;

    // A slow provider whose next candidate is a CLI: no process is started beside it.
    let (slow, _) = fakes().await;
    slow.always(Behavior::Delay(800));
    let dir = tempfile::tempdir().unwrap();
    let mut first = patient("slow", &slow, 1);
    first["models"] = json!(["sonnet"]);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [first, cli],
         "routing": {"hedge": {"enabled": true, "after": 50, "budgetPercent": 100}}}),
    )
    .await;
    let r = baton.chat("sonnet", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "slow");
    assert!(clis.calls("claude").is_empty(), "no CLI raced");
    baton.stop().await;
}

#[tokio::test]
async fn the_wait_is_the_first_candidates_p95_once_measured() {
    let (slow, fast) = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let baton = hedged(
        dir.path(),
        &slow,
        &fast,
        json!({"routing": {"hedge": {"enabled": true, "after": "p95",
            "unmeasuredMs": 10_000, "budgetPercent": 100}}}),
    )
    .await;
    // Unmeasured, the wait is `unmeasuredMs`: a 600 ms answer is not hedged.
    slow.always(Behavior::Delay(600));
    assert_eq!(
        header(&baton.chat("auto", "a").await, "x-gateway-provider"),
        "slow"
    );
    // Twenty quick answers measure it (the latest twenty count): its p95 is now far below
    // 600 ms, and a slow answer is hedged.
    slow.always(Behavior::Ok);
    for i in 0..20 {
        baton.chat("auto", &format!("q{i}")).await;
    }
    slow.always(Behavior::Delay(SLOW_MS));
    assert_eq!(
        header(&baton.chat("auto", "b").await, "x-gateway-provider"),
        "fast"
    );
    // Recent first: the slow one was hedged; the first, under the unmeasured wait, was not (a
    // quick answer slower than the p95 may have been, as it should).
    let log = baton.log().await;
    let classes = |r: &baton::store::LogRow| -> Vec<String> {
        r.attempts.iter().map(|a| a.class.to_string()).collect()
    };
    assert_eq!(
        classes(log.last().unwrap()),
        ["ok"],
        "the unmeasured wait held"
    );
    assert_eq!(
        classes(&log[0]),
        ["outrun", "ok"],
        "the slow one was hedged"
    );
    baton.stop().await;
}
