//! The fake as an OpenAI Responses API (`POST /v1/responses`): same script, the Responses
//! `response` object and its streamed event sequence. Strict, it wants a Bearer token.

use std::convert::Infallible;

use futures_util::StreamExt;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::{sse, Behavior, InFlight, Received, Shared};

/// The text of the last user message in `input` (a string or message items).
fn last_user(body: &Value) -> String {
    match body.get("input") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .rev()
            .find(|i| i["role"] == "user")
            .map(|i| match &i["content"] {
                Value::String(t) => t.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .rev()
                    .find_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// The type (`function`, `custom`) the request declares the tool `name` with: in `tools` or,
/// as current Codex does, in an `additional_tools` input item (possibly inside a namespace).
fn declared_type<'a>(body: &'a Value, name: &str) -> Option<&'a str> {
    let additional = body
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|i| i["type"] == "additional_tools")
        .filter_map(|i| i.get("tools").and_then(Value::as_array));
    let lists = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .chain(additional);
    lists.flatten().find_map(|t| {
        let inner = t.get("tools").and_then(Value::as_array);
        let mut all = std::iter::once(t).chain(inner.into_iter().flatten());
        all.find(|t| t["type"] != "namespace" && t["name"] == name)
            .and_then(|t| t["type"].as_str())
    })
}

fn is_freeform(body: &Value, name: &str) -> bool {
    declared_type(body, name) == Some("custom")
}

/// A call in the conversation of another type than its tool's: a `function_call` (JSON
/// arguments) to a tool declared `custom` (raw text), or a `custom_tool_call` to a function.
/// The model never makes one (it answers a freeform tool with `custom_tool_call`, as this fake
/// does), and Codex, given one, runs nothing: it prints "tool exec invoked with incompatible
/// payload" and sends the call back with "aborted" as its output. Refused here so that a
/// gateway that declared a client's freeform tool as a function fails its test at once.
fn refuse_mismatched_calls(body: &Value) -> Option<String> {
    let items = body.get("input").and_then(Value::as_array)?;
    items.iter().find_map(|i| {
        let (want, kind) = match i["type"].as_str()? {
            "function_call" => ("function", "function_call"),
            "custom_tool_call" => ("custom", "custom_tool_call"),
            _ => return None,
        };
        let name = i["name"].as_str()?;
        let declared = declared_type(body, name)?;
        (declared != want).then(|| {
            format!(
                "Invalid value for 'input': a {kind} to '{name}', a tool declared with type \
                 '{declared}'; tool {name} invoked with incompatible payload."
            )
        })
    })
}

/// The output item for a tool call: `custom_tool_call` when the request's tool is freeform. Its
/// ids are the fake's own for this request (`hit`) and call (`n`), 24 hex digits as the API's are
/// random: the API never repeats one, nor makes one that extends another (Claude Code 2.1.332
/// takes `call_x_1` after `call_x` for a piece of the same call).
fn call_item(body: &Value, name: &str, arguments: &str, hit: usize, n: usize) -> Value {
    let n = format!("{hit:012x}{n:012x}");
    if is_freeform(body, name) {
        let input = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| v.get("input").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| arguments.to_string());
        json!({"type": "custom_tool_call", "id": format!("ctc_fake{n}"), "call_id": format!("call_fake{n}"),
            "name": name, "input": input, "status": "completed"})
    } else {
        json!({"type": "function_call", "id": format!("fc_fake{n}"), "call_id": format!("call_fake{n}"),
            "name": name, "arguments": arguments, "status": "completed"})
    }
}

