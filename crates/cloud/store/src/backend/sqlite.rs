//! The embedded backend: one SQLite file in WAL mode.
//!
//! - `kv` holds the current value and revision of every key;
//! - `log` holds one row per revision (key, whether it was a delete, and the
//!   value and revision *before* the change), kept until compaction. From it
//!   a range can be read as it was at an older revision (the state at `R` of
//!   a key changed after `R` is the `prev` of its first change after `R`), and
//!   the watch cache is primed with recent history after a restart;
//! - `meta` holds the current and the compacted revision;
//! - `points` and `atoms` hold success points (ObjectSync and
//!   ClusterObjectSync objects) in a compact form, about 70 bytes each
//!   instead of the JSON's 400 (see [`super::points`]). Their log rows name
//!   them by their `points` key (a BLOB, where other keys are TEXT), and the
//!   creation of a point has no log row: its row's `mod_rev`, or the
//!   `prev_rev` of its next change, says when it was made, which is all
//!   history reads and priming the watch cache need.
//!
//! One writer thread owns the only writing connection and commits writes in
//! groups: it takes every request waiting in its bounded queue, applies them in
//! one transaction (each still gets its own revision), commits once, hands the
//! changes to the watch cache and only then answers the callers. So an acknowledged
//! write is on disk (with `fsync`, also across a power cut) and a watch started
//! after it sees everything up to it. Reads run on a small pool of read-only
//! connections, each range in its own read transaction (a consistent snapshot).
//!
//! The database holds Secrets, so it is private to the store's user: the file
//! (and with it SQLite's `-wal` and `-shm`, which SQLite creates with the
//! database's mode) is 0600, a directory the store creates is 0700, and at
//! open a database file others may read is tightened with a warning (see
//! `edgehive_files::make_private_database`).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::points::{self, Atoms, PointKey};
use super::{Change, ChangeFeed, KeyValue, MergeFn, Merged, Page, WriteError};
use crate::error::{Result, StoreError};

/// Writes waiting for the writer thread; a full queue makes callers wait.
const WRITE_QUEUE: usize = 4096;
/// Most writes committed in one transaction.
const MAX_BATCH: usize = 512;
/// Read-only connections.
const READERS: usize = 4;
/// How long a caller waits for its write or read.
const OP_DEADLINE: Duration = Duration::from_secs(30);
/// Revisions of history loaded into the watch cache at start.
const PRIME_EVENTS: usize = 4096;

type Reply<T> = oneshot::Sender<Result<T, WriteError>>;

enum WriteOp {
    Create { key: String, value: Bytes, reply: Reply<u64> },
    Update { key: String, value: Bytes, expected: u64, reply: Reply<u64> },
    Delete { key: String, expected: Option<u64>, reply: Reply<(u64, KeyValue)> },
    Merge { items: Vec<(String, MergeFn)>, reply: Reply<Vec<Result<Option<u64>, WriteError>>> },
    Compact { rev: u64, reply: Reply<()> },
}

/// The SQLite backend.
pub(crate) struct Sqlite {
    writes: Mutex<Option<mpsc::Sender<WriteOp>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Mutex<Vec<Connection>>,
    permits: Semaphore,
    /// Atoms read by the readers (the writer has its own).
    atoms: Arc<Atoms>,
}

impl std::fmt::Debug for Sqlite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sqlite").finish_non_exhaustive()
    }
}

fn sql_err(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::backend(context, e)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, mod_rev INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS log (rev INTEGER PRIMARY KEY, key TEXT NOT NULL, deleted INTEGER NOT NULL,
                                prev_value BLOB, prev_rev INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('rev', 0), ('compact_rev', 0);
";

fn open_conn(path: &Path, read_only: bool, fsync: bool) -> Result<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| StoreError::backend(&format!("open {}", path.display()), e))?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(sql_err("set busy timeout"))?;
    if !read_only {
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sql_err("enable WAL"))?;
        conn.pragma_update(None, "synchronous", if fsync { "FULL" } else { "NORMAL" })
            .map_err(sql_err("set synchronous"))?;
        conn.pragma_update(None, "cache_size", -16384).map_err(sql_err("set cache size"))?;
        conn.execute_batch(SCHEMA).map_err(sql_err("create schema"))?;
        conn.execute_batch(points::SCHEMA).map_err(sql_err("create schema"))?;
    } else {
        conn.pragma_update(None, "cache_size", -4096).map_err(sql_err("set cache size"))?;
    }
    Ok(conn)
}

