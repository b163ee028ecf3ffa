//! Reliable delivery end to end: store → EdgeController → CloudHub →
//! viaduct → a simulated edge that persists and ACKs.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use edgehive_cloudhub::CloudHubConfig;
use edgehive_cloudhub::pool::PoolConfig;
use edgehive_store::resources::{CONFIGMAPS, PODS, SECRETS};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn fast_resend() -> CloudHubConfig {
    CloudHubConfig {
        pool: PoolConfig { ack_timeout: Duration::from_millis(300), ..PoolConfig::default() },
        points_flush_interval: Duration::from_millis(10),
        ..CloudHubConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_and_its_configmap_reach_the_node_and_success_points_are_recorded() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    cloud.edge_node("edge-2").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    let other = Edge::connect(&cloud, "edge-2").await;
    eventually("both nodes connected", WAIT, || cloud.hub.connected_nodes().len() == 2).await;

    let cm = cloud
        .store
        .create(&CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}))
        .await
        .unwrap();
    let pod = cloud.pod("web", "edge-1", Some("cfg")).await;
    eventually("pod at the edge", WAIT, || edge.has("default/pod/web").is_some()).await;
    eventually("configmap at the edge", WAIT, || edge.has("default/configmap/cfg").is_some()).await;
    let (rv, content) = edge.has("default/pod/web").unwrap();
    assert_eq!(rv, pod.rev().to_string(), "the message carries the object's resourceVersion");
    assert_eq!(content["metadata"]["uid"], pod.uid().unwrap());
    assert_eq!(content["kind"], "Pod");
    let ins = edge.receipts("default/pod/web");
    assert_eq!(ins[0].route.operation, "insert");
    assert_eq!(ins[0].route.source, "edgecontroller");

    let uid = pod.uid().unwrap().to_owned();
    let want = pod.rev().to_string();
    eventually_async("pod success point stored as ObjectSync", WAIT, || {
        let (cloud, uid, want) = (&cloud, uid.clone(), want.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.as_deref() == Some(want.as_str()) }
    })
    .await;
    let cm_uid = cm.uid().unwrap().to_owned();
    eventually_async("configmap success point stored", WAIT, || {
        let (cloud, uid) = (&cloud, cm_uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_some() }
    })
    .await;
    // The other node got nothing of edge-1's.
    assert!(other.has("default/pod/web").is_none() && other.has("default/configmap/cfg").is_none());

    // An update of the configmap goes to the node that uses it.
    update_cfg_and_wait(&cloud, &edge).await;

    // Graceful delete: the edge gets an update with deletionTimestamp, then
    // (once it confirms) the delete, and the success point goes away.
    cloud.store.delete(&edgehive_store::resources::PODS, "default", "web", &Default::default()).await.unwrap();
    eventually("deletionTimestamp at the edge", WAIT, || {
        edge.has("default/pod/web").is_some_and(|(_, v)| v["metadata"]["deletionTimestamp"].is_string())
    })
    .await;
    let confirm = edgehive_model::Message::new()
        .with_route("edged", "meta", "default/pod/web", "delete")
        .with_content(edgehive_model::Content::from_serialize(&json!({"metadata": {"uid": uid}})).unwrap());
    edge.tx.try_write(confirm).unwrap();
    eventually("pod removed at the edge", WAIT, || edge.has("default/pod/web").is_none()).await;
    eventually_async("pod success point removed", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_none() }
    })
    .await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_acks_cause_resends_and_the_object_is_applied_once() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    edge.drop_acks.store(2, Ordering::SeqCst);
    let pod = cloud.pod("web", "edge-1", None).await;
    eventually("three sends", WAIT, || edge.receipts("default/pod/web").len() >= 3).await;
    let uid = pod.uid().unwrap().to_owned();
    eventually_async("success point after the third send", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_some() }
    })
    .await;
    let sends = edge.receipts("default/pod/web");
    assert_eq!(sends.len(), 3, "no send after the ACK");
    assert!(sends.iter().all(|m| m.header.msg_id == sends[0].header.msg_id), "resends carry the same msg_id");
    assert_eq!(edge.db.lock().unwrap().len(), 1, "stored once");
    assert!(cloud.metric("edgehive_cloudhub_retries_total") >= 2);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_quick_updates_collapse_to_the_latest() {
    let cloud = Cloud::start(CloudHubConfig {
        pool: PoolConfig { ack_timeout: Duration::from_secs(2), ..PoolConfig::default() },
        ..CloudHubConfig::default()
    })
    .await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    // The first version is not acknowledged yet, so the updates pile up
    // behind it (however long they take: it is resent, never replaced).
    edge.hold_acks.store(true, Ordering::SeqCst);
    cloud.pod("web", "edge-1", None).await;
    eventually("first version", WAIT, || !edge.receipts("default/pod/web").is_empty()).await;
    let mut last = None;
    for i in 0..10 {
        last = Some(cloud.touch_pod("web", &i.to_string()).await);
    }
    edge.hold_acks.store(false, Ordering::SeqCst);
    let last = last.unwrap().rev().to_string();
    eventually("latest version at the edge", WAIT, || edge.has("default/pod/web").is_some_and(|(rv, _)| rv == last))
        .await;
    let mut versions: Vec<String> =
        edge.receipts("default/pod/web").iter().map(|m| m.header.resource_version.to_string()).collect();
    versions.dedup();
    assert_eq!(versions.len(), 2, "the first version (sent twice) and the latest only: {versions:?}");
    assert_eq!(versions[1], last);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_node_gets_only_what_changed_after_reconnecting() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    for i in 0..20 {
        cloud.pod(&format!("p{i}"), "edge-1", None).await;
    }
    eventually("all pods delivered", WAIT, || edge.db.lock().unwrap().len() == 20).await;
    eventually("all success points", WAIT, || cloud.hub.points().len() == 20).await;
    let db = edge.disconnect().await;
    eventually("disconnected", WAIT, || cloud.hub.connected_nodes().is_empty()).await;

    // While it is away: 2 pods change, 1 is created.
    cloud.touch_pod("p3", "x").await;
    cloud.touch_pod("p7", "x").await;
    cloud.pod("p20", "edge-1", None).await;
    eventually("nothing queued for an offline node", WAIT, || {
        cloud.metric("edgehive_cloudhub_dropped_total{reason=\"offline\"}") >= 3
    })
    .await;

    let edge = Edge::connect_with(&cloud, "edge-1", db).await;
    eventually("new pod delivered", WAIT, || edge.has("default/pod/p20").is_some()).await;
    eventually("changes delivered", WAIT, || {
        edge.has("default/pod/p3").is_some_and(|(_, v)| v["metadata"]["labels"]["v"] == "x")
            && edge.has("default/pod/p7").is_some_and(|(_, v)| v["metadata"]["labels"]["v"] == "x")
    })
    .await;
    // Give unchanged objects every chance to be (wrongly) sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut sent: Vec<String> = edge.received.lock().unwrap().iter().map(|m| m.route.resource.to_string()).collect();
    sent.sort();
    assert_eq!(sent, ["default/pod/p20", "default/pod/p3", "default/pod/p7"]);
    // Recovered objects arrive as updates (the edge upserts).
    assert!(edge.received.lock().unwrap().iter().all(|m| m.route.operation == "update"));
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_node_does_not_slow_the_others() {
    let cloud = Cloud::start(CloudHubConfig {
        pool: PoolConfig { window: 8, ..PoolConfig::default() },
        ..CloudHubConfig::default()
    })
    .await;
    cloud.edge_node("stuck").await;
    cloud.edge_node("good").await;
    let stuck = Edge::connect(&cloud, "stuck").await;
    stuck.hold_acks.store(true, Ordering::SeqCst);
    let good = Edge::connect(&cloud, "good").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 2).await;
    for i in 0..100 {
        cloud.pod(&format!("s{i}"), "stuck", None).await;
        cloud.pod(&format!("g{i}"), "good", None).await;
    }
    eventually("the good node has all its pods", WAIT, || good.db.lock().unwrap().len() == 100).await;
    // The stuck node has only its window's worth in flight.
    eventually("the stuck node's window", WAIT, || stuck.received.lock().unwrap().len() >= 8).await;
    assert_eq!(stuck.received.lock().unwrap().len(), 8);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_and_replacements_while_offline_reach_the_node() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    for i in 0..5 {
        cloud.pod(&format!("p{i}"), "edge-1", None).await;
    }
    eventually("all pods delivered", WAIT, || edge.db.lock().unwrap().len() == 5).await;
    eventually("all success points", WAIT, || cloud.hub.points().len() == 5).await;
    let db = edge.disconnect().await;
    eventually("disconnected", WAIT, || cloud.hub.connected_nodes().is_empty()).await;

    // Away: p1 is deleted for good; p2 is deleted and created again (new uid).
    let force = edgehive_store::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    cloud.store.delete(&edgehive_store::resources::PODS, "default", "p1", &force).await.unwrap();
    cloud.store.delete(&edgehive_store::resources::PODS, "default", "p2", &force).await.unwrap();
    let p2 = cloud.pod("p2", "edge-1", None).await;

    let edge = Edge::connect_with(&cloud, "edge-1", db).await;
    eventually("p1 deleted at the edge", WAIT, || edge.has("default/pod/p1").is_none()).await;
    eventually("the new p2 at the edge", WAIT, || {
        edge.has("default/pod/p2").is_some_and(|(_, v)| v["metadata"]["uid"] == p2.uid().unwrap())
    })
    .await;
    eventually("old points removed", WAIT, || cloud.hub.points().len() == 4).await;
    assert!(edge.has("default/pod/p0").is_some() && edge.has("default/pod/p4").is_some());
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_stored_without_its_ack_and_deleted_meanwhile_is_deleted_at_the_edge() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    // The edge stores the pod but its ACK never arrives (the link breaks
    // right after the commit).
    edge.hold_acks.store(true, Ordering::SeqCst);
    let pod = cloud.pod("ghost", "edge-1", None).await;
    eventually("stored at the edge", WAIT, || edge.has("default/pod/ghost").is_some()).await;
    let db = edge.disconnect().await;
    eventually("disconnected", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    // Away: the pod is deleted for good.
    let force = edgehive_store::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    cloud.store.delete(&edgehive_store::resources::PODS, "default", "ghost", &force).await.unwrap();
    // Back: the cloud knew the node might have it, and deletes it there.
    let edge = Edge::connect_with(&cloud, "edge-1", db).await;
    eventually("the ghost is deleted at the edge", WAIT, || edge.has("default/pod/ghost").is_none()).await;
    let uid = pod.uid().unwrap().to_owned();
    eventually_async("its point removed", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_none() }
    })
    .await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_loses_its_success_points() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let pod = cloud.pod("web", "edge-1", None).await;
    let uid = pod.uid().unwrap().to_owned();
    eventually_async("success point stored", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_some() }
    })
    .await;
    cloud.store.delete(&edgehive_store::resources::NODES, "", "edge-1", &Default::default()).await.unwrap();
    eventually("session ended", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    eventually_async("success point removed from the store", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_none() }
    })
    .await;
    assert!(cloud.hub.points().is_empty());
    drop(edge);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_on_quic_gets_its_pod_the_same_way() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("edge-q").await;
    let cert = cloud.ca.node("edge-q");
    let mut cfg = cloud.client_config("edge-q", &cert);
    cfg.server = cloud.quic_addr.to_string();
    let client = edgehive_viaduct::quic::QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let conn = client.connect().await.unwrap();
    let (tx, mut rx) = conn.split();
    tx.try_write(keepalive()).unwrap();
    eventually("connected over QUIC", WAIT, || cloud.hub.connected_nodes() == ["edge-q"]).await;
    let pod = cloud.pod("web", "edge-q", None).await;
    // The pod arrives as an insert, or as an update when SyncController's
    // re-offer wins the race (an update of an unknown object is an upsert).
    let seen = std::sync::Mutex::new(Vec::new());
    let m = tokio::time::timeout(WAIT, async {
        loop {
            let m = rx.recv().await.unwrap();
            seen.lock().unwrap().push(format!("{} {}", m.route.operation, m.route.resource));
            if matches!(m.route.operation.as_str(), "insert" | "update") && m.route.resource == "default/pod/web" {
                return m;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no pod over QUIC; received: {:?}", seen.lock().unwrap()));
    tx.try_write(m.response(edgehive_model::Content::string("OK"))).unwrap();
    let uid = pod.uid().unwrap().to_owned();
    eventually("success point recorded", WAIT, || cloud.hub.points().get("edge-q", &uid) == Some(pod.rev())).await;
    cloud.stop().await;
}

/// A configmap and a secret a node stopped using are deleted there by their
/// identity, and its success points go, so that when a new pod uses them
/// again both arrive (before, the delete named no uid, the points stayed,
/// and the objects were skipped as "already delivered").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_dropped_at_the_edge_arrive_again_when_a_new_pod_uses_them() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let cm = cloud
        .store
        .create(&CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}))
        .await
        .unwrap();
    let secret = cloud
        .store
        .create(&SECRETS, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"}, "data": {"p": "cHc="}}))
        .await
        .unwrap();
    let uses_both = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "i", "envFrom": [{"secretRef": {"name": "creds"}}]}],
                "volumes": [{"name": "v", "configMap": {"name": "cfg"}}]}})
    };
    cloud.store.create(&PODS, uses_both("first")).await.unwrap();
    eventually("both at the edge", WAIT, || {
        edge.has("default/configmap/cfg").is_some() && edge.has("default/secret/creds").is_some()
    })
    .await;
    let force = edgehive_store::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    cloud.store.delete(&PODS, "default", "first", &force).await.unwrap();
    eventually("the edge drops both", WAIT, || {
        edge.has("default/configmap/cfg").is_none() && edge.has("default/secret/creds").is_none()
    })
    .await;
    // The deletes named what they removed, and carried no data.
    for (res, obj) in [("default/configmap/cfg", &cm), ("default/secret/creds", &secret)] {
        let delete = edge.receipts(res).into_iter().find(|m| m.route.operation == "delete").unwrap();
        let v = delete.content.to_value();
        assert_eq!(v["metadata"]["uid"], obj.uid().unwrap(), "{res}");
        assert!(v["kind"].is_string() && v["apiVersion"] == "v1" && v.get("data").is_none(), "{v}");
    }
    for uid in [cm.uid().unwrap(), secret.uid().unwrap()] {
        eventually_async("the point is gone", WAIT, || {
            let (cloud, uid) = (&cloud, uid.to_owned());
            async move { cloud.object_sync_rv("edge-1", &uid).await.is_none() }
        })
        .await;
    }
    cloud.store.create(&PODS, uses_both("second")).await.unwrap();
    eventually("both arrive again", WAIT, || {
        edge.has("default/configmap/cfg").is_some() && edge.has("default/secret/creds").is_some()
    })
    .await;
    cloud.stop().await;
}

