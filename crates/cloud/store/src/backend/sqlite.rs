//! The embedded backend: one SQLite file in WAL mode.
//!
//! - `kv` holds the current value and revision of every key;
//! - `log` holds one row per revision (key, whether it was a delete, and the
//!   value and revision *before* the change), kept until compaction. From it
//!   a range can be read as it was at an older revision (the state at `R` of
//!   a key changed after `R` is the `prev` of its first change after `R`), and
//!   the watch hub is primed with recent history after a restart;
//! - `meta` holds the current and the compacted revision.
//!
//! One writer thread owns the only writing connection and commits writes in
//! groups: it takes every request waiting in its bounded queue, applies them in
//! one transaction (each still gets its own revision), commits once, hands the
//! changes to the hub and only then answers the callers. So an acknowledged
//! write is on disk (with `fsync`, also across a power cut) and a watch started
//! after it sees everything up to it. Reads run on a small pool of read-only
//! connections, each range in its own read transaction (a consistent snapshot).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{Change, KeyValue, Page, WriteError};
use crate::error::{Result, StoreError};
use crate::watch::Hub;

/// Writes waiting for the writer thread; a full queue makes callers wait.
const WRITE_QUEUE: usize = 4096;
/// Most writes committed in one transaction.
const MAX_BATCH: usize = 512;
/// Read-only connections.
const READERS: usize = 4;
/// How long a caller waits for its write or read.
const OP_DEADLINE: Duration = Duration::from_secs(30);
/// Revisions of history loaded into the watch hub at start.
const PRIME_EVENTS: usize = 4096;

type Reply<T> = oneshot::Sender<Result<T, WriteError>>;

enum WriteOp {
    Create { key: String, value: Bytes, reply: Reply<u64> },
    Update { key: String, value: Bytes, expected: u64, reply: Reply<u64> },
    Delete { key: String, expected: Option<u64>, reply: Reply<(u64, KeyValue)> },
    Compact { rev: u64, reply: Reply<()> },
}

