//! The listener: TLS with optional client certificates, HTTP/1.1, and the
//! bounds (connections, handshake time, header size, request time).
//!
//! A connection is *pending* from accept until its first request's head has
//! arrived (TLS, then the head: nothing before it says who is asking), and
//! must get there within [`JoinConfig::handshake_timeout`]. Open connections
//! are kept in viaduct's [`ConnectionTable`], a plain table that decides
//! without I/O which one to close when a new connection arrives at a limit:
//! the source's oldest pending connection when the source has
//! [`JoinConfig::max_pending_handshakes_per_source`] pending, otherwise the
//! oldest pending connection of all when [`JoinConfig::max_connections`] are
//! open. Only when every open connection is past its handshake (serving a
//! request) is a new one refused. So idle connections, from one address or
//! many, cannot lock a joining edge out.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use edgehive_credentials::Credentials;
use edgehive_viaduct::admission::{self, Admission, ConnectionTable, LogThrottle};
use http::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::handler::{ClientIdentity, JoinState, client_identity, handle};
use crate::{JoinConfig, JoinError, JoinStats};

/// Most headers in one request.
const MAX_HEADERS: usize = 64;
/// How long connections still open at shutdown get to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How often, at most, evictions, handshake timeouts and refusals are logged
/// at `warn` (each one is logged at `debug` and counted in [`JoinStats`]).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// A bound join server; [`JoinServer::serve`] runs it.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use edgehive_join::{JoinConfig, JoinServer};
///
/// use edgehive_store::{BackendConfig, Store, StoreConfig};
/// let path = "/var/lib/edgehive/state.db".into();
/// let store = Store::open(StoreConfig::new(BackendConfig::Sqlite { path, fsync: true })).await?;
/// let ca = Arc::new(edgehive_pki::Ca::load_or_create("/var/lib/edgehive/pki".as_ref(), "edgehive-ca")?);
/// let serving = ca.issue_server("edgehive-cloudhub", &["cloud.example.com".into()], edgehive_pki::LEAF_VALIDITY)?;
/// let credentials = Arc::new(edgehive_credentials::Credentials::new(store, ca));
/// let config = JoinConfig::new("0.0.0.0:10002".parse()?);
/// let server = JoinServer::bind(config, credentials, (vec![serving.cert_der], serving.key_der)).await?;
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
    shared: Arc<JoinState>,
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
    /// present a certificate; one that does not verify against the CA of
    /// `credentials` fails the handshake, and one that does (and that the
    /// credentials still accept) is how a node renews without a token.
    /// Tokens are accepted, and issued certificates recorded, by
    /// `credentials`.
    pub async fn bind(
        config: JoinConfig,
        credentials: Arc<Credentials>,
        serving: (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>),
    ) -> Result<JoinServer, JoinError> {
        config.check()?;
        let ca = credentials.ca();
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
        let shared = Arc::new(JoinState { credentials, ca_der, config, stats: Arc::new(JoinStats::default()) });
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
        let intake = Intake::new(&shared);
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
            // At a limit, the oldest pending connection is closed instead;
            // refused only when none is pending.
            let Some(ticket) = intake.admit(remote) else { continue };
            let _ = tcp.set_nodelay(true);
            let conn_id = ids.fetch_add(1, Ordering::Relaxed);
            let span = tracing::debug_span!("join_conn", conn_id, %remote);
            let (acceptor, shared, cancel) = (acceptor.clone(), Arc::clone(&shared), cancel.clone());
            tracker.spawn(
                async move {
                    serve_connection(tcp, remote, acceptor, shared, cancel, Arc::new(ticket)).await;
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

/// Serves one connection: the handshake (TLS and the first request's head)
/// under its deadline and open to eviction, then requests until the client
/// closes, a request times out, or the server shuts down.
async fn serve_connection(
    tcp: TcpStream,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    shared: Arc<JoinState>,
    cancel: CancellationToken,
    ticket: Arc<Ticket>,
) {
    let deadline = Instant::now() + shared.config.handshake_timeout;
    let evicted = ticket.evicted.clone();
    let tls = tokio::select! {
        biased;
        () = evicted.cancelled() => {
            tracing::debug!(%remote, "pending connection evicted to make room; closed");
            return;
        }
        () = cancel.cancelled() => return,
        accepted = tokio::time::timeout_at(deadline, acceptor.accept(tcp)) => match accepted {
            Ok(Ok(tls)) => tls,
            Ok(Err(error)) => {
                shared.stats.count_handshake_failed();
                tracing::info!(%remote, %error, "TLS handshake failed");
                return;
            }
            Err(_) => {
                ticket.intake.timed_out(remote, "TLS handshake");
                return;
            }
        },
    };
    let client: Arc<ClientIdentity> =
        Arc::new(tls.get_ref().1.peer_certificates().and_then(|chain| chain.first()).map(|cert| client_identity(cert)));
    let service_shared = Arc::clone(&shared);
    let service_ticket = Arc::clone(&ticket);
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        // A request's head has arrived: the handshake is over.
        service_ticket.establish();
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
    let handshake_deadline = tokio::time::sleep_until(deadline);
    tokio::pin!(handshake_deadline);
    loop {
        let pending = !ticket.is_established();
        tokio::select! {
            biased;
            () = evicted.cancelled(), if pending => {
                tracing::debug!(%remote, "pending connection evicted to make room; closed");
                return;
            }
            () = &mut handshake_deadline, if pending => {
                if ticket.is_established() {
                    continue;
                }
                ticket.intake.timed_out(remote, "first request");
                return;
            }
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%remote, %error, "connection ended with an error");
                }
                return;
            }
            () = cancel.cancelled() => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
                return;
            }
        }
    }
}

