//! A Gemini `GenerateContentRequest` read into the canonical request: what every upstream kind
//! can be asked. The body itself also travels on untouched to `gemini` upstreams, so nothing
//! here has to survive a round trip (thought signatures, safety settings, cached content).
//!
//! Read as Google's JSON parser reads it: field names in lowerCamelCase or in the proto's
//! snake_case (Google's own REST examples use `system_instruction`), an unknown field refused
//! with Google's wording, every value checked for its type.

use serde_json::{json, Map, Value};

use super::fields::{
    array, camel, field, object, snake, text_of, unknown_fields, CONTENT_FIELDS,
    GENERATION_CONFIG_FIELDS, PART_FIELDS, REQUEST_FIELDS,
};
use crate::canonical::{
    invalid, kind_of, ChatRequest, InvalidRequest, Message, OutputFormat, Part, Role, Tool,
    ToolChoice,
};

/// The request: `model` comes from the path (`models/{model}:generateContent`), `stream` from
/// the method.
pub fn request_from_gemini(
    body: &Map<String, Value>,
    model: &str,
    stream: bool,
) -> Result<ChatRequest, InvalidRequest> {
    unknown_fields(body, REQUEST_FIELDS, "")?;
    let mut req = ChatRequest {
        model: model.to_string(),
        stream,
        // Gemini reports usage on every stream; its clients expect it.
        stream_usage: stream,
        ..ChatRequest::default()
    };
    if let Some(sys) = field(body, "systemInstruction") {
        let sys = object(sys, "system_instruction")?;
        for (i, p) in parts(sys, "system_instruction")?.iter().enumerate() {
            let at = format!("system_instruction.parts[{i}]");
            if let Some(t) = field(object(p, &at)?, "text") {
                let t = text_of(t, &format!("{at}.text"))?;
                if !t.is_empty() {
                    req.system.push(t.to_string());
                }
            }
        }
    }
    let contents = match field(body, "contents") {
        Some(c) => array(c, "contents")?,
        None => {
            return Err(invalid(
                "contents",
                "* GenerateContentRequest.contents: contents is not specified",
            ))
        }
    };
    if contents.is_empty() {
        return Err(invalid(
            "contents",
            "* GenerateContentRequest.contents: contents is not specified",
        ));
    }
    let mut calls = Calls::default();
    for (i, c) in contents.iter().enumerate() {
        read_content(
            object(c, &format!("contents[{i}]"))?,
            i,
            &mut calls,
            &mut req,
        )?;
    }
    if let Some(tools) = field(body, "tools") {
        for (i, t) in array(tools, "tools")?.iter().enumerate() {
            read_tool(object(t, &format!("tools[{i}]"))?, i, &mut req)?;
        }
    }
    if let Some(tc) = field(body, "toolConfig") {
        req.tool_choice = tool_choice(object(tc, "tool_config")?)?;
    }
    if let Some(cfg) = field(body, "generationConfig") {
        read_config(object(cfg, "generation_config")?, &mut req)?;
    }
    Ok(req)
}

fn parts<'a>(content: &'a Map<String, Value>, at: &str) -> Result<&'a [Value], InvalidRequest> {
    match field(content, "parts") {
        Some(p) => Ok(array(p, &format!("{at}.parts"))?.as_slice()),
        None => Ok(&[]),
    }
}

/// The function calls of the conversation so far, so each response pairs with its call: by
/// the call's `id` when the client kept it, else the oldest unanswered call of that name.
#[derive(Default)]
struct Calls {
    open: Vec<(String, String)>,
    made: usize,
}

impl Calls {
    fn call(&mut self, id: Option<&str>, name: &str) -> String {
        self.made += 1;
        let id = match id.filter(|s| !s.is_empty()) {
            Some(id) => id.to_string(),
            // The same id for the same call on every turn: the prompt prefix stays cacheable.
            None => format!("call_{}_{name}", self.made)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect(),
        };
        self.open.push((id.clone(), name.to_string()));
        id
    }

