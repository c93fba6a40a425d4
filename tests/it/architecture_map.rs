//! ARCHITECTURE.md's module map stays true: every source file is in it, and every path it
//! names exists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            // Unit-test modules live beside what they test.
            && p.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(p);
        }
    }
}

#[test]
fn every_source_file_is_on_the_map_and_the_map_names_no_missing_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("src-tauri/src"), &mut files);
    let missing: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(root).unwrap().display().to_string())
        .filter(|p| !map.contains(&format!("`{p}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in ARCHITECTURE.md's module map: {missing:?}"
    );
    let stale: Vec<&str> = map
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|p| !root.join(p).exists())
        .collect();
    assert!(
        stale.is_empty(),
        "the map names files that do not exist: {stale:?}"
    );
}
