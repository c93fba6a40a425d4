//! Request options every API names in its own way, typed once: which tools the model may call
//! (`ToolChoice`) and the shape its answer must take (`OutputFormat`). Each format's reader
//! fills them and each format's writer says them in its own terms, so no OpenAI-shaped value
//! travels to an upstream that would not understand it.

use serde_json::{json, Map, Value};

/// Which tools the model may or must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool call.
    None,
    /// Some tool call (OpenAI `required`, Anthropic `any`, Gemini `ANY`).
    Required,
    /// This tool.
    Tool(String),
}

/// The shape the answer must take.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputFormat {
    /// Any one JSON object.
    JsonObject,
    /// JSON valid against this schema.
    JsonSchema {
        name: String,
        schema: Value,
        strict: Option<bool>,
    },
}

impl ToolChoice {
    /// Chat Completions' `tool_choice`.
    pub fn from_openai(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Self::word(s),
            // One function, or one custom (freeform) tool.
            Value::Object(_) => v
                .pointer("/function/name")
                .or_else(|| v.pointer("/custom/name"))
                .and_then(Value::as_str)
                .map(|n| ToolChoice::Tool(n.to_string())),
            _ => None,
        }
    }

    /// The Responses API's `tool_choice` (`{"type": "function", "name": …}` for one tool).
    pub fn from_responses(v: &Value) -> Option<Self> {
        match v {
            Value::String(s) => Self::word(s),
            // One function, or one freeform tool (`custom`): a tool by name either way.
            Value::Object(o)
                if matches!(
                    o.get("type").and_then(Value::as_str),
                    Some("function" | "custom")
                ) =>
            {
                o.get("name")
                    .and_then(Value::as_str)
                    .map(|n| ToolChoice::Tool(n.to_string()))
            }
            _ => None,
        }
    }

    /// The Messages API's `tool_choice`.
    pub fn from_anthropic(v: &Value) -> Option<Self> {
        match v.get("type").and_then(Value::as_str)? {
            "auto" => Some(ToolChoice::Auto),
            "any" => Some(ToolChoice::Required),
            "none" => Some(ToolChoice::None),
            "tool" => v
                .get("name")
                .and_then(Value::as_str)
                .map(|n| ToolChoice::Tool(n.to_string())),
            _ => None,
        }
    }

    fn word(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(ToolChoice::Auto),
            "none" => Some(ToolChoice::None),
            "required" => Some(ToolChoice::Required),
            _ => None,
        }
    }

    pub fn to_openai(&self) -> Value {
        match self {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(n) => json!({"type": "function", "function": {"name": n}}),
        }
    }

    pub fn to_responses(&self) -> Value {
        match self {
            ToolChoice::Tool(n) => json!({"type": "function", "name": n}),
            other => other.to_openai(),
        }
    }

    pub fn to_anthropic(&self) -> Value {
        match self {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
            ToolChoice::Required => json!({"type": "any"}),
            ToolChoice::Tool(n) => json!({"type": "tool", "name": n}),
        }
    }

    /// Bedrock Converse's `toolChoice` (a union); `None` for no tool call, which Converse
    /// cannot say (the tools stay declared: a history with tool calls needs them).
    pub fn to_converse(&self) -> Option<Value> {
        Some(match self {
            ToolChoice::Auto => json!({"auto": {}}),
            ToolChoice::None => return None,
            ToolChoice::Required => json!({"any": {}}),
            ToolChoice::Tool(n) => json!({"tool": {"name": n}}),
        })
    }

    /// Gemini's `toolConfig`.
    pub fn to_gemini(&self) -> Value {
        let config = match self {
            ToolChoice::Auto => json!({"mode": "AUTO"}),
            ToolChoice::None => json!({"mode": "NONE"}),
            ToolChoice::Required => json!({"mode": "ANY"}),
            ToolChoice::Tool(n) => json!({"mode": "ANY", "allowedFunctionNames": [n]}),
        };
        json!({ "functionCallingConfig": config })
    }
}

impl OutputFormat {
    /// Chat Completions' `response_format` (`text` asks for nothing).
    pub fn from_openai(v: &Value) -> Option<Self> {
        match v.get("type").and_then(Value::as_str)? {
            "json_object" => Some(OutputFormat::JsonObject),
            "json_schema" => {
                let s = v.get("json_schema")?;
                Some(OutputFormat::JsonSchema {
                    name: super::json::str_at(s, "name"),
                    schema: s.get("schema").cloned().unwrap_or_else(|| json!({})),
                    strict: s.get("strict").and_then(Value::as_bool),
                })
            }
            _ => None,
        }
    }

    /// The Responses API's `text.format` (the schema's fields beside `type`).
    pub fn from_responses(v: &Value) -> Option<Self> {
        match v.get("type").and_then(Value::as_str)? {
            "json_object" => Some(OutputFormat::JsonObject),
            "json_schema" => Some(OutputFormat::JsonSchema {
                name: super::json::str_at(v, "name"),
                schema: v.get("schema").cloned().unwrap_or_else(|| json!({})),
                strict: v.get("strict").and_then(Value::as_bool),
            }),
            _ => None,
        }
    }

