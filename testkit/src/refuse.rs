//! A contract violation (`contract.rs`) as each vendor answers it: status, error shape and
//! wording as the real APIs write them (Anthropic's pydantic messages, OpenAI's
//! `unknown_parameter` family, Google's `INVALID_ARGUMENT` with field violations).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::contract::{self, Api, Problem, Seg, Violation};
use crate::Shared;

/// The value at a violation's path, as the API quotes it.
fn value_at<'a>(body: &'a Value, v: &Violation) -> Option<&'a Value> {
    let mut cur = body;
    for s in &v.path {
        cur = match s {
            Seg::Key(k) => cur.get(k)?,
            Seg::Index(i) => cur.get(i)?,
        };
    }
    Some(cur)
}

fn quoted(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// `'a', 'b' or 'c'`.
fn one_of(options: &[String]) -> String {
    let q: Vec<String> = options.iter().map(|o| format!("'{o}'")).collect();
    match q.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => q.join(""),
    }
}

fn anthropic_message(v: &Violation) -> String {
    let at = v.dotted();
    match &v.problem {
        Problem::Unknown => format!("{at}: Extra inputs are not permitted"),
        Problem::Missing => format!("{at}: Field required"),
        Problem::Type(t) => {
            let word = match *t {
                "array" => "list",
                "object" => "dictionary",
                "integer" => "integer",
                "number" => "number",
                "boolean" => "boolean",
                _ => "string",
            };
            format!("{at}: Input should be a valid {word}")
        }
        Problem::Value(options) => format!("{at}: Input should be {}", one_of(options)),
        Problem::Constraint(c) => format!("{at}: {c}"),
    }
}

/// A path as AWS's validation messages write it: `messages.1.member.content.1.member.text`
/// (lists counted from 1).
fn aws_path(v: &Violation) -> String {
    let mut out = String::new();
    for s in &v.path {
        if !out.is_empty() {
            out.push('.');
        }
        match s {
            Seg::Key(k) => out.push_str(k),
            Seg::Index(i) => out.push_str(&format!("{}.member", i + 1)),
        }
    }
    out
}

/// AWS's words for a body its service model refuses. A constraint or an enum is the service's
/// own "1 validation error detected" text; an unknown, missing or mistyped member is refused
/// as the AWS SDKs refuse it before sending (botocore's parameter validation): the fake is no
/// more lenient than the clients Baton stands beside.
fn aws_message(body: &Value, v: &Violation) -> String {
    let at = aws_path(v);
    let value = value_at(body, v).map_or_else(String::new, |x| match x {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    });
    match &v.problem {
        Problem::Constraint(c) => format!(
            "1 validation error detected: Value '{value}' at '{at}' failed to satisfy constraint: {c}"
        ),
        Problem::Value(options) => format!(
            "1 validation error detected: Value '{value}' at '{at}' failed to satisfy constraint: Member must satisfy enum value set: [{}]",
            options.join(", ")
        ),
        Problem::Unknown => format!(
            "Unknown parameter in {}: \"{}\"",
            match v.parent().bracketed(false) {
                p if p.is_empty() => "input".to_string(),
                p => p,
            },
            v.field()
        ),
        Problem::Missing => format!(
            "Missing required parameter in {}: \"{}\"",
            match v.parent().bracketed(false) {
                p if p.is_empty() => "input".to_string(),
                p => p,
            },
            v.field()
        ),
        Problem::Type(t) => format!(
            "Invalid type for parameter {}, value: {value}, valid types: {t}",
            v.bracketed(false)
        ),
    }
}

