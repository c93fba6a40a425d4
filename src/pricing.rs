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
}
