//! Signed thinking across failover: a conversation that began on one Anthropic account keeps
//! working when it moves to another (which refuses foreign signatures, as the real API does),
//! streamed and not; a signature Baton cannot place is retried once without thinking; an
//! OpenAI-compatible fallback gets the conversation without thinking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use serde_json::{json, Value};
use testkit::{Behavior, FakeUpstream};

async fn setup(fallback_kind: &str) -> (tempfile::TempDir, FakeUpstream, FakeUpstream, Baton) {
    let dir = tempfile::tempdir().unwrap();
    let a = FakeUpstream::start("a").await;
    let b = FakeUpstream::start("b").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "a", "kind": "anthropic", "baseUrl": a.base_url(), "models": ["claude-a"],
             "priority": 1},
            {"id": "b", "kind": fallback_kind, "baseUrl": b.base_url(), "models": ["claude-b"],
             "priority": 2}],
         "modelMap": {"claude-*": "auto"}}),
    )
    .await;
    (dir, a, b, baton)
}

fn messages(baton: &Baton, body: &Value) -> reqwest::RequestBuilder {
    baton
        .http
        .post(format!("{}/v1/messages", baton.url))
        .header("x-api-key", &baton.key)
        .header("anthropic-version", "2023-06-01")
        .json(body)
}

fn ask(history: Vec<Value>, stream: bool) -> Value {
    json!({"model": "claude-sonnet", "max_tokens": 4000, "stream": stream,
        "thinking": {"type": "enabled", "budget_tokens": 2000}, "messages": history})
}

/// The assistant turn of a whole answer, or rebuilt from a stream's events.
async fn assistant_turn(r: reqwest::Response, stream: bool) -> Value {
    assert_eq!(r.status(), 200);
    if !stream {
        let v: Value = r.json().await.unwrap();
        return json!({"role": "assistant", "content": v["content"]});
    }
    let mut blocks: Vec<Value> = Vec::new();
    for d in sse_data(&r.text().await.unwrap()) {
        let e: Value = serde_json::from_str(&d).unwrap();
        match e["type"].as_str().unwrap() {
            "content_block_start" => blocks.push(e["content_block"].clone()),
            "content_block_delta" => {
                let b = blocks.last_mut().unwrap();
                let d = &e["delta"];
                match d["type"].as_str().unwrap() {
                    "thinking_delta" => {
                        b["thinking"] = json!(format!(
                            "{}{}",
                            b["thinking"].as_str().unwrap(),
                            d["thinking"].as_str().unwrap()
                        ))
                    }
                    "signature_delta" => b["signature"] = d["signature"].clone(),
                    "text_delta" => {
                        b["text"] = json!(format!(
                            "{}{}",
                            b["text"].as_str().unwrap(),
                            d["text"].as_str().unwrap()
                        ))
                    }
                    "input_json_delta" => {
                        // The input's JSON comes in pieces: parsed once they are all here.
                        let so_far = b["partial"].as_str().unwrap_or("").to_string();
                        let joined = so_far + d["partial_json"].as_str().unwrap();
                        if let Ok(input) = serde_json::from_str::<Value>(&joined) {
                            b["input"] = input;
                        }
                        b["partial"] = json!(joined);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    for b in &mut blocks {
        if let Some(o) = b.as_object_mut() {
            o.remove("partial");
        }
    }
    json!({"role": "assistant", "content": blocks})
}

/// The id of the tool call in an assistant turn.
fn call_id(turn: &Value) -> String {
    turn["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .and_then(|b| b["id"].as_str())
        .unwrap()
        .to_string()
}

fn thinking_blocks(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "thinking")
        .count()
}

#[tokio::test]
async fn a_conversation_moves_to_another_account_without_the_first_ones_thinking() {
    for stream in [false, true] {
        let (_d, a, b, baton) = setup("anthropic").await;
        // Turn one on a: its answer thinks (signed by a) and calls a tool.
        a.script([Behavior::ToolCall {
            name: "Read".into(),
            arguments: json!({"file_path": "/tmp/x"}).to_string(),
        }]);
        let user = json!({"role": "user", "content": "read /tmp/x"});
        let r = messages(&baton, &ask(vec![user.clone()], stream))
            .send()
            .await
            .unwrap();
        let turn = assistant_turn(r, stream).await;
        assert_eq!(turn["content"][0]["type"], "thinking", "{turn}");
        let signature = turn["content"][0]["signature"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(!signature.is_empty());
        // Turn two: a is at its limit; b takes the conversation, without a's thinking.
        a.script([Behavior::rate_limited(Some(60))]);
        let result = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id(&turn), "content": "the file"}]});
        let r = messages(&baton, &ask(vec![user, turn, result], stream))
            .send()
            .await
            .unwrap();
        assert_eq!(header(&r, "x-gateway-provider"), "b", "stream={stream}");
        let answer = assistant_turn(r, stream).await;
        assert!(
            answer["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "text"),
            "{answer}"
        );
        let sent = &b.received()[0].body;
        assert_eq!(thinking_blocks(sent), 0, "a's signature never reached b");
        // The tool call no longer begins with thinking b signed: the exchange is written as
        // text, a new turn, and b thinks in it.
        assert_eq!(sent["thinking"]["type"], "enabled", "thinking stays on");
        assert_eq!(
            sent["messages"][1]["content"][0]["text"],
            "(Called the `Read` tool with {\"file_path\":\"/tmp/x\"}.)"
        );
        assert_eq!(
            sent["messages"][2]["content"][0]["text"],
            "(The `Read` tool returned: the file)"
        );
        assert_eq!(b.hits(), 1, "no refused attempt");
        baton.stop().await;
    }
}

#[tokio::test]
async fn a_signature_baton_cannot_place_is_retried_once_without_thinking() {
    let (_d, _a, b, baton) = setup("anthropic").await;
    // b refuses the unknown signature once, on purpose.
    b.expect_refusals();
    // Signed by an account before Baton ever saw it, sent to b directly.
    let history = vec![
        json!({"role": "user", "content": "hi"}),
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "old", "signature": "EqQBCkYIBxgCKkBzb21ld2hlcmU"},
            {"type": "text", "text": "Hello."}]}),
        json!({"role": "user", "content": "again"}),
    ];
    let mut body = ask(history, false);
    body["model"] = json!("b/claude-b");
    let r = messages(&baton, &body).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["content"].as_array().unwrap().last().unwrap()["text"],
        "b: again"
    );
    let got = b.received();
    assert_eq!(got.len(), 2, "refused once, then sent without thinking");
    assert_eq!(b.refusals().len(), 1);
    assert_eq!(thinking_blocks(&got[0].body), 1);
    assert_eq!(thinking_blocks(&got[1].body), 0);
    assert_eq!(got[1].body["messages"][1]["content"][0]["text"], "Hello.");
    baton.stop().await;
}

