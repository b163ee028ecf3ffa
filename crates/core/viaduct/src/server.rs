//! The server type shared by both transports: accepted connections, counters,
//! and closing.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::conn::{Connection, Protocol};
use crate::error::ConnectError;

/// Counters of a server, for logs and metrics.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections handed to `accept`.
    pub accepted: AtomicU64,
    /// TLS handshakes that failed (no, foreign or expired certificate, ...).
    pub tls_failures: AtomicU64,
    /// Upgrades refused (bad headers, not WebSocket, bad QUIC header frame).
    pub upgrade_failures: AtomicU64,
    /// Handshakes that did not finish in time.
    pub handshake_timeouts: AtomicU64,
    /// Connections refused because too many handshakes were in progress or
    /// the accept queue was full.
    pub refused_busy: AtomicU64,
}

/// A listening server, WebSocket or QUIC.
#[derive(Debug)]
pub struct Server {
    pub(crate) protocol: Protocol,
    pub(crate) local_addr: SocketAddr,
    pub(crate) accepted: mpsc::Receiver<Connection>,
    pub(crate) cancel: CancellationToken,
    pub(crate) stats: Arc<ServerStats>,
    pub(crate) quic: Option<quinn::Endpoint>,
}

impl Server {
    /// Binds a KubeEdge-compatible WebSocket server (TCP).
    pub async fn bind_ws(cfg: ServerConfig) -> Result<Server, ConnectError> {
        crate::ws::bind(cfg).await
    }

    /// Binds a QUIC server (UDP).
    pub async fn bind_quic(cfg: ServerConfig) -> Result<Server, ConnectError> {
        crate::quic::bind(cfg).await
    }

    /// The transport.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The next connection that completed its handshake; `None` after `close`.
    pub async fn accept(&mut self) -> Option<Connection> {
        self.accepted.recv().await
    }

    /// Counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// Stops accepting. Established connections are not affected.
    pub fn close(&self) {
        self.cancel.cancel();
        if let Some(ep) = &self.quic {
            ep.set_server_config(None);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What an accept loop needs to run handshakes: the limit on handshakes in
/// progress, their deadline, the counters and the queue `accept` reads.
#[derive(Clone)]
pub(crate) struct Intake {
    out: mpsc::Sender<Connection>,
    pub(crate) stats: Arc<ServerStats>,
    handshakes: Arc<Semaphore>,
    deadline: Duration,
}

/// Makes the `Server` handle and the `Intake` its accept loop uses.
pub(crate) fn new_server(
    protocol: Protocol,
    local_addr: SocketAddr,
    cfg: &ServerConfig,
    quic: Option<quinn::Endpoint>,
) -> (Server, Intake) {
    let (out, accepted) = mpsc::channel(cfg.accept_queue.max(1));
    let stats = Arc::new(ServerStats::default());
    let intake = Intake {
        out,
        stats: stats.clone(),
        handshakes: Arc::new(Semaphore::new(cfg.max_pending_handshakes.max(1))),
        deadline: cfg.handshake_timeout,
    };
    tracing::info!(addr = %local_addr, ?protocol, "server listening");
    (Server { protocol, local_addr, accepted, cancel: CancellationToken::new(), stats, quic }, intake)
}

impl Intake {
    /// A slot for one more handshake, or `None` (counted and logged) when too
    /// many are in progress.
    pub(crate) fn permit(&self, remote: SocketAddr) -> Option<OwnedSemaphorePermit> {
        let permit = self.handshakes.clone().try_acquire_owned().ok();
        if permit.is_none() {
            self.stats.refused_busy.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%remote, "too many handshakes in progress; connection refused");
        }
        permit
    }

    /// Runs a handshake in its own task under the deadline, and hands the
    /// connection it yields to `accept`.
    pub(crate) fn spawn(
        &self,
        permit: OwnedSemaphorePermit,
        remote: SocketAddr,
        handshake: impl Future<Output = Option<Connection>> + Send + 'static,
    ) {
        let intake = self.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(intake.deadline, handshake).await {
                Err(_) => {
                    intake.stats.handshake_timeouts.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%remote, deadline = ?intake.deadline, "handshake did not finish in time; connection dropped");
                }
                Ok(None) => {}
                Ok(Some(conn)) => intake.hand_over(conn),
            }
        });
    }

    /// Hands a connection to `accept`, or drops it (logged and counted) when
    /// the queue is full or the server is closed.
    fn hand_over(&self, conn: Connection) {
        match self.out.try_send(conn) {
            Ok(()) => {
                self.stats.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(mpsc::error::TrySendError::Full(c) | mpsc::error::TrySendError::Closed(c)) => {
                self.stats.refused_busy.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(remote = %c.peer().remote_addr, node = %c.peer().node_id, "accept queue full or server closed; connection dropped");
                c.tx.close();
            }
        }
    }
}
