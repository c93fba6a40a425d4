//! Hosted web search on every route: a client's own API's search tool passes through to an
//! upstream of that API; on any other, Baton runs the searches through the configured service
//! (fake SearXNG and Brave on loopback, as strict as the real ones) and answers in the client's
//! own search blocks; with no service the model is told, and nothing is faked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

pub(crate) const QUERY: &str = "rust 2026 edition";

/// A gateway with one provider of `kind` on a fake named `name`, and the fake's own SearXNG as
/// the search service when `searxng`.
pub(crate) async fn setup(
    kind: &str,
    name: &str,
    searxng: bool,
) -> (tempfile::TempDir, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start(name).await;
    up.always(Behavior::Auto);
    std::env::set_var("BT_WS_KEY", "sk-web-search-upstream");
    let base = up.base_url_for(kind);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "p", "kind": kind, "baseUrl": base,
            "keys": [{"env": "BT_WS_KEY"}], "models": ["m-1"]}],
            "modelMap": {"*": "auto"}}),
    )
    .await;
    if searxng {
        let (s, v) = Admin(&baton)
            .send(
                Method::PUT,
                "/admin/web-search",
                Some(json!({"backend": "searxng", "url": format!("http://{}", up.addr)})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["unavailable"], Value::Null, "{v}");
    }
    (dir, up, baton)
}

/// A streamed answer's text and its events' data, parsed (it must be a 200).
async fn events_of(r: reqwest::Response) -> (String, Vec<Value>) {
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let events = sse_data(&text)
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    (text, events)
}

pub(crate) fn anthropic_search_request(stream: bool) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 400, "stream": stream,
        "messages": [{"role": "user", "content": QUERY}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]})
}

#[tokio::test]
async fn an_anthropic_search_on_an_openai_upstream_is_run_by_baton_and_shown_as_server_tool_blocks()
{
    let (_d, up, baton) = setup("openai-compatible", "gpt", true).await;
    let r = baton
        .messages(anthropic_search_request(false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let content = v["content"].as_array().unwrap();
    let kinds: Vec<&str> = content
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "web_search_tool_result", "text"],
        "{v}"
    );
    let call = &content[0];
    assert!(call["id"].as_str().unwrap().starts_with("srvtoolu_"));
    assert_eq!(call["name"], "web_search");
    assert_eq!(call["input"], json!({"query": QUERY}));
    let result = &content[1];
    assert_eq!(result["tool_use_id"], call["id"]);
    let hits = result["content"].as_array().unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0]["type"], "web_search_result");
    assert_eq!(hits[0]["url"], "https://docs.example.org/rust-2026-edition");
    assert_eq!(hits[0]["title"], format!("{QUERY} — Example Docs"));
    assert!(hits[0]["encrypted_content"].as_str().unwrap().len() > 10);
    assert_eq!(hits[0]["page_age"], "2026-11-30T00:00:00");
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["server_tool_use"]["web_search_requests"], 1);
    assert_eq!(up.searches(), [QUERY]);
    // The model saw a function to call, then the results as that call's output.
    let got = up.received();
    assert_eq!(got.len(), 2);
    let tools = got[0].body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "web_search");
    let messages = got[1].body["messages"].as_array().unwrap();
    let tool_msg = messages.iter().find(|m| m["role"] == "tool").unwrap();
    let read = tool_msg["content"].as_str().unwrap();
    assert!(
        read.contains("[1] rust 2026 edition — Example Docs")
            && read.contains("Everything about rust 2026 edition"),
        "{read}"
    );
    assert_eq!(
        got[0].body.get("stream"),
        None,
        "each round is a complete answer"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_streamed_anthropic_search_streams_the_server_tool_blocks_in_order() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", true).await;
    let r = baton
        .messages(anthropic_search_request(true))
        .send()
        .await
        .unwrap();
    let (text, events) = events_of(r).await;
    let starts: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "content_block_start")
        .map(|e| e["content_block"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        starts,
        ["server_tool_use", "web_search_tool_result", "text"],
        "{text}"
    );
    let input: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "input_json_delta")
        .map(|e| e["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&input).unwrap(),
        json!({"query": QUERY})
    );
    // Each block is closed before the next opens, with the indexes in order.
    let mut open = None;
    for e in &events {
        match e["type"].as_str().unwrap() {
            "content_block_start" => {
                assert_eq!(open, None, "{text}");
                open = Some(e["index"].clone());
            }
            "content_block_stop" => assert_eq!(open.take(), Some(e["index"].clone())),
            _ => {}
        }
    }
    let delta = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(delta["usage"]["server_tool_use"]["web_search_requests"], 1);
    assert_eq!(events.last().unwrap()["type"], "message_stop");
    assert_eq!(up.searches().len(), 1);
    baton.stop().await;
}