#[tokio::test]
async fn an_openai_compatible_fallback_gets_the_tool_turn_without_thinking() {
    let (_d, a, b, baton) = setup("openai-compatible").await;
    a.script([Behavior::ToolCall {
        name: "Read".into(),
        arguments: json!({"file_path": "/tmp/x"}).to_string(),
    }]);
    let user = json!({"role": "user", "content": "read /tmp/x"});
    let r = messages(&baton, &ask(vec![user.clone()], false))
        .send()
        .await
        .unwrap();
    let turn = assistant_turn(r, false).await;
    a.script([Behavior::rate_limited(Some(60))]);
    let result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call_id(&turn), "content": "the file"}]});
    let r = messages(&baton, &ask(vec![user, turn, result], false))
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-gateway-provider"), "b");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["type"], "message");
    let sent = &b.received()[0].body;
    let text = sent.to_string();
    assert!(!text.contains("a thinks"), "{text}");
    assert_eq!(
        sent["messages"].as_array().unwrap().last().unwrap()["role"],
        "tool"
    );
    baton.stop().await;
}

/// Reasoning from an OpenAI-compatible upstream reaches an Anthropic client that asked for
/// thinking as thinking blocks (unsigned); sent back in the history, they never reach an
/// Anthropic account, which would refuse them.
#[tokio::test]
async fn reasoning_from_elsewhere_is_unsigned_thinking_that_never_reaches_anthropic() {
    let dir = tempfile::tempdir().unwrap();
    let (thinker, claude) = (
        FakeUpstream::start("thinker").await,
        FakeUpstream::start("claude").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "thinker", "kind": "openai-compatible", "baseUrl": thinker.base_url(),
             "models": ["r1"], "priority": 1},
            {"id": "claude", "kind": "anthropic", "baseUrl": claude.base_url(),
             "models": ["claude-real"], "priority": 2}]}),
    )
    .await;
    thinker.script([Behavior::Thinks(250)]);
    let mut body = ask(vec![json!({"role": "user", "content": "why?"})], true);
    body["model"] = json!("thinker/r1");
    let turn = assistant_turn(messages(&baton, &body).send().await.unwrap(), true).await;
    assert_eq!(turn["content"][0]["type"], "thinking", "{turn}");
    assert!(turn["content"][0]["thinking"]
        .as_str()
        .unwrap()
        .starts_with("step 0."));
    assert_eq!(turn["content"][0]["signature"], "");
    assert_eq!(turn["content"][1]["text"], "thinker: why?");
    // Without thinking asked, none.
    thinker.script([Behavior::Thinks(150)]);
    let mut plain = body.clone();
    plain.as_object_mut().unwrap().remove("thinking");
    let r = messages(&baton, &plain).send().await.unwrap();
    assert!(!r.text().await.unwrap().contains("thinking_delta"));
    // The conversation goes on at Claude: the unsigned block stays out.
    let mut next = ask(
        vec![
            json!({"role": "user", "content": "why?"}),
            turn,
            json!({"role": "user", "content": "and?"}),
        ],
        false,
    );
    next["model"] = json!("claude/claude-real");
    let r = messages(&baton, &next).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(claude.hits(), 1, "accepted at once");
    assert_eq!(thinking_blocks(&claude.received()[0].body), 0);
    baton.stop().await;
}

