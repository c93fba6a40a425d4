//! No file imports another that imports it back, a module's `mod.rs` and its own files included:
//! the crate's import graph read from its source (`super::`, `crate::`, a file's own children),
//! every knot reported, and the ones still to cut listed. Split from `architecture_map.rs`,
//! whose helpers it shares.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use crate::architecture_map::{code_of, sources};

/// A file's module path under its crate's `src/` (`providers/outbound.rs` → providers::outbound,
/// `api/dialect/gemini/mod.rs` → api::dialect::gemini; the crate root is empty).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The paths a file's code names: `crate::…`, `super::…`, `self::…`, with `{…}` groups
/// expanded (comments and an inline test module at the end left out).
fn named_paths(text: &str) -> Vec<Vec<String>> {
    let body = code_of(text);
    let code: String = body
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find(['c', 's']) {
        let at = &rest[i..];
        let before_ok = i == 0 || !rest[..i].ends_with(word);
        let start = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| at.starts_with(p));
        let Some(start) = start.filter(|_| before_ok) else {
            rest = &at[1..];
            continue;
        };
        // Read `a::b::{c, d::e}` into its paths.
        let head = start.trim_end_matches("::").to_string();
        let tail = &at[start.len()..];
        let end = tail
            .find(|c: char| {
                !(word(c) || c == ':' || c == '{' || c == '}' || c == ',' || c == ' ' || c == '\n')
            })
            .unwrap_or(tail.len());
        let segment = &tail[..end];
        let (prefix, group) = match segment.find('{') {
            Some(g) => (&segment[..g], Some(&segment[g + 1..])),
            None => (segment, None),
        };
        let mut base = vec![head];
        base.extend(
            prefix
                .split("::")
                .map(|s| s.trim().to_string())
                .take_while(|s| !s.is_empty() && s.chars().all(word)),
        );
        match group {
            Some(g) => {
                for item in g.split([',', '}']) {
                    let first = item.trim().split("::").next().unwrap_or("").trim();
                    if !first.is_empty() && first.chars().all(word) {
                        let mut p = base.clone();
                        p.push(first.to_string());
                        out.push(p);
                    }
                }
            }
            None => out.push(base),
        }
        rest = &tail[end.min(tail.len())..];
    }
    out
}

/// A file's code with each path that starts at one of its own files (`mod x;`, then `x::f()` or
/// `use x::T`) written from `self::`, so what a parent takes from its files is read too.
fn children_named(text: &str) -> String {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let children: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            name.chars().all(word).then(|| name.to_string())
        })
        .collect();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while let Some(ch) = rest.chars().next() {
        let before = out.chars().last();
        if !before.is_some_and(|b| word(b) || b == ':') {
            for c in &children {
                let at = format!("{c}::");
                if rest.starts_with(&at) {
                    out.push_str("self::");
                    out.push_str(&at);
                    rest = &rest[at.len()..];
                    continue 'scan;
                }
            }
        }
        out.push(ch);
        rest = &rest[ch.len_utf8()..];
    }
    out
}

/// Import circles between the files of one crate, a module's `mod.rs` and its own files
/// included: a `mod.rs` that re-exports or calls its files while they take its types back holds
/// two things (the folder's vocabulary and its entry point) that belong in two files, and two
/// files that each need the other are one idea in two places.
fn file_circles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: std::collections::BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .map(|f| (module_path(src, f), f.clone()))
        .collect();
    let resolve = |from: &[String], path: &[String]| -> Option<Vec<String>> {
        let mut here: Vec<String> = match path[0].as_str() {
            "crate" => Vec::new(),
            "self" => from.to_vec(),
            _ => from[..from.len().saturating_sub(1)].to_vec(),
        };
        let mut rest = &path[1..];
        while rest.first().map(String::as_str) == Some("super") {
            here.pop();
            rest = &rest[1..];
        }
        // The longest prefix that is a file: the module a path starts from, when it names one of
        // that module's own items (`super::Type`, `crate::api::State`).
        let mut best = modules.contains_key(&here).then(|| here.clone());
        for n in rest {
            here.push(n.clone());
            if modules.contains_key(&here) {
                best = Some(here.clone());
            }
        }
        best
    };
    let mut graph =
        std::collections::BTreeMap::<Vec<String>, std::collections::BTreeSet<Vec<String>>>::new();
    for (m, f) in &modules {
        let text = children_named(&std::fs::read_to_string(f).unwrap());
        for p in named_paths(&text) {
            if let Some(to) = resolve(m, &p) {
                if to != *m {
                    graph.entry(m.clone()).or_default().insert(to);
                }
            }
        }
    }
    // For whoever cuts a knot: `SHOW_EDGES_TO=api cargo test --test it architecture_knots::files
    // -- --nocapture` lists the files that import `api` (its `mod.rs`).
    if let Ok(target) = std::env::var("SHOW_EDGES_TO") {
        for (m, d) in &graph {
            if d.iter().any(|x| x.join("::") == target) {
                eprintln!("EDGE {} -> {target}", m.join("::"));
            }
        }
    }
    knots(&graph)
}

