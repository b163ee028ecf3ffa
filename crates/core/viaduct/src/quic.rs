//! edgehive's mapping of viaduct onto IETF QUIC (RFC 9000, TLS 1.3).
//!
//! KubeEdge's QUIC is pre-standard gQUIC (quic-go v0.10.1) and cannot
//! interoperate with any IETF QUIC stack, so this is our own mapping, used
//! between edgehive peers:
//!
//! - **ALPN** `edgehive-viaduct/1`; the same mutual TLS rules as WebSocket
//!   (client certificate chained to the cloud's CA, server certificate checked
//!   against the edge's CA and the server name).
//! - **Handshake headers**: the client opens the first bidirectional stream
//!   and sends one frame holding a message with operation `header` and content
//!   `{"node_id": …, "project_id": …}`, plus `"features": [...]` when it
//!   offers any ([`crate::features`]) and `"keepalive": "ping"` when it
//!   offers session liveness. The server answers `response` with content
//!   `ack` — or, when it agreed to features or liveness,
//!   `{"features": [...], "keepalive": "ping"}` (the second only when
//!   agreed) — or closes the connection with application error code 1 and
//!   the reason as text.
//! - **Framing**: that same stream then carries every message, both ways, in
//!   order: a 4-byte big-endian length, then the message JSON plus `\n`. One
//!   ordered stream keeps KubeEdge's ordering (an insert is never overtaken by
//!   its delete). It is sent ahead of other streams' data (a higher QUIC
//!   send priority).
//! - **Stream sessions**, when both ends agreed the `streams` feature: one
//!   bidirectional QUIC stream per session, opened by the cloud only
//!   (`crate::stream`'s `quic.rs` has the framing, reset and refusal
//!   rules). An end configured for sessions gives every stream a receive
//!   window of [`stream::WINDOW`] (the message stream too: the transport
//!   has no per-stream setting); once sessions are agreed the edge lets the
//!   cloud open [`MAX_SESSIONS`](crate::stream::MAX_SESSIONS) + 4 streams
//!   and both ends widen the connection's receive window to cover them
//!   all. Any other stream a peer opens is refused (reset with a reason);
//!   the connection goes on.
//! - **Bad input**: a frame over the size limit, a length that runs past the
//!   end of the stream, or a frame that is not a message closes the
//!   connection with the reason logged, as on WebSocket.
//! - **Handshake bounds**: the QUIC handshake and the header frame must
//!   arrive within the server's handshake deadline, and handshakes in
//!   progress are bounded as on WebSocket, the oldest evicted to make room.
//!   A connection attempt that would evict another from an address QUIC has
//!   not validated is answered with a Retry first, so a forged source
//!   address cannot evict anyone's handshake. Past the handshake budget of
//!   a server that is behind, a validated attempt waits up to 2 s
//!   for a slot (bounded, per source too); past that it is left unanswered
//!   and the client retransmits its Initial, its session ticket with it.
//! - **Liveness**: QUIC keep-alives (default every 25 s) and an idle timeout
//!   (default 90 s, or the connection's read timeout), instead of
//!   application pings. When both ends agreed `keepalive: ping`, this
//!   liveness is the session's too ([`PeerInfo::ping_keepalive`]): the
//!   edge sends no `keepalive` messages and no Lease of its own, and the
//!   cloud counts any datagram from the edge as a sign of life
//!   ([`crate::ConnRx::idle_for`]).
//! - **Flapping links**: a reconnecting client resumes its TLS session from
//!   a stateless ticket, so no certificate is signed or verified again
//!   whatever the fleet's size. A server configured to keep sessions
//!   ([`ServerConfig::zero_rtt_sessions`]) lets those clients send their
//!   header in 0-RTT, saving a round trip; it only acts on it once the
//!   handshake has completed, so replayed early data is never processed. A
//!   client whose address changes (new port, new network) keeps its
//!   connection: QUIC migrates it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use edgehive_model::{Content, Message, Text, op};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{RecvStream, SendStream, VarInt};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use crate::WireBytes;
use crate::config::{ClientConfig, ConnConfig, ServerConfig};
use crate::conn::{Connection, FrameRead, FrameWrite, PeerInfo, Protocol, ReadEvent, Sessions, spawn_conn, wire_line};
use crate::error::{CloseReason, ConnectError};
use crate::features;
use crate::server::{
    Intake, Overloaded, PendingHandshake, Server, ServerStats, WAITING_RECHECK, WaitingRoom, new_server,
};
use crate::stream::{self, QuicSessions};
use crate::tls::{CertIdentity, client_config_for, keep_sessions, server_config_for, stateless_tickets};
use crate::ws::KEEPALIVE_PING;

/// The ALPN protocol id of edgehive's QUIC mapping.
pub const ALPN: &[u8] = b"edgehive-viaduct/1";

/// Application error code: the server refused the handshake headers.
pub const CODE_REFUSED: u32 = 1;
/// Application error code: a normal close.
pub const CODE_CLOSED: u32 = 0;
/// Application error code on a session stream (RESET_STREAM, STOP_SENDING):
/// the session was reset. The reason, when it fitted, is the direction's
/// last frame (a RESET frame).
pub const CODE_SESSION_RESET: u32 = 1;
/// Application error code on a session stream: the session was refused.
/// The reason is the direction's RESET frame.
pub const CODE_SESSION_REFUSED: u32 = 2;

