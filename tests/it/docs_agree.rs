//! What the config schema accepts is what the book and the UI offer: every provider kind is in
//! the configuration chapter's `providers[]` row and in the kind list the gateway gives the UI's
//! Add form. The README and the book (`docs/src`) say only what exists: every relative link
//! and anchor, every `baton …` command and flag, every `scripts/…` file, every dotted config key
//! and every JSON configuration they show; the configuration reference is the schema's own.
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
fn every_provider_kind_is_in_the_book_and_the_forms_kind_list() {
    let chapter = read("docs/src/configuration.md");
    let row = chapter
        .lines()
        .find(|l| l.starts_with("| `providers[]` |"))
        .expect("the configuration chapter's table has a providers[] row");
    // The UI has no list of its own: /admin/state's `kinds` fills the form.
    let listed: Vec<String> = baton::api::views::KindView::all()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert!(!read("ui/forms.js").contains("const KINDS"));
    for k in kinds() {
        assert!(
            row.contains(&format!("`{k}`")),
            "the configuration chapter's providers[] row lacks `{k}`"
        );
        assert!(listed.contains(&k), "the UI's kind list lacks {k}");
    }
    assert_eq!(listed.len(), kinds().len());
}
