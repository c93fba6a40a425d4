//! The fake upstream as Gemini's native API: `models/{model}:generateContent` and
//! `:streamGenerateContent?alt=sse`, same script, Gemini's shapes.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::contract::Api;
use crate::{sse, Behavior, InFlight, Received, Shared};

/// The fake as Gemini's `generateContent` / `streamGenerateContent`. Long because it is the
/// behaviour table again, each arm in Gemini's shapes.
pub(crate) async fn generate(
    State(s): State<Arc<Shared>>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = body.clone();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let unauthenticated = s.strict() && !headers.contains_key("x-goog-api-key");
    s.receive(Received {
        headers,
        body: json!({"path": rest, "body": body.clone()}),
        raw,
    });
    if unauthenticated {
        return (
            StatusCode::FORBIDDEN,
            axum::Json(json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}})),
        )
            .into_response();
    }
    if rest.ends_with(":countTokens") {
        return s
            .contract_count(&body)
            .unwrap_or_else(|| count_tokens(&body));
    }
    if let Some(r) = s.contract(Api::GeminiGenerateContent, &body) {
        return r;
    }
    let model = rest.split(':').next().unwrap_or_default().to_string();
    if let Some(message) =
        refuse_turns(&s.name, &model, &body).or_else(|| refuse_json_schemas(&body))
    {
        s.refusals.lock().unwrap().push(message.clone());
        return crate::refuse::gemini(&message, None);
    }
    let _guard = InFlight::new(s.clone());
    let stream = rest.ends_with(":streamGenerateContent");
    // Grounding with Google Search runs here, as on Google's servers (complete answers).
    if !stream {
        if let Some(q) = crate::search::native_query(&s, &body) {
            return axum::Json(json!({"candidates": [crate::search::gemini_candidate(&q)],
                "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18},
                "modelVersion": model, "responseId": "fake-search"}))
            .into_response();
        }
    }
    let behavior = crate::resolve_auto(s.next_behavior(), &body);
    // The user's words, past turns that only carry function responses.
    let last_user = body
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .rev()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["parts"].as_array())
        .find_map(|p| {
            p.iter()
                .rev()
                .find_map(|p| p.get("text").and_then(Value::as_str))
        })
        .unwrap_or("")
        .to_string();
    let usage = if s.cached() {
        json!({"promptTokenCount": 100, "cachedContentTokenCount": 80,
            "candidatesTokenCount": 7, "totalTokenCount": 107})
    } else {
        json!({"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18})
    };
    let n = s.hits.load(std::sync::atomic::Ordering::SeqCst);
    let mut finish = "STOP";
    let mut parts = match behavior {
        Behavior::Status {
            status,
            body,
            headers,
        } => return crate::status_response(status, body, headers),
        Behavior::ToolCall { name, arguments } => vec![(name, arguments)]
            .into_iter()
            .map(|(name, arguments)| {
                let mut call = json!({"functionCall": {"name": name,
                    "args": serde_json::from_str::<Value>(&arguments).unwrap_or(json!({}))}});
                // Gemini 3 signs its function calls, and wants the signature back.
                if signs(&model) {
                    call["thoughtSignature"] = json!(signature(&s.name, n));
                }
                call
            })
            .collect(),
        // Parallel calls: several functionCall parts; Gemini 3 signs only the first.
        Behavior::ToolCalls(calls) => calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| {
                let mut call = json!({"functionCall": {"name": name,
                    "args": serde_json::from_str::<Value>(&arguments).unwrap_or(json!({}))}});
                if i == 0 && signs(&model) {
                    call["thoughtSignature"] = json!(signature(&s.name, n));
                }
                call
            })
            .collect(),
        Behavior::Text(t) => vec![json!({"text": t})],
        _ => {
            let text =
                crate::schema_answer(&body).unwrap_or_else(|| format!("{}: {}", s.name, last_user));
            let (text, cut) = crate::model::within_limit(text, &body);
            finish = if cut { "MAX_TOKENS" } else { "STOP" };
            vec![json!({"text": text})]
        }
    };
    // Asked for its thoughts, a thinking Gemini begins with a thought summary.
    if body
        .pointer("/generationConfig/thinkingConfig/includeThoughts")
        .and_then(Value::as_bool)
        == Some(true)
    {
        parts.insert(
            0,
            json!({"text": format!("{} thinks.", s.name), "thought": true}),
        );
    }
    if !stream {
        return axum::Json(json!({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish}],
            "usageMetadata": usage, "modelVersion": model}))
        .into_response();
    }
    // One chunk per text word (or the whole call), the last with the finish reason and usage.
    let mut chunks = Vec::new();
    for p in &parts {
        match p.get("text").and_then(Value::as_str) {
            Some(t) => chunks.extend(t.split_inclusive(' ').map(|w| json!({"text": w}))),
            None => chunks.push(p.clone()),
        }
    }
    let n = chunks.len();
    // As the real API does, every chunk carries `usageMetadata`: the prompt's count from the
    // first, the answer's growing; the last has the whole.
    let frames: Vec<Bytes> = chunks
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let mut c = json!({"candidates": [{"content": {"role": "model", "parts": [part]}}],
                "modelVersion": model});
            let mut u = usage.clone();
            if i + 1 == n {
                c["candidates"][0]["finishReason"] = json!(finish);
            } else {
                u["candidatesTokenCount"] = json!(i + 1);
                u["totalTokenCount"] =
                    json!(u["promptTokenCount"].as_u64().unwrap_or(0) + i as u64 + 1);
            }
            c["usageMetadata"] = u;
            Bytes::from(format!("data: {c}\r\n\r\n"))
        })
        .collect();
    sse(Body::from_stream(futures_util::stream::iter(
        frames.into_iter().map(Ok::<Bytes, Infallible>),
    )))
}

