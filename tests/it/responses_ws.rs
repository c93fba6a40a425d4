//! `GET /v1/responses` upgraded to a WebSocket (Codex's default transport), driven by a real
//! WebSocket client: the handshake is authenticated, a prewarm calls nothing, a turn streams the
//! same events as the HTTP stream and ends with `response.completed`, a refusal is Codex's
//! wrapped error event with its status and `retry-after`, and a bad message is answered without
//! closing the connection. (The real Codex over it: tests/e2e/test_codex_ws.py.)

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::common::*;
use testkit::{Behavior, FakeUpstream};

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(baton: &Baton, key: &str) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
    let url = format!("{}/v1/responses", baton.url.replacen("http://", "ws://", 1));
    let mut req = url.into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

async fn next_json(ws: &mut Ws) -> Value {
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(20), ws.next())
            .await
            .expect("an event in time")
            .expect("the connection stays open")
            .unwrap();
        match msg {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The events of one turn, up to the one that ends it.
async fn turn(ws: &mut Ws, request: Value) -> Vec<Value> {
    ws.send(Message::Text(request.to_string().into()))
        .await
        .unwrap();
    let mut events = Vec::new();
    loop {
        let ev = next_json(ws).await;
        let t = ev["type"].as_str().unwrap_or_default().to_string();
        events.push(ev);
        if matches!(
            t.as_str(),
            "response.completed" | "response.failed" | "error"
        ) {
            return events;
        }
    }
}

#[tokio::test]
async fn codex_websocket_turns_stream_like_http_and_refusals_are_wrapped_errors() {
    let dir = tempfile::tempdir().unwrap();
    let up = FakeUpstream::start("up").await;
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [provider("up", &up.base_url(), 10)], "modelMap": {"gpt-*": "up"}}),
    )
    .await;

    // A wrong key is refused at the handshake (401), before any upgrade.
    match connect(&baton, "sk-wrong").await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 401),
        other => panic!("expected a 401 handshake, got {:?}", other.map(|_| ())),
    }
    // A plain GET is told to POST (or to upgrade).
    let r = baton
        .http
        .get(format!("{}/v1/responses", baton.url))
        .bearer_auth(&baton.key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 405);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("POST /v1/responses"),
        "{v}"
    );

    let mut ws = connect(&baton, &baton.key).await.unwrap();
    // Codex's prewarm: answered at once, nothing sent upstream.
    let events = turn(
        &mut ws,
        json!({"type": "response.create", "model": "gpt-5", "input": [], "generate": false,
               "client_metadata": {"x-codex-ws-stream-request-start-ms": "1"}}),
    )
    .await;
    assert_eq!(events[0]["type"], "response.created");
    assert_eq!(events.last().unwrap()["response"]["status"], "completed");
    assert!(up.received().is_empty(), "a prewarm calls no upstream");

    // A turn: the same events as the HTTP stream, the fake's answer in the deltas.
    let ask = json!({"type": "response.create", "model": "gpt-5", "stream": true,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi over ws"}]}],
        "client_metadata": {"turn_id": "t1"}});
    let events = turn(&mut ws, ask.clone()).await;
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"response.created"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"response.completed"), "{kinds:?}");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "up: hi over ws");
    let sent = up.received().last().unwrap().body.clone();
    assert!(
        sent.get("client_metadata").is_none() && sent.get("type").is_none(),
        "transport fields stay on the socket: {sent}"
    );

    // Codex's next turn sends only what is new, continuing the last response on this
    // connection: the upstream gets the whole conversation.
    let id = events.last().unwrap()["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let events = turn(
        &mut ws,
        json!({"type": "response.create", "model": "gpt-5", "previous_response_id": id,
               "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and again"}]}]}),
    )
    .await;
    assert_eq!(
        events.last().unwrap()["type"],
        "response.completed",
        "{events:?}"
    );
    let sent = up.received().last().unwrap().body.clone();
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{sent}");
    assert_eq!(sent["messages"][1]["content"], "up: hi over ws", "{sent}");
    // An id this connection never answered is not invented: the request is refused, with why.
    let events = turn(
        &mut ws,
        json!({"type": "response.create", "model": "gpt-5", "previous_response_id": "resp_elsewhere",
               "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "?"}]}]}),
    )
    .await;
    let err = events.last().unwrap();
    assert_eq!(
        (err["type"].as_str(), err["status"].as_u64()),
        (Some("error"), Some(400)),
        "{err}"
    );
    assert_eq!(err["error"]["param"], "previous_response_id", "{err}");
    assert_eq!(
        err["error"]["code"], "previous_response_not_found",
        "the API's own code, which clients recover from: {err}"
    );

    // A bad message is answered, and the connection goes on serving.
    ws.send(Message::Text(r#"{"type": "session.update"}"#.into()))
        .await
        .unwrap();
    let err = next_json(&mut ws).await;
    assert_eq!(
        (err["type"].as_str(), err["status"].as_u64()),
        (Some("error"), Some(400)),
        "{err}"
    );
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("response.create"),
        "{err}"
    );
    ws.send(Message::Text("not json".into())).await.unwrap();
    assert_eq!(next_json(&mut ws).await["status"], 400);

    // Every provider limited: Codex's wrapped error, with the status and when to retry.
    up.always(Behavior::rate_limited(Some(30)));
    let events = turn(&mut ws, ask.clone()).await;
    let err = events.last().unwrap();
    assert_eq!(
        (err["type"].as_str(), err["status"].as_u64()),
        (Some("error"), Some(429)),
        "{err}"
    );
    assert!(err["headers"]["retry-after"].as_str().is_some(), "{err}");
    assert!(err["error"]["message"].as_str().is_some(), "{err}");
    let _ = ws.close(None).await;

    // Both turns are in the request log, like HTTP ones.
    let r = baton
        .http
        .get(format!("{}/admin/log", baton.url))
        .header("x-admin-key", &baton.admin_key)
        .send()
        .await
        .unwrap();
    let log: Value = r.json().await.unwrap();
    let rows = log["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "the turns, not the prewarm: {log}");
    baton.stop().await;
}

/// A passthrough turn (Codex on its own ChatGPT login) reaches the upstream with the same
/// headers and metadata over the WebSocket as over HTTP: the turn's own `x-codex-turn-metadata`
/// (not the prewarm's from the handshake), no `openai-beta: responses_websockets=…` on what is a
/// plain POST upstream, and its `client_metadata` less the WebSocket's own telemetry.
#[tokio::test]
async fn a_passthrough_turn_reaches_the_upstream_alike_over_websocket_and_http() {
    let dir = tempfile::tempdir().unwrap();
    let login = "chatgpt-login-token-ws-0001";
    let up = FakeUpstream::start("chatgpt").await;
    up.only_subscription(login);
    let baton = Baton::start(
        dir.path(),
        json!({"providers": [{"id": "chatgpt", "kind": "chatgpt",
            "baseUrl": up.base_url(), "credentials": "client", "models": ["*"]}],
            "modelMap": {"gpt-*": "auto"}}),
    )
    .await;
    let turn_meta = r#"{"turn_id":"t-42","request_kind":"turn"}"#;
    let prewarm_meta = r#"{"turn_id":"","request_kind":"prewarm"}"#;
    let input = json!([{"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "hi"}]}]);
    let metadata = json!({"turn_id": "t-42", "x-codex-turn-metadata": turn_meta,
        "thread_id": "th-1"});

    // Over HTTP, as Codex sends a turn.
    let r = baton
        .http
        .post(format!("{}/v1/responses", baton.url))
        .header("authorization", format!("Bearer {login}"))
        .header("x-baton-key", &baton.key)
        .header("chatgpt-account-id", "acct-1")
        .header("x-codex-turn-metadata", turn_meta)
        .header("x-openai-internal-codex-responses-lite", "true")
        .json(
            &json!({"model": "gpt-x", "stream": true, "store": false, "input": input,
            "client_metadata": metadata}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap();
    let over_http = up.received().pop().unwrap();

    // Over the WebSocket: the handshake carries the prewarm's metadata and the WebSocket beta.
    let url = format!("{}/v1/responses", baton.url.replacen("http://", "ws://", 1));
    let mut req = url.into_client_request().unwrap();
    let h = req.headers_mut();
    h.insert("authorization", format!("Bearer {login}").parse().unwrap());
    h.insert("x-baton-key", baton.key.parse().unwrap());
    h.insert("chatgpt-account-id", "acct-1".parse().unwrap());
    h.insert("x-codex-turn-metadata", prewarm_meta.parse().unwrap());
    h.insert(
        "openai-beta",
        "responses_websockets=2026-02-06".parse().unwrap(),
    );
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut ws_metadata = metadata.clone();
    ws_metadata["x-codex-ws-stream-request-start-ms"] = json!("1796521756198");
    ws_metadata["ws_request_header_x_openai_internal_codex_responses_lite"] = json!("true");
    ws_metadata["ws_request_header_x_baton_key"] = json!("bt-not-this-one");
    let events = turn(
        &mut ws,
        json!({"type": "response.create", "model": "gpt-x", "stream": true, "store": false,
            "input": input, "client_metadata": ws_metadata}),
    )
    .await;
    assert_eq!(
        events.last().unwrap()["type"],
        "response.completed",
        "{events:?}"
    );
    let over_ws = up.received().pop().unwrap();

    assert_eq!(
        over_ws.body, over_http.body,
        "the same body, its client_metadata included"
    );
    assert_eq!(over_ws.body["client_metadata"], metadata);
    for name in [
        "x-codex-turn-metadata",
        "authorization",
        "chatgpt-account-id",
        "openai-beta",
    ] {
        assert_eq!(
            over_ws.headers.get(name),
            over_http.headers.get(name),
            "{name} as over HTTP"
        );
    }
    assert_eq!(over_ws.headers["x-codex-turn-metadata"], turn_meta);
    assert!(!over_ws.headers.contains_key("x-baton-key"));
    baton.stop().await;
}
