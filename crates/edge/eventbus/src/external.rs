//! The external broker: two MQTT clients, as KubeEdge has (`mqtt/client.go`),
//! one that subscribes (`mqttSubClientID`) and one that publishes
//! (`mqttPubClientID`), each with a task that drives its rumqttc event loop
//! and reconnects with backoff.
//!
//! Nothing here blocks the module: it queues requests with `try_*` into each
//! client's bounded request queue (`mqttSessionQueueSize`), and a full queue
//! drops the request with a counted log line. While the broker is away,
//! publishes wait in that queue; those in flight or queued when the
//! connection was lost are carried over and sent again after the reconnect
//! (at least once, as QoS 1 promises), up to the queue size.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use rumqttc::{
    AsyncClient, Event, EventLoop, MqttOptions, Packet, QoS, Request, SubscribeFilter, TlsConfiguration, Transport,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::bus::{Deliver, Subscriptions};
use crate::config::{BrokerAddr, BrokerTls, ConfigError, EventBusConfig};
use crate::metrics::EventBusMetrics;
use crate::topics::MAX_PACKET_BYTES;

/// Keepalive with the broker (paho's default is 30 s, as KubeEdge leaves it).
const KEEP_ALIVE: Duration = Duration::from_secs(30);

/// Filters per SUBSCRIBE packet when (re)subscribing everything.
const FILTERS_PER_SUBSCRIBE: usize = 32;

/// The two clients; cheap handles onto their request queues.
#[derive(Debug)]
pub(crate) struct External {
    sub: AsyncClient,
    publ: AsyncClient,
    subscriptions: Arc<Subscriptions>,
    metrics: Arc<EventBusMetrics>,
}

/// What the module needs to start the clients.
pub(crate) struct Start<'a> {
    pub(crate) cfg: &'a EventBusConfig,
    pub(crate) sub_client_id: &'a str,
    pub(crate) pub_client_id: &'a str,
    pub(crate) subscriptions: Arc<Subscriptions>,
    pub(crate) deliver: Deliver,
    pub(crate) metrics: Arc<EventBusMetrics>,
    pub(crate) cancel: CancellationToken,
}

impl External {
    /// Starts both clients' tasks; they connect in the background.
    pub(crate) fn start(s: Start<'_>) -> Result<(External, Vec<JoinHandle<()>>), ConfigError> {
        let addr = BrokerAddr::parse("mqttServerExternal", &s.cfg.mqtt_server_external)?;
        let tls = match (&s.cfg.tls, addr.tls) {
            (Some(files), true) => Some(client_tls(files)?),
            (None, true) => {
                return Err(ConfigError::Tls(format!(
                    "mqttServerExternal {:?} is a TLS broker and eventBusTLS is not enabled",
                    s.cfg.mqtt_server_external
                )));
            }
            (Some(_), false) => {
                // As paho: TLS settings apply to a TLS URL only.
                tracing::warn!(url = %s.cfg.mqtt_server_external,
                    "eventBusTLS is enabled but the broker URL is not ssl://; connecting without TLS");
                None
            }
            (None, false) => None,
        };
        let options = |id: &str| {
            let mut o = MqttOptions::new(id, addr.host.clone(), addr.port);
            o.set_keep_alive(KEEP_ALIVE)
                .set_clean_session(true)
                .set_max_packet_size(MAX_PACKET_BYTES, MAX_PACKET_BYTES);
            if !s.cfg.mqtt_username.is_empty() {
                o.set_credentials(s.cfg.mqtt_username.clone(), s.cfg.mqtt_password.clone());
            }
            if let Some(tls) = &tls {
                o.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(Arc::clone(tls))));
            }
            o
        };
        let queue = s.cfg.queue_size();
        let (sub, sub_loop) = AsyncClient::new(options(s.sub_client_id), queue);
        let (publ, pub_loop) = AsyncClient::new(options(s.pub_client_id), queue);
        let node = s.deliver.node().to_owned();
        let tasks = vec![
            tokio::spawn(run_subscriber(
                sub_loop,
                sub.clone(),
                s.subscriptions.clone(),
                s.deliver,
                s.metrics.clone(),
                s.cancel.clone(),
            )),
            tokio::spawn(run_publisher(pub_loop, queue, node, s.metrics.clone(), s.cancel)),
        ];
        Ok((External { sub, publ, subscriptions: s.subscriptions, metrics: s.metrics }, tasks))
    }

    /// Queues a publish (QoS 1, not retained: KubeEdge's `pubMQTT`).
    /// `false` when the queue is full (the caller counts and logs it).
    pub(crate) fn publish(&self, topic: &str, payload: Vec<u8>) -> bool {
        match self.publ.try_publish(topic, QoS::AtLeastOnce, false, payload) {
            Ok(()) => {
                self.metrics.published_external.inc();
                true
            }
            Err(_) => false,
        }
    }

    /// Subscribes now if the queue has room; otherwise the subscriber
    /// subscribes everything again after its next event.
    pub(crate) fn subscribe(&self, filter: &str) {
        if self.sub.try_subscribe(filter, QoS::AtLeastOnce).is_err() {
            self.subscriptions.request_resync();
        }
    }

    /// Unsubscribes if the queue has room (otherwise the filter is gone
    /// from the broker at the next reconnect, which subscribes only what is
    /// wanted then). `false` when the queue was full.
    pub(crate) fn unsubscribe(&self, filter: &str) -> bool {
        self.sub.try_unsubscribe(filter).is_ok()
    }
}

