//! Reading the JSON bodies every translator reads (a leaf).

use serde_json::Value;

/// A string field of a JSON object, or "" when it is absent or not a string.
pub(crate) fn str_at(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// The value at `path` (object keys, and array indices written as numbers) as `Value::pointer`
/// finds it for a path without `~` escapes, without the two strings `pointer` allocates for
/// every step of it (a lookup on every stream event in places).
pub(crate) fn at<'v>(v: &'v Value, path: &[&str]) -> Option<&'v Value> {
    path.iter().try_fold(v, |target, step| match target {
        Value::Object(map) => map.get(*step),
        Value::Array(list) => index(step).and_then(|i| list.get(i)),
        _ => None,
    })
}

/// An array index as a JSON Pointer writes it: digits, no leading zero (but `0` itself).
fn index(step: &str) -> Option<usize> {
    if step.is_empty() || (step.len() > 1 && step.starts_with('0')) {
        return None;
    }
    step.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| step.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// `at` finds what `pointer` finds, for every path of a document and paths that miss.
    #[test]
    fn at_agrees_with_pointer() {
        let doc = json!({"a": {"b": [1, {"c": null, "0": "zero", "": "empty"}], "01": 2},
            "choices": [{"finish_reason": "stop"}], "n": 3, "s": "x"});
        let paths: &[&[&str]] = &[
            &[],
            &["a"],
            &["a", "b"],
            &["a", "b", "0"],
            &["a", "b", "1", "c"],
            &["a", "b", "1", "0"],
            &["a", "b", "1", ""],
            &["a", "b", "01"],
            &["a", "b", "+1"],
            &["a", "b", "2"],
            &["a", "b", "18446744073709551616"],
            &["a", "01"],
            &["choices", "0", "finish_reason"],
            &["n", "x"],
            &["s", "0"],
            &["missing", "x"],
        ];
        for path in paths {
            let pointer: String = path.iter().map(|s| format!("/{s}")).collect();
            assert_eq!(super::at(&doc, path), doc.pointer(&pointer), "{pointer}");
        }
    }
}
