//! Prices and price tiers. A model's price (USD per million tokens) comes from its config entry,
//! else from the built-in catalog (`catalog::price`); budgets are estimated from it and a client key's `maxTier`
//! keeps failover from moving that client onto a more expensive tier.

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
    /// Prompt tokens read from the provider's prompt cache, USD per million (the input price
    /// when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Prompt tokens written to the provider's prompt cache, USD per million (the input price
    /// when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl Price {
    pub const FREE: Price = Price {
        input: 0.0,
        output: 0.0,
        cache_read: None,
        cache_write: None,
    };

    /// Input and output prices, no cache prices.
    pub const fn new(input: f64, output: f64) -> Self {
        Self {
            input,
            output,
            cache_read: None,
            cache_write: None,
        }
    }

    /// Estimated cost in USD of one answer: the prompt at the input price but for the part read
    /// from or written to the cache, at those prices.
    pub fn cost(&self, u: &crate::canonical::Usage) -> f64 {
        let cached = u.cached_input_tokens.min(u.input_tokens);
        let written = u.cache_write_tokens.min(u.input_tokens - cached);
        let plain = u.input_tokens - cached - written;
        (plain as f64 * self.input
            + cached as f64 * self.cache_read.unwrap_or(self.input)
            + written as f64 * self.cache_write.unwrap_or(self.input)
            + u.output_tokens as f64 * self.output)
            / 1_000_000.0
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

    /// Every number finite and not negative.
    pub fn is_valid(&self) -> bool {
        [self.input, self.output]
            .into_iter()
            .chain(self.cache_read)
            .chain(self.cache_write)
            .all(|n| n.is_finite() && n >= 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_follow_the_dearer_price() {
        assert_eq!(Price::FREE.tier(), Tier::Free);
        let p = Price::new;
        assert_eq!(p(0.05, 0.08).tier(), Tier::Low);
        assert_eq!(p(0.4, 1.6).tier(), Tier::Medium);
        assert_eq!(p(3.0, 15.0).tier(), Tier::High);
        assert!(Tier::Low < Tier::High);
    }

    #[test]
    fn the_cached_part_of_a_prompt_costs_the_cache_prices() {
        let usage = |input, cached, written| crate::canonical::Usage {
            input_tokens: input,
            output_tokens: 100_000,
            cached_input_tokens: cached,
            cache_write_tokens: written,
        };
        let plain = Price::new(3.0, 15.0);
        assert!((plain.cost(&usage(1_000_000, 0, 0)) - 4.5).abs() < 1e-9);
        // Without cache prices, cached tokens cost the input price.
        assert!((plain.cost(&usage(1_000_000, 800_000, 0)) - 4.5).abs() < 1e-9);
        let claude = Price {
            cache_read: Some(0.3),
            cache_write: Some(3.75),
            ..plain
        };
        // 100k plain at 3, 800k read at 0.3, 100k written at 3.75, 100k out at 15.
        let cost = claude.cost(&usage(1_000_000, 800_000, 100_000));
        assert!((cost - (0.3 + 0.24 + 0.375 + 1.5)).abs() < 1e-9, "{cost}");
        // Counts that do not add up (a server reporting more cached than sent) never go below 0.
        assert!(claude.cost(&usage(10, 50, 50)) >= 0.0);
        assert!(!Price {
            cache_read: Some(f64::NAN),
            ..plain
        }
        .is_valid());
    }
}