    /// The Messages API's `output_config.format`, or the `output_format` of the structured
    /// outputs beta.
    pub fn from_anthropic(body: &Map<String, Value>) -> Option<Self> {
        let f = body
            .get("output_config")
            .and_then(|c| c.get("format"))
            .filter(|f| !f.is_null())
            .or_else(|| body.get("output_format"))?;
        match f.get("type").and_then(Value::as_str)? {
            "json_schema" => Some(OutputFormat::JsonSchema {
                name: "output".into(),
                schema: f.get("schema").cloned().unwrap_or_else(|| json!({})),
                strict: Some(true),
            }),
            _ => None,
        }
    }

    /// A schema name as OpenAI accepts it (`^[a-zA-Z0-9_-]{1,64}$`).
    fn openai_name(&self) -> String {
        let name = match self {
            OutputFormat::JsonSchema { name, .. } => name.as_str(),
            OutputFormat::JsonObject => "",
        };
        let clean: String = name
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .take(64)
            .collect();
        if clean.is_empty() {
            "output".into()
        } else {
            clean
        }
    }

    pub fn to_openai(&self) -> Value {
        match self {
            OutputFormat::JsonObject => json!({"type": "json_object"}),
            OutputFormat::JsonSchema { schema, strict, .. } => {
                let mut s = json!({"name": self.openai_name(), "schema": schema});
                if let Some(strict) = strict {
                    s["strict"] = json!(strict);
                }
                json!({"type": "json_schema", "json_schema": s})
            }
        }
    }

    /// The Responses API's `text.format`.
    pub fn to_responses(&self) -> Value {
        match self {
            OutputFormat::JsonObject => json!({"type": "json_object"}),
            OutputFormat::JsonSchema { schema, strict, .. } => {
                let mut f = json!({"type": "json_schema", "name": self.openai_name(),
                    "schema": schema});
                if let Some(strict) = strict {
                    f["strict"] = json!(strict);
                }
                f
            }
        }
    }

    /// The Messages API's `output_config.format`; `None` for a bare JSON object, which it has
    /// no format for (the request says so in words instead).
    pub fn to_anthropic(&self) -> Option<Value> {
        match self {
            OutputFormat::JsonObject => None,
            OutputFormat::JsonSchema { schema, .. } => {
                Some(json!({"type": "json_schema", "schema": schema}))
            }
        }
    }

    /// Bedrock Converse's `outputConfig.textFormat`: a schema, as JSON text (`None` for any JSON
    /// object, which Converse has no setting for).
    pub fn to_converse(&self) -> Option<Value> {
        match self {
            OutputFormat::JsonObject => None,
            OutputFormat::JsonSchema { name, schema, .. } => {
                let mut def = json!({"schema": schema.to_string()});
                if !name.is_empty() {
                    def["name"] = json!(name);
                }
                Some(json!({"type": "json_schema", "structure": {"jsonSchema": def}}))
            }
        }
    }

    /// Gemini's `generationConfig` fields: JSON, to the schema when there is one (full JSON
    /// Schema goes in `responseJsonSchema`; `responseSchema` takes only the OpenAPI subset).
    pub fn to_gemini(&self, config: &mut Map<String, Value>) {
        config.insert("responseMimeType".into(), json!("application/json"));
        if let OutputFormat::JsonSchema { schema, .. } = self {
            config.insert(
                "responseJsonSchema".into(),
                super::gemini::schema::for_gemini(schema),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_choice_reads_and_writes_every_format() {
        let one = ToolChoice::Tool("get".into());
        assert_eq!(ToolChoice::from_openai(&one.to_openai()), Some(one.clone()));
        assert_eq!(
            ToolChoice::from_responses(&one.to_responses()),
            Some(one.clone())
        );
        assert_eq!(
            ToolChoice::from_anthropic(&one.to_anthropic()),
            Some(one.clone())
        );
        assert_eq!(
            one.to_gemini(),
            json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get"]}})
        );
        for c in [ToolChoice::Auto, ToolChoice::None, ToolChoice::Required] {
            assert_eq!(ToolChoice::from_openai(&c.to_openai()), Some(c.clone()));
            assert_eq!(
                ToolChoice::from_anthropic(&c.to_anthropic()),
                Some(c.clone())
            );
        }
        assert_eq!(
            ToolChoice::None.to_gemini()["functionCallingConfig"]["mode"],
            "NONE"
        );
    }

    #[test]
    fn output_format_reads_and_writes_every_format() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let mut body = Map::new();
        body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
        let f = OutputFormat::from_anthropic(&body).unwrap();
        assert_eq!(
            f.to_anthropic(),
            Some(json!({"type": "json_schema", "schema": schema}))
        );
        assert_eq!(f.to_openai()["json_schema"]["schema"], schema);
        assert_eq!(OutputFormat::from_openai(&f.to_openai()), Some(f.clone()));
        assert_eq!(
            OutputFormat::from_responses(&f.to_responses()),
            Some(f.clone())
        );
        let mut cfg = Map::new();
        f.to_gemini(&mut cfg);
        assert_eq!(cfg["responseJsonSchema"], schema);
        let named = OutputFormat::JsonSchema {
            name: "my schema!".into(),
            schema: json!({}),
            strict: None,
        };
        assert_eq!(named.to_openai()["json_schema"]["name"], "myschema");
    }
}
