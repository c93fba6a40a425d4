use super::*;

struct Setup {
    _dir: tempfile::TempDir,
    homes: Homes,
    journal: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    Setup {
        homes: Homes::under(&dir.path().join("home")),
        journal: dir.path().join("data/connect"),
        _dir: dir,
    }
}

fn target(mode: Mode) -> Target {
    Target {
        origin: "http://127.0.0.1:8787".into(),
        key: "bt-0123456789abcdefghij".into(),
        mode,
        statusline: None,
    }
}

fn connect(s: &Setup, app: App, t: &Target) -> Plan {
    let plan = plan_connect(app, &s.homes, t, &s.journal).unwrap();
    apply(&plan, &s.journal).unwrap();
    plan
}

fn undo(s: &Setup, app: App) -> Plan {
    let plan = plan_undo(app, &s.journal).unwrap();
    apply(&plan, &s.journal).unwrap();
    plan
}

const SETTINGS: &str = "{\n  // mine\n  \"model\": \"opus\",\n  \"env\": {\"FOO\": \"1\"}\n}\n";

#[test]
fn connect_then_undo_gives_back_the_same_bytes() {
    let s = setup();
    let file = s.homes.claude.join("settings.json");
    std::fs::create_dir_all(&s.homes.claude).unwrap();
    std::fs::write(&file, SETTINGS).unwrap();
    let plan = connect(&s, App::ClaudeCode, &target(Mode::Keys));
    let now = std::fs::read_to_string(&file).unwrap();
    assert!(now.contains("// mine"), "{now}");
    let v: serde_json::Value = serde_json::from_str(&now.replace("// mine", "")).unwrap();
    assert_eq!(v["env"]["ANTHROPIC_BASE_URL"], "http://127.0.0.1:8787");
    assert_eq!(v["env"]["ANTHROPIC_AUTH_TOKEN"], "bt-0123456789abcdefghij");
    assert_eq!(v["env"]["FOO"], "1");
    // The preview shows the change and never the key.
    let diff = plan.files[0].diff(&["bt-0123456789abcdefghij"]);
    assert!(
        diff.contains("+") && diff.contains("ANTHROPIC_BASE_URL"),
        "{diff}"
    );
    assert!(!diff.contains("0123456789abcdefghij"), "{diff}");
    // Connecting again changes nothing.
    assert!(
        !plan_connect(App::ClaudeCode, &s.homes, &target(Mode::Keys), &s.journal)
            .unwrap()
            .changes()
    );
    let u = undo(&s, App::ClaudeCode);
    assert!(u.notes.is_empty(), "{:?}", u.notes);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), SETTINGS);
    assert!(connected(App::ClaudeCode, &s.journal).unwrap().is_none());
    assert!(matches!(
        plan_undo(App::ClaudeCode, &s.journal),
        Err(ConnectError::NotConnected(_))
    ));
}

#[test]
fn a_file_baton_created_goes_away_with_its_folders() {
    let s = setup();
    connect(&s, App::Codex, &target(Mode::Keys));
    let file = s.homes.codex.join("config.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    assert_eq!(doc["model_provider"].as_str(), Some("baton"));
    assert_eq!(
        doc["model_providers"]["baton"]["base_url"].as_str(),
        Some("http://127.0.0.1:8787/v1")
    );
    assert_eq!(
        doc["model_providers"]["baton"]["wire_api"].as_str(),
        Some("responses")
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a new file holding a key is private");
    }
    undo(&s, App::Codex);
    assert!(!file.exists());
    assert!(!s.homes.codex.exists(), "the folder Baton made is gone");
}

#[test]
fn a_second_connect_keeps_the_first_original_and_switching_mode_drops_the_other_credential() {
    let s = setup();
    let file = s.homes.claude.join("settings.json");
    std::fs::create_dir_all(&s.homes.claude).unwrap();
    std::fs::write(&file, "{\"env\": {\"ANTHROPIC_AUTH_TOKEN\": \"mine\"}}").unwrap();
    connect(&s, App::ClaudeCode, &target(Mode::Keys));
    let mut t = target(Mode::Login);
    t.statusline = Some("baton statusline".into());
    connect(&s, App::ClaudeCode, &t);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        v["env"]["ANTHROPIC_AUTH_TOKEN"], "mine",
        "the user's own value came back"
    );
    assert_eq!(
        v["env"]["ANTHROPIC_CUSTOM_HEADERS"],
        "x-baton-key: bt-0123456789abcdefghij"
    );
    assert_eq!(v["statusLine"]["command"], "baton statusline");
    undo(&s, App::ClaudeCode);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"env\": {\"ANTHROPIC_AUTH_TOKEN\": \"mine\"}}"
    );
}

