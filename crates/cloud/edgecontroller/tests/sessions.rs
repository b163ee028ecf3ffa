//! CloudHub sessions: node identity, node limit, keepalive expiry, a newer
//! connection replacing the old, and the NodeRestriction rule upstream.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use edgehive_cloudhub::CloudHubConfig;
use edgehive_model::{Content, Message};
use edgehive_store::resources::{CONFIGMAPS, NODES, PODS, SECRETS, SERVICE_ACCOUNTS};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_node_is_refused_with_a_reason() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    let cert = cloud.ca.node("edge-2");
    let conn = edgehive_viaduct::ws::connect(&cloud.client_config("edge-1", &cert)).await.unwrap();
    let (_tx, mut rx) = conn.split();
    let refusal = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().expect("a message before the close");
    assert_eq!(refusal.route.operation, "error");
    let why = refusal.content.as_text().unwrap().into_owned();
    assert!(why.contains("does not match the client certificate") && why.contains("system:node:edge-1"), "{why}");
    assert!(tokio::time::timeout(WAIT, rx.recv()).await.unwrap().is_none(), "then the connection closes");
    assert_eq!(cloud.hub.metrics().refused_identity.load(Ordering::Relaxed), 1);
    assert!(cloud.hub.connected_nodes().is_empty());
    // The right certificate still works.
    let _ok = Edge::connect(&cloud, "edge-1").await;
    eventually("edge-1 connected", WAIT, || cloud.hub.connected_nodes() == ["edge-1"]).await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_certificates_are_accepted_only_when_switched_on() {
    let cloud = Cloud::start(CloudHubConfig { require_node_certificate: false, ..CloudHubConfig::default() }).await;
    // A KubeEdge v1.15 edge certificate names no node.
    let cert = cloud.ca.client("kubeedge.io", Some("kubeEdge"));
    let conn = edgehive_viaduct::ws::connect(&cloud.client_config("edge-1", &cert)).await.unwrap();
    conn.tx.try_write(keepalive()).unwrap();
    eventually("edge-1 connected", WAIT, || cloud.hub.connected_nodes() == ["edge-1"]).await;
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_limit_refuses_with_a_reason_and_spares_known_nodes() {
    let cloud = Cloud::start(CloudHubConfig { node_limit: 1, ..CloudHubConfig::default() }).await;
    let _first = Edge::connect(&cloud, "edge-1").await;
    eventually("edge-1 connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let cert = cloud.ca.node("edge-2");
    let conn = edgehive_viaduct::ws::connect(&cloud.client_config("edge-2", &cert)).await.unwrap();
    let (_tx, mut rx) = conn.split();
    let refusal = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().unwrap();
    assert!(refusal.content.as_text().unwrap().contains("at most 1 nodes"));
    assert!(tokio::time::timeout(WAIT, rx.recv()).await.unwrap().is_none());
    assert_eq!(cloud.hub.metrics().refused_limit.load(Ordering::Relaxed), 1);
    // A node already connected may reconnect at the limit (it replaces itself).
    let again = Edge::connect(&cloud, "edge-1").await;
    eventually("replaced", WAIT, || cloud.hub.metrics().replaced.load(Ordering::Relaxed) == 1).await;
    assert_eq!(cloud.hub.connected_nodes(), ["edge-1"]);
    drop(again);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_connection_replaces_the_old_and_gets_the_deliveries() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("edge-1").await;
    let old = Edge::connect(&cloud, "edge-1").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let new = Edge::connect(&cloud, "edge-1").await;
    eventually("replaced", WAIT, || cloud.hub.metrics().replaced.load(Ordering::Relaxed) == 1).await;
    eventually("old connection closed", WAIT, || old.tx.is_closed()).await;
    cloud.pod("web", "edge-1", None).await;
    eventually("pod on the new connection", WAIT, || new.has("default/pod/web").is_some()).await;
    assert_eq!(cloud.hub.connected_nodes(), ["edge-1"], "still one session, not a disconnect");
    assert_eq!(cloud.hub.metrics().connected.load(Ordering::Relaxed), 1);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_keepalive_expires() {
    let cloud =
        Cloud::start(CloudHubConfig { keepalive_interval: Duration::from_millis(300), ..CloudHubConfig::default() })
            .await;
    let cert = cloud.ca.node("edge-1");
    let conn = edgehive_viaduct::ws::connect(&cloud.client_config("edge-1", &cert)).await.unwrap();
    let (tx, mut rx) = conn.split();
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    // Sending other things does not keep the session alive; only keepalive does.
    let end = tokio::time::timeout(WAIT, async {
        loop {
            let _ = tx.try_write(Message::new().with_route("edged", "meta", "default/podstatus/x", "update"));
            match tokio::time::timeout(Duration::from_millis(50), rx.recv()).await {
                Ok(None) => return,
                Ok(Some(m)) if m.route.operation == "error" && m.content.as_text().unwrap().contains("keepalive") => {}
                _ => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the session ends");
    eventually("disconnected", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    assert_eq!(cloud.hub.metrics().keepalive_expired.load(Ordering::Relaxed), 1);
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_that_agreed_on_ping_keepalive_stays_with_pings_alone() {
    let cloud =
        Cloud::start(CloudHubConfig { keepalive_interval: Duration::from_millis(300), ..CloudHubConfig::default() })
            .await;
    let cert = cloud.ca.node("edge-1");
    let mut cfg = cloud.client_config("edge-1", &cert);
    cfg.ping_keepalive = true;
    cfg.conn.ping_interval = Some(Duration::from_millis(100));
    let conn = edgehive_viaduct::ws::connect(&cfg).await.unwrap();
    assert!(conn.peer().ping_keepalive);
    let (_tx, mut rx) = conn.split();
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    // Five keepalive intervals without a keepalive message: the pings suffice.
    let ended = tokio::time::timeout(Duration::from_millis(1500), rx.recv()).await;
    assert!(ended.is_err(), "the session stays: {ended:?}");
    assert_eq!(cloud.hub.connected_nodes().len(), 1);
    assert_eq!(cloud.hub.metrics().keepalive_expired.load(Ordering::Relaxed), 0);
    cloud.stop().await;
}

fn req(operation: &'static str, resource: &str, content: serde_json::Value) -> Message {
    Message::new()
        .with_route("edged", "meta", resource.to_string(), operation)
        .with_content(Content::from_serialize(&content).unwrap())
}

async fn ask(edge: &Edge, m: Message) -> Message {
    let id = m.header.msg_id.clone();
    edge.tx.try_write(m).unwrap();
    let mut answer = None;
    eventually("an answer", WAIT, || {
        answer = edge.others().into_iter().find(|a| a.header.parent_msg_id == id);
        answer.is_some()
    })
    .await;
    answer.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_may_touch_only_what_is_its_own() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    for (kind, res) in [("ConfigMap", &CONFIGMAPS), ("Secret", &SECRETS)] {
        for owner in ["a", "b"] {
            cloud
                .store
                .create(res, json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": format!("{owner}-data"), "namespace": "default"}}))
                .await
                .unwrap();
        }
    }
    for owner in ["a", "b"] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{owner}-pod"), "namespace": "default"},
            "spec": {"nodeName": owner, "containers": [{"name": "c", "image": "i",
                "envFrom": [{"secretRef": {"name": format!("{owner}-data")}}, {"configMapRef": {"name": format!("{owner}-data")}}]}]}});
        cloud.store.create(&PODS, pod).await.unwrap();
    }
    let a = Edge::connect(&cloud, "a").await;
    eventually("a has its pod", WAIT, || a.has("default/pod/a-pod").is_some()).await;
    let forbidden_before = cloud.controller.metrics().forbidden.load(Ordering::Relaxed);

    // Its own secret: answered with the object.
    let own = ask(&a, req("query", "default/secret/a-data", json!(null))).await;
    assert_eq!(own.route.operation, "response");
    assert_eq!(own.content.to_value()["metadata"]["name"], "a-data");
    // B's secret and configmap: refused.
    for res in ["default/secret/b-data", "default/configmap/b-data"] {
        let no = ask(&a, req("query", res, json!(null))).await;
        assert_eq!(no.route.operation, "error", "{res}");
        assert!(no.content.as_text().unwrap().contains("forbidden"), "{res}");
    }
    // Patching B's node status, and B's pod status: refused, nothing changes.
    let b_node = cloud.store.get(&NODES, "", "b").await.unwrap();
    let no =
        ask(&a, req("update", "default/nodestatus/b", json!({"UID": b_node.uid(), "Status": {"phase": "Running"}})))
            .await;
    assert_eq!(no.route.operation, "error");
    let b_pod = cloud.store.get(&PODS, "default", "b-pod").await.unwrap();
    let no =
        ask(&a, req("update", "default/podstatus/b-pod", json!({"UID": b_pod.uid(), "Status": {"phase": "Failed"}})))
            .await;
    assert_eq!(no.route.operation, "error");
    assert_eq!(cloud.store.get(&NODES, "", "b").await.unwrap().rev(), b_node.rev());
    assert_eq!(cloud.store.get(&PODS, "default", "b-pod").await.unwrap().rev(), b_pod.rev());
    assert_eq!(cloud.controller.metrics().forbidden.load(Ordering::Relaxed) - forbidden_before, 4);

    // The session goes on: its own pod status is applied.
    let a_pod = cloud.store.get(&PODS, "default", "a-pod").await.unwrap();
    a.tx.try_write(req(
        "update",
        "default/podstatus/a-pod",
        json!({"UID": a_pod.uid(), "Status": {"phase": "Running"}}),
    ))
    .unwrap();
    eventually_async("own pod status applied", WAIT, || {
        let cloud = &cloud;
        async move {
            cloud.store.get(&PODS, "default", "a-pod").await.unwrap().value().unwrap()["status"]["phase"] == "Running"
        }
    })
    .await;
    // Its own Node is readable.
    let unknown = ask(&a, req("query", "default/node/a", json!(null))).await;
    assert_eq!(unknown.route.operation, "response");
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubelet_style_patches_apply_to_own_node_and_pods_only() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    cloud.pod("a-pod", "a", None).await;
    cloud.pod("b-pod", "b", None).await;
    let a = Edge::connect(&cloud, "a").await;
    eventually("a has its pod", WAIT, || a.has("default/pod/a-pod").is_some()).await;

    // nodepatch: the patch travels as a JSON string; conditions merge by type.
    let patch = r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}"#;
    let m =
        Message::new().with_route("edged", "meta", "default/nodepatch/a", "patch").with_content(Content::string(patch));
    let answer = ask(&a, m).await;
    assert_eq!(answer.route.operation, "response");
    assert_eq!(answer.content.to_value()["Object"]["status"]["conditions"][0]["reason"], "KubeletReady");
    assert!(!answer.header.resource_version.is_empty());
    let stored = cloud.store.get(&NODES, "", "a").await.unwrap();
    assert_eq!(stored.value().unwrap()["status"]["conditions"][0]["status"], "True");

    // podpatch of its own pod.
    let m = Message::new()
        .with_route("edged", "meta", "default/podpatch/a-pod", "patch")
        .with_content(Content::string(r#"{"status":{"phase":"Running"}}"#));
    assert_eq!(ask(&a, m).await.route.operation, "response");
    assert_eq!(
        cloud.store.get(&PODS, "default", "a-pod").await.unwrap().value().unwrap()["status"]["phase"],
        "Running"
    );

    // Someone else's node or pod: refused, unchanged.
    let b_rev = cloud.store.get(&NODES, "", "b").await.unwrap().rev();
    let m =
        Message::new().with_route("edged", "meta", "default/nodepatch/b", "patch").with_content(Content::string(patch));
    assert_eq!(ask(&a, m).await.route.operation, "error");
    let m = Message::new()
        .with_route("edged", "meta", "default/podpatch/b-pod", "patch")
        .with_content(Content::string(r#"{"status":{"phase":"Failed"}}"#));
    assert_eq!(ask(&a, m).await.route.operation, "error");
    assert_eq!(cloud.store.get(&NODES, "", "b").await.unwrap().rev(), b_rev);
    // A patch that is not JSON is refused with the reason; the session goes on.
    let m = Message::new()
        .with_route("edged", "meta", "default/nodepatch/a", "patch")
        .with_content(Content::string("{nope"));
    let bad = ask(&a, m).await;
    assert_eq!(bad.route.operation, "error");
    assert!(bad.content.as_text().unwrap().contains("not JSON"));
    let again = ask(&a, req("query", "default/node/a", json!(null))).await;
    assert_eq!(again.route.operation, "response");
    cloud.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_gets_service_account_tokens_for_its_own_pods_only() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    let mut uids = std::collections::HashMap::new();
    for (owner, sa) in [("a", None), ("b", None), ("a2", Some("builder"))] {
        let node = &owner[..1];
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("{owner}-pod"), "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}});
        if let Some(sa) = sa {
            pod["spec"]["serviceAccountName"] = json!(sa);
        }
        let created = cloud.store.create(&PODS, pod).await.unwrap();
        uids.insert(owner, created.uid().unwrap().to_owned());
    }
    let a = Edge::connect(&cloud, "a").await;
    eventually("a has its pods", WAIT, || {
        a.has("default/pod/a-pod").is_some() && a.has("default/pod/a2-pod").is_some()
    })
    .await;
    let token_request = |pod: &str, uid: &str| {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": ["api"], "expirationSeconds": 3600,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid}}})
    };

    // Its pod, running as `default`: a token for that account, bound to the pod.
    let answer = ask(&a, req("query", "default/serviceaccounttoken/default", token_request("a-pod", &uids["a"]))).await;
    assert_eq!(answer.route.operation, "response", "{:?}", answer.content.as_text());
    let tr = answer.content.to_value();
    assert_eq!(tr["kind"], "TokenRequest");
    let token = tr["status"]["token"].as_str().unwrap();
    let id = cloud.tokens.verify(token, time::OffsetDateTime::now_utc()).unwrap();
    assert_eq!(id.user(), "system:serviceaccount:default:default");
    assert!(tr["status"]["expirationTimestamp"].is_string());
    // The namespace's `default` account exists now.
    cloud.store.get(&SERVICE_ACCOUNTS, "default", "default").await.unwrap();

    let forbidden_before = cloud.controller.metrics().forbidden.load(Ordering::Relaxed);
    let refused = [
        // B's pod.
        ("default/serviceaccounttoken/default", token_request("b-pod", &uids["b"])),
        // Its own pod, but another account than the pod runs as.
        ("default/serviceaccounttoken/builder", token_request("a-pod", &uids["a"])),
        // Its own pod under another uid (a replaced pod).
        ("default/serviceaccounttoken/default", token_request("a-pod", "not-the-uid")),
        // Not bound to a pod at all.
        ("default/serviceaccounttoken/default", json!({"spec": {}})),
    ];
    for (res, body) in refused {
        let no = ask(&a, req("query", res, body.clone())).await;
        assert_eq!(no.route.operation, "error", "{res} {body}");
        assert!(no.content.as_text().unwrap().contains("forbidden"), "{:?}", no.content.as_text());
    }
    assert_eq!(cloud.controller.metrics().forbidden.load(Ordering::Relaxed) - forbidden_before, 4);
    // An account that does not exist: NotFound, as Kubernetes answers.
    let missing =
        ask(&a, req("query", "default/serviceaccounttoken/builder", token_request("a2-pod", &uids["a2"]))).await;
    assert_eq!(missing.content.to_value()["ErrStatus"]["code"], 404);
    cloud.stop().await;
}
