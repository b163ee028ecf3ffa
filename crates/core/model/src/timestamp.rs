//! Times as Kubernetes and KubeEdge write them, always in UTC with every
//! digit: `metav1.Time` (RFC 3339, seconds), `metav1.MicroTime` (six
//! fractional digits always — RFC 3339 formatting drops trailing zeros,
//! which kubectl and Go's decoder refuse in a MicroTime) and KubeEdge's
//! `2006-01-02 15:04:05` (a device's `last_online`).

use time::OffsetDateTime;

/// `t` in UTC as `YYYY-MM-DD{sep}HH:MM:SS`.
pub fn date_time(t: OffsetDateTime, sep: char) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A `metav1.Time`: `2006-01-02T15:04:05Z`.
pub fn rfc3339(t: OffsetDateTime) -> String {
    format!("{}Z", date_time(t, 'T'))
}

/// A `metav1.MicroTime`: `2006-01-02T15:04:05.000000Z`.
pub fn micro_time(t: OffsetDateTime) -> String {
    format!("{}.{:06}Z", date_time(t, 'T'), t.microsecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_digit_is_written_in_utc() {
        let t = time::Date::from_calendar_date(2026, time::Month::March, 4)
            .and_then(|d| d.with_hms_micro(5, 6, 7, 120))
            .map(|dt| dt.assume_offset(time::UtcOffset::from_hms(2, 0, 0).unwrap_or(time::UtcOffset::UTC)))
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        assert_eq!(rfc3339(t), "2026-03-04T03:06:07Z");
        assert_eq!(micro_time(t), "2026-03-04T03:06:07.000120Z");
        assert_eq!(date_time(t, ' '), "2026-03-04 03:06:07");
    }
}
