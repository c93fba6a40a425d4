//! Codex's body, written for the ChatGPT backend its own login reaches, in the shapes the public
//! Responses API takes (an `openai-responses` provider, not the `chatgpt` backend): its tools
//! declared in `tools`, and each input item with only the fields the public API defines for its
//! type. Everything else Codex sent goes on as it came.

use serde_json::{Map, Value};

/// The fields of each input item type in the public API's request types (the pinned `openai`
/// SDK's `ResponseInputItemParam`, the source of `testkit/contract/openai-responses.json`;
/// `tests/it/responses_upstream.rs` holds this table to it). Codex adds its backend's own
/// (`internal_chat_message_metadata_passthrough`, a `status` on a `custom_tool_call`, ids on
/// its own messages), which the public API refuses as unknown parameters.
pub const INPUT_ITEM_FIELDS: &[(&str, &[&str])] = &[
    ("additional_tools", &["id", "role", "tools", "type"]),
    (
        "apply_patch_call",
        &["call_id", "caller", "id", "operation", "status", "type"],
    ),
    (
        "apply_patch_call_output",
        &["call_id", "caller", "id", "output", "status", "type"],
    ),
    (
        "code_interpreter_call",
        &["code", "container_id", "id", "outputs", "status", "type"],
    ),
    ("compaction", &["encrypted_content", "id", "type"]),
    ("compaction_trigger", &["id", "type"]),
    (
        "computer_call",
        &[
            "action",
            "actions",
            "call_id",
            "id",
            "pending_safety_checks",
            "status",
            "type",
        ],
    ),
    (
        "computer_call_output",
        &[
            "acknowledged_safety_checks",
            "call_id",
            "id",
            "output",
            "status",
            "type",
        ],
    ),
    ("configuration_update", &["id", "reasoning", "text", "type"]),
    (
        "custom_tool_call",
        &[
            "async",
            "call_id",
            "caller",
            "id",
            "input",
            "name",
            "namespace",
            "type",
        ],
    ),
    (
        "custom_tool_call_output",
        &["call_id", "caller", "id", "output", "type"],
    ),
    (
        "file_search_call",
        &["id", "queries", "results", "status", "type"],
    ),
    (
        "function_call",
        &[
            "arguments",
            "async",
            "call_id",
            "caller",
            "id",
            "name",
            "namespace",
            "status",
            "type",
        ],
    ),
    (
        "function_call_output",
        &[
            "call_id",
            "caller",
            "id",
            "name",
            "namespace",
            "output",
            "status",
            "type",
        ],
    ),
    (
        "image_generation_call",
        &[
            "action",
            "background",
            "error",
            "id",
            "output_format",
            "quality",
            "result",
            "revised_prompt",
            "size",
            "status",
            "svg_usage",
            "type",
        ],
    ),
    (
        "local_shell_call",
        &["action", "call_id", "id", "status", "type"],
    ),
    (
        "local_shell_call_output",
        &["id", "output", "status", "type"],
    ),
    (
        "mcp_approval_request",
        &["arguments", "id", "name", "server_label", "type"],
    ),
    (
        "mcp_approval_response",
        &["approval_request_id", "approve", "id", "reason", "type"],
    ),
    (
        "mcp_call",
        &[
            "approval_request_id",
            "arguments",
            "error",
            "id",
            "name",
            "output",
            "server_label",
            "status",
            "type",
        ],
    ),
    (
        "mcp_list_tools",
        &["error", "id", "server_label", "tools", "type"],
    ),
    (
        "message",
        &["content", "id", "phase", "role", "status", "type"],
    ),
    ("program", &["call_id", "code", "fingerprint", "id", "type"]),
    (
        "program_output",
        &["call_id", "id", "result", "status", "type"],
    ),
    (
        "reasoning",
        &[
            "content",
            "encrypted_content",
            "id",
            "status",
            "summary",
            "type",
        ],
    ),
    (
        "shell_call",
        &[
            "action",
            "call_id",
            "caller",
            "environment",
            "id",
            "status",
            "type",
        ],
    ),
    (
        "shell_call_output",
        &[
            "call_id",
            "caller",
            "id",
            "max_output_length",
            "output",
            "status",
            "type",
        ],
    ),
    (
        "tool_search_call",
        &["arguments", "call_id", "execution", "id", "status", "type"],
    ),
    (
        "tool_search_output",
        &["call_id", "execution", "id", "status", "tools", "type"],
    ),
    ("web_search_call", &["action", "id", "status", "type"]),
];

/// Each input item with only its type's public fields (an item of a type not listed keeps its
/// own, but for the backend's `internal_*` ones); an `id` on a message only where the API
/// could have made it (an output message, with its `status`).
pub fn input(body: &mut Map<String, Value>) {
    let Some(Value::Array(items)) = body.get_mut("input") else {
        return;
    };
    // A compaction Baton made on another upstream: its summary, which this server can read.
    crate::canonical::responses::compaction::unwrap_items(items);
    for item in items {
        let Value::Object(m) = item else {
            continue;
        };
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("message");
        let message = kind == "message";
        let public = public_field(kind);
        m.retain(|k, _| public(k));
        if message && !m.contains_key("status") {
            m.remove("id");
        }
    }
}

/// Whether an input item of type `kind` may carry a field in the public API: one of its
/// type's (`INPUT_ITEM_FIELDS`), or, for a type not listed, any but the backend's `internal_*`.
fn public_field(kind: &str) -> impl Fn(&String) -> bool {
    let fields = INPUT_ITEM_FIELDS.iter().find(|(k, _)| *k == kind);
    move |k| match fields {
        Some((_, fields)) => fields.contains(&k.as_str()),
        None => !k.starts_with("internal_"),
    }
}

/// Whether [`input`] and [`tools_declared_in_tools`] would leave these items as they are.
pub fn fits(items: &[Value]) -> bool {
    items.iter().all(|item| {
        let Value::Object(m) = item else {
            return true;
        };
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("message");
        let keeps = public_field(kind);
        let unwrapped = kind == "compaction"
            && crate::canonical::responses::compaction::summary_of(item).is_some();
        let loses_id = kind == "message" && !m.contains_key("status") && m.contains_key("id");
        kind != "additional_tools" && !unwrapped && !loses_id && m.keys().all(keeps)
    })
}

/// Codex's current models declare their tools in `additional_tools` input items (namespaces,
/// the freeform `exec`), which the ChatGPT backend reads in place. Any other Responses server
/// is given them where every one reads tools, in `tools`, each exactly as declared (a freeform
/// tool stays freeform, so the model answers the `custom_tool_call` the client runs); a name
/// already in `tools` is not declared twice.
pub fn tools_declared_in_tools(body: &mut Map<String, Value>) {
    let Some(Value::Array(items)) = body.get_mut("input") else {
        return;
    };
    let mut moved = Vec::new();
    items.retain_mut(|i| {
        if i.get("type").and_then(Value::as_str) != Some("additional_tools") {
            return true;
        }
        if let Some(Value::Array(tools)) = i.get_mut("tools") {
            moved.append(tools);
        }
        false
    });
    if moved.is_empty() {
        return;
    }
    let key = |t: &Value| (t.get("type").cloned(), t.get("name").cloned());
    let tools = body
        .entry("tools")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !tools.is_array() {
        *tools = Value::Array(Vec::new());
    }
    if let Value::Array(tools) = tools {
        for t in moved {
            if !tools.iter().any(|have| key(have) == key(&t)) {
                tools.push(t);
            }
        }
    }
}
