//! Two things every API says its own way, through every inbound API to every upstream kind:
//! an answer stopped at the output limit (`finish_reason: "length"`, `stop_reason:
//! "max_tokens"`, `status: "incomplete"`, `finishReason: "MAX_TOKENS"`), and two tool calls in
//! one turn answered together on the next. The fakes stop at the limit and make parallel calls
//! as the real APIs do, and refuse a next turn whose results do not pair with the calls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::FakeUpstream;

const KINDS: [&str; 4] = [
    "openai-compatible",
    "anthropic",
    "gemini",
    "openai-responses",
];
const DIALECTS: [&str; 3] = ["chat", "messages", "responses"];

fn upstream(kind: &str, up: &FakeUpstream) -> Value {
    let base = up.base_url_for(kind);
    std::env::set_var("BATON_TEST_STOPS_KEY", "sk-test-stops-and-parallel-0000");
    json!({"id": "up", "kind": kind, "baseUrl": base, "models": ["up-model"],
           "keys": [{"env": "BATON_TEST_STOPS_KEY"}]})
}

async fn send(b: &Baton, dialect: &str, body: Value) -> reqwest::Response {
    let path = match dialect {
        "chat" => "/v1/chat/completions",
        "messages" => "/v1/messages",
        _ => "/v1/responses",
    };
    b.http
        .post(format!("{}{path}", b.url))
        .bearer_auth(&b.key)
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn user_turn(dialect: &str, text: &str, limit: u64, stream: bool) -> Value {
    match dialect {
        "chat" => json!({"model": "up-model", "max_tokens": limit, "stream": stream,
                         "messages": [{"role": "user", "content": text}]}),
        "messages" => json!({"model": "up-model", "max_tokens": limit, "stream": stream,
                             "messages": [{"role": "user", "content": text}]}),
        _ => json!({"model": "up-model", "max_output_tokens": limit, "stream": stream,
                    "input": [{"role": "user", "content": text}]}),
    }
}

#[tokio::test]
async fn an_answer_stopped_at_the_limit_says_so_in_every_api() {
    let words: Vec<String> = (0..30).map(|i| format!("w{i}")).collect();
    let text = words.join(" ");
    for kind in KINDS {
        let up = FakeUpstream::start("up").await;
        let dir = tempfile::tempdir().unwrap();
        let b = Baton::start(dir.path(), json!({"providers": [upstream(kind, &up)]})).await;
        for dialect in DIALECTS {
            for stream in [false, true] {
                let r = send(&b, dialect, user_turn(dialect, &text, 16, stream)).await;
                let at = format!("{dialect} to {kind}, stream {stream}");
                assert_eq!(r.status(), 200, "{at}");
                let got = r.text().await.unwrap();
                let said = match (dialect, stream) {
                    ("chat", false) => {
                        let v: Value = serde_json::from_str(&got).unwrap();
                        v["choices"][0]["finish_reason"] == "length"
                    }
                    ("chat", true) => got.contains(r#""finish_reason":"length""#),
                    ("messages", false) => {
                        let v: Value = serde_json::from_str(&got).unwrap();
                        v["stop_reason"] == "max_tokens"
                    }
                    ("messages", true) => got.contains(r#""stop_reason":"max_tokens""#),
                    (_, false) => {
                        let v: Value = serde_json::from_str(&got).unwrap();
                        v["status"] == "incomplete"
                            && v["incomplete_details"]["reason"] == "max_output_tokens"
                    }
                    (_, true) => {
                        got.contains("event: response.incomplete")
                            && got.contains(r#""reason":"max_output_tokens""#)
                    }
                };
                assert!(
                    said,
                    "{at}: the client is not told the answer stopped at the limit: {got}"
                );
                assert!(!got.contains("w29"), "{at}: cut where the upstream stopped");
            }
        }
        b.stop().await;
    }
}

fn tools(dialect: &str) -> Value {
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}},
                        "required": ["city"]});
    let names = ["get_weather", "get_time"];
    match dialect {
        "chat" => json!(
            names.map(|n| json!({"type": "function", "function": {"name": n,
            "description": "d", "parameters": schema}}))
        ),
        "messages" => json!(names.map(|n| json!({"name": n, "description": "d",
            "input_schema": schema}))),
        _ => json!(names.map(
            |n| json!({"type": "function", "name": n, "description": "d",
            "parameters": schema})
        )),
    }
}

