//! CloudHub sessions: node identity, node limit, keepalive expiry, a newer
//! connection replacing the old, and the NodeRestriction rule upstream.
#![allow(clippy::unwrap_used)]

mod common;

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
    assert_eq!(cloud.metric("edgehive_cloudhub_refused_total{reason=\"identity\"}"), 1);
    assert!(cloud.hub.connected_nodes().is_empty());
    // The right certificate still works.
    let _ok = Edge::connect(&cloud, "edge-1").await;
    eventually("edge-1 connected", WAIT, || cloud.hub.connected_nodes() == ["edge-1"]).await;
    cloud.stop().await;
}

/// A client of either transport, kept across reconnections (it holds the
/// TLS session tickets).
enum Dialer {
    Ws(edgehive_viaduct::ws::WsClient),
    Quic(edgehive_viaduct::quic::QuicClient),
}

impl Dialer {
    async fn connect(&self) -> edgehive_viaduct::Connection {
        match self {
            Dialer::Ws(c) => c.connect().await.unwrap(),
            Dialer::Quic(c) => c.connect().await.unwrap(),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnection_resumes_its_tls_session_but_not_past_its_certificate() {
    resumes_but_not_past_its_certificate(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_reconnection_resumes_its_tls_session_but_not_past_its_certificate() {
    resumes_but_not_past_its_certificate(true).await;
}

async fn resumes_but_not_past_its_certificate(quic: bool) {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    // A certificate valid for a few more seconds: the first handshake
    // checks it, and the cloud hands out a session ticket.
    let cert = cloud.ca.node_expiring_in("edge-1", 3);
    let not_after = edgehive_viaduct::CertIdentity::from_der(&cert.cert).unwrap().not_after;
    let mut cfg = cloud.client_config("edge-1", &cert);
    let client = if quic {
        cfg.server = cloud.quic_addr.to_string();
        Dialer::Quic(edgehive_viaduct::quic::QuicClient::new(cfg.clone(), "127.0.0.1:0".parse().unwrap()).unwrap())
    } else {
        Dialer::Ws(edgehive_viaduct::ws::WsClient::new(cfg.clone()).unwrap())
    };
    let first = client.connect().await;
    assert!(!first.peer().resumed, "a first connection has nothing to resume");
    first.tx.try_write(keepalive()).unwrap();
    eventually("edge-1 connected", WAIT, || cloud.hub.connected_nodes() == ["edge-1"]).await;
    first.tx.close();
    eventually("edge-1 gone", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    // A reconnection resumes: no certificate signed or verified again.
    // (A QUIC client tells only a resumption in 0-RTT, which takes a
    // server that keeps sessions; the refusal below shows it resumed.)
    let second = client.connect().await;
    assert!(quic || second.peer().resumed, "the reconnection resumed its TLS session");
    second.tx.try_write(keepalive()).unwrap();
    eventually("edge-1 connected again", WAIT, || cloud.hub.connected_nodes() == ["edge-1"]).await;
    second.tx.close();
    eventually("edge-1 gone again", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    // Once the certificate has expired, its ticket still resumes a TLS
    // session (the ticket carries the certificate, not a new check), and
    // the cloud refuses the node with the reason.
    while std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64 <= not_after {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let late = client.connect().await;
    assert!(quic || late.peer().resumed);
    let (_tx, mut rx) = late.split();
    let refusal = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().expect("a refusal before the close");
    let why = refusal.content.as_text().unwrap().into_owned();
    assert!(why.contains("certificate has expired"), "{why}");
    assert!(tokio::time::timeout(WAIT, rx.recv()).await.unwrap().is_none(), "then the connection closes");
    assert_eq!(cloud.metric("edgehive_cloudhub_refused_total{reason=\"expired\"}"), 1);
    assert!(cloud.hub.connected_nodes().is_empty());
    // A new handshake with that certificate fails outright.
    let fresh = if quic {
        edgehive_viaduct::quic::QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap().connect().await
    } else {
        edgehive_viaduct::ws::connect(&cfg).await
    };
    assert!(fresh.is_err(), "a full handshake checks the certificate");
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
    assert_eq!(cloud.metric("edgehive_cloudhub_refused_total{reason=\"node_limit\"}"), 1);
    // A node already connected may reconnect at the limit (it replaces itself).
    let again = Edge::connect(&cloud, "edge-1").await;
    eventually("replaced", WAIT, || cloud.metric("edgehive_cloudhub_replaced_total") == 1).await;
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
    eventually("replaced", WAIT, || cloud.metric("edgehive_cloudhub_replaced_total") == 1).await;
    eventually("old connection closed", WAIT, || old.tx.is_closed()).await;
    cloud.pod("web", "edge-1", None).await;
    eventually("pod on the new connection", WAIT, || new.has("default/pod/web").is_some()).await;
    assert_eq!(cloud.hub.connected_nodes(), ["edge-1"], "still one session, not a disconnect");
    assert_eq!(cloud.metric("edgehive_cloudhub_connected_nodes"), 1);
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
                Ok(Some(m))
                    if m.route.operation == "error" && m.content.as_text().is_some_and(|t| t.contains("keepalive")) => {
                }
                _ => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the session ends");
    eventually("disconnected", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    assert_eq!(cloud.metric("edgehive_cloudhub_keepalive_expired_total"), 1);
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
    assert_eq!(cloud.metric("edgehive_cloudhub_keepalive_expired_total"), 0);
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
    let forbidden_before = cloud.metric("edgehive_edgecontroller_forbidden_total");

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
    assert_eq!(cloud.metric("edgehive_edgecontroller_forbidden_total") - forbidden_before, 4);

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
    let (cloud, a) = two_nodes_and_edge_a().await;

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
    let why = refused(&ask(&a, m).await);
    assert!(why.contains("not JSON"), "{why}");
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
    let id = cloud.tokens.verify(token, &["api"], time::OffsetDateTime::now_utc()).unwrap();
    assert_eq!(id.user(), "system:serviceaccount:default:default");
    assert!(tr["status"]["expirationTimestamp"].is_string());
    // The namespace's `default` account exists now.
    cloud.store.get(&SERVICE_ACCOUNTS, "default", "default").await.unwrap();

    let forbidden_before = cloud.metric("edgehive_edgecontroller_forbidden_total");
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
    assert_eq!(cloud.metric("edgehive_edgecontroller_forbidden_total") - forbidden_before, 4);
    // An account that does not exist: NotFound, as Kubernetes answers.
    let missing =
        ask(&a, req("query", "default/serviceaccounttoken/builder", token_request("a2-pod", &uids["a2"]))).await;
    assert_eq!(missing.content.to_value()["ErrStatus"]["code"], 404);
    cloud.stop().await;
}

/// A `podpatch` as kubelet sends it: the patch is a JSON string.
fn podpatch(pod: &str, patch: serde_json::Value) -> Message {
    Message::new()
        .with_route("edged", "meta", format!("default/podpatch/{pod}"), "patch")
        .with_content(Content::string(&patch.to_string()))
}

fn nodepatch(node: &str, patch: serde_json::Value) -> Message {
    Message::new()
        .with_route("edged", "meta", format!("default/nodepatch/{node}"), "patch")
        .with_content(Content::string(&patch.to_string()))
}

/// The refusal's text, after checking it is one: operation `error`, and
/// content a KubeEdge EdgeCore reads as a failure — a `StatusError`
/// (`{"ErrStatus": …}`), an `ObjectResp` whose `Err` is one, or (a query,
/// and CloudHub's own refusals) the text alone.
fn refused(answer: &Message) -> String {
    assert_eq!(answer.route.operation, "error", "{:?}", answer.content.to_value());
    if let Some(text) = answer.content.as_text() {
        return text.into_owned();
    }
    let status = refusal_status(answer);
    status["message"].as_str().unwrap().to_owned()
}

/// The Kubernetes `Status` a refusal carries (bare or in an `ObjectResp`),
/// checked for the fields EdgeCore's `apierrors` helpers read.
fn refusal_status(answer: &Message) -> serde_json::Value {
    let v = answer.content.to_value();
    let status = match v.get("Err") {
        Some(err) => {
            assert!(v.get("Object").is_some_and(serde_json::Value::is_null), "{v}");
            err["ErrStatus"].clone()
        }
        None => v["ErrStatus"].clone(),
    };
    assert_eq!(status["status"], "Failure", "{v}");
    assert!(status["code"].as_u64().is_some_and(|c| c >= 400) && status["reason"].is_string(), "{v}");
    status
}

/// The attack found by a probe: from its own certificate alone, a node
/// patched its own pod to mount a secret no pod of its uses and then read
/// that secret; then moved the pod to another node with a new command, which
/// the other edge ran. Each step is refused, logged and counted, and nothing
/// changes in the store or at the other edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_podpatch_attack_fails_at_each_step() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-password", "namespace": "default"},
        "data": {"password": "aHVudGVyMg=="}});
    cloud.store.create(&SECRETS, secret).await.unwrap();
    let a_pod = cloud.pod("a-pod", "a", None).await;
    cloud.pod("b-pod", "b", None).await;
    let a = Edge::connect(&cloud, "a").await;
    let b = Edge::connect(&cloud, "b").await;
    eventually("both have their pods", WAIT, || {
        a.has("default/pod/a-pod").is_some() && b.has("default/pod/b-pod").is_some()
    })
    .await;
    let forbidden_before = cloud.metric("edgehive_edgecontroller_forbidden_total");

    // 1. Mount the secret into its own pod.
    let mount = json!({"spec": {"volumes": [{"name": "steal", "secret": {"secretName": "db-password"}}],
        "containers": [{"name": "c", "volumeMounts": [{"name": "steal", "mountPath": "/s"}]}]}});
    let why = refused(&ask(&a, podpatch("a-pod", mount)).await);
    assert!(why.contains("only the status") && why.contains("spec.volumes"), "{why}");
    // 2. Read the secret: no pod of its uses it, so no.
    let why = refused(&ask(&a, req("query", "default/secret/db-password", json!(null))).await);
    assert!(why.contains("forbidden"), "{why}");
    // 3. Move the pod to b with another command.
    let hijack =
        json!({"spec": {"nodeName": "b", "containers": [{"name": "c", "command": ["sh", "-c", "touch /tmp/owned"]}]}});
    let why = refused(&ask(&a, podpatch("a-pod", hijack)).await);
    assert!(why.contains("spec.containers") && why.contains("spec.nodeName"), "{why}");
    // The same through a kubelet-shaped patch that also carries a status.
    let sneaky = json!({"metadata": {"uid": a_pod.uid()}, "spec": {"nodeName": "b"}, "status": {"phase": "Running"}});
    refused(&ask(&a, podpatch("a-pod", sneaky)).await);

    // Every other field outside status, one at a time.
    for (field, patch) in [
        ("metadata.labels", json!({"metadata": {"labels": {"app": "x"}}})),
        ("metadata.annotations", json!({"metadata": {"annotations": {"x": "y"}}})),
        (
            "metadata.ownerReferences",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "a", "uid": "u"}]}}),
        ),
        ("metadata.finalizers", json!({"metadata": {"finalizers": ["example.com/keep"]}})),
        ("metadata.deletionTimestamp", json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}})),
        ("spec.serviceAccountName", json!({"spec": {"serviceAccountName": "admin"}})),
        ("spec.hostNetwork", json!({"spec": {"hostNetwork": true}})),
    ] {
        let why = refused(&ask(&a, podpatch("a-pod", patch)).await);
        assert!(why.contains(field), "{field}: {why}");
    }
    // A podstatus carries a status and nothing else.
    let why = refused(
        &ask(
            &a,
            req(
                "update",
                "default/podstatus/a-pod",
                json!({"UID": a_pod.uid(), "Status": {}, "Spec": {"nodeName": "b"}}),
            ),
        )
        .await,
    );
    assert!(why.contains("\"Spec\""), "{why}");
    assert_eq!(cloud.metric("edgehive_edgecontroller_forbidden_total") - forbidden_before, 12);

    // Nothing changed: the pod is as the API made it, b got nothing of a's.
    let now = cloud.store.get(&PODS, "default", "a-pod").await.unwrap();
    assert_eq!(now.rev(), a_pod.rev());
    assert!(b.has("default/pod/a-pod").is_none());
    assert!(a.has("default/secret/db-password").is_none());

    // A status that does not validate is refused as the API refuses it.
    let invalid_before = cloud.metric("edgehive_edgecontroller_invalid_total");
    let why = refused(&ask(&a, podpatch("a-pod", json!({"status": {"podIP": 5}}))).await);
    assert!(why.contains("cannot be handled as a Pod"), "{why}");
    assert_eq!(cloud.metric("edgehive_edgecontroller_invalid_total") - invalid_before, 1);
    // A uid precondition for a pod since replaced: a conflict.
    let why = refused(
        &ask(&a, podpatch("a-pod", json!({"metadata": {"uid": "another"}, "status": {"phase": "Running"}}))).await,
    );
    assert!(why.contains("Precondition failed"), "{why}");

    // What a kubelet sends still works.
    let status = json!({"metadata": {"uid": a_pod.uid()}, "status": {"phase": "Running", "podIP": "10.0.0.7"}});
    assert_eq!(ask(&a, podpatch("a-pod", status)).await.route.operation, "response");
    let v = cloud.store.get(&PODS, "default", "a-pod").await.unwrap().value().unwrap().clone();
    assert_eq!(v["status"]["podIP"], "10.0.0.7");
    assert_eq!(v["spec"]["nodeName"], "a");
    cloud.stop().await;
}

