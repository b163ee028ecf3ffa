//! The edge's local store: one SQLite database (WAL) with KubeEdge's `meta`
//! table — `key` (the wire resource, e.g. `default/pod/nginx`), `type` (the
//! resource type) and `value` (the object's JSON).
//!
//! Writes come in batches, one transaction each, committed with
//! `synchronous=FULL`: when [`MetaDb::apply`] returns, the batch survives a
//! power cut. MetaManager sends an ACK only after that.
//!
//! At open the database is checked (`PRAGMA quick_check`). One that fails —
//! a damaged page, a file that is not a database — is moved aside to
//! `{path}.damaged-{unix seconds}` (with its `-wal` and `-shm`) and an empty
//! store takes its place ([`MetaDb::open_or_rebuild`]); the cloud refills
//! it from the inventory the edge sends (docs/protocol.md, "Inventory").
//! Any other failure (permissions, a full disk) is an error: a store is
//! never set aside for what is not damage.
//!
//! The database holds the node's Secrets: it is created 0600 (SQLite gives
//! its `-wal` and `-shm` the same mode), and at open a database file others
//! may read is tightened with a warning (see `edgehive_files::make_private_database`).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use edgehive_model::inventory::Item;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension as _, params};

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite said no.
    #[error("{path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database file could not be made private.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The database failed its integrity check.
    #[error("{path} failed its integrity check: {reason}")]
    Damaged {
        /// The database file.
        path: PathBuf,
        /// What the check found (its first findings).
        reason: String,
    },
    /// A row is damaged (its value is not JSON).
    #[error("row {key:?} is damaged: {reason}")]
    Corrupt {
        /// The row's key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl DbError {
    /// Whether this says the database file itself is damaged (rather than
    /// unreachable: permissions, a full disk, a lock).
    pub fn is_damage(&self) -> bool {
        match self {
            DbError::Damaged { .. } => true,
            DbError::Sqlite { source: rusqlite::Error::SqliteFailure(e, _), .. } => {
                matches!(e.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            }
            _ => false,
        }
    }
}

/// A store that failed its check at open and was replaced by an empty one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    /// Where the damaged database now is.
    pub moved_to: PathBuf,
    /// What was wrong with it.
    pub reason: String,
}

/// One change of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace `key`, unless the stored object has a newer
    /// `metadata.resourceVersion` than this one.
    Put {
        /// The wire resource.
        key: String,
        /// The resource type.
        resource_type: String,
        /// The object's JSON.
        value: String,
    },
    /// Insert or replace `key` only while `owner` is stored: a pod's status
    /// lives beside its pod, and a report that arrives after the pod's
    /// delete leaves no row behind.
    PutOwned {
        /// The wire resource.
        key: String,
        /// The resource type.
        resource_type: String,
        /// The object's JSON.
        value: String,
        /// The row that must exist (`{ns}/pod/{name}`).
        owner: String,
    },
    /// Remove `key` — when `uid` is given, only if the stored object is that
    /// one (a delete of an object since replaced under the same name must
    /// not remove the new one).
    Delete {
        /// The wire resource.
        key: String,
        /// The uid the delete names.
        uid: Option<String>,
    },
    /// Remove `key` if `owner` is no longer stored (a pod's status rows go
    /// with their pod, not with a delete that did not remove it).
    DeleteOrphan {
        /// The wire resource.
        key: String,
        /// The row whose absence removes this one.
        owner: String,
    },
}

/// What a listing found.
#[derive(Debug, Default)]
pub struct Listing {
    /// `(key, value)` of every readable row.
    pub rows: Vec<(String, String)>,
    /// Keys of damaged rows, skipped.
    pub corrupt: Vec<(String, String)>,
}

