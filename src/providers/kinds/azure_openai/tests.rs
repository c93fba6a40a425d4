//! Azure OpenAI's platform through the seam alone: the URL for a deployment in both forms, the
//! key in `api-key` (an Entra token as a bearer), and where its models are listed.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::providers::resolve::resolve;
use crate::providers::ProviderRuntime;

fn entry(base: &str, version: Option<&str>, key: &str) -> ProviderEntry {
    let mut v = json!({"id": "az", "kind": "azure-openai", "baseUrl": base,
        "models": ["gpt-4o-prod"], "keys": [{"env": "K"}]});
    if let Some(ver) = version {
        v["apiVersion"] = json!(ver);
    }
    let config = serde_json::from_value(v).expect("a provider");
    let key = key.to_string();
    resolve(config, Arc::new(ProviderRuntime::new(None)), &move |_| {
        Some(key.clone())
    })
}

#[test]
fn a_deployment_is_in_the_path_with_the_api_version() {
    let p = entry("https://acme.openai.azure.com/", None, "k");
    let url = AzureOpenAi.url(&p, "gpt-4o-prod", false).expect("a URL");
    assert_eq!(
        url.as_str(),
        "https://acme.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    );
    let p = entry(
        "https://acme.openai.azure.com",
        Some("2025-04-01-preview"),
        "k",
    );
    let url = AzureOpenAi
        .url(&p, "my deployment/x", false)
        .expect("a URL");
    assert_eq!(
        url.as_str(),
        "https://acme.openai.azure.com/openai/deployments/my%20deployment%2Fx/chat/completions?api-version=2025-04-01-preview",
        "a deployment name is one path segment, whatever it holds"
    );
    assert_eq!(AzureOpenAi.models_url(&p), None);
}

#[test]
fn the_v1_api_takes_the_deployment_as_model_and_no_version() {
    let p = entry(
        "https://acme.openai.azure.com/openai/v1",
        Some("2024-10-21"),
        "k",
    );
    let url = AzureOpenAi.url(&p, "gpt-4o-prod", false).expect("a URL");
    assert_eq!(
        url.as_str(),
        "https://acme.openai.azure.com/openai/v1/chat/completions"
    );
    assert_eq!(
        AzureOpenAi.models_url(&p).as_deref(),
        Some("https://acme.openai.azure.com/openai/v1/models")
    );
}

#[test]
fn the_key_goes_in_api_key_and_an_entra_token_as_a_bearer() {
    let client = crate::providers::kinds::tests::client();
    for (secret, header, value) in [
        (
            "0123456789abcdef0123456789abcdef",
            "api-key",
            "0123456789abcdef0123456789abcdef",
        ),
        (
            "eyJhbGciOi.eyJhdWQiOi.c2lnbmF0dXJl",
            "authorization",
            "Bearer eyJhbGciOi.eyJhdWQiOi.c2lnbmF0dXJl",
        ),
    ] {
        let p = entry("https://acme.openai.azure.com", None, secret);
        let rb = crate::providers::kinds::authorize(
            &client,
            &p,
            client.get("https://acme.openai.azure.com/x"),
            p.keys.first(),
            0,
        )
        .expect("authorised");
        let req = rb.build().expect("a request");
        assert_eq!(req.headers()[header], value);
        let other = if header == "api-key" {
            "authorization"
        } else {
            "api-key"
        };
        assert!(req.headers().get(other).is_none(), "one credential only");
        assert!(req.headers()[header].is_sensitive());
    }
}