/// Largest handshake header frame.
const MAX_HEADER_FRAME: usize = 64 * 1024;

/// The transport settings; `sessions` when this end is configured for stream
/// sessions (the client offers them, the server accepts them).
fn transport(conn: &ConnConfig, sessions: bool) -> Result<Arc<quinn::TransportConfig>, ConnectError> {
    let mut t = quinn::TransportConfig::default();
    t.keep_alive_interval(Some(conn.ping_interval.unwrap_or(Duration::from_secs(25))));
    let idle = conn.read_timeout.unwrap_or(Duration::from_secs(90));
    t.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(idle).map_err(|e| ConnectError::Invalid(format!("idle timeout {idle:?}: {e}")))?,
    ));
    // Each peer opens one stream; allow a few for future use, no more. An
    // edge that agrees sessions lets the cloud open more once it has
    // (`QuicSessions::start`).
    t.max_concurrent_bidi_streams(VarInt::from_u32(stream::PEER_STREAMS));
    t.max_concurrent_uni_streams(VarInt::from_u32(0));
    // An edge link is slow: modest windows bound what a stalled peer can make
    // us buffer, and no datagram buffers are kept (viaduct sends none). A
    // session's window is its stream's; the connection's is widened to
    // cover every session once they are agreed.
    let stream_window = if sessions { stream::WINDOW } else { 1 << 20 };
    t.stream_receive_window(VarInt::from_u32(stream_window));
    t.receive_window(VarInt::from_u32(2 << 20));
    t.send_window(2 << 20);
    t.datagram_receive_buffer_size(None);
    Ok(Arc::new(t))
}

/// The receive buffer asked for a UDP socket that many connections share
/// (a cloud's, a fleet simulator's). The kernel's default (208 KiB) holds
/// about a hundred datagrams, some milliseconds of a busy server's traffic:
/// when the endpoint's task is late by more than that — a busy runtime,
/// a second process on the same cores — datagrams are dropped, keep-alives
/// among them, sessions expire, and their reconnections add load. With
/// 100,000 QUIC nodes coming up, 5.4 million were dropped this way and a
/// third of the sessions ended. 16 MiB holds some hundred milliseconds.
pub const SHARED_RECV_BUFFER: usize = 16 << 20;

/// Asks for a receive buffer of `bytes` on a UDP socket: beyond the
/// system's limit (`net.core.rmem_max`) when the process may
/// (`CAP_NET_ADMIN`), else as large as the limit allows, saying so once.
fn widen_recv_buffer(socket: &std::net::UdpSocket, bytes: usize) {
    use rustix::net::sockopt;
    if sockopt::set_socket_recv_buffer_size_force(socket, bytes).is_err() {
        let _ = sockopt::set_socket_recv_buffer_size(socket, bytes);
    }
    // Linux reports twice what was set (its bookkeeping share).
    let got = sockopt::socket_recv_buffer_size(socket).unwrap_or(0) / 2;
    if got < bytes {
        static TOLD: std::sync::Once = std::sync::Once::new();
        TOLD.call_once(|| {
            tracing::warn!(
                asked = bytes,
                got,
                "the UDP receive buffer is smaller than asked (net.core.rmem_max); under load QUIC datagrams may be \
                 dropped: raise it with `sysctl -w net.core.rmem_max={bytes}`"
            );
        });
    }
}

/// Shortest time between two stateless resets a server sends: none.
/// quinn's default (20 ms) protects against floods of garbage packets, but
/// after a restart every edge of the fleet needs one, and quinn measures
/// the interval from one receive batch's time, so it answers one packet of
/// each batch: with 10,000 QUIC edges of a restarted cloud (one run at a
/// 100 µs interval), most got theirs within 16 s and the last ones waited
/// out their idle timeout (60 s). Without a limit nothing is gained by a
/// flood either: the connection IDs are signed ([`endpoint_config`]), so a
/// packet earns a reset only if it carries an ID this server (or its
/// predecessor) issued, and a reset is always smaller than the packet that
/// caused it: it amplifies nothing.
const RESET_INTERVAL: Duration = Duration::ZERO;

/// The endpoint settings of a server whose stateless reset key and
/// connection ID signing key derive from `secret`
/// ([`ServerConfig::restart_secret`]); random keys without one.
fn endpoint_config(secret: Option<&[u8; 32]>) -> quinn::EndpointConfig {
    let Some(secret) = secret else { return quinn::EndpointConfig::default() };
    let master = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    let reset = ring::hmac::sign(&master, b"edgehive quic stateless reset key");
    let cid = ring::hmac::sign(&master, b"edgehive quic connection id key");
    let cids = SignedCids { key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, cid.as_ref()) };
    let mut c = quinn::EndpointConfig::new(Arc::new(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, reset.as_ref())));
    c.cid_generator(move || Box::new(cids.clone()));
    c.min_reset_interval(RESET_INTERVAL);
    c
}

/// Random bytes of a server's connection ID ([`SignedCids`]).
const CID_NONCE: usize = 8;
/// Bytes of its signature.
const CID_SIGNATURE: usize = 4;

