//! How the fake acts like a model: a tool call when one is due (`Behavior::Auto`), JSON when a
//! schema is asked for.

use serde_json::{json, Value};

use crate::Behavior;

/// The answer a model gives when the request asks for JSON to a schema, in any API's terms
/// (Chat Completions' `response_format`, the Responses API's `text.format`, the Messages API's
/// `output_config.format`, Gemini's `responseJsonSchema`): the smallest instance of the schema,
/// so structured-output clients get something to parse.
pub(crate) fn schema_answer(body: &Value) -> Option<String> {
    // JSON mode without a schema (`json_object`, Gemini's JSON mime type): a JSON object.
    let json_mode = body.pointer("/response_format/type") == Some(&Value::from("json_object"))
        || body.pointer("/text/format/type") == Some(&Value::from("json_object"))
        || body.pointer("/generationConfig/responseMimeType")
            == Some(&Value::from("application/json"));
    let Some(schema) = body
        .pointer("/response_format/json_schema/schema")
        .or_else(|| body.pointer("/text/format/schema"))
        .or_else(|| body.pointer("/output_config/format/schema"))
        .or_else(|| body.pointer("/output_format/schema"))
        .or_else(|| body.pointer("/generationConfig/responseJsonSchema"))
    else {
        return json_mode.then(|| "{}".into());
    };
    Some(instance_of(schema, schema, 0).to_string())
}

/// The smallest value a JSON Schema accepts (its required properties, each at its type).
fn instance_of(schema: &Value, root: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .unwrap_or(&Value::Null);
        return instance_of(target, root, depth + 1);
    }
    if let Some(v) = schema.get("const") {
        return v.clone();
    }
    if let Some(v) = schema.get("enum").and_then(|e| e.get(0)) {
        return v.clone();
    }
    if let Some(first) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(|a| a.get(0))
    {
        return instance_of(first, root, depth + 1);
    }
    let kind = match schema.get("type") {
        Some(Value::Array(types)) => types.iter().find(|t| *t != "null").cloned(),
        other => other.cloned(),
    };
    match kind.as_ref().and_then(Value::as_str) {
        Some("string") => json!("x"),
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("null") => Value::Null,
        Some("array") => json!([]),
        _ => {
            let mut out = serde_json::Map::new();
            let props = schema.get("properties").and_then(Value::as_object);
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let p = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_string(), instance_of(p, root, depth + 1));
            }
            Value::Object(out)
        }
    }
}

/// The most output tokens the request allows, in any API's terms.
fn output_limit(body: &Value) -> Option<usize> {
    [
        "/max_tokens",
        "/max_completion_tokens",
        "/max_output_tokens",
        "/generationConfig/maxOutputTokens",
    ]
    .iter()
    .find_map(|p| body.pointer(p).and_then(Value::as_u64))
    .map(|n| n as usize)
}

/// The answer as a model gives it within the request's output limit (a word a token): cut
/// there, and whether it was, so the fake reports the API's own "stopped at the limit".
pub(crate) fn within_limit(text: String, body: &Value) -> (String, bool) {
    match output_limit(body) {
        Some(n) if text.split_whitespace().count() > n => (
            text.split_inclusive(' ')
                .take(n.max(1))
                .collect::<String>()
                .trim_end()
                .to_string(),
            true,
        ),
        _ => (text, false),
    }
}

/// The tools a request offers, in any API's shape (each has a `name`).
fn offered_tools(body: &Value) -> Vec<&Value> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .flat_map(|t| {
            if let Some(f) = t.get("function").filter(|f| f.get("name").is_some()) {
                vec![f]
            } else if let Some(d) = t.get("functionDeclarations").and_then(Value::as_array) {
                d.iter().collect()
            } else if t.get("name").is_some() {
                vec![t]
            } else {
                Vec::new()
            }
        })
        .collect()
}

/// Arguments a tool's schema accepts (a city for the weather tools the tests declare; for a
/// search tool, the user's words as the query).
fn arguments_for(tool: &Value, body: &Value) -> String {
    let schema = tool
        .get("parameters")
        .or_else(|| tool.get("input_schema"))
        .or_else(|| tool.get("parametersJsonSchema"))
        .cloned()
        .unwrap_or(json!({}));
    let mut args = instance_of(&schema, &schema, 0);
    if schema.pointer("/properties/city").is_some()
        || args.as_object().is_some_and(|m| m.is_empty())
    {
        args["city"] = json!("Paris");
    }
    if schema.pointer("/properties/query/type") == Some(&json!("string")) {
        args["query"] = json!(last_words(body));
    }
    args.to_string()
}

