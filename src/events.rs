//! Gateway events on a broadcast channel. The tray, the UI and tests subscribe; the core never
//! knows who listens.

use serde::Serialize;
use tokio::sync::broadcast;

use crate::verdict::{Cause, ErrorClass};

const CAPACITY: usize = 1024;

/// A rate limit that lifts sooner than this is folded into the tray's status line instead of a
/// notification or a toast: a free tier's per-minute limit would otherwise interrupt all day.
pub const NOTIFY_MIN_COOLDOWN_MS: i64 = 5 * 60_000;

/// Whether a limit is worth telling the user about: an account problem (not a rate limit), a
/// subscription's cap, or a wait of minutes. One rule for the desktop and the web UI.
pub fn worth_telling(
    class: ErrorClass,
    subscription: bool,
    reset_at_ms: Option<i64>,
    now_ms: i64,
) -> bool {
    class != ErrorClass::Rate
        || subscription
        || reset_at_ms.is_some_and(|r| r - now_ms >= NOTIFY_MIN_COOLDOWN_MS)
}

/// What a usage-window event says: a threshold crossed, the window spent, usable again, or a
/// subscription moved off paid extra usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaKind {
    Threshold,
    Capped,
    Back,
    Overage,
}

/// The notifications the desktop shell shows; each can be turned off in Settings (all are on
/// by default). Named on the wire as the settings name them (`failover`, `allExhausted`…).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Notification {
    /// A provider hit a limit and requests moved on.
    Failover,
    /// Every provider is out.
    AllExhausted,
    /// A provider that was announced out is back.
    CooldownEnded,
    /// A subscription CLI lost its login.
    LoggedOut,
    /// A usage window crossed a threshold.
    QuotaWarning,
    /// A spent usage window is usable again.
    QuotaBack,
}

impl Notification {
    pub const ALL: [Notification; 6] = [
        Notification::Failover,
        Notification::AllExhausted,
        Notification::CooldownEnded,
        Notification::LoggedOut,
        Notification::QuotaWarning,
        Notification::QuotaBack,
    ];

    /// Its name in the settings.
    pub fn name(self) -> &'static str {
        match self {
            Notification::Failover => "failover",
            Notification::AllExhausted => "allExhausted",
            Notification::CooldownEnded => "cooldownEnded",
            Notification::LoggedOut => "loggedOut",
            Notification::QuotaWarning => "quotaWarning",
            Notification::QuotaBack => "quotaBack",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.name() == s)
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A request finished (any status).
    Request {
        id: String,
        requested_model: String,
        provider: Option<String>,
        model: Option<String>,
        status: u16,
        attempts: usize,
        total_ms: u64,
    },
    /// An upstream target failed and the request moved on to the next one.
    Failover {
        request_id: String,
        from: String,
        to: String,
        class: ErrorClass,
        reason: String,
        reset_at_ms: Option<i64>,
        /// One line for a notification: "Claude Code session limit reached — back at 01:19;
        /// now using Codex".
        message: String,
        /// Whether it is news for the user ([`worth_telling`]): the desktop notifies and the UI
        /// toasts only these.
        notable: bool,
    },
    /// A scope was taken out of rotation until `until_ms`.
    CooldownStarted {
        provider: String,
        key: Option<String>,
        model: Option<String>,
        class: Cause,
        reason: String,
        until_ms: i64,
    },
    /// A scope is usable again (by success or by hand).
    CooldownEnded {
        provider: String,
        key: Option<String>,
        model: Option<String>,
    },
    /// Too many transient failures: the provider is out until `until_ms`, then gets one trial.
    BreakerOpened {
        provider: String,
        until_ms: i64,
        reason: String,
    },
    /// A trial request succeeded; the provider is back in rotation.
    BreakerClosed { provider: String },
    /// A key was rejected (invalid, revoked) and is out of rotation until it is changed.
    KeyDisabled {
        provider: String,
        key: String,
        reason: String,
    },
    /// A limit window of an account crossed a notification threshold (`threshold`, with
    /// `percent`), was spent (`capped`) or is usable again (`back`).
    Quota {
        provider: String,
        /// The account's non-secret id (a key id, `client:…`, or "" for a CLI's login).
        account: String,
        /// The window's id (`5h`, `7d`…) and label ("5 h").
        window: String,
        label: String,
        kind: QuotaKind,
        percent: Option<u8>,
        resets_at_ms: Option<i64>,
        /// One line for a notification: "Claude Max: 81 % of the 5 h window used — resets 15:00".
        message: String,
    },
    /// Routing was paused (every request gets 503) or resumed, from the tray or the UI.
    Paused { paused: bool },
    /// The live configuration changed (a provider, the order, a route): views of it refresh.
    ConfigChanged,
    /// No candidate could take a request.
    AllExhausted {
        request_id: String,
        requested_model: String,
        retry_at_ms: Option<i64>,
    },
}

/// Sending half, cheap to clone. Sending never blocks and never fails the caller.
#[derive(Clone)]
pub struct Events(broadcast::Sender<Event>);

impl Default for Events {
    fn default() -> Self {
        Self(broadcast::channel(CAPACITY).0)
    }
}

impl Events {
    pub fn emit(&self, event: Event) {
        // No subscribers is normal; the result only says how many received it.
        let _ = self.0.send(event);
    }

    /// Whether anyone listens; lets hot paths skip building events nobody will read.
    pub fn has_subscribers(&self) -> bool {
        self.0.receiver_count() > 0
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_news_when_it_is_an_account_problem_a_subscription_or_minutes_long() {
        let now = 1_000_000;
        let soon = Some(now + 20_000);
        let later = Some(now + NOTIFY_MIN_COOLDOWN_MS);
        assert!(
            !worth_telling(ErrorClass::Rate, false, soon, now),
            "a 20-second limit is not news"
        );
        assert!(!worth_telling(ErrorClass::Rate, false, None, now));
        assert!(
            worth_telling(ErrorClass::Rate, false, later, now),
            "five minutes is"
        );
        assert!(
            worth_telling(ErrorClass::Rate, true, soon, now),
            "a subscription's cap always is"
        );
        assert!(worth_telling(ErrorClass::Billing, false, soon, now));
        assert!(worth_telling(ErrorClass::Auth, false, None, now));
    }
}
