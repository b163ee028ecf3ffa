//! The embedded MQTT broker (`mqttMode` 0 and 1), in the place of
//! KubeEdge's gomqtt in-memory broker (`edge/pkg/eventbus/mqtt/server.go`):
//! MQTT 3.1.1 over TCP, in memory, clean sessions only, QoS 0 and 1 out
//! (QoS 2 publishes are taken with PUBREC/PUBREL/PUBCOMP and passed on at
//! QoS 1), retained messages, wills, and the EventBus itself watching every
//! publish whose topic matches one of its subscriptions, as KubeEdge's
//! broker does through its topic tree.
//!
//! Why not rumqttd: it routes no topic that starts with `$` to any
//! subscriber (not even an exact filter: `rumqttd::protocol::matches`
//! returns false for them; bytebeamio/rumqtt#479), and every KubeEdge device
//! topic is `$hw/...`. The packets are read and written with rumqttc's
//! MQTT 3.1.1 codec, which the client side links anyway.
//!
//! Everything is bounded: connections ([`MAX_CONNECTIONS`]), each session's
//! queue of messages to send (`mqttSessionQueueSize`; a full queue drops the
//! message for that client, counted), subscriptions per session and each
//! filter's length, retained topics and their bytes, packet size (4 MiB;
//! KubeEdge's gomqtt engine sets no read limit at all), the time to send
//! CONNECT and to write.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rumqttc::mqttbytes::v4::{
    ConnAck, ConnectReturnCode, LastWill, Packet, PubAck, PubComp, PubRec, Publish, SubAck, SubscribeReasonCode,
    UnsubAck,
};
use rumqttc::mqttbytes::{Protocol, QoS};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::topics::{MAX_PACKET_BYTES, filter_matches, valid_filter, valid_topic};

/// Connections the broker holds at once; more are closed at accept.
pub const MAX_CONNECTIONS: usize = 1024;
/// Subscriptions one client may hold.
const MAX_FILTERS_PER_SESSION: usize = 1000;
/// Topics with a retained message; a new one beyond is not retained.
const MAX_RETAINED: usize = 1000;
/// Bytes of retained messages (topics and payloads) kept at once: without
/// it, 1000 topics of 4 MiB packets would be 4 GB of an edge node's memory.
/// A retained message that does not fit is delivered but not retained.
const MAX_RETAINED_BYTES: usize = 16 << 20;
/// The longest subscription filter, in bytes; a longer one gets the SUBACK
/// failure code (0x80). Filters are matched against every publish, so their
/// length is work per message; no device topic comes near this.
const MAX_FILTER_BYTES: usize = 1024;
/// QoS 2 publishes awaiting PUBREL per client.
const MAX_QOS2_PENDING: usize = 100;
/// Time a client has to send CONNECT after its TCP connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Time one write to a client may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the EventBus watches: the topics it wants, and where matching
/// publishes go (a bounded queue; full drops them, counted by the caller).
pub(crate) trait Watcher: Send + Sync + 'static {
    /// True when a publish on `topic` is for the EventBus.
    fn wants(&self, topic: &str) -> bool;
    /// Takes a matching publish; `false` when it could not be queued.
    fn take(&self, topic: &str, payload: &Bytes) -> bool;
    /// A publish could not be queued for a client.
    fn client_queue_full(&self);
    /// A retained message was not retained: over [`MAX_RETAINED`] topics or
    /// [`MAX_RETAINED_BYTES`].
    fn retained_over_budget(&self);
}

/// A running broker: its accept task and shared state. Dropping it does
/// not stop it; cancel the token given to [`Broker::start`].
pub(crate) struct Broker {
    shared: Arc<Shared>,
    pub(crate) addr: SocketAddr,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("addr", &self.addr).finish_non_exhaustive()
    }
}

struct Shared {
    state: Mutex<State>,
    queue: usize,
    next_id: AtomicU64,
    watcher: Arc<dyn Watcher>,
    node: String,
}

#[derive(Default)]
struct State {
    sessions: HashMap<u64, Session>,
    by_client_id: HashMap<String, u64>,
    retained: BTreeMap<String, Publish>,
    /// The bytes of `retained`'s topics and payloads.
    retained_bytes: usize,
}

/// What a retained message counts against [`MAX_RETAINED_BYTES`].
fn retained_size(p: &Publish) -> usize {
    p.topic.len() + p.payload.len()
}

