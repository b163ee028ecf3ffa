//! A CronJob's schedule and time zone as Kubernetes 1.32 reads them: the schedule with
//! `github.com/robfig/cron/v3`'s `ParseStandard` (five fields, names for months and weekdays, `*`/`?`,
//! ranges, steps, lists; the `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//! `@hourly` and `@every <duration>` descriptors; a `TZ=`/`CRON_TZ=` prefix), with its error texts; the
//! time zone with `validateTimeZone`, where Go's `time.LoadLocation` is answered from the zone names of
//! the tz database (a built-in list, [`crate::validation::tz_names`], so the answer does not depend on
//! the host). [`Schedule::next_after`] gives the times a schedule fires, in its zone (from the tz
//! database bundled with `jiff`, so daylight saving time moves as it does there), as robfig/cron's
//! `Next` does.

use std::time::Duration;

use crate::validation::go_quote;
use crate::validation::tz_names::ZONE_NAMES;

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// Fields or a fixed interval.
    kind: Kind,
    /// The zone a `TZ=`/`CRON_TZ=` prefix named.
    zone: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// Bit sets of the minutes, hours, days of month, months and days of week that match;
    /// whether the day fields were `*` (then only the other one restricts the day).
    Fields { minute: u64, hour: u64, dom: u64, month: u64, dow: u64, dom_star: bool, dow_star: bool },
    /// `@every`: a fixed interval (at least one second).
    Every(Duration),
}

fn bits(lo: u64, hi: u64, step: u64) -> u64 {
    (lo..=hi).step_by(usize::try_from(step).unwrap_or(1)).fold(0, |b, i| b | (1 << i))
}

impl Schedule {
    /// The zone of a `TZ=` prefix, if the schedule had one.
    pub fn zone(&self) -> Option<&str> {
        self.zone.as_deref()
    }

    /// The first time after `t` at which the schedule fires, in `zone` (an IANA name; `None` or
    /// an unknown name is UTC; a `TZ=` prefix of the schedule wins). `None` when it never fires
    /// within five years (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, t: time::OffsetDateTime, zone: Option<&str>) -> Option<time::OffsetDateTime> {
        let tz = self
            .zone
            .as_deref()
            .or(zone)
            .filter(|z| !z.is_empty())
            .and_then(|z| jiff::tz::db().get(z).ok())
            .unwrap_or(jiff::tz::TimeZone::UTC);
        let ts = jiff::Timestamp::from_second(t.unix_timestamp()).ok()?;
        let next = match &self.kind {
            Kind::Every(d) => {
                ts.checked_add(jiff::SignedDuration::from_secs(i64::try_from(d.as_secs().max(1)).ok()?)).ok()?
            }
            Kind::Fields { minute, hour, dom, month, dow, dom_star, dow_star } => {
                let day_matches = |d: jiff::civil::DateTime| {
                    let dom_ok = dom & (1 << d.day()) != 0;
                    let dow_ok = dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
                    if *dom_star || *dow_star { dom_ok && dow_ok } else { dom_ok || dow_ok }
                };
                let mut dt = tz.to_datetime(ts).with().second(0).subsec_nanosecond(0).build().ok()?;
                dt = dt.checked_add(jiff::Span::new().minutes(1)).ok()?;
                let limit = dt.year() + 5;
                loop {
                    if dt.year() > limit {
                        return None;
                    }
                    if month & (1 << dt.month()) == 0 {
                        dt = dt.first_of_month().checked_add(jiff::Span::new().months(1)).ok()?.start_of_day();
                        continue;
                    }
                    if !day_matches(dt) {
                        dt = dt.checked_add(jiff::Span::new().days(1)).ok()?.start_of_day();
                        continue;
                    }
                    if hour & (1 << dt.hour()) == 0 {
                        dt = dt.with().minute(0).build().ok()?.checked_add(jiff::Span::new().hours(1)).ok()?;
                        continue;
                    }
                    if minute & (1 << dt.minute()) == 0 {
                        dt = dt.checked_add(jiff::Span::new().minutes(1)).ok()?;
                        continue;
                    }
                    // A wall time skipped by a clock change fires at the first instant after it.
                    let at = tz.to_ambiguous_timestamp(dt).compatible().ok()?;
                    if at > ts {
                        break at;
                    }
                    dt = dt.checked_add(jiff::Span::new().minutes(1)).ok()?;
                }
            }
        };
        time::OffsetDateTime::from_unix_timestamp(next.as_second()).ok()
    }
}

/// The bounds (and names) of a schedule field.
struct Bounds {
    min: u64,
    max: u64,
    names: &'static [(&'static str, u64)],
}

