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