fn meta(conn: &Connection, name: &str) -> Result<u64> {
    let v: i64 = conn
        .query_row("SELECT value FROM meta WHERE name = ?1", [name], |r| r.get(0))
        .map_err(sql_err("read revision"))?;
    Ok(u64::try_from(v).unwrap_or(0))
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl Sqlite {
    pub(crate) async fn open(
        path: &Path,
        fsync: bool,
        feed: Arc<dyn ChangeFeed>,
        codec: Arc<dyn points::PointCodec>,
    ) -> Result<Arc<Sqlite>> {
        let path = path.to_path_buf();
        let read_atoms = Arc::new(Atoms::new(Arc::clone(&codec)));
        let (writer_conn, atoms, readers, rev, history) = tokio::task::spawn_blocking(move || -> Result<_> {
            edgehive_files::make_private_database(&path, "the store")
                .map_err(|e| StoreError::backend(&format!("make {} private", path.display()), e))?;
            let mut writer = open_conn(&path, false, fsync)?;
            let atoms = Atoms::new(codec);
            move_points(&mut writer, &atoms)?;
            let rev = meta(&writer, "rev")?;
            let compact = meta(&writer, "compact_rev")?;
            let history = load_history(&writer, &atoms, rev, compact)?;
            let readers = (0..READERS).map(|_| open_conn(&path, true, fsync)).collect::<Result<Vec<_>>>()?;
            Ok((writer, atoms, readers, rev, history))
        })
        .await
        .map_err(|e| StoreError::backend("open database", e))??;

        let (base, changes) = history;
        feed.prime(base, rev, changes);
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let writer = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || Writer { conn: writer_conn, atoms, rev, feed }.run(rx))
            .map_err(|e| StoreError::backend("start writer thread", e))?;
        Ok(Arc::new(Sqlite {
            writes: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            readers: Mutex::new(readers),
            permits: Semaphore::new(READERS),
            atoms: read_atoms,
        }))
    }

    async fn write<T>(&self, op: impl FnOnce(Reply<T>) -> WriteOp) -> Result<T, WriteError> {
        let sender = self
            .writes
            .lock()
            .map_err(|_| StoreError::Unavailable("writer lock poisoned".into()))?
            .clone()
            .ok_or_else(|| StoreError::Unavailable("store closed".into()))?;
        let (reply, rx) = oneshot::channel();
        tokio::time::timeout(OP_DEADLINE, sender.send(op(reply)))
            .await
            .map_err(|_| StoreError::Timeout("write queue full".into()))?
            .map_err(|_| StoreError::Unavailable("writer stopped".into()))?;
        match tokio::time::timeout(OP_DEADLINE, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(StoreError::Unavailable("writer stopped".into()).into()),
            Err(_) => Err(StoreError::Timeout("write not committed in time".into()).into()),
        }
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let _permit = tokio::time::timeout(OP_DEADLINE, self.permits.acquire())
            .await
            .map_err(|_| StoreError::Timeout("no read connection free".into()))?
            .map_err(|_| StoreError::Unavailable("store closed".into()))?;
        let mut conn = self
            .readers
            .lock()
            .map_err(|_| StoreError::Unavailable("reader pool poisoned".into()))?
            .pop()
            .ok_or_else(|| StoreError::Unavailable("store closed".into()))?;
        let (conn, out) = tokio::task::spawn_blocking(move || {
            let out = f(&mut conn);
            (conn, out)
        })
        .await
        .map_err(|e| StoreError::backend("read", e))?;
        if let Ok(mut pool) = self.readers.lock() {
            pool.push(conn);
        }
        out
    }

    pub(crate) async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let key = key.to_string();
        let atoms = Arc::clone(&self.atoms);
        self.read(move |c| {
            let row = read_row(c, &atoms, &key).map_err(sql_err("get"))?;
            Ok(row.map(|(_, row)| row.kv))
        })
        .await
    }

    pub(crate) async fn range(&self, start: &str, end: &str, limit: usize, at: Option<u64>) -> Result<Page> {
        let (start, end) = (start.to_string(), end.to_string());
        let atoms = Arc::clone(&self.atoms);
        self.read(move |c| range_at(c, &atoms, &start, &end, limit, at)).await
    }

    pub(crate) async fn merge_many(&self, items: Vec<(String, MergeFn)>) -> Vec<Result<Option<u64>, WriteError>> {
        let n = items.len();
        match self.write(|reply| WriteOp::Merge { items, reply }).await {
            Ok(results) => results,
            Err(e) => (0..n).map(|_| Err(e.clone())).collect(),
        }
    }

    pub(crate) async fn create(&self, key: &str, value: Bytes) -> Result<u64, WriteError> {
        let key = key.to_string();
        self.write(|reply| WriteOp::Create { key, value, reply }).await
    }

    pub(crate) async fn update(&self, key: &str, value: Bytes, expected: u64) -> Result<u64, WriteError> {
        let key = key.to_string();
        self.write(|reply| WriteOp::Update { key, value, expected, reply }).await
    }

    pub(crate) async fn delete(&self, key: &str, expected: Option<u64>) -> Result<(u64, KeyValue), WriteError> {
        let key = key.to_string();
        self.write(|reply| WriteOp::Delete { key, expected, reply }).await
    }

    pub(crate) async fn current_rev(&self) -> Result<u64> {
        self.read(|c| meta(c, "rev")).await
    }

    pub(crate) async fn compact(&self, rev: u64) -> Result<()> {
        self.write(|reply| WriteOp::Compact { rev, reply }).await.map_err(|e| match e {
            WriteError::Failed(e) => e,
            other => StoreError::Backend(format!("compact: {other:?}")),
        })
    }

    pub(crate) async fn close(&self) {
        if let Ok(mut w) = self.writes.lock() {
            w.take();
        }
        let handle = self.writer.lock().ok().and_then(|mut h| h.take());
        if let Some(h) = handle {
            // The writer drains what is queued and stops; joining is blocking.
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }
}

