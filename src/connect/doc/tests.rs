use super::*;

fn edit(format: Format, text: &str, path: &[&str], v: Option<Val>) -> String {
    let mut d = Doc::parse(format, text).unwrap();
    d.set(path, v.as_ref()).unwrap();
    d.render()
}

#[test]
fn json_edits_keep_comments_order_and_the_other_keys() {
    let text = "{\n  // my model\n  \"model\": \"opus\",\n  \"env\": {\n    \"FOO\": \"1\" // keep\n  },\n  \"permissions\": {\"allow\": [\"Bash(ls)\"]}\n}\n";
    let out = edit(
        Format::Json,
        text,
        &["env", "ANTHROPIC_BASE_URL"],
        Some(Val::str("http://127.0.0.1:8787")),
    );
    assert!(
        out.starts_with(
            "{\n  // my model\n  \"model\": \"opus\",\n  \"env\": {\n    \"FOO\": \"1\", // keep\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("\"ANTHROPIC_BASE_URL\": \"http://127.0.0.1:8787\""),
        "{out}"
    );
    assert!(
        out.ends_with("\"permissions\": {\"allow\": [\"Bash(ls)\"]}\n}\n"),
        "{out}"
    );
    // And out again: the text is what it was (the comma after "1" goes with the entry).
    let back = edit(Format::Json, &out, &["env", "ANTHROPIC_BASE_URL"], None);
    assert_eq!(back, text);
}

#[test]
fn json_creates_missing_parents_and_reads_values_back() {
    let out = edit(
        Format::Json,
        "",
        &["provider", "baton"],
        Some(Val::obj([("name", Val::str("Baton"))])),
    );
    let d = Doc::parse(Format::Json, &out).unwrap();
    assert_eq!(
        d.get(&["provider", "baton", "name"]),
        Some(Value::String("Baton".into()))
    );
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["provider"]["baton"]["name"],
        "Baton"
    );
}

#[test]
fn json_refuses_what_it_cannot_edit_safely() {
    assert!(matches!(
        Doc::parse(Format::Json, "{\"env\": {"),
        Err(DocError::Syntax { .. })
    ));
    assert!(matches!(
        Doc::parse(Format::Json, "[1, 2]"),
        Err(DocError::NotATable { .. })
    ));
    let mut d = Doc::parse(Format::Json, "{\"env\": \"oops\"}").unwrap();
    let e = d.set(&["env", "X"], Some(&Val::str("1"))).unwrap_err();
    assert!(e.to_string().contains("`env` is not an object"), "{e}");
}

#[test]
fn toml_edits_keep_comments_and_add_tables_with_headers() {
    let text =
        "# my Codex\nmodel = \"gpt-5\" # default\n\n[model_providers.other]\nname = \"Other\"\n";
    let mut d = Doc::parse(Format::Toml, text).unwrap();
    d.set(&["profile"], Some(&Val::str("baton"))).unwrap();
    let provider = Val::obj([
        ("name", Val::str("Baton")),
        ("http_headers", Val::obj([("x-baton-key", Val::str("k"))])),
        ("supports_websockets", Val::Bool(false)),
    ]);
    d.set(&["model_providers", "baton"], Some(&provider))
        .unwrap();
    let out = d.render();
    assert!(
        out.starts_with("# my Codex\nmodel = \"gpt-5\" # default\nprofile = \"baton\"\n"),
        "{out}"
    );
    assert!(
        out.contains("[model_providers.other]\nname = \"Other\"\n"),
        "{out}"
    );
    assert!(out.contains("[model_providers.baton]\nname = \"Baton\"\nhttp_headers = { x-baton-key = \"k\" }\nsupports_websockets = false\n"), "{out}");
    let parsed: toml_edit::DocumentMut = out.parse().unwrap();
    assert_eq!(
        parsed["model_providers"]["baton"]["http_headers"]["x-baton-key"].as_str(),
        Some("k")
    );
    assert_eq!(
        d.get(&["model_providers", "baton", "supports_websockets"]),
        Some(Value::Bool(false))
    );
}

#[test]
fn toml_entries_inside_inline_tables_stay_inline() {
    let text = "model_providers = { other = { name = \"Other\" } }\n";
    let mut d = Doc::parse(Format::Toml, text).unwrap();
    d.set(
        &["model_providers", "baton"],
        Some(&Val::obj([("name", Val::str("Baton"))])),
    )
    .unwrap();
    let out = d.render();
    let parsed: toml_edit::DocumentMut = out.parse().unwrap();
    assert_eq!(
        parsed["model_providers"]["baton"]["name"].as_str(),
        Some("Baton"),
        "{out}"
    );
    assert_eq!(
        parsed["model_providers"]["other"]["name"].as_str(),
        Some("Other"),
        "{out}"
    );
}

#[test]
fn toml_refuses_syntax_errors_and_scalars_in_the_way() {
    let e = Doc::parse(Format::Toml, "model = \n").err().unwrap();
    assert!(e.to_string().starts_with("it is not valid TOML"), "{e}");
    let mut d = Doc::parse(Format::Toml, "model_providers = 3\n").unwrap();
    let e = d
        .set(&["model_providers", "baton"], Some(&Val::str("x")))
        .unwrap_err();
    assert!(
        e.to_string().contains("`model_providers` is not a table"),
        "{e}"
    );
}

#[test]
fn a_dotenv_is_edited_line_by_line() {
    let text = "# keys\nexport A=1 # the first\nB=\"two words\"\n\nC='x'\n";
    let mut d = Doc::parse(Format::Env, text).unwrap();
    assert_eq!(d.get(&["A"]), Some(serde_json::json!("1")));
    assert_eq!(d.get(&["B"]), Some(serde_json::json!("two words")));
    assert_eq!(d.get(&["C"]), Some(serde_json::json!("x")));
    assert_eq!(d.get(&["keys"]), None, "a comment is no entry");
    d.set(&["B"], Some(&Val::str("http://127.0.0.1:8787")))
        .unwrap();
    d.set(&["NEW"], Some(&Val::str("has \"quotes\""))).unwrap();
    d.set(&["C"], None).unwrap();
    assert_eq!(
        d.render(),
        "# keys\nexport A=1 # the first\nB=http://127.0.0.1:8787\n\nNEW=\"has \\\"quotes\\\"\"\n"
    );
    assert!(
        d.set(&["a", "b"], Some(&Val::str("x"))).is_err(),
        "no nesting in a .env"
    );
    let mut empty = Doc::parse(Format::Env, "").unwrap();
    assert_eq!(empty.render(), "");
    empty.set(&["K"], Some(&Val::str("v"))).unwrap();
    assert_eq!(empty.render(), "K=v\n");
}