/// Kubernetes' NodeRestriction for Nodes and Leases, stricter on labels: an
/// edge may not label itself into workloads (`zone=secure`), untaint or
/// uncordon itself, or keep a Lease outside `kube-node-lease`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_sets_only_kubelet_labels_and_keeps_its_lease_in_kube_node_lease() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.ready_edge_node("a", json!({})).await;
    cloud
        .store
        .update_with::<_, edgehive_store::StoreError>(&NODES, "", "a", |cur| {
            let mut v = cur.to_value()?;
            v["spec"] = json!({"unschedulable": false, "taints": [{"key": "dedicated", "value": "ops", "effect": "NoSchedule"}]});
            Ok(Some(v))
        })
        .await
        .unwrap();
    let a = Edge::connect(&cloud, "a").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let rev = cloud.store.get(&NODES, "", "a").await.unwrap().rev();

    for (patch, says) in [
        (json!({"metadata": {"labels": {"zone": "secure"}}}), "not allowed to modify labels: zone"),
        (
            json!({"metadata": {"labels": {"node-restriction.kubernetes.io/secure": "true"}}}),
            "node-restriction.kubernetes.io/secure",
        ),
        (
            json!({"metadata": {"labels": {"node-role.kubernetes.io/edge": null}, "annotations": {"edgehive.io/x": "1"}}}),
            "annotations: edgehive.io/x",
        ),
        (json!({"spec": {"taints": null}}), "not allowed to modify taints"),
        (json!({"spec": {"unschedulable": true}}), "spec.unschedulable"),
    ] {
        let why = refused(&ask(&a, nodepatch("a", patch)).await);
        assert!(why.contains(says), "{says}: {why}");
    }
    assert_eq!(cloud.store.get(&NODES, "", "a").await.unwrap().rev(), rev, "nothing written");

    // A pod that selects `zone=secure` does not land on it.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "secure-app", "namespace": "default"},
        "spec": {"nodeSelector": {"zone": "secure"}, "containers": [{"name": "c", "image": "i"}]}});
    cloud.store.create(&PODS, pod).await.unwrap();
    eventually_async("the pod is unschedulable", WAIT, || {
        let cloud = &cloud;
        async move {
            let v = cloud.store.get(&PODS, "default", "secure-app").await.unwrap().value().unwrap().clone();
            assert!(v["spec"]["nodeName"].is_null());
            v["status"]["conditions"][0]["reason"] == "Unschedulable"
        }
    })
    .await;

    // Kubelet's own labels and annotations are fine.
    let ok = json!({"metadata": {"labels": {"topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": "a"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"}}});
    assert_eq!(ask(&a, nodepatch("a", ok)).await.route.operation, "response");
    let labels = cloud.store.get(&NODES, "", "a").await.unwrap().value().unwrap()["metadata"]["labels"].clone();
    assert_eq!(labels["topology.kubernetes.io/zone"], "z1");

    // Leases: only its own, only in kube-node-lease.
    let lease = |ns: &str| {
        req("update", &format!("{ns}/lease/a"), json!({"spec": {"holderIdentity": "a", "leaseDurationSeconds": 40}}))
    };
    let why = refused(&ask(&a, lease("default")).await);
    assert!(why.contains("kube-node-lease"), "{why}");
    assert!(cloud.store.get(&edgehive_store::resources::LEASES, "default", "a").await.is_err());
    assert_eq!(ask(&a, lease("kube-node-lease")).await.route.operation, "response");
    cloud.stop().await;
}

/// Registration: an edge names itself, with kubelet's labels only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_registers_itself_with_kubelet_labels_only() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    let c = Edge::connect(&cloud, "c").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    let node = |labels: serde_json::Value| {
        req("insert", "default/node/c", json!({"metadata": {"name": "c", "labels": labels}, "spec": {}}))
    };
    let why = refused(&ask(&c, node(json!({"zone": "secure", "kubernetes.io/os": "linux"}))).await);
    assert!(why.contains("not allowed to set the following labels: zone"), "{why}");
    let why = refused(&ask(&c, req("insert", "default/node/d", json!({"metadata": {"name": "d"}}))).await);
    assert!(why.contains("forbidden"), "{why}");
    assert!(cloud.store.get(&NODES, "", "c").await.is_err(), "nothing registered");
    let why = refused(&ask(&c, node(json!("not a map"))).await);
    assert!(why.contains("labels"), "{why}");

    let ok = ask(&c, node(json!({"kubernetes.io/os": "linux", "node-role.kubernetes.io/agent": ""}))).await;
    assert_eq!(ok.route.operation, "response", "{:?}", ok.content.as_text());
    let labels = cloud.store.get(&NODES, "", "c").await.unwrap().value().unwrap()["metadata"]["labels"].clone();
    assert_eq!(
        labels,
        json!({"kubernetes.io/os": "linux", "node-role.kubernetes.io/agent": "", "node-role.kubernetes.io/edge": ""})
    );
    cloud.stop().await;
}

/// CloudHub accepts a node's certificate only while the cloud's record of
/// that node lists it: a certificate replaced by a later join, or any after
/// the node was revoked, is refused with a reason; other nodes go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_and_replaced_certificates_are_refused_at_connect() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    let serial = |cert: &edgehive_testkit::pki::Issued| edgehive_pki::certificate_id(&cert.cert).unwrap();
    let (old, new) = (cloud.ca.node("edge-1"), cloud.ca.node("edge-1"));
    let now = time::OffsetDateTime::now_utc();
    let token = edgehive_credentials::records::IssuedWith::Token("abc123".into());
    cloud.credentials.record_issued("edge-1", &serial(&new), token, None, now).await.unwrap();

    let refusal_of = |cert: edgehive_testkit::pki::Issued| {
        let cfg = cloud.client_config("edge-1", &cert);
        async move {
            let conn = edgehive_viaduct::ws::connect(&cfg).await.unwrap();
            let (_tx, mut rx) = conn.split();
            let m = tokio::time::timeout(WAIT, rx.recv()).await.unwrap().expect("a refusal before the close");
            assert!(tokio::time::timeout(WAIT, rx.recv()).await.unwrap().is_none(), "then the connection closes");
            refused(&m)
        }
    };
    // The certificate the record names works; the one it replaced does not.
    let why = refusal_of(old).await;
    assert!(why.contains("replaced by a newer one"), "{why}");
    let ok = Edge::connect(&cloud, "edge-2").await;
    let mut cfg = cloud.client_config("edge-1", &new);
    cfg.handshake_timeout = WAIT;
    let conn = edgehive_viaduct::ws::connect(&cfg).await.unwrap();
    conn.tx.try_write(keepalive()).unwrap();
    eventually("edge-1 connected", WAIT, || cloud.hub.connected_nodes().contains(&"edge-1".to_owned())).await;
    drop(conn);

    // Revoked: nothing of edge-1's is accepted; edge-2 is untouched.
    cloud.credentials.revoke_node("edge-1", now).await.unwrap();
    let why = refusal_of(new).await;
    assert!(why.contains("revoked"), "{why}");
    assert_eq!(cloud.metric("edgehive_cloudhub_refused_total{reason=\"revoked\"}"), 2);
    assert!(cloud.hub.connected_nodes().contains(&"edge-2".to_owned()));
    drop(ok);
    cloud.stop().await;
}

