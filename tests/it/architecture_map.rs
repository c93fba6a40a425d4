//! ARCHITECTURE.md's module map stays true: every source file is in it, and every path it
//! names exists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

pub(crate) fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
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

/// The library's top-level modules each file of `module` names through `crate::…` (comments and
/// the unit-test module at a file's end left out: tests may reach anywhere).
fn imports(root: &Path) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut graph = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
    for f in files {
        let rel = f.strip_prefix(root.join("src")).unwrap();
        let module = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        // The binary's own code (main.rs, cli/) and the crate root are not layers.
        if matches!(module.as_str(), "main" | "lib" | "cli") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let body = code_of(&text);
        let code: String = body
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        let deps = graph.entry(module.clone()).or_default();
        let mut rest = code.as_str();
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                group[..end]
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap().trim())
                    .collect()
            } else {
                vec![rest
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .next()
                    .unwrap()]
            };
            for n in names {
                // Lower-case names are modules; types re-exported at the root are not layers.
                if !n.is_empty() && n != module && n.starts_with(|c: char| c.is_ascii_lowercase()) {
                    deps.insert(n.to_string());
                }
            }
        }
    }
    graph
}

#[test]
fn the_library_modules_import_each_other_without_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let graph = imports(root);
    // Sanity: the reader sees the edges every request takes.
    for (from, to) in [
        ("api", "router"),
        ("router", "providers"),
        ("gateway", "router"),
    ] {
        assert!(
            graph.get(from).is_some_and(|d| d.contains(to)),
            "expected {from} -> {to} in {graph:#?}"
        );
    }
    // Depth-first search; a module met again on the current path closes a circle.
    fn visit<'a>(
        m: &'a str,
        graph: &'a std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut std::collections::BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| *p == m) {
            let mut circle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
            circle.push(m.to_string());
            return Some(circle);
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = std::collections::BTreeSet::new();
    for m in graph.keys() {
        if let Some(circle) = visit(m, &graph, &mut Vec::new(), &mut done) {
            panic!("import circle: {}", circle.join(" -> "));
        }
    }
    // Nothing below the API reaches the composition root or the server.
    for (m, deps) in &graph {
        if !matches!(m.as_str(), "api" | "gateway" | "server" | "serve") {
            assert!(
                !deps.contains("gateway") && !deps.contains("server"),
                "{m} imports the composition root: {deps:?}"
            );
        }
    }
}

/// Functions over 80 lines that do not say why they are long, and files over 600 lines, in the
/// code (unit-test modules and test files left out: a test is a scenario, read top to bottom).
#[test]
fn functions_stay_short_unless_they_say_why_and_files_stay_under_600_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "src-tauri/src", "testkit/src"] {
        sources(&root.join(dir), &mut files);
    }
    let mut long = Vec::new();
    let mut big = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        if text.lines().count() > 600 {
            big.push(format!("{rel} ({} lines)", text.lines().count()));
        }
        // An inline test module at the end is left out; an out-of-line `mod tests;` is only a
        // declaration, and the file goes on past it.
        let code = text.split("\n#[cfg(test)]\nmod tests {").next().unwrap();
        let lines: Vec<&str> = code.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let sig = t
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ")
                .trim_start_matches("async ")
                .trim_start_matches("const ");
            if !sig.starts_with("fn ") || t.ends_with(';') {
                continue;
            }
            let indent = line.len() - t.len();
            let close = " ".repeat(indent) + "}";
            let Some(end) = lines[i + 1..]
                .iter()
                .position(|l| l.starts_with(&close) && l.len() - l.trim_start().len() == indent)
            else {
                continue;
            };
            let n = end + 2;
            if n <= 80 {
                continue;
            }
            let said = lines[i.saturating_sub(12)..i]
                .iter()
                .any(|l| l.contains("Long because"));
            if !said {
                let name = sig[3..].split(['(', '<']).next().unwrap_or_default();
                long.push(format!("{rel}:{} {name} ({n} lines)", i + 1));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over 80 lines without a `Long because …` comment saying why: {long:#?}"
    );
    assert!(big.is_empty(), "files over 600 lines: {big:?}");
}

/// A file's code: without an inline test module (whatever its name) at its end.
pub(crate) fn code_of(text: &str) -> &str {
    text.match_indices("\n#[cfg(test)]\nmod ")
        .find(|(i, m)| {
            let rest = &text[i + m.len()..];
            let name = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next();
            name.is_some_and(|n| rest[n.len()..].starts_with(" {"))
        })
        .map_or(text, |(i, _)| &text[..i])
}