const MINUTES: Bounds = Bounds { min: 0, max: 59, names: &[] };
const HOURS: Bounds = Bounds { min: 0, max: 23, names: &[] };
const DAYS_OF_MONTH: Bounds = Bounds { min: 1, max: 31, names: &[] };
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[("sun", 0), ("mon", 1), ("tue", 2), ("wed", 3), ("thu", 4), ("fri", 5), ("sat", 6)],
};

/// `time.LoadLocation`'s answer for a name: `Ok` for a known zone (and "" / "UTC" / "Local").
pub(crate) fn load_location(name: &str) -> Result<(), String> {
    if name.is_empty() || name == "UTC" || name == "Local" {
        return Ok(());
    }
    if name.split('/').any(|p| p == "..") || name.starts_with('/') || name.starts_with('\\') {
        return Err("time: invalid location name".to_string());
    }
    if ZONE_NAMES.binary_search(&name).is_ok() { Ok(()) } else { Err(format!("unknown time zone {name}")) }
}

/// `cron.ParseStandard`: `Err` with robfig/cron's message when the schedule does not parse.
pub fn parse(spec: &str) -> Result<Schedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".to_string());
    }
    let mut spec = spec;
    let mut zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(0);
        // Without a space robfig/cron slices out of range (Go panics); the zone is then the rest.
        let end = spec.find(' ').unwrap_or(spec.len());
        let name = spec.get(eq + 1..end).unwrap_or("");
        if let Err(e) = load_location(name) {
            return Err(format!("provided bad location {name}: {e}"));
        }
        zone = Some(name.to_string());
        spec = spec[end..].trim();
    }
    if spec.starts_with('@') {
        return parse_descriptor(spec).map(|kind| Schedule { kind, zone });
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" ")));
    }
    let mut sets = [0u64; 5];
    let mut stars = [false; 5];
    for (i, (field, bounds)) in fields.iter().zip([MINUTES, HOURS, DAYS_OF_MONTH, MONTHS, DAYS_OF_WEEK]).enumerate() {
        for range in field.split(',').filter(|r| !r.is_empty()) {
            let (set, star) = parse_range(range, &bounds)?;
            sets[i] |= set;
            stars[i] |= star;
        }
    }
    let [minute, hour, dom, month, dow] = sets;
    Ok(Schedule { kind: Kind::Fields { minute, hour, dom, month, dow, dom_star: stars[2], dow_star: stars[4] }, zone })
}

/// Whether `spec` parses, as validation asks.
pub(crate) fn parse_standard(spec: &str) -> Result<(), String> {
    parse(spec).map(|_| ())
}

fn parse_descriptor(descriptor: &str) -> Result<Kind, String> {
    let fields = |minute: u64, hour: u64, dom: u64, month: u64, dow: u64| Kind::Fields {
        minute,
        hour,
        dom,
        month,
        dow,
        dom_star: dom == bits(1, 31, 1),
        dow_star: dow == bits(0, 6, 1),
    };
    let all = |lo, hi| bits(lo, hi, 1);
    match descriptor {
        "@yearly" | "@annually" => Ok(fields(1, 1, 1 << 1, 1 << 1, all(0, 6))),
        "@monthly" => Ok(fields(1, 1, 1 << 1, all(1, 12), all(0, 6))),
        "@weekly" => Ok(fields(1, 1, all(1, 31), all(1, 12), 1)),
        "@daily" | "@midnight" => Ok(fields(1, 1, all(1, 31), all(1, 12), all(0, 6))),
        "@hourly" => Ok(fields(1, all(0, 23), all(1, 31), all(1, 12), all(0, 6))),
        _ => match descriptor.strip_prefix("@every ") {
            Some(duration) => parse_duration(duration)
                .map(Kind::Every)
                .map_err(|e| format!("failed to parse duration {descriptor}: {e}")),
            None => Err(format!("unrecognized descriptor: {descriptor}")),
        },
    }
}

/// `getRange`: `number | name | * | ?`, optionally `-number`, optionally `/step`; the bits it
/// sets, and whether it is a star (`*` or `?` with no step above one).
fn parse_range(expr: &str, bounds: &Bounds) -> Result<(u64, bool), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (bounds.min, bounds.max)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        match low_and_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_and_high[1], bounds)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_uint(range_and_step[1])?;
            if single {
                end = bounds.max;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!("beginning of range ({start}) below minimum ({}): {expr}", bounds.min));
    }
    if end > bounds.max {
        return Err(format!("end of range ({end}) above maximum ({}): {expr}", bounds.max));
    }
    if start > end {
        return Err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}"));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    let star = (low_and_high[0] == "*" || low_and_high[0] == "?") && step == 1;
    Ok((bits(start, end, step), star))
}

