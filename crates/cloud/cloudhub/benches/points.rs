//! What success points cost:
//!
//! - in CloudHub's memory: 1,000,000 (node, object) pairs over 1,000 nodes,
//!   with Kubernetes UUID uids, measured as the growth of this process's RSS;
//! - in the store (SQLite): at least 100,000 pairs recorded and flushed the
//!   way CloudHub does, measured as the growth of the database file (WAL
//!   checkpointed) when they are made, and as the pages in use once every
//!   pair has moved to a newer version and that history is compacted (the
//!   file keeps the freed history pages for reuse; that figure is printed
//!   too). Two shapes: the delivery bench's (each node has one pod and the
//!   same ten configmaps) and pods only (100 per node, every pair its own
//!   object).
//!
//! ```sh
//! cargo bench -p edgehive-cloudhub --bench points
//! ```
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::HashMap;
use std::path::Path;

use edgehive_cloudhub::points::NodePoints;
use edgehive_cloudhub::pool::PointRef;
use edgehive_cloudhub::{SuccessPoints, UidKey};
use edgehive_model::Text;
use edgehive_store::objectsync::SyncRecord;
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A pseudo-random UUID, as Kubernetes assigns them.
fn uuid(seed: &mut u64) -> String {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let s = *seed;
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        s >> 32,
        s & 0xffff,
        (s >> 16) & 0xfff,
        (s >> 40) & 0xfff,
        s & 0xffff_ffff_ffff
    )
}

fn memory() {
    const NODES: usize = 1000;
    const PER_NODE: usize = 1000;
    let before = rss_kib();
    let mut nodes: HashMap<String, NodePoints> = HashMap::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for n in 0..NODES {
        let table = nodes.entry(format!("edge-{n}")).or_default();
        for i in 0..PER_NODE {
            table.insert(UidKey::of(&uuid(&mut seed)), (n * PER_NODE + i) as u64);
        }
    }
    let after = rss_kib();
    let pairs = NODES * PER_NODE;
    println!(
        "memory: {pairs} success points over {NODES} nodes: RSS +{} KiB = {:.1} bytes per pair",
        after - before,
        (after - before) as f64 * 1024.0 / pairs as f64
    );
    assert_eq!(nodes.values().map(HashMap::len).sum::<usize>(), pairs);
}

fn object(seed: &mut u64, kind: &'static str, name: String) -> PointRef {
    PointRef {
        uid: Text::from(uuid(seed)),
        namespace: Text::from("default"),
        name: Text::from(name),
        api_version: Text::from("v1"),
        kind: Text::from(kind),
    }
}

/// A deployment's pod name: `{deployment}-{10 characters}-{5 characters}`.
fn pod_name(seed: &mut u64) -> String {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let pick = |n: usize, mut s: u64| -> String {
        (0..n)
            .map(|_| {
                s = s.rotate_left(5) ^ 0x9e37_79b9;
                char::from(ALPHABET[(s % ALPHABET.len() as u64) as usize])
            })
            .collect()
    };
    format!("web-{}-{}", pick(10, *seed), pick(5, *seed >> 17))
}

/// The database and its WAL, checkpointed; and the bytes of the pages in use.
fn disk(path: &Path) -> (u64, u64) {
    let db = rusqlite::Connection::open(path).unwrap();
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    let pragma = |p: &str| db.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0)).unwrap() as u64;
    let wal = std::fs::metadata(path.with_extension("db-wal")).map_or(0, |m| m.len());
    let file = std::fs::metadata(path).unwrap().len() + wal;
    (file, (pragma("page_count") - pragma("freelist_count")) * pragma("page_size"))
}

async fn storage(shape: &str, nodes: usize, objects: impl Fn(usize, &mut u64) -> Vec<PointRef>) {
    let dir = TempDir::new("points-bench");
    let path = dir.path().join("state.db");
    let open = || Store::open(StoreConfig::new(BackendConfig::Sqlite { path: path.clone(), fsync: false }));
    open().await.unwrap().close().await;
    let empty = disk(&path);
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let held: Vec<(Text, Vec<PointRef>)> =
        (0..nodes).map(|n| (Text::from(format!("edge-{n}")), objects(n, &mut seed))).collect();
    let pairs: usize = held.iter().map(|(_, o)| o.len()).sum();
    let json: usize = held
        .iter()
        .flat_map(|(node, objs)| objs.iter().map(move |o| (node, o)))
        .map(|(node, o)| {
            let r = SyncRecord {
                node: node.to_string(),
                uid: o.uid.to_string(),
                rv: 1_000_000,
                api_version: o.api_version.to_string(),
                kind: o.kind.to_string(),
                namespace: o.namespace.to_string(),
                name: o.name.to_string(),
            };
            r.to_stored().encode().len()
        })
        .sum();

    let mut made = (0, 0);
    for round in 0..2u64 {
        let store = open().await.unwrap();
        let points = SuccessPoints::load(store.clone()).await.unwrap();
        let started = tokio::time::Instant::now();
        for (node, objs) in &held {
            for o in objs {
                points.record(node, o, 1_000_000 + round);
            }
            // CloudHub flushes what gathered; here, every 1,000 nodes' worth.
            if points.unflushed() >= 10_000 {
                assert!(points.flush().await);
            }
        }
        assert!(points.flush().await);
        let took = started.elapsed();
        if round == 1 {
            store.compact(store.current_rev().await.unwrap()).await.unwrap();
        }
        store.close().await;
        let (file, used) = disk(&path);
        let per = |b: u64, e: u64| (b - e) as f64 / pairs as f64;
        if round == 0 {
            made = (file, used);
            println!(
                "storage, {shape}: {pairs} pairs over {nodes} nodes ({:.0} bytes of ObjectSync JSON each): \
                 made in {took:.2?}, file +{:.1} bytes per pair",
                json as f64 / pairs as f64,
                per(file, empty.0)
            );
        } else {
            println!(
                "storage, {shape}: every pair moved in {took:.2?} and the history compacted: pages in use +{:.1} \
                 bytes per pair (file +{:.1}, holding the freed history pages for reuse)",
                per(used, empty.1),
                per(file, empty.0)
            );
            assert!(per(made.0, empty.0) <= 100.0 && per(used, empty.1) <= 100.0, "over 100 bytes per pair");
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    memory();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        // Each node: one pod and the same ten configmaps (the delivery bench's shape).
        let mut shared_seed = 7;
        let configmaps: Vec<PointRef> =
            (0..10).map(|i| object(&mut shared_seed, "ConfigMap", format!("app-config-{i}"))).collect();
        storage("1 pod + 10 shared configmaps per node", 10_000, |_, seed| {
            let name = pod_name(seed);
            let mut objs = vec![object(seed, "Pod", name)];
            objs.extend(configmaps.iter().cloned());
            objs
        })
        .await;
        storage("100 pods per node", 1_100, |_, seed| {
            (0..100)
                .map(|_| {
                    let name = pod_name(seed);
                    object(seed, "Pod", name)
                })
                .collect()
        })
        .await;
    });
}
