//! viaduct: the cloud–edge transport.
//!
//! A [`Connection`] carries beehive [`Message`](edgehive_model::Message)s
//! between the two sides: a bounded send queue (`try_write` hands the message
//! back when it is full, `write` waits up to the write deadline), a stream of
//! received messages, requests matched to their responses by `parent_msg_id`,
//! and the peer's identity (handshake headers and the verified certificate's
//! subject). The WebSocket transport is byte-compatible with KubeEdge's, with
//! mutual TLS.
//!
//! A [`Server`] bounds handshakes before it knows who is connecting: each
//! must finish within [`ServerConfig::handshake_timeout`] (5 s), and when a
//! new connection finds [`ServerConfig::max_pending_handshakes`] in progress,
//! or its source at [`ServerConfig::max_pending_handshakes_per_source`], the
//! oldest pending handshake (of the server, or of that source) is cancelled
//! to make room instead of the new connection being refused. Evictions,
//! timeouts and refusals are counted in [`ServerStats`]
//! ([`ServerStats::register`] exports them).
//! The table that decides is [`admission::ConnectionTable`], which other
//! servers in front of authentication (the join server) use as well.
//!
//! **Architecture Invariant:** viaduct knows nothing of beehive or of either
//! side; cloudhub and edgehub adapt one to the other.

pub mod admission;
mod config;
mod conn;
mod counted;
mod error;
pub mod features;
pub mod queue;
pub mod quic;
mod server;
pub mod stream;
mod tls;
pub mod tlsio;
pub mod ws;
mod wsframe;

pub use config::{
    ClientConfig, ClientTls, ConnConfig, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_MAX_LAG,
    DEFAULT_MAX_PENDING_HANDSHAKES_PER_SOURCE, Identity, ServerConfig, ServerTls,
};
pub use conn::{ConnRx, ConnTx, Connection, PeerInfo, Protocol};
pub use counted::WireBytes;
pub use error::{CloseReason, ConnectError, RequestError, WriteError};
pub use server::{Server, ServerStats};
pub use stream::{IncomingStreams, Stream, StreamError, StreamRx, StreamStats, StreamTx};
pub use tls::CertIdentity;