fn int_or_name(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    match bounds.names.iter().find(|(n, _)| *n == lower) {
        Some((_, v)) => Ok(*v),
        None => parse_uint(expr),
    }
}

/// `mustParseInt`: Go's `strconv.Atoi`, then no negatives.
fn parse_uint(expr: &str) -> Result<u64, String> {
    let digits = expr.strip_prefix(['+', '-']).unwrap_or(expr);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: invalid syntax",
            go_quote(expr)
        ));
    }
    let Ok(n) = expr.parse::<i64>() else {
        return Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {}: value out of range",
            go_quote(expr)
        ));
    };
    u64::try_from(n).map_err(|_| format!("negative number ({n}) not allowed: {expr}"))
}

/// Go's `time.ParseDuration`, as robfig/cron's `@every` uses it (rounded to whole seconds,
/// at least one; a negative duration is refused by validation's parse, not here).
fn parse_duration(orig: &str) -> Result<Duration, String> {
    let invalid = || format!("time: invalid duration {}", go_quote(orig));
    let mut s = orig.strip_prefix(['-', '+']).unwrap_or(orig);
    if s == "0" {
        return Ok(Duration::from_secs(1));
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let whole: u128 = if int_len == 0 { 0 } else { s[..int_len].parse().map_err(|_| invalid())? };
        s = &s[int_len..];
        let mut fraction_len = 0;
        if let Some(rest) = s.strip_prefix('.') {
            fraction_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            s = &rest[fraction_len..];
        }
        if int_len == 0 && fraction_len == 0 {
            return Err(invalid());
        }
        let unit_len = s.bytes().take_while(|c| *c != b'.' && !c.is_ascii_digit()).count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", go_quote(orig)));
        }
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {} in duration {}", go_quote(unit), go_quote(orig))),
        };
        total = whole.checked_mul(nanos).and_then(|t| total.checked_add(t)).ok_or_else(invalid)?;
        if total > i64::MAX as u128 {
            return Err(invalid());
        }
    }
    let secs = u64::try_from(total / 1_000_000_000).unwrap_or(u64::MAX);
    Ok(Duration::from_secs(secs.max(1)))
}

/// IANA's naming rule for one part of a zone name (`^[A-Za-z\.\-_0-9+]{1,14}$`).
fn valid_zone_part(part: &str) -> bool {
    (1..=14).contains(&part.len())
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
}

