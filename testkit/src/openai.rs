//! The OpenAI-format answers the fake sends: complete, streamed, cut off, stalled, paced, or
//! thinking before it answers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::{Abandon, InFlight, Shared};

/// Headers at once, a reasoning delta every 100 ms for `ms`, then `text` and the finish.
pub(crate) fn thinking_stream(
    s: Arc<Shared>,
    guard: InFlight,
    model: String,
    ms: u64,
    text: String,
) -> Response {
    let abandon = Abandon {
        shared: s,
        done: false,
    };
    let steps = (ms / 100).max(1) as usize;
    let mut events: Vec<(u64, Bytes)> = vec![(
        0,
        chunk(
            &model,
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        ),
    )];
    for i in 0..steps {
        events.push((
            100,
            chunk(
                &model,
                json!({"reasoning_content": format!("step {i}. ")}),
                Value::Null,
            ),
        ));
    }
    for w in text.split_inclusive(' ') {
        events.push((0, chunk(&model, json!({"content": w}), Value::Null)));
    }
    events.push((0, chunk(&model, json!({}), json!("stop"))));
    events.push((0, Bytes::from_static(b"data: [DONE]\n\n")));
    let body = futures_util::stream::unfold(
        (events.into_iter(), Some(guard), abandon),
        |(mut it, guard, mut abandon)| async move {
            match it.next() {
                Some((wait, b)) => {
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                    Some((Ok::<Bytes, Infallible>(b), (it, guard, abandon)))
                }
                None => {
                    abandon.done = true;
                    drop(abandon);
                    None
                }
            }
        },
    );
    sse(Body::from_stream(body))
}

pub(crate) enum Reply {
    Text(String),
    /// An answer stopped at the request's output limit (`finish_reason: "length"`).
    Cut(String),
    /// Tool calls (name, JSON arguments), one or several in the same turn.
    Tools(Vec<(String, String)>),
}

#[derive(Clone, Copy)]
pub(crate) enum Cut {
    Die(usize),
    Stall(usize),
    Malformed(usize),
    NoDone,
}

