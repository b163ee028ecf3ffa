//! The cloud's versioned object store: Kubernetes object semantics over an
//! embedded SQLite file (the default) or an etcd cluster, with watches that
//! stay cheap at thousands of watchers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), edgehive_store::StoreError> {
//! use edgehive_store::{BackendConfig, Store, StoreConfig, resources::CONFIGMAPS};
//! let store = Store::open(StoreConfig::new(BackendConfig::Sqlite {
//!     path: "/var/lib/edgehive/state.db".into(),
//!     fsync: true,
//! }))
//! .await?;
//! let cm = serde_json::json!({"metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}});
//! let created = store.create(&CONFIGMAPS, cm).await?;
//! assert!(created.rev() > 0);
//! store.close().await;
//! # Ok(()) }
//! ```

mod backend;
mod error;
pub mod informer;
mod object;
pub mod objectsync;
mod pointform;
mod reaper;
pub mod resources;
pub mod selector;
mod store;
mod uuid;
pub mod watch;

pub use backend::{BackendConfig, prefix_end};
pub use error::{Result, StoreError};
pub use object::{Object, encode_for_storage, now_rfc3339, parse_rfc3339, rfc3339, set_resource_version};
pub use store::{
    DeleteOptions, DeleteOutcome, FOREGROUND_FINALIZER, ListOptions, ListResult, ORPHAN_FINALIZER, Propagation, Store,
    StoreConfig, WatchOptions, WatchStart, generate_name,
};
pub use watch::{EventType, Watch, WatchCache, WatchCacheStats, WatchEnd, WatchEvent, WatchFilter};