/// Where a key's row is: `kv`, or `points` under this key.
enum Loc {
    Kv,
    Point(Vec<u8>),
}

/// A key's row.
struct Row {
    /// The key, its object as stored by the store, and its revision.
    kv: KeyValue,
    /// A point's `points.value` (what its log rows keep); `None` in `kv`,
    /// where it is `kv.value`.
    stored: Option<Vec<u8>>,
}

impl Row {
    fn stored(&self) -> &[u8] {
        self.stored.as_deref().unwrap_or(&self.kv.value)
    }
}

/// Where `key` is; `None` for a point whose namespace or node has no atom
/// and `create` is false (so it does not exist).
fn locate(c: &Connection, atoms: &Atoms, key: &str, create: bool) -> rusqlite::Result<Option<Loc>> {
    match PointKey::parse(key) {
        None => Ok(Some(Loc::Kv)),
        Some(pk) => Ok(points::key_blob(atoms, c, &pk, create)?.map(Loc::Point)),
    }
}

/// The current row of `key`, if there is one.
fn read_row(c: &Connection, atoms: &Atoms, key: &str) -> rusqlite::Result<Option<(Loc, Row)>> {
    let Some(loc) = locate(c, atoms, key, false)? else { return Ok(None) };
    let (sql, at): (_, &dyn rusqlite::ToSql) = match &loc {
        Loc::Kv => ("SELECT value, mod_rev FROM kv WHERE key = ?1", &key),
        Loc::Point(blob) => ("SELECT value, mod_rev FROM points WHERE key = ?1", blob),
    };
    let found =
        c.prepare_cached(sql)?.query_row([at], |r| Ok((r.get::<_, Vec<u8>>(0)?, to_u64(r.get(1)?)))).optional()?;
    let Some((stored, mod_rev)) = found else { return Ok(None) };
    let row = match &loc {
        Loc::Kv => Row { kv: KeyValue { key: key.to_owned(), value: Bytes::from(stored), mod_rev }, stored: None },
        Loc::Point(_) => {
            let value = points::decode_value(atoms, c, key, &stored)?;
            Row { kv: KeyValue { key: key.to_owned(), value, mod_rev }, stored: Some(stored) }
        }
    };
    Ok(Some((loc, row)))
}

/// A row of a range, before its key and value are decoded.
struct RangeRow {
    key: SqlValue,
    stored: Vec<u8>,
    mod_rev: u64,
}

