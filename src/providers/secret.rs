//! A secret and a key of a provider's (a leaf): what every part of the providers holds and none
//! shows.

/// A secret string whose `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// `sk-…abcd`: enough to recognise a key, never enough to use it.
    pub fn masked(&self) -> String {
        let s = &self.0;
        let tail: String = s
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let head: String = s.chars().take(3).collect();
        if s.chars().count() <= 8 {
            "…".into()
        } else {
            format!("{head}…{tail}")
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(*****)")
    }
}

/// One usable API key of a provider.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// Stable, non-secret id (`env:GROQ_API_KEY`).
    pub id: String,
    pub secret: Secret,
}
