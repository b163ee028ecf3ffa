//! RFC 3339 formatting of meta/v1 `Time` and `MicroTime`, as Go's JSON encoding writes them.
//!
//! `Time` is written to the second (`2006-01-02T15:04:05Z`; its protobuf decoder drops the
//! nanoseconds), `MicroTime` with six fractional digits (`2006-01-02T15:04:05.000000Z`, the
//! nanoseconds truncated toward zero to microseconds). Both are UTC. Years outside
//! 0000..=9999 cannot be written in RFC 3339 and are reported as invalid.

use super::ProtoError;

/// Seconds from the Unix epoch back to 0000-01-01T00:00:00Z.
const FIRST_SECOND: i64 = -62_167_219_200;
/// Seconds from the Unix epoch to 9999-12-31T23:59:59Z.
const LAST_SECOND: i64 = 253_402_300_799;
const SECONDS_PER_DAY: i64 = 86_400;
const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// Formats a meta/v1 `Time` (`seconds` since the epoch; Go ignores `nanos` here).
pub(crate) fn format_time(seconds: i64) -> Result<String, ProtoError> {
    let (date, clock) = split(seconds)?;
    Ok(format!("{date}T{clock}Z"))
}

/// Formats a meta/v1 `MicroTime`.
pub(crate) fn format_micro_time(seconds: i64, nanos: i32) -> Result<String, ProtoError> {
    // Truncate toward zero to whole microseconds, then let the sum carry into the seconds, as
    // Go's time.Unix does for nanoseconds outside 0..1e9.
    let micros_as_nanos = i128::from(nanos / 1000 * 1000);
    let total = i128::from(seconds) * NANOS_PER_SECOND + micros_as_nanos;
    let whole = i64::try_from(total.div_euclid(NANOS_PER_SECOND)).map_err(|_| out_of_range(seconds))?;
    let micros = total.rem_euclid(NANOS_PER_SECOND) / 1000;
    let (date, clock) = split(whole)?;
    Ok(format!("{date}T{clock}.{micros:06}Z"))
}

fn out_of_range(seconds: i64) -> ProtoError {
    ProtoError::Invalid(format!("timestamp {seconds}s is outside years 0000..9999"))
}

/// Splits seconds since the epoch into `YYYY-MM-DD` and `hh:mm:ss`.
fn split(seconds: i64) -> Result<(String, String), ProtoError> {
    if !(FIRST_SECOND..=LAST_SECOND).contains(&seconds) {
        return Err(out_of_range(seconds));
    }
    let days = seconds.div_euclid(SECONDS_PER_DAY);
    let in_day = seconds.rem_euclid(SECONDS_PER_DAY);
    let (year, month, day) = date_of(days);
    let clock = format!("{:02}:{:02}:{:02}", in_day / 3600, in_day / 60 % 60, in_day % 60);
    Ok((format!("{year:04}-{month:02}-{day:02}"), clock))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days from 1970-01-01 to January 1st of `year`.
fn days_before_year(year: i64) -> i64 {
    // Leap days in the years 1..year (or, going back, year..1) counted by the Gregorian rule.
    let leaps = |y: i64| (y - 1).div_euclid(4) - (y - 1).div_euclid(100) + (y - 1).div_euclid(400);
    365 * (year - 1970) + leaps(year) - leaps(1970)
}

/// The civil date of a day number counted from 1970-01-01 (proleptic Gregorian).
fn date_of(days: i64) -> (i64, u32, i64) {
    // A first guess from the mean year length, then corrected by at most a step or two.
    let mut year = 1970 + days.div_euclid(365);
    while days_before_year(year) > days {
        year -= 1;
    }
    while days_before_year(year + 1) <= days {
        year += 1;
    }
    let mut day_of_year = days - days_before_year(year);
    let february = if is_leap(year) { 29 } else { 28 };
    let lengths = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 1;
    for length in lengths {
        if day_of_year < length {
            break;
        }
        day_of_year -= length;
        month += 1;
    }
    (year, month, day_of_year + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (-1, "1969-12-31T23:59:59Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (951_868_800, "2000-03-01T00:00:00Z"),
            (1_700_000_000, "2023-11-14T22:13:20Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
            (-62_135_596_800, "0001-01-01T00:00:00Z"),
            (FIRST_SECOND, "0000-01-01T00:00:00Z"),
            (LAST_SECOND, "9999-12-31T23:59:59Z"),
        ];
        for (seconds, want) in cases {
            assert_eq!(format_time(seconds).as_deref(), Ok(want), "{seconds}");
        }
    }

    #[test]
    fn every_day_of_a_few_years_round_trips() {
        // Walk day by day across leap and century years; the date must advance by one day.
        let mut previous = date_of(days_before_year(1899) - 1);
        for day in days_before_year(1899)..days_before_year(2102) {
            let (y, m, d) = date_of(day);
            let (py, pm, pd) = previous;
            let next_ok = (y == py && m == pm && d == pd + 1)
                || (y == py && m == pm + 1 && d == 1)
                || (y == py + 1 && m == 1 && d == 1 && pm == 12 && pd == 31);
            assert!(next_ok, "{previous:?} -> {:?}", (y, m, d));
            assert!(!(m == 2 && d == 29 && !is_leap(y)));
            previous = (y, m, d);
        }
    }

    #[test]
    fn micro_time() {
        assert_eq!(format_micro_time(1_700_000_000, 123_456_789).as_deref(), Ok("2023-11-14T22:13:20.123456Z"));
        assert_eq!(format_micro_time(0, 0).as_deref(), Ok("1970-01-01T00:00:00.000000Z"));
        // Negative nanoseconds borrow from the seconds, truncated toward zero first.
        assert_eq!(format_micro_time(1, -1_500).as_deref(), Ok("1970-01-01T00:00:00.999999Z"));
        assert_eq!(format_micro_time(0, 1_999_999_999).as_deref(), Ok("1970-01-01T00:00:01.999999Z"));
    }

    #[test]
    fn out_of_range_is_an_error() {
        assert!(format_time(LAST_SECOND + 1).is_err());
        assert!(format_time(FIRST_SECOND - 1).is_err());
        assert!(format_time(i64::MIN).is_err());
        assert!(format_micro_time(i64::MAX, i32::MAX).is_err());
    }
}
