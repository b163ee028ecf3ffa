//! The join server: how a new edge node gets the cloud's CA certificate and
//! its own client certificate, speaking the HTTPS API of KubeEdge's CloudHub
//! (port 10002) that EdgeCore v1.15 and later call.
//!
//! - `GET /ca.crt` answers the CA certificate, DER, to anyone. The node
//!   checks it against the hash in its join token before trusting it.
//! - `GET /edge.crt` (KubeEdge sends a GET with a body; POST is accepted
//!   too) takes a DER PKCS#10 CSR of at most 1 MiB and the `NodeName`
//!   header, and answers a certificate for the CSR's key with the subject
//!   `CN=system:node:{NodeName}, O=system:nodes`, whatever the CSR asked
//!   for. The node proves who it is with `Authorization: Bearer {jwt}`, the
//!   JWT part of a join token ([`edgehive_pki::issue_token`]) that the
//!   cloud still has a record of and that does not take over a registered
//!   node holding a valid certificate
//!   ([`edgehive_credentials::Credentials::authorize_join`]), or, to renew,
//!   with a client certificate of this CA for the same node that the cloud
//!   has not revoked or replaced. Every certificate issued is recorded
//!   before it is sent.
//! - Everything else is 404 (unknown path) or 405 (wrong method).
//!
//! Every refusal has a one-line plain-text body a person can act on, is
//! logged with the node, the remote address and the reason, and is counted
//! ([`JoinStats`], exported with [`JoinStats::register`]).
//!
//! Before a request says who is asking, connections are bounded: TLS and
//! the first request's head must arrive within
//! [`JoinConfig::handshake_timeout`] (5 s), and a new connection that finds
//! [`JoinConfig::max_connections`] open, or its source with
//! [`JoinConfig::max_pending_handshakes_per_source`] connections in their
//! handshake, closes the oldest such connection (of all, or of that source)
//! instead of being refused; evictions and timeouts are counted in
//! [`JoinStats`].
//!
//! Unlike KubeEdge, a CSR that cannot be signed is a 400 with the reason
//! (KubeEdge v1.15 answers 200 with an empty body), a join token that does
//! not verify or has no record is a 401 (KubeEdge: 400), and a token that
//! would take over a registered node, or a revoked node's certificate, is a
//! 403 saying what an admin can do.
//!
//! **Architecture Invariant:** this crate serves and signs. It knows nothing
//! of sessions or nodes' objects; who may have a certificate is decided by
//! `edgehive-credentials`, which also records what was issued.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//!
//! use edgehive_credentials::{Credentials, TokenSpec};
//! use edgehive_store::{BackendConfig, Store, StoreConfig};
//!
//! let store = Store::open(StoreConfig::new(BackendConfig::Sqlite { path: "/var/lib/edgehive/state.db".into(), fsync: true })).await?;
//! let ca = Arc::new(edgehive_pki::Ca::load_or_create("/var/lib/edgehive/pki".as_ref(), "edgehive-ca")?);
//! let serving = edgehive_pki::load_or_issue_server(
//!     "/var/lib/edgehive/pki".as_ref(), &ca, "cloudhub", "edgehive-cloudhub", &["cloud.example.com".into()])?;
//! let credentials = Arc::new(Credentials::new(store, ca));
//! let config = edgehive_join::JoinConfig::new(([0, 0, 0, 0], edgehive_join::DEFAULT_PORT).into());
//! let spec = TokenSpec { ttl: edgehive_pki::TOKEN_VALIDITY, description: "line 3".into(), rejoin_nodes: vec![] };
//! let (token, _record) = credentials.create_token(&spec, time::OffsetDateTime::now_utc()).await?;
//! let server = edgehive_join::JoinServer::bind(config, credentials, (vec![serving.cert_der], serving.key_der)).await?;
//! println!("keadm join --token {token}");
//! server.serve(tokio_util::sync::CancellationToken::new()).await;
//! # Ok(())
//! # }
//! ```

mod handler;
mod headers;
mod server;
mod stats;