impl RangeRow {
    fn key_bytes(&self) -> &[u8] {
        match &self.key {
            SqlValue::Text(t) => t.as_bytes(),
            SqlValue::Blob(b) => b,
            _ => &[],
        }
    }

    /// As the store sees it; `None` (reported) for a point whose key does not decode.
    fn decode(self, c: &Connection, atoms: &Atoms) -> rusqlite::Result<Option<KeyValue>> {
        if let SqlValue::Text(key) = self.key {
            return Ok(Some(KeyValue { key, value: Bytes::from(self.stored), mod_rev: self.mod_rev }));
        }
        let Some(key) = self.point_key(c, atoms)? else { return Ok(None) };
        let value = points::decode_value(atoms, c, &key, &self.stored)?;
        Ok(Some(KeyValue { key, value, mod_rev: self.mod_rev }))
    }

    /// The string key of a `points` row; `None` (reported) if it does not decode.
    fn point_key(&self, c: &Connection, atoms: &Atoms) -> rusqlite::Result<Option<String>> {
        let decoded = match &self.key {
            SqlValue::Blob(blob) => points::decode_key(atoms, c, blob)?,
            _ => Err("not a BLOB".to_owned()),
        };
        Ok(decoded
            .map_err(|reason| {
                let key = hex(self.key_bytes());
                tracing::error!(%key, %reason, "skipping a success point row whose key is corrupt");
            })
            .ok())
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A range as of revision `at` (now when `None` or not older than now).
fn range_at(c: &mut Connection, atoms: &Atoms, start: &str, end: &str, limit: usize, at: Option<u64>) -> Result<Page> {
    let tx = c.transaction().map_err(sql_err("begin read"))?;
    let now = meta(&tx, "rev")?;
    let compacted = meta(&tx, "compact_rev")?;
    let at = match at {
        Some(r) if r < now => {
            if r < compacted {
                return Err(StoreError::Expired(format!(
                    "the revision {r} has been compacted (oldest available is {compacted})"
                )));
            }
            r
        }
        _ => now,
    };
    // Success points are in their own table, under BLOB keys.
    let (table, lo, hi) = match points::region(start) {
        None => ("kv", SqlValue::Text(start.to_owned()), SqlValue::Text(end.to_owned())),
        Some(region) => match points::bounds(atoms, &tx, region, start, end)? {
            Some((lo, hi)) => ("points", SqlValue::Blob(lo), SqlValue::Blob(hi)),
            None => return Ok(Page { items: Vec::new(), rev: at, more: false }),
        },
    };
    let lim = if limit == 0 { -1 } else { to_i64(limit as u64 + 1) };
    let mut rows = Vec::new();
    let mut read = |sql: &str, what: &'static str| -> Result<()> {
        let mut q = tx.prepare_cached(sql).map_err(sql_err(what))?;
        let found = q
            .query_map(params![lo, hi, to_i64(at), lim], |r| {
                Ok(RangeRow {
                    key: r.get(0)?,
                    stored: r.get::<_, Option<Vec<u8>>>(1)?.unwrap_or_default(),
                    mod_rev: to_u64(r.get(2)?),
                })
            })
            .map_err(sql_err(what))?;
        for row in found {
            rows.push(row.map_err(sql_err(what))?);
        }
        Ok(())
    };
    read(
        &format!(
            "SELECT key, value, mod_rev FROM {table} WHERE key >= ?1 AND key < ?2 AND mod_rev <= ?3 ORDER BY key LIMIT ?4"
        ),
        "range",
    )?;
    if at < now {
        // Keys changed after `at`: their state then is the `prev` of their
        // first later change, if that state is from at or before `at` (a
        // key created later has no such state; a point's creation has no
        // log row, so its first logged change may be later than that).
        read(
            "SELECT l.key, l.prev_value, l.prev_rev FROM log l
             JOIN (SELECT key, MIN(rev) AS r FROM log WHERE rev > ?3 AND key >= ?1 AND key < ?2 GROUP BY key) f
             ON l.rev = f.r WHERE l.prev_value IS NOT NULL AND l.prev_rev <= ?3 ORDER BY l.key LIMIT ?4",
            "history range",
        )?;
        rows.sort_by(|a, b| a.key_bytes().cmp(b.key_bytes()));
    }
    let more = limit != 0 && rows.len() > limit;
    if more {
        rows.truncate(limit);
    }
    let mut items = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(kv) = row.decode(&tx, atoms).map_err(sql_err("decode range"))? {
            items.push(kv);
        }
    }
    tx.commit().map_err(sql_err("end read"))?;
    Ok(Page { items, rev: at, more })
}

