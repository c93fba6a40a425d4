//! The benchmark's request bodies.

use serde_json::json;

/// The plain request's body; with `BENCH_BODY=json`, a JSON-mode request of about 2 KB (a
/// schema of a dozen fields, an extraction prompt), whose answer Baton checks.
pub(super) fn body(stream: bool) -> Vec<u8> {
    if std::env::var("BENCH_BODY").is_ok_and(|v| v == "json") {
        return json_body(stream);
    }
    serde_json::to_vec(&json!({"model": "auto", "stream": stream,
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello to the benchmark"}]}))
    .unwrap()
}

fn json_body(stream: bool) -> Vec<u8> {
    let fields = [
        "customer",
        "address",
        "city",
        "postcode",
        "country",
        "phone",
        "email",
        "job",
        "hours",
        "rate",
        "materials",
        "notes",
    ];
    let mut props = serde_json::Map::new();
    for f in fields {
        props.insert(
            f.into(),
            json!({"type": "string", "description": format!("The {f} as written in the request")}),
        );
    }
    props.insert("total".into(), json!({"type": "number", "minimum": 0}));
    let required: Vec<&str> = fields.iter().copied().chain(["total"]).collect();
    let schema = json!({"type": "object", "properties": props, "required": required,
        "additionalProperties": false});
    let prompt = "Extract the estimate from this request. ".repeat(20);
    serde_json::to_vec(&json!({"model": "auto", "stream": stream,
        "messages": [{"role": "system", "content": "You extract estimates."}, {"role": "user", "content": prompt}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "estimate", "strict": true, "schema": schema}}}))
    .unwrap()
}