/// A server's connection IDs, which its successor (same restart secret)
/// recognises: [`CID_NONCE`] random bytes and the first [`CID_SIGNATURE`]
/// bytes of their HMAC-SHA256. A packet of a connection the previous
/// process held then earns a stateless reset, and garbage does not.
///
/// The nonce is what keeps a dead connection's ID apart from the live ones:
/// a packet carrying an ID the new process also gave one of its own
/// connections is routed to that connection, fails to decrypt there, and
/// is dropped without a reset, again at every retransmission, until the
/// edge's idle timeout. quinn's keyed generator has 3 random bytes: with
/// 10,000 QUIC edges reconnecting to a restarted cloud (5 IDs each), 15–20
/// of them hit an ID in use and waited out their idle timeout. With 8
/// bytes, a restart of a 100,000-node fleet (250,000 live IDs on average
/// while the edges come back) sees one with a chance of about 10^-9.
#[derive(Clone)]
struct SignedCids {
    key: ring::hmac::Key,
}

impl SignedCids {
    fn signature(&self, nonce: &[u8]) -> [u8; CID_SIGNATURE] {
        let tag = ring::hmac::sign(&self.key, nonce);
        let mut s = [0; CID_SIGNATURE];
        s.copy_from_slice(&tag.as_ref()[..CID_SIGNATURE]);
        s
    }
}

impl quinn_proto::ConnectionIdGenerator for SignedCids {
    fn generate_cid(&mut self) -> quinn_proto::ConnectionId {
        let nonce: [u8; CID_NONCE] = rand::random();
        let mut id = [0; CID_NONCE + CID_SIGNATURE];
        id[..CID_NONCE].copy_from_slice(&nonce);
        id[CID_NONCE..].copy_from_slice(&self.signature(&nonce));
        quinn_proto::ConnectionId::new(&id)
    }

    fn validate(&self, cid: &quinn_proto::ConnectionId) -> Result<(), quinn_proto::InvalidCid> {
        match cid.len() == CID_NONCE + CID_SIGNATURE && cid[CID_NONCE..] == self.signature(&cid[..CID_NONCE]) {
            true => Ok(()),
            false => Err(quinn_proto::InvalidCid),
        }
    }