/// `validateTimeZone` of a set `timeZone`: the messages Kubernetes gives (none when valid).
pub(crate) fn time_zone_errors(tz: &str) -> Option<String> {
    if tz.is_empty() {
        return Some("timeZone must be nil or non-empty string".to_string());
    }
    for part in tz.split('/') {
        if part == "." || part == ".." || part.starts_with('-') || !valid_zone_part(part) {
            return Some(format!("unknown time zone {tz}"));
        }
    }
    if tz.eq_ignore_ascii_case("Local") {
        return Some(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones".to_string(),
        );
    }
    load_location(tz).err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_schedules_parse() {
        for ok in [
            "* * * * *",
            "*/5 * * * *",
            "0 0 * * 0",
            "0 9-17 * * mon-fri",
            "0 0 1 jan,JUL *",
            "15,45 */2 1-31/3 * ?",
            "0 0 * * 6",
            "@hourly",
            "@daily",
            "@midnight",
            "@weekly",
            "@monthly",
            "@yearly",
            "@annually",
            "@every 1h30m",
            "@every 0",
            "TZ=UTC * * * * *",
            "CRON_TZ=Europe/Berlin 0 0 * * *",
            "  0   0 * * *  ",
        ] {
            assert_eq!(parse_standard(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn bad_schedules_say_why_as_robfig_cron_does() {
        let cases = [
            ("", "empty spec string"),
            ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
            ("* * * * * *", "expected exactly 5 fields, found 6: [* * * * * *]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* 24 * * *", "end of range (24) above maximum (23): 24"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            ("* * * 13 *", "end of range (13) above maximum (12): 13"),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
            ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
            ("*/0 * * * *", "step of range should be a positive number: */0"),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("*/2/3 * * * *", "too many slashes: */2/3"),
            ("x * * * *", "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"),
            ("* * * foo *", "failed to parse int from foo: strconv.Atoi: parsing \"foo\": invalid syntax"),
            ("@often", "unrecognized descriptor: @often"),
            ("@every 1x", "failed to parse duration @every 1x: time: unknown unit \"x\" in duration \"1x\""),
            ("@every 5", "failed to parse duration @every 5: time: missing unit in duration \"5\""),
            ("@every h", "failed to parse duration @every h: time: invalid duration \"h\""),
            ("TZ=Mars/Base * * * * *", "provided bad location Mars/Base: unknown time zone Mars/Base"),
        ];
        for (spec, msg) in cases {
            assert_eq!(parse_standard(spec), Err(msg.to_string()), "{spec}");
        }
    }

    fn at(s: &str) -> time::OffsetDateTime {
        time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).unwrap()
    }

    fn next(spec: &str, after: &str, zone: Option<&str>) -> Option<String> {
        let t = parse(spec).unwrap().next_after(at(after), zone)?;
        Some(t.format(&time::format_description::well_known::Rfc3339).unwrap())
    }

    #[test]
    fn schedules_fire_when_robfig_cron_fires_them() {
        let n = |spec, after| next(spec, after, None).unwrap_or_default();
        assert_eq!(n("*/15 * * * *", "2026-11-24T10:07:31Z"), "2026-11-24T10:15:00Z");
        assert_eq!(n("*/15 * * * *", "2026-11-24T10:15:00Z"), "2026-11-24T10:30:00Z", "strictly after");
        // 2026-11-27 is a Friday.
        assert_eq!(n("0 9 * * mon-fri", "2026-11-27T10:00:00Z"), "2026-11-30T09:00:00Z");
        assert_eq!(n("@yearly", "2026-11-24T00:00:00Z"), "2027-01-01T00:00:00Z");
        assert_eq!(n("@weekly", "2026-11-24T00:00:00Z"), "2026-11-29T00:00:00Z");
        assert_eq!(n("@hourly", "2026-11-24T23:59:00Z"), "2026-11-25T00:00:00Z");
        // Day of month and day of week both restricted: either fires (the 13th, or a Friday).
        assert_eq!(n("0 0 13 * 5", "2026-11-24T00:00:00Z"), "2026-11-27T00:00:00Z");
        assert_eq!(n("0 0 13 * 5", "2026-12-11T01:00:00Z"), "2026-12-13T00:00:00Z");
        // A step on a star is no star: `*/2` restricts the day of month, so an odd day or a
        // Monday fires it (the 25th); with a plain star only Mondays do.
        assert_eq!(n("0 0 */2 * 1", "2026-11-24T00:00:00Z"), "2026-11-25T00:00:00Z");
        assert_eq!(n("0 0 * * 1", "2026-11-24T00:00:00Z"), "2026-11-30T00:00:00Z");
        assert_eq!(n("@every 90s", "2026-11-24T10:00:00Z"), "2026-11-24T10:01:30Z");
        assert_eq!(next("0 0 30 2 *", "2026-11-24T00:00:00Z", None), None, "never");
    }

    #[test]
    fn schedules_follow_their_time_zone_and_its_clock_changes() {
        let berlin = Some("Europe/Berlin");
        assert_eq!(next("0 9 * * *", "2026-11-24T10:00:00Z", berlin).unwrap(), "2026-11-25T08:00:00Z");
        assert_eq!(next("0 9 * * *", "2026-07-01T10:00:00Z", berlin).unwrap(), "2026-07-02T07:00:00Z");
        // 02:30 does not exist on 2026-03-29 in Berlin: it fires at the first instant after (03:30 CEST).
        assert_eq!(next("30 2 * * *", "2026-03-28T12:00:00Z", berlin).unwrap(), "2026-03-29T01:30:00Z");
        // A TZ= prefix wins over the CronJob's zone; an unknown zone is UTC.
        assert_eq!(next("TZ=UTC 0 9 * * *", "2026-11-24T10:00:00Z", berlin).unwrap(), "2026-11-25T09:00:00Z");
        assert_eq!(next("0 9 * * *", "2026-11-24T10:00:00Z", Some("Mars/Base")).unwrap(), "2026-11-25T09:00:00Z");
    }

    #[test]
    fn time_zones() {
        for ok in ["UTC", "Etc/UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "US/Eastern", "Etc/GMT+5"] {
            assert_eq!(time_zone_errors(ok), None, "{ok}");
        }
        assert_eq!(time_zone_errors("").as_deref(), Some("timeZone must be nil or non-empty string"));
        assert_eq!(time_zone_errors("Mars/Base").as_deref(), Some("unknown time zone Mars/Base"));
        assert_eq!(time_zone_errors("Europe/../Berlin").as_deref(), Some("unknown time zone Europe/../Berlin"));
        assert_eq!(time_zone_errors("Europe/-Berlin").as_deref(), Some("unknown time zone Europe/-Berlin"));
        assert_eq!(
            time_zone_errors("America/Argentina_Buenos_Aires").as_deref(),
            Some("unknown time zone America/Argentina_Buenos_Aires")
        );
        assert_eq!(
            time_zone_errors("local").as_deref(),
            Some("timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")
        );
        assert!(ZONE_NAMES.windows(2).all(|w| w[0] < w[1]), "sorted for the binary search");
    }
}