#[test]
fn undo_after_the_user_edited_takes_out_only_batons_entries() {
    let s = setup();
    let file = s.homes.codex.join("config.toml");
    std::fs::create_dir_all(&s.homes.codex).unwrap();
    std::fs::write(&file, "# codex\nmodel_provider = \"work\"\n").unwrap();
    connect(&s, App::Codex, &target(Mode::Keys));
    let edited =
        std::fs::read_to_string(&file).unwrap() + "\n[mcp_servers.docs]\ncommand = \"docs-mcp\"\n";
    std::fs::write(&file, edited).unwrap();
    let u = undo(&s, App::Codex);
    let text = std::fs::read_to_string(&file).unwrap();
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    assert_eq!(doc["model_provider"].as_str(), Some("work"), "{text}");
    assert!(
        doc.get("model_providers")
            .and_then(|t| t.get("baton"))
            .is_none(),
        "{text}"
    );
    assert_eq!(
        doc["mcp_servers"]["docs"]["command"].as_str(),
        Some("docs-mcp"),
        "{text}"
    );
    assert!(text.starts_with("# codex\n"), "{text}");
    assert!(
        u.notes.iter().any(|n| n.contains("only Baton's entries")),
        "{:?}",
        u.notes
    );
}

#[test]
fn a_file_that_does_not_parse_is_refused_and_left_alone() {
    let s = setup();
    let file = s.homes.claude.join("settings.json");
    std::fs::create_dir_all(&s.homes.claude).unwrap();
    std::fs::write(&file, "{\"env\": {\"A\": 1,,}").unwrap();
    let e = plan_connect(App::ClaudeCode, &s.homes, &target(Mode::Keys), &s.journal).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("settings.json")
            && msg.contains("not valid JSON")
            && msg.contains("does not overwrite"),
        "{msg}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\"env\": {\"A\": 1,,}"
    );
    assert!(connected(App::ClaudeCode, &s.journal).unwrap().is_none());
}

#[test]
fn a_change_between_preview_and_write_is_refused() {
    let s = setup();
    let plan = plan_connect(App::Opencode, &s.homes, &target(Mode::Keys), &s.journal).unwrap();
    let file = s.homes.opencode.join("opencode.json");
    std::fs::create_dir_all(&s.homes.opencode).unwrap();
    std::fs::write(&file, "{}").unwrap();
    assert!(matches!(
        apply(&plan, &s.journal),
        Err(ConnectError::Changed { .. })
    ));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}");
}

/// A client's existing config file readable by everyone gets the gateway key only once it is
/// private, and the user is told which file changed mode.
#[cfg(unix)]
#[test]
fn a_world_readable_file_that_gets_a_key_is_made_private_and_said_so() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup();
    std::fs::create_dir_all(&s.homes.claude).unwrap();
    let file = s.homes.claude.join("settings.json");
    std::fs::write(&file, SETTINGS).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let plan = plan_connect(App::ClaudeCode, &s.homes, &target(Mode::Keys), &s.journal).unwrap();
    let tightened = apply(&plan, &s.journal).unwrap();
    assert_eq!(tightened, vec![(file.clone(), 0o644)]);
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // A private file is left as it is, and nothing is said.
    undo(&s, App::ClaudeCode);
    let plan = plan_connect(App::ClaudeCode, &s.homes, &target(Mode::Keys), &s.journal).unwrap();
    assert!(apply(&plan, &s.journal).unwrap().is_empty());
}

