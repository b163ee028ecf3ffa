//! Durations as people write them: Go's (`1h2m3s`, `250ms`, `1.5s`), as
//! KubeEdge's and Kubernetes' configuration and kubeadm's flags take them,
//! plus `d` for days (`90d`).

use std::time::Duration;

/// Parses a duration; `None` for anything else (no unit, an unknown unit,
/// a negative or absurd value).
pub(crate) fn parse(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "d" => 86400.0,
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[u..];
    }
    // A thousand years is more than anything here means.
    (total.is_finite() && total <= 86400.0 * 365.0 * 1000.0).then(|| Duration::from_secs_f64(total))
}

/// A clap value parser for a positive duration.
#[cfg(feature = "cloud")]
pub(crate) fn positive(text: &str) -> Result<Duration, String> {
    parse(text).filter(|d| !d.is_zero()).ok_or_else(|| format!("{text:?} is not a duration such as 24h, 90d or 30m"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_and_days() {
        assert_eq!(parse("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse("1h2m"), Some(Duration::from_secs(3720)));
        assert_eq!(parse("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse("90d"), Some(Duration::from_secs(90 * 86400)));
        for bad in ["2x", "m", "", "10", "-1s", "1e400s"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