/// Moves success points kept in `kv` (by a version before `points`) to
/// `points`, keeping their revisions.
fn move_points(c: &mut Connection, atoms: &Atoms) -> Result<()> {
    let tx = c.transaction().map_err(sql_err("begin moving success points"))?;
    let mut moved = 0usize;
    for (prefix, _) in points::prefixes() {
        let rows: Vec<(String, Vec<u8>, i64)> = {
            let mut q = tx
                .prepare("SELECT key, value, mod_rev FROM kv WHERE key >= ?1 AND key < ?2")
                .map_err(sql_err("read success points"))?;
            let rows = q
                .query_map(params![prefix, super::prefix_end(prefix)], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(sql_err("read success points"))?;
            rows.collect::<rusqlite::Result<_>>().map_err(sql_err("read success points"))?
        };
        for (key, value, mod_rev) in rows {
            let Some(pk) = PointKey::parse(&key) else { continue };
            let moved_row = (|| -> rusqlite::Result<()> {
                let blob = points::key_blob(atoms, &tx, &pk, true)?.unwrap_or_default();
                let stored = points::encode_value(atoms, &tx, &pk, &value)?;
                tx.execute(
                    "INSERT OR REPLACE INTO points (key, value, mod_rev) VALUES (?1, ?2, ?3)",
                    params![blob, stored, mod_rev],
                )?;
                tx.execute("DELETE FROM kv WHERE key = ?1", [&key])?;
                Ok(())
            })();
            moved_row.map_err(sql_err("move a success point"))?;
            moved += 1;
        }
    }
    tx.commit().map_err(sql_err("commit moving success points"))?;
    if moved > 0 {
        tracing::info!(points = moved, "moved success points to their compact table");
    }
    Ok(())
}

/// One change in history, while [`load_history`] rebuilds it.
struct Past {
    rev: u64,
    key: String,
    deleted: bool,
    prev: Option<KeyValue>,
}

/// The last (at most [`PRIME_EVENTS`]) changes, rebuilt from `log`, `kv` and
/// `points`, and the revision before the first of them.
fn load_history(c: &Connection, atoms: &Atoms, rev: u64, compacted: u64) -> Result<(u64, Vec<Change>)> {
    let from = rev.saturating_sub(PRIME_EVENTS as u64).max(compacted);
    let err = sql_err("read history");
    let mut past = Vec::new();
    let mut logged = HashSet::new();
    // Points made after `from` (their creation has no log row): at the
    // previous revision of their next change, if that is not logged itself.
    let mut made = Vec::new();
    {
        let mut q =
            c.prepare("SELECT rev, key, deleted, prev_value, prev_rev FROM log WHERE rev > ?1").map_err(&err)?;
        let rows = q
            .query_map([to_i64(from)], |r| {
                Ok((
                    to_u64(r.get(0)?),
                    r.get::<_, SqlValue>(1)?,
                    r.get::<_, i64>(2)? != 0,
                    r.get::<_, Option<Vec<u8>>>(3)?,
                    to_u64(r.get(4)?),
                ))
            })
            .map_err(&err)?;
        for row in rows {
            let (rev, key, deleted, prev_value, prev_rev) = row.map_err(&err)?;
            logged.insert(rev);
            let point = matches!(key, SqlValue::Blob(_));
            let row = RangeRow { key, stored: prev_value.clone().unwrap_or_default(), mod_rev: prev_rev };
            let Some(kv) = row.decode(c, atoms).map_err(&err)? else { continue };
            if point && prev_value.is_some() && prev_rev > from {
                made.push(Past { rev: prev_rev, key: kv.key.clone(), deleted: false, prev: None });
            }
            let key = kv.key.clone();
            past.push(Past { rev, key, deleted, prev: prev_value.is_some().then_some(kv) });
        }
    }
    past.extend(made.into_iter().filter(|p| !logged.contains(&p.rev)));
    {
        let mut q = c.prepare("SELECT key, mod_rev FROM points WHERE mod_rev > ?1").map_err(&err)?;
        let rows = q.query_map([to_i64(from)], |r| Ok((r.get::<_, SqlValue>(0)?, to_u64(r.get(1)?)))).map_err(&err)?;
        for row in rows {
            let (key, mod_rev) = row.map_err(&err)?;
            if logged.contains(&mod_rev) {
                continue;
            }
            let row = RangeRow { key, stored: Vec::new(), mod_rev };
            if let Some(key) = row.point_key(c, atoms).map_err(&err)? {
                past.push(Past { rev: mod_rev, key, deleted: false, prev: None });
            }
        }
    }
    past.sort_by_key(|p| std::cmp::Reverse(p.rev));
    // Walking backwards: the value after a change is the value before the
    // next change of the same key, or the current value.
    let mut after: HashMap<String, Option<Bytes>> = HashMap::new();
    let mut changes = Vec::with_capacity(past.len());
    for p in past {
        let value = if p.deleted {
            None
        } else if let Some(v) = after.get(&p.key) {
            v.clone()
        } else {
            read_row(c, atoms, &p.key).map_err(sql_err("read history value"))?.map(|(_, row)| row.kv.value)
        };
        after.insert(p.key.clone(), p.prev.as_ref().map(|kv| kv.value.clone()));
        changes.push(Change { rev: p.rev, key: p.key, value, prev: p.prev });
    }
    changes.reverse();
    Ok((from, changes))
}

struct Writer {
    conn: Connection,
    atoms: Atoms,
    rev: u64,
    feed: Arc<dyn ChangeFeed>,
}

/// What a write did in the open transaction, answered once it commits.
enum Outcome {
    Rev(Result<u64, WriteError>),
    Removed(Result<(u64, KeyValue), WriteError>),
    Merged(Result<Vec<Result<Option<u64>, WriteError>>, WriteError>),
    Compacted(Result<(), WriteError>),
}

impl WriteOp {
    /// Answers the caller with what its committed write did.
    fn answer(self, outcome: Outcome) {
        match (self, outcome) {
            (WriteOp::Create { reply, .. } | WriteOp::Update { reply, .. }, Outcome::Rev(v)) => drop(reply.send(v)),
            (WriteOp::Delete { reply, .. }, Outcome::Removed(v)) => drop(reply.send(v)),
            (WriteOp::Merge { reply, .. }, Outcome::Merged(v)) => drop(reply.send(v)),
            (WriteOp::Compact { reply, .. }, Outcome::Compacted(v)) => drop(reply.send(v)),
            (op, _) => op.fail(WriteError::Failed(StoreError::Unavailable("a write's outcome was lost".into()))),
        }
    }

    /// Answers the caller that its write was not committed.
    fn fail(self, e: WriteError) {
        match self {
            WriteOp::Create { reply, .. } | WriteOp::Update { reply, .. } => drop(reply.send(Err(e))),
            WriteOp::Delete { reply, .. } => drop(reply.send(Err(e))),
            WriteOp::Merge { reply, .. } => drop(reply.send(Err(e))),
            WriteOp::Compact { reply, .. } => drop(reply.send(Err(e))),
        }
    }
}

/// How long a batch that finds the database busy is tried again before
/// its writes are refused (callers wait at most [`OP_DEADLINE`]).
const BUSY_RETRY_FOR: Duration = Duration::from_secs(15);

/// SQLite's "busy" and "locked": another connection held a lock past the
/// busy timeout, or a snapshot or recovery got in the way. Nothing was
/// written; the same transaction may succeed when tried again.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

/// SQLite's extended result code of `e`, for the log.
fn extended_code(e: &rusqlite::Error) -> Option<i32> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
        _ => None,
    }
}

