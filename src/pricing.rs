//! Prices and price tiers. A model's price (USD per million tokens) comes from its config entry,
//! else from the built-in catalog; budgets are estimated from it and a client key's `maxTier`
//! keeps failover from moving that client onto a more expensive tier.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Price tiers, cheapest first. A model's tier is stated (`tier`) or follows from its output
/// price: 0 is `free`, up to $1 per million tokens `low`, up to $5 `medium`, above that `high`.
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Free,
    Low,
    Medium,
    High,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Low => "low",
            Tier::Medium => "medium",
            Tier::High => "high",
        }
    }
}

/// What a model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    /// Prompt tokens, USD per million.
    pub input: f64,
    /// Completion tokens, USD per million.
    pub output: f64,
}

impl Price {
    pub const FREE: Price = Price {
        input: 0.0,
        output: 0.0,
    };

    /// Estimated cost in USD of one answer.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input + output_tokens as f64 * self.output) / 1_000_000.0
    }

    pub fn tier(&self) -> Tier {
        let top = self.input.max(self.output);
        if top <= 0.0 {
            Tier::Free
        } else if top <= 1.0 {
            Tier::Low
        } else if top <= 5.0 {
            Tier::Medium
        } else {
            Tier::High
        }
    }

    /// Both numbers finite and not negative.
    pub fn is_valid(&self) -> bool {
        self.input.is_finite() && self.output.is_finite() && self.input >= 0.0 && self.output >= 0.0
    }
}

static CATALOG: LazyLock<Option<crate::catalog::Catalog>> =
    LazyLock::new(|| crate::catalog::load().ok());

/// The catalog's price for `model` at the provider whose API lives at `base_url`. OpenRouter's
/// `:free` variants cost nothing.
pub fn catalog_price(base_url: &str, model: &str) -> Option<Price> {
    let base = base_url.trim_end_matches('/');
    if let Some(entry) = CATALOG.as_ref().and_then(|c| {
        c.providers
            .iter()
            .find(|e| e.base_url.as_deref().map(|b| b.trim_end_matches('/')) == Some(base))
    }) {
        if let Some(p) = entry.prices.get(model) {
            return Some(*p);
        }
        if entry.id == "openrouter" && model.ends_with(":free") {
            return Some(Price::FREE);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_the_dearer_price() {
        assert_eq!(Price::FREE.tier(), Tier::Free);
        let p = |input, output| Price { input, output };
        assert_eq!(p(0.05, 0.08).tier(), Tier::Low);
        assert_eq!(p(0.4, 1.6).tier(), Tier::Medium);
        assert_eq!(p(3.0, 15.0).tier(), Tier::High);
        assert!(Tier::Low < Tier::High);
        assert!((p(3.0, 15.0).cost(1_000_000, 100_000) - 4.5).abs() < 1e-9);
    }

    #[test]
    fn catalog_prices_are_found_by_base_url() {
        let groq = catalog_price("https://api.groq.com/openai/v1/", "llama-3.1-8b-instant")
            .expect("groq price");
        assert_eq!(groq.tier(), Tier::Low);
        assert_eq!(
            catalog_price("https://openrouter.ai/api/v1", "x/y:free"),
            Some(Price::FREE)
        );
        assert_eq!(catalog_price("http://127.0.0.1:9/v1", "gpt-4.1-mini"), None);
    }
}