/// The edge's `meta` table.
#[derive(Debug)]
pub struct MetaDb {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// `metadata.uid` of a stored object.
fn object_uid(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.pointer("/metadata/uid")?.as_str().filter(|u| !u.is_empty()).map(str::to_owned)
}

fn resource_version(json: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.pointer("/metadata/resourceVersion")?.as_str()?.parse().ok()
}

/// A row's value as text that parses as JSON, or why not.
fn readable(value: ValueRef<'_>) -> Result<String, String> {
    let text = match value {
        ValueRef::Text(t) => std::str::from_utf8(t).map_err(|e| format!("value is not UTF-8: {e}"))?,
        ValueRef::Null => return Err("value is NULL".into()),
        other => return Err(format!("value is {:?}, not text", other.data_type())),
    };
    serde_json::from_str::<&serde_json::value::RawValue>(text).map_err(|e| format!("value is not JSON: {e}"))?;
    Ok(text.to_owned())
}

impl MetaDb {
    /// Opens (or creates) the database at `path`, private to this user.
    pub fn open(path: &Path) -> Result<MetaDb, DbError> {
        edgehive_files::make_private_database(path, "the edge store")
            .map_err(|source| DbError::Io { path: path.to_owned(), source })?;
        let err = |source| DbError::Sqlite { path: path.to_owned(), source };
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             CREATE TABLE IF NOT EXISTS meta (
                 key   TEXT PRIMARY KEY NOT NULL,
                 type  TEXT NOT NULL,
                 value TEXT
             );
             CREATE INDEX IF NOT EXISTS meta_type ON meta(type);",
        )
        .map_err(err)?;
        Ok(MetaDb { path: path.to_owned(), conn: Mutex::new(conn) })
    }

    /// Opens the database at `path` and checks it; one that is damaged is
    /// moved aside and replaced by an empty store, which the caller learns
    /// from the [`Rebuilt`]. Anything but damage is an error.
    pub fn open_or_rebuild(path: &Path) -> Result<(MetaDb, Option<Rebuilt>), DbError> {
        let checked = MetaDb::open(path).and_then(|db| db.check().map(|()| db));
        match checked {
            Ok(db) => Ok((db, None)),
            Err(e) if e.is_damage() => {
                let reason = e.to_string();
                let moved_to = set_aside(path).map_err(|source| DbError::Io { path: path.to_owned(), source })?;
                tracing::error!(db = %path.display(), moved_to = %moved_to.display(), %reason,
                    "the edge store is damaged: set aside, starting from an empty store that the cloud refills");
                let db = MetaDb::open(path)?;
                Ok((db, Some(Rebuilt { moved_to, reason })))
            }
            Err(e) => Err(e),
        }
    }

    /// SQLite's `quick_check` of the store's file (`main`): the b-trees,
    /// records and indexes are sound. Only `main`: checking the connection's
    /// empty `temp` schema too would give it a page cache (~90 KiB of heap
    /// held for the life of the connection) and check nothing of ours.
    pub fn check(&self) -> Result<(), DbError> {
        let conn = self.conn();
        let mut stmt = conn.prepare("PRAGMA main.quick_check(5)").map_err(|e| self.err(e))?;
        let findings: Vec<String> =
            stmt.query_map([], |r| r.get::<_, String>(0)).and_then(Iterator::collect).map_err(|e| self.err(e))?;
        if findings.len() == 1 && findings[0] == "ok" {
            return Ok(());
        }
        Err(DbError::Damaged { path: self.path.clone(), reason: findings.join("; ") })
    }

