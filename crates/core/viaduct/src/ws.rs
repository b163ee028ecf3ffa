//! WebSocket transport, byte-compatible with KubeEdge's viaduct (docs/protocol.md §2).
//!
//! The client dials `wss://{server}/{project_id}/{node_id}/events` with the
//! headers `node_id`, `project_id` and `ConnectionUse: msg`, and no `Origin`.
//! The server accepts any path, matches header names case-insensitively (Go
//! sends `Node_id`), requires `ConnectionUse: msg` and a node id, and refuses
//! anything else with `400` and a reason. TLS and the upgrade must finish
//! within the handshake deadline; handshakes in progress are bounded in
//! number, overall and per source, by evicting the oldest (see
//! [`ServerConfig`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use edgehive_model::Text;
use http::{HeaderMap, HeaderValue, Request};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

use crate::config::{ClientConfig, ConnConfig, ServerConfig};
use crate::conn::{Connection, PeerInfo, Protocol, Sessions, spawn_conn};
use crate::error::ConnectError;
use crate::features;
use crate::server::{Intake, PendingHandshake, Server, ServerStats, WAITING_RECHECK, WaitingRoom, new_server};
use crate::tls::{client_config, server_config};
use crate::tlsio;
use crate::wsframe::{self, UpgradeError};

/// Header carrying the node name.
pub const HEADER_NODE_ID: &str = "node_id";
/// Header carrying the project id.
pub const HEADER_PROJECT_ID: &str = "project_id";
/// Header selecting the connection's use; must be `msg`.
pub const HEADER_CONNECTION_USE: &str = "ConnectionUse";
/// The one accepted value of `ConnectionUse`.
pub const CONNECTION_USE_MSG: &str = "msg";
/// edgehive's liveness negotiation. An edge that can keep its session alive
/// with WebSocket pings alone sends `Edgehive-Keepalive: ping` in its
/// upgrade request; a server that accepts echoes it in the response, and
/// from then on any frame from the edge, pings included, counts as a
/// keepalive: about 28 bytes a heartbeat instead of a ~200-byte JSON
/// message. KubeEdge's CloudCore ignores the header and never echoes it, and
/// KubeEdge's EdgeCore never sends it, so both keep `keepalive` messages.
pub const HEADER_KEEPALIVE: &str = "Edgehive-Keepalive";
/// The value of [`HEADER_KEEPALIVE`].
pub const KEEPALIVE_PING: &str = "ping";

fn spawn_ws<S: AsyncRead + AsyncWrite + Send + 'static>(
    io: S,
    tail: bytes::Bytes,
    info: PeerInfo,
    cfg: ConnConfig,
    client: bool,
) -> Connection {
    let (reader, writer) = wsframe::split(io, tail, client, cfg.max_frame_size);
    spawn_conn(reader, writer, info, cfg, client, Sessions::Framed)
}

/// Binds the WebSocket server and starts accepting.
pub(crate) async fn bind(cfg: ServerConfig) -> Result<Server, ConnectError> {
    let stats = Arc::new(ServerStats::default());
    let tls = server_config(&cfg.tls, stats.tls_resumed.clone(), cfg.restart_secret.as_ref())?;
    let listener = TcpListener::bind(cfg.listen).await.map_err(|source| ConnectError::Io {
        what: "listen on",
        addr: cfg.listen.to_string(),
        source,
    })?;
    let local_addr = listener.local_addr().map_err(|source| ConnectError::Io {
        what: "read address of",
        addr: cfg.listen.to_string(),
        source,
    })?;
    let (server, intake) = new_server(Protocol::WebSocket, local_addr, &cfg, stats, None);
    let acceptor = Acceptor { listener, tls, cfg: Arc::new(cfg), intake, cancel: server.cancel.clone() };
    tokio::spawn(acceptor.run());
    Ok(server)
}

struct Acceptor {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    cfg: Arc<ServerConfig>,
    intake: Intake,
    cancel: CancellationToken,
}