/// A stock EdgeCore's Lease, as kubelet's lease controller keeps it through
/// KubeEdge's metaclient: it reads the Lease, creates it when the answer is
/// NotFound, then renews it. Every answer is KubeEdge's `ObjectResp`
/// (`{"Object": …, "Err": …}`), `Err` a Kubernetes `StatusError`; another
/// node's Lease is refused in the same shape, so EdgeCore reads a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_read_created_on_not_found_and_renewed() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    let node_uid = cloud.store.get(&NODES, "", "a").await.unwrap().uid().unwrap().to_owned();
    let a = Edge::connect(&cloud, "a").await;
    eventually("connected", WAIT, || cloud.hub.connected_nodes().len() == 1).await;

    let missing = ask(&a, req("query", "kube-node-lease/lease/a", json!(null))).await;
    assert_eq!(missing.route.operation, "response");
    // Byte for byte as Go encodes `ObjectResp{Object: nil, Err: NewNotFound(…)}`.
    assert_eq!(
        missing.content.as_json(),
        r#"{"Object":null,"Err":{"ErrStatus":{"metadata":{},"status":"Failure","message":"leases.coordination.k8s.io \"a\" not found","reason":"NotFound","details":{"name":"a","group":"coordination.k8s.io","kind":"leases"},"code":404}}}"#
    );
    let v = missing.content.to_value();
    assert!(v["Object"].is_null(), "{v}");
    assert_eq!(v["Err"]["ErrStatus"]["reason"], "NotFound", "{v}");
    assert_eq!(v["Err"]["ErrStatus"]["code"], 404);
    assert_eq!(
        v["Err"]["ErrStatus"]["details"],
        json!({"name": "a", "group": "coordination.k8s.io", "kind": "leases"})
    );

    let lease = |renew: &str| {
        json!({"metadata": {"name": "a", "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "a", "uid": node_uid}]},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 40, "renewTime": renew}})
    };
    let created = ask(&a, req("insert", "kube-node-lease/lease/a", lease("2030-01-01T00:00:00.000000Z"))).await;
    assert_eq!(created.route.operation, "response");
    let v = created.content.to_value();
    assert!(v["Err"].is_null(), "{v}");
    assert_eq!(v["Object"]["metadata"]["name"], "a");

    let found = ask(&a, req("query", "kube-node-lease/lease/a", json!(null))).await;
    assert_eq!(found.route.operation, "response");
    let v = found.content.to_value();
    assert!(v["Err"].is_null(), "{v}");
    assert_eq!(
        (v["Object"]["apiVersion"].as_str(), v["Object"]["kind"].as_str()),
        (Some("coordination.k8s.io/v1"), Some("Lease"))
    );
    assert_eq!(v["Object"]["spec"]["holderIdentity"], "a");
    assert!(v["Object"]["metadata"]["resourceVersion"].is_string());

    let renewed = ask(&a, req("update", "kube-node-lease/lease/a", lease("2030-01-01T00:00:10.000000Z"))).await;
    assert_eq!(renewed.content.to_value()["Object"]["spec"]["renewTime"], "2030-01-01T00:00:10.000000Z");

    // Another node's Lease, and a Lease outside kube-node-lease: Forbidden.
    for res in ["kube-node-lease/lease/b", "default/lease/a"] {
        let no = ask(&a, req("query", res, json!(null))).await;
        let status = refusal_status(&no);
        assert_eq!((status["code"].as_u64(), status["reason"].as_str()), (Some(403), Some("Forbidden")), "{res}");
        assert!(refused(&no).contains("is forbidden"), "{res}");
    }
    cloud.stop().await;
}

/// A stock EdgeCore confirms a pod's deletion once its containers stopped
/// (kubelet's `DeleteOptions` with the uid as precondition) and waits for
/// `"OK"`; it retries one whose answer it missed, when the pod is gone.
/// Gone, or replaced by a newer pod of the same name, is success. Another
/// node's pod is refused with a `StatusError`, which EdgeCore's
/// `Pods().Delete` reads as a failure (anything but `"OK"` is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deletion_is_answered_ok_also_once_the_pod_is_gone() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    let web = cloud.pod("web", "a", None).await;
    let other = cloud.pod("other", "b", None).await;
    let a = Edge::connect(&cloud, "a").await;
    eventually("a has its pod", WAIT, || a.has("default/pod/web").is_some()).await;
    cloud.store.delete(&PODS, "default", "web", &Default::default()).await.unwrap();
    eventually("deletionTimestamp at the edge", WAIT, || {
        a.has("default/pod/web").is_some_and(|(_, v)| v["metadata"]["deletionTimestamp"].is_string())
    })
    .await;
    let confirm = |name: &str, uid: &str| {
        req("delete", &format!("default/pod/{name}"), json!({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}))
    };
    let ok = |m: &Message| m.route.operation == "response" && m.content.as_text().as_deref() == Some("OK");

    let answer = ask(&a, confirm("web", web.uid().unwrap())).await;
    assert!(ok(&answer), "{:?}", answer.content.to_value());
    assert!(cloud.store.get(&PODS, "default", "web").await.is_err(), "the pod is removed");
    // The retry of a confirmation whose answer was lost.
    let again = ask(&a, confirm("web", web.uid().unwrap())).await;
    assert!(ok(&again), "{:?}", again.content.to_value());

    // A newer pod of the same name: the old one's confirmation is success
    // and leaves the newer one alone.
    let newer = cloud.pod("web", "a", None).await;
    let stale = ask(&a, confirm("web", web.uid().unwrap())).await;
    assert!(ok(&stale), "{:?}", stale.content.to_value());
    assert_eq!(cloud.store.get(&PODS, "default", "web").await.unwrap().uid(), newer.uid());
    // Older KubeEdge edges send the uid alone.
    let legacy = Message::new()
        .with_route("edged", "meta", "default/pod/web", "delete")
        .with_content(Content::string(newer.uid().unwrap()));
    assert!(ok(&ask(&a, legacy).await));
    assert!(cloud.store.get(&PODS, "default", "web").await.is_err());

    // Another node's pod: Forbidden, and it stays.
    let forbidden_before = cloud.metric("edgehive_edgecontroller_forbidden_total");
    let no = ask(&a, confirm("other", other.uid().unwrap())).await;
    assert_eq!(
        no.content.as_json(),
        r#"{"ErrStatus":{"metadata":{},"status":"Failure","message":"pods \"other\" is forbidden: pod default/other is bound to another node","reason":"Forbidden","details":{"name":"other","kind":"pods"},"code":403}}"#,
        "a bare StatusError, as Go encodes NewForbidden(…)"
    );
    assert_eq!(refusal_status(&no)["code"], 403);
    assert!(refused(&no).contains("bound to another node"));
    assert_eq!(cloud.store.get(&PODS, "default", "other").await.unwrap().uid(), other.uid());
    assert_eq!(cloud.metric("edgehive_edgecontroller_forbidden_total") - forbidden_before, 1);
    cloud.stop().await;
}

/// Each refusal in the shape CloudCore uses for that kind of request, with
/// Kubernetes' code and reason, so that a KubeEdge EdgeCore reads it as the
/// failure it is: `ObjectResp` with `Err` for registration, patches and
/// leases; a bare `StatusError` where EdgeCore waits for `"OK"`; the text
/// for queries (EdgeCore would decode any JSON object as the object asked
/// for, an empty one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_take_the_shape_edgecore_reads_as_a_failure() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    cloud.pod("a-pod", "a", None).await;
    let b_pod = cloud.pod("b-pod", "b", None).await;
    let b_node = cloud.store.get(&NODES, "", "b").await.unwrap();
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b-data", "namespace": "default"}});
    cloud.store.create(&CONFIGMAPS, cm).await.unwrap();
    let a = Edge::connect(&cloud, "a").await;
    eventually("a has its pod", WAIT, || a.has("default/pod/a-pod").is_some()).await;

    enum Shape {
        ObjectResp,
        StatusError,
        Text,
    }
    let lease = json!({"metadata": {"name": "a"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0}});
    let cases = [
        (req("query", "default/configmap/b-data", json!(null)), Shape::Text, 403, "Forbidden"),
        (req("query", "default/node/b", json!(null)), Shape::Text, 403, "Forbidden"),
        (req("query", "kube-node-lease/lease/b", json!(null)), Shape::ObjectResp, 403, "Forbidden"),
        (req("insert", "kube-node-lease/lease/a", lease), Shape::ObjectResp, 422, "Invalid"),
        (req("insert", "default/node/b", json!({"metadata": {"name": "b"}})), Shape::ObjectResp, 403, "Forbidden"),
        (nodepatch("b", json!({"status": {}})), Shape::ObjectResp, 403, "Forbidden"),
        (podpatch("b-pod", json!({"status": {"phase": "Failed"}})), Shape::ObjectResp, 403, "Forbidden"),
        (podpatch("a-pod", json!({"status": {"podIP": 5}})), Shape::ObjectResp, 400, "BadRequest"),
        (
            req("update", "default/podstatus/b-pod", json!({"UID": b_pod.uid(), "Status": {"phase": "Failed"}})),
            Shape::StatusError,
            403,
            "Forbidden",
        ),
        (
            req("update", "default/nodestatus/b", json!({"UID": b_node.uid(), "Status": {"phase": "Running"}})),
            Shape::StatusError,
            403,
            "Forbidden",
        ),
        (
            req("delete", "default/pod/b-pod", json!({"preconditions": {"uid": b_pod.uid()}})),
            Shape::StatusError,
            403,
            "Forbidden",
        ),
        (req("update", "default/node/a", json!({"metadata": {"name": "a"}})), Shape::StatusError, 400, "BadRequest"),
    ];
    for (m, shape, code, reason) in cases {
        let what = format!("{} {}", m.route.operation, m.route.resource);
        let answer = ask(&a, m).await;
        let why = refused(&answer);
        let v = answer.content.to_value();
        match shape {
            Shape::Text => {
                assert!(v.is_string(), "{what}: {v}");
                assert!(why.contains("is forbidden"), "{what}: {why}");
                continue;
            }
            Shape::ObjectResp => assert!(v.get("Err").is_some() && v.get("Object").is_some(), "{what}: {v}"),
            Shape::StatusError => assert!(v.get("ErrStatus").is_some(), "{what}: {v}"),
        }
        let status = refusal_status(&answer);
        assert_eq!((status["code"].as_u64(), status["reason"].as_str()), (Some(code), Some(reason)), "{what}: {v}");
        assert_eq!(status["message"].as_str(), Some(why.as_str()));
    }
    // A 422 carries the API server's causes.
    let lease = json!({"metadata": {"name": "a"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 0}});
    let status = refusal_status(&ask(&a, req("insert", "kube-node-lease/lease/a", lease)).await);
    assert_eq!(status["details"]["causes"][0]["field"], "spec.leaseDurationSeconds", "{status}");
    cloud.stop().await;
}

