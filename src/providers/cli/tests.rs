use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::decode::{self, Decoder, Step};
use super::*;
use crate::canonical::{Message, StopReason, Usage};

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn executables_are_checked_before_use() {
    let d = tempfile::tempdir().unwrap();
    let path = Some(d.path().as_os_str());
    script(d.path(), "claude", "#!/usr/bin/env node\nconsole.log(1)\n");
    script(d.path(), "wrapper", "#!/bin/sh\nexec claude \"$@\"\n");
    script(d.path(), "bashy", "#!/usr/bin/env -S bash -e\n");
    std::fs::write(d.path().join("noexec"), "#!/usr/bin/env node\n").unwrap();
    assert_eq!(
        resolve_executable("claude", path).unwrap(),
        d.path().join("claude")
    );
    let abs = d.path().join("claude");
    assert!(resolve_executable(abs.to_str().unwrap(), None).is_ok());
    let e = resolve_executable("wrapper", path).unwrap_err();
    assert!(e.contains("`sh` script"), "{e}");
    let e = resolve_executable("bashy", path).unwrap_err();
    assert!(e.contains("`bash` script"), "{e}");
    let e = resolve_executable("noexec", path).unwrap_err();
    assert!(e.contains("not found on PATH"), "{e}");
    let e = resolve_executable("codex", path).unwrap_err();
    assert!(e.contains("not installed"), "{e}");
    // A native binary is fine.
    assert!(resolve_executable("/bin/true", None).is_ok() || !Path::new("/bin/true").exists());
}

fn req(messages: Vec<(Role, &str)>) -> ChatRequest {
    ChatRequest {
        model: "m".into(),
        messages: messages
            .into_iter()
            .map(|(role, t)| Message {
                role,
                content: vec![Part::Text(t.into())],
                name: None,
            })
            .collect(),
        ..ChatRequest::default()
    }
}

#[test]
fn only_single_prompts_unless_flattened() {
    let one = req(vec![(Role::User, "hi")]);
    assert_eq!(shape_problem(&one, false), None);
    let many = req(vec![
        (Role::User, "hi"),
        (Role::Assistant, "hello"),
        (Role::User, "and?"),
    ]);
    assert!(shape_problem(&many, false)
        .unwrap()
        .contains("flattenHistory"));
    assert_eq!(shape_problem(&many, true), None);
    let t = prompt_text(&many);
    assert!(
        t.contains("User: hi\n") && t.contains("Assistant: hello\n") && t.ends_with("User: and?\n")
    );
    let mut tools = one.clone();
    tools.tools.push(crate::canonical::Tool {
        name: "f".into(),
        description: None,
        parameters: serde_json::json!({}),
        freeform: None,
    });
    assert!(shape_problem(&tools, true).unwrap().contains("tool"));
    let mut image = one.clone();
    image.messages[0].content.push(Part::Image {
        url: "https://x/y.png".into(),
        detail: None,
    });
    assert!(shape_problem(&image, true).unwrap().contains("images"));
}

#[test]
fn argument_vectors_keep_values_attached() {
    let s = |v: Vec<OsString>| -> Vec<String> {
        v.into_iter().map(|a| a.into_string().unwrap()).collect()
    };
    assert_eq!(
        s(command_args(
            super::claude::KIND,
            "sonnet",
            Some("-be brief")
        )),
        [
            "-p",
            "--output-format=stream-json",
            "--verbose",
            "--include-partial-messages",
            "--tools=",
            "--max-turns=1",
            "--no-session-persistence",
            "--setting-sources=",
            "--model=sonnet",
            "--system-prompt=-be brief"
        ]
    );
    assert_eq!(
        s(command_args(
            super::codex::KIND,
            "gpt-5",
            Some("say \"hi\"\n")
        )),
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--sandbox=read-only",
            "--ephemeral",
            "--model=gpt-5",
            "--config",
            "developer_instructions=\"say \\\"hi\\\"\\n\"",
            "-"
        ]
    );
    assert_eq!(
        s(command_args(super::gemini::KIND, "gemini-2.5-pro", None)),
        [
            "--output-format=stream-json",
            "--skip-trust",
            "--approval-mode=plan",
            "--model=gemini-2.5-pro",
            "--prompt="
        ]
    );
    // Gemini CLI has no system-prompt flag: the system text leads the prompt.
    let mut r = req(vec![(Role::User, "hi")]);
    r.system.push("Be brief.".into());
    assert_eq!(
        stdin_and_system(super::gemini::KIND, &r),
        ("Be brief.\n\nhi".to_string(), None)
    );
    assert_eq!(
        stdin_and_system(super::claude::KIND, &r),
        ("hi".to_string(), Some("Be brief.".to_string()))
    );
}