/// The strongly connected parts of an import graph with more than one file (Tarjan's
/// algorithm), each as its files' names in order: every circle, not just the first one found.
fn knots(
    graph: &std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>>,
) -> Vec<Vec<String>> {
    #[derive(Default)]
    struct T<'a> {
        index: std::collections::BTreeMap<&'a Vec<String>, usize>,
        low: std::collections::BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: std::collections::BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<String>>,
    }
    fn go<'a>(
        m: &'a Vec<String>,
        g: &'a std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>>,
        t: &mut T<'a>,
    ) {
        let n = t.index.len();
        t.index.insert(m, n);
        t.low.insert(m, n);
        t.stack.push(m);
        t.on.insert(m);
        for d in g.get(m).into_iter().flatten() {
            if !t.index.contains_key(d) {
                go(d, g, t);
                let l = t.low[d].min(t.low[m]);
                t.low.insert(m, l);
            } else if t.on.contains(d) {
                let l = t.index[d].min(t.low[m]);
                t.low.insert(m, l);
            }
        }
        if t.low[m] == t.index[m] {
            let mut part = Vec::new();
            while let Some(x) = t.stack.pop() {
                t.on.remove(x);
                part.push(x.join("::"));
                if x == m {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                t.out.push(part);
            }
        }
    }
    let mut t = T::default();
    for m in graph.keys() {
        if !t.index.contains_key(m) {
            go(m, graph, &mut t);
        }
    }
    t.out.sort();
    t.out
}

/// The knots `src/` still has, to be cut by giving each hub its vocabulary leaf (as
/// `api/state.rs`, `providers/kinds/contract.rs` and `router/types.rs` did). None is left: a
/// knot that forms fails the test. (The list stays so a cut in progress can be named here while
/// it lasts, and must leave it once it is done.)
const KNOTS_TO_CUT: &[&[&str]] = &[];

#[test]
fn files_inside_a_module_import_each_other_without_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for src in ["src", "src-tauri/src"] {
        let knots = file_circles(&root.join(src));
        // `SHOW_KNOTS=1 … -- --nocapture`: every knot, known or not.
        if std::env::var("SHOW_KNOTS").is_ok() {
            for k in &knots {
                eprintln!("KNOT {}", k.join(", "));
            }
        }
        let known = |k: &Vec<String>| {
            src == "src"
                && KNOTS_TO_CUT
                    .iter()
                    .any(|c| k.iter().all(|f| c.contains(&f.as_str())))
        };
        let new: Vec<String> = knots
            .iter()
            .filter(|k| !known(k))
            .map(|k| format!("[{}]", k.join(", ")))
            .collect();
        assert!(
            new.is_empty(),
            "files in {src} that import each other, round (a `mod.rs` that its own files import \
             back holds two things: move its vocabulary to a leaf file): {}",
            new.join(" ")
        );
        if src == "src" {
            for c in KNOTS_TO_CUT {
                assert!(
                    knots
                        .iter()
                        .any(|k| k.iter().any(|f| c.contains(&f.as_str()))),
                    "the knot {c:?} is cut: take it off KNOTS_TO_CUT"
                );
            }
        }
    }
    // The reader sees through `super::` and groups: a made-up pair is a circle.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("m")).unwrap();
    std::fs::write(dir.path().join("m/mod.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.path().join("m/a.rs"), "use super::{b::B, c};\n").unwrap();
    std::fs::write(dir.path().join("m/b.rs"), "fn f() { crate::m::a::g() }\n").unwrap();
    assert_eq!(
        file_circles(dir.path()),
        vec![vec!["m::a".to_string(), "m::b".into()]]
    );
    // A parent that re-exports its file, which takes the parent's type back: a circle too.
    std::fs::create_dir_all(dir.path().join("p")).unwrap();
    std::fs::write(
        dir.path().join("p/mod.rs"),
        "pub mod c;\npub use c::X;\npub struct T;\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("p/c.rs"), "use super::T;\npub struct X;\n").unwrap();
    assert_eq!(
        file_circles(dir.path())[1],
        vec!["p".to_string(), "p::c".into()]
    );
}