/// A kind or a dialect is decided in one place: its folder and its registry. A `match` arm, an
/// `==` or a prefix test on one anywhere else (the Rust or the UI) is a decision a new kind or
/// dialect would compile past silently. The kinds and CLI programs are the registry's own list.
#[test]
fn kinds_and_dialects_are_named_only_in_their_folders_and_registries() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    sources(&root.join("src-tauri/src"), &mut files);
    for f in std::fs::read_dir(root.join("ui")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "js") {
            files.push(f);
        }
    }
    let kinds = baton::config::ProviderKind::all();
    assert!(kinds.len() >= 11, "the registry lists {kinds:?}");
    let mut names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    names.extend(kinds.iter().filter_map(|k| k.cli_program()));
    // Where a kind may be decided: its own folder (a folder under `providers/kinds/` or
    // `providers/cli/`). Where a wire or dialect may: the canonical translators, the kinds,
    // the dialects.
    let in_kind_folder = |rel: &str| {
        ["src/providers/kinds/", "src/providers/cli/"]
            .iter()
            .any(|p| rel.strip_prefix(p).is_some_and(|rest| rest.contains('/')))
    };
    let wire_ok = [
        "src/canonical/",
        "src/providers/kinds/",
        "src/api/dialect/",
        "src/config/kind.rs",
    ];
    let dialect_ok = ["src/api/dialect/"];
    let word_end = |rest: &str| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_');
    let mut named = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        if rel.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("\n#[cfg(test)]\nmod tests {").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            let l = line.split("//").next().unwrap();
            if !in_kind_folder(&rel) && decides_a_kind(l, &names) {
                named.push(format!("{rel}:{} {}", i + 1, l.trim()));
            }
            for wire in ["OpenAi", "Responses", "Anthropic", "Gemini"] {
                let name = format!("Wire::{wire}");
                let hit = l
                    .match_indices(&name)
                    .any(|(at, _)| word_end(&l[at + name.len()..]));
                if hit && !wire_ok.iter().any(|p| rel.starts_with(p)) {
                    named.push(format!("{rel}:{} {}", i + 1, l.trim()));
                }
            }
            for dialect in ["anthropic", "gemini", "openai", "responses"] {
                let name = format!("dialect::{dialect}");
                let hit = l
                    .match_indices(&name)
                    .any(|(at, _)| word_end(&l[at + name.len()..]));
                if hit && !dialect_ok.iter().any(|p| rel.starts_with(p)) {
                    named.push(format!("{rel}:{} {}", i + 1, l.trim()));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "a kind or dialect decided outside its folder and registry: {named:#?}"
    );
    // The check sees what it is for.
    assert!(decides_a_kind(r#"if k === "bedrock" {"#, &names));
    assert!(decides_a_kind(r#"    "codex" => run(),"#, &names));
    assert!(decides_a_kind(r#"k.startsWith("vertex-")"#, &names));
    assert!(decides_a_kind(r#"p.kind != "gemini-cli""#, &names));
    assert!(!decides_a_kind(r#"let app = "codex";"#, &names));
}

/// Whether a line decides on a kind or CLI program by name: the name as a string compared
/// (`==`, `===`, `!=`), matched (`"x" =>`, `"x" |`), or a part of one tested as a prefix or
/// suffix.
fn decides_a_kind(line: &str, names: &[&str]) -> bool {
    let mut rest = line;
    while let Some(open) = rest.find(['"', '\'']) {
        let q = rest.as_bytes()[open] as char;
        let after = &rest[open + 1..];
        let Some(close) = after.find(q) else {
            break;
        };
        let lit = &after[..close];
        let before = rest[..open].trim_end();
        let next = after[close + 1..].trim_start();
        // A vendor shares some kinds' names, and is not one.
        let named = names.contains(&lit) && !before.contains("vendor");
        let compared = ["==", "!="].iter().any(|op| before.ends_with(op))
            || ["=>", "|", "==", "!="]
                .iter()
                .any(|op| next.starts_with(op));
        // A family's part (`-cli`, `vertex-`), shared by two names or more.
        let affix = lit.len() >= 3
            && names
                .iter()
                .filter(|n| **n != lit && (n.starts_with(lit) || n.ends_with(lit)))
                .count()
                >= 2
            && ["starts_with(", "startsWith(", "ends_with(", "endsWith("]
                .iter()
                .any(|f| before.ends_with(f));
        if (named && compared) || affix {
            return true;
        }
        rest = &after[close + 1..];
    }
    false
}

/// One admission, by construction: the router is handed work in one place (`api/pipeline.rs`,
/// which serves only an `Admitted`), and only `api/admit.rs` makes an `Admitted`. A new
/// transport that called the router, or built its own admission, fails here.
#[test]
fn work_reaches_the_router_only_through_the_one_admission() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut dispatchers = Vec::new();
    let mut makers = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        if rel.starts_with("src/router/") {
            continue;
        }
        if text.contains("router::dispatch(") {
            dispatchers.push(rel.clone());
        }
        let builds = text.lines().any(|l| {
            let l = l.trim();
            l.contains("Admitted {") && !l.contains("struct Admitted") && !l.starts_with("impl ")
        });
        if builds {
            makers.push(rel.clone());
        }
    }
    assert_eq!(
        dispatchers,
        ["src/api/pipeline.rs"],
        "only the pipeline dispatches"
    );
    assert_eq!(makers, ["src/api/admit.rs"], "only the admission admits");
    let pipeline = std::fs::read_to_string(root.join("src/api/pipeline.rs")).unwrap();
    assert!(
        pipeline.contains("admitted: Admitted") && pipeline.contains("super::admit::admit("),
        "the pipeline serves admitted work and admits through api/admit.rs"
    );
}
