//! A usage window's name in the user's language: the gateway writes its labels in English
//! ("5 h", "7 d Opus", "1 min requests", "tokens", "day requests"); the UI, the tray, the
//! notifications and the status line show them translated from these pieces.

use crate::i18n::{n_, tr, Lang};

/// What a window counts, when its label says.
const COUNTED: [&str; 4] = [
    n_("requests"),
    n_("tokens"),
    n_("input tokens"),
    n_("output tokens"),
];

/// Windows named by a word of their own (a cap without detail, Codex's header families).
const NAMED: [&str; 3] = [n_("limit"), n_("primary"), n_("secondary")];

/// `label` (a window's English label) in `lang`.
pub fn label_in(label: &str, lang: Lang) -> String {
    let words: Vec<&str> = label.split(' ').collect();
    if words.first() == Some(&"day") && words.len() > 1 {
        let what = tr(lang, words[1..].join(" ").as_str(), &[]);
        return tr(lang, "{what} per day", &[("what", &what)]);
    }
    let length = match words.as_slice() {
        [n, unit, ..] if n.chars().all(|c| c.is_ascii_digit()) => {
            let key = match *unit {
                "d" => n_("{n} d"),
                "h" => n_("{n} h"),
                "min" => n_("{m} min"),
                "s" => n_("{s} s"),
                _ => return label.to_string(),
            };
            Some(tr(lang, key, &[("n", n), ("m", n), ("s", n)]))
        }
        _ => None,
    };
    let rest = words
        .get(if length.is_some() { 2 } else { 0 }..)
        .unwrap_or_default()
        .join(" ");
    match (length, rest.as_str()) {
        (Some(l), "") => l,
        (None, what) if COUNTED.contains(&what) || NAMED.contains(&what) => tr(lang, what, &[]),
        (Some(l), what) if COUNTED.contains(&what) => tr(
            lang,
            "{length} {what}",
            &[("length", &l), ("what", &tr(lang, what, &[]))],
        ),
        // A model family's own window ("7 d Opus"): its name is kept.
        (Some(l), model) => tr(
            lang,
            "{length} {model}",
            &[("length", &l), ("model", model)],
        ),
        (None, _) => label.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_names_in_each_language() {
        let cases = [
            ("5 h", "5 h", "5時間", "5小时"),
            ("7 d Opus", "7 d Opus", "7日(Opus)", "7天(Opus)"),
            (
                "1 min requests",
                "1 min requests",
                "1分あたりのリクエスト",
                "每1分钟请求",
            ),
            ("tokens", "tokens", "トークン", "令牌"),
            (
                "day requests",
                "requests per day",
                "1日あたりのリクエスト",
                "每日请求",
            ),
        ];
        for (label, en, ja, zh) in cases {
            assert_eq!(label_in(label, Lang::En), en, "{label}");
            assert_eq!(label_in(label, Lang::Ja), ja, "{label}");
            assert_eq!(label_in(label, Lang::ZhCn), zh, "{label}");
        }
        assert_eq!(label_in("something else", Lang::Ja), "something else");
    }
}
