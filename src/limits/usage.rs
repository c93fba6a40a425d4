//! The usage book: every account's limit windows as last reported (`windows`), their recent
//! readings for a burn rate, and what is worth telling the user — a threshold crossed (once per
//! window period), a window spent, a window back. Keyed by provider and account (the key id,
//! the passthrough account `client:…`, or "" for a CLI's own login).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::windows::{Window, WindowStatus};

/// Two resets closer than this are the same one (providers' timestamps jitter by seconds).
pub const JITTER_MS: i64 = 120_000;
/// Windows shorter than this (per-minute API limits) never notify: they refill before anyone
/// could act on a notice.
const NOTIFY_MIN_LENGTH_MS: i64 = 3_600_000;
/// Readings kept per window for the burn rate.
const SAMPLES: usize = 64;
/// A reading older than this is dropped from views (the account went quiet).
const FORGET_MS: i64 = 8 * 86_400_000;
/// Default notification thresholds, percent used.
pub const DEFAULT_THRESHOLDS: [u8; 2] = [80, 95];

/// Something about a window worth telling.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// `percent` of the window is used (the highest threshold crossed in this reading).
    Threshold { window: Window, percent: u8 },
    /// The window is spent.
    Capped { window: Window },
    /// A spent window is usable again (its reset passed, or the provider says so early).
    Back { window: Window },
}

#[derive(Debug, Clone)]
struct Tracked {
    w: Window,
    seen_ms: i64,
    samples: VecDeque<(i64, f64)>,
    /// Thresholds already told in this period (indices into the thresholds).
    told: u8,
    capped: bool,
}

/// One account's windows, for views.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountUsage {
    pub account: String,
    pub windows: Vec<Window>,
    /// The id of the window that decides now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding: Option<String>,
    /// When the binding window would run out at the recent rate, if before its reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caps_at_ms: Option<i64>,
    pub updated_ms: i64,
}

/// Where an account's windows are headed.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    /// The binding window.
    pub window: Window,
    /// Share left in it.
    pub room: f64,
    /// When it runs out at the recent burn rate, if that comes before its reset.
    pub caps_at_ms: Option<i64>,
}

#[derive(Default)]
pub struct UsageBook {
    accounts: Mutex<HashMap<(String, String), BTreeMap<String, Tracked>>>,
    thresholds: Mutex<Vec<u8>>,
    /// Changed since the last `saved()`: the windows outlive a restart (the desktop app starts
    /// at login with the bars the user last saw, not empty ones).
    dirty: std::sync::atomic::AtomicBool,
    /// Whether any window was ever recorded: routing skips the book without a lock until then.
    any: std::sync::atomic::AtomicBool,
}

/// One account's windows as kept across a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedAccount {
    pub provider: String,
    pub account: String,
    pub windows: Vec<Window>,
    pub seen_ms: i64,
}

impl UsageBook {
    /// Sets the notification thresholds (percent, ascending; at most 8).
    pub fn set_thresholds(&self, mut t: Vec<u8>) {
        t.sort_unstable();
        t.dedup();
        t.truncate(8);
        if let Ok(mut g) = self.thresholds.lock() {
            *g = t;
        }
    }

