//! The README and the book (`docs/src`) say only what exists. Every relative link points at a
//! file that is there (and an anchor at a heading of it); every `baton …` command they show
//! runs (`--help` answers) with the flags they give it; every `scripts/…` they name is a file;
//! every dotted configuration key (`routing.hedge.budgetPercent`) is in the schema, and every
//! JSON configuration or provider they show is valid under it. The configuration reference is
//! `baton config reference`'s output, regenerated with
//! `baton config reference > docs/src/config-reference.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every chapter of the book, with their text.
fn pages() -> Vec<(PathBuf, String)> {
    let mut out = vec![root().join("README.md")];
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(root().join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    chapters.sort();
    out.extend(chapters);
    out.into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// A page's text outside its fenced code blocks, and its code blocks with their language.
fn split(text: &str) -> (String, Vec<(String, String)>) {
    let (mut prose, mut blocks) = (String::new(), Vec::new());
    let mut fence: Option<(String, String)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        match (&mut fence, t.strip_prefix("```")) {
            (None, Some(lang)) => fence = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some(_)) => blocks.extend(fence.take()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    (prose, blocks)
}

/// The `code spans` of a text.
fn spans(prose: &str) -> Vec<String> {
    prose
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_string())
        .collect()
}

/// mdBook's anchor for a heading: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    split(text)
        .0
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('#'))
        .map(|h| slug(h.trim_start_matches('#')))
        .collect()
}

/// Every `](target)` of the page's prose.
fn links(prose: &str) -> Vec<String> {
    prose
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &prose[i + 2..];
            rest.find(')').map(|end| rest[..end].to_string())
        })
        .collect()
}

#[test]
fn every_relative_link_and_anchor_exists() {
    let mut broken = Vec::new();
    for (page, text) in pages() {
        let (prose, _) = split(&text);
        for link in links(&prose) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", rel(&page)));
                continue;
            }
            if !anchor.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&target).unwrap();
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{}: {link} (no such heading)", rel(&page)));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every chapter is in the book's table of contents, and the README's set-up commands come
/// first: they are on its first screen.
#[test]
fn every_chapter_is_in_the_summary_and_the_readme_is_a_page() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    for (page, _) in pages().iter().skip(1) {
        let name = page.file_name().unwrap().to_string_lossy().to_string();
        if name != "SUMMARY.md" {
            assert!(
                summary.contains(&format!("]({name})")),
                "{name} is not in SUMMARY.md"
            );
        }
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        readme.lines().count() <= 300,
        "the README is a page, not a manual"
    );
    let first_screen: Vec<&str> = readme.lines().take(40).collect();
    for command in ["scripts/run", "scripts/test"] {
        assert!(
            first_screen.contains(&command),
            "`{command}` is not on the README's first screen"
        );
    }
}

/// The `baton …` invocations a page shows: in shell blocks (a line's commands, after `$(`,
/// `&&`, `;` or `|` too) and in code spans.
fn commands(text: &str) -> Vec<Vec<String>> {
    let (prose, blocks) = split(text);
    let mut lines: Vec<String> = spans(&prose);
    for (lang, body) in blocks {
        if ["sh", "bash", "shell", "console", ""].contains(&lang.as_str()) {
            lines.extend(body.lines().map(str::to_string));
        }
    }
    let mut out = Vec::new();
    for line in lines {
        let line = line.split(" #").next().unwrap_or_default();
        for part in line.split(['|', ';', '(', ')']).flat_map(|p| p.split("&&")) {
            let words: Vec<String> = part.split_whitespace().map(str::to_string).collect();
            if let Some(at) = words.iter().position(|w| w == "baton") {
                if words.len() > at + 1 {
                    out.push(words[at + 1..].to_vec());
                }
            }
        }
    }
    out
}

