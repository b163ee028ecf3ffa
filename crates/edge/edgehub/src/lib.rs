//! EdgeHub: the edge's link to the cloud.
//!
//! - [`certs`]: join with a token (CA pinned by the token's hash, CSR signed
//!   by the cloud), load at later starts, renew over mutual TLS at 70–90 % of
//!   the certificate's lifetime.
//! - [`EdgeHub`]: the beehive module `websocket` (group `hub`). It connects
//!   over WebSocket or QUIC, trying the configured endpoints in turn with
//!   exponential backoff and full jitter ([`Backoff`]); sends a keepalive at
//!   once and every heartbeat; routes downstream messages by group as
//!   KubeEdge does (answers to pending requests go to their waiter); writes
//!   upstream messages through a token bucket ([`RateLimiter`]); while
//!   disconnected keeps status reports per object ([`Outbox`]) and refuses
//!   requests with "not connected".
//!
//! **Architecture Invariant:** edgehub is the only edge module that touches
//! the network; the others reach the cloud by sending to `websocket`.

mod backoff;
pub mod certs;
mod files;
mod https;
mod hub;
mod limiter;
mod metrics;
mod outbox;
mod unanswered;

pub use backoff::Backoff;
pub use certs::{CertError, CertFiles, EdgeCerts};
pub use files::create_private_dir;
pub use hub::{CloudEndpoint, DELIVERY_DEADLINE, EdgeHub, EdgeHubConfig, EdgeLink, LocalSide, MODULE, Transport};
pub use limiter::RateLimiter;
pub use metrics::EdgeHubMetrics;
pub use outbox::{Outbox, Refused, coalesce_key};

/// MetaManager's module name: EdgeHub hands it what the cloud sends.
pub const METAMANAGER: &str = edgehive_model::source::METAMANAGER;
