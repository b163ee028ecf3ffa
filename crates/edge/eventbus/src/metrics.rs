//! The EventBus's metrics. Every counter and gauge is one atomic
//! (prometheus-client's); labelled ones are looked up once, at start.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// A label set with one label.
type Label = [(&'static str, &'static str); 1];

/// The EventBus's metrics. The module updates them; read them by
/// registering them ([`EventBusMetrics::register`]) and encoding the registry.
#[derive(Debug)]
pub struct EventBusMetrics {
    connected: Family<Label, Gauge>,
    /// 1 while the subscribing client is connected to the external broker.
    pub(crate) sub_connected: Gauge,
    /// 1 while the publishing client is connected to the external broker.
    pub(crate) pub_connected: Gauge,
    connects: Family<Label, Counter>,
    pub(crate) sub_connects: Counter,
    pub(crate) pub_connects: Counter,
    disconnects: Family<Label, Counter>,
    /// Failed connection attempts and lost connections of the subscriber.
    pub(crate) sub_disconnects: Counter,
    /// ... of the publisher.
    pub(crate) pub_disconnects: Counter,
    /// MQTT messages received (either broker).
    pub(crate) received: Counter,
    forwarded: Family<Label, Counter>,
    /// MQTT messages passed to DeviceTwin.
    pub(crate) to_twin: Counter,
    /// MQTT messages passed to the cloud (EdgeHub).
    pub(crate) to_cloud: Counter,
    published: Family<Label, Counter>,
    /// Publishes queued for the external broker.
    pub(crate) published_external: Counter,
    /// Publishes handed to the embedded broker.
    pub(crate) published_internal: Counter,
    dropped: Family<Label, Counter>,
    pub(crate) dropped_not_utf8: Counter,
    pub(crate) dropped_too_large: Counter,
    pub(crate) dropped_malformed: Counter,
    pub(crate) dropped_unknown_operation: Counter,
    pub(crate) dropped_too_many_topics: Counter,
    /// A bus module did not take an MQTT message within the deadline.
    pub(crate) dropped_undeliverable: Counter,
    /// A queue of the EventBus's own was full (publishes to the external
    /// broker, messages the embedded broker hands over).
    pub(crate) dropped_queue_full: Counter,
    /// A client of the embedded broker had no room for a message.
    pub(crate) dropped_client_queue_full: Counter,
    /// A retained message of the embedded broker was delivered but not
    /// retained: too many retained topics or bytes.
    pub(crate) dropped_retained_budget: Counter,
    /// Topics subscribed: KubeEdge's six and the stored ones.
    pub(crate) subscriptions: Gauge,
    /// Stored topics that could not be written or read.
    pub(crate) store_failures: Counter,
}

impl Default for EventBusMetrics {
    fn default() -> Self {
        let connected = Family::<Label, Gauge>::default();
        let connects = Family::<Label, Counter>::default();
        let disconnects = Family::<Label, Counter>::default();
        let forwarded = Family::<Label, Counter>::default();
        let published = Family::<Label, Counter>::default();
        let dropped = Family::<Label, Counter>::default();
        let client = |f: &Family<Label, Counter>, v| f.get_or_create_owned(&[("client", v)]);
        let reason = |v| dropped.get_or_create_owned(&[("reason", v)]);
        EventBusMetrics {
            sub_connected: connected.get_or_create_owned(&[("client", "sub")]),
            pub_connected: connected.get_or_create_owned(&[("client", "pub")]),
            sub_connects: client(&connects, "sub"),
            pub_connects: client(&connects, "pub"),
            sub_disconnects: client(&disconnects, "sub"),
            pub_disconnects: client(&disconnects, "pub"),
            received: Counter::default(),
            to_twin: forwarded.get_or_create_owned(&[("to", "twin")]),
            to_cloud: forwarded.get_or_create_owned(&[("to", "cloud")]),
            published_external: published.get_or_create_owned(&[("broker", "external")]),
            published_internal: published.get_or_create_owned(&[("broker", "internal")]),
            dropped_not_utf8: reason("not_utf8"),
            dropped_too_large: reason("too_large"),
            dropped_malformed: reason("malformed"),
            dropped_unknown_operation: reason("unknown_operation"),
            dropped_too_many_topics: reason("too_many_topics"),
            dropped_undeliverable: reason("undeliverable"),
            dropped_queue_full: reason("queue_full"),
            dropped_client_queue_full: reason("client_queue_full"),
            dropped_retained_budget: reason("retained_budget"),
            subscriptions: Gauge::default(),
            store_failures: Counter::default(),
            connected,
            connects,
            disconnects,
            forwarded,
            published,
            dropped,
        }
    }
}