impl Acceptor {
    async fn run(self) {
        // Connections the server has no handshake slot for wait, unread, in
        // a room with per-source shares (`WaitingRoom`): their ClientHellos,
        // session tickets in them, still resume once a slot frees. Refused
        // at once, as before, an edge had spent its ticket and backed off
        // (a cloud-restart storm of 10,000 edges: 6,510 refusals, 5,004
        // resumptions, 13.6 s). A source past its share is refused; while
        // the room is full nothing is accepted, and the rest wait in the
        // kernel's accept queue (a full one drops SYNs, which clients send
        // again), as on any TCP server that is behind.
        let mut waiting: WaitingRoom<TcpStream> =
            WaitingRoom::new(&self.intake, self.cfg.max_pending_handshakes_per_source);
        let refuse = |tcp: TcpStream, remote: SocketAddr| {
            // Closed before TLS: the edge retries after its backoff.
            drop(tcp);
            self.intake.refused(remote);
        };
        let wait = |waiting: &mut WaitingRoom<TcpStream>, tcp: TcpStream, remote: SocketAddr| {
            if let Err(tcp) = waiting.push(tcp, remote) {
                refuse(tcp, remote);
            }
        };
        loop {
            let (tcp, remote) = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => break,
                // A slot freed, or a while passed.
                _ = async {
                    tokio::select! {
                        () = self.intake.freed() => {}
                        () = tokio::time::sleep(WAITING_RECHECK) => {}
                    }
                }, if !waiting.is_empty() => {
                    waiting.admit(&self.intake, |p, tcp, remote| self.start(p, tcp, remote), refuse);
                    continue;
                }
                r = self.listener.accept(), if !waiting.is_full() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of descriptors and similar: back off briefly, keep serving.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // First come, first served: behind those already waiting. At a
            // limit, the oldest pending handshake goes.
            if !waiting.is_empty() {
                wait(&mut waiting, tcp, remote);
                waiting.admit(&self.intake, |p, tcp, remote| self.start(p, tcp, remote), refuse);
                continue;
            }
            match self.intake.admit(remote) {
                Ok(pending) => self.start(pending, tcp, remote),
                Err(_) => wait(&mut waiting, tcp, remote),
            }
        }
        drop(waiting.drain());
    }

    fn start(&self, pending: PendingHandshake, tcp: TcpStream, remote: SocketAddr) {
        let _ = tcp.set_nodelay(true);
        let (tls, cfg, stats) = (self.tls.clone(), self.cfg.clone(), self.intake.stats.clone());
        self.intake.spawn(pending, remote, async move { handshake(tcp, remote, tls, &cfg, &stats).await });
    }
}

/// TLS, then the WebSocket upgrade with header checks.
async fn handshake(
    tcp: TcpStream,
    remote: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    cfg: &ServerConfig,
    stats: &ServerStats,
) -> Option<Connection> {
    let local_addr = tcp.local_addr().ok()?;
    let tls_stream = match tlsio::accept(tcp, tls).await {
        Ok(s) => s,
        Err(e) => {
            stats.tls_failures.inc();
            tracing::warn!(%remote, error = %e, "TLS handshake failed");
            return None;
        }
    };
    let cert = tls_stream.peer_identity();
    let resumed = tls_stream.common().handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let mut tls_stream = tls_stream;
    let cert_cn = || cert.as_ref().and_then(|c| c.common_name.clone());
    let refused = |reason: &str| {
        stats.upgrade_failures.inc();
        tracing::warn!(%remote, cert_cn = ?cert_cn(), reason, "WebSocket upgrade refused");
    };
    let upgrade = match wsframe::read_request(&mut tls_stream).await {
        Ok(u) => u,
        Err(UpgradeError::Io(e)) => {
            refused(&e.to_string());
            return None;
        }
        Err(UpgradeError::Refused(reason)) => {
            refused(&reason);
            let _ = wsframe::refuse(&mut tls_stream, &reason).await;
            return None;
        }
    };
    let req = &upgrade.request;
    let (node_id, project_id) = match check_headers(req) {
        Ok(h) => h,
        Err(reason) => {
            refused(&reason);
            let _ = wsframe::refuse(&mut tls_stream, &reason).await;
            return None;
        }
    };
    let mut extra = HeaderMap::new();
    let asked = req.headers().get(HEADER_KEEPALIVE).is_some_and(|v| v.as_bytes() == KEEPALIVE_PING.as_bytes());
    let ping_keepalive = asked && cfg.ping_keepalive;
    if ping_keepalive {
        extra.insert(HEADER_KEEPALIVE, HeaderValue::from_static(KEEPALIVE_PING));
    }
    let offered = req.headers().get(features::HEADER).and_then(|v| v.to_str().ok()).map(features::parse);
    let agreed = features::agree(&offered.unwrap_or_default(), &cfg.features);
    if !agreed.is_empty()
        && let Ok(v) = HeaderValue::from_str(&features::join(&agreed))
    {
        extra.insert(features::HEADER, v);
    }
    let tail = match upgrade.accept(&mut tls_stream, &extra).await {
        Ok(tail) => tail,
        Err(e) => {
            refused(&e.to_string());
            return None;
        }
    };
    let info = PeerInfo {
        node_id,
        project_id,
        cert,
        remote_addr: remote,
        local_addr,
        protocol: Protocol::WebSocket,
        resumed,
        ping_keepalive,
        features: agreed,
    };
    tracing::info!(node = %info.node_id, %remote, cert_cn = ?info.cert.as_ref().and_then(|c| c.common_name.clone()), "edge connected");
    Some(spawn_ws(tls_stream, tail, info, cfg.conn.clone(), false))
}