#[test]
fn environment_is_minimal() {
    let get = |k: &str| match k {
        "PATH" => Some(OsString::from("/usr/bin")),
        "HOME" => Some(OsString::from("/home/u")),
        "GROQ_API_KEY" | "BATON_GATEWAY_KEY" | "ANTHROPIC_API_KEY" => Some("secret".into()),
        "CODEX_HOME" => Some("/c".into()),
        _ => None,
    };
    let extra = [(
        "HOME".to_string(),
        crate::providers::Secret::new("/elsewhere"),
    )];
    let env = environment(super::codex::KIND, &extra, &get);
    let names: Vec<&str> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
    assert_eq!(names, ["PATH", "CODEX_HOME", "TZ", "NO_COLOR", "HOME"]);
    assert!(env.contains(&("HOME".into(), "/elsewhere".into())));
    assert!(env.contains(&("TZ".into(), "UTC".into())));
}

fn decode_file(kind: ProviderKind, name: &str) -> Vec<Step> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/cli")
        .join(name);
    let text = std::fs::read_to_string(path).unwrap();
    let mut d = Decoder::new(kind);
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .flat_map(|v| d.line(&v).0)
        .collect()
}

#[test]
fn real_outputs_decode_to_text_usage_and_finish() {
    assert_eq!(
        decode_file(super::claude::KIND, "claude-fake-minimal.out"),
        [
            Step::Text("Hello from the ".into()),
            Step::Text("FAKE server!".into()),
            Step::Usage(Usage {
                input_tokens: 12,
                output_tokens: 7,
                cached_input_tokens: 0,
                cache_write_tokens: 0
            }),
            Step::Finish(StopReason::Stop),
        ],
        "partial deltas once; the whole assistant message is not repeated"
    );
    assert_eq!(
        decode_file(super::codex::KIND, "codex-fake-ok.out"),
        [
            Step::Text("Hello from the FAKE server!".into()),
            Step::Usage(Usage {
                input_tokens: 12,
                output_tokens: 7,
                cached_input_tokens: 0,
                cache_write_tokens: 0
            }),
            Step::Finish(StopReason::Stop),
        ]
    );
    assert_eq!(
        decode_file(super::gemini::KIND, "gemini-fake-ok.out"),
        [
            Step::Text("Hello from the FAKE server!".into()),
            Step::Usage(Usage {
                input_tokens: 24,
                output_tokens: 14,
                cached_input_tokens: 0,
                cache_write_tokens: 0
            }),
            Step::Finish(StopReason::Stop),
        ]
    );
    // Errors: the "<synthetic>" assistant message is not an answer.
    assert_eq!(
        decode_file(super::claude::KIND, "claude-nologin-stream-json.out"),
        [Step::Failed]
    );
    assert_eq!(
        decode_file(super::codex::KIND, "codex-fake-err429.out"),
        [Step::Failed]
    );
}

#[test]
fn gemini_sleeping_on_a_quota_is_fatal() {
    let line = "Attempt 1 failed: You have exhausted your capacity on this model. Your quota will reset after 2h13m47s.. Retrying after 8050934ms...";
    assert!(decode::stderr_is_fatal(super::gemini::KIND, line));
    assert!(decode::stderr_is_fatal(
        super::gemini::KIND,
        "Attempt 2 failed. Retrying after 60000ms..."
    ));
    assert!(!decode::stderr_is_fatal(
        super::gemini::KIND,
        "Attempt 1 failed. Retrying with backoff... Error: fetch failed"
    ));
    assert!(!decode::stderr_is_fatal(super::claude::KIND, line));
    assert!(!decode::stderr_worth_keeping("    at file:///x.js:1:2"));
    assert!(decode::stderr_worth_keeping("Please set an Auth method"));
}
