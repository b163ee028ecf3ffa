//! CloudHub: the cloud end of every edge's connection.
//!
//! - Sessions ([`CloudHub`]): one per node over viaduct (WebSocket and/or
//!   QUIC), ended when no `keepalive` arrives within the interval, replaced
//!   by a newer connection of the same node, refused with a reason at the
//!   node limit or when the client certificate names another node.
//!   Connections and disconnections are told to the controllers.
//! - Reliable delivery ([`pool`]): each node's ACK-mode messages wait in a
//!   pool keyed by object, so only the latest version of an object is sent,
//!   and nothing the node already acknowledged is sent again; unanswered
//!   messages are resent with the same id. A slow or offline node holds no
//!   one else up: its messages wait in its own bounded queues, and for an
//!   offline node nothing is queued at all.
//! - Success points ([`SuccessPoints`]): what each node acknowledged, kept in
//!   memory and written behind to the store as `ObjectSync` objects.
//! - Stream sessions ([`NodeStreams`]): byte pipes to a connected node over
//!   its own connection (logs, exec, port-forward), opened for the API
//!   server.
//!
//! **Architecture Invariant:** CloudHub knows no Kubernetes semantics beyond
//! an object's uid, kind and resourceVersion. Which objects a node gets, and
//! what its reports mean, is the controllers' business; they reach CloudHub
//! only through beehive messages.

mod hub;
mod metrics;
mod notices;
pub mod points;
pub mod pool;
pub mod rules;
mod session;

pub use hub::{CloudHub, CloudHubConfig, NodeStreams, OpenStreamError};
pub use metrics::HubMetrics;
pub use points::{SuccessPoints, UidKey};