/// What Claude Code's WebSearch tool sends (read from its 2.1.197 binary): one user turn, the
/// server tool with `max_uses: 8`, the choice forced onto it, thinking off, streamed.
#[tokio::test]
async fn claude_codes_forced_search_request_searches_once_then_lets_the_model_answer() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", true).await;
    let prompt = format!("Perform a web search for the query: {QUERY}");
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are an assistant for performing a web search tool use"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 8}],
        "tool_choice": {"type": "tool", "name": "web_search"},
        "thinking": {"type": "disabled"}});
    let r = baton.messages(body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(
        text.matches("\"type\":\"web_search_tool_result\"").count(),
        1,
        "{text}"
    );
    assert_eq!(up.searches(), [prompt.as_str()]);
    let got = up.received();
    assert_eq!(got.len(), 2, "one search, then the answer");
    assert_eq!(
        got[0].body["tool_choice"],
        json!({"type": "function", "function": {"name": "web_search"}})
    );
    assert_eq!(
        got[1].body.get("tool_choice"),
        None,
        "the model decides once it has results"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_responses_search_on_an_anthropic_upstream_is_a_web_search_call_item() {
    let (_d, up, baton) = setup("anthropic", "claude", true).await;
    let body = json!({"model": "gpt-5", "input": QUERY, "stream": true,
        "tools": [{"type": "web_search", "filters": {"allowed_domains": ["example.org"]}}]});
    let r = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let (_, events) = events_of(r).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    for k in [
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
    ] {
        assert!(kinds.contains(&k), "{kinds:?}");
    }
    let seq: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(seq.windows(2).all(|w| w[1] == w[0] + 1), "{seq:?}");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "response.completed");
    let output = done["response"]["output"].as_array().unwrap();
    assert_eq!(output[0]["type"], "web_search_call");
    assert_eq!(output[0]["status"], "completed");
    assert_eq!(output[0]["action"]["query"], QUERY);
    // Only the allowed domain's page is kept.
    assert_eq!(
        output[0]["action"]["sources"],
        json!([{"type": "url", "url": "https://docs.example.org/rust-2026-edition"}])
    );
    assert_eq!(output.last().unwrap()["type"], "message");
    // The Anthropic upstream got a plain tool to call, never the Responses hosted tool.
    let first = &up.received()[0].body;
    assert_eq!(
        first["tools"],
        json!([{"name": "web_search",
        "description": "Search the web for current information. Returns numbered results with title, URL, age and an excerpt; cite the ones you use as [n]. Only these domains are searched: example.org.",
        "input_schema": {"type": "object", "properties": {"query": {"type": "string", "description": "The search query."}},
            "required": ["query"], "additionalProperties": false}}])
    );
    baton.stop().await;
}

#[tokio::test]
async fn with_no_search_service_the_model_is_told_and_nothing_is_faked() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", false).await;
    let r = baton
        .messages(anthropic_search_request(true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        !text.contains("server_tool_use") && !text.contains("web_search_tool_result"),
        "{text}"
    );
    let got = up.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].body.get("tools"),
        None,
        "no search tool the model could call in vain"
    );
    let system = got[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("web search tool is unavailable here: no search service is set up in Baton (Settings → Web search)"),
        "{system}"
    );
    assert!(up.searches().is_empty());
    baton.stop().await;
}

