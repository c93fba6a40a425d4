//! How the fake acts like a model: a tool call when one is due (`Behavior::Auto`), JSON when a
//! schema is asked for.

use serde_json::{json, Value};

use crate::Behavior;

/// The answer a model gives when the request asks for JSON to a schema, in any API's terms
/// (Chat Completions' `response_format`, the Responses API's `text.format`, the Messages API's
/// `output_config.format`, Gemini's `responseJsonSchema`): the smallest instance of the schema,
/// so structured-output clients get something to parse.
pub(crate) fn schema_answer(body: &Value) -> Option<String> {
    let schema = body
        .pointer("/response_format/json_schema/schema")
        .or_else(|| body.pointer("/text/format/schema"))
        .or_else(|| body.pointer("/output_config/format/schema"))
        .or_else(|| body.pointer("/output_format/schema"))
        .or_else(|| body.pointer("/generationConfig/responseJsonSchema"))?;
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

/// `Behavior::Auto` as a model would act on this request, in any API's shape: a call to the
/// first tool offered (with arguments its schema accepts) when the last turn is the user's own
/// words, else an answer. Other behaviours stay.
pub(crate) fn resolve_auto(b: Behavior, body: &Value) -> Behavior {
    if !matches!(b, Behavior::Auto) {
        return b;
    }
    let tool = body
        .pointer("/tools/0/function")
        .or_else(|| body.pointer("/tools/0/functionDeclarations/0"))
        .or_else(|| body.pointer("/tools/0"))
        .filter(|t| t.get("name").is_some());
    let Some(tool) = tool else {
        return Behavior::Ok;
    };
    if !last_turn_is_users_words(body) {
        return Behavior::Ok;
    }
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
    Behavior::ToolCall {
        name: tool["name"].as_str().unwrap_or_default().to_string(),
        arguments: args.to_string(),
    }
}

/// Whether the conversation's last turn is the user's own words (not a tool's result).
fn last_turn_is_users_words(body: &Value) -> bool {
    let result_kinds = [
        "tool_result",
        "function_call_output",
        "custom_tool_call_output",
    ];
    if let Some(m) = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
    {
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        return m["role"] == "user"
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
        Some(Value::Array(items)) => items.last().is_some_and(|i| {
            !result_kinds.contains(&i["type"].as_str().unwrap_or("")) && i["role"] == "user"
        }),
        _ => false,
    }
}
