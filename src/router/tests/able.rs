//! `able`: which candidates can take a request, and why the others are passed over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;

use super::*;

/// What a case asks for (tools, images, the estimated tokens, the prompt), the candidates
/// kept, and each passed over with words from its reason.
type Case<'a> = (
    (bool, bool, u64, &'a str),
    &'a [&'a str],
    &'a [(&'a str, &'a str)],
);

/// A request's record, for the reasons `able` gives.
fn record(w: &World) -> Record {
    Record::new(
        "req-able".into(),
        NOW,
        Arc::new(crate::clients::Client::unlimited("test")),
        "auto".into(),
        false,
        &w.core.routing,
    )
}

/// Every candidate is checked in one pass; when none is left, the error is that of the last
/// check to empty the list, whatever order the providers are in, and Activity gives each one
/// its own reason.
#[tokio::test]
async fn with_no_candidate_left_the_error_is_the_last_check_that_emptied_the_list() {
    let no_tools = json!({"id": "plain", "kind": "openai-compatible",
        "baseUrl": "http://127.0.0.1:9/v1", "models": [{"id": "m", "tools": false}]});
    let login = json!({"id": "mine", "kind": "anthropic", "baseUrl": "http://127.0.0.1:9/v1",
        "credentials": "client", "models": ["m"]});
    for (name, providers) in [
        ("able-ab", json!([no_tools, login])),
        ("able-ba", json!([login, no_tools])),
    ] {
        let w = world(name, providers).await;
        let snap = w.core.routing.snapshot.load_full();
        let (targets, selection) = snap.resolve("auto").unwrap();
        assert_eq!(targets.len(), 2);
        // Tools asked for, and no login of the client's own to pass on.
        let mut inbound = inbound(false);
        inbound.needs.tools = true;
        let mut rec = record(&w);
        let e = able(&snap, &inbound, targets, selection, &mut rec).err();
        assert!(
            matches!(&e, Some(Failure::Unsupported(m)) if m.contains("your own subscription")),
            "{name}: {e:?}"
        );
        let mut reasons: Vec<(String, String)> = rec
            .attempts()
            .iter()
            .map(|a| (a.provider.clone(), a.reason.clone().unwrap_or_default()))
            .collect();
        reasons.sort();
        assert_eq!(reasons.len(), 2, "{name}");
        assert_eq!(reasons[0].0, "mine");
        assert!(
            reasons[0].1.ends_with(NO_CLIENT_CREDENTIAL),
            "{:?}",
            reasons[0]
        );
        assert_eq!(reasons[1].0, "plain");
        assert!(reasons[1].1.contains("tool calls"), "{:?}", reasons[1]);
    }
}

/// The glance that keeps most candidates without the full checks gives their verdicts: a
/// request asking for tools, images or more context than a model has is passed over for that
/// reason, and one near a model's window is counted (and here fits), whichever way it comes.
#[tokio::test]
async fn every_candidate_kept_or_passed_over_as_the_full_checks_say() {
    let up = |id: &str, model: serde_json::Value| {
        json!({"id": id, "kind": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1",
            "models": [model]})
    };
    let w = world(
        "able-glance",
        json!([
            up("open", json!("m")),
            up("notools", json!({"id": "m", "tools": false})),
            up("noimages", json!({"id": "m", "images": false})),
            up("near", json!({"id": "m", "contextWindow": 1_000})),
            up("tiny", json!({"id": "m", "contextWindow": 100})),
        ]),
    )
    .await;
    let snap = w.core.routing.snapshot.load_full();
    // (tools, images, estimated tokens, the prompt) → kept, and each passed over with its
    // reason.
    let long = "word ".repeat(1_500);
    let cases: [Case; 5] = [
        (
            (false, false, 300, "hi"),
            &["open", "notools", "noimages", "near"],
            &[("tiny", "context window of 100")],
        ),
        (
            (true, false, 40, "hi"),
            &["open", "noimages", "near", "tiny"],
            &[("notools", "does not take tool calls")],
        ),
        (
            (false, true, 40, "hi"),
            &["open", "notools", "near", "tiny"],
            &[("noimages", "does not take images")],
        ),
        // Within a factor of two of `near`'s window the prompt is counted: "hi" fits, and
        // ~1,900 tokens do not, whatever the estimate said.
        (
            (false, false, 700, "hi"),
            &["open", "notools", "noimages", "near"],
            &[("tiny", "context window of 100")],
        ),
        (
            (false, false, 600, &long),
            &["open", "notools", "noimages"],
            &[
                ("near", "context window of 1000"),
                ("tiny", "context window of 100"),
            ],
        ),
    ];
    for ((tools, images, tokens, prompt), kept, passed) in cases {
        let mut inbound = inbound(false);
        let body = json!({"model": "auto", "messages": [{"role": "user", "content": prompt}]});
        inbound.canonical =
            crate::canonical::openai::request_from_openai(body.as_object().unwrap()).unwrap();
        (inbound.needs.tools, inbound.needs.images) = (tools, images);
        (inbound.needs.estimated_tokens, inbound.needs.max_tokens) = (tokens, 0);
        let mut rec = record(&w);
        let (targets, selection) = snap.resolve("auto").unwrap();
        let left = able(&snap, &inbound, targets, selection, &mut rec).unwrap();
        let mut ids: Vec<&str> = left.iter().map(|t| t.provider.id()).collect();
        ids.sort_unstable();
        let mut want = kept.to_vec();
        want.sort_unstable();
        assert_eq!(ids, want, "{tools} {images} {tokens}");
        let reasons: Vec<(String, String)> = rec
            .attempts()
            .iter()
            .map(|a| (a.provider.clone(), a.reason.clone().unwrap_or_default()))
            .collect();
        assert_eq!(reasons.len(), passed.len(), "{reasons:?}");
        for ((id, why), (p, r)) in passed.iter().zip(&reasons) {
            assert_eq!(p, id);
            assert!(r.contains(why), "{p}: {r}");
        }
    }
}

/// When every `auto` candidate takes the request (Baton's keys, tools and images, a prompt far
/// inside their windows) all are kept without a check each; near a window they are checked,
/// and a prompt that does not fit is passed over.
#[tokio::test]
async fn auto_candidates_that_all_take_a_request_are_kept_at_a_glance() {
    let up = |id: &str| {
        json!({"id": id, "kind": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1",
            "models": [{"id": "m", "contextWindow": 1_000}]})
    };
    let w = world("able-all", json!([up("a"), up("b")])).await;
    let snap = w.core.routing.snapshot.load_full();
    let long = "word ".repeat(1_500);
    for (tokens, prompt, kept) in [(100, "hi", 2), (600, "hi", 2), (600, long.as_str(), 0)] {
        let mut inbound = inbound(false);
        inbound.needs.tools = true;
        (inbound.needs.estimated_tokens, inbound.needs.max_tokens) = (tokens, 0);
        let body = json!({"model": "auto", "messages": [{"role": "user", "content": prompt}]});
        inbound.canonical =
            crate::canonical::openai::request_from_openai(body.as_object().unwrap()).unwrap();
        let mut rec = record(&w);
        let (targets, selection) = snap.resolve("auto").unwrap();
        let left = able(&snap, &inbound, targets, selection, &mut rec);
        assert_eq!(left.as_ref().map_or(0, Vec::len), kept, "{tokens}");
        assert_eq!(
            rec.attempts().len(),
            2 - kept,
            "{tokens}: each passed over is told"
        );
    }
}