/// The limit that made room, by its name in logs and in the metrics'
/// `limit` label: the table's total is [`JoinConfig::max_connections`].
fn limit_label(limit: admission::Limit) -> &'static str {
    match limit {
        admission::Limit::Source => "source",
        admission::Limit::Total => "connections",
    }
}

/// A pending connection's entry: where it came from and how to close it.
#[derive(Debug)]
struct Victim {
    remote: SocketAddr,
    cancel: CancellationToken,
}

/// The table and the log throttles, behind one lock held only for table
/// operations (never across an `.await`).
#[derive(Debug)]
struct IntakeState {
    table: ConnectionTable<Victim>,
    evictions: LogThrottle,
    timeouts: LogThrottle,
    refusals: LogThrottle,
}

impl IntakeState {
    fn publish(&self, stats: &JoinStats) {
        stats.set_connections(self.table.len(), self.table.pending_len());
    }
}

/// Admission of connections: the table shared by the accept loop and the
/// connection tasks.
#[derive(Debug, Clone)]
struct Intake {
    state: Arc<Mutex<IntakeState>>,
    stats: Arc<JoinStats>,
    limit: usize,
    deadline: Duration,
}

fn lock(state: &Mutex<IntakeState>) -> MutexGuard<'_, IntakeState> {
    // Every table operation completes before anything can panic, so a
    // poisoned lock still guards a consistent table.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Intake {
    fn new(shared: &JoinState) -> Intake {
        let config = &shared.config;
        let state = IntakeState {
            table: ConnectionTable::new(config.max_connections, config.max_pending_handshakes_per_source),
            evictions: LogThrottle::new(WARN_EVERY),
            timeouts: LogThrottle::new(WARN_EVERY),
            refusals: LogThrottle::new(WARN_EVERY),
        };
        Intake {
            state: Arc::new(Mutex::new(state)),
            stats: Arc::clone(&shared.stats),
            limit: config.max_connections,
            deadline: config.handshake_timeout,
        }
    }

    /// Admits a connection from `remote`, closing the pending connection the
    /// table names to make room; `None` (counted, logged) when refused.
    fn admit(&self, remote: SocketAddr) -> Option<Ticket> {
        let cancel = CancellationToken::new();
        let mut state = lock(&self.state);
        let admission = state.table.admit(remote.ip(), Victim { remote, cancel: cancel.clone() });
        state.publish(&self.stats);
        let (id, evicted) = match admission {
            Admission::Admitted { id, evicted } => (id, evicted),
            Admission::Full => {
                self.stats.count_connection_refused();
                tracing::debug!(%remote, limit = self.limit, "every connection is serving a request; closing");
                if let Some(refused) = state.refusals.event(Instant::now()) {
                    tracing::warn!(refused, %remote, limit = self.limit, "connection limit reached with every connection serving a request; closing new ones");
                }
                return None;
            }
        };
        if let Some((victim, limit)) = evicted {
            victim.cancel.cancel();
            self.stats.count_handshake_evicted(limit);
            let limit = limit_label(limit);
            tracing::debug!(remote = %victim.remote, limit, new = %remote, "pending connection evicted to make room");
            if let Some(evicted) = state.evictions.event(Instant::now()) {
                tracing::warn!(
                    evicted,
                    limit,
                    %remote,
                    pending = state.table.pending_len(),
                    "connections pending at their limit; closing the oldest (a flood of idle connections?)"
                );
            }
        }
        drop(state);
        Some(Ticket { id, evicted: cancel, established: AtomicBool::new(false), intake: self.clone() })
    }

    /// Counts and logs a connection closed at the handshake deadline.
    fn timed_out(&self, remote: SocketAddr, waiting_for: &'static str) {
        self.stats.count_handshake_timed_out();
        tracing::debug!(%remote, waiting_for, deadline = ?self.deadline, "handshake timed out; closing");
        if let Some(timeouts) = lock(&self.state).timeouts.event(Instant::now()) {
            tracing::warn!(timeouts, %remote, waiting_for, deadline = ?self.deadline, "handshakes timed out; connections closed");
        }
    }
}

/// One admitted connection: its eviction token, and its entry in the table,
/// removed when this is dropped.
#[derive(Debug)]
struct Ticket {
    id: u64,
    evicted: CancellationToken,
    established: AtomicBool,
    intake: Intake,
}

impl Ticket {
    /// Ends the handshake: from now on the connection is never evicted.
    fn establish(&self) {
        if self.established.load(Ordering::Relaxed) {
            return;
        }
        let mut state = lock(&self.intake.state);
        if state.table.establish(self.id) {
            self.established.store(true, Ordering::Relaxed);
            state.publish(&self.intake.stats);
        }
    }

    fn is_established(&self) -> bool {
        self.established.load(Ordering::Relaxed)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = lock(&self.intake.state);
        state.table.remove(self.id);
        state.publish(&self.intake.stats);
    }
}