/// The Codex backend's `GET /models?client_version=…`: one model, `gpt-<name>-codex`, with the
/// metadata that makes Codex offer its classic tools (a shell function and the freeform
/// `apply_patch`). With `only_subscription`, only for that login.
pub(crate) fn codex_models(s: &Shared, headers: &HeaderMap) -> Response {
    let subscription = s.subscription.lock().unwrap().clone();
    let authorization = headers.get("authorization").and_then(|v| v.to_str().ok());
    if let Some(token) = subscription {
        if authorization != Some(&format!("Bearer {token}")) {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(
                    json!({"error": {"message": "Your authentication token is not valid",
                    "code": "token_invalid"}}),
                ),
            )
                .into_response();
        }
    }
    let slug = format!("gpt-{}-codex", s.name);
    axum::Json(json!({"models": [{
        "slug": slug, "display_name": slug, "description": "A fake Codex model.",
        "default_reasoning_level": "low",
        "supported_reasoning_levels": [{"effort": "low", "description": "Fast"}],
        "shell_type": "shell_command", "visibility": "hide", "supported_in_api": true,
        "priority": 1, "upgrade": null, "base_instructions": "You are a fake coding agent.",
        "supports_reasoning_summaries": false, "support_verbosity": false,
        "default_verbosity": null, "apply_patch_tool_type": "freeform",
        "truncation_policy": {"mode": "tokens", "limit": 10000},
        "supports_parallel_tool_calls": false, "context_window": 200000,
        "experimental_supported_tools": [], "input_modalities": ["text"]}]}))
    .into_response()
}

pub(crate) async fn create(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = body.clone();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let bearer = authorization
        .as_deref()
        .is_some_and(|v| v.starts_with("Bearer "));
    s.receive(Received {
        headers,
        body: body.clone(),
        raw,
    });
    let subscription = s.subscription.lock().unwrap().clone();
    if let Some(token) = subscription {
        if authorization.as_deref() != Some(&format!("Bearer {token}")) {
            return (
                StatusCode::UNAUTHORIZED,
                axum::Json(
                    json!({"error": {"message": "Your authentication token is not valid",
                    "type": "invalid_request_error", "param": null, "code": "token_invalid"}}),
                ),
            )
                .into_response();
        }
    }
    if s.strict() && !bearer {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"error": {"message": "Missing bearer authentication in header",
                "type": "invalid_request_error", "param": null, "code": null}}),
            ),
        )
            .into_response();
    }
    if let Some(r) = refuse_body(&s, &body).or_else(|| refuse_calls(&s, &body)) {
        return r;
    }
    let _guard = InFlight::new(s.clone());
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let model = body["model"].as_str().unwrap_or("fake").to_string();
    let text =
        crate::schema_answer(&body).unwrap_or_else(|| format!("{}: {}", s.name, last_user(&body)));
    // The hosted web search runs here, as on OpenAI's servers (complete answers).
    if !stream {
        if let Some(q) = crate::search::native_query(&s, &body) {
            let cached = s.cached();
            return axum::Json(response_json(
                &model,
                "completed",
                json!(crate::search::responses_output(&q)),
                cached,
            ))
            .into_response();
        }
    }
    let hit = s.hits.load(std::sync::atomic::Ordering::SeqCst);
    let (items, cut, done, linger) = match answer(&s, &body, text, hit) {
        Ok(o) => o,
        Err(r) => return r,
    };
    let cached = s.cached();
    let response = |status: &str, output: Value| response_json(&model, status, output, cached);
    if !stream {
        return axum::Json(response(done, json!(items))).into_response();
    }
    streamed(stream_frames(&items, &response, cut, done), linger)
}

/// The output items for a behaviour, where a stream is cut, and the final status (stopped at
/// `max_output_tokens`, the response ends "incomplete"); an error status as it is.
#[allow(clippy::type_complexity, clippy::result_large_err)]
fn output(
    behavior: Behavior,
    body: &Value,
    text: String,
    hit: usize,
) -> Result<(Vec<Value>, Option<usize>, &'static str), Response> {
    Ok(match behavior {
        Behavior::Status {
            status,
            body,
            headers,
        } => return Err(crate::status_response(status, body, headers)),
        Behavior::ToolCall { name, arguments } => (
            vec![call_item(body, &name, &arguments, hit, 1)],
            None,
            "completed",
        ),
        Behavior::ToolCalls(calls) => (
            calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| call_item(body, name, arguments, hit, i + 1))
                .collect(),
            None,
            "completed",
        ),
        Behavior::Text(t) => (vec![message(&t)], None, "completed"),
        Behavior::StreamDies(n) => (vec![message(&text)], Some(n), "completed"),
        _ => {
            let (text, cut) = crate::model::within_limit(text, body);
            let done = if cut { "incomplete" } else { "completed" };
            (vec![message(&text)], None, done)
        }
    })
}

