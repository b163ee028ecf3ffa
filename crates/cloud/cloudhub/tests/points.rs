//! Success points: written behind to the store at a bounded rate, loaded
//! back after a restart, and a damaged stored point is reported and skipped.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use edgehive_cloudhub::SuccessPoints;
use edgehive_cloudhub::pool::PointRef;
use edgehive_model::Text;
use edgehive_store::resources::OBJECT_SYNCS;
use edgehive_store::{BackendConfig, ListOptions, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use tokio_util::sync::CancellationToken;

async fn open(dir: &TempDir) -> Store {
    Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
        .await
        .unwrap()
}

fn point(i: usize) -> PointRef {
    PointRef {
        uid: Text::from(format!("uid-{i}")),
        namespace: Text::from("default"),
        name: Text::from(format!("p{i}")),
        api_version: Text::from("v1"),
        kind: Text::from("Pod"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_paced_then_flushed_and_survive_a_restart() {
    let dir = TempDir::new("cloudhub-points");
    let store = open(&dir).await;
    let points = SuccessPoints::load(store.clone()).await.unwrap();
    let node = Text::from("edge-1");
    for i in 0..50 {
        points.record(&node, &point(i), 7);
    }
    assert_eq!(points.unflushed(), 50);
    let stop = CancellationToken::new();
    // 100 writes/s in rounds of 100 ms: at most 10 per round.
    let writer = tokio::spawn(points.clone().run_writer(stop.clone(), Duration::from_millis(100), 100));
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(points.unflushed() >= 30, "no more than the rate allows: {} left", points.unflushed());
    stop.cancel();
    writer.await.unwrap();
    assert_eq!(points.unflushed(), 0, "shutdown flushes the rest");
    let stored = store.list(&OBJECT_SYNCS, &ListOptions::default()).await.unwrap();
    assert_eq!(stored.items.len(), 50);

    // A damaged stored point is skipped; the others load.
    let bad = serde_json::json!({"apiVersion": "reliablesyncs.kubeedge.io/v1alpha1", "kind": "ObjectSync",
        "metadata": {"name": "no-dot-here", "namespace": "default"}, "status": {"objectResourceVersion": "x"}});
    store.create(&OBJECT_SYNCS, bad).await.unwrap();
    let again = SuccessPoints::load(store.clone()).await.unwrap();
    assert_eq!(again.len(), 50);
    assert_eq!(again.get("edge-1", "uid-3"), Some(7));
    store.close().await;
}

/// An edge's inventory is the truth about its store: points of objects it
/// does not hold, or holds older, are forgotten (a point whose removal a
/// crash kept from the store would otherwise keep the object from ever
/// being sent again); points of what it holds stay, and other nodes' too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_forgets_the_points_of_what_the_edge_does_not_hold() {
    use edgehive_cloudhub::points::UidKey;
    let dir = TempDir::new("cloudhub-points-inventory");
    let store = open(&dir).await;
    let points = SuccessPoints::load(store.clone()).await.unwrap();
    let (a, b) = (Text::from("edge-a"), Text::from("edge-b"));
    for i in 0..4 {
        points.record(&a, &point(i), 10);
    }
    points.record(&b, &point(0), 10);
    let held: std::collections::HashMap<UidKey, u64> =
        [(UidKey::of("uid-0"), 10), (UidKey::of("uid-1"), 12), (UidKey::of("uid-2"), 9)].into();
    assert_eq!(points.retain_held("edge-a", &held), 2, "uid-2 is older there, uid-3 is not there");
    assert_eq!(points.get("edge-a", "uid-0"), Some(10));
    assert_eq!(points.get("edge-a", "uid-1"), Some(10));
    assert_eq!((points.get("edge-a", "uid-2"), points.get("edge-a", "uid-3")), (None, None));
    assert_eq!(points.get("edge-b", "uid-0"), Some(10), "another node's points stay");
    store.close().await;
}