    /// Key, uid and resourceVersion of every stored row of `types`, at most
    /// `max` (`None` when there are more). A damaged row is listed with no
    /// uid, so that the cloud sends it again.
    pub fn inventory(&self, types: &[&str], max: usize) -> Result<Option<Vec<Item>>, DbError> {
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Meta {
            uid: String,
            resource_version: String,
        }
        #[derive(serde::Deserialize)]
        struct Obj {
            #[serde(default)]
            metadata: Meta,
        }
        let conn = self.conn();
        let placeholders = vec!["?"; types.len()].join(",");
        let mut stmt = conn
            .prepare(&format!("SELECT key, value FROM meta WHERE type IN ({placeholders}) ORDER BY key"))
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query(rusqlite::params_from_iter(types)).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            if out.len() == max {
                return Ok(None);
            }
            let key = match row.get_ref(0).map_err(|e| self.err(e))? {
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                _ => continue,
            };
            let meta = readable(row.get_ref(1).map_err(|e| self.err(e))?)
                .ok()
                .and_then(|v| serde_json::from_str::<Obj>(&v).ok())
                .map(|o| o.metadata)
                .unwrap_or_default();
            out.push(Item { key, uid: meta.uid, resource_version: meta.resource_version });
        }
        Ok(Some(out))
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn err(&self, source: rusqlite::Error) -> DbError {
        DbError::Sqlite { path: self.path.clone(), source }
    }

