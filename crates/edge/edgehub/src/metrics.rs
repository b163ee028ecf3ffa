//! EdgeHub's metrics: what an operator watches on an edge's link. Each is
//! one atomic (prometheus-client's); [`EdgeHubMetrics::register`] exports
//! them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// EdgeHub's counters and gauges. The hub updates them; read them by
/// registering them ([`EdgeHubMetrics::register`]) and encoding the
/// registry.
#[derive(Debug, Default)]
pub struct EdgeHubMetrics {
    /// 1 while connected to the cloud (links connected, when several
    /// links share these metrics).
    pub(crate) connected: Gauge,
    /// Connections made.
    pub(crate) connects: Counter,
    /// Dial attempts that failed.
    pub(crate) dial_failures: Counter,
    /// Connections lost (any reason but shutdown).
    pub(crate) disconnects: Counter,
    /// Reconnects to use a renewed certificate.
    pub(crate) cert_reconnects: Counter,
    /// Messages received from the cloud.
    pub(crate) downstream: Counter,
    /// Downstream messages with no module to take them.
    pub(crate) downstream_undeliverable: Counter,
    /// Messages written to the cloud (keepalives not counted).
    pub(crate) upstream: Counter,
    /// Keepalives written.
    pub(crate) keepalives: Counter,
    /// Times the upstream rate limit made a message wait.
    pub(crate) throttled: Counter,
    /// Status reports kept while disconnected (replacements included).
    pub(crate) outbox_kept: Counter,
    /// Status reports replaced by a newer one while disconnected.
    pub(crate) outbox_coalesced: Counter,
    /// Status reports refused: the disconnected buffer was full.
    pub(crate) outbox_overflow: Counter,
    /// Messages sent again because the cloud was too busy to take them.
    pub(crate) busy_retried: Counter,
    /// Status reports waiting for the link.
    pub(crate) outbox_depth: Gauge,
    /// Upstream messages read behind one the rate limit holds.
    pub(crate) upstream_line: Gauge,
    /// Requests answered "not connected".
    pub(crate) refused_disconnected: Counter,
    /// Other messages not sent because the link was down (the cloud re-sends
    /// what they answered: ACKs are for messages it will send again).
    pub(crate) dropped_disconnected: Counter,
    /// The stream sessions the cloud opened to this edge (logs, exec,
    /// port-forward, metrics), over every connection.
    pub(crate) streams: std::sync::Arc<edgehive_viaduct::StreamStats>,
    /// Bytes on the wire to and from the cloud: WebSocket's TLS bytes,
    /// QUIC's UDP payloads.
    pub(crate) wire: std::sync::Arc<edgehive_viaduct::WireBytes>,
}

impl EdgeHubMetrics {
    /// Registers the metrics in `registry` under the prefix `edgehub`
    /// (`edgehive_edgehub_` in a process's registry).
    ///
    /// ```
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    /// let metrics = edgehive_edgehub::EdgeHubMetrics::default();
    /// let mut registry = Registry::with_prefix("edgehive");
    /// metrics.register(&mut registry);
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains("\nedgehive_edgehub_connected 0\n"));
    /// assert!(text.contains("\nedgehive_edgehub_dial_failures_total 0\n"));
    /// assert!(text.contains("\nedgehive_edgehub_streams_open 0\n"));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("edgehub");
        r.register("connected", "1 while the edge is connected to the cloud", self.connected.clone());
        r.register("outbox_depth", "Status reports waiting for the link", self.outbox_depth.clone());
        r.register(
            "upstream_line",
            "Upstream messages waiting behind one the rate limit holds",
            self.upstream_line.clone(),
        );
        r.register("connects", "Connections made to the cloud", self.connects.clone());
        r.register("dial_failures", "Failed connection attempts", self.dial_failures.clone());
        r.register("disconnects", "Connections lost", self.disconnects.clone());
        r.register("cert_reconnects", "Reconnects with a renewed certificate", self.cert_reconnects.clone());
        r.register("downstream", "Messages received from the cloud", self.downstream.clone());
        r.register(
            "downstream_undeliverable",
            "Messages from the cloud no module took",
            self.downstream_undeliverable.clone(),
        );
        r.register("upstream", "Messages sent to the cloud", self.upstream.clone());
        r.register("keepalives", "Keepalives sent", self.keepalives.clone());
        r.register("throttled", "Upstream messages delayed by the rate limit", self.throttled.clone());
        r.register("outbox_kept", "Status reports kept while disconnected", self.outbox_kept.clone());
        r.register(
            "busy_retried",
            "Messages sent again because the cloud answered it was too busy to take them (status reports still their object's newest, and messages no module waits on, such as pod deletion confirmations)",
            self.busy_retried.clone(),
        );
        r.register(
            "outbox_coalesced",
            "Status reports replaced by a newer one while disconnected",
            self.outbox_coalesced.clone(),
        );
        r.register(
            "outbox_overflow",
            "Status reports refused: the disconnected buffer was full",
            self.outbox_overflow.clone(),
        );
        r.register("refused_disconnected", "Requests answered 'not connected'", self.refused_disconnected.clone());
        r.register(
            "dropped_disconnected",
            "Other upstream messages not sent while disconnected",
            self.dropped_disconnected.clone(),
        );
        r.register(
            "wire_sent_bytes",
            "Bytes written to the cloud (WebSocket: TLS included; QUIC: UDP payloads)",
            self.wire.sent.clone(),
        );
        r.register(
            "wire_received_bytes",
            "Bytes read from the cloud (WebSocket: TLS included; QUIC: UDP payloads)",
            self.wire.received.clone(),
        );
        self.streams.register(r, "streams");
    }

    /// Failed connection attempts so far.
    pub fn dial_failures(&self) -> u64 {
        self.dial_failures.get()
    }

    /// Bytes (sent, received) on the wire so far, over every connection
    /// these metrics counted.
    pub fn wire_bytes(&self) -> (u64, u64) {
        self.wire.get()
    }

    /// The counter of bytes on the wire, for a QUIC socket that links share
    /// ([`edgehive_viaduct::quic::QuicEndpoint::bind`]): their datagrams
    /// are counted there, not per connection.
    pub fn wire_counter(&self) -> &std::sync::Arc<edgehive_viaduct::WireBytes> {
        &self.wire
    }
}
