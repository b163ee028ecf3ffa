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
//! **Architecture Invariant:** viaduct knows nothing of beehive or of either
//! side; cloudhub and edgehub adapt one to the other.

mod config;
mod conn;
mod error;
pub mod quic;
mod server;
mod tls;
pub mod ws;

pub use config::{ClientConfig, ClientTls, ConnConfig, Identity, ServerConfig, ServerTls};
pub use conn::{ConnRx, ConnTx, Connection, PeerInfo, Protocol};
pub use error::{CloseReason, ConnectError, RequestError, WriteError};
pub use server::{Server, ServerStats};
pub use tls::CertIdentity;
