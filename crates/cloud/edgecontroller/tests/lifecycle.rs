//! Node lifecycle (NotReady without heartbeats, no eviction) and the
//! scheduler, against the store.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use edgehive_cloudhub::CloudHubConfig;
use edgehive_edgecontroller::LifecycleConfig;
use edgehive_model::{Content, Message};
use edgehive_store::resources::{EVENTS, NODES, PODS};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

async fn node_ready(cloud: &Cloud, name: &str) -> String {
    let n = cloud.store.get(&NODES, "", name).await.unwrap();
    let v = n.value().unwrap();
    v["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap()["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_node_goes_not_ready_keeps_its_pods_and_comes_back() {
    let lifecycle = LifecycleConfig {
        grace: Duration::from_millis(400),
        interval: Duration::from_millis(100),
        evict_after: None,
        ..Default::default()
    };
    let cloud = Cloud::start_with(CloudHubConfig::default(), lifecycle).await;
    cloud.ready_edge_node("edge-1", json!({})).await;
    let pod = cloud.pod("web", "edge-1", None).await;
    eventually_async("NotReady after the grace period", WAIT, || {
        let cloud = &cloud;
        async move { node_ready(cloud, "edge-1").await == "Unknown" }
    })
    .await;
    // Well past the point where Kubernetes would evict: the pod stays.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let still = cloud.store.get(&PODS, "default", "web").await.unwrap();
    assert_eq!(still.uid(), pod.uid());
    assert!(!still.is_terminating(), "no eviction by default");

    // The edge reports again: Ready.
    let edge = Edge::connect(&cloud, "edge-1").await;
    let node = cloud.store.get(&NODES, "", "edge-1").await.unwrap();
    // The edge reports like a kubelet: again and again, each with a fresh heartbeat.
    eventually_async("Ready again", WAIT, || {
        let (cloud, edge, uid) = (&cloud, &edge, node.uid().unwrap().to_owned());
        async move {
            let now = edgehive_store::now_rfc3339();
            let status = json!({"UID": uid, "Status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
            let m = Message::new()
                .with_route("edged", "meta", "default/nodestatus/edge-1", "update")
                .with_content(Content::from_serialize(&status).unwrap());
            edge.tx.try_write(m).unwrap();
            tokio::time::sleep(Duration::from_millis(30)).await;
            node_ready(cloud, "edge-1").await == "True"
        }
    })
    .await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_happens_only_when_configured() {
    let lifecycle = LifecycleConfig {
        grace: Duration::from_millis(200),
        interval: Duration::from_millis(100),
        evict_after: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let cloud = Cloud::start_with(CloudHubConfig::default(), lifecycle).await;
    cloud.ready_edge_node("edge-1", json!({})).await;
    cloud.pod("web", "edge-1", None).await;
    eventually_async("pod evicted", WAIT, || {
        let cloud = &cloud;
        async move { cloud.store.get(&PODS, "default", "web").await.map(|p| p.is_terminating()).unwrap_or(true) }
    })
    .await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it_when_their_time_is_up() {
    let lifecycle = LifecycleConfig { interval: Duration::from_millis(50), ..LifecycleConfig::default() };
    let cloud = Cloud::start_with(CloudHubConfig::default(), lifecycle).await;
    cloud.ready_edge_node("edge-1", json!({})).await;
    let with_tolerations = |name: &str, tolerations: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "edge-1", "tolerations": tolerations, "containers": [{"name": "c", "image": "busybox"}]}})
    };
    cloud.pod("plain", "edge-1", None).await;
    let forever = json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]);
    cloud.store.create(&PODS, with_tolerations("forever", forever)).await.unwrap();
    let brief = json!([{"key": "maintenance", "operator": "Equal", "value": "true", "effect": "NoExecute", "tolerationSeconds": 1}]);
    cloud.store.create(&PODS, with_tolerations("brief", brief)).await.unwrap();
    let gone_or_going = |name: &'static str| {
        let cloud = &cloud;
        async move { cloud.store.get(&PODS, "default", name).await.map(|p| p.is_terminating()).unwrap_or(true) }
    };
    // A NoSchedule taint evicts nothing; then `kubectl taint node edge-1 maintenance=true:NoExecute`.
    let taint = |effect: &'static str| {
        let cloud = &cloud;
        async move {
            cloud
                .store
                .update_with::<_, edgehive_store::StoreError>(&NODES, "", "edge-1", |cur| {
                    let mut v = cur.to_value()?;
                    v["spec"]["taints"] = json!([{"key": "maintenance", "value": "true", "effect": effect}]);
                    Ok(Some(v))
                })
                .await
                .unwrap();
        }
    };
    taint("NoSchedule").await;
    taint("NoExecute").await;
    let tainted = tokio::time::Instant::now();
    eventually_async("the pod without a toleration evicted", WAIT, || gone_or_going("plain")).await;
    assert!(!gone_or_going("brief").await, "brief tolerates it for a second");
    eventually_async("the pod that tolerates it for a second evicted", WAIT, || gone_or_going("brief")).await;
    assert!(tainted.elapsed() >= Duration::from_secs(1), "not before its tolerationSeconds");
    assert!(!gone_or_going("forever").await, "a toleration without seconds keeps the pod");
    let said = pod_events(&cloud, "plain", |e| !e.is_empty()).await;
    assert_eq!(
        said,
        vec![(
            "taint-eviction-controller".into(),
            "TaintManagerEviction".into(),
            "Marking for deletion Pod default/plain".into()
        )]
    );
    cloud.stop().await;
}

