//! The controllers' loop over a real store: informers in, writes out, and
//! the garbage collector's three ways of deleting.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::time::Duration;

use edgehive_events::Recorder;
use edgehive_store::resources::{DEPLOYMENTS, EVENTS, PODS, REPLICA_SETS, ResourceDef};
use edgehive_store::{BackendConfig, DeleteOptions, ListOptions, Object, Propagation, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use edgehive_workloads::Workloads;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Env {
    store: Store,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    _dir: TempDir,
}

impl Env {
    async fn start() -> Env {
        let _ = tracing_subscriber::fmt().with_max_level(tracing::Level::INFO).with_test_writer().try_init();
        let dir = TempDir::new("workloads");
        let store =
            Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("s.db"), fsync: false }))
                .await
                .unwrap();
        store.create(&edgehive_store::resources::NAMESPACES, json!({"metadata": {"name": "default"}})).await.unwrap();
        let stop = CancellationToken::new();
        let events = Recorder::start(store.clone(), stop.clone());
        let task = tokio::spawn(Workloads::new(store.clone()).with_events(events).run(stop.clone()));
        Env { store, stop, task, _dir: dir }
    }

    async fn create(&self, res: &'static ResourceDef, mut v: Value) -> Object {
        edgehive_registry::admit::create(res, &mut v).unwrap();
        self.store.create(res, v).await.unwrap()
    }

    async fn list(&self, res: &'static ResourceDef) -> Vec<Value> {
        let l = self.store.list(res, &ListOptions::default()).await.unwrap();
        l.items.iter().map(|o| o.value().unwrap().clone()).collect()
    }

    /// Waits (up to 20 s) until `check` holds for the list of `res`.
    async fn until(&self, res: &'static ResourceDef, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let items = self.list(res).await;
            if check(&items) {
                return items;
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}: {items:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.unwrap();
        self.store.close().await;
    }
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    })
}