/// The TLS client settings of `eventBusTLS`: the broker's certificate must
/// chain to the CA file and name the URL's host; the client shows its
/// certificate. Read once, at start: a file that does not load is a
/// configuration error, not a retry.
pub(crate) fn client_tls(files: &BrokerTls) -> Result<Arc<rustls::ClientConfig>, ConfigError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let what = |key: &str, path: &std::path::Path, e: &dyn std::fmt::Display| {
        ConfigError::Tls(format!("{key} {}: {e}", path.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    let cas = CertificateDer::pem_file_iter(&files.ca_file).map_err(|e| what("tlsMqttCAFile", &files.ca_file, &e))?;
    for ca in cas {
        let ca = ca.map_err(|e| what("tlsMqttCAFile", &files.ca_file, &e))?;
        roots.add(ca).map_err(|e| what("tlsMqttCAFile", &files.ca_file, &e))?;
    }
    if roots.is_empty() {
        return Err(what("tlsMqttCAFile", &files.ca_file, &"no certificate in the file"));
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert_file)
        .map_err(|e| what("tlsMqttCertFile", &files.cert_file, &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| what("tlsMqttCertFile", &files.cert_file, &e))?;
    if chain.is_empty() {
        return Err(what("tlsMqttCertFile", &files.cert_file, &"no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .map_err(|e| what("tlsMqttPrivateKeyFile", &files.key_file, &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| what("tlsMqttCertFile", &files.cert_file, &e))?;
    Ok(Arc::new(cfg))
}

/// Drives the subscribing client: on every connect it subscribes
/// KubeEdge's topics and the stored ones (QoS 1, as KubeEdge's `onSubConnect`),
/// and it hands each message to the bus.
async fn run_subscriber(
    mut events: EventLoop,
    client: AsyncClient,
    subscriptions: Arc<Subscriptions>,
    deliver: Deliver,
    metrics: Arc<EventBusMetrics>,
    cancel: CancellationToken,
) {
    let node = deliver.node().to_owned();
    let mut link = Link::new(&node, "sub", &metrics.sub_connected, &metrics.sub_connects, &metrics.sub_disconnects);
    // SUBSCRIBE requests that did not fit in the request queue yet.
    let mut to_send: VecDeque<Vec<SubscribeFilter>> = VecDeque::new();
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => break,
            e = events.poll() => e,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                link.connack();
                subscriptions.take_resync();
                to_send = batches(subscriptions.all());
                tracing::info!(node = %node, module = "eventbus", client = "sub", filters = subscriptions.len(), "connected to the external MQTT broker");
            }
            Ok(Event::Incoming(Packet::Publish(p))) => deliver.deliver("external", &p.topic, &p.payload).await,
            Ok(Event::Incoming(Packet::SubAck(ack))) => {
                let refused =
                    ack.return_codes.iter().filter(|c| matches!(c, rumqttc::SubscribeReasonCode::Failure)).count();
                if refused > 0 {
                    tracing::warn!(node = %node, module = "eventbus", refused, "the external MQTT broker refused subscriptions (see its ACLs)");
                }
            }
            Ok(_) => {}
            Err(e) => {
                to_send.clear();
                if !link.lost(&e, &cancel).await {
                    break;
                }
                continue;
            }
        }
        if link.connected && subscriptions.take_resync() {
            to_send = batches(subscriptions.all());
        }
        while let Some(batch) = to_send.pop_front() {
            // Full queue: the rest goes after the next event. (The filters
            // were checked when they were accepted, so a refusal is a full queue.)
            if client.try_subscribe_many(batch.clone()).is_err() {
                to_send.push_front(batch);
                break;
            }
        }
    }
    link.up.set(0);
}

fn batches(filters: Vec<String>) -> VecDeque<Vec<SubscribeFilter>> {
    filters
        .chunks(FILTERS_PER_SUBSCRIBE)
        .map(|c| c.iter().map(|f| SubscribeFilter::new(f.clone(), QoS::AtLeastOnce)).collect())
        .collect()
}

/// Drives the publishing client. When the connection is lost, the
/// publishes rumqttc had in flight or queued are taken out of its event
/// loop (a clean session would drop them) and put back after the next
/// CONNACK, with fresh packet ids; beyond `queue` of them the oldest are
/// dropped and counted.
async fn run_publisher(
    mut events: EventLoop,
    queue: usize,
    node: String,
    metrics: Arc<EventBusMetrics>,
    cancel: CancellationToken,
) {
    let mut link = Link::new(&node, "pub", &metrics.pub_connected, &metrics.pub_connects, &metrics.pub_disconnects);
    let mut carried: VecDeque<Request> = VecDeque::new();
    loop {
        let event = tokio::select! {
            _ = cancel.cancelled() => break,
            e = events.poll() => e,
        };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                link.connack();
                let resent = carried.len();
                events.pending.extend(carried.drain(..));
                tracing::info!(node = %node, module = "eventbus", client = "pub", resent, "connected to the external MQTT broker");
            }
            Ok(_) => {}
            Err(e) => {
                let over = carry_over(&mut events.pending, &mut carried, queue);
                if over > 0 {
                    metrics.dropped_queue_full.inc_by(over as u64);
                    tracing::warn!(node = %node, module = "eventbus", dropped = over, "publishes dropped: more were waiting for the external MQTT broker than mqttSessionQueueSize");
                }
                if !link.lost(&e, &cancel).await {
                    break;
                }
            }
        }
    }
    link.up.set(0);
}

/// One client's link to the broker: its state, metrics, logs, and the
/// backoff between attempts.
struct Link<'a> {
    node: &'a str,
    client: &'static str,
    connected: bool,
    backoff: Backoff,
    up: &'a Gauge,
    connects: &'a Counter,
    disconnects: &'a Counter,
}