#[cfg(unix)]
#[test]
fn a_symlinked_file_stays_a_link_and_keeps_its_mode_made_private() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup();
    let dotfiles = s.homes.claude.parent().unwrap().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::create_dir_all(&s.homes.claude).unwrap();
    let real = dotfiles.join("settings.json");
    std::fs::write(&real, SETTINGS).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
    let link = s.homes.claude.join("settings.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    connect(&s, App::ClaudeCode, &target(Mode::Keys));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real)
        .unwrap()
        .contains("ANTHROPIC_BASE_URL"));
    // It now holds the gateway key: others may not read it any more.
    assert_eq!(
        std::fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o600
    );
    undo(&s, App::ClaudeCode);
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&real).unwrap(), SETTINGS);
}

#[test]
fn opencode_gets_a_provider_and_its_default_model_in_the_jsonc_it_already_has() {
    let s = setup();
    std::fs::create_dir_all(&s.homes.opencode).unwrap();
    let file = s.homes.opencode.join("opencode.jsonc");
    std::fs::write(&file, "{\n  // theme\n  \"theme\": \"dark\",\n}\n").unwrap();
    connect(&s, App::Opencode, &target(Mode::Keys));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("// theme") && text.contains("\"model\": \"baton/auto\""),
        "{text}"
    );
    let d = doc::Doc::parse(doc::Format::Json, &text).unwrap();
    assert_eq!(
        d.get(&["provider", "baton", "options", "baseURL"]),
        Some(serde_json::json!("http://127.0.0.1:8787/v1"))
    );
    assert!(!s.homes.opencode.join("opencode.json").exists());
}

/// Gemini CLI: its sign-in set to the Gemini API key in settings.json, Baton's address and
/// key in `.env` beside the user's own lines; undo gives both back byte for byte, and a user's
/// later edit of `.env` keeps everything but Baton's two lines.
#[test]
fn gemini_cli_gets_its_auth_type_and_a_dotenv_and_undo_gives_both_back() {
    let s = setup();
    std::fs::create_dir_all(&s.homes.gemini).unwrap();
    let settings = s.homes.gemini.join("settings.json");
    let env = s.homes.gemini.join(".env");
    let own_settings = "{\n  \"ui\": {\"theme\": \"GitHub\"}\n}\n";
    let own_env =
        "# mine\nGOOGLE_CLOUD_PROJECT=my-project\nexport GEMINI_MODEL=\"gemini-2.5-pro\"\n";
    std::fs::write(&settings, own_settings).unwrap();
    std::fs::write(&env, own_env).unwrap();
    let plan = connect(&s, App::GeminiCli, &target(Mode::Keys));
    assert_eq!(plan.files.len(), 2);
    assert!(
        plan.notes.iter().any(|n| n.contains("trust")),
        "{:?}",
        plan.notes
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(v["security"]["auth"]["selectedType"], "gemini-api-key");
    assert_eq!(v["ui"]["theme"], "GitHub");
    let written = std::fs::read_to_string(&env).unwrap();
    assert_eq!(
        written,
        format!("{own_env}GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8787\nGEMINI_API_KEY=bt-0123456789abcdefghij\n")
    );
    let diff = plan.files[1].diff(&["bt-0123456789abcdefghij"]);
    assert!(diff.contains("+GOOGLE_GEMINI_BASE_URL"), "{diff}");
    assert!(
        !diff.contains("0123456789abcdefghij"),
        "the key is masked: {diff}"
    );
    undo(&s, App::GeminiCli);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), own_settings);
    assert_eq!(std::fs::read_to_string(&env).unwrap(), own_env);

    connect(&s, App::GeminiCli, &target(Mode::Keys));
    let edited = format!("{}LATER=1\n", std::fs::read_to_string(&env).unwrap());
    std::fs::write(&env, &edited).unwrap();
    undo(&s, App::GeminiCli);
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        format!("{own_env}LATER=1\n")
    );
    // It has no login of its own for Baton to pass through.
    assert!(matches!(
        choose_mode(App::GeminiCli, Some(Mode::Login), &[]),
        Err(ConnectError::NoLogin(_))
    ));
    assert!(App::parse("cursor")
        .unwrap_err()
        .to_string()
        .contains("claude-code, codex"));
}