/// `Behavior::Auto` as a model would act on this request, in any API's shape: a call to the
/// first tool offered (with arguments its schema accepts) when the last turn is the user's own
/// words, else an answer. Other behaviours stay.
pub(crate) fn resolve_auto(b: Behavior, body: &Value) -> Behavior {
    if !matches!(b, Behavior::Auto) {
        return b;
    }
    let tools = offered_tools(body);
    let Some(tool) = tools.first() else {
        return Behavior::Ok;
    };
    if !last_turn_is_users_words(body) {
        return Behavior::Ok;
    }
    // Asked to do two things at once with two tools offered: both calls in one turn, as
    // models do (parallel tool calls).
    if tools.len() >= 2 && last_turn(body).is_some_and(|t| t.to_string().contains("in parallel")) {
        return Behavior::ToolCalls(
            tools[..2]
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap_or_default().to_string(),
                        arguments_for(t, body),
                    )
                })
                .collect(),
        );
    }
    Behavior::ToolCall {
        name: tool["name"].as_str().unwrap_or_default().to_string(),
        arguments: arguments_for(tool, body),
    }
}

/// The conversation's last turn, in any API's shape.
fn last_turn(body: &Value) -> Option<&Value> {
    ["messages", "contents", "input"]
        .iter()
        .find_map(|k| body.get(*k))
        .and_then(|v| match v {
            Value::Array(a) => a.last(),
            other => Some(other),
        })
}

/// Whether a user message's text is a tool's result written out as text (as Baton closes a
/// tool exchange to keep thinking on): a model reads it as the tool's result, not the user's
/// words, and goes on with the task.
pub(crate) fn told_tool_result(t: &str) -> bool {
    t.starts_with("(The `") && (t.contains("` tool returned") || t.contains("` tool failed"))
}

/// Whether the conversation's last turn is the user's own words (not a tool's result). Words
/// that come right after a tool's result belong to that turn: Claude Code puts reminders beside
/// its tool results, which a Chat or Responses request carries as a user message after the
/// `tool` message or output item, and a model goes on with the task there.
fn last_turn_is_users_words(body: &Value) -> bool {
    let result_kinds = [
        "tool_result",
        "function_call_output",
        "custom_tool_call_output",
    ];
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        let Some(m) = messages.last() else {
            return false;
        };
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        let after_tool = messages
            .iter()
            .rev()
            .find(|m| m["role"] != "user")
            .is_some_and(|m| m["role"] == "tool");
        let told_result = blocks
            .iter()
            .any(|b| b["text"].as_str().is_some_and(told_tool_result));
        return m["role"] == "user"
            && !after_tool
            && !told_result
            && !blocks
                .iter()
                .any(|b| result_kinds.contains(&b["type"].as_str().unwrap_or("")));
    }
    if let Some(c) = body
        .get("contents")
        .and_then(Value::as_array)
        .and_then(|c| c.last())
    {
        let parts = c["parts"].as_array().cloned().unwrap_or_default();
        return c["role"] == "user" && !parts.iter().any(|p| p.get("functionResponse").is_some());
    }
    match body.get("input") {
        Some(Value::String(_)) => true,
        Some(Value::Array(items)) => {
            let after_tool = items
                .iter()
                .rev()
                .find(|i| i["role"] != "user")
                .is_some_and(|i| result_kinds.contains(&i["type"].as_str().unwrap_or("")));
            !after_tool
                && items.last().is_some_and(|i| {
                    !result_kinds.contains(&i["type"].as_str().unwrap_or("")) && i["role"] == "user"
                })
        }
        _ => false,
    }
}

/// The text of the conversation's last turn (the user's words when `last_turn_is_users_words`),
/// in any API's shape.
fn last_words(body: &Value) -> String {
    fn text(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Array(parts) => parts
                .iter()
                .rev()
                .find_map(|p| p.get("text").and_then(Value::as_str).map(str::to_string)),
            _ => None,
        }
    }
    let Some(turn) = last_turn(body) else {
        return String::new();
    };
    turn.get("content")
        .or_else(|| turn.get("parts"))
        .and_then(text)
        .or_else(|| text(turn))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The user's words when the conversation's last turn is them (not a tool's result).
pub(crate) fn last_user_words(body: &Value) -> Option<String> {
    last_turn_is_users_words(body).then(|| last_words(body))
}
