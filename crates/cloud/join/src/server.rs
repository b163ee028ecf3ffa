//! The listener: TLS with optional client certificates, HTTP/1.1, and the
//! bounds (connections, handshake time, header size, request time).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use edgehive_pki::Ca;
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::handler::{ClientIdentity, Shared, handle};
use crate::{JoinConfig, JoinError, JoinStats};

/// Most headers in one request.
const MAX_HEADERS: usize = 64;
/// How long connections still open at shutdown get to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A bound join server; [`JoinServer::serve`] runs it.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use edgehive_join::{JoinConfig, JoinServer};
///
/// let ca = Arc::new(edgehive_pki::Ca::load_or_create("/var/lib/edgehive/pki".as_ref(), "edgehive-ca")?);
/// let serving = ca.issue_server("edgehive-cloudhub", &["cloud.example.com".into()], edgehive_pki::LEAF_VALIDITY)?;
/// let config = JoinConfig::new("0.0.0.0:10002".parse()?);
/// let server = JoinServer::bind(config, ca, (vec![serving.cert_der], serving.key_der)).await?;
/// let stats = server.stats();
/// let stop = tokio_util::sync::CancellationToken::new();
/// tokio::spawn(server.serve(stop.clone()));
/// # let _ = stats;
/// # Ok(())
/// # }
/// ```
pub struct JoinServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for JoinServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinServer").field("local_addr", &self.local_addr()).finish_non_exhaustive()
    }
}

impl JoinServer {
    /// Builds the TLS configuration and binds the listener.
    ///
    /// `serving` is the server's certificate chain and key. Clients may
    /// present a certificate; one that does not verify against `ca` fails
    /// the handshake, and one that does is how a node renews without a
    /// token.
    pub async fn bind(
        config: JoinConfig,
        ca: Arc<Ca>,
        serving: (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
    ) -> Result<JoinServer, JoinError> {
        config.check()?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der().clone()).map_err(JoinError::Tls)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
            .allow_unauthenticated()
            .build()
            .map_err(|e| JoinError::Verifier(e.to_string()))?;
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(JoinError::Tls)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(serving.0, serving.1)
            .map_err(JoinError::Tls)?;
        // HTTP/1.1 only: a KubeEdge edge (Go's client) falls back to it.
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];

        let listener =
            TcpListener::bind(config.bind).await.map_err(|source| JoinError::Bind { addr: config.bind, source })?;
        let ca_der = Bytes::copy_from_slice(ca.cert_der());
        let shared = Arc::new(Shared { ca, ca_der, config, stats: Arc::new(JoinStats::default()) });
        Ok(JoinServer { listener, acceptor: TlsAcceptor::from(Arc::new(tls)), shared })
    }

    /// The address the listener is bound to (with the real port when the
    /// configured one was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.shared.config.bind)
    }

    /// The server's counters, live: keep the handle, the server goes into
    /// [`JoinServer::serve`].
    pub fn stats(&self) -> Arc<JoinStats> {
        Arc::clone(&self.shared.stats)
    }

    /// Serves until `cancel` is cancelled, then stops accepting, lets
    /// requests in flight finish for a few seconds, and returns.
    pub async fn serve(self, cancel: CancellationToken) {
        let JoinServer { listener, acceptor, shared } = self;
        let permits = Arc::new(Semaphore::new(shared.config.max_connections));
        let tracker = TaskTracker::new();
        let ids = AtomicU64::new(0);
        let addr = listener.local_addr().ok();
        tracing::info!(addr = ?addr, "join server listening");
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            let (tcp, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, usually: wait rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                shared.stats.count_connection_refused();
                tracing::warn!(%remote, limit = shared.config.max_connections, "connection limit reached; closing");
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let conn_id = ids.fetch_add(1, Ordering::Relaxed);
            let span = tracing::debug_span!("join_conn", conn_id, %remote);
            let (acceptor, shared, cancel) = (acceptor.clone(), Arc::clone(&shared), cancel.clone());
            tracker.spawn(
                async move {
                    let _permit = permit;
                    serve_connection(tcp, remote, acceptor, shared, cancel).await;
                }
                .instrument(span),
            );
        }
        tracker.close();
        if tokio::time::timeout(SHUTDOWN_GRACE + Duration::from_secs(1), tracker.wait()).await.is_err() {
            tracing::warn!("join connections still open after shutdown grace; dropping them");
        }
        tracing::info!("join server stopped");
    }
}

async fn serve_connection(
    tcp: TcpStream,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    shared: Arc<Shared>,
    cancel: CancellationToken,
) {
    let tls = match tokio::time::timeout(shared.config.handshake_timeout, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            shared.stats.count_handshake_failed();
            tracing::info!(%remote, %error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            shared.stats.count_handshake_failed();
            tracing::info!(%remote, "TLS handshake timed out");
            return;
        }
    };
    let client: Arc<ClientIdentity> = Arc::new(
        tls.get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|cert| edgehive_pki::identity_of(cert).map_err(|e| e.to_string())),
    );
    let service_shared = Arc::clone(&shared);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let (shared, client) = (Arc::clone(&service_shared), Arc::clone(&client));
        async move { Ok::<_, Infallible>(handle(&shared, &client, remote, req).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.config.request_timeout)
        .max_header_size(shared.config.max_header_bytes)
        .max_headers(MAX_HEADERS);
    let conn = builder.serve_connection(TokioIo::new(tls), service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%remote, %error, "connection ended with an error");
            }
        }
        _ = cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
        }
    }
}