/// What a node receives is what its pods need: a secret rotated after its
/// pods stopped using it is not sent, not even by SyncController, and not
/// even when the edge never acknowledges the delete (its point goes when the
/// delete is queued).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_no_pod_of_a_node_uses_is_not_sent_there_again() {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let secret = cloud
        .store
        .create(&SECRETS, json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"}, "data": {"p": "djE="}}))
        .await
        .unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user", "namespace": "default"},
        "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "i", "envFrom": [{"secretRef": {"name": "creds"}}]}]}});
    cloud.store.create(&PODS, pod).await.unwrap();
    eventually("the secret at the edge", WAIT, || edge.has("default/secret/creds").is_some()).await;
    let uid = secret.uid().unwrap().to_owned();
    eventually_async("its point stored", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_some() }
    })
    .await;

    // The edge withholds every ACK from now on.
    edge.hold_acks.store(true, Ordering::SeqCst);
    let force = edgehive_store::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    cloud.store.delete(&PODS, "default", "user", &force).await.unwrap();
    eventually("the delete reaches the edge", WAIT, || {
        edge.receipts("default/secret/creds").iter().any(|m| m.route.operation == "delete")
    })
    .await;
    eventually_async("the point goes without an ACK", WAIT, || {
        let (cloud, uid) = (&cloud, uid.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.is_none() }
    })
    .await;
    // Rotations: none reaches the node, through several sync ticks.
    let ticks = cloud.metric("edgehive_synccontroller_ticks_total");
    for v in ["djI=", "djM=", "djQ="] {
        cloud
            .store
            .update_with::<_, edgehive_store::StoreError>(&SECRETS, "default", "creds", |cur| {
                let mut s = cur.to_value()?;
                s["data"]["p"] = json!(v);
                Ok(Some(s))
            })
            .await
            .unwrap();
    }
    eventually("three sync ticks", WAIT, || cloud.metric("edgehive_synccontroller_ticks_total") >= ticks + 3).await;
    let sent: Vec<String> = edge
        .receipts("default/secret/creds")
        .iter()
        .filter(|m| m.route.operation != "delete")
        .map(|m| m.content.to_value()["data"]["p"].to_string())
        .collect();
    assert_eq!(sent, ["\"djE=\""], "only the version the pod used went to the node");
    cloud.stop().await;
}