    fn answer(&mut self, id: Option<&str>, name: &str) -> String {
        let at = match id.filter(|s| !s.is_empty()) {
            Some(id) => self.open.iter().position(|(i, _)| i == id),
            None => self.open.iter().position(|(_, n)| n == name),
        };
        match (at, id) {
            (Some(at), _) => self.open.remove(at).0,
            (None, Some(id)) if !id.is_empty() => id.to_string(),
            // A response to a call not in this conversation: paired with a call Baton adds.
            _ => format!("call_orphan_{}", self.made),
        }
    }
}

/// Long because it is one walk over a turn's parts with an arm per part kind (text, thought,
/// inline and file data, function call, function response, and the kinds with no canonical
/// form), splitting a user turn's function responses from its text as the canonical model keeps
/// tool results in their own messages.
fn read_content(
    c: &Map<String, Value>,
    i: usize,
    calls: &mut Calls,
    req: &mut ChatRequest,
) -> Result<(), InvalidRequest> {
    let at = format!("contents[{i}]");
    unknown_fields(c, CONTENT_FIELDS, &at)?;
    let role = match field(c, "role")
        .map(|r| text_of(r, &format!("{at}.role")))
        .transpose()?
    {
        None | Some("") | Some("user") => Role::User,
        Some("model") => Role::Assistant,
        Some(other) => {
            return Err(invalid(
                format!("{at}.role"),
                format!("Please use a valid role: user, model. Got \"{other}\"."),
            ))
        }
    };
    let mut content = Vec::new();
    let mut results = Vec::new();
    for (j, p) in parts(c, &at)?.iter().enumerate() {
        let pat = format!("{at}.parts[{j}]");
        let p = object(p, &pat)?;
        unknown_fields(p, PART_FIELDS, &pat)?;
        if let Some(t) = field(p, "text") {
            let t = text_of(t, &format!("{pat}.text"))?;
            let thought = field(p, "thought").and_then(Value::as_bool) == Some(true);
            // A thought is the answering model's own; it is not sent on to another.
            if !thought && !t.is_empty() {
                content.push(Part::Text(t.to_string()));
            }
        } else if let Some(d) = field(p, "inlineData") {
            let d = object(d, &format!("{pat}.inline_data"))?;
            let mime = field(d, "mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream");
            let data = field(d, "data").and_then(Value::as_str).ok_or_else(|| {
                invalid(
                    format!("{pat}.inline_data.data"),
                    "inline_data needs base64 `data`",
                )
            })?;
            content.push(Part::Image {
                url: format!("data:{mime};base64,{data}"),
                detail: None,
            });
        } else if let Some(d) = field(p, "fileData") {
            let d = object(d, &format!("{pat}.file_data"))?;
            let uri = field(d, "fileUri").and_then(Value::as_str).ok_or_else(|| {
                invalid(
                    format!("{pat}.file_data.file_uri"),
                    "file_data needs `fileUri`",
                )
            })?;
            content.push(Part::Image {
                url: uri.to_string(),
                detail: None,
            });
        } else if let Some(fc) = field(p, "functionCall") {
            let fc = object(fc, &format!("{pat}.function_call"))?;
            let name = function_name(fc, &format!("{pat}.function_call"))?;
            let id = calls.call(field(fc, "id").and_then(Value::as_str), name);
            let args = field(fc, "args").cloned().unwrap_or_else(|| json!({}));
            content.push(Part::ToolCall {
                id,
                name: name.to_string(),
                arguments: args.to_string(),
            });
        } else if let Some(fr) = field(p, "functionResponse") {
            let fr = object(fr, &format!("{pat}.function_response"))?;
            let name = function_name(fr, &format!("{pat}.function_response"))?;
            let call_id = calls.answer(field(fr, "id").and_then(Value::as_str), name);
            results.push(Part::ToolResult {
                call_id,
                content: response_text(field(fr, "response")),
            });
        } else if field(p, "executableCode").is_some() || field(p, "codeExecutionResult").is_some()
        {
            // Gemini's own code execution: its record stays with Gemini upstreams.
            continue;
        } else if field(p, "thoughtSignature").is_some() {
            // A signature alone (on an empty part): Gemini's, for Gemini upstreams.
            continue;
        } else {
            return Err(invalid(
                pat,
                "A part must have one of text, inlineData, fileData, functionCall or functionResponse.",
            ));
        }
    }
    if !results.is_empty() {
        req.messages.push(Message {
            role: Role::Tool,
            content: results,
            name: None,
        });
    }
    if !content.is_empty() {
        req.messages.push(Message {
            role,
            content,
            name: None,
        });
    }
    Ok(())
}

