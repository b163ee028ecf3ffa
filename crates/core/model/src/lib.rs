//! The KubeEdge beehive message model: `Message`, its wire-exact JSON, the
//! well-known strings and typed resource paths.
//!
//! **Architecture Invariant:** this crate does no I/O and knows no async runtime;
//! it depends on no other crate of the workspace. Everything that moves messages
//! (beehive, viaduct) builds on it.

pub mod constants;
mod content;
mod error;
pub mod event_correlator;
mod id;
pub mod inventory;
pub mod json;
mod message;
pub mod resource;
pub mod session;
mod text;
pub mod timestamp;

pub use constants::{group, op, resource_type, source, well_known};
pub use content::Content;
pub use error::{ContentError, DecodeError, DecodeErrorKind, ResourceError};
pub use id::new_msg_id;
pub use message::{Message, MessageHeader, MessageParts, MessageRoute, now_millis};
pub use resource::{NodeResource, ResourcePath};
pub use text::Text;