/// `GET /v1beta/models`: Gemini's model list (`models/…` names). Strict, refused without
/// `x-goog-api-key`.
pub(crate) async fn models(State(s): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    s.lists.lock().unwrap().push(headers.clone());
    if s.strict() && !headers.contains_key("x-goog-api-key") {
        return (
            StatusCode::FORBIDDEN,
            axum::Json(json!({"error": {"code": 403, "status": "PERMISSION_DENIED",
                "message": "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}})),
        )
            .into_response();
    }
    axum::Json(
        json!({"models": [{"name": format!("models/{}-model", s.name),
        "displayName": s.name, "supportedGenerationMethods": ["generateContent"]}]}),
    )
    .into_response()
}

/// `models/{model}:countTokens`: this fake counts one token per word of every text part (in
/// `contents`, or in a `generateContentRequest`'s contents and system instruction).
fn count_tokens(body: &Value) -> Response {
    let inner = body.get("generateContentRequest").unwrap_or(body);
    let mut words = 0;
    let parts = inner
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(inner.get("systemInstruction"))
        .filter_map(|c| c.get("parts").and_then(Value::as_array))
        .flatten();
    for p in parts {
        words += p["text"].as_str().unwrap_or("").split_whitespace().count();
    }
    axum::Json(json!({"totalTokens": words})).into_response()
}

/// Gemini 3 models check thought signatures.
fn signs(model: &str) -> bool {
    model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .starts_with("gemini-3")
}

/// This fake's thought signature for its `n`th answer (base64-looking, with its name in it).
fn signature(name: &str, n: usize) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("CiQB{hex}x{n:X}Eg==")
}

/// The stand-ins Google documents for a signature that is not at hand.
const DUMMIES: [&str; 2] = [
    "skip_thought_signature_validator",
    "context_engineering_is_the_way_to_go",
];

/// What the real API refuses in a conversation's turns: a function call turn answered by a
/// different number of function responses, a response to a function that was not called, and
/// (Gemini 3) a function call of the current turn — since the last user text — whose first
/// call carries no signature, or one this fake did not make.
fn refuse_turns(name: &str, model: &str, body: &Value) -> Option<String> {
    let contents = body.get("contents").and_then(Value::as_array)?;
    let parts = |c: &Value| {
        c.get("parts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for (i, c) in contents.iter().enumerate() {
        let calls: Vec<Value> = parts(c)
            .into_iter()
            .filter(|p| p.get("functionCall").is_some())
            .collect();
        if c["role"] != "model" || calls.is_empty() {
            continue;
        }
        let Some(next) = contents.get(i + 1) else {
            continue;
        };
        let responses: Vec<Value> = parts(next)
            .into_iter()
            .filter(|p| p.get("functionResponse").is_some())
            .collect();
        if responses.len() != calls.len() {
            return Some("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".into());
        }
        for r in &responses {
            let n = &r["functionResponse"]["name"];
            if !calls.iter().any(|c| &c["functionCall"]["name"] == n) {
                return Some(format!(
                    "Please ensure that function response turn comes immediately after a function call turn. Function response `{}` answers no call.",
                    n.as_str().unwrap_or_default()
                ));
            }
        }
    }
    if !signs(model) {
        return None;
    }
    let start = contents
        .iter()
        .rposition(|c| c["role"] == "user" && parts(c).iter().any(|p| p.get("text").is_some()))
        .unwrap_or(0);
    let own = signature(name, 0);
    let own = &own[..own.find('x').unwrap_or(own.len())];
    for (i, c) in contents.iter().enumerate().skip(start) {
        if c["role"] != "model" {
            continue;
        }
        let ps = parts(c);
        let Some((j, first)) = ps
            .iter()
            .enumerate()
            .find(|(_, p)| p.get("functionCall").is_some())
        else {
            continue;
        };
        let sig = first.get("thoughtSignature").and_then(Value::as_str);
        let valid = sig.is_some_and(|s| s.starts_with(own) || DUMMIES.contains(&s));
        if !valid {
            let f = first["functionCall"]["name"].as_str().unwrap_or_default();
            return Some(match sig {
                None => format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{f}` , position {}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", i + 1),
                Some(_) => format!("Corrupted thought signature at contents[{i}].parts[{j}]."),
            });
        }
    }
    None
}

/// The JSON Schema keywords `parametersJsonSchema` and `responseJsonSchema` take, as Google's
/// API reference lists them (anything else is refused; a sub-schema with `$ref` may hold only
/// other `$` keywords).
const JSON_SCHEMA_KEYWORDS: [&str; 21] = [
    "$id",
    "$defs",
    "$ref",
    "$anchor",
    "type",
    "format",
    "title",
    "description",
    "enum",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "anyOf",
    "oneOf",
    "properties",
    "additionalProperties",
    "required",
    "propertyOrdering",
];

/// The first keyword of a function's or the answer's JSON Schema that Gemini does not take.
fn refuse_json_schemas(body: &Value) -> Option<String> {
    let tools = body.get("tools").and_then(Value::as_array);
    let decls = tools
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("functionDeclarations").and_then(Value::as_array))
        .flatten()
        .enumerate()
        .filter_map(|(i, d)| {
            d.get("parametersJsonSchema").map(|s| {
                (
                    format!("tools[0].function_declarations[{i}].parameters_json_schema"),
                    s,
                )
            })
        });
    let answer = body
        .pointer("/generationConfig/responseJsonSchema")
        .map(|s| ("generation_config.response_json_schema".to_string(), s));
    decls.chain(answer).find_map(|(at, s)| {
        unsupported_keyword(s, 0).map(|k| format!("Invalid value at '{at}': {k}"))
    })
}

fn unsupported_keyword(v: &Value, depth: usize) -> Option<String> {
    let Value::Object(s) = v else { return None };
    if depth > 64 {
        return None;
    }
    if s.contains_key("$ref") {
        if let Some(k) = s.keys().find(|k| !k.starts_with('$')) {
            return Some(format!(
                "'{k}' is set beside '$ref': if $ref is set on a sub-schema, no other properties, except for those starting as a $, may be set"
            ));
        }
    }
    for (k, sub) in s {
        if !JSON_SCHEMA_KEYWORDS.contains(&k.as_str()) {
            return Some(format!("the JSON Schema keyword '{k}' is not supported"));
        }
        let found = match k.as_str() {
            "properties" | "$defs" => sub
                .as_object()
                .and_then(|m| m.values().find_map(|p| unsupported_keyword(p, depth + 1))),
            "items" | "additionalProperties" => unsupported_keyword(sub, depth + 1),
            "anyOf" | "oneOf" | "prefixItems" => sub
                .as_array()
                .and_then(|l| l.iter().find_map(|p| unsupported_keyword(p, depth + 1))),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}