#[tokio::test]
async fn on_an_upstream_of_the_clients_own_api_the_search_tool_passes_through() {
    let (_d, up, baton) = setup("anthropic", "claude", true).await;
    let body = anthropic_search_request(false);
    let r = baton.messages(body.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let mut expected = body;
    expected["model"] = json!("m-1");
    assert_eq!(
        up.received()[0].body,
        expected,
        "untouched but for the model"
    );
    // Anthropic (the fake, as the real API) ran its own search; its blocks reach the client as
    // they came.
    assert_eq!(up.searches(), [QUERY]);
    assert_eq!(v["content"][0]["id"], "srvtoolu_fake1", "{v}");
    assert_eq!(
        v["content"][1]["content"][0]["encrypted_content"],
        "EqgfCioIARgBIiQ3YTQ0OWZmYi1mZTcxLTRkMzktOWU2Yy0y"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_search_baton_ran_reads_back_to_the_model_on_every_later_turn() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", true).await;
    let first: Value = baton
        .messages(anthropic_search_request(false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let before = up.received().len();
    // Claude Code sends the whole turn back, search blocks and all.
    let follow = json!({"model": "claude-sonnet-4-5", "max_tokens": 100,
        "messages": [{"role": "user", "content": QUERY},
            {"role": "assistant", "content": first["content"]},
            {"role": "user", "content": "thanks"}]});
    let r = baton.messages(follow.clone()).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let sent = &up.received()[before].body["messages"];
    let call = sent[1]["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "web_search");
    assert_eq!(sent[2]["role"], "tool");
    assert_eq!(sent[2]["tool_call_id"], call["id"]);
    assert!(
        sent[2]["content"]
            .as_str()
            .unwrap()
            .contains("Everything about rust 2026 edition"),
        "the excerpt Baton sealed reads back: {sent}"
    );
    assert_eq!(sent[3]["role"], "assistant");

    // The same history to an Anthropic upstream, which could not verify Baton's sealed results:
    // the search goes as text, the rest untouched.
    let claude = FakeUpstream::start("claude").await;
    let dir = tempfile::tempdir().unwrap();
    let b2 = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "a", "kind": "anthropic", "baseUrl": claude.base_url(),
            "keys": [{"env": "BT_WS_KEY"}], "models": ["m-1"]}], "modelMap": {"*": "auto"}}),
    )
    .await;
    let r = b2.messages(follow).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let turn = &claude.received()[0].body["messages"][1]["content"];
    let kinds: Vec<&str> = turn
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["text", "text"], "{turn}");
    assert!(turn[0]["text"]
        .as_str()
        .unwrap()
        .contains("docs.example.org/rust-2026-edition"));
    b2.stop().await;
    baton.stop().await;
}

#[tokio::test]
async fn searches_past_max_uses_are_refused_in_the_clients_terms() {
    let (_d, up, baton) = setup("openai-compatible", "gpt", true).await;
    up.script([
        Behavior::ToolCall {
            name: "web_search".into(),
            arguments: json!({"query": "first"}).to_string(),
        },
        Behavior::ToolCall {
            name: "web_search".into(),
            arguments: json!({"query": "second"}).to_string(),
        },
        Behavior::Text("done".into()),
    ]);
    let mut body = anthropic_search_request(false);
    body["tools"][0]["max_uses"] = json!(1);
    let v: Value = baton
        .messages(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let results: Vec<&Value> = v["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "web_search_tool_result")
        .collect();
    assert_eq!(results.len(), 2, "{v}");
    assert_eq!(results[0]["content"].as_array().unwrap().len(), 3);
    assert_eq!(
        results[1]["content"],
        json!({"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"})
    );
    assert_eq!(
        up.searches(),
        ["first"],
        "the second was never sent to the service"
    );
    assert_eq!(
        v["content"].as_array().unwrap().last().unwrap()["text"],
        "done"
    );
    baton.stop().await;
}

/// Codex's default `web_search = "cached"` declares the tool with `external_web_access: false`:
/// no live search is allowed, so Baton runs none (and keeps the stream a stream), and the model
/// is told why.
#[tokio::test]
async fn codexs_cached_only_search_is_never_run_live() {
    let (_d, up, baton) = setup("anthropic", "claude", true).await;
    let body = json!({"model": "gpt-5.1-codex", "input": "hello", "stream": true,
        "tools": [{"type": "web_search", "external_web_access": false}]});
    let r = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("response.completed") && !text.contains("web_search_call"),
        "{text}"
    );
    let got = up.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body["stream"], true, "streamed as the client asked");
    assert!(
        got[0].body["system"]
            .to_string()
            .contains("cached results only"),
        "{}",
        got[0].body
    );
    assert!(up.searches().is_empty());
    baton.stop().await;
}