fn function_name<'a>(f: &'a Map<String, Value>, at: &str) -> Result<&'a str, InvalidRequest> {
    match field(f, "name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => Ok(n),
        _ => Err(invalid(
            format!("{at}.name"),
            format!("* {at}.name: Name cannot be empty."),
        )),
    }
}

/// A function's response as the tool result's text: the text itself when the object only
/// wraps one (`{"output": "…"}`, as Gemini CLI sends, or `{"content": "…"}`), else its JSON.
fn response_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::Object(o)) if o.len() == 1 => match o.iter().next() {
            Some((k, Value::String(s))) if k == "output" || k == "content" || k == "result" => {
                s.clone()
            }
            _ => Value::Object(o.clone()).to_string(),
        },
        Some(v) => v.to_string(),
    }
}

fn read_tool(
    t: &Map<String, Value>,
    i: usize,
    req: &mut ChatRequest,
) -> Result<(), InvalidRequest> {
    // Grounding with Google Search: passed through to Gemini upstreams, run by Baton elsewhere.
    if field(t, "googleSearch").is_some() || field(t, "googleSearchRetrieval").is_some() {
        req.web_search = Some(crate::canonical::search::WebSearch::default());
    }
    let Some(decls) = field(t, "functionDeclarations") else {
        // codeExecution, urlContext…: Gemini's own tools, run by Gemini; they reach Gemini
        // upstreams in the client's body, and no other kind has them.
        return Ok(());
    };
    for (j, d) in array(decls, &format!("tools[{i}].function_declarations"))?
        .iter()
        .enumerate()
    {
        let at = format!("tools[{i}].function_declarations[{j}]");
        let d = object(d, &at)?;
        let name = function_name(d, &at)?;
        let parameters = match (field(d, "parametersJsonSchema"), field(d, "parameters")) {
            (Some(s), _) => s.clone(),
            (None, Some(s)) => json_schema(s),
            (None, None) => json!({"type": "object", "properties": {}}),
        };
        req.tools.push(Tool {
            name: name.to_string(),
            description: field(d, "description")
                .and_then(Value::as_str)
                .map(str::to_string),
            parameters,
            freeform: None,
        });
    }
    Ok(())
}