/// The calls a complete answer makes, as (id, name).
fn calls(dialect: &str, v: &Value) -> Vec<(String, String)> {
    let pick = |items: &[Value], id: &str, name: &str| -> Vec<(String, String)> {
        items
            .iter()
            .filter(|i| i.get(id).is_some() && i.get(name).is_some())
            .map(|i| {
                (
                    i[id].as_str().unwrap().to_string(),
                    i[name].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    match dialect {
        "chat" => {
            let tc = v["choices"][0]["message"]["tool_calls"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            tc.iter()
                .map(|c| {
                    (
                        c["id"].as_str().unwrap().to_string(),
                        c["function"]["name"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        }
        "messages" => {
            let blocks: Vec<Value> = v["content"].as_array().cloned().unwrap_or_default();
            pick(
                &blocks
                    .into_iter()
                    .filter(|b| b["type"] == "tool_use")
                    .collect::<Vec<_>>(),
                "id",
                "name",
            )
        }
        _ => {
            let items: Vec<Value> = v["output"].as_array().cloned().unwrap_or_default();
            pick(
                &items
                    .into_iter()
                    .filter(|i| i["type"] == "function_call")
                    .collect::<Vec<_>>(),
                "call_id",
                "name",
            )
        }
    }
}

/// The next turn: the calls as the client got them, and one result for each.
fn answered(dialect: &str, first: &Value, asked: &Value, got: &[(String, String)]) -> Value {
    let mut next = asked.clone();
    match dialect {
        "chat" => {
            let msgs = next["messages"].as_array_mut().unwrap();
            msgs.push(first["choices"][0]["message"].clone());
            for (id, _) in got {
                msgs.push(json!({"role": "tool", "tool_call_id": id, "content": "sunny, 12:00"}));
            }
        }
        "messages" => {
            let msgs = next["messages"].as_array_mut().unwrap();
            msgs.push(json!({"role": "assistant", "content": first["content"]}));
            msgs.push(json!({"role": "user", "content": got.iter().map(|(id, _)|
                json!({"type": "tool_result", "tool_use_id": id, "content": "sunny, 12:00"})).collect::<Vec<_>>()}));
        }
        _ => {
            let input = next["input"].as_array_mut().unwrap();
            for item in first["output"].as_array().unwrap() {
                if item["type"] == "function_call" {
                    input.push(item.clone());
                }
            }
            for (id, _) in got {
                input.push(json!({"type": "function_call_output", "call_id": id, "output": "sunny, 12:00"}));
            }
        }
    }
    next
}

#[tokio::test]
async fn two_tool_calls_in_one_turn_go_out_and_come_back_paired_in_every_api() {
    for kind in KINDS {
        let up = FakeUpstream::start("up").await;
        // Acts as a model: calls tools when the user's words ask for them.
        up.always(testkit::Behavior::Auto);
        let dir = tempfile::tempdir().unwrap();
        let b = Baton::start(dir.path(), json!({"providers": [upstream(kind, &up)]})).await;
        for dialect in DIALECTS {
            let at = format!("{dialect} to {kind}");
            let mut asked = user_turn(
                dialect,
                "weather and time in Paris, in parallel",
                200,
                false,
            );
            asked["tools"] = tools(dialect);
            let r = send(&b, dialect, asked.clone()).await;
            assert_eq!(r.status(), 200, "{at}");
            let first: Value = r.json().await.unwrap();
            let got = calls(dialect, &first);
            let names: Vec<&str> = got.iter().map(|(_, n)| n.as_str()).collect();
            assert_eq!(names, ["get_weather", "get_time"], "{at}: {first}");
            assert_ne!(got[0].0, got[1].0, "{at}: two calls, two ids: {first}");

            let r = send(&b, dialect, answered(dialect, &first, &asked, &got)).await;
            let status = r.status();
            let v: Value = r.json().await.unwrap();
            assert_eq!(
                status, 200,
                "{at}: both results go back paired with their calls: {v}"
            );
            assert!(calls(dialect, &v).is_empty(), "{at}: an answer now: {v}");
        }
        b.stop().await;
    }
}
