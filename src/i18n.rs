//! The languages Baton speaks (English, Japanese, Simplified Chinese) and the one catalogue the
//! web UI, the tray menu and the notifications read: `ui/locales/{en,ja,zh-CN}.json`, keyed by
//! the English text (gettext's convention: the code stays readable and a missing translation
//! falls back to English, never to a key name). `{name}` marks a value filled in; a value may be
//! `{"one": …, "other": …}` where English needs a plural (the UI picks the form).
//!
//! The language is the user's choice in Settings (`language` setting: `auto`, `en`, `ja`,
//! `zh-CN`); `auto` follows the system locale (`LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG` on
//! Unix; the OS setting on macOS and Windows, read by the `sys-locale` crate).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use serde_json::Value;

/// The `settings` key of the chosen language (`"auto"` or a [`Lang::tag`]).
pub const SETTING: &str = "language";

/// A language Baton ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    En,
    Ja,
    ZhCn,
}

impl Lang {
    pub const ALL: [Lang; 3] = [Lang::En, Lang::Ja, Lang::ZhCn];

    /// Its BCP 47 tag, as the setting, the UI and the catalogue file name spell it.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ja => "ja",
            Lang::ZhCn => "zh-CN",
        }
    }

    /// Its name in itself, as the language switch lists it.
    pub fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Ja => "日本語",
            Lang::ZhCn => "简体中文",
        }
    }

    /// One of the tags Baton ships, exactly (the setting's values).
    pub fn parse(tag: &str) -> Option<Lang> {
        Lang::ALL.into_iter().find(|l| l.tag() == tag)
    }

    /// The shipped language a locale asks for: `ja_JP.UTF-8` → Japanese, any Chinese → Simplified
    /// Chinese (the one Chinese shipped), `en-GB` → English; `None` for any other language.
    pub fn matching(locale: &str) -> Option<Lang> {
        let primary = locale
            .split(['-', '_', '.', '@'])
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        match primary.as_str() {
            "en" => Some(Lang::En),
            "ja" => Some(Lang::Ja),
            "zh" => Some(Lang::ZhCn),
            _ => None,
        }
    }

    fn catalogue(self) -> &'static HashMap<String, Value> {
        static CATALOGUES: OnceLock<[HashMap<String, Value>; 3]> = OnceLock::new();
        let all = CATALOGUES.get_or_init(|| {
            [SOURCE_EN, SOURCE_JA, SOURCE_ZH_CN]
                .map(|text| serde_json::from_str(text).unwrap_or_default())
        });
        &all[self as usize]
    }
}

const SOURCE_EN: &str = include_str!("../ui/locales/en.json");
const SOURCE_JA: &str = include_str!("../ui/locales/ja.json");
const SOURCE_ZH_CN: &str = include_str!("../ui/locales/zh-CN.json");

/// The user's language and whether their clock reads 12-hour ("6:28 PM") or 24-hour ("18:28").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Locale {
    pub lang: Lang,
    pub hour12: bool,
}

impl Locale {
    /// What logs and API reasons are written in (read by people and scripts alike).
    pub const ENGLISH: Locale = Locale {
        lang: Lang::En,
        hour12: false,
    };

    /// The locale for a language choice (`"auto"`, or a tag) and the system's locales, most
    /// wanted first. English takes its clock from the system's region (en-US 12 h, en-GB 24 h);
    /// Japanese and Chinese read 24 h, as their CLDR formats do.
    pub fn resolve(choice: &str, system: &[String]) -> Locale {
        let lang = Lang::parse(choice)
            .or_else(|| system.iter().find_map(|l| Lang::matching(l)))
            .unwrap_or(Lang::En);
        let region = system
            .iter()
            .find(|l| Lang::matching(l) == Some(lang))
            .and_then(|l| l.split(['-', '_', '.', '@']).nth(1))
            .map(str::to_ascii_uppercase);
        // No English locale on the system (C, POSIX, or another language with English chosen):
        // the 24-hour clock of the C locale and of most of the world.
        let english = system.iter().find(|l| Lang::matching(l) == Some(Lang::En));
        let hour12 = lang == Lang::En
            && english.is_some()
            && region.as_deref().is_none_or(|r| {
                ["US", "CA", "AU", "NZ", "IN", "PH", "PK", "EG", "SA", "MY"].contains(&r)
            });
        Locale { lang, hour12 }
    }