/// The client's effort reaches the target in its own terms, where the target's model thinks:
/// Responses `reasoning.effort` as Anthropic's thinking budget and Gemini's thinking budget;
/// Anthropic's thinking budget as OpenAI's `reasoning_effort`. Models that do not reason are
/// not asked to.
#[tokio::test]
async fn effort_is_asked_for_in_each_targets_own_terms() {
    let dir = tempfile::tempdir().unwrap();
    let (an, ge, oa) = (
        FakeUpstream::start("an").await,
        FakeUpstream::start("ge").await,
        FakeUpstream::start("oa").await,
    );
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [
            {"id": "an", "kind": "anthropic", "baseUrl": an.base_url(),
             "models": ["claude-sonnet-4-5", "claude-3-5-sonnet-latest"]},
            {"id": "ge", "kind": "gemini", "baseUrl": ge.gemini_base_url(), "models": ["gemini-2.5-pro"]},
            {"id": "oa", "kind": "openai-compatible", "baseUrl": oa.base_url(),
             "models": ["gpt-5", "llama-3.3-70b"]}]}),
    )
    .await;
    let responses = |model: &str, effort: &str| {
        baton
            .http
            .post(format!("{}/v1/responses", baton.url))
            .bearer_auth(&baton.key)
            .json(
                &json!({"model": model, "input": "think", "temperature": 0.2,
                "max_output_tokens": 20000, "reasoning": {"effort": effort}}),
            )
    };
    assert_eq!(
        responses("an/claude-sonnet-4-5", "high")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let sent = &an.received()[0].body;
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert!(
        sent.get("temperature").is_none(),
        "thinking takes no temperature"
    );
    assert_eq!(
        responses("an/claude-3-5-sonnet-latest", "high")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let sent = &an.received()[1].body;
    assert!(
        sent.get("thinking").is_none(),
        "a Claude that does not think is not asked to"
    );
    assert!(
        sent.get("temperature").is_none(),
        "the Messages API takes no sampling parameters (the strict fake refuses them)"
    );
    assert_eq!(
        responses("ge/gemini-2.5-pro", "low")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let sent = &ge.received()[0].body["body"];
    assert_eq!(
        sent["generationConfig"]["thinkingConfig"]["thinkingBudget"],
        1024
    );
    // Anthropic's thinking budget, to OpenAI models.
    for (model, expect) in [("oa/gpt-5", Some("high")), ("oa/llama-3.3-70b", None)] {
        let mut body = ask(vec![json!({"role": "user", "content": "think"})], false);
        body["model"] = json!(model);
        body["thinking"] = json!({"type": "enabled", "budget_tokens": 10000});
        assert_eq!(messages(&baton, &body).send().await.unwrap().status(), 200);
        let sent = oa.received().last().unwrap().body.clone();
        assert_eq!(
            sent.get("reasoning_effort").and_then(Value::as_str),
            expect,
            "{model}"
        );
        assert!(sent.get("thinking").is_none());
    }
    baton.stop().await;
}

/// Mid tool loop a translated conversation has no signed thinking to begin its last turn with,
/// which the API wants while thinking is on: the final exchange is written as text, and the
/// effort still becomes thinking.
#[tokio::test]
async fn a_translated_tool_loop_thinks_on_every_turn() {
    let dir = tempfile::tempdir().unwrap();
    let an = FakeUpstream::start("an").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "an", "kind": "anthropic", "baseUrl": an.base_url(),
            "models": ["claude-sonnet-4-5"]}]}),
    )
    .await;
    let r = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .json(&json!({"model": "an/claude-sonnet-4-5", "reasoning": {"effort": "high"},
            "max_output_tokens": 20000, "input": [
            {"role": "user", "content": "list files"},
            {"type": "reasoning", "id": "rs_baton_1", "summary": [{"type": "summary_text", "text": "ls"}]},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}],
            "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let sent = &an.received()[0].body;
    assert_eq!(sent["thinking"]["type"], "enabled", "{sent}");
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{sent}");
    assert_eq!(
        msgs[1]["content"][0]["text"],
        "(Called the `shell` tool with {\"cmd\":\"ls\"}.)"
    );
    assert_eq!(
        msgs[2]["content"][0]["text"],
        "(The `shell` tool returned: a.txt)"
    );
    baton.stop().await;
}

/// Fifteen turns of a tool loop with thinking enabled, on account a, then b (a capped), then a
/// again (b capped), streamed as Claude Code streams: every turn is served. Once as a client that
/// keeps every thinking block, once as one that keeps none (as Claude Code did when answers came
/// under another model's name): every request goes with thinking on and none is refused; a last
/// tool turn without thinking this account signed has its exchange written as text.
#[tokio::test]
async fn fifteen_tool_turns_across_accounts_with_thinking_enabled() {
    for keeps_thinking in [true, false] {
        let (_d, a, b, baton) = setup("anthropic").await;
        let call = || Behavior::ToolCall {
            name: "Read".into(),
            arguments: json!({"file_path": "/tmp/x"}).to_string(),
        };
        a.always(call());
        b.always(call());
        let mut history = vec![json!({"role": "user", "content": "read the files"})];
        for turn_no in 1..=15 {
            match turn_no {
                6 => a.script([Behavior::rate_limited(Some(3600))]),
                11 => {
                    // a is back (its cooldown cleared, as the UI's "clear" does); b is capped.
                    let r = baton
                        .http
                        .delete(format!("{}/admin/cooldowns?provider=a", baton.url))
                        .header("x-admin-key", &baton.admin_key)
                        .send()
                        .await
                        .unwrap();
                    assert!(r.status().is_success());
                    b.script([Behavior::rate_limited(Some(3600))]);
                }
                _ => {}
            }
            let r = messages(&baton, &ask(history.clone(), true))
                .send()
                .await
                .unwrap();
            let what = format!("turn {turn_no}, keeps thinking: {keeps_thinking}");
            assert_eq!(
                r.status(),
                200,
                "{what}: {:?} {:?}",
                a.refusals(),
                b.refusals()
            );
            let want = if (6..=10).contains(&turn_no) {
                "b"
            } else {
                "a"
            };
            assert_eq!(header(&r, "x-gateway-provider"), want, "{what}");
            let mut turn = assistant_turn(r, true).await;
            if keeps_thinking && turn_no <= 5 {
                assert_eq!(turn["content"][0]["type"], "thinking", "{what}: {turn}");
            }
            if !keeps_thinking {
                turn["content"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|c| c["type"] != "thinking");
            }
            let id = call_id(&turn);
            history.push(turn);
            history.push(json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "contents"}]}));
        }
        assert!(a.refusals().is_empty() && b.refusals().is_empty());
        let sent: Vec<Value> = [&a, &b]
            .iter()
            .flat_map(|f| f.received())
            .map(|r| r.body)
            .filter(|b| b["messages"].as_array().unwrap().len() > 1)
            .collect();
        assert!(
            sent.iter().all(|b| b["thinking"]["type"] == "enabled"),
            "keeps thinking: {keeps_thinking}"
        );
        baton.stop().await;
    }
}

/// A relayed answer names the model the client asked for, streamed and not, as a translated one
/// does: Claude Code drops the thinking of an answer that names another model from its next
/// request. The served model is in `x-gateway-model`; the rest of the answer is as it came.
#[tokio::test]
async fn a_relayed_answer_names_the_model_the_client_asked_for() {
    let (_d, a, _b, baton) = setup("anthropic").await;
    for stream in [false, true] {
        let r = messages(
            &baton,
            &ask(vec![json!({"role": "user", "content": "hi"})], stream),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(header(&r, "x-gateway-model"), "claude-a");
        let named = if stream {
            let text = r.text().await.unwrap();
            let start: Value = serde_json::from_str(&sse_data(&text)[0]).unwrap();
            assert_eq!(start["type"], "message_start");
            assert!(start["message"]["id"]
                .as_str()
                .unwrap()
                .starts_with("msg_fake_a"));
            start["message"]["model"].clone()
        } else {
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["content"][0]["type"], "thinking", "{v}");
            v["model"].clone()
        };
        assert_eq!(named, "claude-sonnet", "stream={stream}");
        assert_eq!(a.received().last().unwrap().body["model"], "claude-a");
    }
    baton.stop().await;
}
