//! An acknowledged write survives `kill -9` of the process that made it,
//! and the database file (it holds Secrets) is private to the store's user.
//!
//! The durability test runs itself again as a child (selected by an
//! environment variable) that writes objects and prints each acknowledged
//! name; the parent kills it with SIGKILL mid-stream, reopens the database,
//! and finds every acknowledged object. The file-mode test runs itself again
//! under `umask 022`, the usual default, under which SQLite alone would make
//! the files 0644.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Stdio};

use edgehive_store::resources::CONFIGMAPS;
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use edgehive_testkit::umask::{in_child_with_umask_022, mode};
use serde_json::json;

const CHILD: &str = "EDGEHIVE_STORE_DURABILITY_CHILD";

fn config(path: &std::path::Path) -> StoreConfig {
    // The default: fsync on every commit.
    StoreConfig::new(BackendConfig::Sqlite { path: path.to_path_buf(), fsync: true })
}

fn child(path: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::open(config(std::path::Path::new(path))).await.unwrap();
        let mut out = std::io::stdout();
        // Writers in parallel, so that commits are grouped as in production.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<String>(1024);
        for w in 0..8 {
            let (store, tx) = (store.clone(), tx.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    let name = format!("w{w}-{i}");
                    let cm = json!({"metadata": {"name": name, "namespace": "default"}, "data": {"i": i.to_string()}});
                    store.create(&CONFIGMAPS, cm).await.unwrap();
                    if tx.send(name).await.is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        while let Some(name) = rx.recv().await {
            writeln!(out, "acked {name}").unwrap();
            out.flush().unwrap();
        }
    });
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    if let Ok(path) = std::env::var(CHILD) {
        child(&path);
        return;
    }
    let dir = TempDir::new("durability");
    let db = dir.path().join("state.db");
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "acknowledged_writes_survive_kill_9", "--nocapture", "--test-threads=1"])
        .env(CHILD, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    let reader = BufReader::new(proc.stdout.take().unwrap());
    for line in reader.lines() {
        let line = line.unwrap();
        if let Some(name) = line.strip_prefix("acked ") {
            acked.push(name.to_string());
            if acked.len() == 2000 {
                // SIGKILL: no destructors, no flush, no clean shutdown.
                proc.kill().unwrap();
                break;
            }
        }
    }
    proc.wait().unwrap();
    assert_eq!(acked.len(), 2000, "the child acknowledged writes");

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::open(config(&db)).await.unwrap();
        for name in &acked {
            let o = store.get(&CONFIGMAPS, "default", name).await;
            assert!(o.is_ok(), "acknowledged {name} lost after kill -9: {o:?}");
        }
        // And the database is consistent enough to go on writing.
        store.create(&CONFIGMAPS, json!({"metadata": {"name": "after", "namespace": "default"}})).await.unwrap();
        store.close().await;
    });
}

const UMASK_CHILD: &str = "EDGEHIVE_STORE_UMASK_CHILD";

#[test]
fn a_new_database_its_wal_and_shm_and_its_directory_are_private() {
    if !in_child_with_umask_022(UMASK_CHILD, "a_new_database_its_wal_and_shm_and_its_directory_are_private") {
        return;
    }
    let dir = TempDir::new("store-modes");
    let data = dir.path().join("data");
    let db = data.join("state.db");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::open(config(&db)).await.unwrap();
        store.create(&CONFIGMAPS, json!({"metadata": {"name": "a", "namespace": "default"}})).await.unwrap();
        // While the store is open after a write, SQLite keeps its -wal and -shm.
        for file in edgehive_files::database_files(&db) {
            assert_eq!(mode(&file), "0600", "{}", file.display());
        }
        assert_eq!(mode(&data), "0700", "the directory the store created");
        store.close().await;
    });
}

#[test]
fn an_existing_database_others_can_read_is_tightened() {
    let dir = TempDir::new("store-modes");
    let db = dir.path().join("state.db");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let store = Store::open(config(&db)).await.unwrap();
        store.create(&CONFIGMAPS, json!({"metadata": {"name": "a", "namespace": "default"}})).await.unwrap();
        store.close().await;
    });
    // As an older version (or a copy) left it: the database and a
    // leftover -wal and -shm readable by everyone.
    let files = edgehive_files::database_files(&db);
    for file in &files {
        std::fs::OpenOptions::new().create(true).append(true).open(file).unwrap();
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    rt.block_on(async {
        let store = Store::open(config(&db)).await.unwrap();
        for file in &files {
            assert_eq!(mode(file), "0600", "{}", file.display());
        }
        // A directory the store did not create is reported, not changed.
        assert_eq!(mode(dir.path()), "0755");
        assert!(store.get(&CONFIGMAPS, "default", "a").await.is_ok(), "the data is intact");
        store.close().await;
    });
}

/// A write that finds the database locked by another connection for longer
/// than SQLite's busy timeout (10 s) is not refused: the writer tries its
/// batch again and commits once the lock is gone. Other writes queued
/// behind it commit too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_waits_out_a_database_locked_past_the_busy_timeout() {
    let dir = TempDir::new("store-busy");
    let path = dir.path().join("state.db");
    let store = Store::open(config(&path)).await.unwrap();
    let cm = |name: &str| json!({"metadata": {"name": name, "namespace": "default"}});
    store.create(&CONFIGMAPS, cm("before")).await.unwrap();
    // Another process's connection takes the write lock.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let writes: Vec<_> = (0..3)
        .map(|i| {
            let store = store.clone();
            let cm = cm(&format!("during-{i}"));
            tokio::spawn(async move { store.create(&CONFIGMAPS, cm).await })
        })
        .collect();
    // Held past the busy timeout: the first attempt fails with "database is
    // locked", the batch is tried again.
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    assert!(writes.iter().all(|w| !w.is_finished()), "no write is answered while the lock is held");
    other.execute_batch("ROLLBACK").unwrap();
    for w in writes {
        w.await.unwrap().unwrap();
    }
    for i in 0..3 {
        store.get(&CONFIGMAPS, "default", &format!("during-{i}")).await.unwrap();
    }
    store.close().await;
}