    fn cid_len(&self) -> usize {
        CID_NONCE + CID_SIGNATURE
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// A quinn endpoint on `socket` (a server's when `server` is given) whose
/// sends carry one datagram each ([`OneDatagram`]), with a wide receive
/// buffer when `shared` (a server's, or a socket many clients share), its
/// datagrams' bytes counted in `wire` when given.
fn endpoint_on(
    socket: std::net::UdpSocket,
    config: quinn::EndpointConfig,
    server: Option<quinn::ServerConfig>,
    shared: bool,
    wire: Option<Arc<WireBytes>>,
) -> std::io::Result<quinn::Endpoint> {
    if shared {
        widen_recv_buffer(&socket, SHARED_RECV_BUFFER);
    }
    let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
    let socket = Arc::new(OneDatagram { inner: runtime.wrap_udp_socket(socket)?, wire });
    quinn::Endpoint::new_with_abstract_socket(config, server, socket, runtime)
}

/// quinn's UDP socket, with one datagram per send. quinn keeps each
/// connection's transmit buffer as large as the most datagrams one send
/// may carry: ten with segmentation offload, about 14 KiB a connection for
/// its whole life, most of an idle edge link's memory. An edge link sends
/// little at a time; one datagram per send costs a system call per
/// datagram on a bulk transfer (a stream session), and keeps 1.5 KiB.
///
/// With `wire`, the UDP payloads sent and received are counted there (the
/// QUIC packets, encryption included: what a WebSocket link counts as its
/// TLS bytes).
#[derive(Debug)]
struct OneDatagram {
    inner: Arc<dyn quinn::AsyncUdpSocket>,
    wire: Option<Arc<WireBytes>>,
}

impl quinn::AsyncUdpSocket for OneDatagram {
    fn create_io_poller(self: Arc<Self>) -> std::pin::Pin<Box<dyn quinn::UdpPoller>> {
        Arc::clone(&self.inner).create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit<'_>) -> std::io::Result<()> {
        self.inner.try_send(transmit)?;
        if let Some(wire) = &self.wire {
            wire.sent.inc_by(transmit.contents.len() as u64);
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut std::task::Context<'_>,
        bufs: &mut [std::io::IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let (Some(wire), std::task::Poll::Ready(Ok(n))) = (&self.wire, &polled) {
            wire.received.inc_by(meta[..*n].iter().map(|m| m.len as u64).sum());
        }
        polled
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        1
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// Binds the QUIC server's UDP socket and starts accepting.
pub(crate) async fn bind(cfg: ServerConfig) -> Result<Server, ConnectError> {
    let stats = Arc::new(ServerStats::default());
    let mut tls = server_config_for(&cfg.tls, &[&rustls::version::TLS13])?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    if cfg.zero_rtt_sessions > 0 {
        keep_sessions(&mut tls, cfg.zero_rtt_sessions, stats.tls_resumed.clone());
        // Accept 0-RTT from resuming clients (quinn requires all or nothing).
        tls.max_early_data_size = u32::MAX;
    } else {
        stateless_tickets(&mut tls, stats.tls_resumed.clone(), cfg.restart_secret.as_ref())?;
    }
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| ConnectError::TlsConfig(e.to_string()))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(transport(&cfg.conn, cfg.features.iter().any(|f| f == stream::FEATURE))?);
    server.migration(true);
    let endpoint = std::net::UdpSocket::bind(cfg.listen)
        .and_then(|s| endpoint_on(s, endpoint_config(cfg.restart_secret.as_ref()), Some(server), true, None))
        .map_err(|source| ConnectError::Io { what: "listen on", addr: cfg.listen.to_string(), source })?;
    let local_addr = endpoint.local_addr().map_err(|source| ConnectError::Io {
        what: "read address of",
        addr: cfg.listen.to_string(),
        source,
    })?;
    let (server, intake) = new_server(Protocol::Quic, local_addr, &cfg, stats, Some(endpoint.clone()));
    tokio::spawn(accept_loop(endpoint, Arc::new(cfg), intake, server.cancel.clone()));
    Ok(server)
}

async fn accept_loop(endpoint: quinn::Endpoint, cfg: Arc<ServerConfig>, intake: Intake, cancel: CancellationToken) {
    let mut waiting = WaitingRoom::new(&intake, cfg.max_pending_handshakes_per_source);
    // Past the room, or its source's share of it, an attempt goes unanswered.
    let wait = |waiting: &mut WaitingRoom<quinn::Incoming>, incoming: quinn::Incoming| {
        let remote = incoming.remote_address();
        if let Err(incoming) = waiting.push(incoming, remote) {
            defer(incoming, &intake);
        }
    };
    let admit = |waiting: &mut WaitingRoom<quinn::Incoming>| {
        waiting.admit(&intake, |p, i, _| start_handshake(&intake, &cfg, p, i), |i, _| defer(i, &intake));
    };
    loop {
        let incoming = tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            // A slot freed, or a while passed (the budget may have grown;
            // the oldest may have waited long enough).
            _ = async {
                tokio::select! {
                    () = intake.freed() => {}
                    () = tokio::time::sleep(WAITING_RECHECK) => {}
                }
            }, if !waiting.is_empty() => {
                admit(&mut waiting);
                continue;
            }
            i = endpoint.accept() => match i { Some(i) => i, None => break },
        };
        let remote = incoming.remote_address();
        // A QUIC Initial's source address can be forged. Before it may evict
        // another handshake (or wait, or go unanswered, for the server's load),
        // its sender must prove it receives at that address: a Retry costs
        // us no state and the client one round trip.
        if !incoming.remote_address_validated()
            && incoming.may_retry()
            && (!waiting.is_empty() || intake.under_pressure(remote))
        {
            ask_retry(incoming, &intake);
            continue;
        }
        // First come, first served: behind those already waiting.
        if !waiting.is_empty() {
            wait(&mut waiting, incoming);
            admit(&mut waiting);
            continue;
        }
        match intake.admit(remote) {
            Ok(pending) => start_handshake(&intake, &cfg, pending, incoming),
            // The budget was cut since the look above: only a validated
            // address waits.
            Err(Overloaded) if !incoming.remote_address_validated() && incoming.may_retry() => {
                ask_retry(incoming, &intake);
            }
            Err(Overloaded) => wait(&mut waiting, incoming),
        }
    }
    for incoming in waiting.drain() {
        incoming.refuse();
    }
}

/// Leaves a validated connection attempt of a server that is behind
/// unanswered: its packets are dropped and nothing of it is kept, as a full
/// TCP accept queue drops a SYN. The client sends its Initial again when
/// its retransmission timer fires (about 1 s, then doubling), with the same
/// ClientHello. Refused instead, the attempt would end, and with it the
/// session ticket in that ClientHello (a client's ticket is used once): in
/// a reconnection storm most edges came back with full handshakes, a
/// certificate signed and verified on each side, when the server was
/// busiest. Unanswered is also cheaper for the server: no packet goes out.
fn defer(incoming: quinn::Incoming, intake: &Intake) {
    intake.deferred(incoming.remote_address());
    incoming.ignore();
}

/// Asks the client to prove its address (a Retry: no state kept here).
fn ask_retry(incoming: quinn::Incoming, intake: &Intake) {
    if incoming.retry().is_ok() {
        intake.stats.quic_retries.inc();
    }
}

fn start_handshake(intake: &Intake, cfg: &Arc<ServerConfig>, pending: PendingHandshake, incoming: quinn::Incoming) {
    let remote = incoming.remote_address();
    let (cfg, stats) = (cfg.clone(), intake.stats.clone());
    intake.spawn(pending, remote, async move { server_handshake(incoming, &cfg, &stats).await });
}

async fn server_handshake(incoming: quinn::Incoming, cfg: &ServerConfig, stats: &ServerStats) -> Option<Connection> {
    let remote = incoming.remote_address();
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            stats.tls_failures.inc();
            tracing::warn!(%remote, error = %e, "QUIC/TLS handshake failed");
            return None;
        }
    };
    let cert = peer_cert(&conn);
    let (mut send, mut recv) = match conn.accept_bi().await {
        Ok(s) => s,
        Err(e) => {
            stats.upgrade_failures.inc();
            tracing::warn!(%remote, error = %e, "no handshake stream");
            return None;
        }
    };
    let refuse = |reason: String| {
        stats.upgrade_failures.inc();
        tracing::warn!(%remote, cert_cn = ?cert.as_ref().and_then(|c| c.common_name.clone()), %reason, "QUIC handshake headers refused");
        conn.close(VarInt::from_u32(CODE_REFUSED), reason.as_bytes());
        None
    };
    let header = match read_frame(&mut recv, MAX_HEADER_FRAME).await {
        ReadEvent::Data(b) => b,
        ReadEvent::End(r) => return refuse(format!("reading handshake headers: {r}")),
        ReadEvent::Alive => return refuse("no handshake headers".into()),
    };
    let req = match Message::decode(&header) {
        Ok(m) if m.route.operation == op::VIADUCT_HEADER => m,
        Ok(m) => return refuse(format!("expected a header message, got operation {:?}", m.route.operation)),
        Err(e) => return refuse(format!("handshake headers: {e}")),
    };
    let Header { node_id, project_id, features: offered, keepalive } = match parse_header(&req) {
        Ok(x) => x,
        Err(reason) => return refuse(reason),
    };
    let agreed = features::agree(&offered, &cfg.features);
    let ping_keepalive = cfg.ping_keepalive && keepalive.as_deref() == Some(KEEPALIVE_PING);
    let reply = if agreed.is_empty() && !ping_keepalive {
        Content::string("ack")
    } else {
        let mut fields = serde_json::json!({ "features": agreed });
        if ping_keepalive {
            fields["keepalive"] = KEEPALIVE_PING.into();
        }
        match Content::from_serialize(&fields) {
            Ok(c) => c,
            Err(e) => return refuse(format!("handshake reply: {e}")),
        }
    };
    let mut ack = Vec::new();
    push_frame(&mut ack, &wire_line(&req.response(reply)));
    if send.write_all(&ack).await.is_err() {
        return None;
    }
    let local_addr = SocketAddr::new(conn.local_ip().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into()), 0);
    let info = PeerInfo {
        node_id,
        project_id,
        cert,
        remote_addr: conn.remote_address(),
        local_addr,
        protocol: Protocol::Quic,
        resumed: false,
        ping_keepalive,
        features: agreed,
    };
    tracing::info!(node = %info.node_id, %remote, "edge connected over QUIC");
    Some(spawn_quic(conn, send, recv, info, cfg.conn.clone(), false))
}

/// The client's handshake headers.
struct Header {
    node_id: Text,
    project_id: Text,
    features: Vec<String>,
    /// `ping`: the client offers that the connection's own liveness (QUIC's
    /// keep-alives) carries the session's, as WebSocket pings do.
    keepalive: Option<String>,
}

fn parse_header(req: &Message) -> Result<Header, String> {
    #[derive(serde::Deserialize)]
    struct Fields {
        #[serde(default)]
        node_id: String,
        #[serde(default)]
        project_id: String,
        #[serde(default)]
        features: Vec<String>,
        #[serde(default)]
        keepalive: Option<String>,
    }
    let h: Fields = req.content.decode().map_err(|e| format!("handshake headers: {e}"))?;
    if h.node_id.is_empty() {
        return Err("missing node_id".into());
    }
    if h.node_id.len() > 253 || h.node_id.chars().any(|c| c.is_control() || c == '/') {
        return Err(format!("invalid node_id {:?}", h.node_id));
    }
    Ok(Header {
        node_id: Text::from(h.node_id),
        project_id: Text::from(h.project_id),
        features: features::sanitize(&h.features),
        keepalive: h.keepalive,
    })
}

fn peer_cert(conn: &quinn::Connection) -> Option<CertIdentity> {
    let any = conn.peer_identity()?;
    let certs = any.downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>().ok()?;
    certs.first().and_then(|c| CertIdentity::from_der(c))
}

/// Appends one frame: the length of `line`, then `line` (a `wire_line`).
fn push_frame(buf: &mut Vec<u8>, line: &str) {
    push_bytes(buf, line.as_bytes());
}

/// Appends one frame of any bytes (a stream session frame).
fn push_bytes(buf: &mut Vec<u8>, frame: &[u8]) {
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(frame);
}

async fn read_frame(recv: &mut RecvStream, limit: usize) -> ReadEvent {
    let mut len = [0u8; 4];
    match recv.read_exact(&mut len).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) => return ReadEvent::End(CloseReason::PeerClosed),
        Err(quinn::ReadExactError::FinishedEarly(_)) => {
            return ReadEvent::End(CloseReason::Malformed("stream ended inside a frame length".into()));
        }
        Err(quinn::ReadExactError::ReadError(e)) => return ReadEvent::End(read_reason(e)),
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > limit {
        return ReadEvent::End(CloseReason::FrameTooLarge { limit });
    }
    let mut data = vec![0u8; n];
    match recv.read_exact(&mut data).await {
        Ok(()) => ReadEvent::Data(data.into()),
        Err(quinn::ReadExactError::FinishedEarly(got)) => {
            ReadEvent::End(CloseReason::Malformed(format!("truncated frame: {got} of {n} bytes")))
        }
        Err(quinn::ReadExactError::ReadError(e)) => ReadEvent::End(read_reason(e)),
    }
}

