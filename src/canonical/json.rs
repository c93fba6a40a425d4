//! Reading the JSON bodies every translator reads (a leaf).

use serde_json::Value;

/// A string field of a JSON object, or "" when it is absent or not a string.
pub(crate) fn str_at(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}
