//! The gRPC client edged speaks CRI with: `edgehive-grpc`'s unary client
//! over the runtime's unix socket (shared with the DMI module and the
//! mappers).

pub use edgehive_grpc::{Channel, GrpcError, MAX_MESSAGE, code};