fn read_reason(e: quinn::ReadError) -> CloseReason {
    match e {
        quinn::ReadError::ConnectionLost(c) => conn_reason(c),
        other => CloseReason::Transport(other.to_string()),
    }
}

fn conn_reason(e: quinn::ConnectionError) -> CloseReason {
    use quinn::ConnectionError as C;
    match e {
        C::ApplicationClosed(_) | C::ConnectionClosed(_) | C::LocallyClosed | C::Reset => CloseReason::PeerClosed,
        C::TimedOut => CloseReason::Transport("QUIC idle timeout".into()),
        other => CloseReason::Transport(other.to_string()),
    }
}

struct QuicRead {
    recv: RecvStream,
    limit: usize,
}

struct QuicWrite {
    conn: quinn::Connection,
    send: SendStream,
    buf: Vec<u8>,
}

impl FrameRead for QuicRead {
    async fn next(&mut self) -> ReadEvent {
        read_frame(&mut self.recv, self.limit).await
    }
}

/// How long closing waits for the peer to acknowledge the last messages.
const CLOSE_GRACE: Duration = Duration::from_millis(750);

impl FrameWrite for QuicWrite {
    async fn feed(&mut self, line: &[u8]) -> Result<(), CloseReason> {
        push_bytes(&mut self.buf, line);
        Ok(())
    }
    async fn feed_binary(&mut self, frame: bytes::Bytes) -> Result<(), CloseReason> {
        push_bytes(&mut self.buf, &frame);
        Ok(())
    }
    async fn flush(&mut self) -> Result<(), CloseReason> {
        // The frames go to quinn as they are (no copy), and the connection
        // keeps no buffer between bursts.
        let mut chunk = [bytes::Bytes::from(std::mem::take(&mut self.buf))];
        let r = self.send.write_all_chunks(&mut chunk).await;
        r.map_err(|e| match e {
            quinn::WriteError::ConnectionLost(c) => conn_reason(c),
            other => CloseReason::Transport(other.to_string()),
        })
    }
    async fn ping(&mut self) -> Result<(), CloseReason> {
        // QUIC keep-alives are sent by the transport itself.
        Ok(())
    }
    async fn close(&mut self) {
        // Closing a QUIC connection discards what the peer has not
        // acknowledged, so a last message (a refusal and its reason) would
        // be lost: the stream is finished and the close waits, briefly, for
        // the peer to have all of it (the writer gives close 1 s in all).
        if self.send.finish().is_ok() {
            let _ = timeout(CLOSE_GRACE, self.send.stopped()).await;
        }
        self.conn.close(VarInt::from_u32(CODE_CLOSED), b"closed");
    }
}