fn openai_message(body: &Value, v: &Violation) -> (String, &'static str) {
    let at = v.bracketed(false);
    match &v.problem {
        Problem::Unknown => (format!("Unknown parameter: '{at}'."), "unknown_parameter"),
        Problem::Missing => (
            format!("Missing required parameter: '{at}'."),
            "missing_required_parameter",
        ),
        Problem::Type(t) => {
            let got = value_at(body, v).map_or("null", |x| match x {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            });
            let article = if t.starts_with(['a', 'e', 'i', 'o', 'u']) {
                "an"
            } else {
                "a"
            };
            (
                format!("Invalid type for '{at}': expected {article} {t}, but got {got} instead."),
                "invalid_type",
            )
        }
        Problem::Value(options) => (
            format!(
                "Invalid value: '{}'. Supported values are: {}.",
                quoted(value_at(body, v)),
                options
                    .iter()
                    .map(|o| format!("'{o}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "invalid_value",
        ),
        Problem::Constraint(c) => (format!("Invalid '{at}': {c}."), "invalid_value"),
    }
}

fn gemini_message(body: &Value, v: &Violation) -> String {
    match &v.problem {
        Problem::Unknown => {
            let parent = v.parent().bracketed(true);
            if parent.is_empty() {
                format!(
                    "Invalid JSON payload received. Unknown name \"{}\": Cannot find field.",
                    v.field()
                )
            } else {
                format!(
                    "Invalid JSON payload received. Unknown name \"{}\" at '{parent}': Cannot find field.",
                    v.field()
                )
            }
        }
        Problem::Missing => format!("* GenerateContentRequest.{}: required", v.bracketed(true)),
        Problem::Type(t) => format!(
            "Invalid JSON payload received. Invalid value at '{}' ({}), {}",
            v.bracketed(true),
            match *t {
                "integer" => "TYPE_INT32",
                "number" => "TYPE_FLOAT",
                "boolean" => "TYPE_BOOL",
                "string" => "TYPE_STRING",
                _ => "type.googleapis.com/google.protobuf.Struct",
            },
            value_at(body, v).map_or_else(String::new, Value::to_string)
        ),
        Problem::Value(_) => format!(
            "Invalid JSON payload received. Invalid value at '{}' (TYPE_ENUM), {}",
            v.bracketed(true),
            value_at(body, v).map_or_else(String::new, Value::to_string)
        ),
        Problem::Constraint(c) => format!("{}: {c}", v.bracketed(true)),
    }
}

/// Anthropic's `400 invalid_request_error` with this message.
pub fn anthropic(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(
            json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": message}, "request_id": "req_fake_contract"}),
        ),
    )
        .into_response()
}

/// OpenAI's `400 invalid_request_error` with this message, parameter and code.
pub fn openai(message: &str, param: Option<&str>, code: Option<&str>) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(
            json!({"error": {"message": message, "type": "invalid_request_error",
            "param": param, "code": code}}),
        ),
    )
        .into_response()
}

/// Google's `400 INVALID_ARGUMENT` with this message (and the field it names).
pub fn gemini(message: &str, field: Option<&str>) -> Response {
    let details = match field {
        Some(f) => json!([{"@type": "type.googleapis.com/google.rpc.BadRequest",
            "fieldViolations": [{"field": f, "description": message}]}]),
        None => json!([]),
    };
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": {"code": 400, "message": message,
            "status": "INVALID_ARGUMENT", "details": details}})),
    )
        .into_response()
}

/// The vendor's answer to a body that breaks `api`'s contract, and its message.
pub fn violation(api: Api, body: &Value, v: &Violation) -> (String, Response) {
    match api {
        Api::AnthropicMessages | Api::AnthropicBetaMessages | Api::AnthropicCountTokens => {
            let msg = anthropic_message(v);
            let r = anthropic(&msg);
            (msg, r)
        }
        Api::OpenAiChat | Api::OpenAiResponses => {
            let (msg, code) = openai_message(body, v);
            let r = openai(&msg, Some(&v.bracketed(false)), Some(code));
            (msg, r)
        }
        Api::GeminiGenerateContent => {
            let field = match v.problem {
                Problem::Unknown => v.parent().bracketed(true),
                _ => v.bracketed(true),
            };
            let msg = gemini_message(body, v);
            let r = gemini(&msg, Some(&field));
            (msg, r)
        }
        Api::BedrockConverse | Api::BedrockConverseStream => {
            let msg = aws_message(body, v);
            let r = crate::bedrock::aws_error(StatusCode::BAD_REQUEST, "ValidationException", &msg);
            (msg, r)
        }
    }
}

impl Shared {
    /// The real API's answer when `body` breaks `api`'s contract; the refusal is kept for the
    /// contract check (and printed, for the `fake-upstream` binary's log).
    pub(crate) fn contract(&self, api: contract::Api, body: &Value) -> Option<Response> {
        if self.unchecked.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let v = contract::check(api, body).err()?;
        let (message, response) = violation(api, body, &v);
        eprintln!(
            "fake upstream {:?}: refused as the real API would: {message}",
            self.name
        );
        self.refusals.lock().unwrap().push(message);
        Some(response)
    }

    /// `countTokens` takes `contents` alone, or a whole `generateContentRequest` (with its
    /// `model`); either is checked as a `generateContent` body.
    pub(crate) fn contract_count(&self, body: &Value) -> Option<Response> {
        let api = contract::Api::GeminiGenerateContent;
        let Some(map) = body.as_object() else {
            return self.contract(api, body);
        };
        if let Some(k) = map
            .keys()
            .find(|k| !matches!(k.as_str(), "contents" | "generateContentRequest"))
        {
            let message =
                format!("Invalid JSON payload received. Unknown name \"{k}\": Cannot find field.");
            self.refusals.lock().unwrap().push(message.clone());
            return Some(gemini(&message, None));
        }
        match map.get("generateContentRequest") {
            Some(Value::Object(inner)) => {
                let mut inner = inner.clone();
                inner.remove("model");
                self.contract(api, &Value::Object(inner))
            }
            _ => self.contract(
                api,
                &json!({"contents": map.get("contents").cloned().unwrap_or(json!([]))}),
            ),
        }
    }
}