impl Writer {
    fn run(mut self, mut rx: mpsc::Receiver<WriteOp>) {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while let Some(op) = rx.blocking_recv() {
            batch.push(op);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            self.commit_batch(&mut batch);
        }
        tracing::debug!("store writer stopped");
    }

    /// Commits `batch` in one transaction and answers each write. A busy
    /// database is waited out (the batch is tried again); any other
    /// failure refuses every write of the batch with the reason.
    fn commit_batch(&mut self, batch: &mut Vec<WriteOp>) {
        let started = tokio::time::Instant::now();
        let mut attempt = 0u32;
        loop {
            let start_rev = self.rev;
            let mut outcomes = Vec::with_capacity(batch.len());
            let mut changes = Vec::new();
            let result = (|| -> rusqlite::Result<()> {
                let tx = self.conn.transaction()?;
                let mut b = Batch { tx: &tx, atoms: &self.atoms, rev: &mut self.rev, changes: &mut changes };
                for op in batch.iter() {
                    outcomes.push(b.apply(op)?);
                }
                tx.execute("UPDATE meta SET value = ?1 WHERE name = 'rev'", [to_i64(self.rev)])?;
                tx.commit()
            })();
            let Err(e) = result else {
                if !changes.is_empty() {
                    self.feed.publish(changes);
                }
                for (op, outcome) in batch.drain(..).zip(outcomes) {
                    op.answer(outcome);
                }
                return;
            };
            self.rev = start_rev;
            // Atoms made in the rolled-back transaction are gone.
            self.atoms.clear();
            if is_busy(&e) && started.elapsed() < BUSY_RETRY_FOR {
                attempt += 1;
                tracing::warn!(error = %e, code = ?extended_code(&e), attempt, writes = batch.len(),
                    "the store's database is busy; the batch is tried again");
                // The writer's own thread, with nothing else to do: it backs
                // off from the lock (5 ms, doubling to 640 ms).
                #[allow(clippy::disallowed_methods)]
                std::thread::sleep(Duration::from_millis(5u64 << attempt.min(7)));
                continue;
            }
            tracing::error!(error = %e, code = ?extended_code(&e), attempts = attempt + 1, writes = batch.len(),
                "store commit failed; the writes are refused");
            for op in batch.drain(..) {
                op.fail(WriteError::Failed(StoreError::backend("commit", &e)));
            }
            return;
        }
    }
}

