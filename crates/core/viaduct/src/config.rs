//! Settings of connections, servers and clients.

use std::net::SocketAddr;
use std::time::Duration;

use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Limits and deadlines of one connection (both ends).
#[derive(Debug, Clone)]
pub struct ConnConfig {
    /// Largest frame accepted, in bytes; a larger one closes the connection.
    pub max_frame_size: usize,
    /// Messages waiting to be written; `try_write` fails when it is full.
    pub send_queue: usize,
    /// Received messages waiting for `recv`; when full, reading pauses and
    /// TCP pushes back on the peer.
    pub recv_queue: usize,
    /// Deadline of one socket write (and of waiting for room in the send queue).
    pub write_timeout: Duration,
    /// Close the connection when nothing arrives for this long (`None`: never).
    pub read_timeout: Option<Duration>,
    /// Send a WebSocket ping this often, so that an idle but healthy peer
    /// keeps the read deadline fed (`None`: never). Go's gorilla/websocket
    /// answers pings by default, so this works against KubeEdge peers too.
    pub ping_interval: Option<Duration>,
    /// Where this connection's stream sessions are counted (`None`: not
    /// counted).
    pub stream_stats: Option<std::sync::Arc<crate::stream::StreamStats>>,
    /// Where the bytes this connection puts on and takes off the wire are
    /// counted, TLS included (`None`: not counted; WebSocket clients only).
    pub wire_bytes: Option<std::sync::Arc<crate::WireBytes>>,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig {
            max_frame_size: 8 << 20,
            send_queue: 1024,
            recv_queue: 1024,
            write_timeout: Duration::from_secs(15),
            read_timeout: None,
            ping_interval: None,
            stream_stats: None,
            wire_bytes: None,
        }
    }
}

/// A certificate chain and its private key (DER).
#[derive(Debug)]
pub struct Identity {
    /// Leaf first.
    pub cert_chain: Vec<CertificateDer<'static>>,
    /// The leaf's key.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Identity {
    fn clone(&self) -> Self {
        Identity { cert_chain: self.cert_chain.clone(), key: self.key.clone_key() }
    }
}

/// Server side TLS: our identity and the CA that client certificates must chain to.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The server's certificate and key.
    pub identity: Identity,
    /// Client certificates must chain to one of these.
    pub client_ca: Vec<CertificateDer<'static>>,
}

/// Client side TLS: our identity and the CA the server's certificate must chain to.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// The client's certificate and key.
    pub identity: Identity,
    /// The server's certificate must chain to one of these.
    pub server_ca: Vec<CertificateDer<'static>>,
}

/// A server's default [`ServerConfig::handshake_timeout`]: 5 s.
///
/// TLS 1.3 plus the WebSocket upgrade take three round trips (QUIC: one or
/// two plus the header frame), so 5 s leaves room for a 1 s round trip and a
/// lost packet's retransmission. It is also how long a connection that never
/// sends a byte holds a handshake slot when the server is not under
/// pressure (under pressure, the oldest are evicted sooner). KubeEdge's
/// 30 s let about 4,100 idle connections lock every edge out for 30 s at a
/// time.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A server's default [`ServerConfig::max_pending_handshakes_per_source`]:
/// 128. Enough for a site whose edges all reconnect at once through one NAT
/// address (handshakes take milliseconds, so 128 in progress at once is
/// many hundreds of reconnects a second); small enough that one address
/// holds at most 1/32 of the server's default 4,096 slots.
pub const DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE: usize = 128;

/// A server's default [`ServerConfig::max_lag`]: 50 ms. An idle runtime
/// wakes a timer within a millisecond or two; 50 ms late is a server whose
/// cores are full, well before its sockets overflow (a QUIC socket's 16 MiB
/// receive buffer holds about a second of a busy fleet's datagrams).
pub const DEFAULT_MAX_LAG: Duration = Duration::from_millis(50);

