//! Storage backends: a revisioned key-value store with compare-and-swap
//! writes, snapshot range reads and an ordered change feed. SQLite (the
//! embedded default) and etcd implement the same operations; the Kubernetes
//! semantics live above them, in [`crate::Store`].
//!
//! Every change gets its own revision, strictly increasing across all keys.
//! Each backend delivers its changes, in revision order and without gaps, to
//! the [`ChangeFeed`] it is given (the store connects it to its watch cache);
//! backends know nothing of watches, nor of what a success point means (the
//! SQLite backend's compact points take a [`points::PointCodec`]).

pub(crate) mod etcd;
pub(crate) mod points;
pub(crate) mod sqlite;

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;

/// Where a backend delivers what happened to its keys, in revision order
/// and without gaps.
pub(crate) trait ChangeFeed: Send + Sync {
    /// At open: the changes kept since revision `base`, up to `rev`.
    fn prime(&self, base: u64, rev: u64, changes: Vec<Change>);
    /// Changes just committed (or observed), in order.
    fn publish(&self, changes: Vec<Change>);
    /// Nothing changed up to `rev`.
    fn progress(&self, rev: u64);
    /// The feed lost track (the backend's history was compacted past it):
    /// start again at `rev`.
    fn reset(&self, rev: u64, reason: &str);
}

/// A key with its value and the revision that last changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyValue {
    /// Storage key.
    pub(crate) key: String,
    /// Stored bytes.
    pub(crate) value: Bytes,
    /// Revision of the last change.
    pub(crate) mod_rev: u64,
}

/// One change, as a backend reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// The revision of this change.
    pub(crate) rev: u64,
    /// The key.
    pub(crate) key: String,
    /// The value after the change; `None` for a delete.
    pub(crate) value: Option<Bytes>,
    /// The value before the change; `None` for a create.
    pub(crate) prev: Option<KeyValue>,
}

/// A page of a range read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Page {
    /// Keys in order.
    pub(crate) items: Vec<KeyValue>,
    /// The revision the page was read at.
    pub(crate) rev: u64,
    /// More keys follow in the range.
    pub(crate) more: bool,
}

/// Why a compare-and-swap write did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WriteError {
    /// Create of a key that exists.
    Exists,
    /// The key does not exist.
    Missing,
    /// The key's revision is not the expected one; its current state.
    Stale(KeyValue),
    /// Anything else.
    Failed(crate::StoreError),
}

impl From<crate::StoreError> for WriteError {
    fn from(e: crate::StoreError) -> Self {
        WriteError::Failed(e)
    }
}

/// What a read-modify-write does with a key, given its current bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Merged {
    /// Store these bytes (create or update).
    Put(Bytes),
    /// Remove the key.
    Delete,
    /// Leave it as it is (no revision is used).
    Keep,
}

/// The function of a read-modify-write: the current bytes (`None`: no such
/// key) to what to do. It may be called again if another writer got there
/// first (etcd).
pub(crate) type MergeFn = Box<dyn Fn(Option<&[u8]>) -> Merged + Send + Sync>;

/// Read-modify-writes of one key retried on conflicts (etcd), at most.
const MERGE_ATTEMPTS: usize = 16;
/// etcd read-modify-writes in flight.
const MERGE_CONCURRENCY: usize = 32;

/// How to open a backend.
#[derive(Debug, Clone)]
pub enum BackendConfig {
    /// One SQLite file (WAL).
    Sqlite {
        /// Database file.
        path: std::path::PathBuf,
        /// `PRAGMA synchronous=FULL` (fsync every commit; survives power loss),
        /// or NORMAL (survives a process crash, kill -9 included).
        fsync: bool,
    },
    /// An etcd cluster, v3 API over its JSON gateway.
    Etcd {
        /// Client URLs (`http://127.0.0.1:2379`), tried in turn.
        endpoints: Vec<String>,
    },
}

/// An open backend.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    Sqlite(Arc<sqlite::Sqlite>),
    Etcd(Arc<etcd::Etcd>),
}

macro_rules! dispatch {
    ($self:ident, $b:ident => $e:expr) => {
        match $self {
            Backend::Sqlite($b) => $e,
            Backend::Etcd($b) => $e,
        }
    };
}