    /// The system's locale with a language choice applied.
    pub fn with_choice(choice: &str) -> Locale {
        Locale::resolve(choice, &system_locales())
    }

    /// A date and clock time: "Dec 4, 18:28", "12月4日 18:28".
    pub fn date_clock(self, t: &jiff::ZonedDateTime) -> String {
        let date = match self.lang {
            Lang::En => t.strftime("%b %-d").to_string(),
            Lang::Ja | Lang::ZhCn => t.strftime("%-m月%-d日").to_string(),
        };
        let sep = if self.lang == Lang::En { ", " } else { " " };
        format!("{date}{sep}{}", self.clock(t))
    }

    /// A clock time: "18:28" or "6:28 PM".
    pub fn clock(self, t: &jiff::ZonedDateTime) -> String {
        if self.hour12 {
            t.strftime("%-I:%M %p").to_string()
        } else {
            t.strftime("%H:%M").to_string()
        }
    }
}

/// The locale in force, readable from any thread without a lock (the routing context holds one:
/// failover and usage lines are written in it).
#[derive(Debug)]
pub struct LocaleCell(AtomicU8);

impl Default for LocaleCell {
    fn default() -> Self {
        let cell = LocaleCell(AtomicU8::new(0));
        cell.set(Locale::with_choice("auto"));
        cell
    }
}

impl LocaleCell {
    pub fn get(&self) -> Locale {
        let v = self.0.load(Ordering::Relaxed);
        Locale {
            lang: Lang::ALL[usize::from(v & 3).min(2)],
            hour12: v & 4 != 0,
        }
    }

    pub fn set(&self, l: Locale) {
        self.0.store(
            l.lang as u8 | if l.hour12 { 4 } else { 0 },
            Ordering::Relaxed,
        );
    }
}

/// The system's locales, most wanted first.
pub fn system_locales() -> Vec<String> {
    sys_locale::get_locales().collect()
}

/// The language choice a stored `language` setting holds (`"auto"` when none or unknown).
pub fn choice_from(setting: Option<Value>) -> String {
    setting
        .and_then(|v| v.as_str().map(str::to_string))
        .filter(|s| Lang::parse(s).is_some())
        .unwrap_or_else(|| "auto".into())
}

tokio::task_local! {
    /// The language the person behind an admin request reads (the UI says it in
    /// `Accept-Language`): the admin API's messages are written in it.
    static ASKED: Lang;
}

/// Runs `f` with the admin API's messages in `lang`.
pub async fn answering<F: std::future::Future>(lang: Lang, f: F) -> F::Output {
    ASKED.scope(lang, f).await
}

/// The first shipped language an `Accept-Language` header names (its order; `*` and others
/// skipped).
pub fn from_accept_language(header: &str) -> Option<Lang> {
    header
        .split(',')
        .filter_map(|part| part.split(';').next())
        .map(str::trim)
        .find_map(Lang::matching)
}

/// A message for the person at the other end of an admin request, in their language when
/// they said one (the web UI does); English otherwise — for scripts, the config file's checks
/// at start, and logs.
pub fn msg(key: &str, args: &[(&str, &str)]) -> String {
    tr(asked(), key, args)
}

/// The language the person at the other end of this admin request asked for (English when
/// they said none).
pub fn asked() -> Lang {
    ASKED.try_with(|l| *l).unwrap_or(Lang::En)
}

/// Marks a text that is translated where it is used (a table of words kept for later); the
/// catalogue check (scripts/i18n-keys.mjs) finds it by this name.
pub const fn n_(key: &'static str) -> &'static str {
    key
}

/// The text for `key` in `lang` (English when it has none), with `{name}` filled from `args`.
pub fn tr(lang: Lang, key: &str, args: &[(&str, &str)]) -> String {
    let value = lang.catalogue().get(key).or_else(|| english(key));
    let text = match value {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Object(m)) => m.get("other").and_then(Value::as_str).unwrap_or(key),
        _ => key,
    };
    fill(text, args)
}