pub(crate) fn chunk(model: &str, delta: Value, finish: Value) -> Bytes {
    // Each fake's chunks carry their own id (per model), as separate upstreams would.
    let c = json!({"id": format!("chatcmpl-{model}"), "object": "chat.completion.chunk", "created": 1,
        "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Bytes::from(format!("data: {c}\n\n"))
}

/// The whole answer, non-streamed.
fn complete(model: &str, reply: &Reply, usage_v: Value) -> Response {
    let (message, finish) = match &reply {
        Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
        Reply::Cut(t) => (json!({"role": "assistant", "content": t}), "length"),
        Reply::Tools(calls) => (
            json!({"role": "assistant", "content": null, "tool_calls": calls.iter().enumerate().map(|(i, (name, args))|
                json!({"id": format!("call_fake{}", i + 1), "type": "function",
                "function": {"name": name, "arguments": args}})).collect::<Vec<_>>()}),
            "tool_calls",
        ),
    };
    axum::Json(
        json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1,
        "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_v}),
    )
    .into_response()
}

/// The stream's chunks up to (not including) the finish, and the finish reason.
fn content_chunks(model: &str, reply: &Reply) -> (Vec<Bytes>, &'static str) {
    let mut events = vec![chunk(
        model,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let finish = match reply {
        Reply::Text(t) | Reply::Cut(t) => {
            for w in t.split_inclusive(' ') {
                events.push(chunk(model, json!({"content": w}), Value::Null));
            }
            if matches!(reply, Reply::Cut(_)) {
                "length"
            } else {
                "stop"
            }
        }
        Reply::Tools(calls) => {
            for (i, (name, args)) in calls.iter().enumerate() {
                events.push(chunk(
                    model,
                    json!({"tool_calls": [{"index": i, "id": format!("call_fake{}", i + 1), "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                    Value::Null,
                ));
                let mid = args.len() / 2;
                for part in [&args[..mid], &args[mid..]] {
                    events.push(chunk(
                        model,
                        json!({"tool_calls": [{"index": i, "function": {"arguments": part}}]}),
                        Value::Null,
                    ));
                }
            }
            "tool_calls"
        }
    };
    (events, finish)
}

/// The usage an answer reports, and whether a stream ends with it (`include_usage`).
pub(crate) struct Usage {
    pub in_stream: bool,
    pub value: Value,
}

impl Usage {
    /// The same, never sent at the end of a stream.
    pub fn quiet(self) -> Self {
        Self {
            in_stream: false,
            ..self
        }
    }
}

pub(crate) async fn answer(
    s: &Arc<Shared>,
    guard: InFlight,
    stream: bool,
    usage: Usage,
    model: &str,
    reply: Reply,
    cut: Option<Cut>,
) -> Response {
    let Usage {
        in_stream: usage,
        value: usage_v,
    } = usage;
    if !stream {
        drop(guard);
        return complete(model, &reply, usage_v);
    }
    let (mut events, finish) = content_chunks(model, &reply);
    let mut tail = vec![chunk(model, json!({}), json!(finish))];
    if usage {
        let u = json!({"id": format!("chatcmpl-{model}"), "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": [], "usage": usage_v});
        tail.push(Bytes::from(format!("data: {u}\n\n")));
    }
    let stall = match cut {
        Some(Cut::Die(n)) => {
            events.truncate(n + 1);
            false
        }
        Some(Cut::Stall(n)) => {
            events.truncate(n + 1);
            true
        }
        Some(Cut::Malformed(n)) => {
            events.insert(
                (n + 1).min(events.len()),
                Bytes::from_static(b"data: {\"choices\": [{\"delta\": {\"content\n\n"),
            );
            events.extend(tail);
            events.push(Bytes::from_static(b"data: [DONE]\n\n"));
            false
        }
        Some(Cut::NoDone) => {
            events.extend(tail);
            false
        }
        None => {
            events.extend(tail);
            events.push(Bytes::from_static(b"data: [DONE]\n\n"));
            false
        }
    };
    let abandon = Abandon {
        shared: s.clone(),
        done: false,
    };
    let body = futures_util::stream::unfold(
        (events.into_iter(), Some(guard), abandon, stall),
        |(mut it, guard, mut abandon, stall)| async move {
            match it.next() {
                Some(b) => Some((Ok::<Bytes, Infallible>(b), (it, guard, abandon, stall))),
                None => {
                    if stall {
                        std::future::pending::<()>().await;
                    }
                    abandon.done = true;
                    drop(abandon);
                    drop(guard);
                    None
                }
            }
        },
    );
    sse(Body::from_stream(body))
}

pub(crate) fn slow_stream(
    s: Arc<Shared>,
    guard: InFlight,
    model: String,
    words: Vec<String>,
    delay_ms: u64,
) -> Response {
    let abandon = Abandon {
        shared: s,
        done: false,
    };
    let mut events = vec![chunk(
        &model,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    events.extend(
        words
            .iter()
            .map(|w| chunk(&model, json!({"content": w}), Value::Null)),
    );
    events.push(chunk(&model, json!({}), json!("stop")));
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let body = futures_util::stream::unfold(
        (events.into_iter(), Some(guard), abandon, 0usize),
        move |(mut it, guard, mut abandon, i)| async move {
            if i > 0 && delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            }
            match it.next() {
                Some(b) => Some((Ok::<Bytes, Infallible>(b), (it, guard, abandon, i + 1))),
                None => {
                    abandon.done = true;
                    drop(abandon);
                    None
                }
            }
        },
    );
    sse(Body::from_stream(body))
}

pub(crate) fn sse(body: Body) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert("content-type", "text/event-stream".parse().unwrap());
    resp
}

impl crate::FakeUpstream {
    /// From now on the fake stands for Mistral's API, which refuses a conversation whose tool
    /// call ids are not exactly nine letters and digits.
    pub fn mistral_tool_ids(&self) {
        self.shared
            .nine_alphanumeric_ids
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What this fake's API refuses in a conversation, answered in its words: the real API's tool
/// turn rules, and, when it stands for Mistral, an id outside Mistral's rule.
pub(crate) fn refuse_conversation(
    s: &crate::Shared,
    body: &Value,
) -> Option<axum::response::Response> {
    let mistral = s
        .nine_alphanumeric_ids
        .load(std::sync::atomic::Ordering::SeqCst);
    let (message, param) =
        refuse_tool_turns(body).or_else(|| mistral.then(|| refuse_mistral_ids(body)).flatten())?;
    s.refusals.lock().unwrap().push(message.clone());
    Some(crate::refuse::openai(&message, Some(&param), None))
}

/// Mistral's refusal of a tool call id that is not nine letters and digits, in its words.
pub(crate) fn refuse_mistral_ids(body: &Value) -> Option<(String, String)> {
    let messages = body.get("messages")?.as_array()?;
    messages.iter().enumerate().find_map(|(i, m)| {
        let calls = m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        calls
            .filter_map(|c| c.get("id").and_then(Value::as_str))
            .chain(m.get("tool_call_id").and_then(Value::as_str))
            .find(|id| id.len() != 9 || !id.bytes().all(|b| b.is_ascii_alphanumeric()))
            .map(|id| {
                (
                    format!("Tool call id was {id} but must be a-z, A-Z, 0-9, with a length of 9."),
                    format!("messages[{i}]"),
                )
            })
    })
}

/// What the real API refuses in a conversation's tool turns, with the parameter it names: an
/// assistant message whose `tool_calls` are not each answered by a following tool message, and
/// a tool message that answers no call.
pub(crate) fn refuse_tool_turns(body: &Value) -> Option<(String, String)> {
    let messages = body.get("messages").and_then(Value::as_array)?;
    let mut open: Vec<String> = Vec::new();
    let mut asked_at = 0;
    for (i, m) in messages.iter().enumerate() {
        match m["role"].as_str() {
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                match open.iter().position(|c| c == id) {
                    Some(p) => {
                        open.remove(p);
                    }
                    None => {
                        return Some((
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".into(),
                            format!("messages.[{i}].role"),
                        ))
                    }
                }
            }
            _ if !open.is_empty() => break,
            Some("assistant") => {
                open = m["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["id"].as_str().map(str::to_string))
                    .collect();
                asked_at = i;
            }
            _ => {}
        }
    }
    let last_is_call = messages.last().is_some_and(|m| m["role"] == "assistant");
    (!open.is_empty() && !last_is_call).then(|| {
        (
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.join(", ")
            ),
            format!("messages.[{asked_at}].role"),
        )
    })
}

/// What `Behavior::Auto` does with a chat request: the parallel tool calls a prompt asks for,
/// else a call of the first tool offered when the last turn is the user's, else text.
pub(crate) fn auto_behavior(body: &Value) -> crate::Behavior {
    use crate::Behavior;
    match crate::model::resolve_auto(Behavior::Auto, body) {
        parallel @ Behavior::ToolCalls(_) => parallel,
        _ => {
            let first_tool = body
                .pointer("/tools/0/function/name")
                .and_then(Value::as_str)
                .map(str::to_string);
            let last_role = body
                .get("messages")
                .and_then(Value::as_array)
                .and_then(|m| m.last())
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("");
            // A search tool is called with the user's words as its query.
            let searched = || match crate::model::resolve_auto(Behavior::Auto, body) {
                Behavior::ToolCall { arguments, .. }
                    if body
                        .pointer("/tools/0/function/parameters/properties/query")
                        .is_some() =>
                {
                    Some(arguments)
                }
                _ => None,
            };
            match first_tool {
                Some(name) if last_role == "user" => Behavior::ToolCall {
                    name,
                    arguments: searched().unwrap_or_else(|| "{\"city\": \"Paris\"}".into()),
                },
                _ => Behavior::Ok,
            }
        }
    }
}

/// `GET /v1/models`, in the shape of the API the caller's authentication belongs to: Anthropic's
/// for `x-api-key`, OpenAI's otherwise. Strict, each API's own refusal without its headers.
pub(crate) async fn models(
    axum::extract::State(s): axum::extract::State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    s.lists.lock().unwrap().push(headers.clone());
    if uri.query().is_some_and(|q| q.contains("client_version=")) {
        return crate::responses::codex_models(&s, &headers);
    }
    let id = format!("{}-model", s.name);
    if headers.contains_key("x-api-key") {
        if s.strict() && !headers.contains_key("anthropic-version") {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                axum::Json(
                    json!({"type": "error", "error": {"type": "invalid_request_error",
                    "message": "anthropic-version: header is required"}}),
                ),
            )
                .into_response();
        }
        return axum::Json(json!({"data": [{"type": "model", "id": id, "display_name": id,
            "created_at": "2026-01-01T00:00:00Z"}], "has_more": false, "first_id": id, "last_id": id}))
        .into_response();
    }
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "));
    if s.strict() && !bearer {
        return (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"error": {"message": "You didn't provide an API key.",
                "type": "invalid_request_error", "param": null, "code": null}}),
            ),
        )
            .into_response();
    }
    axum::Json(json!({"object": "list", "data": [{"id": id, "object": "model"}]})).into_response()
}