/// An edge records Events about itself and its own pods (its store was
/// rebuilt, say), nothing else; validated as the API validates them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_records_events_about_itself_and_its_pods_only() {
    use edgehive_store::resources::EVENTS;
    let (cloud, a) = two_nodes_and_edge_a().await;
    let event = |name: &str, kind: &str, obj: &str| {
        let mut involved = json!({"apiVersion": "v1", "kind": kind, "name": obj});
        if kind == "Pod" {
            involved["namespace"] = json!("default");
        }
        req(
            "insert",
            &format!("default/event/{name}"),
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "labels": {"x": "y"}},
                "involvedObject": involved, "reason": "EdgeStoreRebuilt", "type": "Warning",
                "message": "the local store failed its integrity check", "source": {"component": "edgehive-edge", "host": "a"},
                "count": 1, "firstTimestamp": "2026-11-24T00:00:00Z", "lastTimestamp": "2026-11-24T00:00:00Z"}),
        )
    };
    let ok = ask(&a, event("a.rebuilt", "Node", "a")).await;
    assert_eq!(ok.route.operation, "response", "{:?}", ok.content.as_text());
    let stored = cloud.store.get(&EVENTS, "default", "a.rebuilt").await.unwrap().value().unwrap().clone();
    assert_eq!(stored["reason"], "EdgeStoreRebuilt");
    assert!(stored["metadata"]["labels"].is_null(), "the metadata is the server's");
    // The same again (a retry): answered with the stored one.
    assert_eq!(ask(&a, event("a.rebuilt", "Node", "a")).await.route.operation, "response");
    assert_eq!(ask(&a, event("a-pod.started", "Pod", "a-pod")).await.route.operation, "response");
    for (name, kind, obj) in [("b.x", "Node", "b"), ("b-pod.x", "Pod", "b-pod"), ("s.x", "Secret", "creds")] {
        let why = refused(&ask(&a, event(name, kind, obj)).await);
        assert!(why.contains("may record events only about itself") || why.contains("bound"), "{why}");
        assert!(cloud.store.get(&EVENTS, "default", name).await.is_err());
    }
    // An Event that does not validate.
    let mut bad = event("a.bad", "Node", "a");
    bad.content = edgehive_model::Content::from_serialize(
        &json!({"involvedObject": {"kind": "Node", "name": "a"}, "count": "many"}),
    )
    .unwrap();
    refused(&ask(&a, bad).await);
    cloud.stop().await;
}

