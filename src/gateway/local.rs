//! The local last-resort server as a provider (a leaf): an OpenAI-compatible server found on
//! this machine (Ollama, LM Studio…), free, tried after every configured provider.

/// The provider for the local server at `base_url` serving `models`.
pub(super) fn last_resort(base_url: &str, models: Vec<String>) -> crate::config::ProviderConfig {
    crate::config::ProviderConfig {
        id: crate::config::LOCAL_PROVIDER_ID.into(),
        name: Some("Local server (last resort)".into()),
        kind: crate::providers::kinds::openai_compat::KIND,
        base_url: base_url.to_string(),
        api_version: None,
        region: None,
        project: None,
        aws_profile: None,
        proxy: None,
        proxy_login: None,
        executable: None,
        env: Default::default(),
        flatten_history: false,
        credentials: Default::default(),
        overage: Default::default(),
        hedge: None,
        keys: Vec::new(),
        models: models
            .into_iter()
            .map(crate::config::ModelEntry::Name)
            .collect(),
        priority: i64::MAX,
        enabled: true,
        auto: true,
        max_concurrency: None,
        headers: Default::default(),
        timeouts: Default::default(),
        capabilities: Default::default(),
        day_reset: None,
        limit_scope: None,
        model_fallback: true,
        retries: 1,
        reserve: Default::default(),
        limits: Default::default(),
        tier: Some(crate::pricing::Tier::Free),
    }
}