/// The inventory an edge sends after connecting says what its store holds;
/// success points only say what it acknowledged. An emptied or rebuilt store
/// gets everything again, an older copy gets what changed and loses what
/// went, though the points say the node has it all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_store_emptied_or_restored_is_made_whole_from_its_inventory() {
    let (cloud, edge, pod) = web_with_cfg_at_edge_1().await;
    let inventory = |edge: &Edge| inventory_of(&edge.db);
    // An older copy: the configmap at an older version, and a secret deleted
    // in the cloud since (uid only the edge knows).
    let old_cm = edge.db.lock().unwrap()["default/configmap/cfg"].clone();
    update_cfg_and_wait(&cloud, &edge).await;
    edge.db.lock().unwrap().insert("default/configmap/cfg".into(), old_cm);
    edge.db.lock().unwrap().insert(
        "default/secret/gone".into(),
        (
            "3".into(),
            json!({"kind": "Secret", "metadata": {"name": "gone", "namespace": "default", "uid": "stale-uid"}}),
        ),
    );
    let first = inventory(&edge);
    let id = first.header.msg_id.clone();
    edge.tx.try_write(first).unwrap();
    // Answered, so that the edge stops keeping it (docs/protocol.md §8).
    eventually("the inventory answered", WAIT, || {
        edge.others().iter().any(|m| m.parent_id() == Some(&id) && m.route.operation == "response")
    })
    .await;
    eventually("the newer configmap again, the gone secret deleted", WAIT, || {
        edge.has("default/configmap/cfg").is_some_and(|(_, v)| v["data"]["a"] == "2")
            && edge.has("default/secret/gone").is_none()
    })
    .await;
    let delete = edge.receipts("default/secret/gone").into_iter().find(|m| m.route.operation == "delete").unwrap();
    assert_eq!(delete.content.to_value()["metadata"]["uid"], "stale-uid");
    assert!(edge.has("default/pod/web").is_some(), "what the edge holds at the current version is left alone");

    // An emptied store: everything again, past the success points.
    edge.db.lock().unwrap().clear();
    edge.tx.try_write(inventory(&edge)).unwrap();
    eventually("pod and configmap again", WAIT, || {
        edge.has("default/pod/web").is_some_and(|(_, v)| v["metadata"]["uid"] == pod.uid().unwrap())
            && edge.has("default/configmap/cfg").is_some()
    })
    .await;
    // Another node's name is refused.
    let mut other = inventory(&edge);
    other.route.resource = "null/inventory/edge-2".into();
    edge.tx.try_write(other).unwrap();
    eventually("refused", WAIT, || edge.others().iter().any(|m| m.route.operation == "error")).await;
    cloud.stop().await;
}