/// Settings of a WebSocket server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// TLS material.
    pub tls: ServerTls,
    /// Per-connection limits.
    pub conn: ConnConfig,
    /// TLS plus the WebSocket upgrade (on QUIC: the QUIC handshake plus the
    /// header stream's first frame) must finish within this, counted from
    /// accept: [`DEFAULT_HANDSHAKE_TIMEOUT`] (5 s).
    pub handshake_timeout: Duration,
    /// Handshakes in progress at once (4,096). A new connection beyond this
    /// is not refused: the server's oldest pending handshake is cancelled to
    /// make room, so a flood of idle connections cannot lock edges out.
    pub max_pending_handshakes: usize,
    /// Handshakes in progress at once from one source: an IPv4 address, or
    /// an IPv6 /64 ([`DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE`], 128). A
    /// new connection from a source at this limit cancels that source's
    /// oldest pending handshake, so one source cannot evict everyone
    /// else's. On QUIC, an unvalidated source at a limit is first asked to
    /// validate its address (a Retry), so a spoofed address evicts nothing.
    pub max_pending_handshakes_per_source: usize,
    /// How late the server's runtime may wake a timer before the server
    /// counts as behind and runs fewer handshakes at once
    /// ([`crate::admission::HandshakeBudget`]; [`DEFAULT_MAX_LAG`], 50 ms).
    /// While behind, a new handshake past the budget waits up to 2 s for a
    /// slot and is then turned away (closed before TLS; on QUIC left
    /// unanswered),
    /// unless the oldest in progress has taken half the deadline already (it
    /// is then cancelled instead, so silent connections hold the budget no
    /// longer than that). `None`: no budget, only the limits above.
    pub max_lag: Option<Duration>,
    /// The fewest handshakes the budget lets run at once: 256, twice the
    /// per-source limit's default, so one source (a site reconnecting
    /// through one NAT address, or an attacker's address) holds at most
    /// half of it.
    pub min_handshake_budget: usize,
    /// Accepted connections not yet taken by `accept()`.
    pub accept_queue: usize,
    /// Accept an edge's offer to keep its session alive with WebSocket pings
    /// (see [`crate::ws::HEADER_KEEPALIVE`]).
    pub ping_keepalive: bool,
    /// Features this server agrees to when an edge offers them
    /// ([`crate::features`]).
    pub features: Vec<String>,
    /// QUIC: TLS sessions the server keeps so that their clients may
    /// resume in 0-RTT (their handshake headers ride in the first flight).
    /// 0, the default: none are kept, and sessions resume from stateless
    /// tickets instead, as on WebSocket: every client resumes, whatever the
    /// fleet's size, with no certificate signed or verified again, but
    /// without 0-RTT (rustls takes early data only in sessions it keeps).
    /// A kept session holds the client's certificate, about 1 KB; past
    /// this many the oldest are forgotten, and their clients' next
    /// handshakes are full ones.
    pub zero_rtt_sessions: usize,
    /// A secret kept across restarts (the cloud keeps it in its data
    /// directory), from which the server derives the keys that must
    /// outlive the process:
    /// - its session ticket keys (one per 6 h, the previous one still
    ///   accepted), so that edges reconnecting to a restarted server resume
    ///   their TLS sessions: no certificate signed or verified again;
    /// - on QUIC, its stateless reset key and the key that signs its
    ///   connection IDs (RFC 9000 §10.3), so that a restarted server
    ///   recognises the connection IDs its predecessor issued and answers a
    ///   packet of such a connection with a stateless reset the peer
    ///   accepts: an edge learns at its next packet (a keep-alive) that its
    ///   connection is gone and dials again, where otherwise it waits out
    ///   its idle timeout.
    ///
    /// Whoever holds it can forge session tickets, as whoever holds the CA
    /// key can sign certificates: keep it with that key. `None`: keys
    /// random to this process, rotated every 6 h and never stored.
    pub restart_secret: Option<[u8; 32]>,
}

impl ServerConfig {
    /// Defaults around the given address and TLS material.
    pub fn new(listen: SocketAddr, tls: ServerTls) -> ServerConfig {
        ServerConfig {
            listen,
            tls,
            conn: ConnConfig::default(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_pending_handshakes: 4096,
            max_pending_handshakes_per_source: DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE,
            max_lag: Some(DEFAULT_MAX_LAG),
            min_handshake_budget: 2 * DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE,
            accept_queue: 1024,
            ping_keepalive: false,
            features: Vec::new(),
            zero_rtt_sessions: 0,
            restart_secret: None,
        }
    }
}

/// Settings of a WebSocket client.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` of the cloud.
    pub server: String,
    /// Name checked against the server certificate (defaults to the host of
    /// `server`).
    pub server_name: Option<String>,
    /// This node's name (`node_id` header).
    pub node_id: String,
    /// KubeEdge project id (`project_id` header).
    pub project_id: String,
    /// TLS material.
    pub tls: ClientTls,
    /// Per-connection limits.
    pub conn: ConnConfig,
    /// TCP, TLS and WebSocket upgrade must finish within this (KubeEdge: 30 s).
    /// On QUIC the whole dial must, and each of its two stages (the QUIC
    /// handshake proper, then the header's reply) within a third of it: a
    /// handshake the server forgot is not waited out.
    pub handshake_timeout: Duration,
    /// Offer to keep the session alive with WebSocket pings (see
    /// [`crate::ws::HEADER_KEEPALIVE`]); whether the server took the offer
    /// is [`PeerInfo::ping_keepalive`](crate::PeerInfo::ping_keepalive).
    pub ping_keepalive: bool,
    /// Features to offer ([`crate::features`]); those the server agreed are
    /// [`PeerInfo::features`](crate::PeerInfo::features).
    pub features: Vec<String>,
    /// The local address to connect from (`None`: the system's choice). A
    /// machine holding many connections to one server spreads them over
    /// several addresses, each with its own range of ephemeral ports.
    pub local_ip: Option<std::net::IpAddr>,
}

impl ClientConfig {
    /// Defaults for the given server, node and TLS material.
    pub fn new(server: impl Into<String>, node_id: impl Into<String>, tls: ClientTls) -> ClientConfig {
        ClientConfig {
            server: server.into(),
            server_name: None,
            node_id: node_id.into(),
            project_id: edgehive_model::well_known::DEFAULT_PROJECT_ID.to_owned(),
            tls,
            conn: ConnConfig::default(),
            handshake_timeout: Duration::from_secs(30),
            ping_keepalive: false,
            features: Vec::new(),
            local_ip: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_handshakes_are_bounded_by_default() {
        let key = PrivateKeyDer::Pkcs8(Vec::new().into());
        let tls = ServerTls { identity: Identity { cert_chain: Vec::new(), key }, client_ca: Vec::new() };
        let cfg = ServerConfig::new(([127, 0, 0, 1], 0).into(), tls);
        assert_eq!(cfg.handshake_timeout, Duration::from_secs(5));
        assert_eq!(cfg.max_pending_handshakes, 4096);
        assert_eq!(cfg.max_pending_handshakes_per_source, 128);
        assert_eq!((cfg.max_lag, cfg.min_handshake_budget), (Some(Duration::from_millis(50)), 256));
    }
}
