//! What the config schema accepts is what the README and the UI offer: every provider kind is in
//! the README's `providers[]` row and in the kind list the gateway gives the UI's Add form.
#![allow(clippy::unwrap_used, clippy::expect_used)]

fn kinds() -> Vec<String> {
    let schema = baton::config::json_schema();
    let schema = serde_json::to_value(&schema).unwrap();
    let kinds: Vec<String> = schema["$defs"]["ProviderKind"]["oneOf"]
        .as_array()
        .expect("ProviderKind is a oneOf of constants")
        .iter()
        .map(|k| k["const"].as_str().unwrap().to_string())
        .collect();
    assert!(kinds.len() >= 7, "{kinds:?}");
    kinds
}

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

#[test]
fn every_provider_kind_is_in_the_readme_and_the_forms_kind_list() {
    let readme = read("README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `providers[]` |"))
        .expect("the README's configuration table has a providers[] row");
    // The UI has no list of its own: /admin/state's `kinds` fills the form.
    let listed: Vec<String> = baton::api::views::KindView::all()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert!(!read("ui/forms.js").contains("const KINDS"));
    for k in kinds() {
        assert!(
            row.contains(&format!("`{k}`")),
            "README's providers[] row lacks `{k}`"
        );
        assert!(listed.contains(&k), "the UI's kind list lacks {k}");
    }
    assert_eq!(listed.len(), kinds().len());
}
