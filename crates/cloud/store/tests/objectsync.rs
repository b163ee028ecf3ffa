//! Success points written in batches and read back as ObjectSync and
//! ClusterObjectSync objects, on SQLite (kept compact) and etcd (kept as
//! JSON): the objects, lists and pages, watches, restarts, damaged rows and
//! what a point costs on disk.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Harness, Kind};
use edgehive_store::objectsync::{PointWrite, SyncRecord, derived_uid, format_uuid};
use edgehive_store::resources::{CLUSTER_OBJECT_SYNCS, OBJECT_SYNCS};
use edgehive_store::selector::FieldSelector;
use edgehive_store::{
    BackendConfig, DeleteOptions, EventType, ListOptions, Store, StoreConfig, StoreError, WatchFilter, WatchOptions,
    WatchStart,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

on_both_backends!(points_are_objectsyncs, pages_of_points_are_a_consistent_snapshot);

fn uid(i: u64) -> String {
    format_uuid(u128::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
}

fn set(node: &str, uid: &str, namespace: &str, name: &str, rv: u64) -> PointWrite {
    let kind = if namespace.is_empty() { "Node" } else { "ConfigMap" };
    PointWrite::Set(SyncRecord {
        node: node.into(),
        uid: uid.into(),
        rv,
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    })
}

fn remove(node: &str, uid: &str, namespace: &str) -> PointWrite {
    PointWrite::Remove { node: node.into(), uid: uid.into(), namespace: namespace.into() }
}

async fn write(s: &Store, writes: &[PointWrite]) {
    for r in s.write_points(writes).await {
        r.unwrap();
    }
}

fn names(items: &[edgehive_store::Object]) -> Vec<String> {
    items.iter().map(|o| format!("{}/{}", o.namespace(), o.name())).collect()
}

async fn points_are_objectsyncs(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let from = s.current_rev().await.unwrap();
    let (u1, u2) = (uid(1), uid(2));
    write(
        s,
        &[
            set("edge-1", &u1, "default", "app", 7),
            set("edge-2", &u1, "default", "app", 7),
            set("edge.example.com", &u2, "kube-system", "proxy", 9),
            set("edge-1", "not-a-uuid", "default", "other", 3),
            set("edge-1", &u2, "", "edge-1", 11),
        ],
    )
    .await;

    // A point is an ObjectSync with KubeEdge's fields.
    let name = format!("edge-1.{u1}");
    let o = s.get(&OBJECT_SYNCS, "default", &name).await.unwrap();
    let v = o.value().unwrap();
    assert_eq!(v["apiVersion"], "reliablesyncs.kubeedge.io/v1alpha1");
    assert_eq!(v["kind"], "ObjectSync");
    assert_eq!(v["metadata"]["name"], name.as_str());
    assert_eq!(v["metadata"]["namespace"], "default");
    assert_eq!(v["metadata"]["uid"], derived_uid("default", &name).as_str());
    assert_eq!(v["metadata"]["resourceVersion"], o.rev().to_string().as_str());
    assert_eq!(v["metadata"]["creationTimestamp"].as_str().unwrap().len(), 20);
    assert_eq!(v["spec"], json!({"objectAPIVersion": "v1", "objectKind": "ConfigMap", "objectName": "app"}));
    assert_eq!(v["status"], json!({"objectResourceVersion": "7"}));
    assert_eq!(SyncRecord::parse(&OBJECT_SYNCS, v).unwrap().node, "edge-1");
    let c = s.get(&CLUSTER_OBJECT_SYNCS, "", &format!("edge-1.{u2}")).await.unwrap();
    assert_eq!(c.value().unwrap()["kind"], "ClusterObjectSync");
    assert!(c.value().unwrap()["metadata"].get("namespace").is_none());

    // Lists: all, one namespace, one name; every page once.
    let all = s.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap();
    let want: BTreeSet<String> = [
        format!("default/edge-1.{u1}"),
        format!("default/edge-2.{u1}"),
        "default/edge-1.not-a-uuid".to_string(),
        format!("kube-system/edge.example.com.{u2}"),
    ]
    .into();
    assert_eq!(names(&all.items).into_iter().collect::<BTreeSet<_>>(), want);
    let ns = ListOptions { namespace: Some("kube-system".into()), ..ListOptions::default() };
    assert_eq!(s.list(&OBJECT_SYNCS, &ns).await.unwrap().items.len(), 1);
    let one = ListOptions {
        namespace: Some("default".into()),
        fields: FieldSelector::parse(&format!("metadata.name={name}")).unwrap(),
        ..ListOptions::default()
    };
    assert_eq!(names(&s.list(&OBJECT_SYNCS, &one).await.unwrap().items), [format!("default/{name}")]);
    let mut paged = Vec::new();
    let mut opts = ListOptions { limit: 1, ..ListOptions::default() };
    loop {
        let page = s.list(&OBJECT_SYNCS, &opts).await.unwrap();
        paged.extend(names(&page.items));
        match page.continue_token {
            Some(t) => opts.continue_token = Some(t),
            None => break,
        }
    }
    assert_eq!(paged, names(&all.items), "pages give the list's order, once each");
    assert_eq!(s.list(&CLUSTER_OBJECT_SYNCS, &ListOptions::default()).await.unwrap().items.len(), 1);

    // Watches see creations, moves and removals; a write that changes
    // nothing uses no revision.
    let filter = WatchFilter::all(&OBJECT_SYNCS);
    let mut w = s.watch(WatchOptions { filter, start: WatchStart::After(from), bookmarks: false }).await.unwrap();
    for _ in 0..4 {
        let e = tokio::time::timeout(WAIT, w.next()).await.unwrap().unwrap();
        assert_eq!(e.ty, EventType::Added);
    }
    let before = s.current_rev().await.unwrap();
    write(s, &[set("edge-1", &u1, "default", "app", 7)]).await;
    assert_eq!(s.current_rev().await.unwrap(), before, "no change, no revision");
    write(
        s,
        &[set("edge-1", &u1, "default", "app", 8), remove("edge-2", &u1, "default"), remove("edge-9", &u1, "default")],
    )
    .await;
    // (etcd writes a batch's keys concurrently, in no set order.)
    let mut events = BTreeSet::new();
    for _ in 0..2 {
        let e = tokio::time::timeout(WAIT, w.next()).await.unwrap().unwrap();
        let o = e.object().unwrap();
        let rv = o.value().unwrap()["status"]["objectResourceVersion"].as_str().unwrap().to_owned();
        events.insert((e.ty.as_str(), o.name().to_owned(), rv));
    }
    let want = [("DELETED", format!("edge-2.{u1}"), "7".to_owned()), ("MODIFIED", name.clone(), "8".to_owned())];
    assert_eq!(events, want.into());
    let created = v["metadata"]["creationTimestamp"].clone();
    let moved = s.get(&OBJECT_SYNCS, "default", &name).await.unwrap();
    assert_eq!(moved.value().unwrap()["metadata"]["creationTimestamp"], created, "identity is kept");

    // Changed through the API, a point keeps what was added and still moves.
    s.update_with::<_, edgehive_store::StoreError>(&OBJECT_SYNCS, "default", &name, |cur| {
        let mut v = cur.to_value()?;
        v["metadata"]["labels"] = json!({"team": "a"});
        Ok(Some(v))
    })
    .await
    .unwrap();
    write(s, &[set("edge-1", &u1, "default", "app", 12)]).await;
    let v = s.get(&OBJECT_SYNCS, "default", &name).await.unwrap().to_value().unwrap();
    assert_eq!(
        (v["metadata"]["labels"]["team"].as_str(), v["status"]["objectResourceVersion"].as_str()),
        (Some("a"), Some("12"))
    );
    // Created through the API, too.
    let api = json!({"metadata": {"name": "edge-3.abc", "namespace": "default"},
        "spec": {"objectAPIVersion": "v1", "objectKind": "Pod", "objectName": "p"}, "status": {"objectResourceVersion": "1"}});
    s.create(&OBJECT_SYNCS, api).await.unwrap();
    write(s, &[set("edge-3", "abc", "default", "p", 2)]).await;
    let v = s.get(&OBJECT_SYNCS, "default", "edge-3.abc").await.unwrap().to_value().unwrap();
    assert_eq!(v["status"]["objectResourceVersion"], "2");
    // And deleted through it.
    s.delete(&OBJECT_SYNCS, "default", &name, &DeleteOptions::default()).await.unwrap();
    assert!(matches!(s.get(&OBJECT_SYNCS, "default", &name).await, Err(StoreError::NotFound { .. })));
    s.close().await;
}

async fn pages_of_points_are_a_consistent_snapshot(kind: Kind) {
    let h = Harness::new(kind).await;
    let s = &h.store;
    let writes: Vec<PointWrite> =
        (0..25).map(|i| set(&format!("edge-{}", i % 5), &uid(i), "default", "cm", 1)).collect();
    write(s, &writes).await;
    let mut opts = ListOptions { limit: 10, ..ListOptions::default() };
    let first = s.list(&OBJECT_SYNCS, &opts).await.unwrap();
    let snapshot = first.rev;
    let all = s.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap();
    let later: Vec<String> = names(&all.items[10..]);
    // Changes after the first page do not show in the later ones: a
    // removal, a move, and a point made and then moved.
    let gone = later[3].rsplit_once('/').unwrap().1.split_once('.').unwrap();
    let moved = later[5].rsplit_once('/').unwrap().1.split_once('.').unwrap();
    write(s, &[remove(gone.0, gone.1, "default"), set(moved.0, moved.1, "default", "cm", 2)]).await;
    write(s, &[set("edge-0", &uid(100), "default", "cm", 1)]).await;
    write(s, &[set("edge-0", &uid(100), "default", "cm", 2)]).await;
    let mut seen = names(&first.items);
    let mut token = first.continue_token.clone();
    while let Some(t) = token {
        opts.continue_token = Some(t);
        let page = s.list(&OBJECT_SYNCS, &opts).await.unwrap();
        assert_eq!(page.rev, snapshot);
        for o in &page.items {
            assert_eq!(o.value().unwrap()["status"]["objectResourceVersion"], "1", "{}", o.name());
        }
        seen.extend(names(&page.items));
        token = page.continue_token;
    }
    assert_eq!(seen, names(&all.items));
    let exact = ListOptions { resource_version: Some(snapshot), exact: true, ..ListOptions::default() };
    assert_eq!(names(&s.list(&OBJECT_SYNCS, &exact).await.unwrap().items), names(&all.items));
    let now = s.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap();
    assert_eq!(now.items.len(), 25);
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_points_and_their_recent_history() {
    let h = Harness::new(Kind::Sqlite).await;
    let s = &h.store;
    write(s, &[set("edge-1", &uid(1), "default", "a", 1), set("edge-1", &uid(2), "default", "b", 1)]).await;
    let from = s.current_rev().await.unwrap();
    write(s, &[set("edge-1", &uid(3), "default", "c", 1), set("edge-1", &uid(1), "default", "a", 2)]).await;
    write(s, &[remove("edge-1", &uid(2), "default"), set("edge-1", &uid(4), "", "n", 5)]).await;
    write(s, &[set("edge-1", &uid(5), "default", "e", 1)]).await;
    write(s, &[remove("edge-1", &uid(5), "default")]).await;
    s.close().await;

    let again = h.reopen().await;
    assert_eq!(again.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap().items.len(), 2);
    // A watch from before the restart gets every change since, in order,
    // creations included (they have no log row; the rows say when).
    let mut w = again
        .watch(WatchOptions {
            filter: WatchFilter::all(&OBJECT_SYNCS),
            start: WatchStart::After(from),
            bookmarks: false,
        })
        .await
        .unwrap();
    let mut got = Vec::new();
    for _ in 0..5 {
        let e = tokio::time::timeout(WAIT, w.next()).await.unwrap().unwrap();
        let o = e.object().unwrap();
        got.push((
            e.ty,
            o.name().split_once('.').unwrap().1.to_owned(),
            o.value().unwrap()["status"]["objectResourceVersion"].as_str().unwrap().to_owned(),
        ));
    }
    let want = [
        (EventType::Added, uid(3), "1"),
        (EventType::Modified, uid(1), "2"),
        (EventType::Deleted, uid(2), "1"),
        (EventType::Added, uid(5), "1"),
        (EventType::Deleted, uid(5), "1"),
    ];
    assert_eq!(got, want.map(|(t, u, rv)| (t, u, rv.to_owned())));
    let cluster = WatchOptions {
        filter: WatchFilter::all(&CLUSTER_OBJECT_SYNCS),
        start: WatchStart::After(from),
        bookmarks: false,
    };
    let mut w = again.watch(cluster).await.unwrap();
    let e = tokio::time::timeout(WAIT, w.next()).await.unwrap().unwrap();
    assert_eq!((e.ty, e.object().unwrap().name()), (EventType::Added, format!("edge-1.{}", uid(4)).as_str()));
    again.close().await;
}

fn db(h: &Harness) -> rusqlite::Connection {
    rusqlite::Connection::open(h.dir.path().join("state.db")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_points_are_reported_and_skipped() {
    let h = Harness::new(Kind::Sqlite).await;
    let s = &h.store;
    let writes: Vec<PointWrite> = (0..4).map(|i| set("edge-1", &uid(i), "default", "cm", 1)).collect();
    write(s, &writes).await;
    let bad_value = s.get(&OBJECT_SYNCS, "default", &format!("edge-1.{}", uid(1))).await.unwrap();
    let bad_key = s.get(&OBJECT_SYNCS, "default", &format!("edge-1.{}", uid(2))).await.unwrap();
    {
        let db = db(&h);
        // A truncated compact value, and a key naming a node that has no atom.
        let n = db.execute("UPDATE points SET value = X'0080' WHERE mod_rev = ?1", [bad_value.rev() as i64]).unwrap();
        assert_eq!(n, 1);
        let n =
            db.execute("UPDATE points SET key = X'010101630078' WHERE mod_rev = ?1", [bad_key.rev() as i64]).unwrap();
        assert_eq!(n, 1);
    }
    let list = s.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap();
    let want: BTreeSet<String> = [0, 3].iter().map(|i| format!("default/edge-1.{}", uid(*i))).collect();
    assert_eq!(names(&list.items).into_iter().collect::<BTreeSet<_>>(), want);
    match s.get(&OBJECT_SYNCS, "default", bad_value.name()).await.unwrap().json() {
        Err(StoreError::Corrupt { key, .. }) => assert_eq!(key, bad_value.key()),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // The damaged one can be deleted, or written again.
    s.delete(&OBJECT_SYNCS, "default", bad_value.name(), &DeleteOptions::default()).await.unwrap();
    write(s, &[set("edge-1", &uid(1), "default", "cm", 2)]).await;
    assert_eq!(s.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap().items.len(), 3);
    // And a restart reads past both.
    s.close().await;
    let again = h.reopen().await;
    assert_eq!(again.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap().items.len(), 3);
    again.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_kept_as_plain_rows_are_moved_to_the_compact_table() {
    let h = Harness::new(Kind::Sqlite).await;
    let s = &h.store;
    write(s, &[set("edge-1", &uid(1), "default", "a", 4)]).await;
    let made = s.get(&OBJECT_SYNCS, "default", &format!("edge-1.{}", uid(1))).await.unwrap();
    s.close().await;
    {
        // As a version before the compact table stored it.
        let db = db(&h);
        let rev: i64 = db.query_row("SELECT value FROM meta WHERE name = 'rev'", [], |r| r.get(0)).unwrap();
        db.execute("DELETE FROM points", []).unwrap();
        db.execute(
            "INSERT INTO kv (key, value, mod_rev) VALUES (?1, ?2, ?3)",
            rusqlite::params![made.key(), &made.raw()[..], rev],
        )
        .unwrap();
    }
    let again = h.reopen().await;
    let got = again.get(&OBJECT_SYNCS, "default", made.name()).await.unwrap();
    assert_eq!(got.raw(), made.raw());
    let left: i64 = db(&h).query_row("SELECT count(*) FROM kv", [], |r| r.get(0)).unwrap();
    assert_eq!(left, 0);
    again.close().await;
}

/// The database and its WAL, checkpointed (the store's read connections
/// may still be open when it has closed).
fn disk_bytes(path: &std::path::Path) -> u64 {
    let db = rusqlite::Connection::open(path).unwrap();
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    let wal = std::fs::metadata(path.with_extension("db-wal")).map_or(0, |m| m.len());
    std::fs::metadata(path).unwrap().len() + wal
}

/// What 20,000 points written the way CloudHub writes them add to the
/// database file (the WAL checkpointed on close), and what they hold once
/// every one has moved and the history of the moves is compacted.
/// BENCHMARKS.md has the figures at 110,000 points
/// (`cargo bench -p edgehive-cloudhub --bench points`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_point_costs_at_most_100_bytes_on_disk() {
    const NODES: u64 = 200;
    const PER_NODE: u64 = 100;
    const PAIRS: u64 = NODES * PER_NODE;
    let dir = edgehive_testkit::fixtures::TempDir::new("points-size");
    let path = dir.path().join("state.db");
    let open = || Store::open(StoreConfig::new(BackendConfig::Sqlite { path: path.clone(), fsync: false }));
    open().await.unwrap().close().await;
    let empty = disk_bytes(&path);
    let size = || disk_bytes(&path) - empty;
    let used = || {
        let db = rusqlite::Connection::open(&path).unwrap();
        let pragma = |p: &str| db.query_row(&format!("PRAGMA {p}"), [], |r| r.get::<_, i64>(0)).unwrap();
        u64::try_from((pragma("page_count") - pragma("freelist_count")) * pragma("page_size")).unwrap() - empty
    };
    let write_all = |s: Store, rv: u64| async move {
        for chunk in 0..NODES / 10 {
            let writes: Vec<PointWrite> = (chunk * 10..chunk * 10 + 10)
                .flat_map(|n| {
                    (0..PER_NODE).map(move |i| {
                        let pod = format!("web-{:010x}-{:05x}", n * 7919 + i, i * 31);
                        set(&format!("edge-{n}"), &uid(n * PER_NODE + i), "default", &pod, rv)
                    })
                })
                .collect();
            write(&s, &writes).await;
        }
        s
    };
    let s = write_all(open().await.unwrap(), 1).await;
    s.close().await;
    let made = size() as f64 / PAIRS as f64;
    // Every point moves once; the history of the moves is compacted.
    let s = write_all(open().await.unwrap(), 2).await;
    s.compact(s.current_rev().await.unwrap()).await.unwrap();
    s.close().await;
    let settled = used() as f64 / PAIRS as f64;
    let file = size() as f64 / PAIRS as f64;
    eprintln!(
        "{PAIRS} points: {made:.1} bytes each when made; {settled:.1} after moving (file {file:.1}, with freed history)"
    );
    assert!(made <= 100.0, "a point costs {made:.1} bytes on disk");
    assert!(settled <= 100.0, "a point holds {settled:.1} bytes on disk after it moved");
}