#[test]
fn every_documented_command_and_flag_exists() {
    // (subcommand path) → the flags shown with it
    let mut wanted: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    let mut scripts = BTreeSet::new();
    for (page, text) in pages() {
        for words in commands(&text) {
            // The subcommands: the leading words that are names, not values or flags.
            let path: Vec<String> = words
                .iter()
                .take_while(|w| {
                    w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
                })
                .take(2)
                .cloned()
                .collect();
            if path.is_empty() || path[0] == "…" {
                continue;
            }
            let flags = wanted.entry(path).or_default();
            for w in &words {
                if let Some(flag) = w.strip_prefix("--") {
                    let name = flag.split('=').next().unwrap_or_default();
                    if !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                    {
                        flags.insert(format!("--{name}"));
                    }
                }
            }
        }
        for word in text.split(|c: char| c.is_whitespace() || "`()[],'\"".contains(c)) {
            if let Some(name) = word.strip_prefix("scripts/") {
                let name = name.trim_end_matches(['.', ':', ';']);
                if !name.is_empty() {
                    scripts.insert((rel(&page), format!("scripts/{name}")));
                }
            }
        }
    }
    assert!(wanted.len() >= 10, "{wanted:?}");
    let mut missing = Vec::new();
    let bin = env!("CARGO_BIN_EXE_baton");
    for (path, flags) in &wanted {
        // `baton config reference` is a command; `baton serve --config x.json` has one word.
        let mut args = path.clone();
        let mut help = std::process::Command::new(bin)
            .args(&args)
            .arg("--help")
            .output()
            .unwrap();
        if !help.status.success() && args.len() > 1 {
            args.pop();
            help = std::process::Command::new(bin)
                .args(&args)
                .arg("--help")
                .output()
                .unwrap();
        }
        if !help.status.success() {
            missing.push(format!("baton {}", path.join(" ")));
            continue;
        }
        let text = String::from_utf8_lossy(&help.stdout).to_string();
        for flag in flags {
            if flag != "--help" && !text.contains(flag.as_str()) {
                missing.push(format!("baton {} {flag}", args.join(" ")));
            }
        }
    }
    for (page, script) in &scripts {
        if !root().join(script).exists() {
            missing.push(format!("{page}: {script}"));
        }
    }
    assert!(
        missing.is_empty(),
        "documented but not there:\n{}",
        missing.join("\n")
    );
}

/// The schema's key paths (`routing.hedge.budgetPercent`, `providers[].keys`), from the
/// reference generated from it.
fn schema_paths() -> BTreeSet<String> {
    baton::config::reference::markdown()
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

const SECTIONS: [&str; 10] = [
    "server",
    "routing",
    "log",
    "state",
    "localFallback",
    "webSearch",
    "providers[]",
    "gatewayKeys[]",
    "routes",
    "modelMap",
];

#[test]
fn every_documented_config_key_exists_and_every_example_is_valid() {
    let paths = schema_paths();
    assert!(paths.contains("routing.hedge.budgetPercent"), "{paths:?}");
    let schema = baton::config::json_schema();
    let whole = jsonschema::validator_for(&schema).unwrap();
    let mut provider_schema = schema.clone();
    provider_schema["$ref"] = serde_json::json!("#/$defs/ProviderConfig");
    for k in ["properties", "required", "additionalProperties", "type"] {
        provider_schema.as_object_mut().unwrap().remove(k);
    }
    let one_provider = jsonschema::validator_for(&provider_schema).unwrap();
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        if page.ends_with("config-reference.md") {
            continue;
        }
        let (prose, blocks) = split(&text);
        for span in spans(&prose) {
            let dotted = span.split([' ', '=', ':']).next().unwrap_or_default();
            let Some(section) = SECTIONS
                .iter()
                .find(|s| dotted.starts_with(&format!("{s}.")))
            else {
                continue;
            };
            if dotted.ends_with('.')
                || !dotted[section.len() + 1..]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "[]._".contains(c))
            {
                continue;
            }
            if !paths.contains(dotted) {
                wrong.push(format!(
                    "{}: `{dotted}` is not a configuration key",
                    rel(&page)
                ));
            }
        }
        for (lang, body) in blocks {
            if !lang.starts_with("json") {
                continue;
            }
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&body) else {
                continue;
            };
            let Some(obj) = value.as_object() else {
                continue;
            };
            let top = obj.keys().all(|k| {
                SECTIONS.iter().any(|s| s.trim_end_matches("[]") == k) || k.starts_with('$')
            });
            let check = if top {
                &whole
            } else if obj.contains_key("kind") || obj.contains_key("catalog") {
                &one_provider
            } else {
                continue;
            };
            let errors: Vec<String> = check.iter_errors(&value).map(|e| e.to_string()).collect();
            if !errors.is_empty() {
                wrong.push(format!(
                    "{}: an example the schema refuses: {}\n{body}",
                    rel(&page),
                    errors.join("; ")
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_configuration_reference_is_the_schemas_own() {
    let written = std::fs::read_to_string(root().join("docs/src/config-reference.md")).unwrap();
    assert!(
        written == baton::config::reference::markdown(),
        "docs/src/config-reference.md is out of date: run `baton config reference > docs/src/config-reference.md`"
    );
}