impl EventBusMetrics {
    /// Registers the metrics in `registry` under the prefix `eventbus`
    /// (`edgehive_eventbus_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_eventbus::EventBusMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_eventbus_connected{client=\"sub\"} 0\n"));
    /// assert!(text.contains("\nedgehive_eventbus_dropped_total{reason=\"not_utf8\"} 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("eventbus");
        r.register(
            "connected",
            "1 while the client (sub, pub) is connected to the external MQTT broker",
            self.connected.clone(),
        );
        r.register("connects", "Connections made to the external MQTT broker, by client", self.connects.clone());
        r.register(
            "disconnects",
            "Failed connection attempts and lost connections to the external MQTT broker, by client",
            self.disconnects.clone(),
        );
        r.register("received", "MQTT messages received", self.received.clone());
        r.register(
            "forwarded",
            "MQTT messages passed on the bus, by destination (twin, cloud)",
            self.forwarded.clone(),
        );
        r.register("published", "Publishes handed to a broker, by broker (external, internal)", self.published.clone());
        r.register("dropped", "Messages dropped, by reason", self.dropped.clone());
        r.register(
            "subscriptions",
            "Topics subscribed (KubeEdge's six and the stored ones)",
            self.subscriptions.clone(),
        );
        r.register(
            "store_failures",
            "Stored topics that could not be written, deleted or read",
            self.store_failures.clone(),
        );
    }

    /// The counter of a refusal's reason.
    pub(crate) fn dropped(&self, reason: &str) -> &Counter {
        match reason {
            "not_utf8" => &self.dropped_not_utf8,
            "too_large" => &self.dropped_too_large,
            "unknown_operation" => &self.dropped_unknown_operation,
            "too_many_topics" => &self.dropped_too_many_topics,
            "undeliverable" => &self.dropped_undeliverable,
            "queue_full" => &self.dropped_queue_full,
            "client_queue_full" => &self.dropped_client_queue_full,
            "retained_budget" => &self.dropped_retained_budget,
            _ => &self.dropped_malformed,
        }
    }

    /// Messages dropped for `reason` (`not_utf8`, `too_large`, `malformed`,
    /// `unknown_operation`, `too_many_topics`, `undeliverable`, `queue_full`,
    /// `client_queue_full`, `retained_budget`).
    pub fn dropped_count(&self, reason: &str) -> u64 {
        self.dropped(reason).get()
    }

    /// MQTT messages received from the brokers.
    pub fn received_count(&self) -> u64 {
        self.received.get()
    }

    /// Connections made to the external broker by the subscribing and the
    /// publishing client.
    pub fn connects_count(&self) -> (u64, u64) {
        (self.sub_connects.get(), self.pub_connects.get())
    }

    /// Failed connection attempts and lost connections of the subscribing
    /// and the publishing client.
    pub fn disconnects_count(&self) -> (u64, u64) {
        (self.sub_disconnects.get(), self.pub_disconnects.get())
    }

    /// Whether the subscribing and the publishing client are connected now.
    pub fn is_connected(&self) -> (bool, bool) {
        (self.sub_connected.get() == 1, self.pub_connected.get() == 1)
    }

    /// Topics subscribed now.
    pub fn subscriptions_count(&self) -> i64 {
        self.subscriptions.get()
    }
}
