//! MetaManager: the edge's durable local copy of what the cloud gave it, the
//! answer to every local query (also with the cloud gone: edge autonomy),
//! and — until edged runs pods — the node's own registration, status and
//! lease ([`NodeAgent`]).
//!
//! **Architecture Invariant:** MetaManager reaches the cloud only through
//! EdgeHub (module `websocket`) and ACKs a change only after its commit.

mod db;
mod manager;
mod node;

pub use db::{DbError, Listing, MetaDb, Op};
pub use manager::{MODULE, MetaConfig, MetaManager, MetaMetrics};
pub use node::{HostInfo, MODULE as NODE_AGENT, NodeAgent, NodeAgentConfig};
