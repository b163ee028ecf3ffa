//! The topics the cloud asked the EventBus to subscribe, kept across
//! restarts in KubeEdge's `sub_topics` table (`edge/pkg/eventbus/dao`:
//! one column `topic`, text, primary key) in the edge's database — the
//! file MetaManager keeps its `meta` table in, through a connection of our
//! own (SQLite serialises the writers; WAL lets readers go on).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::Connection;

use crate::topics::valid_filter;

/// A failure of the topic store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error("{action} {path}: {source}")]
    Sqlite {
        /// What was being done ("open the edge database", "store a topic").
        action: &'static str,
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database file could not be made private (0600).
    #[error("open the edge database {path}: {source}")]
    Io {
        /// The database file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// The `sub_topics` table.
#[derive(Debug)]
pub(crate) struct TopicStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// The stored topics, and those skipped because MQTT would refuse them.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) topics: Vec<String>,
    pub(crate) skipped: Vec<String>,
}

impl TopicStore {
    /// Opens the database at `path` (created 0600 if missing, like
    /// MetaManager's) and creates `sub_topics` if it is not there.
    pub(crate) fn open(path: &Path) -> Result<TopicStore, StoreError> {
        edgehive_files::make_private_database(path, "the edge store")
            .map_err(|source| StoreError::Io { path: path.to_owned(), source })?;
        let err = |action| move |source| StoreError::Sqlite { action, path: path.to_owned(), source };
        let conn = Connection::open(path).map_err(err("open the edge database"))?;
        // MetaManager may hold the write lock for a batch; wait for it, boundedly.
        conn.busy_timeout(Duration::from_secs(5)).map_err(err("open the edge database"))?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE IF NOT EXISTS sub_topics (topic TEXT NOT NULL PRIMARY KEY);",
        )
        .map_err(err("create the sub_topics table"))?;
        Ok(TopicStore { path: path.to_owned(), conn: Mutex::new(conn) })
    }

    fn err(&self, action: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError + '_ {
        move |source| StoreError::Sqlite { action, path: self.path.clone(), source }
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every stored topic, in order. A row that is not text, or a filter
    /// MQTT refuses (KubeEdge stores whatever it is sent), is skipped and
    /// named: subscribing to it would make the broker close the connection.
    pub(crate) fn load(&self) -> Result<Loaded, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare("SELECT topic FROM sub_topics ORDER BY topic").map_err(self.err("read sub_topics"))?;
        let mut rows = stmt.query([]).map_err(self.err("read sub_topics"))?;
        let mut loaded = Loaded::default();
        while let Some(row) = rows.next().map_err(self.err("read sub_topics"))? {
            match row.get_ref(0).map_err(self.err("read sub_topics"))? {
                rusqlite::types::ValueRef::Text(t) => match std::str::from_utf8(t) {
                    Ok(topic) if valid_filter(topic).is_ok() => loaded.topics.push(topic.to_owned()),
                    Ok(topic) => loaded.skipped.push(topic.to_owned()),
                    Err(_) => loaded.skipped.push(String::from_utf8_lossy(t).into_owned()),
                },
                other => loaded.skipped.push(format!("({:?})", other.data_type())),
            }
        }
        Ok(loaded)
    }

    /// Stores a topic (KubeEdge: `INSERT OR REPLACE`).
    pub(crate) fn insert(&self, topic: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("INSERT OR REPLACE INTO sub_topics (topic) VALUES (?1)", [topic])
            .map(drop)
            .map_err(self.err("store a subscribed topic"))
    }

    /// Forgets a topic; forgetting one not stored is no error.
    pub(crate) fn delete(&self, topic: &str) -> Result<(), StoreError> {
        self.conn()
            .execute("DELETE FROM sub_topics WHERE topic = ?1", [topic])
            .map(drop)
            .map_err(self.err("delete a subscribed topic"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_persist_and_bad_rows_are_skipped() {
        let dir = std::env::temp_dir().join(format!("edgehive-eventbus-store-{}", std::process::id()));
        let path = dir.join("edgecore.db");
        let store = TopicStore::open(&path).unwrap();
        store.insert("a/+/c").unwrap();
        store.insert("a/+/c").unwrap();
        store.insert("b/#").unwrap();
        store.delete("b/#").unwrap();
        store.delete("never/stored").unwrap();
        store.conn().execute("INSERT INTO sub_topics (topic) VALUES ('x/#/y')", []).unwrap();
        store.conn().execute("INSERT INTO sub_topics (topic) VALUES (CAST(x'ff' AS BLOB))", []).unwrap();
        drop(store);
        let loaded = TopicStore::open(&path).unwrap().load().unwrap();
        assert_eq!(loaded.topics, vec!["a/+/c".to_owned()]);
        assert_eq!(loaded.skipped.len(), 2, "{:?}", loaded.skipped);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