/// A cloud that lost success points it had not yet written (a crash) is
/// told by the reconnecting edge's inventory what it holds: the
/// controllers offer everything again, and nothing the edge holds at that
/// version is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn points_a_crash_lost_are_taken_from_the_inventory_instead_of_resending() {
    let (cloud, edge, pod) = web_with_cfg_at_edge_1().await;
    let db = edge.disconnect().await;
    eventually("gone", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    // The points are lost, as in a crash before they were written.
    cloud.hub.points().remove_node("edge-1");
    let inventory = inventory_of(&db);
    let edge = Edge::connect_offering(&cloud, "edge-1", db, &[edgehive_viaduct::features::INVENTORY]).await;
    edge.tx.try_write(inventory).unwrap();
    eventually("connected again", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    // The points come back from the inventory, at the versions offered.
    let uid = pod.uid().unwrap().to_owned();
    eventually("the pod's point again", WAIT, || cloud.hub.points().get("edge-1", &uid) == Some(pod.rev())).await;
    eventually("both points again", WAIT, || cloud.hub.points().len() == 2).await;
    let again: Vec<String> = edge
        .received
        .lock()
        .unwrap()
        .iter()
        .map(|m| format!("{} {} rv {}", m.route.operation, m.route.resource, m.header.resource_version))
        .collect();
    assert!(again.is_empty(), "nothing the edge holds was sent again: {again:?}");
    // A change still goes out.
    update_cfg_and_wait(&cloud, &edge).await;
    assert_eq!(edge.received.lock().unwrap().len(), 1);
    cloud.stop().await;
}

/// An inventory CloudHub hands over while the controller starts (an edge
/// reconnected to a restarted cloud at once) is answered from the whole
/// index, not from the part listed so far: a pod the node holds is not
/// deleted there because the pods were not listed yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_taken_while_the_controller_starts_waits_for_its_lists() {
    let (store, dir) = Alone::store().await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge-1", "labels": {"node-role.kubernetes.io/edge": ""}}});
    store.create(&edgehive_store::resources::NODES, node).await.unwrap();
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "busybox"}]}})
    };
    let held = store.create(&PODS, pod("held")).await.unwrap();
    store.create(&PODS, pod("missing")).await.unwrap();
    // The edge holds `held` as the cloud has it, lacks `missing`, and holds
    // a pod the cloud deleted.
    let items = json!({"items": [
        {"key": "default/pod/held", "uid": held.uid().unwrap(), "resourceVersion": held.rev().to_string()},
        {"key": "default/pod/gone", "uid": "gone-uid", "resourceVersion": "2"},
    ]});
    let inventory = edgehive_model::Message::new()
        .with_route("metamanager", "meta", "node/edge-1/null/inventory/edge-1", "inventory")
        .with_content(edgehive_model::Content::from_serialize(&items).unwrap());
    let id = inventory.header.msg_id.clone();
    let alone = Alone::start(store, dir, edgehive_edgecontroller::LifecycleConfig::default(), vec![inventory]).await;
    eventually("the inventory answered", WAIT, || {
        alone.to_hub.lock().unwrap().iter().any(|m| m.parent_id() == Some(&id) && m.route.operation == "response")
    })
    .await;
    let sent: Vec<String> = alone
        .to_hub
        .lock()
        .unwrap()
        .iter()
        // The list's inserts go to CloudHub, which drops what the node's
        // success points cover; the inventory's answer is past them.
        .filter(|m| m.route.operation == "delete" || m.header.message_type == "resend")
        .map(|m| format!("{} {} {}", m.route.operation, m.route.resource, m.header.message_type))
        .collect();
    assert_eq!(
        sent,
        ["update node/edge-1/default/pod/missing resend".to_owned(), "delete node/edge-1/default/pod/gone ".to_owned()],
        "the missing pod again and the gone one deleted; the held pod left alone"
    );
    alone.stop().await;
}