use std::net::SocketAddr;
use std::time::Duration;

pub use server::JoinServer;
pub use stats::{JoinStats, RefusalReason};

/// KubeEdge's port for this server.
pub const DEFAULT_PORT: u16 = 10002;

/// How to run the join server. [`JoinConfig::new`] gives the defaults.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JoinConfig {
    /// Listen address.
    pub bind: SocketAddr,
    /// Validity of the node certificates issued: 90 days (KubeEdge's
    /// `edgeCertSigningDuration` is 365 days). Edges renew at 70–90 % of
    /// it; a shorter life bounds what a copied certificate is worth.
    pub cert_validity: Duration,
    /// Largest request body read: 1 MiB (KubeEdge's `MaxRespBodyLength`).
    /// The CA then refuses CSRs over [`edgehive_pki::CSR_SIZE_LIMIT`]
    /// (64 KiB); both are answered 413.
    pub max_csr_bytes: usize,
    /// Time for a request to arrive whole (headers and body): 30 s.
    pub request_timeout: Duration,
    /// Time from accept for the TLS handshake and the first request's head:
    /// 5 s. A TLS 1.3 handshake and a request are three round trips, so this
    /// leaves room for a 1 s round trip and a retransmission; it is also how
    /// long a connection that never sends a byte holds a slot when the
    /// server is not under pressure.
    pub handshake_timeout: Duration,
    /// Connections open at once: 1,024. When all are open, a new connection
    /// closes the oldest one still in its handshake (TLS and the first
    /// request's head) to make room; it is refused only when every open
    /// connection is serving a request.
    pub max_connections: usize,
    /// Connections still in their handshake from one source (an IPv4
    /// address, or an IPv6 /64) at once: 64. A new connection from a source
    /// at this limit closes that source's oldest pending one, so one source
    /// cannot evict everyone else's handshakes. Edges join rarely, one
    /// connection each, so 64 leaves room for a whole site joining at once
    /// through one NAT address.
    pub max_pending_handshakes_per_source: usize,
    /// Largest request head (request line and headers): 16 KiB.
    pub max_header_bytes: usize,
}

impl JoinConfig {
    /// The defaults, listening on `bind`.
    pub fn new(bind: SocketAddr) -> JoinConfig {
        JoinConfig {
            bind,
            cert_validity: Duration::from_secs(90 * 24 * 3600),
            max_csr_bytes: 1 << 20,
            request_timeout: Duration::from_secs(30),
            handshake_timeout: Duration::from_secs(5),
            max_connections: 1024,
            max_pending_handshakes_per_source: 64,
            max_header_bytes: 16 << 10,
        }
    }

    fn check(&self) -> Result<(), JoinError> {
        let invalid = |field: &'static str, reason: &'static str| Err(JoinError::Config { field, reason });
        if self.max_connections == 0 {
            return invalid("max_connections", "must be at least 1");
        }
        if self.max_pending_handshakes_per_source == 0 {
            return invalid("max_pending_handshakes_per_source", "must be at least 1");
        }
        if self.max_csr_bytes == 0 {
            return invalid("max_csr_bytes", "must be at least 1");
        }
        if self.max_header_bytes < 1024 {
            return invalid("max_header_bytes", "must be at least 1024");
        }
        if self.cert_validity.is_zero() || self.request_timeout.is_zero() || self.handshake_timeout.is_zero() {
            return invalid("cert_validity, request_timeout, handshake_timeout", "must be more than zero");
        }
        Ok(())
    }
}

/// Why the join server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JoinError {
    /// A configuration value is out of range.
    #[error("configure join server: {field} {reason}")]
    Config {
        /// The field of [`JoinConfig`].
        field: &'static str,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The serving certificate, its key or the CA certificate is unusable
    /// for TLS.
    #[error("configure join server TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The client certificate verifier could not be built from the CA.
    #[error("configure join server client verification: {0}")]
    Verifier(String),
    /// The listen address could not be bound.
    #[error("listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}
