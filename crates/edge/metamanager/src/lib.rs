//! MetaManager: the edge's durable local copy of what the cloud gave it, and
//! the answer to every local query (also with the cloud gone: edge
//! autonomy).
//!
//! **Architecture Invariant:** MetaManager reaches the cloud only through
//! EdgeHub (module `websocket`) and ACKs a change only after its commit.

mod db;
mod manager;

pub use db::{DbError, Listing, MetaDb, Op, Rebuilt};
pub use manager::{MODULE, MetaConfig, MetaManager, MetaMetrics};
