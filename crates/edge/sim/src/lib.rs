//! `edgehive sim`: a fleet of simulated edge nodes in one process, to
//! measure a cloud at fleet scale.
//!
//! Each simulated node is a real [`EdgeLink`](edgehive_edgehub::EdgeLink) —
//! the link code `edgehive edge` runs: WebSocket or QUIC with mutual TLS,
//! its own node certificate from the join service, ping or keepalive
//! liveness, the upstream rate limit, the disconnected outbox and the
//! jittered reconnect backoff — attached to a [`node`] that does what
//! MetaManager, the node agent and edged do without a disk or a runtime.
//! So what a run measures is what a fleet of real edges would cause.
//!
//! - [`fleet`]: certificates (joined once, kept on disk), links spread
//!   over several local addresses, the fleet's counters.
//! - [`scenario`]: hold, pods, fanout, storm and churn.
//! - [`api`]: the scenarios' client of the cloud's Kubernetes API.
//! - [`limits`]: the system limits checked before a fleet starts.
//! - [`report`]: percentiles, process samples, the summary table and JSON.
//!
//! **Architecture Invariant:** the simulator depends on no cloud crate: it
//! reaches the cloud only over the wire (viaduct, the join service, the
//! API), as edges and users do.

pub mod api;
pub mod fleet;
pub mod limits;
mod node;
pub mod report;
pub mod scenario;

pub use fleet::{Fleet, FleetConfig, FleetStats};
pub use node::Behaviour;
pub use report::Report;
pub use scenario::{Cloud, RunOptions, Scenario, StormKind, run};

/// Why a simulation could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A setting is wrong.
    #[error("{0}")]
    Config(String),
    /// A system limit stops the run (which one, and what to do).
    #[error("{0}")]
    Limit(String),
    /// A node's certificate could not be loaded or issued.
    #[error("certificate of {0}: {1}")]
    Certs(String, String),
    /// The cloud's API failed a request.
    #[error("API: {0}")]
    Api(String),
    /// A local file or task failed.
    #[error("{0}")]
    Io(String),
    /// The fleet did not get where the scenario needs it in time.
    #[error("incomplete: {0}")]
    Incomplete(String),
}