impl<'a> Link<'a> {
    fn new(
        node: &'a str,
        client: &'static str,
        up: &'a Gauge,
        connects: &'a Counter,
        disconnects: &'a Counter,
    ) -> Self {
        Link { node, client, connected: false, backoff: Backoff::new(), up, connects, disconnects }
    }

    fn connack(&mut self) {
        self.connected = true;
        self.backoff.reset();
        self.up.set(1);
        self.connects.inc();
    }

    /// The connection failed or was lost: logs it and waits the backoff.
    /// False when cancelled meanwhile.
    async fn lost(&mut self, e: &rumqttc::ConnectionError, cancel: &CancellationToken) -> bool {
        let (node, client) = (self.node, self.client);
        if self.connected {
            tracing::warn!(node = %node, module = "eventbus", client, error = %e, "lost the external MQTT broker; reconnecting");
        } else {
            tracing::debug!(node = %node, module = "eventbus", client, error = %e, "cannot reach the external MQTT broker");
        }
        self.connected = false;
        self.up.set(0);
        self.disconnects.inc();
        let delay = self.backoff.next_delay(fastrand::f64());
        tokio::select! {
            _ = cancel.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }
}

/// Moves the publishes a lost connection left in `pending` to `carried`
/// (fresh packet ids, not marked as resent: the next session is a new one),
/// keeping the newest `queue`; returns how many older ones were dropped.
fn carry_over(pending: &mut VecDeque<Request>, carried: &mut VecDeque<Request>, queue: usize) -> usize {
    for r in pending.drain(..) {
        if let Request::Publish(mut p) = r {
            p.pkid = 0;
            p.dup = false;
            carried.push_back(Request::Publish(p));
        }
    }
    let over = carried.len().saturating_sub(queue);
    carried.drain(..over);
    over
}

#[cfg(test)]
mod tests {
    use super::*;
    use rumqttc::{PingReq, Publish};

    fn publish(n: u8, pkid: u16) -> Request {
        let mut p = Publish::new("t", QoS::AtLeastOnce, vec![n]);
        p.pkid = pkid;
        p.dup = true;
        Request::Publish(p)
    }

    #[test]
    fn publishes_are_carried_over_a_lost_connection_up_to_the_queue() {
        let mut carried = VecDeque::from([publish(1, 0)]);
        let mut pending = VecDeque::from([publish(2, 7), Request::PingReq(PingReq), publish(3, 8)]);
        assert_eq!(carry_over(&mut pending, &mut carried, 2), 1);
        assert!(pending.is_empty());
        let kept: Vec<(u8, u16, bool)> = carried
            .iter()
            .map(|r| match r {
                Request::Publish(p) => (p.payload[0], p.pkid, p.dup),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(kept, [(2, 0, false), (3, 0, false)]);
    }
}
