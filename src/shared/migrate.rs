//! Counters written under an older key layout in Redis, brought to the current one when an
//! instance connects (the old layout let two periods that started together collide).

use redis::AsyncCommands;

use super::{Host, PeriodKind, Redis};
use crate::clients::{utc_day, utc_month};

/// The layout of counter keys in Redis. 1: `budget:{client}:{start}` and
/// `quota:{provider}:{key}:{start}`, which collided when two periods started together (the 1st
/// of a month; midnight's first minute). 2: the period kind is named in the key.
const KEY_LAYOUT: i64 = 2;

/// A key of layout 1 under `base` (`prefix:budget` or `prefix:quota`): what lies between and
/// the period start. Layout 2 keys (`…:day:{start}`) are not.
fn old_layout<'a>(key: &'a str, base: &str) -> Option<(&'a str, i64)> {
    let rest = key.strip_prefix(base)?.strip_prefix(':')?;
    let (head, start) = rest.rsplit_once(':')?;
    let start = start.parse::<i64>().ok()?;
    let named = [":minute", ":day", ":month"]
        .iter()
        .any(|k| head.ends_with(k));
    (!named && !head.is_empty()).then_some((head, start))
}

/// `s` with Redis glob characters escaped, for SCAN MATCH.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Redis {
    /// Brings counters written under an older key layout to the current one (see
    /// [`KEY_LAYOUT`]); a no-op once Redis records that layout.
    pub(super) async fn migrate(&self, core: &dyn Host) -> redis::RedisResult<()> {
        let mut conn = self.conn.clone();
        let layout_key = self.key(&["layout"]);
        let layout: Option<i64> = conn.get(&layout_key).await?;
        if layout.is_some_and(|v| v >= KEY_LAYOUT) {
            return Ok(());
        }
        let now = core.now_ms();
        let (day, next_day) = utc_day(now);
        let (month, next_month) = utc_month(now);
        let keep_day = next_day - now + 86_400_000;
        let keep_month = next_month - now + 86_400_000;
        let mut folded = 0;
        for old in self.scan(&["budget"]).await? {
            let Some((client, start)) = old_layout(&old, &self.key(&["budget"])) else {
                continue;
            };
            let mut inv = self.migrate.prepare_invoke();
            inv.key(&old);
            if start == day && start == month {
                // The 1st of a month: one hash held both periods, each request added twice.
                inv.key(self.budget_key(client, PeriodKind::Day, day))
                    .key(self.budget_key(client, PeriodKind::Month, month))
                    .arg(2)
                    .arg(keep_day)
                    .arg(keep_month);
            } else if start == month {
                // Past the 1st, the month's hash also holds the 1st's spending twice; that
                // part cannot be told apart, so the month keeps it (refusing early, never late).
                inv.key(self.budget_key(client, PeriodKind::Month, month))
                    .arg(1)
                    .arg(keep_month);
            } else if start == day {
                inv.key(self.budget_key(client, PeriodKind::Day, day))
                    .arg(1)
                    .arg(keep_day);
            } else {
                // A past period: it expires by itself.
                continue;
            }
            folded += inv.invoke_async::<i64>(&mut conn).await?;
        }
        for old in self.scan(&["quota"]).await? {
            let Some((rest, start)) = old_layout(&old, &self.key(&["quota"])) else {
                continue;
            };
            let Some((provider, key)) = rest.split_once(':') else {
                continue;
            };
            if start != day {
                // Old minute counters expire within two minutes.
                continue;
            }
            let Some(p) = core.provider(provider) else {
                continue;
            };
            let (qday, qend) = p.quota_day(now);
            let mut inv = self.migrate.prepare_invoke();
            inv.key(&old)
                .key(self.quota_key(provider, key, PeriodKind::Day, qday))
                .arg(1)
                .arg(qend - now + 86_400_000);
            folded += inv.invoke_async::<i64>(&mut conn).await?;
        }
        conn.set::<_, _, ()>(&layout_key, KEY_LAYOUT).await?;
        if folded > 0 {
            tracing::info!(
                counters = folded,
                "shared state: budget and quota counters moved to the current key layout"
            );
        }
        Ok(())
    }

    /// Every key under `prefix:{parts}:` (SCAN, so Redis is never blocked).
    async fn scan(&self, parts: &[&str]) -> redis::RedisResult<Vec<String>> {
        let pattern = format!("{}:*", glob_escape(&self.key(parts)));
        let mut conn = self.conn.clone();
        let mut cursor: u64 = 0;
        let mut out = Vec::new();
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut conn)
                .await?;
            out.extend(keys);
            if next == 0 {
                return Ok(out);
            }
            cursor = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_layout_keys_are_told_from_new_ones() {
        assert_eq!(
            old_layout("p:budget:team:1764547200000", "p:budget"),
            Some(("team", 1_764_547_200_000))
        );
        assert_eq!(
            old_layout("p:budget:team:day:1764547200000", "p:budget"),
            None
        );
        assert_eq!(
            old_layout("p:budget:team:month:1764547200000", "p:budget"),
            None
        );
        assert_eq!(
            old_layout("p:quota:groq:GROQ_KEY:1764547200000", "p:quota"),
            Some(("groq:GROQ_KEY", 1_764_547_200_000))
        );
        assert_eq!(
            old_layout("p:quota:groq:GROQ_KEY:minute:60000", "p:quota"),
            None
        );
        assert_eq!(old_layout("p:budgets:x:1", "p:budget"), None);
        assert_eq!(old_layout("p:budget:x:notanumber", "p:budget"), None);
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
