//! Time source. Cooldown arithmetic reads the clock through [`Clock`] so tests can fix "now".

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, from the system clock.
pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        unix_ms()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(now_ms: i64) -> Self {
        Self(AtomicI64::new(now_ms))
    }
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A Unix-ms instant as `2026-11-30 05:00:00 UTC`.
pub fn fmt_utc(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// Start of the minute containing `ms`.
pub fn minute_start(ms: i64) -> i64 {
    ms.div_euclid(60_000) * 60_000
}

/// The civil day containing `ms` in `tz`: its first instant and the next day's, so a DST day
/// is 23 or 25 hours long and a day whose midnight does not exist starts when the clocks
/// resume. Every daily period (budgets, daily quotas, daily resets) is derived here.
pub fn day_bounds(ms: i64, tz: &jiff::tz::TimeZone) -> (i64, i64) {
    let Ok(ts) = jiff::Timestamp::from_millisecond(ms) else {
        return fixed_day(ms);
    };
    let date = ts.to_zoned_datetime(tz.clone()).date();
    match (
        start_of(date, tz),
        date.tomorrow().ok().and_then(|d| start_of(d, tz)),
    ) {
        (Some(a), Some(b)) => (a, b),
        _ => fixed_day(ms),
    }
}

/// The civil month containing `ms` in `tz`: the first instant of its 1st and of the next
/// month's 1st.
pub fn month_bounds(ms: i64, tz: &jiff::tz::TimeZone) -> (i64, i64) {
    let Ok(ts) = jiff::Timestamp::from_millisecond(ms) else {
        return fixed_day(ms);
    };
    let first = ts.to_zoned_datetime(tz.clone()).date().first_of_month();
    let next = first.last_of_month().tomorrow().ok();
    match (start_of(first, tz), next.and_then(|d| start_of(d, tz))) {
        (Some(a), Some(b)) => (a, b),
        _ => fixed_day(ms),
    }
}

/// Midnight of `date` in `tz` (or the first instant after a gap that swallows midnight).
fn start_of(date: jiff::civil::Date, tz: &jiff::tz::TimeZone) -> Option<i64> {
    date.to_zoned_datetime(tz.clone())
        .ok()
        .map(|z| z.timestamp().as_millisecond())
}

/// 24-hour UTC days: only for instants outside jiff's range.
fn fixed_day(ms: i64) -> (i64, i64) {
    let start = ms.div_euclid(86_400_000) * 86_400_000;
    (start, start + 86_400_000)
}

/// Unix ms of an RFC 3339 instant, for tests that pin the clock.
#[cfg(test)]
pub(crate) fn ms(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or_else(|e| unreachable!("{s}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::tz::TimeZone;

    #[test]
    fn utc_days_and_months_at_their_boundaries() {
        let utc = TimeZone::UTC;
        // First and last instant of a day.
        let day = (ms("2026-06-15T00:00:00Z"), ms("2026-06-16T00:00:00Z"));
        assert_eq!(day_bounds(day.0, &utc), day);
        assert_eq!(day_bounds(day.1 - 1, &utc), day);
        assert_eq!(day_bounds(day.1, &utc).0, day.1);
        // The 1st of a month: the day and the month start at the same instant.
        let first = ms("2026-12-01T00:00:00Z");
        assert_eq!(day_bounds(first, &utc).0, first);
        assert_eq!(
            month_bounds(first, &utc),
            (first, ms("2027-01-01T00:00:00Z"))
        );
        // The last day of a month, and 31 Dec → 1 Jan.
        let last = ms("2026-12-31T23:59:59.999Z");
        assert_eq!(month_bounds(last, &utc), (first, last + 1));
        assert_eq!(
            day_bounds(last, &utc),
            (ms("2026-12-31T00:00:00Z"), last + 1)
        );
        assert_eq!(
            month_bounds(last + 1, &utc),
            (last + 1, ms("2027-02-01T00:00:00Z"))
        );
        // Leap day: February has 29 days in 2028 and 28 in 2027.
        assert_eq!(
            day_bounds(ms("2028-02-29T12:00:00Z"), &utc),
            (ms("2028-02-29T00:00:00Z"), ms("2028-03-01T00:00:00Z"))
        );
        assert_eq!(
            month_bounds(ms("2028-02-29T23:59:59.999Z"), &utc).1,
            ms("2028-03-01T00:00:00Z")
        );
        assert_eq!(
            month_bounds(ms("2027-02-28T23:59:59.999Z"), &utc).1,
            ms("2027-03-01T00:00:00Z")
        );
        // Before 1970 (negative instants) still floor to the day's start.
        assert_eq!(day_bounds(-1, &utc), (ms("1969-12-31T00:00:00Z"), 0));
        assert_eq!(minute_start(-1), -60_000);
        assert_eq!(minute_start(first + 59_999), first);
    }

    #[test]
    fn zoned_days_follow_dst() {
        let la = TimeZone::get("America/Los_Angeles").unwrap_or(TimeZone::UTC);
        // Spring forward (8 Mar 2026): a 23-hour day.
        let (a, b) = day_bounds(ms("2026-03-08T12:00:00Z"), &la);
        assert_eq!(a, ms("2026-03-08T08:00:00Z"));
        assert_eq!(b - a, 23 * 3_600_000);
        // Fall back (1 Nov 2026): a 25-hour day; its last instant still belongs to it.
        let (a, b) = day_bounds(ms("2026-11-01T12:00:00Z"), &la);
        assert_eq!(a, ms("2026-11-01T07:00:00Z"));
        assert_eq!(b - a, 25 * 3_600_000);
        assert_eq!(day_bounds(b - 1, &la), (a, b));
        // The month that holds a DST change is not a whole number of 24-hour days.
        let (m0, m1) = month_bounds(ms("2026-03-31T23:00:00-07:00"), &la);
        assert_eq!(m0, ms("2026-03-01T08:00:00Z"));
        assert_eq!(m1, ms("2026-04-01T07:00:00Z"));
        // A zone whose midnight is skipped (Santiago springs forward at 24:00): the day starts
        // at 01:00, the first instant that exists.
        let scl = TimeZone::get("America/Santiago").unwrap_or(TimeZone::UTC);
        let (a, _) = day_bounds(ms("2026-09-06T12:00:00Z"), &scl);
        assert_eq!(a, ms("2026-09-06T04:00:00Z"));
    }
}
