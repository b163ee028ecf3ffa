//! The tunnel server: TLS with client certificates, the WebSocket upgrade
//! of `GET /v1/kubeedge/connect`, and who may open which node's tunnel.
//!
//! KubeEdge's `TunnelServer` requires a client certificate of the cloud's
//! CA and then believes the `SessionHostNameOverride` header: any edge may
//! claim any node's tunnel. Here the certificate decides, as for CloudHub's
//! connections: a certificate naming its node (`CN=system:node:{name}`)
//! opens that node's tunnel only, and one naming no node (KubeEdge v1.15's
//! `CN=kubeedge.io`) is refused unless the cloud allows such certificates
//! (`require_node_certificate: false`, as CloudHub's option). A certificate
//! the cloud revoked or replaced is refused too (the `Credentials` check
//! CloudHub makes).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use edgehive_credentials::Credentials;
use edgehive_viaduct::admission::{Admission, ConnectionTable};
use edgehive_viaduct::{CertIdentity, ServerTls};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::metrics::TunnelMetrics;
use crate::tunnel::{Registry, Settings, Tunnels};

/// The path EdgeStream dials (`edge/pkg/edgestream/edgestream.go`).
pub const CONNECT_PATH: &str = "/v1/kubeedge/connect";
/// The header naming the edge's node.
pub const HEADER_HOSTNAME: &str = "SessionHostNameOverride";
/// The header with the edge's address.
pub const HEADER_INTERNAL_IP: &str = "SessionInternalIP";
/// KubeEdge's tunnel port (CloudStream's `tunnelPort`).
pub const DEFAULT_PORT: u16 = 10004;
/// Longest wait for the credentials check of a certificate.
const CERTIFICATE_CHECK_DEADLINE: Duration = Duration::from_secs(5);

/// Settings of the tunnel server.
#[derive(Debug, Clone)]
pub struct TunnelConfig {
    /// Where to listen (KubeEdge: port [`DEFAULT_PORT`]).
    pub listen: SocketAddr,
    /// The server's certificate, and the CA edges' certificates chain to.
    pub tls: ServerTls,
    /// Refuse certificates that name no node (`CN=system:node:{name}`).
    pub require_node_certificate: bool,
    /// TLS plus the upgrade request must finish within this.
    pub handshake_timeout: Duration,
    /// Handshakes in progress at once; at the limit the oldest is closed.
    pub max_pending_handshakes: usize,
    /// Handshakes in progress at once from one source.
    pub max_pending_handshakes_per_source: usize,
    /// Nodes with a tunnel at once.
    pub max_tunnels: usize,
    /// Largest WebSocket message from an edge; a larger one closes its
    /// tunnel. KubeEdge's limit: 1 MiB of data ([`crate::message::MAX_MESSAGE`]).
    pub max_message: usize,
    /// Close a tunnel that sends nothing for this long (EdgeStream pings
    /// every 5 s).
    pub idle_timeout: Duration,
    /// Deadline of a write to an edge, and of waiting for room to queue one.
    pub write_timeout: Duration,
    /// How long a session waits for the edge's first answer (below the API
    /// server's 10 s, so that the client learns why).
    pub reply_timeout: Duration,
    /// How long the tunnel waits for a session's reader before ending that
    /// session.
    pub stall_timeout: Duration,
    /// Bytes from the edge one session may hold before its reader takes them.
    pub session_budget: usize,
    /// Sessions open at once through one tunnel.
    pub max_sessions_per_tunnel: usize,
    /// Where the edge is told to send requests: edged's server
    /// ([`crate::edged::EDGED_ADDRESS`]).
    pub edged_address: String,
}

impl TunnelConfig {
    /// Defaults around the given address and TLS material.
    pub fn new(listen: SocketAddr, tls: ServerTls) -> TunnelConfig {
        TunnelConfig {
            listen,
            tls,
            require_node_certificate: true,
            handshake_timeout: edgehive_viaduct::DEFAULT_HANDSHAKE_TIMEOUT,
            max_pending_handshakes: 1024,
            max_pending_handshakes_per_source: edgehive_viaduct::DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE,
            max_tunnels: 10_000,
            max_message: crate::message::MAX_MESSAGE,
            idle_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(15),
            reply_timeout: Duration::from_secs(8),
            stall_timeout: Duration::from_secs(10),
            session_budget: 256 * 1024,
            max_sessions_per_tunnel: 128,
            edged_address: crate::edged::EDGED_ADDRESS.to_owned(),
        }
    }
}