/// The writes of one transaction.
struct Batch<'a> {
    tx: &'a rusqlite::Transaction<'a>,
    atoms: &'a Atoms,
    rev: &'a mut u64,
    changes: &'a mut Vec<Change>,
}

impl Batch<'_> {
    /// Applies one write. Checks come before any change, so a refused write
    /// leaves nothing behind; an SQLite error aborts the batch (and the
    /// write stays in it, to be tried again or refused).
    fn apply(&mut self, op: &WriteOp) -> rusqlite::Result<Outcome> {
        Ok(match op {
            WriteOp::Create { key, value, .. } => {
                if self.current(key)?.is_some() {
                    return Ok(Outcome::Rev(Err(WriteError::Exists)));
                }
                Outcome::Rev(Ok(self.insert(key.clone(), value.clone())?))
            }
            WriteOp::Update { key, value, expected, .. } => {
                let Some((loc, cur)) = self.current(key)? else {
                    return Ok(Outcome::Rev(Err(WriteError::Missing)));
                };
                if cur.kv.mod_rev != *expected {
                    return Ok(Outcome::Rev(Err(WriteError::Stale(cur.kv))));
                }
                Outcome::Rev(Ok(self.replace(&loc, cur, key.clone(), value.clone())?))
            }
            WriteOp::Delete { key, expected, .. } => {
                let Some((loc, cur)) = self.current(key)? else {
                    return Ok(Outcome::Removed(Err(WriteError::Missing)));
                };
                if expected.is_some_and(|e| e != cur.kv.mod_rev) {
                    return Ok(Outcome::Removed(Err(WriteError::Stale(cur.kv))));
                }
                Outcome::Removed(Ok(self.remove(&loc, cur, key.clone())?))
            }
            WriteOp::Merge { items, .. } => {
                let mut out = Vec::with_capacity(items.len());
                for (key, f) in items {
                    let cur = self.current(key)?;
                    let written = match (f(cur.as_ref().map(|(_, row)| &row.kv.value[..])), cur) {
                        (Merged::Keep, _) | (Merged::Delete, None) => None,
                        (Merged::Put(v), None) => Some(self.insert(key.clone(), v)?),
                        (Merged::Put(v), Some((loc, cur))) => Some(self.replace(&loc, cur, key.clone(), v)?),
                        (Merged::Delete, Some((loc, cur))) => Some(self.remove(&loc, cur, key.clone())?.0),
                    };
                    out.push(Ok(written));
                }
                Outcome::Merged(Ok(out))
            }
            WriteOp::Compact { rev: to, .. } => {
                let to = (*to).min(*self.rev);
                self.tx.prepare_cached("DELETE FROM log WHERE rev <= ?1")?.execute([to_i64(to)])?;
                self.tx
                    .prepare_cached("UPDATE meta SET value = max(value, ?1) WHERE name = 'compact_rev'")?
                    .execute([to_i64(to)])?;
                Outcome::Compacted(Ok(()))
            }
        })
    }

    fn current(&mut self, key: &str) -> rusqlite::Result<Option<(Loc, Row)>> {
        read_row(self.tx, self.atoms, key)
    }

    fn next_rev(&self) -> u64 {
        *self.rev + 1
    }

    /// `value` as `points` keeps it, for the point `key`.
    fn encode_point(&mut self, key: &str, value: &[u8]) -> rusqlite::Result<Vec<u8>> {
        match PointKey::parse(key) {
            Some(pk) => points::encode_value(self.atoms, self.tx, &pk, value),
            None => Ok(value.to_vec()),
        }
    }

    fn insert(&mut self, key: String, value: Bytes) -> rusqlite::Result<u64> {
        let r = self.next_rev();
        match locate(self.tx, self.atoms, &key, true)? {
            Some(Loc::Point(blob)) => {
                let stored = self.encode_point(&key, &value)?;
                self.tx
                    .prepare_cached("INSERT INTO points (key, value, mod_rev) VALUES (?1, ?2, ?3)")?
                    .execute(params![blob, stored, to_i64(r)])?;
            }
            _ => {
                self.tx
                    .prepare_cached("INSERT INTO kv (key, value, mod_rev) VALUES (?1, ?2, ?3)")?
                    .execute(params![key, &value[..], to_i64(r)])?;
                self.log(r, &Loc::Kv, &key, None)?;
            }
        }
        *self.rev = r;
        self.changes.push(Change { rev: r, key, value: Some(value), prev: None });
        Ok(r)
    }

    fn replace(&mut self, loc: &Loc, cur: Row, key: String, value: Bytes) -> rusqlite::Result<u64> {
        let r = self.next_rev();
        match loc {
            Loc::Kv => {
                self.tx.prepare_cached("UPDATE kv SET value = ?2, mod_rev = ?3 WHERE key = ?1")?.execute(params![
                    key,
                    &value[..],
                    to_i64(r)
                ])?;
            }
            Loc::Point(blob) => {
                let stored = self.encode_point(&key, &value)?;
                self.tx
                    .prepare_cached("UPDATE points SET value = ?2, mod_rev = ?3 WHERE key = ?1")?
                    .execute(params![blob, stored, to_i64(r)])?;
            }
        }
        self.log(r, loc, &key, Some((false, &cur)))?;
        *self.rev = r;
        self.changes.push(Change { rev: r, key, value: Some(value), prev: Some(cur.kv) });
        Ok(r)
    }

    fn remove(&mut self, loc: &Loc, cur: Row, key: String) -> rusqlite::Result<(u64, KeyValue)> {
        let r = self.next_rev();
        match loc {
            Loc::Kv => self.tx.prepare_cached("DELETE FROM kv WHERE key = ?1")?.execute([&key])?,
            Loc::Point(blob) => self.tx.prepare_cached("DELETE FROM points WHERE key = ?1")?.execute([blob])?,
        };
        self.log(r, loc, &key, Some((true, &cur)))?;
        *self.rev = r;
        self.changes.push(Change { rev: r, key, value: None, prev: Some(cur.kv.clone()) });
        Ok((r, cur.kv))
    }

    /// The log row of revision `r`: whether it deleted, and the row before
    /// (none for a create).
    fn log(&self, r: u64, loc: &Loc, key: &str, before: Option<(bool, &Row)>) -> rusqlite::Result<()> {
        let at: &dyn rusqlite::ToSql = match loc {
            Loc::Kv => &key,
            Loc::Point(blob) => blob,
        };
        let (deleted, prev, prev_rev) = match before {
            Some((deleted, row)) => (deleted, Some(row.stored()), row.kv.mod_rev),
            None => (false, None, 0),
        };
        self.tx
            .prepare_cached("INSERT INTO log (rev, key, deleted, prev_value, prev_rev) VALUES (?1, ?2, ?3, ?4, ?5)")?
            .execute(params![to_i64(r), at, deleted, prev, to_i64(prev_rev)])?;
        Ok(())
    }
}
