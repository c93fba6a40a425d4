use super::*;
use crate::config::kind::Adoptable;

#[test]
fn a_public_responses_provider_on_a_login_at_chatgpt_is_this_kind() {
    let p = |kind, base_url, client_login| Adoptable {
        kind,
        base_url,
        client_login,
    };
    let backend = "https://chatgpt.com/backend-api/codex";
    assert!(adopts(&p("openai-responses", backend, true)));
    // On a key of Baton's, at the public API, or of another kind: left as it is.
    assert!(!adopts(&p("openai-responses", backend, false)));
    assert!(!adopts(&p(
        "openai-responses",
        "https://api.openai.com/v1",
        true
    )));
    assert!(!adopts(&p("openai-compatible", backend, true)));
    assert!(!adopts(&p(
        "openai-responses",
        "https://chatgpt.com.example/backend-api/codex",
        true
    )));
    assert!(
        ChatGpt.backend()
            && !super::super::contract::Native(&openai_responses::OpenAiResponses).backend()
    );
}