/// Validates the upgrade request; returns (node_id, project_id).
fn check_headers(req: &Request<()>) -> Result<(Text, Text), String> {
    let h = req.headers();
    let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| !v.is_empty());
    match get(HEADER_CONNECTION_USE) {
        Some(CONNECTION_USE_MSG) => {}
        Some(other) => return Err(format!("ConnectionUse {other:?} is not supported; use \"msg\"")),
        None => return Err("missing ConnectionUse header".into()),
    }
    let node = get(HEADER_NODE_ID).ok_or("missing node_id header")?;
    if node.len() > 253 || node.chars().any(|c| c.is_control() || c == '/') {
        return Err(format!("invalid node_id {node:?}"));
    }
    let project = get(HEADER_PROJECT_ID).unwrap_or("");
    Ok((Text::copy_from(node), Text::copy_from(project)))
}

/// A TCP connection to `server`, from `local_ip` when one is given.
async fn dial_tcp(server: &str, local_ip: Option<std::net::IpAddr>) -> std::io::Result<TcpStream> {
    let Some(ip) = local_ip else { return TcpStream::connect(server).await };
    let mut last = None;
    for addr in tokio::net::lookup_host(server).await? {
        if addr.is_ipv4() != ip.is_ipv4() {
            continue;
        }
        let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.bind(std::net::SocketAddr::new(ip, 0))?;
        match socket.connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::AddrNotAvailable, format!("{server} has no address of {ip}'s family"))
    }))
}

/// Dials a server and completes TLS and the WebSocket upgrade.
pub async fn connect(cfg: &ClientConfig) -> Result<Connection, ConnectError> {
    WsClient::new(cfg.clone())?.connect().await
}

/// A WebSocket client that keeps its TLS configuration between
/// connections: a reconnection resumes the TLS session of the ticket the
/// server gave the last one (no certificate signed or verified on either
/// side), which is most of what a reconnection storm costs a cloud. Keep it
/// for as long as the certificate it was made with.
pub struct WsClient {
    cfg: ClientConfig,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for WsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WsClient").field("server", &self.cfg.server).field("node", &self.cfg.node_id).finish()
    }
}

impl WsClient {
    /// A client of `cfg.server` with `cfg`'s identity.
    pub fn new(cfg: ClientConfig) -> Result<WsClient, ConnectError> {
        let tls = client_config(&cfg.tls)?;
        Ok(WsClient { cfg, tls })
    }

    /// Dials the server and completes TLS and the WebSocket upgrade.
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        let deadline = self.cfg.handshake_timeout;
        timeout(deadline, connect_inner(&self.cfg, &self.tls))
            .await
            .map_err(|_| ConnectError::Timeout { addr: self.cfg.server.clone(), after: deadline })?
    }
}

async fn connect_inner(cfg: &ClientConfig, tls: &Arc<rustls::ClientConfig>) -> Result<Connection, ConnectError> {
    let addr = cfg.server.clone();
    if cfg.node_id.is_empty() || cfg.node_id.contains('/') {
        return Err(ConnectError::Invalid(format!("node id {:?}", cfg.node_id)));
    }
    let host = match cfg.server_name.clone() {
        Some(n) => n,
        None => {
            host_of(&cfg.server).ok_or_else(|| ConnectError::Invalid(format!("server address {:?}", cfg.server)))?
        }
    };
    let server_name = rustls_pki_types::ServerName::try_from(host.clone())
        .map_err(|e| ConnectError::Invalid(format!("server name {host:?}: {e}")))?;
    let request = upgrade_request(cfg)?;
    let tcp = dial_tcp(&cfg.server, cfg.local_ip).await.map_err(|source| ConnectError::Io {
        what: "connect to",
        addr: addr.clone(),
        source,
    })?;
    let _ = tcp.set_nodelay(true);
    let local_addr =
        tcp.local_addr().map_err(|source| ConnectError::Io { what: "read address of", addr: addr.clone(), source })?;
    let remote_addr =
        tcp.peer_addr().map_err(|source| ConnectError::Io { what: "read address of", addr: addr.clone(), source })?;
    match cfg.conn.wire_bytes.clone() {
        Some(bytes) => {
            let tcp = crate::counted::Counted::new(tcp, bytes);
            upgrade(cfg, request, Arc::clone(tls), server_name, tcp, local_addr, remote_addr).await
        }
        None => upgrade(cfg, request, Arc::clone(tls), server_name, tcp, local_addr, remote_addr).await,
    }
}