fn response_json(model: &str, status: &str, output: Value, cached: bool) -> Value {
    let (input, read) = if cached { (100, 80) } else { (11, 3) };
    let incomplete = (status == "incomplete").then(|| json!({"reason": "max_output_tokens"}));
    json!({"id": "resp_fake", "object": "response", "created_at": 1, "model": model,
        "status": status, "incomplete_details": incomplete, "output": output,
        "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": read},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input + 7}})
}

/// The streamed events for the output items; with `cut`, the stream stops after that many
/// text deltas (a connection that dies mid-answer). `done` is the final status (`completed`,
/// or `incomplete` at the output limit).
fn stream_frames(
    items: &[Value],
    response: &dyn Fn(&str, Value) -> Value,
    cut: Option<usize>,
    done: &str,
) -> Vec<Bytes> {
    let mut seq = 0;
    let mut frames = Vec::new();
    let mut frame = |data: Value| {
        let mut data = data;
        data["sequence_number"] = json!(seq);
        seq += 1;
        let kind = data["type"].as_str().unwrap_or_default().to_string();
        frames.push(Bytes::from(format!("event: {kind}\ndata: {data}\n\n")));
    };
    frame(json!({"type": "response.created", "response": response("in_progress", json!([]))}));
    for (at, item) in items.iter().enumerate() {
        if !item_frames(item, at, cut, &mut frame) {
            return frames;
        }
    }
    let last = if done == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    frame(json!({"type": last, "response": response(done, json!(items))}));
    frames
}

/// One output item's events at `output_index` `at`; false when the stream is cut inside it.
fn item_frames(item: &Value, at: usize, cut: Option<usize>, frame: &mut dyn FnMut(Value)) -> bool {
    let mut started = item.clone();
    started["status"] = json!("in_progress");
    if item["type"] == "message" {
        started["content"] = json!([]);
    }
    frame(json!({"type": "response.output_item.added", "output_index": at, "item": started}));
    let id = item["id"].clone();
    match item["type"].as_str() {
        Some("message") => {
            let t = item["content"][0]["text"].as_str().unwrap_or_default();
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            frame(json!({"type": "response.content_part.added", "item_id": id,
                "output_index": at, "content_index": 0, "part": part}));
            for (n, w) in t.split_inclusive(' ').enumerate() {
                if cut == Some(n) {
                    return false;
                }
                frame(json!({"type": "response.output_text.delta", "item_id": id,
                    "output_index": at, "content_index": 0, "delta": w}));
            }
            frame(json!({"type": "response.output_text.done", "item_id": id,
                "output_index": at, "content_index": 0, "text": t}));
            frame(json!({"type": "response.content_part.done", "item_id": id,
                "output_index": at, "content_index": 0, "part": item["content"][0]}));
        }
        Some("function_call") => {
            let args = item["arguments"].as_str().unwrap_or_default();
            let mid = args.len() / 2;
            for part in [&args[..mid], &args[mid..]] {
                frame(
                    json!({"type": "response.function_call_arguments.delta", "item_id": id,
                    "output_index": at, "delta": part}),
                );
            }
            frame(
                json!({"type": "response.function_call_arguments.done", "item_id": id,
                "output_index": at, "arguments": args}),
            );
        }
        _ => {
            frame(
                json!({"type": "response.custom_tool_call_input.delta", "item_id": id,
                "output_index": at, "delta": item["input"]}),
            );
            frame(
                json!({"type": "response.custom_tool_call_input.done", "item_id": id,
                "output_index": at, "input": item["input"]}),
            );
        }
    }
    frame(json!({"type": "response.output_item.done", "output_index": at, "item": item}));
    true
}

fn message(text: &str) -> Value {
    json!({"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A conversation whose calls the API (or Codex) would not take, refused in OpenAI's shape.
fn refuse_calls(s: &Shared, body: &Value) -> Option<Response> {
    let message = refuse_unanswered_calls(body).or_else(|| refuse_mismatched_calls(body))?;
    s.refusals.lock().unwrap().push(message.clone());
    Some(crate::refuse::openai(&message, Some("input"), None))
}

/// What the real API refuses in an `input` (without `previous_response_id`): a function call
/// with no output for it.
fn refuse_unanswered_calls(body: &Value) -> Option<String> {
    if body
        .get("previous_response_id")
        .is_some_and(|p| !p.is_null())
    {
        return None;
    }
    let items = body.get("input").and_then(Value::as_array)?;
    let outputs: Vec<&str> = items
        .iter()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .filter_map(|i| i["call_id"].as_str())
        .collect();
    items
        .iter()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call" | "custom_tool_call")
            )
        })
        .filter_map(|i| i["call_id"].as_str())
        .find(|c| !outputs.contains(c))
        .map(|c| format!("No tool output found for function call {c}."))
}