fn live(items: &[Value]) -> usize {
    items.iter().filter(|p| p["metadata"].get("deletionTimestamp").is_none()).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_gets_its_pods_and_each_cascade_deletes_as_kubectl_asks() {
    let env = Env::start().await;
    env.create(&DEPLOYMENTS, deployment("bg", 2)).await;
    env.create(&DEPLOYMENTS, deployment("fg", 2)).await;
    env.create(&DEPLOYMENTS, deployment("orphan", 2)).await;
    let pods = env.until(&PODS, "six pods", |p| p.len() == 6).await;
    for p in &pods {
        assert_eq!(p["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        // Pods made by a controller are defaulted as API writes are.
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["status"]["phase"], "Pending");
    }
    env.until(&DEPLOYMENTS, "status", |ds| ds.iter().all(|d| d["status"]["replicas"] == 2)).await;

    // Background: the Deployment goes at once, its ReplicaSet and pods after.
    env.store.delete(&DEPLOYMENTS, "default", "bg", &DeleteOptions::default()).await.unwrap();
    env.until(&PODS, "bg's pods gone", |p| !p.iter().any(|p| p["metadata"]["labels"]["app"] == "bg")).await;
    env.until(&REPLICA_SETS, "bg's set gone", |r| !r.iter().any(|r| r["metadata"]["labels"]["app"] == "bg")).await;

    // Foreground: the Deployment stays, marked, until its dependents are gone.
    let opts = DeleteOptions { propagation: Some(Propagation::Foreground), ..DeleteOptions::default() };
    env.store.delete(&DEPLOYMENTS, "default", "fg", &opts).await.unwrap();
    let d = env.store.get(&DEPLOYMENTS, "default", "fg").await;
    if let Ok(d) = d {
        assert!(d.is_terminating());
    }
    env.until(&DEPLOYMENTS, "fg gone", |ds| !ds.iter().any(|d| d["metadata"]["name"] == "fg")).await;
    let pods = env.list(&PODS).await;
    assert!(!pods.iter().any(|p| p["metadata"]["labels"]["app"] == "fg"), "owner went last");

    // Orphan: the Deployment goes; its ReplicaSet stays, without the owner.
    let opts = DeleteOptions { propagation: Some(Propagation::Orphan), ..DeleteOptions::default() };
    env.store.delete(&DEPLOYMENTS, "default", "orphan", &opts).await.unwrap();
    env.until(&DEPLOYMENTS, "orphan gone", |ds| ds.is_empty()).await;
    let sets = env
        .until(&REPLICA_SETS, "orphaned set", |r| r.len() == 1 && r[0]["metadata"].get("ownerReferences").is_none())
        .await;
    assert_eq!(sets[0]["metadata"]["labels"]["app"], "orphan");
    let pods = env.list(&PODS).await;
    assert_eq!(live(&pods), 2, "the orphaned set keeps its pods");
    env.stop().await;
}

/// `(kind of the object, reason, message)` of each Event.
fn said(events: &[Value]) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    events.iter().map(|e| (s(&e["involvedObject"]["kind"]), s(&e["reason"]), s(&e["message"]))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_record_events_in_kubernetes_words() {
    let env = Env::start().await;
    env.create(&DEPLOYMENTS, deployment("web", 2)).await;
    let pods = env.until(&PODS, "two pods", |p| p.len() == 2).await;
    let rs = env.until(&REPLICA_SETS, "the set", |r| r.len() == 1).await;
    let rs_name = rs[0]["metadata"]["name"].as_str().unwrap().to_string();
    let mut want = vec![(
        "Deployment".to_string(),
        "ScalingReplicaSet".to_string(),
        format!("Scaled up replica set {rs_name} from 0 to 2"),
    )];
    for p in &pods {
        let pod = p["metadata"]["name"].as_str().unwrap();
        want.push(("ReplicaSet".into(), "SuccessfulCreate".into(), format!("Created pod: {pod}")));
    }
    let events = env.until(&EVENTS, "three events", |e| e.len() >= 3).await;
    let mut got = said(&events);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let scaled = events.iter().find(|e| e["reason"] == "ScalingReplicaSet").unwrap();
    assert_eq!(scaled["source"]["component"], "deployment-controller");
    assert_eq!(scaled["involvedObject"]["name"], "web");
    assert_eq!(scaled["type"], "Normal");
    assert_eq!(scaled["count"], 1);
    let created = events.iter().find(|e| e["reason"] == "SuccessfulCreate").unwrap();
    assert_eq!(created["source"]["component"], "replicaset-controller");
    assert_eq!(created["involvedObject"]["uid"], rs[0]["metadata"]["uid"]);

    // Scaled down: the Deployment says so, the ReplicaSet names the pod it deleted.
    env.store
        .update_with(&DEPLOYMENTS, "default", "web", |cur| {
            let mut v = cur.value()?.clone();
            v["spec"]["replicas"] = json!(1);
            Ok::<_, edgehive_store::StoreError>(Some(v))
        })
        .await
        .unwrap();
    let down = format!("Scaled down replica set {rs_name} from 2 to 1");
    let events = env
        .until(&EVENTS, "the scale-down told", |e| {
            let s = said(e);
            s.iter().any(|(_, _, m)| *m == down) && s.iter().any(|(_, r, _)| r == "SuccessfulDelete")
        })
        .await;
    let deleted = events.iter().find(|e| e["reason"] == "SuccessfulDelete").unwrap();
    assert!(deleted["message"].as_str().unwrap().starts_with(&format!("Deleted pod: {rs_name}-")), "{deleted}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_adopts_what_exists_and_creates_nothing_twice() {
    let env = Env::start().await;
    env.create(&DEPLOYMENTS, deployment("web", 3)).await;
    env.until(&PODS, "three pods", |p| p.len() == 3).await;
    let Env { store, stop, task, _dir } = env;
    stop.cancel();
    task.await.unwrap();
    // A pod made by hand with matching labels is adopted, not duplicated.
    let rs = store.list(&REPLICA_SETS, &ListOptions::default()).await.unwrap();
    let hash = rs.items[0].value().unwrap()["metadata"]["labels"]["pod-template-hash"].clone();
    let mut stray = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "stray", "namespace": "default", "labels": {"app": "web", "pod-template-hash": hash}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
    edgehive_registry::admit::create(&PODS, &mut stray).unwrap();
    store.create(&PODS, stray).await.unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(Workloads::new(store.clone()).run(stop.clone()));
    let env = Env { store, stop, task, _dir };
    let pods = env
        .until(&PODS, "stray adopted, one deleted", |p| {
            live(p) == 3 && p.iter().all(|p| p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet")
        })
        .await;
    assert_eq!(live(&pods), 3);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dependent_whose_owner_never_existed_is_collected_and_one_with_a_living_owner_is_not() {
    let env = Env::start().await;
    let owner = env.create(&REPLICA_SETS, json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "keeper", "namespace": "default"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "keeper"}},
            "template": {"metadata": {"labels": {"app": "keeper"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
        .await;
    let uid = owner.uid().unwrap().to_string();
    let cm = |name: &str, owner_name: &str, owner_uid: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner_name, "uid": owner_uid}]}})
    };
    let configmaps = &edgehive_store::resources::CONFIGMAPS;
    env.create(configmaps, cm("kept", "keeper", &uid)).await;
    env.create(configmaps, cm("dangling", "ghost", "no-such-uid")).await;
    env.create(configmaps, cm("wrong-uid", "keeper", "another-uid")).await;
    env.until(configmaps, "dangling ones collected", |c| c.len() == 1).await;
    assert_eq!(env.list(configmaps).await[0]["metadata"]["name"], "kept");
    env.stop().await;
}