/// Why the tunnel server could not start.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// The TLS configuration is unusable.
    #[error("tunnel TLS configuration: {0}")]
    Tls(String),
    /// The address could not be bound.
    #[error("bind the tunnel server to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

impl TunnelError {
    /// Whether the address is already in use.
    pub fn is_addr_in_use(&self) -> bool {
        matches!(self, TunnelError::Bind { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse)
    }
}

/// The tunnel server: bind, hand out [`Tunnels`], then [`TunnelServer::serve`].
pub struct TunnelServer {
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    /// Pending handshakes at most: overall, and per source.
    pending_limits: (usize, usize),
}

impl std::fmt::Debug for TunnelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelServer").field("addr", &self.local_addr()).finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Shared {
    registry: Arc<Registry>,
    credentials: Option<Arc<Credentials>>,
    require_node_certificate: bool,
    handshake_timeout: Duration,
}

impl TunnelServer {
    /// Builds the TLS configuration (client certificates required, checked
    /// against `config.tls.client_ca` by rustls's WebPKI verifier, as
    /// viaduct's servers do) and binds the listener. With `credentials`,
    /// a certificate must also be one the cloud has not revoked.
    pub async fn bind(
        config: TunnelConfig,
        credentials: Option<Arc<Credentials>>,
    ) -> Result<TunnelServer, TunnelError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in &config.tls.client_ca {
            roots.add(ca.clone()).map_err(|e| TunnelError::Tls(format!("add CA certificate: {e}")))?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .build()
            .map_err(|e| TunnelError::Tls(format!("client verifier: {e}")))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TunnelError::Tls(e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(config.tls.identity.cert_chain.clone(), config.tls.identity.key.clone_key())
            .map_err(|e| TunnelError::Tls(format!("server certificate: {e}")))?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| TunnelError::Bind { addr: config.listen, source })?;
        let settings = Settings {
            edged_address: config.edged_address.clone(),
            max_message: config.max_message,
            idle_timeout: config.idle_timeout,
            write_timeout: config.write_timeout,
            reply_timeout: config.reply_timeout,
            stall_timeout: config.stall_timeout,
            session_budget: config.session_budget.max(crate::tunnel::MIN_COST),
            max_sessions: config.max_sessions_per_tunnel,
        };
        let registry = Arc::new(Registry::new(
            settings,
            Arc::new(TunnelMetrics::default()),
            config.max_tunnels,
            credentials.clone(),
        ));
        let shared = Arc::new(Shared {
            registry,
            credentials,
            require_node_certificate: config.require_node_certificate,
            handshake_timeout: config.handshake_timeout,
        });
        Ok(TunnelServer {
            listener,
            tls: Arc::new(tls),
            shared,
            pending_limits: (config.max_pending_handshakes, config.max_pending_handshakes_per_source),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// The handle that opens sessions through the tunnels.
    pub fn tunnels(&self) -> Tunnels {
        Tunnels { registry: Arc::clone(&self.shared.registry) }
    }

    /// The server's metrics, live.
    pub fn metrics(&self) -> Arc<TunnelMetrics> {
        Arc::clone(&self.shared.registry.metrics)
    }

    /// Serves until `cancel`: then closes every tunnel and returns.
    pub async fn serve(self, cancel: CancellationToken) {
        let TunnelServer { listener, tls, shared, pending_limits: (total, per_source) } = self;
        let table: Arc<Mutex<ConnectionTable<CancellationToken>>> =
            Arc::new(Mutex::new(ConnectionTable::new(total, per_source)));
        let tasks = TaskTracker::new();
        tracing::info!(addr = ?listener.local_addr().ok(), "stream tunnel server listening");
        loop {
            let accepted = tokio::select! {
                () = cancel.cancelled() => break,
                a = listener.accept() => a,
            };
            let (tcp, remote) = match accepted {
                Ok(a) => a,
                Err(error) => {
                    // Out of file descriptors, usually: wait rather than spin.
                    tracing::warn!(%error, "tunnel accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let evicted = CancellationToken::new();
            let admitted = table.lock().unwrap_or_else(PoisonError::into_inner).admit(remote.ip(), evicted.clone());
            let ticket = match admitted {
                Admission::Admitted { id, evicted: victim } => {
                    if let Some((victim, limit)) = victim {
                        tracing::debug!(?limit, "pending tunnel handshake closed to make room");
                        victim.cancel();
                    }
                    id
                }
                Admission::Full => continue,
            };
            let _ = tcp.set_nodelay(true);
            let (tls, shared, cancel, table, tracker) =
                (Arc::clone(&tls), Arc::clone(&shared), cancel.clone(), Arc::clone(&table), tasks.clone());
            let span = tracing::debug_span!("tunnel_conn", %remote);
            tasks.spawn(
                async move {
                    serve_connection(tcp, remote, tls, shared, evicted, cancel, tracker).await;
                    table.lock().unwrap_or_else(PoisonError::into_inner).remove(ticket);
                }
                .instrument(span),
            );
        }
        tasks.close();
        tasks.wait().await;
    }
}

/// One connection: TLS and the upgrade request within the handshake
/// deadline, open to eviction until then; an accepted upgrade goes on as
/// the node's tunnel on its own task.
async fn serve_connection(
    tcp: TcpStream,
    remote: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    shared: Arc<Shared>,
    evicted: CancellationToken,
    cancel: CancellationToken,
    tracker: TaskTracker,
) {
    let deadline = tokio::time::Instant::now() + shared.handshake_timeout;
    let tls = tokio::select! {
        () = evicted.cancelled() => return,
        () = cancel.cancelled() => return,
        r = tokio::time::timeout_at(deadline, edgehive_viaduct::tlsio::accept(tcp, tls)) => match r {
            Ok(Ok(tls)) => tls,
            Ok(Err(error)) => {
                shared.registry.metrics.tls_failures.inc();
                tracing::info!(%remote, %error, "tunnel TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%remote, "tunnel TLS handshake timed out");
                return;
            }
        },
    };
    let identity = tls.peer_identity();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (shared, identity, cancel, tracker) =
            (Arc::clone(&shared), identity.clone(), cancel.clone(), tracker.clone());
        async move { Ok::<_, Infallible>(handle(req, remote, identity.as_ref(), &shared, cancel, tracker).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .max_buf_size(16 * 1024)
        .serve_connection(TokioIo::new(tls), service)
        .with_upgrades();
    tokio::select! {
        () = evicted.cancelled() => {}
        () = tokio::time::sleep_until(deadline) => tracing::debug!(%remote, "tunnel upgrade request timed out"),
        r = conn => {
            if let Err(error) = r {
                tracing::debug!(%remote, %error, "tunnel connection ended with an error");
            }
        }
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    // One request per connection: a refused edge dials again. (Not
    // hyper's keep-alive switch: it would write `Connection: close` over
    // the upgrade's `Connection: Upgrade` too.)
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn has_token(h: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    h.get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Which node a certificate may open the tunnel of, given the node the
/// edge claims; the refusal's status and message otherwise.
pub(crate) fn authorize(
    cert: Option<&CertIdentity>,
    claimed: &str,
    require_node_certificate: bool,
) -> Result<String, (StatusCode, String)> {
    if claimed.is_empty() {
        return Err((StatusCode::BAD_REQUEST, format!("the {HEADER_HOSTNAME} header (the node's name) is missing")));
    }
    let Some(cert) = cert else {
        return Err((StatusCode::FORBIDDEN, "no client certificate".into()));
    };
    match cert.node_name() {
        Some(node) if node == claimed => Ok(node.to_owned()),
        Some(node) => Err((
            StatusCode::FORBIDDEN,
            format!("the client certificate is node {node:?}'s; it may not open the tunnel of node {claimed:?}"),
        )),
        None if require_node_certificate => Err((
            StatusCode::FORBIDDEN,
            format!(
                "the client certificate (CN {:?}) names no node; expected CN system:node:{claimed}",
                cert.common_name.as_deref().unwrap_or_default()
            ),
        )),
        None => Ok(claimed.to_owned()),
    }
}

/// Answers the upgrade request; an accepted one starts the tunnel.
async fn handle(
    mut req: Request<Incoming>,
    remote: SocketAddr,
    identity: Option<&CertIdentity>,
    shared: &Arc<Shared>,
    cancel: CancellationToken,
    tracker: TaskTracker,
) -> Response<Full<Bytes>> {
    let metrics = &shared.registry.metrics;
    let h = req.headers();
    let refuse_request = |status, message: String| {
        metrics.refused_request.inc();
        tracing::info!(%remote, %message, "tunnel request refused");
        text(status, message)
    };
    if req.uri().path().trim_end_matches('/') != CONNECT_PATH {
        return refuse_request(
            StatusCode::NOT_FOUND,
            format!("no tunnel at {}; it is at {CONNECT_PATH}", req.uri().path()),
        );
    }
    if req.method() != http::Method::GET {
        return refuse_request(StatusCode::METHOD_NOT_ALLOWED, "the tunnel is opened with GET".into());
    }
    let key = h.get("sec-websocket-key").cloned();
    if !has_token(h, header::UPGRADE, "websocket")
        || !has_token(h, header::CONNECTION, "upgrade")
        || h.get("sec-websocket-version").and_then(|v| v.to_str().ok()) != Some("13")
        || key.is_none()
    {
        return refuse_request(StatusCode::BAD_REQUEST, "the tunnel is a WebSocket (version 13) upgrade".into());
    }
    let claimed = h.get(HEADER_HOSTNAME).and_then(|v| v.to_str().ok()).unwrap_or_default().trim().to_owned();
    let internal_ip = h
        .get(HEADER_INTERNAL_IP)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| ip_text(remote.ip()));
    let node = match authorize(identity, &claimed, shared.require_node_certificate) {
        Ok(node) => node,
        Err((status, message)) => {
            if status == StatusCode::BAD_REQUEST {
                metrics.refused_request.inc();
            } else {
                metrics.refused_identity.inc();
            }
            let cn = identity.and_then(|c| c.common_name.clone()).unwrap_or_default();
            tracing::warn!(%remote, claimed = %claimed, certificate_cn = %cn, %message, "tunnel refused");
            return text(status, message);
        }
    };
    let serial = identity.map(|c| c.serial.clone()).unwrap_or_default();
    if let Some(credentials) = &shared.credentials {
        let checked =
            tokio::time::timeout(CERTIFICATE_CHECK_DEADLINE, credentials.check_certificate(&node, &serial)).await;
        let refused = match checked {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("the certificate could not be checked within {CERTIFICATE_CHECK_DEADLINE:?}")),
        };
        if let Some(why) = refused {
            metrics.refused_revoked.inc();
            tracing::warn!(node = %node, %remote, %serial, reason = %why, "tunnel refused: certificate not accepted");
            return text(StatusCode::FORBIDDEN, why);
        }
    }
    if !shared.registry.has_room_for(&node) {
        metrics.refused_limit.inc();
        return text(StatusCode::SERVICE_UNAVAILABLE, "the cloud serves no more tunnels".into());
    }
    let accept = derive_accept_key(key.as_ref().map(HeaderValue::as_bytes).unwrap_or_default());
    let upgrade = hyper::upgrade::on(&mut req);
    let registry = Arc::clone(&shared.registry);
    let span = tracing::info_span!("tunnel", node = %node);
    tracker.spawn(
        async move {
            match upgrade.await {
                Ok(upgraded) => registry.run(TokioIo::new(upgraded), node, internal_ip, serial, cancel).await,
                Err(error) => tracing::info!(%error, "tunnel upgrade failed"),
            }
        }
        .instrument(span),
    );
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert("sec-websocket-accept", v);
    }
    r
}

fn ip_text(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or_else(|| v6.to_string(), |v4| v4.to_string()),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cert(cn: &str) -> CertIdentity {
        CertIdentity { common_name: Some(cn.into()), organizations: vec![], serial: "1".into(), not_after: i64::MAX }
    }

    #[test]
    fn a_certificate_opens_only_its_own_nodes_tunnel() {
        let a = cert("system:node:edge-a");
        assert_eq!(authorize(Some(&a), "edge-a", true).unwrap(), "edge-a");
        let (status, message) = authorize(Some(&a), "edge-b", true).unwrap_err();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(message.contains("\"edge-a\"") && message.contains("\"edge-b\""), "{message}");
        assert_eq!(
            authorize(Some(&a), "edge-b", false).unwrap_err().0,
            StatusCode::FORBIDDEN,
            "never, even if allowed"
        );
        assert_eq!(authorize(Some(&a), "", true).unwrap_err().0, StatusCode::BAD_REQUEST);
        assert_eq!(authorize(None, "edge-a", false).unwrap_err().0, StatusCode::FORBIDDEN);
        // KubeEdge v1.15's certificates name no node: only when allowed.
        let unnamed = cert("kubeedge.io");
        assert_eq!(authorize(Some(&unnamed), "edge-a", true).unwrap_err().0, StatusCode::FORBIDDEN);
        assert_eq!(authorize(Some(&unnamed), "edge-a", false).unwrap(), "edge-a");
    }
}