/// A cloud with edge-1 connected and holding pod `web` and its configmap
/// `cfg`, both acknowledged.
async fn web_with_cfg_at_edge_1() -> (Cloud, Edge, edgehive_store::Object) {
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    cloud
        .store
        .create(&CONFIGMAPS, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}))
        .await
        .unwrap();
    let pod = cloud.pod("web", "edge-1", Some("cfg")).await;
    eventually("pod and configmap at the edge", WAIT, || edge.db.lock().unwrap().len() == 2).await;
    eventually("both points", WAIT, || cloud.hub.points().len() == 2).await;
    (cloud, edge, pod)
}

/// The inventory of edge-1 holding what `db` holds.
fn inventory_of(db: &EdgeDb) -> edgehive_model::Message {
    let items: Vec<serde_json::Value> = db
        .lock()
        .unwrap()
        .iter()
        .map(|(k, (rv, v))| json!({"key": k, "uid": v["metadata"]["uid"], "resourceVersion": rv}))
        .collect();
    edgehive_model::Message::new()
        .with_route("metamanager", "meta", "null/inventory/edge-1", "inventory")
        .with_content(edgehive_model::Content::from_serialize(&json!({"items": items})).unwrap())
}

/// Sets `data.a` of configmap `cfg` to "2" and waits until `edge` has it.
async fn update_cfg_and_wait(cloud: &Cloud, edge: &Edge) {
    cloud
        .store
        .update_with::<_, edgehive_store::StoreError>(&CONFIGMAPS, "default", "cfg", |cur| {
            let mut v = cur.to_value()?;
            v["data"]["a"] = json!("2");
            Ok(Some(v))
        })
        .await
        .unwrap();
    eventually("the configmap update at the edge", WAIT, || {
        edge.has("default/configmap/cfg").is_some_and(|(_, v)| v["data"]["a"] == "2")
    })
    .await;
}

