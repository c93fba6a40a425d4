//! JSON Schema as Gemini's `parametersJsonSchema` and `responseJsonSchema` take it. Google's
//! API reference lists what those fields support (`$id`, `$defs`, `$ref`, `$anchor`, `type`,
//! `format`, `title`, `description`, `enum` of strings and numbers, `items`, `prefixItems`,
//! `minItems`, `maxItems`, `minimum`, `maximum`, `anyOf`, `oneOf`, `properties`,
//! `additionalProperties`, `required`, `propertyOrdering`) and that a sub-schema with `$ref`
//! may carry nothing else but `$` keywords; the API refuses the rest one keyword at a time.
//! The schemas clients write (MCP servers, Codex, Claude Code, Pydantic) carry many more, so a
//! translated schema is rewritten where a supported form says the same (`const` → a one-value
//! `enum`, a list of types → `anyOf`, `allOf` merged), and a constraint with no such form is
//! dropped with its meaning kept in the description the model reads (a pattern, a length,
//! unique items, the values' descriptions); pure annotations (`$schema`, `$comment`,
//! `examples`, `default`, `defer_loading`…) are dropped.

use serde_json::{json, Map, Value};

/// The keywords Gemini's JSON Schema fields take.
pub const SUPPORTED: [&str; 21] = [
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

/// Deep enough for any schema a person writes; deeper parts are left as `{}` (any value).
const MAX_DEPTH: usize = 64;

/// `schema` in the keywords Gemini takes.
pub fn for_gemini(schema: &Value) -> Value {
    fit(schema, 0)
}

fn fit(schema: &Value, depth: usize) -> Value {
    let Value::Object(s) = schema else {
        // `true` / `false` schemas: anything, or (rarely meant) nothing.
        return json!({});
    };
    if depth > MAX_DEPTH {
        return json!({});
    }
    if s.contains_key("$ref") {
        return referenced(s, depth);
    }
    let mut out = Map::new();
    let mut notes: Vec<String> = Vec::new();
    for (k, v) in s {
        keyword(&mut out, &mut notes, k, v, depth);
    }
    if !notes.is_empty() {
        let mut d = out
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !d.is_empty() {
            d.push_str(if d.ends_with('.') { " " } else { ". " });
        }
        d.push_str(&format!("({})", notes.join("; ")));
        out.insert("description".into(), json!(d));
    }
    Value::Object(out)
}

/// A sub-schema with `$ref`: only its `$` keywords may stand beside it.
fn referenced(s: &Map<String, Value>, depth: usize) -> Value {
    let mut out = Map::new();
    for (k, v) in s.iter().filter(|(k, _)| k.starts_with('$')) {
        if k == "$defs" {
            out.insert(k.clone(), defs(v, depth));
        } else if SUPPORTED.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// One keyword of a schema into `out`: kept, rewritten, or its meaning noted.
fn keyword(
    out: &mut Map<String, Value>,
    notes: &mut Vec<String>,
    k: &str,
    v: &Value,
    depth: usize,
) {
    let sub = |p: &Value| fit(p, depth + 1);
    let list = |v: &Value| Value::Array(v.as_array().into_iter().flatten().map(sub).collect());
    match k {
        "properties" => {
            if let Value::Object(props) = v {
                let props = props.iter().map(|(n, p)| (n.clone(), sub(p))).collect();
                out.insert(k.into(), Value::Object(props));
            }
        }
        "$defs" | "definitions" => {
            out.insert("$defs".into(), defs(v, depth));
        }
        "items" | "additionalProperties" => {
            let fitted = match v {
                Value::Bool(b) => json!(b),
                // The old tuple form.
                Value::Array(_) if k == "items" => {
                    out.insert("prefixItems".into(), list(v));
                    return;
                }
                other => sub(other),
            };
            out.insert(k.into(), fitted);
        }
        "prefixItems" | "anyOf" | "oneOf" => {
            out.insert(k.into(), list(v));
        }
        "type" => match v {
            Value::Array(types) if types.len() == 1 => {
                out.insert(k.into(), types[0].clone());
            }
            Value::Array(types) => {
                let alts = types.iter().map(|t| json!({ "type": t })).collect();
                out.insert("anyOf".into(), Value::Array(alts));
            }
            other => {
                out.insert(k.into(), other.clone());
            }
        },
        "enum" => {
            if let Some(values) = enum_values(v) {
                out.insert(k.into(), values);
            }
        }
        "const" => match enum_values(&json!([v])) {
            Some(values) => {
                out.insert("enum".into(), values);
            }
            None => notes.push(format!("must be {v}")),
        },
        "allOf" => {
            for part in v.as_array().into_iter().flatten() {
                merge(out, sub(part));
            }
        }
        k if SUPPORTED.contains(&k) => {
            out.insert(k.into(), v.clone());
        }
        _ => notes.extend(note(k, v)),
    }
}

fn defs(v: &Value, depth: usize) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(name, d)| (name.clone(), fit(d, depth + 1)))
                .collect(),
        ),
        _ => json!({}),
    }
}

/// The values Gemini's `enum` takes (strings and numbers); none when no value is one.
fn enum_values(v: &Value) -> Option<Value> {
    let kept: Vec<Value> = v
        .as_array()?
        .iter()
        .filter(|x| x.is_string() || x.is_number())
        .cloned()
        .collect();
    (!kept.is_empty()).then_some(Value::Array(kept))
}