impl Backend {
    /// Opens the backend and starts delivering its changes to `feed`;
    /// success points are kept compact with `codec` where the backend can.
    pub(crate) async fn open(
        config: &BackendConfig,
        feed: Arc<dyn ChangeFeed>,
        codec: Arc<dyn points::PointCodec>,
    ) -> Result<Backend> {
        Ok(match config {
            BackendConfig::Sqlite { path, fsync } => {
                Backend::Sqlite(sqlite::Sqlite::open(path, *fsync, feed, codec).await?)
            }
            BackendConfig::Etcd { endpoints } => Backend::Etcd(etcd::Etcd::open(endpoints, feed).await?),
        })
    }

    pub(crate) async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        dispatch!(self, b => b.get(key).await)
    }

    /// Keys in `[start, end)` in order, at most `limit` (0 = all), read at
    /// revision `at` (`None` = now).
    pub(crate) async fn range(&self, start: &str, end: &str, limit: usize, at: Option<u64>) -> Result<Page> {
        dispatch!(self, b => b.range(start, end, limit, at).await)
    }

    pub(crate) async fn create(&self, key: &str, value: Bytes) -> Result<u64, WriteError> {
        dispatch!(self, b => b.create(key, value).await)
    }

    pub(crate) async fn update(&self, key: &str, value: Bytes, expected_rev: u64) -> Result<u64, WriteError> {
        dispatch!(self, b => b.update(key, value, expected_rev).await)
    }

    /// Deletes `key` if its revision is `expected_rev` (any when `None`);
    /// returns the deletion's revision and the last value.
    pub(crate) async fn delete(&self, key: &str, expected_rev: Option<u64>) -> Result<(u64, KeyValue), WriteError> {
        dispatch!(self, b => b.delete(key, expected_rev).await)
    }

    /// Read-modify-writes many keys: per key, the revision written (`None`
    /// when it was left as it was). SQLite applies them all in one
    /// transaction of its writer; etcd does each as a get and a
    /// compare-and-swap, retried on conflicts.
    pub(crate) async fn merge_many(&self, items: Vec<(String, MergeFn)>) -> Vec<Result<Option<u64>, WriteError>> {
        match self {
            Backend::Sqlite(b) => b.merge_many(items).await,
            Backend::Etcd(_) => {
                let mut out = Vec::with_capacity(items.len());
                for chunk in items.chunks(MERGE_CONCURRENCY) {
                    let merged = chunk.iter().map(|(key, f)| self.merge_one(key, f));
                    out.extend(futures_util::future::join_all(merged).await);
                }
                out
            }
        }
    }

    /// One read-modify-write by compare-and-swap.
    async fn merge_one(&self, key: &str, f: &MergeFn) -> Result<Option<u64>, WriteError> {
        for _ in 0..MERGE_ATTEMPTS {
            let cur = self.get(key).await?;
            let written = match (f(cur.as_ref().map(|kv| &kv.value[..])), cur) {
                (Merged::Keep, _) | (Merged::Delete, None) => return Ok(None),
                (Merged::Put(v), None) => self.create(key, v).await,
                (Merged::Put(v), Some(c)) => self.update(key, v, c.mod_rev).await,
                (Merged::Delete, Some(c)) => self.delete(key, Some(c.mod_rev)).await.map(|(rev, _)| rev),
            };
            match written {
                Ok(rev) => return Ok(Some(rev)),
                Err(WriteError::Exists | WriteError::Missing | WriteError::Stale(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(WriteError::Failed(crate::StoreError::Timeout(format!("{key}: too many conflicting writers"))))
    }

    pub(crate) async fn current_rev(&self) -> Result<u64> {
        dispatch!(self, b => b.current_rev().await)
    }

    /// Forgets history at and below `rev`.
    pub(crate) async fn compact(&self, rev: u64) -> Result<()> {
        dispatch!(self, b => b.compact(rev).await)
    }

    /// Stops the change feed and closes files and connections.
    pub(crate) async fn close(&self) {
        dispatch!(self, b => b.close().await)
    }
}

/// The exclusive end of the range of keys starting with `prefix`.
pub fn prefix_end(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    while let Some(last) = bytes.pop() {
        if last < 0x7f {
            bytes.push(last + 1);
            return String::from_utf8(bytes).unwrap_or_default();
        }
    }
    String::new()
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefix_end_is_the_next_prefix() {
        assert_eq!(super::prefix_end("/registry/pods/"), "/registry/pods0");
        assert_eq!(super::prefix_end("a"), "b");
    }
}
