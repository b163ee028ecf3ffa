//! An acknowledged write survives `kill -9` of the process that made it.
//!
//! The test runs itself again as a child (selected by an environment
//! variable) that writes objects and prints each acknowledged name; the
//! parent kills it with SIGKILL mid-stream, reopens the database, and finds
//! every acknowledged object.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Command, Stdio};

use edgehive_store::resources::CONFIGMAPS;
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
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
