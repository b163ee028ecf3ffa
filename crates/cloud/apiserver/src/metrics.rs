//! The metrics `/metrics` serves: the process's registry (handed in with
//! [`crate::ApiServerConfig::metrics`]), to which the server adds its own —
//! requests by verb, resource and code, request latency by verb — and the
//! store's figures (open watches, revision, watch history), read at each
//! scrape. Encoded as OpenMetrics text.

use std::time::Duration;

use edgehive_store::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// The content type of the exposition.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Request latency buckets (seconds): Kubernetes' apiserver's, 5 ms to the
/// 60 s request deadline (a subset).
const LATENCY_BUCKETS: [f64; 13] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The labels of a request count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: &'static str,
    resource: &'static str,
    code: u16,
}

/// A label set with the verb alone.
type VerbLabel = [(&'static str, &'static str); 1];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// The API server's metrics and the registry it serves.
#[derive(Debug)]
pub(crate) struct Metrics {
    requests: Family<RequestLabels, Counter>,
    latency: Family<VerbLabel, Histogram, fn() -> Histogram>,
    /// Authorization decisions, by `decision` (`allowed`, `forbidden`).
    authorizations: Family<[(&'static str, &'static str); 1], Counter>,
    registry: Registry,
}

impl Metrics {
    /// Adds the server's metrics (prefix `apiserver`) and the store's
    /// (prefix `store`) to `registry`, which is then what `/metrics` serves.
    pub(crate) fn new(mut registry: Registry, store: &Store) -> Metrics {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<VerbLabel, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let r = registry.sub_registry_with_prefix("apiserver");
        r.register("request", "Requests served, by verb, resource and HTTP code", requests.clone());
        r.register_with_unit(
            "request_duration",
            "Request latency, by verb (watches excluded)",
            Unit::Seconds,
            latency.clone(),
        );
        let authorizations = Family::<[(&'static str, &'static str); 1], Counter>::default();
        r.register(
            "authorization_decisions",
            "Authorization decisions, by decision (allowed, forbidden)",
            authorizations.clone(),
        );
        registry.sub_registry_with_prefix("store").register_collector(Box::new(StoreMetrics(store.clone())));
        Metrics { requests, latency, authorizations, registry }
    }

    /// Records one finished request.
    pub(crate) fn observe(&self, verb: &'static str, resource: &'static str, code: u16, took: Duration) {
        self.requests.get_or_create(&RequestLabels { verb, resource, code }).inc();
        if verb == "watch" {
            return;
        }
        self.latency.get_or_create(&[("verb", verb)]).observe(took.as_secs_f64());
    }

    /// Records one authorization decision.
    pub(crate) fn authorized(&self, allowed: bool) {
        self.authorizations.get_or_create(&[("decision", if allowed { "allowed" } else { "forbidden" })]).inc();
    }

    /// The exposition text of the whole registry.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String fails only if an encoder does, and none of
        // ours does.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The store's watch cache figures, read at each scrape.
#[derive(Debug)]
struct StoreMetrics(Store);

impl Collector for StoreMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let cache = self.0.watch_cache().stats();
        for (name, help, v) in [
            ("watchers", "Watches open on the store.", cache.watchers as u64),
            ("revision", "The store's current revision.", cache.rev),
            ("watch_history_events", "Events kept for watches starting in the past.", cache.ring_len as u64),
            ("watch_history_oldest_revision", "Oldest revision a watch may start from.", cache.base),
        ] {
            ConstGauge::new(v).encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        for (name, help, v) in [
            ("events", "Changes published to watches.", cache.published),
            ("watch_lagged", "Watches ended because they fell behind.", cache.lagged),
        ] {
            ConstCounter::new(v).encode(encoder.encode_descriptor(name, help, None, MetricType::Counter)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn renders_counts_buckets_and_the_store() {
        let dir = edgehive_testkit::fixtures::TempDir::new("apiserver-metrics");
        let backend = edgehive_store::BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false };
        let store = Store::open(edgehive_store::StoreConfig::new(backend)).await.expect("open the store");
        let m = Metrics::new(Registry::with_prefix("edgehive"), &store);
        m.observe("create", "pods", 201, Duration::from_millis(3));
        m.observe("create", "pods", 201, Duration::from_millis(30));
        m.observe("watch", "pods", 200, Duration::from_secs(100));
        let text = m.render();
        for line in [
            "edgehive_apiserver_request_total{verb=\"create\",resource=\"pods\",code=\"201\"} 2",
            "edgehive_apiserver_request_total{verb=\"watch\",resource=\"pods\",code=\"200\"} 1",
            "edgehive_apiserver_request_duration_seconds_bucket{le=\"0.005\",verb=\"create\"} 1",
            "edgehive_apiserver_request_duration_seconds_bucket{le=\"0.05\",verb=\"create\"} 2",
            "edgehive_apiserver_request_duration_seconds_count{verb=\"create\"} 2",
            "edgehive_store_watchers 0",
            "edgehive_store_events_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        assert!(!text.contains("duration_seconds_count{verb=\"watch\"}"));
        assert!(text.ends_with("# EOF\n"));
        store.close().await;
    }
}