fn spawn_quic(
    conn: quinn::Connection,
    send: SendStream,
    recv: RecvStream,
    info: PeerInfo,
    cfg: ConnConfig,
    client: bool,
) -> Connection {
    let limit = cfg.max_frame_size;
    // Messages go ahead of session data.
    let _ = send.set_priority(1);
    let span = tracing::info_span!("conn", node = %info.node_id, remote = %info.remote_addr);
    let sessions =
        span.in_scope(|| QuicSessions::start(&conn, !client, info.agreed(stream::FEATURE), cfg.stream_stats.clone()));
    let reader = QuicRead { recv, limit };
    let writer = QuicWrite { conn: conn.clone(), send, buf: Vec::new() };
    // The read timeout is the transport's idle timeout (`transport`): QUIC's
    // keep-alives keep a link that carries no message alive.
    let cfg = ConnConfig { read_timeout: None, ..cfg };
    spawn_conn(reader, writer, info, cfg, client, Sessions::Quic(conn, sessions))
}

/// A QUIC client endpoint. Keep it for the life of the edge: it holds the TLS
/// session tickets that let a reconnect resume (in 0-RTT from a server that
/// keeps sessions), and its socket can be
/// replaced (`rebind`) without dropping the connection.
#[derive(Debug)]
pub struct QuicClient {
    endpoint: quinn::Endpoint,
    client: quinn::ClientConfig,
    cfg: ClientConfig,
    zero_rtt: AtomicU64,
}

/// A client UDP socket that several [`QuicClient`]s may share: each client's
/// connections are its own (own TLS identity, own session tickets), only
/// the socket is common. A process holding many edges' links (a fleet
/// simulator) needs one socket for thousands of connections instead of a
/// file descriptor each.
#[derive(Debug, Clone)]
pub struct QuicEndpoint(quinn::Endpoint);

impl QuicEndpoint {
    /// Binds a UDP socket at `bind` (e.g. `127.0.0.1:0`), with a receive
    /// buffer wide enough for many connections ([`SHARED_RECV_BUFFER`]);
    /// the bytes of its datagrams, every connection's, are counted in
    /// `wire` when given.
    pub fn bind(bind: SocketAddr, wire: Option<Arc<WireBytes>>) -> Result<QuicEndpoint, ConnectError> {
        std::net::UdpSocket::bind(bind)
            .and_then(|s| endpoint_on(s, quinn::EndpointConfig::default(), None, true, wire))
            .map(QuicEndpoint)
            .map_err(|source| ConnectError::Io { what: "bind", addr: bind.to_string(), source })
    }

    /// Our UDP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

impl QuicClient {
    /// Binds a UDP socket of its own at `bind` (e.g. `127.0.0.1:0` or
    /// `0.0.0.0:0`); its datagrams' bytes are counted in the configuration's
    /// `wire_bytes`.
    pub fn new(cfg: ClientConfig, bind: SocketAddr) -> Result<QuicClient, ConnectError> {
        let wire = cfg.conn.wire_bytes.clone();
        let endpoint = std::net::UdpSocket::bind(bind)
            .and_then(|s| endpoint_on(s, quinn::EndpointConfig::default(), None, false, wire))
            .map_err(|source| ConnectError::Io { what: "bind", addr: bind.to_string(), source })?;
        QuicClient::on(cfg, QuicEndpoint(endpoint))
    }