impl State {
    /// Keeps `publish` as its topic's retained message (an empty payload
    /// clears it, §3.3.1.3); `false` when it is over the budget. The topic's
    /// earlier message is dropped either way: it is no longer the latest.
    fn retain(&mut self, publish: &Publish) -> bool {
        if let Some(old) = self.retained.remove(&publish.topic) {
            self.retained_bytes = self.retained_bytes.saturating_sub(retained_size(&old));
        }
        if publish.payload.is_empty() {
            return true;
        }
        let size = retained_size(publish);
        if self.retained.len() >= MAX_RETAINED || self.retained_bytes + size > MAX_RETAINED_BYTES {
            return false;
        }
        self.retained_bytes += size;
        self.retained.insert(publish.topic.clone(), publish.clone());
        true
    }
}

struct Session {
    filters: Vec<(String, QoS)>,
    tx: mpsc::Sender<Publish>,
    kicked: Arc<Notify>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Passes a publish to every client with a matching subscription (at
    /// the lower of the two QoS, never above 1), and to the EventBus when
    /// `watch` and it wants the topic. Retains it if asked.
    fn route(&self, mut publish: Publish, watch: bool) {
        if watch && self.watcher.wants(&publish.topic) {
            self.watcher.take(&publish.topic, &publish.payload);
        }
        let mut state = self.state();
        if publish.retain && !state.retain(&publish) {
            self.watcher.retained_over_budget();
            tracing::warn!(node = %self.node, module = "eventbus", topic = ?short(&publish.topic), bytes = publish.payload.len(), "internal MQTT broker: retained messages over their budget; delivered, not retained");
        }
        // A forwarded publish is not a retained one (MQTT 3.1.1 §3.3.1.3).
        publish.retain = false;
        publish.dup = false;
        for session in state.sessions.values() {
            let granted = session
                .filters
                .iter()
                .filter(|(f, _)| filter_matches(f, &publish.topic))
                .map(|(_, q)| *q)
                .max_by_key(|q| *q as u8);
            if let Some(q) = granted {
                let mut copy = publish.clone();
                copy.qos = lower(publish.qos, q);
                if session.tx.try_send(copy).is_err() {
                    self.watcher.client_queue_full();
                }
            }
        }
    }
}

fn lower(a: QoS, b: QoS) -> QoS {
    let n = (a as u8).min(b as u8).min(1);
    if n == 0 { QoS::AtMostOnce } else { QoS::AtLeastOnce }
}

/// A topic cut short for a log line (topics come from clients).
pub(crate) fn short(topic: &str) -> &str {
    let mut end = topic.len().min(200);
    while !topic.is_char_boundary(end) {
        end -= 1;
    }
    &topic[..end]
}

impl Broker {
    /// Listens on `addr` and serves until `cancel` fires.
    pub(crate) async fn start(
        addr: SocketAddr,
        queue: usize,
        node: &str,
        watcher: Arc<dyn Watcher>,
        cancel: CancellationToken,
    ) -> std::io::Result<(Broker, JoinHandle<()>)> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            queue: queue.max(1),
            next_id: AtomicU64::new(1),
            watcher,
            node: node.to_owned(),
        });
        let task = tokio::spawn(accept(listener, shared.clone(), cancel));
        Ok((Broker { shared, addr }, task))
    }

    /// Publishes as the EventBus (KubeEdge's `Server.Publish`): to the
    /// clients only, not back to the EventBus.
    pub(crate) fn publish(&self, topic: &str, payload: Vec<u8>, qos: u8, retain: bool) {
        let mut p = Publish::new(topic, if qos == 0 { QoS::AtMostOnce } else { QoS::AtLeastOnce }, payload);
        p.retain = retain;
        self.shared.route(p, false);
    }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>, cancel: CancellationToken) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => break,
            a = listener.accept() => a,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        match accepted {
            Ok((stream, peer)) => {
                if connections.len() >= MAX_CONNECTIONS {
                    tracing::warn!(node = %shared.node, module = "eventbus", %peer, "internal MQTT broker: connection limit reached; closed");
                    continue;
                }
                let _ = stream.set_nodelay(true);
                connections.spawn(serve(stream, peer, shared.clone(), cancel.clone()));
            }
            Err(e) => {
                // Out of descriptors, usually: wait a little rather than spin.
                tracing::warn!(node = %shared.node, module = "eventbus", error = %e, "internal MQTT broker: accept failed");
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
    connections.shutdown().await;
}

/// One client's connection, read and written by one task.
struct Conn {
    stream: TcpStream,
    read: BytesMut,
    write: BytesMut,
}

/// Why a connection ended.
enum End {
    /// DISCONNECT: the will is dropped.
    Clean,
    /// Anything else: the will is published.
    Abrupt(String),
}

impl Conn {
    /// The next packet; `Err` on EOF, a read error or a bad packet.
    async fn next(&mut self) -> Result<Packet, String> {
        loop {
            match Packet::read(&mut self.read, MAX_PACKET_BYTES) {
                Ok(p) => return Ok(p),
                Err(rumqttc::mqttbytes::Error::InsufficientBytes(_)) => {}
                Err(e) => return Err(format!("bad packet: {e}")),
            }
            let n = self.stream.read_buf(&mut self.read).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("connection closed".to_owned());
            }
        }
    }

    async fn send(&mut self, packet: Packet) -> Result<(), String> {
        self.write.clear();
        packet.write(&mut self.write, MAX_PACKET_BYTES).map_err(|e| format!("encode: {e}"))?;
        match tokio::time::timeout(WRITE_TIMEOUT, self.stream.write_all(&self.write)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("write: {e}")),
            Err(_) => Err("write timed out".to_owned()),
        }
    }
}