/// The upgrade's path and headers. Both are written into the request as
/// they are, so nothing in them may end a line or the request target.
fn upgrade_request(cfg: &ClientConfig) -> Result<(String, HeaderMap), ConnectError> {
    let path = format!("/{}/{}/events", cfg.project_id, cfg.node_id);
    path.parse::<http::uri::PathAndQuery>().map_err(|e| ConnectError::Invalid(format!("request path {path}: {e}")))?;
    let mut headers = HeaderMap::new();
    for (name, value) in [
        (HEADER_NODE_ID, cfg.node_id.as_str()),
        (HEADER_PROJECT_ID, cfg.project_id.as_str()),
        (HEADER_CONNECTION_USE, CONNECTION_USE_MSG),
    ] {
        let v = HeaderValue::from_str(value).map_err(|e| ConnectError::Invalid(format!("header {name}: {e}")))?;
        headers.insert(name, v);
    }
    if cfg.ping_keepalive {
        headers.insert(HEADER_KEEPALIVE, HeaderValue::from_static(KEEPALIVE_PING));
    }
    let offered = features::sanitize(&cfg.features);
    if !offered.is_empty() {
        let v = HeaderValue::from_str(&offered.join(","))
            .map_err(|e| ConnectError::Invalid(format!("header {}: {e}", features::HEADER)))?;
        headers.insert(features::HEADER, v);
    }
    HeaderValue::from_str(&cfg.server)
        .map_err(|e| ConnectError::Invalid(format!("server address {:?}: {e}", cfg.server)))?;
    Ok((path, headers))
}

/// TLS and the WebSocket upgrade over a connected transport.
async fn upgrade<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    cfg: &ClientConfig,
    request: (String, HeaderMap),
    tls: Arc<rustls::ClientConfig>,
    server_name: rustls::pki_types::ServerName<'static>,
    tcp: S,
    local_addr: std::net::SocketAddr,
    remote_addr: std::net::SocketAddr,
) -> Result<Connection, ConnectError> {
    let addr = cfg.server.clone();
    let tls = tlsio::connect(tcp, tls, server_name)
        .await
        .map_err(|source| ConnectError::Tls { addr: addr.clone(), source })?;
    let cert = tls.peer_identity();
    let resumed = tls.common().handshake_kind() == Some(rustls::HandshakeKind::Resumed);

    let mut tls = tls;
    let (path, headers) = request;
    let (resp, tail) = wsframe::upgrade_client(&mut tls, &cfg.server, &path, &headers).await.map_err(|reason| {
        ConnectError::Handshake { protocol: crate::Protocol::WebSocket, addr: addr.clone(), reason }
    })?;
    let info = PeerInfo {
        node_id: Text::from(cfg.node_id.clone()),
        project_id: Text::from(cfg.project_id.clone()),
        cert,
        remote_addr,
        local_addr,
        protocol: Protocol::WebSocket,
        resumed,
        ping_keepalive: cfg.ping_keepalive
            && resp.get(HEADER_KEEPALIVE).is_some_and(|v| v.as_bytes() == KEEPALIVE_PING.as_bytes()),
        // Only what was offered counts, whatever the server answers.
        features: features::agree(
            &resp.get(features::HEADER).and_then(|v| v.to_str().ok()).map(features::parse).unwrap_or_default(),
            &features::sanitize(&cfg.features),
        ),
    };
    Ok(spawn_ws(tls, tail, info, cfg.conn.clone(), true))
}

/// The host part of `host:port` or `[v6]:port`.
pub(crate) fn host_of(server: &str) -> Option<String> {
    if let Some(rest) = server.strip_prefix('[') {
        return rest.split_once(']').map(|(h, _)| h.to_owned());
    }
    let (host, _port) = server.rsplit_once(':')?;
    (!host.is_empty()).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parsing() {
        assert_eq!(host_of("127.0.0.1:10000").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_of("cloud.example:10000").as_deref(), Some("cloud.example"));
        assert_eq!(host_of("[::1]:10000").as_deref(), Some("::1"));
        assert_eq!(host_of("nohost"), None);
    }

    fn req(headers: &[(&str, &str)]) -> Request<()> {
        let mut b = http::Request::builder().uri("/p/n/events");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn header_checks() {
        // Go canonicalises header names; matching is case-insensitive.
        let ok = req(&[("Node_id", "edge-1"), ("Project_id", "p"), ("Connectionuse", "msg")]);
        assert_eq!(check_headers(&ok).unwrap(), (Text::from("edge-1"), Text::from("p")));
        assert!(check_headers(&req(&[("node_id", "e")])).unwrap_err().contains("missing ConnectionUse"));
        assert!(
            check_headers(&req(&[("node_id", "e"), ("ConnectionUse", "str")])).unwrap_err().contains("not supported")
        );
        assert!(check_headers(&req(&[("ConnectionUse", "msg")])).unwrap_err().contains("missing node_id"));
        assert!(
            check_headers(&req(&[("node_id", "a/b"), ("ConnectionUse", "msg")]))
                .unwrap_err()
                .contains("invalid node_id")
        );
    }
}