/// `(component, reason, message)` of the Events about pod `name`, once
/// `check` holds for them.
async fn pod_events(
    cloud: &Cloud,
    name: &str,
    check: impl Fn(&[(String, String, String)]) -> bool,
) -> Vec<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let list = cloud.store.list(&EVENTS, &Default::default()).await.unwrap();
        let said: Vec<_> = list
            .items
            .iter()
            .map(|o| o.value().unwrap().clone())
            .filter(|e| e["involvedObject"]["kind"] == "Pod" && e["involvedObject"]["name"] == name)
            .map(|e| (s(&e["source"]["component"]), s(&e["reason"]), s(&e["message"])))
            .collect();
        if check(&said) {
            return said;
        }
        assert!(tokio::time::Instant::now() < end, "timed out waiting for the Events of {name}: {said:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn pod_value(cloud: &Cloud, name: &str) -> Value {
    cloud.store.get(&PODS, "default", name).await.unwrap().value().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbound_pods_go_to_the_least_loaded_matching_ready_edge_node() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.ready_edge_node("a", json!({"zone": "x"})).await;
    cloud.ready_edge_node("b", json!({"zone": "x"})).await;
    cloud.edge_node("c").await; // never reported: not Ready
    cloud.pod("a-busy", "a", None).await;
    let edge_b = Edge::connect(&cloud, "b").await;

    let create = |name: &str, selector: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeSelector": selector, "containers": [{"name": "c", "image": "i"}]}})
    };
    cloud.store.create(&PODS, create("free", json!({"zone": "x"}))).await.unwrap();
    eventually_async("bound to b (fewest pods)", WAIT, || {
        let cloud = &cloud;
        async move { pod_value(cloud, "free").await["spec"]["nodeName"] == "b" }
    })
    .await;
    eventually("delivered to b", WAIT, || edge_b.has("default/pod/free").is_some()).await;
    let v = pod_value(&cloud, "free").await;
    assert_eq!(v["status"]["conditions"][0]["type"], "PodScheduled");
    assert_eq!(v["status"]["conditions"][0]["status"], "True");

    // Nothing matches: Pending, and the condition says why.
    cloud.store.create(&PODS, create("picky", json!({"zone": "z"}))).await.unwrap();
    eventually_async("unschedulable condition", WAIT, || {
        let cloud = &cloud;
        async move {
            let v = pod_value(cloud, "picky").await;
            v["status"]["phase"] == "Pending" && v["status"]["conditions"][0]["reason"] == "Unschedulable"
        }
    })
    .await;
    let msg = pod_value(&cloud, "picky").await["status"]["conditions"][0]["message"].as_str().unwrap().to_owned();
    assert!(msg.starts_with("0/3 nodes are available:") && msg.contains("didn't match"), "{msg}");
    // The scheduler's Events, as `kubectl describe pod` shows them.
    let said = pod_events(&cloud, "free", |e| !e.is_empty()).await;
    assert_eq!(
        said,
        vec![("default-scheduler".into(), "Scheduled".into(), "Successfully assigned default/free to b".into())]
    );
    let said = pod_events(&cloud, "picky", |e| !e.is_empty()).await;
    assert_eq!(said, vec![("default-scheduler".into(), "FailedScheduling".into(), msg.clone())]);
    // Its own condition write is no reason to try again: a pod created after
    // it is placed, and picky was tried once.
    cloud.store.create(&PODS, create("after", json!({"zone": "x"}))).await.unwrap();
    eventually_async("after bound", WAIT, || {
        let cloud = &cloud;
        async move { pod_value(cloud, "after").await["spec"]["nodeName"].is_string() }
    })
    .await;
    assert_eq!(cloud.metric("edgehive_edgecontroller_schedule_attempts_total{result=\"unschedulable\"}"), 1);
    // Any other change of the pod is a reason: relabelled, it is tried again.
    cloud
        .store
        .update_with::<_, edgehive_store::StoreError>(&PODS, "default", "picky", |cur| {
            let mut v = cur.to_value()?;
            v["metadata"]["labels"] = json!({"tier": "web"});
            Ok(Some(v))
        })
        .await
        .unwrap();
    eventually("picky tried again after a relabel", WAIT, || {
        cloud.metric("edgehive_edgecontroller_schedule_attempts_total{result=\"unschedulable\"}") == 2
    })
    .await;
    assert!(pod_value(&cloud, "picky").await["spec"]["nodeName"].is_null());

    // A node that starts to match takes it.
    cloud
        .store
        .update_with::<_, edgehive_store::StoreError>(&NODES, "", "a", |cur| {
            let mut v = cur.to_value()?;
            v["metadata"]["labels"]["zone"] = json!("z");
            Ok(Some(v))
        })
        .await
        .unwrap();
    eventually_async("picky bound to a", WAIT, || {
        let cloud = &cloud;
        async move { pod_value(cloud, "picky").await["spec"]["nodeName"] == "a" }
    })
    .await;
    pod_events(&cloud, "picky", |e| e.iter().any(|(_, r, m)| r == "Scheduled" && m.ends_with(" to a"))).await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_node_is_alive_without_reports_and_its_disconnect_starts_the_grace_period() {
    let lifecycle = LifecycleConfig {
        grace: Duration::from_millis(400),
        interval: Duration::from_millis(100),
        evict_after: None,
        ..Default::default()
    };
    let cloud = Cloud::start_with(CloudHubConfig::default(), lifecycle).await;
    // The session first, then the node's Ready report (as an edge reports
    // on connect): a slow connect under load cannot outlast the grace
    // period before the session counts.
    let edge = Edge::connect(&cloud, "edge-1").await;
    cloud.ready_edge_node("edge-1", json!({})).await;
    // Connected, and CloudHub keeps the session (the edge's keepalives): no
    // status or Lease needed to stay Ready, well past the grace period.
    for _ in 0..12 {
        edge.tx.try_write(keepalive()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(node_ready(&cloud, "edge-1").await, "True");
    // Gone: NotReady one grace period after the session ended.
    let _db = edge.disconnect().await;
    eventually_async("NotReady after the session ended", WAIT, || {
        let cloud = &cloud;
        async move { node_ready(cloud, "edge-1").await == "Unknown" }
    })
    .await;
    cloud.stop().await;
}

/// A node whose edge never reports — a KubeEdge EdgeCore with edged off: a
/// session and keepalives, no status, no Lease — has no condition at all;
/// one grace period after its creation it gets kubelet's conditions Unknown
/// ("NodeStatusNeverUpdated"), as Kubernetes' node lifecycle controller
/// sets them, live session or not. A report then makes it Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_never_reports_gets_its_conditions_unknown_after_the_grace_period() {
    let lifecycle = LifecycleConfig {
        grace: Duration::from_millis(400),
        interval: Duration::from_millis(100),
        evict_after: None,
        ..Default::default()
    };
    let cloud = Cloud::start_with(CloudHubConfig::default(), lifecycle).await;
    let edge = Edge::connect(&cloud, "quiet").await;
    cloud.edge_node("quiet").await;
    let node = cloud.store.get(&NODES, "", "quiet").await.unwrap();
    let created = node.value().unwrap()["metadata"]["creationTimestamp"].clone();
    assert!(node.value().unwrap().pointer("/status/conditions").is_none());

    eventually_async("conditions Unknown, never updated", WAIT, || {
        let cloud = &cloud;
        async move {
            let n = cloud.store.get(&NODES, "", "quiet").await.unwrap();
            n.value().unwrap().pointer("/status/conditions").is_some()
        }
    })
    .await;
    let v = cloud.store.get(&NODES, "", "quiet").await.unwrap().value().unwrap().clone();
    let conds = v["status"]["conditions"].as_array().unwrap();
    let types: Vec<&str> = conds.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"]);
    for c in conds {
        assert_eq!(c["status"], "Unknown");
        assert_eq!(c["reason"], "NodeStatusNeverUpdated");
        assert_eq!(c["message"], "Kubelet never posted node status.");
        assert_eq!(c["lastHeartbeatTime"], created);
    }
    let at = |t: &Value| edgehive_store::parse_rfc3339(t.as_str().unwrap()).unwrap();
    assert!(at(&conds[0]["lastTransitionTime"]) >= at(&created));
    assert_eq!(cloud.hub.connected_nodes(), ["quiet"], "its session went on all along");

    // edged starts and reports: Ready.
    let uid = node.uid().unwrap().to_owned();
    eventually_async("Ready", WAIT, || {
        let (cloud, edge, uid) = (&cloud, &edge, uid.clone());
        async move {
            let now = edgehive_store::now_rfc3339();
            let status = json!({"UID": uid, "Status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
            let m = Message::new()
                .with_route("edged", "meta", "default/nodestatus/quiet", "update")
                .with_content(Content::from_serialize(&status).unwrap());
            edge.tx.try_write(m).unwrap();
            node_ready(cloud, "quiet").await == "True"
        }
    })
    .await;
    cloud.stop().await;
}

/// A lifecycle that checks every 50 ms, renews Leases every 300 ms (held
/// 40 s) within `lease_writes_per_second`, and moves `lastHeartbeatTime`
/// every `status_report`.
fn beating(status_report: Duration, lease_writes_per_second: u32) -> LifecycleConfig {
    LifecycleConfig {
        interval: Duration::from_millis(50),
        heartbeat: edgehive_edgecontroller::heartbeat::HeartbeatConfig {
            lease_renew: Duration::from_millis(300),
            lease_duration: Duration::from_secs(40),
            status_report,
            lease_writes_per_second,
        },
        ..LifecycleConfig::default()
    }
}

/// A node whose session proves it alive renews nothing itself: the cloud
/// keeps its Lease (created owned by the Node, then renewed) and its
/// conditions' `lastHeartbeatTime` current while the session lives, and
/// stops when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cloud_renews_the_lease_and_heartbeat_of_a_node_kept_alive_by_its_session() {
    use edgehive_store::resources::LEASES;
    let cloud = Cloud::start_with(CloudHubConfig::default(), beating(Duration::from_millis(300), 1000)).await;
    cloud.ready_edge_node("edge-1", json!({})).await;
    cloud.ready_edge_node("edge-2", json!({})).await;
    let node = cloud.store.get(&NODES, "", "edge-1").await.unwrap();
    let first_beat = node.value().unwrap()["status"]["conditions"][0]["lastHeartbeatTime"].clone();
    let lease = |name: &'static str| {
        let cloud = &cloud;
        async move { cloud.store.get(&LEASES, "kube-node-lease", name).await.ok().map(|l| l.to_value().unwrap()) }
    };
    assert!(lease("edge-1").await.is_none());
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually_async("the cloud creates the node's Lease", WAIT, || async { lease("edge-1").await.is_some() }).await;
    let created = lease("edge-1").await.unwrap();
    assert_eq!(created["spec"]["holderIdentity"], "edge-1");
    assert_eq!(created["spec"]["leaseDurationSeconds"], 40);
    assert_eq!(created["metadata"]["ownerReferences"][0]["kind"], "Node");
    assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], node.uid().unwrap());
    let renewed = created["spec"]["renewTime"].clone();
    eventually_async("the cloud renews it", WAIT, || async {
        lease("edge-1").await.is_some_and(|l| l["spec"]["renewTime"] != renewed)
    })
    .await;
    eventually_async("and moves lastHeartbeatTime", WAIT, || async {
        let n = cloud.store.get(&NODES, "", "edge-1").await.unwrap();
        n.value().unwrap()["status"]["conditions"][0]["lastHeartbeatTime"] != first_beat
    })
    .await;
    assert!(lease("edge-2").await.is_none(), "a node without a session gets no Lease from the cloud");
    assert!(cloud.metric("edgehive_edgecontroller_heartbeats_total{beat=\"lease\"}") >= 2);
    // The session ends: the cloud stops renewing.
    edge.disconnect().await;
    let mut last = lease("edge-1").await.unwrap()["spec"]["renewTime"].clone();
    let mut stable_since = tokio::time::Instant::now();
    let deadline = stable_since + WAIT;
    // Three renewal periods without one.
    while stable_since.elapsed() < Duration::from_millis(900) {
        assert!(tokio::time::Instant::now() < deadline, "renewals go on after the session ended");
        let now = lease("edge-1").await.unwrap()["spec"]["renewTime"].clone();
        if now != last {
            last = now;
            stable_since = tokio::time::Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cloud.stop().await;
}

/// The lifecycle asks CloudHub whether a node has a session before it
/// marks the node NotReady: a controller behind on its mailbox (100,000
/// nodes connecting) has not read every `connected` yet, and would mark
/// live nodes whose notice waits there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_connected_notice_is_not_read_yet_is_not_marked_not_ready() {
    let lifecycle = LifecycleConfig {
        grace: Duration::from_millis(400),
        interval: Duration::from_millis(100),
        evict_after: None,
        ..Default::default()
    };
    // No edge connects: CloudHub sends no notice. "live" has a session all
    // the same, as far as the presence says; "gone" has none.
    let connected = std::sync::Arc::new(std::sync::Mutex::new(vec!["live".to_owned()]));
    let asked = connected.clone();
    let cloud =
        Cloud::start_with_presence(lifecycle, move |node| asked.lock().unwrap().iter().any(|n| n == node)).await;
    cloud.ready_edge_node("live", json!({})).await;
    cloud.ready_edge_node("gone", json!({})).await;
    eventually_async("the node without a session NotReady", WAIT, || {
        let cloud = &cloud;
        async move { node_ready(cloud, "gone").await == "Unknown" }
    })
    .await;
    // Many checks, each past the grace period: the live one stays Ready.
    for _ in 0..5 {
        assert_eq!(node_ready(&cloud, "live").await, "True");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its session ends: it is marked as any other.
    connected.lock().unwrap().clear();
    eventually_async("NotReady once its session is gone", WAIT, || {
        let cloud = &cloud;
        async move { node_ready(cloud, "live").await == "Unknown" }
    })
    .await;
    cloud.stop().await;
}

/// Past the Lease write budget the cloud renews each Lease less often and
/// writes it held for longer, in proportion: with a budget of one write a
/// second, one session renewed every 300 ms would need three; it is renewed
/// every second instead, and its Lease is held 134 s (40 s × 1 / 0.3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_lease_write_budget_leases_are_renewed_less_often_and_held_longer() {
    use edgehive_store::resources::LEASES;
    let cloud = Cloud::start_with(CloudHubConfig::default(), beating(Duration::from_secs(300), 1)).await;
    cloud.ready_edge_node("edge-1", json!({})).await;
    let _edge = Edge::connect(&cloud, "edge-1").await;
    let lease = || async { cloud.store.get(&LEASES, "kube-node-lease", "edge-1").await.ok() };
    eventually_async("the cloud creates the node's Lease", WAIT, || async { lease().await.is_some() }).await;
    let created = lease().await.unwrap().to_value().unwrap();
    assert_eq!(created["spec"]["leaseDurationSeconds"], 134);
    // Not renewed every 300 ms: at most three writes in two seconds (a
    // slow machine writes fewer, never more).
    let start = cloud.metric("edgehive_edgecontroller_heartbeats_total{beat=\"lease\"}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = cloud.metric("edgehive_edgecontroller_heartbeats_total{beat=\"lease\"}") - start;
    assert!(writes <= 3, "{writes} renewals in 2 s");
    cloud.stop().await;
}

/// The node check waits for the controller's first lists: a node whose
/// status heartbeat is old but whose Lease is fresh (a KubeEdge EdgeCore
/// with leases) is alive, though its Lease is listed after its Node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_alive_by_its_lease_is_not_marked_before_the_leases_are_listed() {
    use edgehive_store::resources::LEASES;
    use futures_util::StreamExt;
    let (store, dir) = Alone::store().await;
    let hour_ago = edgehive_store::rfc3339(time::OffsetDateTime::now_utc() - Duration::from_secs(3600));
    for name in ["by-lease", "silent"] {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"node-role.kubernetes.io/edge": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": hour_ago, "lastTransitionTime": hour_ago}]}});
        store.create(&NODES, node).await.unwrap();
    }
    let lease = |ns: &str, name: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": name, "renewTime": edgehive_store::now_rfc3339()}})
    };
    store.create(&LEASES, lease("kube-node-lease", "by-lease")).await.unwrap();
    // Leases of others, so that the Leases take longer to list than the Nodes.
    futures_util::stream::iter(0..3000)
        .for_each_concurrent(64, |i| {
            let (store, lease) = (store.clone(), lease("other", &format!("l{i}")));
            async move {
                store.create(&LEASES, lease).await.unwrap();
            }
        })
        .await;
    let lifecycle = LifecycleConfig { interval: Duration::from_millis(1), evict_after: None, ..Default::default() };
    let alone = Alone::start(store, dir, lifecycle, Vec::new()).await;
    let ready = |name: &'static str| {
        let store = alone.store.clone();
        async move {
            let n = store.get(&NODES, "", name).await.unwrap().to_value().unwrap();
            n["status"]["conditions"][0]["status"].as_str().unwrap().to_owned()
        }
    };
    eventually_async("the silent node checked", WAIT, || async { ready("silent").await == "Unknown" }).await;
    assert_eq!(ready("by-lease").await, "True", "its Lease is fresh");
    alone.stop().await;
}