async fn serve(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>, cancel: CancellationToken) {
    let mut conn = Conn { stream, read: BytesMut::with_capacity(4096), write: BytesMut::with_capacity(4096) };
    let connect = match tokio::time::timeout(CONNECT_TIMEOUT, conn.next()).await {
        Ok(Ok(Packet::Connect(c))) => c,
        Ok(Ok(_)) => return debug_end(&shared, peer, "the first packet was not CONNECT"),
        Ok(Err(e)) => return debug_end(&shared, peer, &e),
        Err(_) => return debug_end(&shared, peer, "no CONNECT in time"),
    };
    if connect.protocol != Protocol::V4 {
        let _ = conn.send(Packet::ConnAck(ConnAck::new(ConnectReturnCode::RefusedProtocolVersion, false))).await;
        return debug_end(&shared, peer, "not MQTT 3.1.1");
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let client_id = if connect.client_id.is_empty() {
        if !connect.clean_session {
            let _ = conn.send(Packet::ConnAck(ConnAck::new(ConnectReturnCode::BadClientId, false))).await;
            return debug_end(&shared, peer, "an empty client id needs a clean session");
        }
        format!("edgehive-auto-{id}")
    } else {
        connect.client_id.clone()
    };
    let (tx, mut rx) = mpsc::channel(shared.queue);
    let kicked = Arc::new(Notify::new());
    {
        let mut state = shared.state();
        // A second connection with the same client id takes over (§3.1.4).
        if let Some(old) = state.by_client_id.insert(client_id.clone(), id)
            && let Some(s) = state.sessions.get(&old)
        {
            s.kicked.notify_one();
        }
        state.sessions.insert(id, Session { filters: Vec::new(), tx, kicked: kicked.clone() });
    }
    let mut will = connect.last_will.clone();
    let keep_alive = Duration::from_secs(u64::from(connect.keep_alive));
    let end = session(&mut conn, &shared, id, keep_alive, &mut rx, &kicked, &cancel).await;
    {
        let mut state = shared.state();
        state.sessions.remove(&id);
        if state.by_client_id.get(&client_id) == Some(&id) {
            state.by_client_id.remove(&client_id);
        }
    }
    match end {
        End::Clean => {
            tracing::debug!(node = %shared.node, module = "eventbus", %peer, client_id = ?short(&client_id), "internal MQTT broker: client disconnected")
        }
        End::Abrupt(why) => {
            tracing::debug!(node = %shared.node, module = "eventbus", %peer, client_id = ?short(&client_id), reason = %why, "internal MQTT broker: connection ended");
            if let Some(w) = will.take() {
                publish_will(&shared, w);
            }
        }
    }
}

fn publish_will(shared: &Shared, w: LastWill) {
    if valid_topic(&w.topic).is_err() {
        return;
    }
    let mut p = Publish::new(w.topic, w.qos, Vec::new());
    p.payload = w.message;
    p.retain = w.retain;
    shared.route(p, true);
}

fn debug_end(shared: &Shared, peer: SocketAddr, why: &str) {
    tracing::debug!(node = %shared.node, module = "eventbus", %peer, reason = why, "internal MQTT broker: connection refused");
}

async fn session(
    conn: &mut Conn,
    shared: &Shared,
    id: u64,
    keep_alive: Duration,
    rx: &mut mpsc::Receiver<Publish>,
    kicked: &Notify,
    cancel: &CancellationToken,
) -> End {
    if let Err(e) = conn.send(Packet::ConnAck(ConnAck::new(ConnectReturnCode::Success, false))).await {
        return End::Abrupt(e);
    }
    // MQTT 3.1.1 §3.1.2.10: one and a half keepalives without a packet
    // from the client end it.
    let idle = if keep_alive.is_zero() { None } else { Some(keep_alive.mul_f32(1.5)) };
    let mut expires = idle.map(|d| tokio::time::Instant::now() + d);
    let mut next_pkid: u16 = 0;
    let mut qos2: Vec<u16> = Vec::new();
    loop {
        let idle_timer = async {
            match expires {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let packet = tokio::select! {
            _ = cancel.cancelled() => return End::Abrupt("the broker is stopping".to_owned()),
            _ = kicked.notified() => return End::Abrupt("another connection took the client id".to_owned()),
            _ = idle_timer => return End::Abrupt("keepalive expired".to_owned()),
            out = rx.recv() => {
                let Some(mut p) = out else { return End::Abrupt("session closed".to_owned()) };
                if p.qos != QoS::AtMostOnce {
                    next_pkid = next_pkid.checked_add(1).unwrap_or(1);
                    p.pkid = next_pkid;
                }
                if let Err(e) = conn.send(Packet::Publish(p)).await {
                    return End::Abrupt(e);
                }
                continue;
            }
            p = conn.next() => match p {
                Ok(p) => p,
                Err(e) => return End::Abrupt(e),
            },
        };
        expires = idle.map(|d| tokio::time::Instant::now() + d);
        let reply = match packet {
            Packet::Publish(p) => {
                if valid_topic(&p.topic).is_err() {
                    return End::Abrupt("publish on an invalid topic".to_owned());
                }
                let reply = match p.qos {
                    QoS::AtMostOnce => None,
                    QoS::AtLeastOnce => Some(Packet::PubAck(PubAck::new(p.pkid))),
                    QoS::ExactlyOnce => {
                        if qos2.contains(&p.pkid) {
                            // A resent QoS 2 publish: answered, not passed on again.
                            if let Err(e) = conn.send(Packet::PubRec(PubRec::new(p.pkid))).await {
                                return End::Abrupt(e);
                            }
                            continue;
                        }
                        if qos2.len() >= MAX_QOS2_PENDING {
                            return End::Abrupt("too many QoS 2 publishes awaiting PUBREL".to_owned());
                        }
                        qos2.push(p.pkid);
                        Some(Packet::PubRec(PubRec::new(p.pkid)))
                    }
                };
                shared.route(p, true);
                reply
            }
            Packet::PubRel(r) => {
                qos2.retain(|k| *k != r.pkid);
                Some(Packet::PubComp(PubComp::new(r.pkid)))
            }
            Packet::Subscribe(s) => {
                let mut codes = Vec::with_capacity(s.filters.len());
                let mut retained = Vec::new();
                {
                    let mut state = shared.state();
                    let State { sessions, retained: kept, .. } = &mut *state;
                    let Some(session) = sessions.get_mut(&id) else {
                        return End::Abrupt("session gone".to_owned());
                    };
                    for f in s.filters {
                        let known = session.filters.iter().position(|(p, _)| *p == f.path);
                        if f.path.len() > MAX_FILTER_BYTES
                            || valid_filter(&f.path).is_err()
                            || (known.is_none() && session.filters.len() >= MAX_FILTERS_PER_SESSION)
                        {
                            codes.push(SubscribeReasonCode::Failure);
                            continue;
                        }
                        let granted = lower(f.qos, QoS::AtLeastOnce);
                        codes.push(SubscribeReasonCode::Success(granted));
                        retained.extend(kept.values().filter(|r| filter_matches(&f.path, &r.topic)).map(|r| {
                            let mut r = r.clone();
                            r.qos = lower(r.qos, granted);
                            r
                        }));
                        match known {
                            Some(i) => session.filters[i].1 = granted,
                            None => session.filters.push((f.path, granted)),
                        }
                    }
                }
                if let Err(e) = conn.send(Packet::SubAck(SubAck::new(s.pkid, codes))).await {
                    return End::Abrupt(e);
                }
                // Retained messages go with the retain flag set (§3.3.1.3).
                for mut r in retained {
                    if r.qos != QoS::AtMostOnce {
                        next_pkid = next_pkid.checked_add(1).unwrap_or(1);
                        r.pkid = next_pkid;
                    }
                    if let Err(e) = conn.send(Packet::Publish(r)).await {
                        return End::Abrupt(e);
                    }
                }
                None
            }
            Packet::Unsubscribe(u) => {
                if let Some(session) = shared.state().sessions.get_mut(&id) {
                    session.filters.retain(|(f, _)| !u.topics.contains(f));
                }
                Some(Packet::UnsubAck(UnsubAck::new(u.pkid)))
            }
            Packet::PingReq => Some(Packet::PingResp),
            Packet::Disconnect => return End::Clean,
            // Acknowledgements of what we sent: QoS 1 needs no more.
            Packet::PubAck(_) | Packet::PubComp(_) | Packet::PubRec(_) => None,
            Packet::Connect(_) => return End::Abrupt("a second CONNECT".to_owned()),
            other => return End::Abrupt(format!("unexpected packet {other:?}")),
        };
        if let Some(r) = reply
            && let Err(e) = conn.send(r).await
        {
            return End::Abrupt(e);
        }
    }
}