/// The English text of `key`; a key the catalogue lacks is logged (the desktop tests fail on
/// it): it would show untranslated in every language.
fn english(key: &str) -> Option<&'static Value> {
    let found = Lang::En.catalogue().get(key);
    if found.is_none() {
        tracing::warn!(
            key,
            "a text is missing from the catalogue (ui/locales/en.json)"
        );
    }
    found
}

fn fill(text: &str, args: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => match args.iter().find(|(k, _)| *k == &after[..close]) {
                Some((_, v)) => {
                    out.push_str(v);
                    rest = &after[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            },
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A time left as a user reads it, the same on every surface (the UI's countdowns, the tray,
/// `baton status`): "45 s", "14 min", "2 h 05 min", "7 d 23 h" — never like a clock time.
pub fn duration(ms: i64, lang: Lang) -> String {
    if ms <= 0 {
        return tr(lang, "now", &[]);
    }
    let s = (ms + 999) / 1000;
    let (d, h, m) = (s / 86_400, (s % 86_400) / 3600, (s % 3600) / 60);
    if d > 0 {
        tr(
            lang,
            "{d}d {h}h",
            &[("d", &d.to_string()), ("h", &h.to_string())],
        )
    } else if h > 0 {
        tr(
            lang,
            "{h}h {m}m",
            &[("h", &h.to_string()), ("m", &format!("{m:02}"))],
        )
    } else if s >= 60 {
        // Whole minutes, rounded up: "1 min" until the last minute.
        tr(lang, "{m} min", &[("m", &((s + 59) / 60).to_string())])
    } else {
        tr(lang, "{s} s", &[("s", &s.to_string())])
    }
}

/// An instant as a user reads it: the clock time when it is today in `tz`, with its date
/// otherwise, as the locale writes them.
pub fn clock_time(ms: i64, tz: &jiff::tz::TimeZone, now_ms: i64, loc: Locale) -> String {
    let Ok(at) = jiff::Timestamp::from_millisecond(ms) else {
        return String::new();
    };
    let local = at.to_zoned_datetime(tz.clone());
    let today = jiff::Timestamp::from_millisecond(now_ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .to_zoned_datetime(tz.clone())
        .date();
    if local.date() == today {
        loc.clock(&local)
    } else {
        loc.date_clock(&local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_durations() {
        let d = |ms| duration(ms, Lang::En);
        assert_eq!(d(0), "now");
        assert_eq!(d(45_000), "45 s");
        assert_eq!(d(60_000), "1 min");
        assert_eq!(d(14 * 60_000 - 500), "14 min");
        assert_eq!(d(2 * 3_600_000 + 5 * 60_000), "2 h 05 min");
        assert_eq!(d(8 * 86_400_000 - 3_600_000), "7 d 23 h");
        assert_eq!(duration(8 * 86_400_000 - 3_600_000, Lang::Ja), "7日 23時間");
        assert_eq!(duration(14 * 60_000, Lang::ZhCn), "14分钟");
    }

    fn sys(tags: &[&str]) -> Vec<String> {
        tags.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_system_locale_picks_the_language_and_the_clock() {
        let r = |choice, tags: &[&str]| Locale::resolve(choice, &sys(tags));
        assert_eq!(r("auto", &["ja-JP"]).lang, Lang::Ja);
        assert_eq!(r("auto", &["zh-TW", "en-US"]).lang, Lang::ZhCn);
        assert_eq!(
            r("auto", &["de-DE", "ja"]).lang,
            Lang::Ja,
            "the first shipped one"
        );
        assert_eq!(r("auto", &["de-DE"]).lang, Lang::En);
        assert_eq!(r("auto", &[]).lang, Lang::En);
        assert_eq!(r("ja", &["en-US"]).lang, Lang::Ja, "the choice wins");
        assert_eq!(
            r("fr", &["zh-CN"]).lang,
            Lang::ZhCn,
            "an unknown choice is auto"
        );
        assert!(r("auto", &["en-US"]).hour12);
        assert!(!r("auto", &["en-GB"]).hour12);
        assert!(r("en", &["en"]).hour12, "English without a region: en-US");
        assert!(!r("en", &["de-DE"]).hour12, "a German system's clock");
        assert!(!r("auto", &["C"]).hour12, "the C locale's clock");
        assert!(!r("auto", &["ja-JP"]).hour12);
        assert!(!r("zh-CN", &["en-US"]).hour12);
    }

    #[test]
    fn clocks_read_as_the_locale_writes_them() {
        let t: jiff::ZonedDateTime = "2026-12-04T18:05:00+00:00[UTC]".parse().unwrap_or_default();
        let us = Locale {
            lang: Lang::En,
            hour12: true,
        };
        let ja = Locale {
            lang: Lang::Ja,
            hour12: false,
        };
        assert_eq!(us.clock(&t), "6:05 PM");
        assert_eq!(ja.clock(&t), "18:05");
    }

    #[test]
    fn values_are_filled_and_missing_ones_stay_visible() {
        assert_eq!(
            fill("Serving via {name}", &[("name", "Groq")]),
            "Serving via Groq"
        );
        assert_eq!(
            fill("{a}{b}", &[("a", "{b}"), ("b", "x")]),
            "{b}x",
            "values are not re-read"
        );
        assert_eq!(fill("{missing} {", &[]), "{missing} {");
    }

    /// The `{name}`s of a catalogue value (a text, or each form of a plural).
    fn holes(v: &Value) -> Vec<String> {
        let text = v.to_string();
        let mut out: Vec<String> = text
            .split('{')
            .skip(1)
            .filter_map(|p| p.split_once('}').map(|(h, _)| h.to_string()))
            .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_alphanumeric()))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every language has every key English has, no other, and the same `{name}`s in each:
    /// a missing translation would show English, a lost `{name}` would drop a value.
    #[test]
    fn every_language_has_every_key_with_the_same_values_filled() {
        let en = Lang::En.catalogue();
        assert!(
            en.len() > 100,
            "the catalogue did not parse: {} keys",
            en.len()
        );
        for lang in [Lang::Ja, Lang::ZhCn] {
            let c = lang.catalogue();
            let missing: Vec<&String> = en.keys().filter(|k| !c.contains_key(*k)).collect();
            let extra: Vec<&String> = c.keys().filter(|k| !en.contains_key(*k)).collect();
            assert!(missing.is_empty(), "{}: missing {missing:?}", lang.tag());
            assert!(extra.is_empty(), "{}: not in English {extra:?}", lang.tag());
            for (k, v) in c {
                assert_eq!(holes(v), holes(&en[k]), "{}: {k:?}", lang.tag());
                assert!(
                    v.is_string() || v.get("other").is_some_and(Value::is_string),
                    "{}: {k:?} is neither a text nor {{one, other}}",
                    lang.tag()
                );
            }
        }
    }

    #[test]
    fn plural_texts_read_their_other_form_and_lines_are_translated() {
        // Counted texts are the UI's (Intl.PluralRules there); here a plural reads as `other`.
        assert_eq!(tr(Lang::En, "{n} models", &[("n", "3")]), "3 models");
        assert_eq!(tr(Lang::Ja, "{n} models", &[("n", "3")]), "3 モデル");
        assert_eq!(
            tr(Lang::ZhCn, "Serving via {name}", &[("name", "Groq")]),
            "正在通过 Groq 提供服务"
        );
    }

    #[test]
    fn accept_language_picks_the_first_shipped_language() {
        assert_eq!(from_accept_language("ja,en-US;q=0.9"), Some(Lang::Ja));
        assert_eq!(from_accept_language("fr-FR, zh-TW;q=0.8"), Some(Lang::ZhCn));
        assert_eq!(from_accept_language("*"), None);
        assert_eq!(from_accept_language(""), None);
    }

    #[tokio::test]
    async fn messages_follow_the_request_and_are_english_outside_one() {
        let key = "must be at least 100 ms";
        assert_eq!(msg(key, &[]), key);
        let ja = answering(Lang::Ja, async { msg(key, &[]) }).await;
        assert_ne!(ja, key);
        assert_eq!(ja, tr(Lang::Ja, key, &[]));
    }

    #[test]
    fn a_translation_falls_back_to_english_then_to_the_key() {
        assert_eq!(
            tr(Lang::Ja, "no such key {x}", &[("x", "1")]),
            "no such key 1"
        );
        assert_eq!(tr(Lang::En, "Open Baton", &[]), "Open Baton");
        assert_ne!(tr(Lang::Ja, "Open Baton", &[]), "Open Baton");
    }
}
