//! KubeEdge's stream tunnel, served by the cloud: what lets a stock
//! KubeEdge EdgeCore with `edgeStream` enabled answer `kubectl logs`,
//! `exec`, `attach` and `top` of its pods (docs/protocol.md §10).
//!
//! An EdgeCore's EdgeStream dials `wss://{cloud}:10004/v1/kubeedge/connect`
//! with its node certificate and the header `SessionHostNameOverride`
//! (its node). [`TunnelServer`] accepts that tunnel when the certificate
//! is that node's (server.rs). The API server then reaches the node's pods
//! through [`Tunnels::open`]: it gets an edgehive stream session
//! ([`edgehive_viaduct::Stream`]) whose other end a bridge answers exactly
//! as an edgehive edge's `SessionServer` would, translating to KubeEdge's
//! connect messages and DATA bytes (bridge.rs, edged.rs):
//!
//! ```text
//! API server ── Stream (pair) ── bridge ── tunnel (message.rs over frames.rs) ── EdgeStream ── edged :10350
//! ```
//!
//! `kubectl top` and `nodes/{name}/proxy` go as METRIC_CONNECT (the edge
//! GETs a path of its kubelet API and relays the body). Port forwarding is
//! not carried: KubeEdge's tunnel has no message for it.
//!
//! **Architecture Invariant:** the tunnel knows the API server only by the
//! session protocol (`edgehive_model::session`); the binary adapts its
//! [`OpenError`] to the API's errors.

mod bridge;
pub mod edged;
mod frames;
pub mod message;
mod metrics;
mod server;
mod tunnel;

pub use metrics::TunnelMetrics;
pub use server::{
    CONNECT_PATH, DEFAULT_PORT, HEADER_HOSTNAME, HEADER_INTERNAL_IP, TunnelConfig, TunnelError, TunnelServer,
};
pub use tunnel::{OpenError, Tunnels};