/// The SQLite backend.
pub(crate) struct Sqlite {
    writes: Mutex<Option<mpsc::Sender<WriteOp>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Mutex<Vec<Connection>>,
    permits: Semaphore,
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
    pub(crate) async fn open(path: &Path, fsync: bool, hub: Arc<Hub>) -> Result<Arc<Sqlite>> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::backend(&format!("create {}", dir.display()), e))?;
        }
        let path = path.to_path_buf();
        let (writer_conn, readers, rev, history) = tokio::task::spawn_blocking(move || -> Result<_> {
            let writer = open_conn(&path, false, fsync)?;
            let rev = meta(&writer, "rev")?;
            let compact = meta(&writer, "compact_rev")?;
            let history = load_history(&writer, rev, compact)?;
            let readers = (0..READERS).map(|_| open_conn(&path, true, fsync)).collect::<Result<Vec<_>>>()?;
            Ok((writer, readers, rev, history))
        })
        .await
        .map_err(|e| StoreError::backend("open database", e))??;

        let (base, changes) = history;
        hub.prime(base, rev, changes);
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let writer = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || Writer { conn: writer_conn, rev, hub }.run(rx))
            .map_err(|e| StoreError::backend("start writer thread", e))?;
        Ok(Arc::new(Sqlite {
            writes: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
            readers: Mutex::new(readers),
            permits: Semaphore::new(READERS),
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
        self.read(move |c| {
            c.query_row("SELECT value, mod_rev FROM kv WHERE key = ?1", [&key], |r| {
                Ok(KeyValue {
                    key: key.clone(),
                    value: Bytes::from(r.get::<_, Vec<u8>>(0)?),
                    mod_rev: to_u64(r.get(1)?),
                })
            })
            .optional()
            .map_err(sql_err("get"))
        })
        .await
    }

    pub(crate) async fn range(&self, start: &str, end: &str, limit: usize, at: Option<u64>) -> Result<Page> {
        let (start, end) = (start.to_string(), end.to_string());
        self.read(move |c| range_at(c, &start, &end, limit, at)).await
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

/// A range as of revision `at` (now when `None` or not older than now).
fn range_at(c: &mut Connection, start: &str, end: &str, limit: usize, at: Option<u64>) -> Result<Page> {
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
    let lim = if limit == 0 { -1 } else { to_i64(limit as u64 + 1) };
    let mut items = Vec::new();
    {
        let mut q = tx
            .prepare_cached(
                "SELECT key, value, mod_rev FROM kv WHERE key >= ?1 AND key < ?2 AND mod_rev <= ?3 ORDER BY key LIMIT ?4",
            )
            .map_err(sql_err("prepare range"))?;
        let rows = q
            .query_map(params![start, end, to_i64(at), lim], |r| {
                Ok(KeyValue { key: r.get(0)?, value: Bytes::from(r.get::<_, Vec<u8>>(1)?), mod_rev: to_u64(r.get(2)?) })
            })
            .map_err(sql_err("range"))?;
        for row in rows {
            items.push(row.map_err(sql_err("range row"))?);
        }
    }
    if at < now {
        // Keys changed after `at`: their state then is the `prev` of their
        // first later change (creates have none, so they drop out).
        let mut q = tx
            .prepare_cached(
                "SELECT l.key, l.prev_value, l.prev_rev FROM log l
                 JOIN (SELECT key, MIN(rev) AS r FROM log WHERE rev > ?3 AND key >= ?1 AND key < ?2 GROUP BY key) f
                 ON l.rev = f.r WHERE l.prev_value IS NOT NULL ORDER BY l.key LIMIT ?4",
            )
            .map_err(sql_err("prepare history range"))?;
        let rows = q
            .query_map(params![start, end, to_i64(at), lim], |r| {
                Ok(KeyValue { key: r.get(0)?, value: Bytes::from(r.get::<_, Vec<u8>>(1)?), mod_rev: to_u64(r.get(2)?) })
            })
            .map_err(sql_err("history range"))?;
        for row in rows {
            items.push(row.map_err(sql_err("history row"))?);
        }
        items.sort_by(|a, b| a.key.cmp(&b.key));
    }
    tx.commit().map_err(sql_err("end read"))?;
    let more = limit != 0 && items.len() > limit;
    if more {
        items.truncate(limit);
    }
    Ok(Page { items, rev: at, more })
}

/// The last (at most [`PRIME_EVENTS`]) changes, rebuilt from `log` and
/// `kv`, and the revision before the first of them.
fn load_history(c: &Connection, rev: u64, compacted: u64) -> Result<(u64, Vec<Change>)> {
    let from = rev.saturating_sub(PRIME_EVENTS as u64).max(compacted);
    let mut q = c
        .prepare("SELECT rev, key, deleted, prev_value, prev_rev FROM log WHERE rev > ?1 ORDER BY rev DESC")
        .map_err(sql_err("read history"))?;
    let rows = q
        .query_map([to_i64(from)], |r| {
            Ok((
                to_u64(r.get(0)?),
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)? != 0,
                r.get::<_, Option<Vec<u8>>>(3)?,
                to_u64(r.get(4)?),
            ))
        })
        .map_err(sql_err("read history"))?;
    // Walking backwards: the value after a change is the value before the
    // next change of the same key, or the current value.
    let mut after: std::collections::HashMap<String, Option<Bytes>> = std::collections::HashMap::new();
    let mut changes = Vec::new();
    for row in rows {
        let (rev, key, deleted, prev_value, prev_rev) = row.map_err(sql_err("read history row"))?;
        let value = if deleted {
            None
        } else if let Some(v) = after.get(&key) {
            v.clone()
        } else {
            c.query_row("SELECT value FROM kv WHERE key = ?1", [&key], |r| r.get::<_, Vec<u8>>(0))
                .optional()
                .map_err(sql_err("read history value"))?
                .map(Bytes::from)
        };
        let prev = prev_value.map(Bytes::from);
        after.insert(key.clone(), prev.clone());
        changes.push(Change {
            rev,
            key: key.clone(),
            value,
            prev: prev.map(|value| KeyValue { key, value, mod_rev: prev_rev }),
        });
    }
    changes.reverse();
    Ok((from, changes))
}

struct Writer {
    conn: Connection,
    rev: u64,
    hub: Arc<Hub>,
}

/// A write applied in the open transaction, waiting for the commit.
enum Applied {
    Create(Reply<u64>, Result<u64, WriteError>),
    Update(Reply<u64>, Result<u64, WriteError>),
    Delete(Reply<(u64, KeyValue)>, Result<(u64, KeyValue), WriteError>),
    Compact(Reply<()>, Result<(), WriteError>),
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

    fn commit_batch(&mut self, batch: &mut Vec<WriteOp>) {
        let start_rev = self.rev;
        let mut applied = Vec::with_capacity(batch.len());
        let mut changes = Vec::new();
        let outcome = (|| -> rusqlite::Result<()> {
            let tx = self.conn.transaction()?;
            for op in batch.drain(..) {
                applied.push(apply(&tx, &mut self.rev, op, &mut changes)?);
            }
            tx.execute("UPDATE meta SET value = ?1 WHERE name = 'rev'", [to_i64(self.rev)])?;
            tx.commit()
        })();
        if let Err(e) = outcome {
            tracing::error!(error = %e, writes = applied.len(), "store commit failed; the writes are refused");
            self.rev = start_rev;
            let err = || WriteError::Failed(StoreError::backend("commit", &e));
            for a in applied {
                match a {
                    Applied::Create(r, _) | Applied::Update(r, _) => drop(r.send(Err(err()))),
                    Applied::Delete(r, _) => drop(r.send(Err(err()))),
                    Applied::Compact(r, _) => drop(r.send(Err(err()))),
                }
            }
            batch.clear();
            return;
        }
        if !changes.is_empty() {
            self.hub.publish(changes);
        }
        for a in applied {
            match a {
                Applied::Create(r, v) | Applied::Update(r, v) => drop(r.send(v)),
                Applied::Delete(r, v) => drop(r.send(v)),
                Applied::Compact(r, v) => drop(r.send(v)),
            }
        }
    }
}

fn current(tx: &rusqlite::Transaction<'_>, key: &str) -> rusqlite::Result<Option<KeyValue>> {
    tx.prepare_cached("SELECT value, mod_rev FROM kv WHERE key = ?1")?
        .query_row([key], |r| {
            Ok(KeyValue {
                key: key.to_string(),
                value: Bytes::from(r.get::<_, Vec<u8>>(0)?),
                mod_rev: to_u64(r.get(1)?),
            })
        })
        .optional()
}

/// Applies one write in the open transaction. Checks come before any change,
/// so a refused write leaves nothing behind; an SQLite error aborts the batch.
fn apply(
    tx: &rusqlite::Transaction<'_>,
    rev: &mut u64,
    op: WriteOp,
    changes: &mut Vec<Change>,
) -> rusqlite::Result<Applied> {
    Ok(match op {
        WriteOp::Create { key, value, reply } => {
            if current(tx, &key)?.is_some() {
                return Ok(Applied::Create(reply, Err(WriteError::Exists)));
            }
            let r = *rev + 1;
            tx.prepare_cached("INSERT INTO kv (key, value, mod_rev) VALUES (?1, ?2, ?3)")?.execute(params![
                key,
                &value[..],
                to_i64(r)
            ])?;
            tx.prepare_cached("INSERT INTO log (rev, key, deleted, prev_value, prev_rev) VALUES (?1, ?2, 0, NULL, 0)")?
                .execute(params![to_i64(r), key])?;
            *rev = r;
            changes.push(Change { rev: r, key, value: Some(value), prev: None });
            Applied::Create(reply, Ok(r))
        }
        WriteOp::Update { key, value, expected, reply } => {
            let Some(cur) = current(tx, &key)? else {
                return Ok(Applied::Update(reply, Err(WriteError::Missing)));
            };
            if cur.mod_rev != expected {
                return Ok(Applied::Update(reply, Err(WriteError::Stale(cur))));
            }
            let r = *rev + 1;
            tx.prepare_cached("UPDATE kv SET value = ?2, mod_rev = ?3 WHERE key = ?1")?.execute(params![
                key,
                &value[..],
                to_i64(r)
            ])?;
            tx.prepare_cached("INSERT INTO log (rev, key, deleted, prev_value, prev_rev) VALUES (?1, ?2, 0, ?3, ?4)")?
                .execute(params![to_i64(r), key, &cur.value[..], to_i64(cur.mod_rev)])?;
            *rev = r;
            changes.push(Change { rev: r, key, value: Some(value), prev: Some(cur) });
            Applied::Update(reply, Ok(r))
        }
        WriteOp::Delete { key, expected, reply } => {
            let Some(cur) = current(tx, &key)? else {
                return Ok(Applied::Delete(reply, Err(WriteError::Missing)));
            };
            if expected.is_some_and(|e| e != cur.mod_rev) {
                return Ok(Applied::Delete(reply, Err(WriteError::Stale(cur))));
            }
            let r = *rev + 1;
            tx.prepare_cached("DELETE FROM kv WHERE key = ?1")?.execute([&key])?;
            tx.prepare_cached("INSERT INTO log (rev, key, deleted, prev_value, prev_rev) VALUES (?1, ?2, 1, ?3, ?4)")?
                .execute(params![to_i64(r), key, &cur.value[..], to_i64(cur.mod_rev)])?;
            *rev = r;
            changes.push(Change { rev: r, key, value: None, prev: Some(cur.clone()) });
            Applied::Delete(reply, Ok((r, cur)))
        }
        WriteOp::Compact { rev: to, reply } => {
            let to = to.min(*rev);
            tx.prepare_cached("DELETE FROM log WHERE rev <= ?1")?.execute([to_i64(to)])?;
            tx.prepare_cached("UPDATE meta SET value = max(value, ?1) WHERE name = 'compact_rev'")?
                .execute([to_i64(to)])?;
            Applied::Compact(reply, Ok(()))
        }
    })
}