    /// A client whose connections go out through `endpoint`'s socket.
    pub fn on(cfg: ClientConfig, endpoint: QuicEndpoint) -> Result<QuicClient, ConnectError> {
        if cfg.node_id.is_empty() || cfg.node_id.contains('/') {
            return Err(ConnectError::Invalid(format!("node id {:?}", cfg.node_id)));
        }
        let mut tls = client_config_for(&cfg.tls, &[&rustls::version::TLS13])?;
        tls.alpn_protocols = vec![ALPN.to_vec()];
        tls.enable_early_data = true;
        let crypto = QuicClientConfig::try_from(tls).map_err(|e| ConnectError::TlsConfig(e.to_string()))?;
        let mut client = quinn::ClientConfig::new(Arc::new(crypto));
        client.transport_config(transport(&cfg.conn, cfg.features.iter().any(|f| f == stream::FEATURE))?);
        Ok(QuicClient { endpoint: endpoint.0, client, cfg, zero_rtt: AtomicU64::new(0) })
    }

    /// Our UDP address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Moves every connection of this endpoint to a new socket, as when an
    /// edge's address changes; QUIC migrates the connections.
    pub fn rebind(&self, socket: std::net::UdpSocket) -> std::io::Result<()> {
        let runtime = quinn::TokioRuntime;
        let inner = quinn::Runtime::wrap_udp_socket(&runtime, socket)?;
        self.endpoint.rebind_abstract(Arc::new(OneDatagram { inner, wire: self.cfg.conn.wire_bytes.clone() }))
    }

    /// Connections whose handshake headers went out in 0-RTT and were accepted.
    pub fn zero_rtt_accepted(&self) -> u64 {
        self.zero_rtt.load(Ordering::Relaxed)
    }

    /// Connects, sends the handshake headers and waits for the server's ack.
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        let deadline = self.cfg.handshake_timeout;
        timeout(deadline, self.connect_inner())
            .await
            .map_err(|_| ConnectError::Timeout { addr: self.cfg.server.clone(), after: deadline })?
    }