/// A Device's status is the cloud's record of what its edge reported; a
/// status write is not sent back down, by DeviceController or by the sync.
/// With 1,000 devices whose values change every second, resending on every
/// status write sent each Device to its node again at every tick.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_is_resent_for_a_new_spec_and_not_for_a_status_write() {
    use edgehive_store::resources::DEVICES;
    let cloud = Cloud::start(fast_resend()).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let device = cloud
        .store
        .create(
            &DEVICES,
            json!({"apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
            "metadata": {"name": "thermo", "namespace": "default"},
            "spec": {"nodeName": "edge-1", "deviceModelRef": {"name": "m"}}}),
        )
        .await
        .unwrap();
    // Sent as DeviceController sends it.
    let sent = edgehive_model::Message::new()
        .with_route("devicecontroller", "resource", "node/edge-1/default/device/thermo", "insert")
        .with_resource_version(device.rev().to_string())
        .with_content(
            edgehive_model::Content::from_json(String::from_utf8(device.json().unwrap().to_vec()).unwrap()).unwrap(),
        );
    cloud.ctx.send("cloudhub", sent).await.unwrap();
    let uid = device.uid().unwrap().to_owned();
    let want = device.rev().to_string();
    eventually_async("its point stored", WAIT, || {
        let (cloud, uid, want) = (&cloud, uid.clone(), want.clone());
        async move { cloud.object_sync_rv("edge-1", &uid).await.as_deref() == Some(want.as_str()) }
    })
    .await;

    let write_status = |value: &'static str| {
        let store = cloud.store.clone();
        async move {
            store
                .update_with::<_, edgehive_store::StoreError>(&DEVICES, "default", "thermo", |cur| {
                    let mut d = cur.to_value()?;
                    d["status"] = json!({"twins": [{"propertyName": "t", "reported": {"value": value}}]});
                    Ok(Some(d))
                })
                .await
                .unwrap()
        }
    };
    let ticks = cloud.metric("edgehive_synccontroller_ticks_total");
    for v in ["20", "21", "22"] {
        write_status(v).await;
    }
    eventually("three sync ticks", WAIT, || cloud.metric("edgehive_synccontroller_ticks_total") >= ticks + 3).await;
    assert_eq!(edge.receipts("default/device/thermo").len(), 1, "status writes are not sent");

    // A new desired value is a new spec: the node gets it from the sync.
    let changed = cloud
        .store
        .update_with::<_, edgehive_store::StoreError>(&DEVICES, "default", "thermo", |cur| {
            let mut d = cur.to_value()?;
            d["spec"]["properties"] = json!([{"name": "t", "desired": {"value": "25"}}]);
            Ok(Some(d))
        })
        .await
        .unwrap();
    eventually("the new spec at the edge", WAIT, || {
        edge.has("default/device/thermo").is_some_and(|(rv, _)| rv == changed.rev().to_string())
    })
    .await;
    // And a status write after it, again, nothing.
    let after = write_status("23").await;
    assert!(after.rev() > changed.rev());
    let ticks = cloud.metric("edgehive_synccontroller_ticks_total");
    eventually("three sync ticks", WAIT, || cloud.metric("edgehive_synccontroller_ticks_total") >= ticks + 3).await;
    assert_eq!(edge.receipts("default/device/thermo").len(), 2, "one resend, for the spec");
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_a_full_inbox_could_not_take_still_reach_the_node() {
    // An inbox of one message: a pod that uses thirty configmaps makes
    // EdgeController send thirty-one at once, and most find it full.
    let cloud = Cloud::start(CloudHubConfig { inbox: 1, ..fast_resend() }).await;
    cloud.edge_node("edge-1").await;
    let edge = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let mut volumes = Vec::new();
    for i in 0..30 {
        let name = format!("cfg-{i}");
        cloud
            .store
            .create(
                &CONFIGMAPS,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"}, "data": {"i": i.to_string()}}),
            )
            .await
            .unwrap();
        volumes.push(json!({"name": name, "configMap": {"name": name}}));
    }
    cloud
        .store
        .create(
            &PODS,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "many", "namespace": "default"},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "busybox"}], "volumes": volumes}}),
        )
        .await
        .unwrap();
    // Never sent before, so no success point to tell SyncController: the
    // point CloudHub records when it drops one is what brings it.
    eventually("every configmap and the pod at the edge", WAIT, || {
        edge.has("default/pod/many").is_some()
            && (0..30).all(|i| edge.has(&format!("default/configmap/cfg-{i}")).is_some())
    })
    .await;
    assert!(cloud.metric("edgehive_cloudhub_dropped_total{reason=\"full\"}") > 0, "the inbox overflowed");
    drop(edge);
    cloud.stop().await;
}

/// An edge's inventory says what it held when it connected; a configmap the
/// node stops needing is deleted there since, so when a pod needs it again
/// the inventory must not count it as held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_at_the_edge_after_its_inventory_is_sent_when_needed_again() {
    let (cloud, edge, _pod) = web_with_cfg_at_edge_1().await;
    let db = edge.disconnect().await;
    eventually("gone", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    let inventory = inventory_of(&db);
    let edge = Edge::connect_offering(&cloud, "edge-1", db, &[edgehive_viaduct::features::INVENTORY]).await;
    edge.tx.try_write(inventory).unwrap();
    eventually("connected again", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let force = edgehive_store::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    cloud.store.delete(&edgehive_store::resources::PODS, "default", "web", &force).await.unwrap();
    eventually("the configmap no longer needed is deleted at the edge", WAIT, || {
        edge.has("default/configmap/cfg").is_none()
    })
    .await;
    cloud.pod("web2", "edge-1", Some("cfg")).await;
    eventually("the configmap needed again is at the edge", WAIT, || edge.has("default/configmap/cfg").is_some()).await;
    cloud.stop().await;
}