/// The first top-level field the ChatGPT backend does not take: the public API's, and the two
/// of Codex's own request type.
fn chatgpt_top_level(body: &Value) -> Option<String> {
    let schema: Value =
        serde_json::from_str(include_str!("../contract/openai-responses.json")).ok()?;
    let public = schema
        .pointer("/$defs/response_create_params.ResponseCreateParamsStreaming/properties")?
        .as_object()?;
    body.as_object()?
        .keys()
        .find(|k| !public.contains_key(*k) && !matches!(k.as_str(), "client_metadata" | "generate"))
        .cloned()
}

/// The real API's refusal of a body it does not take. Standing for the ChatGPT backend Codex's
/// login reaches (`only_subscription`), the fake checks the top level only: that backend is not
/// published, and Codex sends it shapes the public API refuses (ids on its own input messages,
/// `additional_tools` items, and the `client_metadata` and `generate` fields of its 0.171
/// request type).
fn refuse_body(s: &Shared, body: &Value) -> Option<Response> {
    if s.subscription.lock().unwrap().is_none() {
        return s.contract(crate::contract::Api::OpenAiResponses, body);
    }
    chatgpt_top_level(body).map(|k| {
        let message = format!("Unknown parameter: '{k}'.");
        s.refusals.lock().unwrap().push(message.clone());
        crate::refuse::openai(&message, Some(&k), Some("unknown_parameter"))
    })
}

/// These frames as an event stream; `linger`: the connection then stays open.
fn streamed(frames: Vec<Bytes>, linger: bool) -> Response {
    let body = futures_util::stream::iter(frames.into_iter().map(Ok::<Bytes, Infallible>));
    if linger {
        return sse(Body::from_stream(
            body.chain(futures_util::stream::pending()),
        ));
    }
    sse(Body::from_stream(body))
}

/// The output items of an answer, where the stream cuts, its final status, and whether the
/// connection stays open after `response.completed` (the client has all it needs). Asked to
/// compact (the last input item is the trigger), the API answers one `compaction` item, its
/// content sealed for this server only; the script is not consumed then.
#[allow(clippy::type_complexity, clippy::result_large_err)]
fn answer(
    s: &Shared,
    body: &Value,
    text: String,
    hit: usize,
) -> Result<(Vec<Value>, Option<usize>, &'static str, bool), Response> {
    if let Some(r) = refuse_compactions(&s.name, body) {
        return Err(r);
    }
    if let Some(item) = compaction(&s.name, body, hit) {
        return Ok((vec![item], None, "completed", false));
    }
    let behavior = crate::resolve_auto(s.next_behavior(), body);
    let linger = matches!(behavior, Behavior::StreamNoDone);
    let (items, cut, done) = output(behavior, body, text, hit)?;
    Ok((items, cut, done, linger))
}

/// The `compaction` item the API answers a `compaction_trigger` with.
fn compaction(name: &str, body: &Value, hit: usize) -> Option<Value> {
    let last = body.get("input")?.as_array()?.last()?;
    (last.get("type")? == "compaction_trigger").then(|| {
        json!({"type": "compaction", "id": format!("cmp_fake_{hit}"),
            "encrypted_content": format!("{name}-sealed-{hit}")})
    })
}

/// A `compaction` item this server did not make: its content cannot be decrypted here.
fn refuse_compactions(name: &str, body: &Value) -> Option<Response> {
    let items = body.get("input")?.as_array()?;
    let (i, _) = items.iter().enumerate().find(|(_, it)| {
        it.get("type").and_then(Value::as_str) == Some("compaction")
            && !it
                .get("encrypted_content")
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with(&format!("{name}-sealed-")))
    })?;
    Some(
        (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {
                "message": format!("The encrypted content for item input[{i}] could not be verified."),
                "type": "invalid_request_error", "param": format!("input[{i}].encrypted_content"),
                "code": "invalid_encrypted_content"}})),
        )
            .into_response(),
    )
}