/// Nodes the lifecycle marked are not read again by the checks that come
/// before the watch brings their Nodes back: a fleet marked at once (a
/// cloud restarted while its edges are away) is read once, not at every
/// check until the controller has caught up with its own writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_marked_unknown_is_not_read_again_while_its_change_is_on_the_way() {
    const NODES_SILENT: u64 = 300;
    let (store, dir) = Alone::store().await;
    let hour_ago = edgehive_store::rfc3339(time::OffsetDateTime::now_utc() - Duration::from_secs(3600));
    for i in 0..NODES_SILENT {
        let node = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("n{i}"), "labels": {"node-role.kubernetes.io/edge": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": hour_ago, "lastTransitionTime": hour_ago}]}});
        store.create(&NODES, node).await.unwrap();
    }
    let lifecycle = LifecycleConfig { interval: Duration::from_millis(1), evict_after: None, ..Default::default() };
    let alone = Alone::start(store, dir, lifecycle, Vec::new()).await;
    eventually_async("every node marked", WAIT, || async {
        alone.metric("edgehive_edgecontroller_node_not_ready_total") == NODES_SILENT
    })
    .await;
    // An observation window, not a wait for something: checks run every
    // millisecond in it while the marks' changes come back, and with the
    // marks known no check reads a node again, however long it is.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        alone.metric("edgehive_edgecontroller_lifecycle_reads_total"),
        NODES_SILENT,
        "each node read once: marked, then known Unknown"
    );
    alone.stop().await;
}
