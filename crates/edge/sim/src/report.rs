//! What a scenario measured: percentiles, process samples, and the summary
//! printed as a table and written as JSON.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The `p`-quantile (0–1) of sorted samples (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// p50, p99 and max of samples (sorted here), in milliseconds.
pub fn tail_ms(samples: &mut [Duration]) -> (f64, f64, f64) {
    samples.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(percentile(samples, 0.5)), ms(percentile(samples, 0.99)), ms(samples.last().copied().unwrap_or_default()))
}

/// Resident memory and CPU time of a process, from `/proc`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// Resident set size, bytes.
    pub rss: u64,
    /// Peak resident set size, bytes.
    pub hwm: u64,
    /// User + system CPU time, seconds.
    pub cpu: f64,
}

impl ProcSample {
    /// A sample of process `pid` (`None` when it cannot be read: gone, or
    /// not on Linux).
    pub fn of(pid: u32) -> Option<ProcSample> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kib = |field: &str| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
                .map(|k| k * 1024)
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // USER_HZ is 100 on every Linux this runs on.
        Some(ProcSample { rss: kib("VmRSS:")?, hwm: kib("VmHWM:").unwrap_or(0), cpu: ticks as f64 / 100.0 })
    }

    /// This process.
    pub fn own() -> Option<ProcSample> {
        ProcSample::of(std::process::id())
    }
}

/// One figure of a summary.
#[derive(Debug, Clone)]
pub struct Figure {
    /// What it is, as the table shows it.
    pub label: String,
    /// Its key in the JSON.
    pub key: String,
    /// The value.
    pub value: Value,
    /// Unit, shown after the value (may be empty).
    pub unit: &'static str,
}

/// A scenario's summary.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// Its figures, in order.
    pub figures: Vec<Figure>,
}

impl Report {
    /// An empty report of `scenario`.
    pub fn new(scenario: &str) -> Report {
        Report { scenario: scenario.to_owned(), figures: Vec::new() }
    }

    /// Adds a figure.
    pub fn add(&mut self, key: &str, label: &str, value: impl Into<Value>, unit: &'static str) {
        self.figures.push(Figure { label: label.to_owned(), key: key.to_owned(), value: value.into(), unit });
    }

    /// Adds a number rounded to `digits` decimals.
    pub fn num(&mut self, key: &str, label: &str, value: f64, digits: i32, unit: &'static str) {
        let scale = 10f64.powi(digits);
        let v = (value * scale).round() / scale;
        self.add(key, label, json!(v), unit);
    }

    /// Adds p50, p99 and max (milliseconds) of `samples`.
    pub fn tail(&mut self, key: &str, label: &str, samples: &mut [Duration]) {
        let (p50, p99, max) = tail_ms(samples);
        self.num(&format!("{key}_p50_ms"), &format!("{label} p50"), p50, 2, "ms");
        self.num(&format!("{key}_p99_ms"), &format!("{label} p99"), p99, 2, "ms");
        self.num(&format!("{key}_max_ms"), &format!("{label} max"), max, 2, "ms");
        self.add(&format!("{key}_samples"), &format!("{label} samples"), samples.len(), "");
    }

    /// The figures as a two-column table.
    pub fn table(&self) -> String {
        let width = self.figures.iter().map(|f| f.label.chars().count()).max().unwrap_or(0);
        let mut out = format!("edgehive sim {}\n", self.scenario);
        for f in &self.figures {
            let v = match &f.value {
                Value::String(s) => s.clone(),
                Value::Number(n) => group_digits(&n.to_string()),
                other => other.to_string(),
            };
            let unit = if f.unit.is_empty() { String::new() } else { format!(" {}", f.unit) };
            out.push_str(&format!("  {:<width$}  {v}{unit}\n", f.label));
        }
        out
    }

    /// The figures as one JSON object: `{"scenario": ..., "figures": {key: value}}`.
    pub fn json(&self) -> Value {
        let figures: Map<String, Value> = self.figures.iter().map(|f| (f.key.clone(), f.value.clone())).collect();
        json!({"scenario": self.scenario, "figures": figures})
    }
}

/// `1234567.5` as `1,234,567.5`.
fn group_digits(n: &str) -> String {
    let (sign, rest) = n.strip_prefix('-').map_or(("", n), |r| ("-", r));
    let (int, frac) = rest.split_once('.').map_or((rest, None), |(i, f)| (i, Some(f)));
    if int.len() <= 4 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return n.to_owned();
    }
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_tables_group_digits() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let (p50, p99, max) = tail_ms(&mut v);
        assert_eq!((p50, p99, max), (51.0, 99.0, 100.0));
        assert_eq!(percentile(&[], 0.99), Duration::ZERO);
        assert_eq!(group_digits("1234567.25"), "1,234,567.25");
        assert_eq!(group_digits("1234"), "1234");
        assert_eq!(group_digits("-12345"), "-12,345");
        let mut r = Report::new("hold");
        r.add("nodes", "nodes", 10_000, "");
        r.num("rss", "cloud RSS", 1.234, 1, "MiB");
        assert!(r.table().contains("nodes      10,000\n"), "{}", r.table());
        assert_eq!(r.json()["figures"]["rss"], json!(1.2));
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = ProcSample::own().expect("/proc");
        assert!(s.rss > 0 && s.hwm >= s.rss);
    }
}
