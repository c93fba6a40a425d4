//! Prompt-cache tokens from every upstream format reach every client format in its own usage
//! fields, are priced at the cache prices, and show in the request log, `/admin/usage`,
//! `/admin/stats` and `/metrics`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

/// Price per million: input 2, output 10, cache read 0.5, cache write 4.
fn model(id: &str) -> Value {
    json!({"id": id, "price": {"input": 2.0, "output": 10.0, "cacheRead": 0.5, "cacheWrite": 4.0}})
}

#[tokio::test]
async fn cache_tokens_travel_to_every_client_format_and_are_priced_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let mut fakes = Vec::new();
    let mut providers = Vec::new();
    for (id, kind) in [
        ("oa", "openai-compatible"),
        ("an", "anthropic"),
        ("ge", "gemini"),
        ("rs", "openai-responses"),
    ] {
        let f = FakeUpstream::start(id).await;
        f.report_cache_usage();
        let base = f.base_url_for(kind);
        providers.push(json!({"id": id, "kind": kind, "baseUrl": base,
            "models": [model(&format!("{id}-model"))]}));
        fakes.push(f);
    }
    let baton = Baton::start(dir.path(), json!({"providers": providers})).await;
    for id in ["oa", "an", "ge", "rs"] {
        let pinned = format!("{id}/{id}-model");
        // Anthropic says how much it wrote to the cache; the others do not.
        let written = if id == "an" { 2 } else { 0 };
        for stream in [false, true] {
            // OpenAI client: prompt_tokens whole, cached_tokens inside it.
            let mut body = chat_body(&pinned, "hi", stream);
            if stream {
                body["stream_options"] = json!({"include_usage": true});
            }
            let r = baton.post(body).send().await.unwrap();
            assert_eq!(r.status(), 200, "{id}");
            let usage = if stream {
                let events = sse_data(&r.text().await.unwrap());
                let u: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
                u["usage"].clone()
            } else {
                r.json::<Value>().await.unwrap()["usage"].clone()
            };
            assert_eq!(usage["prompt_tokens"], 100, "{id} stream={stream}: {usage}");
            assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 80, "{id}");

            // Anthropic client: input_tokens only the uncached part.
            let r = baton
                .http
                .post(format!("{}/v1/messages", baton.url))
                .header("x-api-key", &baton.key)
                .header("anthropic-version", "2023-06-01")
                .json(&json!({"model": pinned, "max_tokens": 50, "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}]}))
                .send()
                .await
                .unwrap();
            let usage = if stream {
                let events = sse_data(&r.text().await.unwrap());
                let start: Value = serde_json::from_str(&events[0]).unwrap();
                let delta = events
                    .iter()
                    .map(|e| serde_json::from_str::<Value>(e).unwrap())
                    .find(|e| e["type"] == "message_delta")
                    .unwrap();
                // Whether the prompt's numbers come at the start (Anthropic's own) or the end
                // (translated, known only then), the last word on each counts.
                let mut u = start["message"]["usage"].clone();
                for (k, v) in delta["usage"].as_object().unwrap() {
                    u[k] = v.clone();
                }
                u
            } else {
                r.json::<Value>().await.unwrap()["usage"].clone()
            };
            assert_eq!(
                usage["cache_read_input_tokens"], 80,
                "{id} stream={stream}: {usage}"
            );
            assert_eq!(
                usage["cache_creation_input_tokens"].as_u64().unwrap_or(0),
                written
            );
            assert_eq!(usage["input_tokens"], 100 - 80 - written, "{id}: {usage}");

            // Responses client: input_tokens whole, cached_tokens inside it.
            let r = baton
                .http
                .post(format!("{}/v1/responses", baton.url))
                .bearer_auth(&baton.key)
                .json(&json!({"model": pinned, "input": "hi", "stream": stream}))
                .send()
                .await
                .unwrap();
            let usage = if stream {
                let events = sse_data(&r.text().await.unwrap());
                let done: Value = serde_json::from_str(events.last().unwrap()).unwrap();
                done["response"]["usage"].clone()
            } else {
                r.json::<Value>().await.unwrap()["usage"].clone()
            };
            assert_eq!(usage["input_tokens"], 100, "{id} stream={stream}: {usage}");
            assert_eq!(usage["input_tokens_details"]["cached_tokens"], 80, "{id}");
        }
    }

    // The log: every row has the cache reads, and a cost at the cache prices.
    let rows = baton.log().await;
    assert_eq!(rows.len(), 24);
    for r in &rows {
        let id = r.provider.as_deref().unwrap();
        let written = if id == "an" { 2.0 } else { 0.0 };
        assert_eq!(r.input_tokens, Some(100), "{id}");
        assert_eq!(r.cache_read_tokens, Some(80), "{id}");
        assert_eq!(r.cache_write_tokens, Some(written as u64), "{id}");
        let expected = ((20.0 - written) * 2.0 + 80.0 * 0.5 + written * 4.0 + 7.0 * 10.0) / 1e6;
        let cost = r.cost_usd.unwrap();
        assert!(
            (cost - expected).abs() < 1e-12,
            "{id}: {cost} != {expected}"
        );
    }
    let admin = Admin(&baton);
    let (status, usage) = admin
        .send(reqwest::Method::GET, "/admin/usage?by=provider", None)
        .await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["total"]["cacheReadTokens"], 24 * 80);
    assert_eq!(usage["total"]["cacheWriteTokens"], 6 * 2);
    let an: u64 = usage["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["key"] == "an")
        .map(|r| r["cacheReadTokens"].as_u64().unwrap())
        .sum();
    assert_eq!(an, 6 * 80);
    let (_, csv) = (
        (),
        admin
            .req(reqwest::Method::GET, "/admin/usage?by=provider&format=csv")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
    );
    assert!(csv.starts_with("start,key,label,requests,errors,failovers,input_tokens,output_tokens,cache_read_tokens,cache_write_tokens,"), "{csv}");
    let (_, stats) = admin.send(reqwest::Method::GET, "/admin/stats", None).await;
    assert_eq!(stats["hour"]["ge"]["cacheReadTokens"], 6 * 80, "{stats}");
    let state = baton.admin_state().await;
    let oa = state["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "oa")
        .unwrap();
    assert_eq!(oa["health"]["cacheHitRatio"], 0.8, "{}", oa["health"]);
    let metrics = baton.metrics().await;
    assert!(
        metrics.lines().any(|l| l.starts_with("baton_tokens_total{")
            && l.contains("provider=\"an\"")
            && l.contains("direction=\"cache_write\"")
            && l.ends_with(" 12")),
        "{metrics}"
    );
    baton.stop().await;
    drop(fakes);
}
