use serde_json::{json, Value};

use super::*;

/// Every instance, read onto a tape, must be judged as `serde_json`'s own tree is judged.
fn agree(schema: &Value, instances: &[&str]) {
    let tree = jsonschema::validator_for(schema).unwrap();
    let flat = jsonschema::options_for::<Flat>().build(schema).unwrap();
    for text in instances {
        let value: Value = serde_json::from_str(text).unwrap();
        let tape = Tape::read(text).unwrap();
        assert_eq!(
            flat.is_valid(tape.root()),
            tree.is_valid(&value),
            "{schema} on {text}"
        );
        assert_eq!(
            flat.validate(tape.root()).map_err(|e| e.to_string()),
            tree.validate(&value).map_err(|e| e.to_string()),
            "{schema} on {text}"
        );
    }
}

#[test]
fn a_tape_reads_back_as_the_tree_serde_json_reads() {
    for text in [
        r#"{"a": 1, "b": [true, false, null, -2, 3.5, 18446744073709551615], "c": {"d": "e\"\u00e9"}}"#,
        r#"[[], {}, [[1]], {"x": {}}, ""]"#,
        r#"  "just a string"  "#,
        "12",
        r#"{"dup": 1, "dup": 2}"#,
        r#"{"k\nwith escape": "v\\w", "plain": "x"}"#,
    ] {
        let want: Value = serde_json::from_str(text).unwrap();
        assert_eq!(Tape::read(text).unwrap().root().value(), want, "{text}");
    }
}

#[test]
fn what_is_not_one_json_value_does_not_read() {
    for text in [
        "",
        "{",
        r#"{"a": 1} {"b": 2}"#,
        "[1,]",
        "{\"a\" 1}",
        "nul",
        "1 2",
    ] {
        assert!(Tape::read(text).is_err(), "{text:?}");
    }
    // Nesting past serde_json's limit is an error, not a stack overflow.
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    assert!(Tape::read(&deep).is_err());
}

#[test]
fn objects_types_and_formats_are_judged_as_on_a_tree() {
    let schema = json!({"type": "object",
        "properties": {"name": {"type": "string", "minLength": 2, "maxLength": 4},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "kind": {"enum": ["a", "b", {"c": 1}]}, "fixed": {"const": [1, {"x": 2.0}]}},
        "required": ["name", "age"], "additionalProperties": false});
    agree(
        &schema,
        &[
            r#"{"name": "Ann", "age": 3}"#,
            r#"{"name": "Ann", "age": 3.0}"#,
            r#"{"name": "Ann", "age": 3.5}"#,
            r#"{"name": "Ann"}"#,
            r#"{"name": "A", "age": 1}"#,
            r#"{"name": "éééé", "age": 1}"#,
            r#"{"name": "ééééé", "age": 1}"#,
            r#"{"name": "Ann", "age": -1}"#,
            r#"{"name": "Ann", "age": 1, "extra": 0}"#,
            r#"{"name": "Ann", "age": 1, "tags": ["x", "y"]}"#,
            r#"{"name": "Ann", "age": 1, "tags": ["x", "x"]}"#,
            r#"{"name": "Ann", "age": 1, "tags": ["x", 1]}"#,
            r#"{"name": "Ann", "age": 1, "kind": {"c": 1.0}}"#,
            r#"{"name": "Ann", "age": 1, "kind": "z"}"#,
            r#"{"name": "Ann", "age": 1, "fixed": [1.0, {"x": 2}]}"#,
            r#"{"name": "Ann", "age": 1, "fixed": [1, {"x": 3}]}"#,
            r#"{"name": 7, "age": 1}"#,
            r#"{"name": "Ann", "age": "1"}"#,
            r#"{"age": 1, "name": "Bo", "name": 5}"#,
            r#"{"age": 1, "name": 5, "name": "Bo"}"#,
            r#"[]"#,
            r#"null"#,
        ],
    );
}

#[test]
fn refs_combinators_and_property_names_are_judged_as_on_a_tree() {
    let schema = json!({"$defs": {"item": {"type": "object", "properties": {"n": {"type": "number"}},
            "required": ["n"]}},
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1},
            "mode": {"oneOf": [{"type": "string", "pattern": "^a"}, {"type": "integer"}]}},
        "propertyNames": {"pattern": "^[a-z]+$"},
        "patternProperties": {"^x": {"type": "boolean"}}});
    agree(
        &schema,
        &[
            r#"{"items": [{"n": 1}, {"n": 2.5}]}"#,
            r#"{"items": []}"#,
            r#"{"items": [{"n": "1"}]}"#,
            r#"{"items": [{}]}"#,
            r#"{"mode": "abc"}"#,
            r#"{"mode": "bc"}"#,
            r#"{"mode": 3}"#,
            r#"{"xa": true}"#,
            r#"{"xa": 1}"#,
            r#"{"Upper": 1}"#,
        ],
    );
}

#[test]
fn large_objects_are_found_through_their_index() {
    let names: Vec<String> = (0..300).map(|i| format!("k{i:03}")).collect();
    let mut props = serde_json::Map::new();
    for n in &names {
        props.insert(n.clone(), json!({"type": "integer"}));
    }
    let schema = json!({"type": "object", "properties": props, "required": names,
        "additionalProperties": false});
    let full: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), json!(1))).collect();
    let full = Value::Object(full).to_string();
    let mut missing: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), json!(1))).collect();
    missing.remove("k150");
    let missing = Value::Object(missing).to_string();
    let wrong = full.replace("\"k299\":1", "\"k299\":\"1\"");
    // A repeated key, last wins: the wrong value last is invalid, the right one last is valid.
    let dup_bad = format!("{},\"k007\":\"no\"}}", &full[..full.len() - 1]);
    let dup_good = full.replacen('{', "{\"k007\":\"no\",", 1);
    agree(
        &schema,
        &[
            &full,
            &missing,
            &wrong,
            &dup_bad,
            &dup_good,
            r#"{"k001": 1}"#,
        ],
    );
    let tape = Tape::read(&full).unwrap();
    let root = tape.root();
    assert_eq!(Object::len(&root), 300);
    let got = Object::get(&root, &Flat::prepare_key("k123")).unwrap();
    assert_eq!(got.as_number().and_then(|n| n.as_u64()), Some(1));
    assert!(Object::get(&root, &Flat::prepare_key("k3000")).is_none());
    assert_eq!(root.members().count(), 300);
}
