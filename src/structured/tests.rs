use serde_json::json;

use super::*;

fn schema() -> Expect {
    Expect::new(&OutputFormat::JsonSchema {
        name: "estimate".into(),
        schema: json!({"type": "object", "properties": {"total": {"type": "number"}},
            "required": ["total"], "additionalProperties": false}),
        strict: Some(true),
    })
}

#[test]
fn one_value_that_fits_is_valid_as_it_came() {
    assert_eq!(schema().check(r#"{"total": 12.5}"#, false), Checked::Valid);
    assert_eq!(schema().check("\n {\"total\": 1}\n", false), Checked::Valid);
    let any = Expect::new(&OutputFormat::JsonObject);
    assert_eq!(any.check(r#"{"anything": [1, 2]}"#, false), Checked::Valid);
}

#[test]
fn a_fence_prose_or_a_byte_order_mark_is_taken_off_and_said() {
    let fenced = "Here you go:\n```json\n{\"total\": 3}\n```\nAnything else?";
    assert_eq!(
        schema().check(fenced, false),
        Checked::Repaired {
            text: "{\"total\": 3}".into(),
            what: "a Markdown fence"
        }
    );
    let prose = "Sure! The estimate is {\"total\": 3} — let me know.";
    assert_eq!(
        schema().check(prose, false),
        Checked::Repaired {
            text: "{\"total\": 3}".into(),
            what: "prose around the JSON value"
        }
    );
    assert_eq!(
        schema().check("\u{feff}{\"total\": 3}", false),
        Checked::Repaired {
            text: "{\"total\": 3}".into(),
            what: "a byte-order mark"
        }
    );
    // Braces inside the value's strings are the value's.
    let any = Expect::new(&OutputFormat::JsonObject);
    assert_eq!(
        any.check(r#"Note: {"a": "x } y {"} (done)"#, false),
        Checked::Repaired {
            text: r#"{"a": "x } y {"}"#.into(),
            what: "prose around the JSON value"
        }
    );
}

#[test]
fn no_value_two_values_a_cut_value_or_one_the_schema_refuses_is_invalid() {
    let invalid = |text: &str, cut: bool| match schema().check(text, cut) {
        Checked::Invalid(why) => why,
        other => panic!("{text:?} is {other:?}"),
    };
    assert!(invalid("I cannot help with that.", false).contains("no JSON value"));
    assert!(invalid(r#"{"total": 1} or {"total": 2}"#, false).contains("more than one"));
    assert!(invalid(r#"{"total": 1, "items": ["#, true).contains("token limit"));
    let why = invalid(r#"{"total": "twelve"}"#, false);
    assert!(why.contains("/total") && why.contains("number"), "{why}");
    let why = invalid(
        r#"```json
{"sum": 3}
```"#,
        false,
    );
    assert!(why.contains("sum"), "{why}");
}

#[test]
fn a_schema_that_does_not_compile_or_is_too_large_checks_one_value_only() {
    let remote = Expect::new(&OutputFormat::JsonSchema {
        name: String::new(),
        schema: json!({"$ref": "https://example.com/schema.json"}),
        strict: None,
    });
    assert_eq!(remote.check(r#"{"x": 1}"#, false), Checked::Valid);
    assert!(matches!(
        remote.check("no json", false),
        Checked::Invalid(_)
    ));
    let big = Expect::new(&OutputFormat::JsonSchema {
        name: String::new(),
        schema: json!({"type": "string", "description": "x".repeat(MAX_SCHEMA_BYTES)}),
        strict: None,
    });
    assert_eq!(big.check(r#"{"x": 1}"#, false), Checked::Valid);
}

#[test]
fn trees_hash_alike_only_when_equal() {
    use std::hash::BuildHasher;
    let keys = ahash::RandomState::new();
    let spelt = |v: Value| {
        let mut h = keys.build_hasher();
        digest(&v, &mut h);
        h.finish()
    };
    let apart = [
        json!({"a": "b"}),
        json!({"ab": ""}),
        json!({"a": ["b"]}),
        json!(["a", "b"]),
        json!(["ab"]),
        json!([["a"], "b"]),
        json!([["a", "b"]]),
        json!([[], []]),
        json!([[[]]]),
        json!({"a": {}}),
        json!({"a": []}),
        json!({"a": null, "b": true}),
        json!({"a": false, "b": null}),
        json!(1),
        json!(1.0),
        json!(-1),
        json!("1"),
    ];
    for (i, x) in apart.iter().enumerate() {
        for y in &apart[i + 1..] {
            assert_ne!(spelt(x.clone()), spelt(y.clone()), "{x} and {y}");
        }
    }
    assert_eq!(spelt(json!({"a": [1, "x"]})), spelt(json!({"a": [1, "x"]})));
}

#[test]
fn schemas_kept_compiled_are_told_apart() {
    let of = |schema: Value| {
        Expect::new(&OutputFormat::JsonSchema {
            name: String::new(),
            schema,
            strict: None,
        })
    };
    let whole = of(json!({"type": "object", "required": ["ab"]}));
    let split = of(json!({"type": "object", "required": ["a", "b"]}));
    for _ in 0..2 {
        assert_eq!(whole.check(r#"{"ab": 1}"#, false), Checked::Valid);
        assert!(matches!(
            split.check(r#"{"ab": 1}"#, false),
            Checked::Invalid(_)
        ));
    }
}
