//! Errors and close reasons of viaduct connections.

use std::fmt;
use std::time::Duration;

use edgehive_model::{Message, Text};
use thiserror::Error;

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// This side closed it (`close()` or shutdown).
    Local,
    /// The peer closed it cleanly.
    PeerClosed,
    /// Nothing arrived within the read deadline.
    ReadTimeout(Duration),
    /// A write did not complete within the write deadline (the peer stopped
    /// reading).
    WriteTimeout(Duration),
    /// A frame over the size limit.
    FrameTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// A frame that is not one JSON-encoded message.
    Malformed(String),
    /// A protocol violation or I/O error on the socket.
    Transport(String),
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Local => f.write_str("closed locally"),
            CloseReason::PeerClosed => f.write_str("closed by peer"),
            CloseReason::ReadTimeout(d) => write!(f, "nothing received for {d:?}"),
            CloseReason::WriteTimeout(d) => write!(f, "write not completed within {d:?}; peer is not reading"),
            CloseReason::FrameTooLarge { limit } => write!(f, "frame exceeds the {limit}-byte limit"),
            CloseReason::Malformed(e) => write!(f, "malformed frame: {e}"),
            CloseReason::Transport(e) => write!(f, "transport error: {e}"),
        }
    }
}

/// Why a write failed; the message is handed back.
#[derive(Debug, Error)]
pub enum WriteError {
    /// The send queue is full (the peer is slow).
    #[error("send queue to {peer} is full")]
    Full {
        /// The peer's node id.
        peer: Text,
        /// The message that was not queued.
        message: Box<Message>,
    },
    /// No room in the send queue before the write deadline.
    #[error("send queue to {peer} stayed full for {after:?}")]
    Timeout {
        /// The peer's node id.
        peer: Text,
        /// The deadline.
        after: Duration,
        /// The message that was not queued.
        message: Box<Message>,
    },
    /// The connection is closed.
    #[error("connection to {peer} is closed")]
    Closed {
        /// The peer's node id.
        peer: Text,
        /// The message that was not queued.
        message: Box<Message>,
    },
}

impl WriteError {
    /// Takes the unsent message back.
    pub fn into_message(self) -> Message {
        match self {
            WriteError::Full { message, .. }
            | WriteError::Timeout { message, .. }
            | WriteError::Closed { message, .. } => *message,
        }
    }
}

/// A request that got no response.
#[derive(Debug, Error)]
pub enum RequestError {
    /// The request could not be queued.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// No response within the deadline.
    #[error("no response to {msg_id} within {after:?}")]
    Timeout {
        /// The request's id.
        msg_id: Text,
        /// The deadline.
        after: Duration,
    },
    /// The connection closed before the response came.
    #[error("connection closed before the response to {msg_id}: {reason}")]
    Closed {
        /// The request's id.
        msg_id: Text,
        /// Why it closed.
        reason: CloseReason,
    },
    /// Another request with the same id is pending.
    #[error("a request with msg_id {0} is already pending")]
    DuplicateId(Text),
}

/// Failures to set up a connection or server.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// Bad TLS material or settings.
    #[error("TLS configuration: {0}")]
    TlsConfig(String),
    /// The address could not be used.
    #[error("{what} {addr}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed.
    #[error("TLS handshake with {addr}: {source}")]
    Tls {
        /// The peer.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The WebSocket upgrade or the QUIC handshake frames failed (or the
    /// server refused them).
    #[error("{} handshake with {addr}: {reason}", match protocol { crate::Protocol::WebSocket => "WebSocket", crate::Protocol::Quic => "QUIC" })]
    Handshake {
        /// The transport.
        protocol: crate::Protocol,
        /// The peer.
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// The whole connect did not finish in time.
    #[error("connect to {addr} did not finish within {after:?}")]
    Timeout {
        /// The peer.
        addr: String,
        /// The deadline.
        after: Duration,
    },
    /// A setting is invalid.
    #[error("invalid setting: {0}")]
    Invalid(String),
}
