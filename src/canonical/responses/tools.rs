//! The tools a Responses client declares, as canonical tools, and the names its calls go back
//! under. Freeform tools are canonical freeform tools (`Tool::freeform`); tools come in `tools`
//! and in `additional_tools` input items, and those in a namespace travel as
//! `<namespace>__<name>`.

use serde_json::{json, Map, Value};

use crate::canonical::{invalid, kind_of, Freeform, InvalidRequest, Tool};

/// Function and freeform tools. The hosted web search is `ChatRequest::web_search`
/// ([`web_search`]); other hosted tools (file search, code interpreter) run only on OpenAI's
/// servers and are left out.
pub(super) fn tools(body: &Map<String, Value>) -> Result<Vec<Tool>, InvalidRequest> {
    let mut out = Vec::new();
    for d in declared(body)? {
        let t = d.tool;
        let kind = t.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind != "function" && kind != "custom" {
            continue;
        }
        let name = t.get("name").and_then(Value::as_str).ok_or_else(|| {
            invalid(
                format!("{}.name", d.path),
                "a function or custom tool needs a `name`",
            )
        })?;
        let name = flat_name(d.namespace, name);
        let description = t
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string);
        out.push(if kind == "function" {
            Tool {
                name,
                description,
                parameters: t
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                freeform: None,
            }
        } else {
            Tool::freeform(name, description, Freeform::from_format(t.get("format")))
        });
    }
    Ok(out)
}

/// The hosted web search, when the client declared it.
pub(super) fn web_search(body: &Map<String, Value>) -> Option<crate::canonical::search::WebSearch> {
    declared(body).ok()?.into_iter().find_map(|d| {
        crate::canonical::search::WebSearch::is_responses(d.tool)
            .then(|| crate::canonical::search::WebSearch::from_responses(d.tool))
    })
}

/// One tool the client declared: where, in which namespace, and its definition.
struct Declared<'a> {
    path: String,
    namespace: Option<&'a str>,
    tool: &'a Value,
}

/// Every tool the request declares: in `tools` and in `additional_tools` input items, with
/// the tools of a namespace taken out of it.
fn declared(body: &Map<String, Value>) -> Result<Vec<Declared<'_>>, InvalidRequest> {
    let mut lists = Vec::new();
    match body.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(t)) => lists.push(("tools".to_string(), t)),
        Some(v) => {
            return Err(invalid(
                "tools",
                format!("`tools` must be a list, not {}", kind_of(v)),
            ))
        }
    }
    for (i, item) in body
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if item.get("type").and_then(Value::as_str) == Some("additional_tools") {
            if let Some(t) = item.get("tools").and_then(Value::as_array) {
                lists.push((format!("input[{i}].tools"), t));
            }
        }
    }
    let mut out = Vec::new();
    for (path, list) in lists {
        for (i, t) in list.iter().enumerate() {
            let path = format!("{path}[{i}]");
            if t.get("type").and_then(Value::as_str) != Some("namespace") {
                out.push(Declared {
                    path,
                    namespace: None,
                    tool: t,
                });
                continue;
            }
            let namespace = t.get("name").and_then(Value::as_str);
            for (j, inner) in t
                .get("tools")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                out.push(Declared {
                    path: format!("{path}.tools[{j}]"),
                    namespace,
                    tool: inner,
                });
            }
        }
    }
    Ok(out)
}

/// The default namespace every client calls `functions`: its tools keep their plain names.
const DEFAULT_NAMESPACE: &str = "functions";

/// A tool's name on every other format: `<namespace>__<name>` inside a namespace.
fn flat_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if ns != DEFAULT_NAMESPACE && !ns.is_empty() => format!("{ns}__{name}"),
        _ => name.to_string(),
    }
}

/// The flat name of the tool an earlier call item called.
pub(super) fn called_name(item: &Value) -> String {
    let name = crate::canonical::str_at(item, "name");
    flat_name(item.get("namespace").and_then(Value::as_str), &name)
}

/// How the client declared its tools, to give calls back in its terms: freeform tools as
/// `custom_tool_call`, namespaced ones with their `namespace`.
#[derive(Debug, Clone, Default)]
pub struct ClientTools {
    /// Flat names of the freeform tools.
    freeform: Vec<String>,
    /// (flat name, namespace, name) of the tools in a namespace.
    namespaced: Vec<(String, String, String)>,
}

impl ClientTools {
    pub fn of(body: &Map<String, Value>) -> Self {
        let mut out = Self::default();
        for d in declared(body).unwrap_or_default() {
            let Some(name) = d.tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let flat = flat_name(d.namespace, name);
            if d.tool.get("type").and_then(Value::as_str) == Some("custom") {
                out.freeform.push(flat.clone());
            }
            if let Some(ns) = d.namespace.filter(|ns| flat != *name && !ns.is_empty()) {
                out.namespaced
                    .push((flat, ns.to_string(), name.to_string()));
            }
        }
        out
    }

    pub fn is_freeform(&self, flat: &str) -> bool {
        self.freeform.iter().any(|f| f == flat)
    }

    /// A call's `name` (and `namespace`, when it has one) on its output item.
    pub(super) fn name_into(&self, flat: &str, item: &mut Value) {
        match self.namespaced.iter().find(|(f, _, _)| f == flat) {
            Some((_, ns, name)) => {
                item["name"] = json!(name);
                item["namespace"] = json!(ns);
            }
            None => item["name"] = json!(flat),
        }
    }
}
