//! Prometheus metrics of the API server and its store, in the text
//! exposition format at `/metrics`: requests by verb, resource and code,
//! request latency, open watches, store revision and watch-hub counters.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use edgehive_store::HubStats;

/// Latency buckets (seconds), as Kubernetes' apiserver uses (a subset).
const BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// The API server's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    requests: BTreeMap<(&'static str, &'static str, u16), u64>,
    latency: BTreeMap<&'static str, Histogram>,
}

impl Metrics {
    /// Records one finished request.
    pub(crate) fn observe(&self, verb: &'static str, resource: &'static str, code: u16, took: Duration) {
        let mut m = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.requests.entry((verb, resource, code)).or_default() += 1;
        if verb == "watch" {
            return;
        }
        let secs = took.as_secs_f64();
        let h = m.latency.entry(verb).or_default();
        h.count += 1;
        h.sum += secs;
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
    }

    /// The exposition text, with the store's figures.
    pub(crate) fn render(&self, hub: &HubStats) -> String {
        let m = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = String::new();
        out.push_str("# HELP apiserver_request_total Requests served, by verb, resource and HTTP code.\n");
        out.push_str("# TYPE apiserver_request_total counter\n");
        for ((verb, resource, code), n) in &m.requests {
            let _ =
                writeln!(out, "apiserver_request_total{{verb=\"{verb}\",resource=\"{resource}\",code=\"{code}\"}} {n}");
        }
        out.push_str("# HELP apiserver_request_duration_seconds Request latency (watches excluded).\n");
        out.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
        for (verb, h) in &m.latency {
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",le=\"{b}\"}} {}",
                    h.counts[i]
                );
            }
            let _ =
                writeln!(out, "apiserver_request_duration_seconds_bucket{{verb=\"{verb}\",le=\"+Inf\"}} {}", h.count);
            let _ = writeln!(out, "apiserver_request_duration_seconds_sum{{verb=\"{verb}\"}} {}", h.sum);
            let _ = writeln!(out, "apiserver_request_duration_seconds_count{{verb=\"{verb}\"}} {}", h.count);
        }
        let gauges = [
            ("edgehive_store_watchers", "Watches open on the store.", hub.watchers as u64),
            ("edgehive_store_revision", "The store's current revision.", hub.rev),
            (
                "edgehive_store_watch_history_events",
                "Events kept for watches starting in the past.",
                hub.ring_len as u64,
            ),
            ("edgehive_store_watch_history_oldest_revision", "Oldest revision a watch may start from.", hub.base),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let counters = [
            ("edgehive_store_events_total", "Changes published to watches.", hub.published),
            ("edgehive_store_watch_lagged_total", "Watches ended because they fell behind.", hub.lagged),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_and_buckets() {
        let m = Metrics::default();
        m.observe("create", "pods", 201, Duration::from_millis(3));
        m.observe("create", "pods", 201, Duration::from_millis(30));
        m.observe("watch", "pods", 200, Duration::from_secs(100));
        let text = m.render(&HubStats { watchers: 2, ..HubStats::default() });
        assert!(text.contains("apiserver_request_total{verb=\"create\",resource=\"pods\",code=\"201\"} 2"));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{verb=\"create\",le=\"0.005\"} 1"));
        assert!(text.contains("apiserver_request_duration_seconds_bucket{verb=\"create\",le=\"0.05\"} 2"));
        assert!(!text.contains("duration_seconds_count{verb=\"watch\"}"));
        assert!(text.contains("edgehive_store_watchers 2"));
    }
}