/// An `allOf` member's keywords into the schema: properties and required joined, the rest
/// where the schema has none of its own.
fn merge(out: &mut Map<String, Value>, part: Value) {
    let Value::Object(part) = part else {
        return;
    };
    for (k, v) in part {
        match (k.as_str(), out.get_mut(&k)) {
            ("properties", Some(Value::Object(have))) => {
                if let Value::Object(more) = v {
                    have.extend(more);
                }
            }
            ("required", Some(Value::Array(have))) => {
                for r in v.as_array().into_iter().flatten() {
                    if !have.contains(r) {
                        have.push(r.clone());
                    }
                }
            }
            (_, Some(_)) => {}
            (_, None) => {
                out.insert(k, v);
            }
        }
    }
}

/// What a keyword Gemini does not take meant, for the description; none for annotations.
fn note(k: &str, v: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(match k {
        "pattern" => format!("matches the pattern {}", text(v)),
        "minLength" => format!("at least {} characters", text(v)),
        "maxLength" => format!("at most {} characters", text(v)),
        "exclusiveMinimum" => format!("more than {}", text(v)),
        "exclusiveMaximum" => format!("less than {}", text(v)),
        "multipleOf" => format!("a multiple of {}", text(v)),
        "uniqueItems" if v == &Value::Bool(true) => "items are unique".to_string(),
        "minProperties" => format!("at least {} properties", text(v)),
        "maxProperties" => format!("at most {} properties", text(v)),
        "propertyNames" => format!("property names: {}", compact(v)),
        "patternProperties" => format!("properties by name pattern: {}", compact(v)),
        "enumDescriptions" => format!("the values mean, in order: {}", compact(v)),
        _ => return None,
    })
}

/// A sub-schema as short text for a description (bounded: a description is for a model).
fn compact(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 200 {
        let mut end = 200;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every keyword left in a schema, at any depth, is one Gemini takes, and nothing stands
    /// beside a `$ref` but `$` keywords.
    fn only_supported(v: &Value) {
        let Value::Object(s) = v else { return };
        for (k, sub) in s {
            assert!(SUPPORTED.contains(&k.as_str()), "{k} left in {v}");
            match k.as_str() {
                "properties" | "$defs" => {
                    sub.as_object().unwrap().values().for_each(only_supported)
                }
                "items" | "additionalProperties" => only_supported(sub),
                "anyOf" | "oneOf" | "prefixItems" => {
                    sub.as_array().unwrap().iter().for_each(only_supported)
                }
                _ => {}
            }
        }
        if s.contains_key("$ref") {
            assert!(s.keys().all(|k| k.starts_with('$')), "{v}");
        }
    }

    #[test]
    fn the_keywords_gemini_refuses_are_dropped_rewritten_or_described() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": "generated",
            "type": "object",
            "defer_loading": true,
            "properties": {
                "mode": {"type": "string", "enum": ["a", "b"], "enumDescriptions": ["fast", "slow"]},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                "step": {"type": "number", "multipleOf": 0.5},
                "env": {"type": "object", "propertyNames": {"pattern": "^[A-Z_]+$"},
                        "patternProperties": {"^X_": {"type": "string"}}},
                "kind": {"const": "file"},
                "maybe": {"type": ["string", "null"]},
                "node": {"$ref": "#/$defs/node", "description": "the root"},
                "both": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}},
                    "required": ["a"]}, {"properties": {"b": {"type": "integer"}}, "required": ["b"]}]}
            },
            "$defs": {"node": {"type": "object", "properties": {"name": {"type": "string",
                "minLength": 1}}}},
            "required": ["mode"]
        });
        let out = for_gemini(&schema);
        only_supported(&out);
        let p = &out["properties"];
        assert_eq!(p["mode"]["enum"], json!(["a", "b"]));
        assert!(p["mode"]["description"].as_str().unwrap().contains("fast"));
        assert!(p["tags"]["description"]
            .as_str()
            .unwrap()
            .contains("unique"));
        assert!(p["step"]["description"]
            .as_str()
            .unwrap()
            .contains("multiple of 0.5"));
        assert!(p["env"]["description"]
            .as_str()
            .unwrap()
            .contains("^[A-Z_]+$"));
        assert_eq!(p["kind"]["enum"], json!(["file"]));
        assert_eq!(
            p["maybe"]["anyOf"],
            json!([{"type": "string"}, {"type": "null"}])
        );
        assert_eq!(p["node"], json!({"$ref": "#/$defs/node"}));
        assert_eq!(p["both"]["required"], json!(["a", "b"]));
        assert_eq!(p["both"]["properties"]["b"]["type"], "integer");
        assert!(out["$defs"]["node"]["properties"]["name"]["description"]
            .as_str()
            .unwrap()
            .contains("at least 1 characters"));
        assert_eq!(out["required"], json!(["mode"]));
    }

    #[test]
    fn a_schema_that_fits_is_unchanged() {
        let schema = json!({"type": "object", "properties": {"city": {"type": "string",
            "description": "a city"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city"], "additionalProperties": false});
        assert_eq!(for_gemini(&schema), schema);
    }
}
