//! The recorder over a real store: what the correlator decides becomes
//! Events as `kubectl describe` reads them, and nothing a controller does
//! waits for it.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use edgehive_events::{Note, ObjectRef, QUEUE, Recorder};
use edgehive_store::resources::{EVENTS, NAMESPACES};
use edgehive_store::{BackendConfig, DeleteOptions, ListOptions, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

async fn store(dir: &TempDir) -> Store {
    let store = Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("s.db"), fsync: false }))
        .await
        .unwrap();
    store.create(&NAMESPACES, json!({"metadata": {"name": "default"}})).await.unwrap();
    store
}

fn rs(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
        resource_version: "7".into(),
    }
}

async fn events_about(store: &Store, name: &str) -> Vec<Value> {
    let l = store.list(&EVENTS, &ListOptions::default()).await.unwrap();
    l.items.iter().map(|o| o.value().unwrap().clone()).filter(|e| e["involvedObject"]["name"] == name).collect()
}

/// Waits until `check` holds for the Events about `name`.
async fn until(store: &Store, name: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let events = events_about(store, name).await;
        if check(&events) {
            return events;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out; Events about {name}: {events:#?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_are_counted_spam_is_dropped_and_a_vanished_event_is_written_again() {
    let dir = TempDir::new("events");
    let store = store(&dir).await;
    let stop = CancellationToken::new();
    let recorder = Recorder::start(store.clone(), stop.clone()).named("replicaset-controller");

    // Thirty times the same failure: one Event counting the 25 the budget allows.
    for _ in 0..30 {
        recorder.record(Note::warning(rs("web"), "FailedCreate", "Error creating: quota exceeded"));
    }
    let m = recorder.metrics().clone();
    let settled = || m.get("created") + m.get("counted") + m.get("spam") == 30;
    while !settled() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = until(&store, "web", |e| e.len() == 1 && e[0]["count"] == 25).await;
    let e = &events[0];
    assert_eq!((e["type"].as_str(), e["reason"].as_str()), (Some("Warning"), Some("FailedCreate")));
    assert_eq!(e["source"]["component"], "replicaset-controller");
    assert_eq!(
        e["involvedObject"],
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
        "namespace": "default", "uid": "uid-web", "resourceVersion": "7"})
    );
    assert!(e["metadata"]["name"].as_str().unwrap().starts_with("web."));
    assert_eq!((m.get("created"), m.get("counted"), m.get("spam")), (1, 24, 5));

    // Another object has its own budget.
    recorder.record(Note::normal(rs("api"), "SuccessfulCreate", "Created pod: api-x1"));
    until(&store, "api", |e| e.len() == 1 && e[0]["count"] == 1).await;

    // A counted Event that went meanwhile (expired, deleted) is written again.
    recorder.record(Note::normal(rs("db"), "SuccessfulCreate", "Created pod: db-x1"));
    let first = until(&store, "db", |e| e.len() == 1).await;
    let name = first[0]["metadata"]["name"].as_str().unwrap().to_string();
    store.delete(&EVENTS, "default", &name, &DeleteOptions::default()).await.unwrap();
    recorder.record(Note::normal(rs("db"), "SuccessfulCreate", "Created pod: db-x1"));
    let again = until(&store, "db", |e| e.len() == 1).await;
    assert_eq!((again[0]["metadata"]["name"].as_str(), again[0]["count"].as_i64()), (Some(name.as_str()), Some(2)));
    stop.cancel();
    store.close().await;
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_and_never_waits() {
    let dir = TempDir::new("events-full");
    let store = store(&dir).await;
    let stop = CancellationToken::new();
    let recorder = Recorder::start(store.clone(), stop.clone()).named("job-controller");
    // On this one thread the writer cannot run until the loop ends: the
    // queue takes its 1,000, the rest are dropped at once.
    for i in 0..QUEUE + 500 {
        recorder.record(Note::normal(rs(&format!("j{i}")), "SuccessfulCreate", "Created pod: x"));
    }
    assert_eq!(recorder.metrics().get("queue_full"), 500);
    // The discarding recorder (no writer) takes notes and does nothing.
    Recorder::discard().record(Note::normal(rs("x"), "Nothing", "nothing"));
    stop.cancel();
    store.close().await;
}