    /// The thresholds set, or the defaults before any is.
    fn thresholds(&self) -> Vec<u8> {
        self.thresholds
            .lock()
            .ok()
            .map(|g| g.clone())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| DEFAULT_THRESHOLDS.to_vec())
    }

    /// Records a reading of `windows` for an account; returns what is worth telling.
    pub fn observe(
        &self,
        provider: &str,
        account: &str,
        windows: Vec<Window>,
        now: i64,
    ) -> Vec<Notice> {
        if windows.is_empty() {
            return Vec::new();
        }
        let thresholds = self.thresholds();
        let Ok(mut all) = self.accounts.lock() else {
            return Vec::new();
        };
        let book = all
            .entry((provider.to_string(), account.to_string()))
            .or_default();
        let mut out = Vec::new();
        self.dirty.store(true, std::sync::atomic::Ordering::Relaxed);
        self.any.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in windows {
            let t = book.entry(w.id.clone()).or_insert_with(|| Tracked {
                w: w.clone(),
                seen_ms: now,
                samples: VecDeque::new(),
                told: 0,
                capped: false,
            });
            observe_one(t, w, now, &thresholds, &mut out);
        }
        out
    }

    /// A cap announced without window detail (a 429 naming only its reset): the account's
    /// binding window — or the one whose reset matches — is spent until `reset_at_ms`.
    pub fn capped(
        &self,
        provider: &str,
        account: &str,
        reset_at_ms: Option<i64>,
        now: i64,
    ) -> Vec<Notice> {
        let w = {
            let Ok(all) = self.accounts.lock() else {
                return Vec::new();
            };
            let known: Vec<Window> = all
                .get(&(provider.to_string(), account.to_string()))
                .map(|b| b.values().map(|t| t.w.clone()).collect())
                .unwrap_or_default();
            let by_reset = reset_at_ms.and_then(|r| {
                known
                    .iter()
                    .find(|w| w.resets_at_ms.is_some_and(|x| (x - r).abs() <= JITTER_MS))
                    .cloned()
            });
            by_reset.or_else(|| super::windows::binding(&known).cloned())
        };
        let w = match w {
            Some(mut w) => {
                w.status = WindowStatus::Rejected;
                w.used = Some(1.0);
                w.resets_at_ms = reset_at_ms.or(w.resets_at_ms);
                w
            }
            None => {
                let Some(r) = reset_at_ms else {
                    return Vec::new();
                };
                Window {
                    id: "limit".into(),
                    label: "limit".into(),
                    length_ms: None,
                    used: Some(1.0),
                    resets_at_ms: Some(r),
                    status: WindowStatus::Rejected,
                    source: "error".into(),
                }
            }
        };
        self.observe(provider, account, vec![w], now)
    }

    /// No window was ever recorded (nothing for routing to read).
    pub fn is_empty(&self) -> bool {
        !self.any.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What to keep across a restart, when something changed since the last call (the
    /// windows, not the burn-rate readings: a rate from before a restart says little).
    pub fn to_save(&self) -> Option<Vec<SavedAccount>> {
        if !self.dirty.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let all = self.accounts.lock().ok()?;
        Some(
            all.iter()
                .map(|((p, a), book)| SavedAccount {
                    provider: p.clone(),
                    account: a.clone(),
                    windows: book.values().map(|t| t.w.clone()).collect(),
                    seen_ms: book.values().map(|t| t.seen_ms).max().unwrap_or(0),
                })
                .collect(),
        )
    }

    /// The windows kept by the last run (a spent one is still spent, and says so when back).
    pub fn restore(&self, saved: Vec<SavedAccount>) {
        let thresholds = self.thresholds();
        let Ok(mut all) = self.accounts.lock() else {
            return;
        };
        for s in saved {
            self.any.store(true, std::sync::atomic::Ordering::Relaxed);
            let book = all.entry((s.provider, s.account)).or_default();
            for w in s.windows {
                // Thresholds already passed were told by the last run.
                let told = reached(&thresholds, w.used_or_status());
                book.entry(w.id.clone()).or_insert_with(|| Tracked {
                    capped: w.status == WindowStatus::Rejected,
                    seen_ms: s.seen_ms,
                    samples: VecDeque::new(),
                    told,
                    w,
                });
            }
        }
    }

    /// Spent windows whose reset has passed are back; accounts quiet for a week are forgotten.
    pub fn sweep(&self, now: i64) -> Vec<(String, String, Notice)> {
        let Ok(mut all) = self.accounts.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let before = all.len();
        all.retain(|(p, a), book| {
            for t in book.values_mut() {
                if t.capped && t.w.resets_at_ms.is_some_and(|r| r <= now) {
                    t.capped = false;
                    t.told = 0;
                    t.samples.clear();
                    t.w.status = WindowStatus::Allowed;
                    t.w.used = Some(0.0);
                    if !worth_telling(&t.w) {
                        continue;
                    }
                    out.push((
                        p.clone(),
                        a.clone(),
                        Notice::Back {
                            window: t.w.clone(),
                        },
                    ));
                }
            }
            book.values().any(|t| now - t.seen_ms < FORGET_MS)
        });
        if !out.is_empty() || all.len() != before {
            self.dirty.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        out
    }

    /// The provider's accounts with their windows (one whose reset has passed left out).
    pub fn accounts(&self, provider: &str, now: i64) -> Vec<AccountUsage> {
        let Ok(all) = self.accounts.lock() else {
            return Vec::new();
        };
        let mut out: Vec<AccountUsage> = all
            .iter()
            .filter(|((p, _), _)| p == provider)
            .map(|((_, a), book)| account_view(a, book, now))
            .collect();
        out.sort_by(|a, b| a.account.cmp(&b.account));
        out
    }

    /// Where an account is headed: its binding window, the room left and the forecast cap.
    pub fn forecast(&self, provider: &str, account: &str, now: i64) -> Option<Forecast> {
        let all = self.accounts.lock().ok()?;
        let book = all.get(&(provider.to_string(), account.to_string()))?;
        let v = account_view(account, book, now);
        let id = v.binding?;
        let window = v.windows.into_iter().find(|w| w.id == id)?;
        Some(Forecast {
            room: 1.0 - window.used_or_status(),
            caps_at_ms: v.caps_at_ms,
            window,
        })
    }

    /// The binding window of the provider's most recently heard account, for a status line:
    /// "5 h 72 % · resets 15:00" (`None` when it reported no windows).
    pub fn headline(
        &self,
        provider: &str,
        now: i64,
        tz: &jiff::tz::TimeZone,
        loc: crate::i18n::Locale,
    ) -> Option<String> {
        use crate::i18n::tr;
        let a = self
            .accounts(provider, now)
            .into_iter()
            .max_by_key(|a| a.updated_ms)?;
        let id = a.binding?;
        let w = a.windows.iter().find(|w| w.id == id)?;
        let label = super::window_label::label_in(&w.label, loc.lang);
        let used = match (w.used, w.status) {
            (_, WindowStatus::Rejected) => tr(loc.lang, "spent", &[]),
            (Some(u), _) => format!("{:.0} %", u * 100.0),
            (None, _) => tr(loc.lang, "near its limit", &[]),
        };
        Some(match w.resets_at_ms {
            Some(r) => tr(
                loc.lang,
                "{window} {used} · resets {when}",
                &[
                    ("window", &label),
                    ("used", &used),
                    ("when", &crate::i18n::clock_time(r, tz, now, loc)),
                ],
            ),
            None => format!("{label} {used}"),
        })
    }

    /// One window of an account, as it reads now.
    pub fn window(&self, provider: &str, account: &str, id: &str, now: i64) -> Option<Window> {
        let all = self.accounts.lock().ok()?;
        let t = all
            .get(&(provider.to_string(), account.to_string()))?
            .get(id)?;
        Some(current(t, now))
    }
}

/// Threshold `i`'s bit in a window's `told` (there are at most eight).
fn bit(i: usize) -> u8 {
    1 << i.min(7)
}

/// The thresholds a share `used` has reached, as bits.
fn reached(thresholds: &[u8], used: f64) -> u8 {
    let pct = (used * 100.0).round() as i64;
    thresholds
        .iter()
        .enumerate()
        .filter(|(_, th)| pct >= i64::from(**th))
        .fold(0, |bits, (i, _)| bits | bit(i))
}

/// Subscription windows (hours and longer) and caps named by an error; an API key's
/// per-minute windows refill before anyone could act on a notice.
fn worth_telling(w: &Window) -> bool {
    w.source != "headers" && w.length_ms.is_none_or(|l| l >= NOTIFY_MIN_LENGTH_MS)
}

/// A tracked window as it reads at `now`: once its reset has passed it is a fresh period.
fn current(t: &Tracked, now: i64) -> Window {
    let mut w = t.w.clone();
    if w.resets_at_ms.is_some_and(|r| r <= now) && w.length_ms.is_some() {
        w.used = Some(0.0);
        w.status = WindowStatus::Allowed;
        w.resets_at_ms = None;
    }
    w
}

fn account_view(account: &str, book: &BTreeMap<String, Tracked>, now: i64) -> AccountUsage {
    // A window whose reset has passed is left out: its new period is unknown until the
    // provider reports it, and its old reading is no longer true.
    let windows: Vec<Window> = book
        .values()
        .filter(|t| t.w.resets_at_ms.is_none_or(|r| r > now))
        .map(|t| current(t, now))
        .collect();
    let binding = super::windows::binding(&windows).map(|w| w.id.clone());
    let caps_at_ms = binding
        .as_ref()
        .and_then(|id| book.get(id))
        .and_then(|t| exhaustion(t, now));
    AccountUsage {
        account: account.to_string(),
        updated_ms: book.values().map(|t| t.seen_ms).max().unwrap_or(now),
        windows,
        binding,
        caps_at_ms,
    }
}

/// When the window runs out at the rate of its recent readings (the last hour of this
/// period), if that is before its reset.
fn exhaustion(t: &Tracked, now: i64) -> Option<i64> {
    let reset = t.w.resets_at_ms.filter(|r| *r > now)?;
    let &(t1, u1) = t.samples.back()?;
    // Readings from long ago say nothing about the rate now.
    if now - t1 > 1_800_000 {
        return None;
    }
    let &(t0, u0) = t.samples.iter().find(|(at, _)| t1 - at <= 3_600_000)?;
    if t1 - t0 < 60_000 || u1 <= u0 {
        return None;
    }
    let rate = (u1 - u0) / (t1 - t0) as f64;
    let at = t1 + ((1.0 - u1).max(0.0) / rate).round() as i64;
    (at < reset).then_some(at.max(now))
}

/// Long because it is the whole life of one window reading: a new period or the same one,
/// back early, spent, thresholds crossed, the burn-rate samples.
fn observe_one(t: &mut Tracked, w: Window, now: i64, thresholds: &[u8], out: &mut Vec<Notice>) {
    // A later reset beyond jitter, or the old reset passed: a new period.
    let new_period = match (t.w.resets_at_ms, w.resets_at_ms) {
        (Some(old), Some(new)) => new > old + JITTER_MS || (old <= now && new > old),
        (Some(old), None) => old <= now,
        _ => false,
    } || t
        .w
        .used
        .zip(w.used)
        .is_some_and(|(a, b)| b + 0.25 < a && w.resets_at_ms.is_none());
    let spent = w.status == WindowStatus::Rejected;
    if new_period {
        t.told = 0;
        t.samples.clear();
    }
    let notify = worth_telling(&w);
    if t.capped && !spent {
        // Back: the reset passed, or the provider reports room again before it.
        t.capped = false;
        if notify {
            out.push(Notice::Back { window: w.clone() });
        }
    }
    if spent && !t.capped {
        t.capped = true;
        if notify {
            out.push(Notice::Capped { window: w.clone() });
        }
    }
    if let Some(u) = w.used {
        let new = reached(thresholds, u) & !t.told;
        t.told |= new;
        // One notice for the highest threshold newly passed.
        let highest = thresholds
            .iter()
            .enumerate()
            .filter(|(i, _)| new & bit(*i) != 0)
            .map(|(_, th)| *th)
            .next_back();
        if let (Some(percent), true, false) = (highest, notify, spent) {
            out.push(Notice::Threshold {
                window: w.clone(),
                percent,
            });
        }
        if t.samples.len() == SAMPLES {
            t.samples.pop_front();
        }
        t.samples.push_back((now, u));
    }
    // Jitter in the reset is not news: keep the first instant of the period.
    let keep_reset = match (t.w.resets_at_ms, w.resets_at_ms) {
        (Some(old), Some(new)) if !new_period && (new - old).abs() <= JITTER_MS => Some(old),
        _ => w.resets_at_ms,
    };
    t.w = Window {
        resets_at_ms: keep_reset,
        ..w
    };
    t.seen_ms = now;
}

#[cfg(test)]
mod tests;