    async fn connect_inner(&self) -> Result<Connection, ConnectError> {
        let cfg = &self.cfg;
        let addr_text = cfg.server.clone();
        let addr = tokio::net::lookup_host(&cfg.server)
            .await
            .map_err(|source| ConnectError::Io { what: "resolve", addr: addr_text.clone(), source })?
            .next()
            .ok_or_else(|| ConnectError::Invalid(format!("server address {addr_text:?} resolves to nothing")))?;
        let host = match cfg.server_name.clone() {
            Some(n) => n,
            None => crate::ws::host_of(&cfg.server)
                .ok_or_else(|| ConnectError::Invalid(format!("server address {addr_text:?}")))?,
        };
        let connecting = self.endpoint.connect_with(self.client.clone(), addr, &host).map_err(|e| {
            ConnectError::Handshake { protocol: Protocol::Quic, addr: addr_text.clone(), reason: e.to_string() }
        })?;
        let tls_err = |e: quinn::ConnectionError| ConnectError::Tls {
            addr: addr_text.clone(),
            source: std::io::Error::other(e.to_string()),
        };
        // The QUIC and TLS handshake proper gets a third of the deadline, and
        // so does the wait for the header's reply. A server that gave up on
        // a handshake (its own deadline, or evicted for a newer one under a
        // storm) closes it, but in a 10,000-edge QUIC storm 0.6-3 % of the
        // dials heard nothing more and waited out the whole 30 s. Trying
        // again sooner, with new connection ids, gets a fresh handshake.
        let stage = cfg.handshake_timeout / 3;
        let stalled = || ConnectError::Handshake {
            protocol: Protocol::Quic,
            addr: addr_text.clone(),
            reason: format!("the QUIC handshake did not finish within {stage:?}"),
        };
        let (conn, early) = match connecting.into_0rtt() {
            Ok((conn, accepted)) => (conn, Some(accepted)),
            Err(connecting) => match timeout(stage, connecting).await {
                Ok(c) => (c.map_err(tls_err)?, None),
                Err(_) => return Err(stalled()),
            },
        };
        let offered = features::sanitize(&cfg.features);
        let mut fields = serde_json::json!({"node_id": cfg.node_id, "project_id": cfg.project_id});
        if !offered.is_empty() {
            fields["features"] = serde_json::json!(offered);
        }
        if cfg.ping_keepalive {
            fields["keepalive"] = KEEPALIVE_PING.into();
        }
        let header = Message::new()
            .with_route("edgehub", "", "", op::VIADUCT_HEADER)
            .with_content(Content::from_serialize(&fields).map_err(|e| ConnectError::Invalid(e.to_string()))?);
        let mut frame = Vec::new();
        push_frame(&mut frame, &wire_line(&header));
        let open_and_send = || async {
            let (mut send, recv) = conn.open_bi().await.map_err(tls_err)?;
            send.write_all(&frame).await.map_err(|e| ConnectError::Handshake {
                protocol: Protocol::Quic,
                addr: addr_text.clone(),
                reason: e.to_string(),
            })?;
            Ok::<_, ConnectError>((send, recv))
        };
        let (mut send, mut recv) = open_and_send().await?;
        // The reply cannot come before the handshake completes. If the server
        // refused the 0-RTT data, the stream carrying the header was reset:
        // send it again on a new stream.
        let tried_0rtt = early.is_some();
        let resumed = match early {
            Some(accepted) => timeout(stage, accepted).await.map_err(|_| stalled())?,
            None => false,
        };
        if tried_0rtt && !resumed {
            tracing::debug!(server = %addr_text, "0-RTT refused; resending headers");
            (send, recv) = open_and_send().await?;
        }
        let refused =
            |reason: String| ConnectError::Handshake { protocol: Protocol::Quic, addr: addr_text.clone(), reason };
        // The server answers within its own handshake deadline or gives up;
        // when its close is lost, waiting longer only delays the next try.
        let reply = timeout(stage, read_frame(&mut recv, MAX_HEADER_FRAME))
            .await
            .map_err(|_| refused(format!("no handshake reply within {stage:?}")))?;
        let ack = match reply {
            ReadEvent::Data(b) => Message::decode(&b).map_err(|e| refused(format!("handshake reply: {e}")))?,
            ReadEvent::End(_) | ReadEvent::Alive => {
                let why = match conn.close_reason() {
                    Some(quinn::ConnectionError::ApplicationClosed(a)) => {
                        String::from_utf8_lossy(&a.reason).into_owned()
                    }
                    Some(other) => other.to_string(),
                    None => "no handshake reply".into(),
                };
                return Err(refused(why));
            }
        };
        if ack.header.parent_msg_id != header.header.msg_id {
            return Err(refused("unexpected handshake reply".into()));
        }
        let (agreed, ping_keepalive) = match ack.content.as_text().as_deref() {
            Some("ack") => (Vec::new(), false),
            _ => {
                #[derive(serde::Deserialize)]
                struct Reply {
                    features: Vec<String>,
                    #[serde(default)]
                    keepalive: Option<String>,
                }
                let reply: Reply = ack.content.decode().map_err(|_| refused("unexpected handshake reply".into()))?;
                // Only what was offered counts, whatever the server answers.
                (
                    features::agree(&features::sanitize(&reply.features), &offered),
                    cfg.ping_keepalive && reply.keepalive.as_deref() == Some(KEEPALIVE_PING),
                )
            }
        };
        if resumed {
            self.zero_rtt.fetch_add(1, Ordering::Relaxed);
        }
        let info = PeerInfo {
            node_id: Text::from(cfg.node_id.clone()),
            project_id: Text::from(cfg.project_id.clone()),
            cert: peer_cert(&conn),
            remote_addr: conn.remote_address(),
            local_addr: self.endpoint.local_addr().unwrap_or(addr),
            protocol: Protocol::Quic,
            resumed,
            ping_keepalive,
            features: agreed,
        };
        Ok(spawn_quic(conn, send, recv, info, cfg.conn.clone(), true))
    }
}

/// Used by tests and tools: the frame bytes of one message.
#[doc(hidden)]
pub fn encode_frame(msg: &Message) -> Vec<u8> {
    let mut buf = Vec::new();
    push_frame(&mut buf, &wire_line(msg));
    buf
}

impl Drop for QuicClient {
    fn drop(&mut self) {
        self.endpoint.close(VarInt::from_u32(CODE_CLOSED), b"client dropped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A successor's generator (same key) recognises every ID, another key
    /// none; and IDs do not repeat where quinn's 3-byte nonces would (100,000
    /// IDs of 2^24 meet about 300 times).
    #[test]
    fn connection_ids_are_signed_and_do_not_meet() {
        use quinn_proto::ConnectionIdGenerator as _;
        let key = |k: &[u8]| SignedCids { key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, k) };
        let mut first = key(b"secret");
        let (successor, stranger) = (key(b"secret"), key(b"another"));
        let mut seen = std::collections::HashSet::new();
        for _ in 0..100_000 {
            let id = first.generate_cid();
            assert_eq!(id.len(), first.cid_len());
            assert!(successor.validate(&id).is_ok());
            assert!(seen.insert(id), "an ID came twice");
        }
        let id = first.generate_cid();
        assert!(stranger.validate(&id).is_err(), "another key's ID");
        let mut flipped = id.to_vec();
        flipped[0] ^= 1;
        assert!(successor.validate(&quinn_proto::ConnectionId::new(&flipped)).is_err(), "a changed nonce");
        assert!(successor.validate(&quinn_proto::ConnectionId::new(&id[..8])).is_err(), "a cut ID");
    }

    #[test]
    fn a_shared_socket_gets_a_wide_receive_buffer() {
        use rustix::net::sockopt::socket_recv_buffer_size;
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = socket_recv_buffer_size(&socket).unwrap() / 2;
        let asked = 4 << 20;
        widen_recv_buffer(&socket, asked);
        let got = socket_recv_buffer_size(&socket).unwrap() / 2;
        // All of it with CAP_NET_ADMIN, else what the system allows.
        let limit: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(before);
        assert!(got >= asked.min(limit.max(before)), "asked {asked}, got {got} (limit {limit}, before {before})");
    }
}
