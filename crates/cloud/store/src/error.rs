//! The store's errors: one variant per case a caller (the API server, the
//! cloud modules) must tell apart.

use std::fmt;

/// What went wrong in a store operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The object does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// Resource (plural, with group for non-core types: `pods`, `devices.devices.kubeedge.io`).
        resource: String,
        /// Object name.
        name: String,
    },
    /// An object with this name exists already.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// Resource.
        resource: String,
        /// Object name.
        name: String,
    },
    /// A precondition (resourceVersion, uid) did not hold.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {reason}")]
    Conflict {
        /// Resource.
        resource: String,
        /// Object name.
        name: String,
        /// Why, in Kubernetes' words.
        reason: String,
    },
    /// The requested revision is older than the oldest one kept.
    #[error("{0}")]
    Expired(String),
    /// A request that cannot be served as asked (bad continue token, unsupported selector field).
    #[error("{0}")]
    BadRequest(String),
    /// The object is larger than the store accepts.
    #[error("object {key} is {size} bytes, over the store's limit of {limit} bytes")]
    TooLarge {
        /// Storage key.
        key: String,
        /// Encoded size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A stored row could not be decoded.
    #[error("stored object {key} is corrupt: {reason}")]
    Corrupt {
        /// Storage key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The backend did not answer in time.
    #[error("store timed out: {0}")]
    Timeout(String),
    /// The store is shutting down or its backend is gone.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Any other backend failure (I/O, SQLite, etcd).
    #[error("store backend: {0}")]
    Backend(String),
}

impl StoreError {
    pub(crate) fn backend(context: &str, err: impl fmt::Display) -> StoreError {
        StoreError::Backend(format!("{context}: {err}"))
    }
}

/// Result alias.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
