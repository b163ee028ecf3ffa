//! Unary gRPC over a unix socket, both ends, on hyper's HTTP/2: the
//! [`Channel`] client (edged's CRI, the edge calling a device mapper, a
//! mapper calling the edge) and the [`Server`] (the edge's DMI socket, a
//! mapper's own socket).
//!
//! Only what these local sockets need: unary calls, no compression, no TLS
//! (the socket's file mode is the access control). Written by hand rather
//! than with tonic to keep protoc and tonic's dependency tree out of the
//! edge's binary (BENCHMARKS.md, "The edge agent"); the messages are
//! declared with `prost` derive next to their users.
//!
//! **Architecture Invariant:** this crate knows HTTP/2 framing and gRPC's
//! status rules, nothing of CRI, DMI or beehive.

mod client;
mod server;

pub use client::{Channel, GrpcError};
pub use server::{BoundServer, Server, Status};

/// Largest message accepted by default, either way (gRPC's own default
/// receive limit is 4 MiB; a list of a node's containers or devices is far
/// smaller than this).
pub const MAX_MESSAGE: usize = 16 << 20;

/// gRPC status codes (`google.golang.org/grpc/codes`).
pub mod code {
    /// Success.
    pub const OK: u32 = 0;
    /// The call was cancelled (the server is shutting down).
    pub const CANCELLED: u32 = 1;
    /// Unknown error (what grpc-go answers for a plain Go error).
    pub const UNKNOWN: u32 = 2;
    /// The request is not acceptable.
    pub const INVALID_ARGUMENT: u32 = 3;
    /// The deadline passed.
    pub const DEADLINE_EXCEEDED: u32 = 4;
    /// The object does not exist.
    pub const NOT_FOUND: u32 = 5;
    /// The object exists already.
    pub const ALREADY_EXISTS: u32 = 6;
    /// Too many requests, or a message over the size limit.
    pub const RESOURCE_EXHAUSTED: u32 = 8;
    /// The system is not in a state for the operation.
    pub const FAILED_PRECONDITION: u32 = 9;
    /// The method is not implemented (or unknown).
    pub const UNIMPLEMENTED: u32 = 12;
    /// The request could not be decoded, or the server failed.
    pub const INTERNAL: u32 = 13;
    /// The service is not available now (try again).
    pub const UNAVAILABLE: u32 = 14;
}