/// Gemini's OpenAPI-subset `Schema` as JSON Schema: type names in lower case, `nullable` as a
/// `null` type, Gemini-only keys (`propertyOrdering`) left out.
pub fn json_schema(s: &Value) -> Value {
    match s {
        Value::Object(o) => {
            let mut out = Map::new();
            let nullable = o.get("nullable").and_then(Value::as_bool) == Some(true);
            for (k, v) in o {
                let key = camel(k);
                match key.as_str() {
                    "nullable" | "propertyOrdering" => {}
                    "type" => {
                        let t = v.as_str().unwrap_or("object").to_ascii_lowercase();
                        out.insert(
                            "type".into(),
                            if nullable {
                                json!([t, "null"])
                            } else {
                                json!(t)
                            },
                        );
                    }
                    "properties" => {
                        let props = v.as_object().map(|p| {
                            p.iter()
                                .map(|(n, s)| (n.clone(), json_schema(s)))
                                .collect::<Map<_, _>>()
                        });
                        out.insert(key, props.map_or_else(|| v.clone(), Value::Object));
                    }
                    "items" => {
                        out.insert(key, json_schema(v));
                    }
                    "anyOf" => {
                        out.insert(
                            key,
                            v.as_array().map_or_else(
                                || v.clone(),
                                |a| Value::Array(a.iter().map(json_schema).collect()),
                            ),
                        );
                    }
                    "minItems" | "maxItems" | "minLength" | "maxLength" | "minProperties"
                    | "maxProperties" => {
                        // int64 fields arrive as strings in proto JSON.
                        let n = v
                            .as_u64()
                            .or_else(|| v.as_str().and_then(|s| s.parse().ok()));
                        out.insert(key, n.map_or_else(|| v.clone(), |n| json!(n)));
                    }
                    _ => {
                        out.insert(key, v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn tool_choice(tc: &Map<String, Value>) -> Result<Option<ToolChoice>, InvalidRequest> {
    let Some(fcc) = field(tc, "functionCallingConfig") else {
        return Ok(None);
    };
    let fcc = object(fcc, "tool_config.function_calling_config")?;
    let names: Vec<&str> = field(fcc, "allowedFunctionNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Ok(match field(fcc, "mode").and_then(Value::as_str) {
        None | Some("MODE_UNSPECIFIED") | Some("AUTO") | Some("VALIDATED") => Some(ToolChoice::Auto),
        Some("NONE") => Some(ToolChoice::None),
        Some("ANY") if names.len() == 1 => Some(ToolChoice::Tool(names[0].to_string())),
        Some("ANY") => Some(ToolChoice::Required),
        Some(other) => {
            return Err(invalid(
                "tool_config.function_calling_config.mode",
                format!("Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), \"{other}\""),
            ))
        }
    })
}

fn number(cfg: &Map<String, Value>, name: &str) -> Result<Option<f64>, InvalidRequest> {
    match field(cfg, name) {
        None => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or_else(|| {
            invalid(
                format!("generation_config.{}", snake(name)),
                format!(
                    "Invalid value at 'generation_config.{}' (TYPE_FLOAT), {}",
                    snake(name),
                    kind_of(v)
                ),
            )
        }),
    }
}

fn whole(cfg: &Map<String, Value>, name: &str) -> Result<Option<u64>, InvalidRequest> {
    match field(cfg, name) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .map(Some)
            .ok_or_else(|| {
                invalid(
                    format!("generation_config.{}", snake(name)),
                    format!(
                        "Invalid value at 'generation_config.{}' (TYPE_INT32), {}",
                        snake(name),
                        kind_of(v)
                    ),
                )
            }),
    }
}

fn read_config(cfg: &Map<String, Value>, req: &mut ChatRequest) -> Result<(), InvalidRequest> {
    unknown_fields(cfg, GENERATION_CONFIG_FIELDS, "generation_config")?;
    req.max_tokens = whole(cfg, "maxOutputTokens")?;
    req.temperature = number(cfg, "temperature")?;
    req.top_p = number(cfg, "topP")?;
    if let Some(stop) = field(cfg, "stopSequences") {
        for (i, s) in array(stop, "generation_config.stop_sequences")?
            .iter()
            .enumerate()
        {
            req.stop
                .push(text_of(s, &format!("generation_config.stop_sequences[{i}]"))?.to_string());
        }
    }
    let mime = field(cfg, "responseMimeType").and_then(Value::as_str);
    let schema = field(cfg, "responseJsonSchema")
        .cloned()
        .or_else(|| field(cfg, "responseSchema").map(json_schema));
    req.output = match (mime, schema) {
        (_, Some(schema)) => Some(OutputFormat::JsonSchema {
            name: "response".into(),
            schema,
            strict: None,
        }),
        (Some("application/json"), None) => Some(OutputFormat::JsonObject),
        _ => None,
    };
    if let Some(t) = field(cfg, "thinkingConfig") {
        req.effort = effort(object(t, "generation_config.thinking_config")?);
    }
    Ok(())
}

/// `thinkingConfig` as an effort level: `thinkingLevel` (Gemini 3) as it is named, a
/// `thinkingBudget` in the same steps as Anthropic's budgets; 0 is none, -1 (dynamic) says
/// nothing.
fn effort(t: &Map<String, Value>) -> Option<String> {
    if let Some(level) = field(t, "thinkingLevel").and_then(Value::as_str) {
        let l = level.to_ascii_lowercase();
        return crate::canonical::effort::LEVELS
            .contains(&l.as_str())
            .then_some(l);
    }
    let budget = field(t, "thinkingBudget")?.as_i64()?;
    Some(
        match budget {
            i64::MIN..=-1 => return None,
            0 => "none",
            1..=2048 => "low",
            2049..=8192 => "medium",
            _ => "high",
        }
        .to_string(),
    )
}
