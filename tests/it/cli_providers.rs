//! Subscription CLIs as providers, against fake CLIs that print the real CLIs' output formats
//! and error texts: answers (streamed and not, both APIs), the exact invocation, limits with
//! their reset instants, failover with one event per limit, and process clean-up.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::cli;

use std::time::{Duration, Instant};

use crate::common::*;
use baton::events::Event;
use cli::*;
use serde_json::{json, Value};

#[tokio::test]
async fn each_cli_answers_streamed_and_not_through_every_api() {
    let clis = FakeClis::new();
    let (_d, baton, _c) = start(
        &clis,
        vec![
            clis.provider("claude", 1),
            clis.provider("codex", 2),
            clis.provider("gemini", 3),
        ],
    )
    .await;
    let st = baton.admin_state().await;
    let claude = &st["providers"][0];
    assert_eq!(claude["cli"]["version"], "2.1.197 (Claude Code)");
    assert_eq!(claude["cli"]["loggedIn"], true);
    assert_eq!(claude["maxConcurrency"], 1, "one call at a time by default");
    for (id, model, usage) in [
        ("claude", "sonnet", (12, 7)),
        ("codex", "gpt-5", (12, 7)),
        ("gemini", "gemini-2.5-pro", (24, 14)),
    ] {
        let pinned = format!("{id}/{model}");
        let r = baton
            .post(with_system(&pinned, "Be brief.", "say hi", false))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{id}");
        assert_eq!(header(&r, "x-gateway-provider"), id);
        let v: Value = r.json().await.unwrap();
        let text = v["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(
            text,
            format!(
                "Hello from fake {id} ({model}): {}",
                if id == "gemini" {
                    "Be brief.\n\nsay hi"
                } else {
                    "say hi"
                }
            )
        );
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["prompt_tokens"], usage.0, "{id}");
        assert_eq!(v["usage"]["completion_tokens"], usage.1, "{id}");

        // Streamed, OpenAI API: several chunks, then usage, then [DONE].
        let r = baton
            .post(with_system(&pinned, "Be brief.", "say hi", true))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let events = sse_data(&r.text().await.unwrap());
        assert_eq!(events.last().unwrap(), "[DONE]");
        assert_eq!(stream_text(&events), text, "{id}");
        if id != "codex" {
            let content_chunks = events.iter().filter(|e| e.contains("\"content\"")).count();
            assert!(
                content_chunks >= 3,
                "{id}: text arrives as the CLI prints it"
            );
        }
        let usage_chunk: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
        assert_eq!(usage_chunk["usage"]["completion_tokens"], usage.1);
        // As OpenAI's own stream: the first delta names the role, every chunk the request's id.
        let first: Value = serde_json::from_str(&events[0]).unwrap();
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant", "{id}");
        assert!(
            events[..events.len() - 1]
                .iter()
                .all(|e| { serde_json::from_str::<Value>(e).unwrap()["id"] == first["id"] }),
            "{id}: one id for the whole stream"
        );

        // Not streamed, Anthropic API: the CLI's answer rendered straight as a Message.
        let r = baton
            .http
            .post(format!("{}/v1/messages", baton.url))
            .header("x-api-key", &baton.key)
            .header("anthropic-version", "2023-06-01")
            .json(
                &json!({"model": pinned, "max_tokens": 100, "system": "Be brief.",
                "messages": [{"role": "user", "content": "say hi"}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{id}");
        let m: Value = r.json().await.unwrap();
        assert_eq!(m["type"], "message");
        assert_eq!(m["content"][0]["text"], text, "{id}");
        assert_eq!(m["stop_reason"], "end_turn");
        assert_eq!(m["usage"]["output_tokens"], usage.1, "{id}");

        // Streamed, Anthropic API.
        let r = baton
            .http
            .post(format!("{}/v1/messages", baton.url))
            .header("x-api-key", &baton.key)
            .header("anthropic-version", "2023-06-01")
            .json(
                &json!({"model": pinned, "max_tokens": 100, "stream": true, "system": "Be brief.",
                "messages": [{"role": "user", "content": "say hi"}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        let deltas: String = sse_data(&body)
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter(|v| v["type"] == "content_block_delta")
            .map(|v| v["delta"]["text"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(deltas, text);
        assert!(body.contains("event: message_stop"), "{body}");
        let delta = sse_data(&body)
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v["type"] == "message_delta")
            .unwrap();
        assert_eq!(delta["delta"]["stop_reason"], "end_turn", "{id}");
        assert_eq!(delta["usage"]["output_tokens"], usage.1, "{id}");

        // The Responses API (Codex), whole and streamed.
        let responses = |stream: bool| {
            baton
                .http
                .post(format!("{}/v1/responses", baton.url))
                .bearer_auth(&baton.key)
                .json(
                    &json!({"model": pinned, "instructions": "Be brief.", "input": "say hi",
                    "stream": stream}),
                )
        };
        let r = responses(false).send().await.unwrap();
        assert_eq!(r.status(), 200, "{id}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["object"], "response");
        assert_eq!(v["output"][0]["content"][0]["text"], text, "{id}");
        assert_eq!(v["usage"]["output_tokens"], usage.1, "{id}");
        let r = responses(true).send().await.unwrap();
        let events: Vec<Value> = sse_data(&r.text().await.unwrap())
            .iter()
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let deltas: String = events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(deltas, text, "{id}");
        let done = events.last().unwrap();
        assert_eq!(done["type"], "response.completed", "{id}");
        assert_eq!(done["response"]["usage"]["output_tokens"], usage.1, "{id}");
    }
    baton.stop().await;
}

#[tokio::test]
async fn invocation_is_exact_minimal_and_never_through_a_shell() {
    let clis = FakeClis::new();
    let (_d, baton, _c) = start(
        &clis,
        vec![clis.provider("claude", 1), clis.provider("codex", 2)],
    )
    .await;
    let nasty = "-rf $(touch /tmp/baton-pwned); `id` ; echo \"quoted\" 'single' \\ | cat";
    let system = "--help; $(whoami)";
    for model in ["claude/sonnet", "codex/gpt-5"] {
        let r = baton
            .post(with_system(model, system, nasty, false))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{model}");
    }
    assert!(!std::path::Path::new("/tmp/baton-pwned").exists());
    let c = &clis.calls("claude")[0];
    assert_eq!(
        c["stdin"], nasty,
        "the prompt reaches the CLI verbatim, on stdin"
    );
    let argv: Vec<&str> = c["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        argv,
        [
            "-p",
            "--output-format=stream-json",
            "--verbose",
            "--include-partial-messages",
            "--tools=",
            "--max-turns=1",
            "--no-session-persistence",
            "--setting-sources=",
            "--model=sonnet",
            "--system-prompt=--help; $(whoami)"
        ]
    );
    let x = &clis.calls("codex")[0];
    assert_eq!(x["stdin"], nasty);
    assert_eq!(x["argv"][7], "developer_instructions=\"--help; $(whoami)\"");
    for call in [c, x] {
        let env = call["env"].as_object().unwrap();
        assert_eq!(env["TZ"], "UTC");
        let leaked: Vec<&String> = env
            .keys()
            .filter(|k| k.starts_with("CARGO") || k.starts_with("RUST") || k.contains("KEY"))
            .collect();
        assert!(leaked.is_empty(), "Baton's environment leaked: {leaked:?}");
        assert_eq!(call["cwdEntries"], 0, "fresh empty working directory");
        // Cleaned up just after the answer: directory removed, process reaped.
        let cwd = std::path::PathBuf::from(call["cwd"].as_str().unwrap());
        let pid = call["pid"].as_u64().unwrap();
        assert!(
            eventually(5, || !cwd.exists() && process_reaped(pid)).await,
            "working directory removed and no zombie left"
        );
    }
    assert_ne!(c["cwd"], x["cwd"]);
    baton.stop().await;
}

#[tokio::test]
async fn limits_fail_over_claude_codex_gemini_and_are_announced_once() {
    let clis = FakeClis::new();
    clis.modes("claude", &["limit"]);
    clis.modes("codex", &["limit"]);
    clis.modes("gemini", &["ok"]);
    let (_d, baton, _c) = start(
        &clis,
        vec![
            clis.provider("claude", 1),
            clis.provider("codex", 2),
            clis.provider("gemini", 3),
        ],
    )
    .await;
    let mut events = baton.handle.events().subscribe();
    let r = baton.chat("auto", "hi").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-gateway-provider"), "gemini");
    assert_eq!(header(&r, "x-gateway-attempts"), "3");

    let cooling: Vec<(String, i64)> = baton
        .handle
        .core
        .routing
        .cooldowns
        .active()
        .iter()
        .map(|c| (c.scope.provider.clone(), c.until_ms))
        .collect();
    // Claude: rate_limit_event.resetsAt. Codex: "try again at 11:50 PM" (UTC, as it runs with TZ=UTC).
    assert!(
        cooling.contains(&("claude".into(), 1_796_001_593_000)),
        "{cooling:?}"
    );
    assert!(
        cooling.contains(&("codex".into(), ts("2026-11-29T23:50:00Z"))),
        "{cooling:?}"
    );

    // A second request skips both without starting them, and announces nothing new.
    let r = baton.chat("auto", "again").await;
    assert_eq!(header(&r, "x-gateway-provider"), "gemini");
    assert_eq!(clis.calls("claude").len(), 1);
    assert_eq!(clis.calls("codex").len(), 1);

    let mut failovers = Vec::new();
    while let Ok(ev) = events.try_recv() {
        if let Event::Failover {
            from,
            to,
            class,
            reset_at_ms,
            message,
            ..
        } = ev
        {
            failovers.push((from, to, class, reset_at_ms, message));
        }
    }
    assert_eq!(failovers.len(), 2, "{failovers:?}");
    let (from, to, class, reset, message) = &failovers[0];
    assert_eq!(
        (from.as_str(), to.as_str(), class.as_str()),
        ("claude/sonnet", "codex/gpt-5", "rate")
    );
    assert_eq!(*reset, Some(1_796_001_593_000));
    assert!(
        message.starts_with("Claude Code session limit reached — back at ")
            && message.ends_with("; now using Codex"),
        "{message}"
    );
    assert_eq!(failovers[1].0, "codex/gpt-5");
    assert_eq!(failovers[1].1, "gemini/gemini-2.5-pro");
    assert!(
        failovers[1]
            .4
            .starts_with("Codex usage limit reached — back at "),
        "{}",
        failovers[1].4
    );
    baton.stop().await;
}

#[tokio::test]
async fn concurrent_hits_of_one_limit_announce_it_once() {
    let clis = FakeClis::new();
    clis.modes("claude", &["slow-limit"]);
    let mut claude = clis.provider("claude", 1);
    claude["maxConcurrency"] = json!(2);
    let (_d, baton, _c) = start(&clis, vec![claude, clis.provider("gemini", 2)]).await;
    let mut events = baton.handle.events().subscribe();
    let (a, b) = tokio::join!(baton.chat("auto", "one"), baton.chat("auto", "two"));
    assert_eq!((a.status().as_u16(), b.status().as_u16()), (200, 200));
    assert_eq!(clis.calls("claude").len(), 2, "both requests hit the limit");
    let mut n = 0;
    while let Ok(ev) = events.try_recv() {
        n += matches!(ev, Event::Failover { .. }) as usize;
    }
    assert_eq!(n, 1, "one limit, one notification");
    baton.stop().await;
}

#[tokio::test]
async fn gemini_quotas_reset_when_gemini_says() {
    let clis = FakeClis::new();
    clis.modes("gemini", &["limit", "capacity"]);
    clis.modes("codex", &["ok"]);
    let (_d, baton, clock) = start(
        &clis,
        vec![clis.provider("gemini", 1), clis.provider("codex", 2)],
    )
    .await;
    // Daily quota: next midnight in America/Los_Angeles, for this model only.
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "codex");
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd.len(), 1);
    assert_eq!(cd[0].until_ms, ts("2026-11-30T08:00:00Z"));
    assert_eq!(cd[0].scope.model.as_deref(), Some("gemini-2.5-pro"));
    assert_eq!(cd[0].class.as_str(), "rate");

    // Capacity: Gemini CLI would sleep 2h13m47s; Baton stops it at once and fails over.
    baton
        .handle
        .core
        .routing
        .cooldowns
        .clear_covering("gemini", None, "gemini-2.5-pro", i64::MAX);
    clock.set(NOW);
    let started = Instant::now();
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "codex");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "did not wait for the CLI's own retry"
    );
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd[0].until_ms, NOW + (2 * 3600 + 13 * 60 + 47) * 1000);
    let call = &clis.calls("gemini")[1];
    let (pid, grandchild) = (
        call["pid"].as_u64().unwrap(),
        call["grandchild"].as_u64().unwrap(),
    );
    assert!(
        eventually(5, || process_reaped(pid) && process_gone(grandchild)).await,
        "whole group killed"
    );
    baton.stop().await;
}

#[tokio::test]
async fn logged_out_clis_are_unavailable_with_what_to_run() {
    let clis = FakeClis::new();
    clis.modes("claude", &["nologin"]);
    clis.modes("gemini", &["ok"]);
    let (_d, baton, _c) = start(
        &clis,
        vec![clis.provider("claude", 1), clis.provider("gemini", 2)],
    )
    .await;
    let st = baton.admin_state().await;
    let claude = &st["providers"][0];
    assert_eq!(claude["cli"]["loggedIn"], false);
    let why = claude["unavailable"].as_str().unwrap();
    assert!(
        why.contains("not logged in") && why.contains("/login"),
        "{why}"
    );
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "gemini");
    assert!(
        clis.calls("claude").is_empty(),
        "a logged-out CLI is not started"
    );
    let r = baton.chat("claude/sonnet", "hi").await;
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not logged in"),
        "{v}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn a_login_that_lapses_mid_run_fails_over_and_marks_the_cli() {
    let clis = FakeClis::new();
    // `codex login status` says logged in, but the call itself gets a 401 (token revoked).
    clis.modes("codex", &["ok"]);
    let (_d, baton, _c) = start(
        &clis,
        vec![clis.provider("codex", 1), clis.provider("gemini", 2)],
    )
    .await;
    clis.modes("codex", &["nologin"]);
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "gemini");
    let st = baton.admin_state().await;
    let why = st["providers"][0]["unavailable"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("codex login"), "{st}");
    assert!(
        baton.handle.core.routing.cooldowns.active().is_empty(),
        "a login is not a cooldown that outlasts the fix"
    );
    baton.stop().await;
}

#[tokio::test]
async fn conversations_skip_clis_unless_flattened() {
    let clis = FakeClis::new();
    let upstream = testkit::FakeUpstream::start("api").await;
    let (_d, baton, _c) = start(
        &clis,
        vec![
            clis.provider("claude", 1),
            provider("api", &upstream.base_url(), 2),
        ],
    )
    .await;
    let turns = json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "and then?"}]);
    let r = baton
        .post(json!({"model": "auto", "messages": turns}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        header(&r, "x-gateway-provider"),
        "api",
        "auto skips the CLI for a conversation"
    );
    assert!(clis.calls("claude").is_empty());
    let r = baton
        .post(json!({"model": "claude/sonnet", "messages": turns}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("multi-turn") && msg.contains("flattenHistory"),
        "{msg}"
    );
    let tools = json!({"model": "claude/sonnet", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]});
    let r = baton.post(tools).send().await.unwrap();
    assert_eq!(r.status(), 400);
    baton.stop().await;

    let mut flat = clis.provider("claude", 1);
    flat["flattenHistory"] = json!(true);
    let (_d, baton, _c) = start(&clis, vec![flat]).await;
    let r = baton
        .post(json!({"model": "auto", "messages": turns}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let stdin = clis.calls("claude")[0]["stdin"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        stdin.contains("User: hi\n\nAssistant: hello\n\nUser: and then?"),
        "{stdin}"
    );
    baton.stop().await;
}

#[tokio::test]
async fn overloaded_cli_cools_briefly_and_fails_over() {
    let clis = FakeClis::new();
    clis.modes("claude", &["overloaded"]);
    let (_d, baton, _c) = start(
        &clis,
        vec![clis.provider("claude", 1), clis.provider("codex", 2)],
    )
    .await;
    let r = baton.chat("auto", "hi").await;
    assert_eq!(header(&r, "x-gateway-provider"), "codex");
    let log = baton.log().await;
    assert_eq!(log[0].attempts[0].class.as_str(), "overloaded");
    let cd = baton.handle.core.routing.cooldowns.active();
    assert_eq!(cd.len(), 1);
    assert!(
        cd[0].until_ms - NOW <= 30_000,
        "overload is momentary: {}",
        cd[0].until_ms - NOW
    );
    baton.stop().await;
}