/// A repeat of an Event an edge recorded raises its count, as client-go's
/// recorder patches it (KubeEdge's `{"event", "patchData"}`): only `count`,
/// `lastTimestamp` and `message` of an Event about the node's own pod;
/// another node's Event, another field or a missing Event is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_counts_up_its_own_events_only() {
    use edgehive_store::resources::EVENTS;
    let (cloud, a) = two_nodes_and_edge_a().await;
    let event = |name: &str, pod: &str| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": pod,
                "fieldPath": "spec.containers{main}"},
            "reason": "BackOff", "type": "Warning", "message": "Back-off restarting failed container main",
            "source": {"component": "kubelet", "host": "a"}, "count": 1,
            "firstTimestamp": "2026-11-24T00:00:00Z", "lastTimestamp": "2026-11-24T00:00:00Z"})
    };
    let patch = |name: &str, pod: &str, data: &str| {
        req("patch", &format!("default/event/{name}"), json!({"event": event(name, pod), "patchData": data}))
    };
    let ok = ask(&a, req("insert", "default/event/a-pod.1", event("a-pod.1", "a-pod"))).await;
    assert_eq!(ok.route.operation, "response", "{:?}", ok.content.as_text());
    let data =
        r#"{"count":7,"lastTimestamp":"2026-11-24T00:05:00Z","message":"Back-off restarting failed container main"}"#;
    let counted = ask(&a, patch("a-pod.1", "a-pod", data)).await;
    assert_eq!(counted.route.operation, "response", "{:?}", counted.content.as_text());
    assert_eq!(counted.content.to_value()["Object"]["count"], 7, "ObjectResp with the Event");
    let stored = cloud.store.get(&EVENTS, "default", "a-pod.1").await.unwrap().value().unwrap().clone();
    assert_eq!((stored["count"].as_i64(), stored["lastTimestamp"].as_str()), (Some(7), Some("2026-11-24T00:05:00Z")));
    assert_eq!(stored["firstTimestamp"], "2026-11-24T00:00:00Z");

    // Another node's pod's Event, stored by its own kubelet.
    let mut theirs = event("b-pod.1", "b-pod");
    theirs["source"]["host"] = json!("b");
    cloud.store.create(&EVENTS, theirs).await.unwrap();
    let cases = [
        (patch("b-pod.1", "a-pod", data), 403, "Forbidden"),
        (patch("a-pod.1", "a-pod", r#"{"reason":"Started"}"#), 403, "Forbidden"),
        (patch("a-pod.1", "a-pod", r#"{"involvedObject":{"name":"b-pod"}}"#), 403, "Forbidden"),
        (patch("a-pod.gone", "a-pod", data), 404, "NotFound"),
        (patch("a-pod.1", "a-pod", "count=8"), 400, "BadRequest"),
        (patch("a-pod.1", "a-pod", r#"{"count":"many"}"#), 400, "BadRequest"),
    ];
    for (m, code, reason) in cases {
        let what = format!("{} {}", m.route.resource, m.content.to_value()["patchData"]);
        let answer = ask(&a, m).await;
        refused(&answer);
        let v = answer.content.to_value();
        assert!(v.get("Err").is_some() && v.get("Object").is_some(), "{what}: {v}");
        let status = refusal_status(&answer);
        assert_eq!((status["code"].as_u64(), status["reason"].as_str()), (Some(code), Some(reason)), "{what}: {v}");
    }
    let after = cloud.store.get(&EVENTS, "default", "b-pod.1").await.unwrap().value().unwrap().clone();
    assert_eq!(after["count"], 1, "another node's Event is unchanged");
    let ours = cloud.store.get(&EVENTS, "default", "a-pod.1").await.unwrap().value().unwrap().clone();
    assert_eq!((ours["count"].as_i64(), ours["reason"].as_str()), (Some(7), Some("BackOff")));
    cloud.stop().await;
}

/// Nodes `a` and `b` with a pod each, and edge `a` connected with its pod.
/// Edges a and b connected (b has its pod), the store held by another
/// SQLite writer (`BEGIN IMMEDIATE` on the returned connection; `ROLLBACK`
/// frees it), and a status patch of a's ready to send.
async fn edges_a_and_b_with_the_store_held() -> (Cloud, Edge, Edge, rusqlite::Connection, Message) {
    let (cloud, a) = two_nodes_and_edge_a().await;
    let b = Edge::connect(&cloud, "b").await;
    eventually("b has its pod", WAIT, || b.has("default/pod/b-pod").is_some()).await;
    let other = rusqlite::Connection::open(cloud.db_path()).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let patch = nodepatch("a", json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    (cloud, a, b, other, patch)
}

async fn two_nodes_and_edge_a() -> (Cloud, Edge) {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    cloud.edge_node("b").await;
    cloud.pod("a-pod", "a", None).await;
    cloud.pod("b-pod", "b", None).await;
    let a = Edge::connect(&cloud, "a").await;
    eventually("a has its pod", WAIT, || a.has("default/pod/a-pod").is_some()).await;
    (cloud, a)
}

/// Upstream resources must be `{ns}/{type}[/{name}]`, except DeviceTwin's
/// device reports (`device/{id}/twin/edge_updated`), which must still be
/// short and printable: a forged one cannot reach a controller or a log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_upstream_resources_are_refused_also_for_device_reports() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    let a = Edge::connect(&cloud, "a").await;
    let twin = |resource: String| {
        Message::new()
            .with_route("twin", "resource", resource, "update")
            .with_content(Content::from_serialize(&json!({"twin": {}})).unwrap())
    };
    for m in [
        req("update", "a/b/c/d", json!(null)),
        twin("device/x\u{1b}[31m/twin/edge_updated".into()),
        twin("device/x\n/twin/edge_updated".into()),
        twin(format!("device/{}/twin/edge_updated", "x".repeat(600))),
    ] {
        let what = m.route.resource.to_string();
        let no = ask(&a, m).await;
        assert_eq!(no.route.operation, "error", "{what:?}");
        assert!(no.content.as_text().unwrap().contains("malformed resource"), "{what:?}: {:?}", no.content.as_text());
    }
    // A well-formed device report passes the check (and reaches the
    // controller's module, absent here: "cannot take").
    let passed = ask(&a, twin("device/x/twin/edge_updated".into())).await;
    assert!(!passed.content.as_text().unwrap().contains("malformed"), "{:?}", passed.content.as_text());
}

/// DeviceController's membership updates name no object
/// (`node/{node}/membership`): CloudHub sends them once, without the node
/// prefix, as KubeEdge does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_membership_updates_reach_their_node() {
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    cloud.edge_node("a").await;
    let a = Edge::connect(&cloud, "a").await;
    let m = Message::new()
        .with_route("devicecontroller", "twin", "node/a/membership", "update")
        .with_content(Content::from_serialize(&json!({"added_devices": [{"id": "d", "name": "d"}]})).unwrap());
    let id = m.header.msg_id.clone();
    // Sent once, without ACK: one sent before the node's session is in
    // place is dropped (as KubeEdge drops it), so it is sent until it lands.
    let deadline = tokio::time::Instant::now() + WAIT;
    let got = loop {
        cloud.ctx.send("cloudhub", m.clone()).await.unwrap();
        let mut got = None;
        let landed = tokio::time::timeout(Duration::from_millis(500), async {
            loop {
                got = a.receipts("membership").into_iter().find(|m| m.header.msg_id == id);
                if got.is_some() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        if landed.is_ok() {
            break got.unwrap();
        }
        assert!(tokio::time::Instant::now() < deadline, "the membership update never reached node a");
    };
    assert_eq!((got.route.group.as_str(), got.route.resource.as_str()), ("twin", "membership"));
    assert_eq!(got.content.to_value()["added_devices"][0]["id"], "d");
}

/// Many nodes connect while a controller is too busy to take their notices
/// (its mailbox holds one): none is lost. Each node's newest state reaches
/// it once it reads again, and the busy controller holds no other up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_notices_wait_for_a_busy_controller_and_none_is_lost() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use edgehive_beehive::{FnModule, Module};
    use edgehive_model::{op, source};

    let gate = Arc::new(tokio::sync::Notify::new());
    let heard: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let busy: Arc<dyn Module> = Arc::new(
        FnModule::new(source::DEVICECONTROLLER, source::DEVICECONTROLLER, {
            let (gate, heard) = (gate.clone(), heard.clone());
            move |mut ctx, cancel| {
                let (gate, heard) = (gate.clone(), heard.clone());
                Box::pin(async move {
                    tokio::select! {
                        _ = gate.notified() => {}
                        _ = cancel.cancelled() => return Ok(()),
                    }
                    while let Some(m) = ctx.receive_until(&cancel).await {
                        heard.lock().unwrap().push((m.route.resource.to_string(), m.route.operation.to_string()));
                    }
                    Ok(())
                })
            }
        })
        .mailbox_capacity(1),
    );
    let cloud = Cloud::start_with_modules(
        CloudHubConfig::default(),
        edgehive_edgecontroller::LifecycleConfig::default(),
        vec![busy],
    )
    .await;
    let mut edges = Vec::new();
    for i in 0..20 {
        edges.push(Edge::connect(&cloud, &format!("edge-{i}")).await);
    }
    eventually("all connected", WAIT, || cloud.hub.connected_nodes().len() == 20).await;
    // The busy controller holds one notice; the rest wait in CloudHub.
    eventually("notices waiting", WAIT, || cloud.metric("edgehive_cloudhub_connection_notices_pending") >= 18).await;
    // The other controllers are not held up: SyncController's and
    // EdgeController's notices were handed over (only the busy one's wait).
    assert!(cloud.metric("edgehive_cloudhub_connection_notices_pending") <= 20);
    // Five leave while their `connected` still waits: they are heard of as
    // disconnected.
    for e in edges.drain(15..) {
        e.disconnect().await;
    }
    eventually("five disconnected", WAIT, || cloud.hub.connected_nodes().len() == 15).await;
    gate.notify_one();
    eventually("every notice handed over", WAIT, || cloud.metric("edgehive_cloudhub_connection_notices_pending") == 0)
        .await;
    let newest = |heard: &[(String, String)]| -> HashMap<String, String> {
        heard.iter().map(|(r, o)| (r.clone(), o.clone())).collect()
    };
    eventually("every node's newest state heard", WAIT, || {
        let last = newest(&heard.lock().unwrap());
        (0..20).all(|i| {
            let want = if i < 15 { op::CONNECTED } else { op::DISCONNECTED };
            last.get(&format!("node/edge-{i}")).map(String::as_str) == Some(want)
        })
    })
    .await;
    drop(edges);
    cloud.stop().await;
}

/// An edge on QUIC that agreed session liveness sends no `keepalive`
/// message: QUIC's keep-alives keep its session past the keepalive
/// interval. One that did not agree and sends none loses its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quic_edge_that_agreed_liveness_needs_no_keepalive_messages() {
    let interval = Duration::from_millis(400);
    let cloud = Cloud::start(CloudHubConfig { keepalive_interval: interval, ..CloudHubConfig::default() }).await;
    let mut links = Vec::new();
    for (node, offer) in [("edge-live", true), ("edge-mute", false)] {
        let cert = cloud.ca.node(node);
        let mut cfg = cloud.client_config(node, &cert);
        cfg.server = cloud.quic_addr.to_string();
        cfg.ping_keepalive = offer;
        cfg.conn.ping_interval = Some(Duration::from_millis(100));
        let client = edgehive_viaduct::quic::QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
        let conn = client.connect().await.unwrap();
        assert_eq!(conn.peer().ping_keepalive, offer, "{node}");
        links.push((client, conn.split()));
    }
    eventually("the silent edge that did not agree loses its session", WAIT, || {
        cloud.metric("edgehive_cloudhub_keepalive_expired_total") == 1
    })
    .await;
    // Three intervals without a message: the live edge's session stays.
    tokio::time::sleep(interval * 3).await;
    assert_eq!(cloud.hub.connected_nodes(), ["edge-live"]);
    assert_eq!(cloud.metric("edgehive_cloudhub_keepalive_expired_total"), 1);
    drop(links);
    cloud.stop().await;
}

/// Requests of different nodes run at once, each node's in the order it
/// sent them: with the database held by another writer, node a's status
/// patch waits for the store, and so does a's read sent after it, but node
/// b's read is answered meanwhile. Once the store is free, a's patch is
/// answered first and its read sees what the patch wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_waiting_on_the_store_holds_no_other_node_up_and_keeps_its_own_order() {
    let (cloud, a, b, other, patch) = edges_a_and_b_with_the_store_held().await;
    let read = req("query", "default/node/a", json!(null));
    let (patch_id, read_id) = (patch.header.msg_id.clone(), read.header.msg_id.clone());
    a.tx.try_write(patch).unwrap();
    a.tx.try_write(read).unwrap();
    let answered = |edge: &Edge, id: &str| edge.others().into_iter().find(|m| m.header.parent_msg_id == id);
    eventually("a's patch taken and its read waiting behind it", WAIT, || {
        cloud.metric("edgehive_edgecontroller_upstream_in_flight") == 1
            && cloud.metric("edgehive_edgecontroller_upstream_waiting") == 1
    })
    .await;
    let b_read = ask(&b, req("query", "default/node/b", json!(null))).await;
    assert_eq!(b_read.route.operation, "response");
    assert!(answered(&a, &patch_id).is_none(), "a's patch waits for the store");
    assert!(answered(&a, &read_id).is_none(), "a's read waits behind a's patch");
    other.execute_batch("ROLLBACK").unwrap();
    eventually("a's read answered", WAIT, || answered(&a, &read_id).is_some()).await;
    let order: Vec<_> = a
        .others()
        .into_iter()
        .filter(|m| m.header.parent_msg_id == patch_id || m.header.parent_msg_id == read_id)
        .map(|m| m.header.parent_msg_id.to_string())
        .collect();
    assert_eq!(order, [patch_id.to_string(), read_id.to_string()]);
    let node = answered(&a, &read_id).unwrap().content.to_value();
    assert_eq!(node["status"]["conditions"][0]["status"], "True", "the read saw the patch");
    cloud.stop().await;
}

/// An edge that floods requests while its first waits on the store holds
/// up only itself: past its share of waiting requests (256) the rest are
/// refused at once as busy, every one answered, and another node's request
/// is served meanwhile. Before the share, 4,096 requests of one node filled
/// the waiting room, the controller stopped reading its mailbox, and every
/// node's requests waited behind the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_flooding_requests_holds_up_only_itself() {
    const FLOOD: usize = 5000;
    const SHARE: usize = 256;
    let (cloud, a, b, other, patch) = edges_a_and_b_with_the_store_held().await;
    let handed = cloud.metric("edgehive_cloudhub_upstream_total");
    let mut ids = std::collections::HashSet::new();
    let patch_id = patch.header.msg_id.clone();
    ids.insert(patch_id.to_string());
    a.tx.write(patch).await.unwrap();
    eventually("a's patch waits on the store", WAIT, || {
        cloud.metric("edgehive_edgecontroller_upstream_in_flight") == 1
    })
    .await;
    for _ in 0..FLOOD {
        let read = req("query", "default/node/a", json!(null));
        ids.insert(read.header.msg_id.to_string());
        a.tx.write(read).await.unwrap();
    }
    // Every request of a's (the patch and the flood) handed to the
    // controller, before b asks.
    eventually("a's flood handed over", WAIT, || {
        cloud.metric("edgehive_cloudhub_upstream_total") > handed + FLOOD as u64
    })
    .await;
    // The store is still held: b's read is served all the same.
    let b_read = ask(&b, req("query", "default/node/b", json!(null))).await;
    assert_eq!(b_read.route.operation, "response", "b is served: {:?}", b_read.content.as_text());
    assert!(
        !a.others().iter().any(|m| m.header.parent_msg_id == patch_id),
        "b was served while a's patch still waited on the store"
    );
    let is_busy = |m: &Message| {
        m.route.operation == "error"
            && m.content.as_text().is_some_and(|t| t.ends_with(edgehive_model::well_known::CLOUD_BUSY))
    };
    let busy = |edge: &Edge| edge.others().iter().filter(|m| is_busy(m)).count();
    // Answers a's session (or CloudHub's mailbox) has no room for are
    // dropped and counted (an edge that floods does not read them all in time).
    let dropped = || {
        (cloud.metric("edgehive_cloudhub_dropped_total{reason=\"full\"}")
            + cloud.metric("edgehive_edgecontroller_busy_answers_unsent_total")) as usize
    };
    eventually("a's requests past its share refused", WAIT, || busy(&a) + dropped() == FLOOD - SHARE).await;
    assert!(busy(&a) > 0);
    assert_eq!(cloud.metric("edgehive_edgecontroller_upstream_waiting"), SHARE as u64);
    assert_eq!(cloud.metric("edgehive_edgecontroller_upstream_busy_total"), (FLOOD - SHARE) as u64);
    other.execute_batch("ROLLBACK").unwrap();
    // What was taken is served: the patch, then the reads behind it.
    let served = || a.others().iter().filter(|m| !is_busy(m) && ids.contains(m.header.parent_msg_id.as_str())).count();
    eventually("a's requests taken all answered", WAIT, || served() == SHARE + 1).await;
    assert_eq!(busy(&a) + dropped(), FLOOD - SHARE);
    cloud.stop().await;
}

/// What the controller remembers of sessions is bounded by the nodes that
/// exist: a deleted node's session, and the session of a node that never
/// registered, leave nothing behind once they end (nodes joining and
/// leaving all day must not grow the cloud).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_sessions_of_nodes_that_are_gone_are_forgotten() {
    let (cloud, a) = two_nodes_and_edge_a().await;
    let sessions = || cloud.metric("edgehive_edgecontroller_sessions");
    eventually("a's session known", WAIT, || sessions() == 1).await;
    // A node that never registers connects and leaves.
    let stranger = Edge::connect(&cloud, "stranger").await;
    eventually("the stranger's session known", WAIT, || sessions() == 2).await;
    stranger.disconnect().await;
    eventually("the stranger's session forgotten", WAIT, || sessions() == 1).await;
    // An existing node's ended session is remembered (its end is a beat).
    let b = Edge::connect(&cloud, "b").await;
    eventually("b's session known", WAIT, || sessions() == 2).await;
    b.disconnect().await;
    eventually("b's session ended", WAIT, || cloud.hub.connected_nodes().len() == 1).await;
    assert_eq!(sessions(), 2, "b still exists: its session's end is kept");
    // a's Node is deleted: CloudHub ends its session, and nothing of it stays.
    cloud.store.delete(&NODES, "", "a", &Default::default()).await.unwrap();
    eventually("a's session ended", WAIT, || cloud.hub.connected_nodes().is_empty()).await;
    eventually("a's session forgotten", WAIT, || sessions() == 1).await;
    drop(a);
    cloud.stop().await;
}

/// A deleted node's Lease goes with it when the Lease names Nodes as its
/// owners (kubelet's ownerReference) and none of them exists, as
/// Kubernetes' garbage collector deletes it — also when the owner it names
/// is another Node of that name that is not there; a Lease owned by
/// nothing stays. Nodes that leave leave no Lease behind. (Whether the
/// controller sees the deletes or lists the Nodes after them, the outcome
/// is the same: `orphans` has the relist's own test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_nodes_lease_goes_with_it() {
    use edgehive_store::resources::LEASES;
    let cloud = Cloud::start(CloudHubConfig::default()).await;
    let lease = |node: &str, owner: Option<&str>| {
        let mut l = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": node, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40}});
        if let Some(uid) = owner {
            l["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]);
        }
        l
    };
    let lease_of = |node: &'static str| {
        let store = cloud.store.clone();
        async move { store.get(&LEASES, "kube-node-lease", node).await.is_ok() }
    };
    for (node, owned) in [("owned", true), ("unowned", false), ("stranger", true)] {
        cloud.edge_node(node).await;
        let uid = cloud.store.get(&NODES, "", node).await.unwrap().uid().unwrap().to_owned();
        let owner = match (owned, node) {
            (true, "stranger") => Some("another-node-of-that-name".to_owned()),
            (true, _) => Some(uid),
            (false, _) => None,
        };
        cloud.store.create(&LEASES, lease(node, owner.as_deref())).await.unwrap();
    }
    // The owned one last: once its Lease is gone, the others' deletes
    // (seen in the order they were made) were handled too.
    for node in ["unowned", "stranger", "owned"] {
        cloud.store.delete(&NODES, "", node, &Default::default()).await.unwrap();
    }
    eventually_async("the owned Lease deleted", WAIT, || async { !lease_of("owned").await }).await;
    // (A relist that took the deletes checks the Leases in name order.)
    eventually_async("a Lease whose owning Node is not there deleted", WAIT, || async { !lease_of("stranger").await })
        .await;
    assert!(lease_of("unowned").await, "a Lease no Node owns stays");
    // An edge's Lease create that lands after its Node went: the Node was
    // replaced by a new one of its name, and the edge still names the old
    // uid. The Lease is deleted again and the edge told its Node is gone.
    cloud.edge_node("late").await;
    let old_uid = cloud.store.get(&NODES, "", "late").await.unwrap().uid().unwrap().to_owned();
    cloud.store.delete(&NODES, "", "late", &Default::default()).await.unwrap();
    cloud.edge_node("late").await;
    let late = Edge::connect(&cloud, "late").await;
    let create = |uid: &str| {
        let mut l = lease("late", Some(uid));
        l["metadata"].as_object_mut().unwrap().remove("namespace");
        req("insert", "kube-node-lease/lease/late", l)
    };
    let refused = ask(&late, create(&old_uid)).await;
    assert_eq!(refused.route.operation, "error", "{:?}", refused.content.as_json());
    assert!(refused.content.as_json().contains(r#"nodes \"late\" not found"#), "{}", refused.content.as_json());
    assert!(!lease_of("late").await, "no Lease outlives its Node");
    // With the Node's own uid it stays.
    let new_uid = cloud.store.get(&NODES, "", "late").await.unwrap().uid().unwrap().to_owned();
    assert_eq!(ask(&late, create(&new_uid)).await.route.operation, "response");
    assert!(lease_of("late").await);
    cloud.stop().await;
}