    /// Applies a batch in one durable transaction. Returns, per op, whether
    /// it changed anything (a put older than the stored object does not).
    pub fn apply(&self, ops: &[Op]) -> Result<Vec<bool>, DbError> {
        let mut conn = self.conn();
        // IMMEDIATE: the write lock is taken at BEGIN, where the busy
        // timeout applies. A deferred transaction that reads first would
        // fail at once with SQLITE_BUSY when the other module's connection
        // (MetaManager and DeviceTwin share the file) wrote meanwhile.
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(|e| self.err(e))?;
        let mut changed = Vec::with_capacity(ops.len());
        {
            let mut get = tx.prepare_cached("SELECT value FROM meta WHERE key = ?1").map_err(|e| self.err(e))?;
            let mut put = tx
                .prepare_cached("INSERT OR REPLACE INTO meta (key, type, value) VALUES (?1, ?2, ?3)")
                .map_err(|e| self.err(e))?;
            let mut del = tx.prepare_cached("DELETE FROM meta WHERE key = ?1").map_err(|e| self.err(e))?;
            for op in ops {
                match op {
                    Op::Put { key, resource_type, value } => {
                        let stored: Option<Option<String>> = get
                            .query_row([key], |r| r.get::<_, Option<String>>(0))
                            .optional()
                            .map_err(|e| self.err(e))?;
                        let newer_stored =
                            match (stored.flatten().as_deref().and_then(resource_version), resource_version(value)) {
                                (Some(have), Some(new)) => have > new,
                                _ => false,
                            };
                        if newer_stored {
                            changed.push(false);
                        } else {
                            put.execute(params![key, resource_type, value]).map_err(|e| self.err(e))?;
                            changed.push(true);
                        }
                    }
                    Op::PutOwned { key, resource_type, value, owner } => {
                        let owned = get.exists([owner]).map_err(|e| self.err(e))?;
                        if owned {
                            put.execute(params![key, resource_type, value]).map_err(|e| self.err(e))?;
                        }
                        changed.push(owned);
                    }
                    Op::Delete { key, uid } => {
                        let stored: Option<Option<String>> = get
                            .query_row([key], |r| r.get::<_, Option<String>>(0))
                            .optional()
                            .map_err(|e| self.err(e))?;
                        let other = match (uid, stored.flatten().as_deref().and_then(object_uid)) {
                            (Some(wanted), Some(have)) => *wanted != have,
                            _ => false,
                        };
                        if other {
                            changed.push(false);
                        } else {
                            changed.push(del.execute([key]).map_err(|e| self.err(e))? > 0);
                        }
                    }
                    Op::DeleteOrphan { key, owner } => {
                        let orphan = !get.exists([owner]).map_err(|e| self.err(e))?;
                        changed.push(orphan && del.execute([key]).map_err(|e| self.err(e))? > 0);
                    }
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(changed)
    }

    /// The value stored at `key`. A damaged row is an error naming the key.
    pub fn get(&self, key: &str) -> Result<Option<String>, DbError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached("SELECT value FROM meta WHERE key = ?1").map_err(|e| self.err(e))?;
        let mut rows = stmt.query([key]).map_err(|e| self.err(e))?;
        let Some(row) = rows.next().map_err(|e| self.err(e))? else { return Ok(None) };
        let value = row.get_ref(0).map_err(|e| self.err(e))?;
        readable(value).map(Some).map_err(|reason| DbError::Corrupt { key: key.to_owned(), reason })
    }

    /// Every row of a resource type, damaged ones set aside.
    pub fn list_type(&self, resource_type: &str) -> Result<Listing, DbError> {
        self.list("SELECT key, value FROM meta WHERE type = ?1 ORDER BY key", Some(resource_type))
    }

    /// Every row, damaged ones set aside.
    pub fn list_all(&self) -> Result<Listing, DbError> {
        self.list("SELECT key, value FROM meta ORDER BY key", None)
    }

    fn list(&self, sql: &str, arg: Option<&str>) -> Result<Listing, DbError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(sql).map_err(|e| self.err(e))?;
        let mut rows = match arg {
            Some(a) => stmt.query([a]),
            None => stmt.query([]),
        }
        .map_err(|e| self.err(e))?;
        let mut out = Listing::default();
        while let Some(row) = rows.next().map_err(|e| self.err(e))? {
            let key = match row.get_ref(0).map_err(|e| self.err(e))? {
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                other => format!("{other:?}"),
            };
            match readable(row.get_ref(1).map_err(|e| self.err(e))?) {
                Ok(v) => out.rows.push((key, v)),
                Err(reason) => {
                    tracing::warn!(key = %key, %reason, "damaged row in the edge store; skipped");
                    out.corrupt.push((key, reason));
                }
            }
        }
        Ok(out)
    }

    /// Removes the status rows (`podstatus`, `podpatch`) of pods no longer
    /// stored — what versions that kept them after the pod's delete left.
    /// Returns how many went.
    pub fn remove_orphan_status(&self) -> Result<usize, DbError> {
        // Keys are `{ns}/{type}/{name}`; neither part holds a `/`.
        self.conn()
            .execute(
                "DELETE FROM meta WHERE type IN ('podstatus', 'podpatch')
                   AND substr(key, 1, instr(key, '/')) || 'pod/' || substr(key, instr(key, '/') + length(type) + 2)
                       NOT IN (SELECT key FROM meta WHERE type = 'pod')",
                [],
            )
            .map_err(|e| self.err(e))
    }

    /// Rows stored.
    pub fn count(&self) -> Result<u64, DbError> {
        let n: i64 = self.conn().query_row("SELECT COUNT(*) FROM meta", [], |r| r.get(0)).map_err(|e| self.err(e))?;
        Ok(n.unsigned_abs())
    }
}

/// Moves a damaged database and its `-wal` and `-shm` to
/// `{path}.damaged-{unix seconds}[-n]`; returns the new path.
fn set_aside(path: &Path) -> std::io::Result<PathBuf> {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".damaged-{secs}"));
    let mut target = PathBuf::from(&name);
    let mut n = 1;
    while target.exists() {
        let mut next = name.clone();
        next.push(format!("-{n}"));
        target = PathBuf::from(next);
        n += 1;
    }
    std::fs::rename(path, &target)?;
    for suffix in ["-wal", "-shm"] {
        let mut from = path.as_os_str().to_owned();
        from.push(suffix);
        let mut to = target.as_os_str().to_owned();
        to.push(suffix);
        match std::fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::PermissionsExt as _;

    use edgehive_files::database_files;
    use edgehive_testkit::umask::{in_child_with_umask_022, mode};

    const UMASK_CHILD: &str = "EDGEHIVE_METADB_UMASK_CHILD";

    #[test]
    fn a_new_database_and_its_wal_and_shm_are_private() {
        if !in_child_with_umask_022(UMASK_CHILD, "db::tests::a_new_database_and_its_wal_and_shm_are_private") {
            return;
        }
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-modes");
        let path = dir.path().join("edgecore.db");
        let db = MetaDb::open(&path).unwrap();
        db.apply(&[put("default/secret/s", "secret", r#"{"data":{"k":"dg=="}}"#)]).unwrap();
        // While the database is open after a write, SQLite keeps its -wal and -shm.
        for file in database_files(&path) {
            assert_eq!(mode(&file), "0600", "{}", file.display());
        }
    }

    #[test]
    fn an_existing_database_others_can_read_is_tightened() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-modes");
        let path = dir.path().join("edgecore.db");
        MetaDb::open(&path).unwrap().apply(&[put("default/secret/s", "secret", "{}")]).unwrap();
        // As an older version (or a copy) left it: the database and a
        // leftover -wal and -shm readable by everyone.
        for file in database_files(&path) {
            std::fs::OpenOptions::new().create(true).append(true).open(&file).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let db = MetaDb::open(&path).unwrap();
        for file in database_files(&path) {
            assert_eq!(mode(&file), "0600", "{}", file.display());
        }
        // A directory the store did not create is reported, not changed.
        assert_eq!(mode(dir.path()), "0755");
        assert_eq!(db.get("default/secret/s").unwrap().as_deref(), Some("{}"), "the data is intact");
    }

    fn put(key: &str, ty: &str, value: &str) -> Op {
        Op::Put { key: key.into(), resource_type: ty.into(), value: value.into() }
    }

    #[test]
    fn a_delete_naming_another_uid_leaves_the_new_object_and_its_status() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-uid");
        let db = MetaDb::open(&dir.path().join("edgecore.db")).unwrap();
        let pod = r#"{"metadata":{"name":"p","uid":"new"}}"#;
        db.apply(&[put("default/pod/p", "pod", pod), put("default/podstatus/p", "podstatus", "{}")]).unwrap();
        let status_orphan = || Op::DeleteOrphan { key: "default/podstatus/p".into(), owner: "default/pod/p".into() };
        // A late delete of the pod it replaced.
        let stale = Op::Delete { key: "default/pod/p".into(), uid: Some("old".into()) };
        assert_eq!(db.apply(&[stale, status_orphan()]).unwrap(), [false, false]);
        assert!(db.get("default/pod/p").unwrap().is_some() && db.get("default/podstatus/p").unwrap().is_some());
        let current = Op::Delete { key: "default/pod/p".into(), uid: Some("new".into()) };
        assert_eq!(db.apply(&[current, status_orphan()]).unwrap(), [true, true]);
        assert!(db.get("default/pod/p").unwrap().is_none() && db.get("default/podstatus/p").unwrap().is_none());
    }

    #[test]
    fn batches_apply_and_older_versions_do_not_overwrite() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb");
        let db = MetaDb::open(&dir.path().join("edge.db")).unwrap();
        let v = |rv: &str| format!(r#"{{"metadata":{{"name":"a","resourceVersion":"{rv}"}}}}"#);
        assert_eq!(
            db.apply(&[put("default/pod/a", "pod", &v("5")), put("default/pod/b", "pod", "{}")]).unwrap(),
            [true, true]
        );
        assert_eq!(db.apply(&[put("default/pod/a", "pod", &v("4"))]).unwrap(), [false]);
        assert!(db.get("default/pod/a").unwrap().unwrap().contains("\"5\""));
        assert_eq!(db.apply(&[put("default/pod/a", "pod", &v("6"))]).unwrap(), [true]);
        assert_eq!(
            db.apply(&[
                Op::Delete { key: "default/pod/b".into(), uid: None },
                Op::Delete { key: "nope".into(), uid: None }
            ])
            .unwrap(),
            [true, false]
        );
        assert_eq!(db.list_type("pod").unwrap().rows.len(), 1);
        drop(db);
        // Durable across reopen.
        let db = MetaDb::open(&dir.path().join("edge.db")).unwrap();
        assert_eq!(db.count().unwrap(), 1);
    }

    #[test]
    fn status_rows_live_only_beside_their_pod() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-status");
        let db = MetaDb::open(&dir.path().join("edge.db")).unwrap();
        let status = |name: &str| Op::PutOwned {
            key: format!("default/podstatus/{name}"),
            resource_type: "podstatus".into(),
            value: "{}".into(),
            owner: format!("default/pod/{name}"),
        };
        // No pod, no status row.
        assert_eq!(db.apply(&[status("a")]).unwrap(), [false]);
        assert_eq!(db.get("default/podstatus/a").unwrap(), None);
        db.apply(&[put("default/pod/a", "pod", "{}"), status("a")]).unwrap();
        assert_eq!(db.get("default/podstatus/a").unwrap().as_deref(), Some("{}"));
        // Rows an older version left beside no pod go; those of stored pods stay.
        db.apply(&[
            put("default/podstatus/gone", "podstatus", "{}"),
            put("kube-system/podpatch/gone", "podpatch", "{}"),
            put("default/podpatch/a", "podpatch", "{}"),
        ])
        .unwrap();
        assert_eq!(db.remove_orphan_status().unwrap(), 2);
        let keys: Vec<String> = db.list_all().unwrap().rows.into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["default/pod/a", "default/podpatch/a", "default/podstatus/a"]);
    }

    fn filled(path: &Path, n: usize) {
        let db = MetaDb::open(path).unwrap();
        let ops: Vec<Op> = (0..n)
            .map(|i| {
                let v = format!(
                    r#"{{"metadata":{{"name":"p{i}","uid":"u{i}","resourceVersion":"{i}"}},"pad":"{}"}}"#,
                    "x".repeat(200)
                );
                put(&format!("default/pod/p{i}"), "pod", &v)
            })
            .collect();
        db.apply(&ops).unwrap();
    }

    fn overwrite(path: &Path, offset: u64, bytes: &[u8]) {
        use std::io::{Seek as _, SeekFrom, Write as _};
        let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.seek(SeekFrom::Start(offset)).unwrap();
        f.write_all(bytes).unwrap();
    }

    fn damaged_copies(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".damaged-"))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_damaged_page_sets_the_store_aside_and_starts_empty() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-damaged");
        let path = dir.path().join("edgecore.db");
        filled(&path, 300);
        assert!(MetaDb::open_or_rebuild(&path).unwrap().1.is_none(), "a sound store is kept");
        // A page of the table's b-tree overwritten, as a failing disk does.
        overwrite(&path, 3 * 4096, &[0xA5; 4096]);
        let (db, rebuilt) = MetaDb::open_or_rebuild(&path).unwrap();
        let rebuilt = rebuilt.expect("rebuilt");
        assert!(rebuilt.reason.contains("integrity") || rebuilt.reason.contains("malformed"), "{}", rebuilt.reason);
        assert_eq!(db.count().unwrap(), 0, "the new store is empty");
        assert_eq!(damaged_copies(dir.path()), [rebuilt.moved_to.file_name().unwrap().to_string_lossy().into_owned()]);
        assert_eq!(edgehive_testkit::umask::mode(&rebuilt.moved_to), "0600", "the copy holds secrets: still private");
        db.apply(&[put("default/pod/a", "pod", "{}")]).unwrap();
        drop(db);
        assert!(MetaDb::open_or_rebuild(&path).unwrap().1.is_none(), "the new store is sound");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_set_aside_and_an_empty_one_is_not() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-notadb");
        let path = dir.path().join("edgecore.db");
        std::fs::write(&path, vec![0x42; 8192]).unwrap();
        let (db, rebuilt) = MetaDb::open_or_rebuild(&path).unwrap();
        let rebuilt = rebuilt.expect("rebuilt");
        assert!(rebuilt.reason.contains("not a database"), "{}", rebuilt.reason);
        assert_eq!(std::fs::read(&rebuilt.moved_to).unwrap(), vec![0x42; 8192], "the damaged file is kept as it was");
        assert_eq!(db.count().unwrap(), 0);
        // An emptied (zero-length) file is an empty store, not damage: the
        // inventory tells the cloud.
        let empty = dir.path().join("empty.db");
        std::fs::write(&empty, b"").unwrap();
        assert!(MetaDb::open_or_rebuild(&empty).unwrap().1.is_none());
    }

    #[test]
    fn a_store_that_cannot_be_opened_is_an_error_and_is_never_set_aside() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-unreachable");
        // A directory where the file should be: unreachable, not damaged.
        let path = dir.path().join("edgecore.db");
        std::fs::create_dir(&path).unwrap();
        let err = MetaDb::open_or_rebuild(&path).unwrap_err();
        assert!(!err.is_damage(), "{err}");
        assert!(path.is_dir() && damaged_copies(dir.path()).is_empty());
    }

    #[test]
    fn the_inventory_lists_keys_uids_and_versions_of_the_given_types() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb-inventory");
        let path = dir.path().join("edge.db");
        let db = MetaDb::open(&path).unwrap();
        db.apply(&[
            put("default/pod/a", "pod", r#"{"metadata":{"uid":"ua","resourceVersion":"4"}}"#),
            put("default/podstatus/a", "podstatus", "{}"),
            put("default/secret/s", "secret", r#"{"metadata":{"uid":"us"}}"#),
        ])
        .unwrap();
        Connection::open(&path)
            .unwrap()
            .execute("INSERT INTO meta VALUES ('default/configmap/bad', 'configmap', '{not json')", [])
            .unwrap();
        let item = |k: &str, u: &str, rv: &str| Item { key: k.into(), uid: u.into(), resource_version: rv.into() };
        assert_eq!(
            db.inventory(&["pod", "configmap", "secret"], 10).unwrap().unwrap(),
            [
                item("default/configmap/bad", "", ""),
                item("default/pod/a", "ua", "4"),
                item("default/secret/s", "us", "")
            ]
        );
        assert_eq!(db.inventory(&["pod", "configmap", "secret"], 2).unwrap(), None, "more than the bound: none");
    }

    #[test]
    fn a_damaged_row_is_named_and_skipped() {
        let dir = edgehive_testkit::fixtures::TempDir::new("metadb");
        let path = dir.path().join("edge.db");
        let db = MetaDb::open(&path).unwrap();
        db.apply(&[put("default/configmap/good", "configmap", "{\"data\":{}}")]).unwrap();
        {
            let raw = Connection::open(&path).unwrap();
            raw.execute("INSERT INTO meta VALUES ('default/configmap/bad', 'configmap', '{not json')", []).unwrap();
            raw.execute("INSERT INTO meta VALUES ('default/configmap/null', 'configmap', NULL)", []).unwrap();
            raw.execute("INSERT INTO meta VALUES ('default/configmap/blob', 'configmap', x'00ff')", []).unwrap();
        }
        let listing = db.list_type("configmap").unwrap();
        assert_eq!(listing.rows.len(), 1);
        assert_eq!(listing.rows[0].0, "default/configmap/good");
        let bad: Vec<&str> = listing.corrupt.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(bad, ["default/configmap/bad", "default/configmap/blob", "default/configmap/null"]);
        match db.get("default/configmap/bad") {
            Err(DbError::Corrupt { key, reason }) => {
                assert_eq!(key, "default/configmap/bad");
                assert!(reason.contains("not JSON"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // A put over a damaged row repairs it.
        db.apply(&[put("default/configmap/bad", "configmap", "{}")]).unwrap();
        assert_eq!(db.get("default/configmap/bad").unwrap().as_deref(), Some("{}"));
    }
}
