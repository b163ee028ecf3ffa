//! The server type shared by both transports: accepted connections, counters,
//! and closing.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc;
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
    pub(crate) stats: std::sync::Arc<ServerStats>,
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

/// Hands a connection that completed its handshake to `accept`, or drops it
/// (logged and counted) when the queue is full or the server is closed.
pub(crate) fn hand_over(out: &mpsc::Sender<Connection>, conn: Connection, stats: &ServerStats) {
    match out.try_send(conn) {
        Ok(()) => {
            stats.accepted.fetch_add(1, Ordering::Relaxed);
        }
        Err(mpsc::error::TrySendError::Full(c) | mpsc::error::TrySendError::Closed(c)) => {
            stats.refused_busy.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(remote = %c.peer().remote_addr, node = %c.peer().node_id, "accept queue full or server closed; connection dropped");
            c.tx.close();
        }
    }
}
