//! The API through real clients: the `kube` crate (typed, watcher) and raw
//! requests for each error class, checking the `Status` answered and that a
//! refused request stores nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Cluster, get_accept, raw};
use futures_util::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str, labels: Value, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "app", "image": "busybox:1.36"}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_client_lists_and_watches_pods() {
    let c = Cluster::start().await;
    let client = c.admin().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": app}), None)).await.unwrap();
    }
    let web = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
    let names: Vec<_> = web.items.iter().filter_map(|p| p.metadata.name.clone()).collect();
    assert_eq!(names, ["a", "b"]);
    let got = pods.get("c").await.unwrap();
    assert_eq!(got.spec.unwrap().restart_policy.as_deref(), Some("Always"), "defaults applied");
    assert_eq!(got.status.unwrap().phase.as_deref(), Some("Pending"));

    // The runtime watcher: an initial list, then live changes.
    let stream = watcher(pods.clone(), watcher::Config::default().labels("app=web"));
    let mut stream = Box::pin(stream);
    let mut initial = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, stream.next()).await.unwrap().unwrap().unwrap() {
            watcher::Event::Init => {}
            watcher::Event::InitApply(p) => initial.push(p.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    initial.sort();
    assert_eq!(initial, ["a", "b"]);
    pods.create(&PostParams::default(), &pod("d", json!({"app": "web"}), None)).await.unwrap();
    pods.patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"v": "2"}}}))).await.unwrap();
    pods.delete("b", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        match tokio::time::timeout(WAIT, stream.next()).await.unwrap().unwrap().unwrap() {
            watcher::Event::Apply(p) => seen.push(format!("apply {}", p.metadata.name.unwrap())),
            watcher::Event::Delete(p) => seen.push(format!("delete {}", p.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["apply d", "apply a", "delete b"]);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_round_trips_and_status_subresource() {
    let c = Cluster::start().await;
    let client = c.admin().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node =
        serde_json::from_value(json!({"metadata": {"name": "edge-1", "labels": {"node-role.kubernetes.io/edge": ""}}}))
            .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    // The main resource ignores status; /status changes only status.
    let with_status = json!({"metadata": {"labels": {"x": "1"}}, "status": {"phase": "Running"}});
    let n = nodes.patch("edge-1", &PatchParams::default(), &Patch::Merge(with_status)).await.unwrap();
    assert!(n.status.as_ref().and_then(|s| s.phase.clone()).is_none());
    assert_eq!(n.metadata.labels.unwrap()["x"], "1");
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.32.0-edgehive"}}});
    let n = nodes.patch_status("edge-1", &PatchParams::default(), &Patch::Strategic(ready)).await.unwrap();
    assert_eq!(n.status.unwrap().conditions.unwrap()[0].status, "True");

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "edge-1"}, "spec": {"holderIdentity": "edge-1", "leaseDurationSeconds": 40}}),
    )
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let mut l = leases.get("edge-1").await.unwrap();
    l.spec.as_mut().unwrap().lease_duration_seconds = Some(50);
    let l2 = leases.replace("edge-1", &PostParams::default(), &l).await.unwrap();
    assert!(l2.metadata.resource_version != l.metadata.resource_version);
    // Replacing again with the old resourceVersion is a conflict.
    match leases.replace("edge-1", &PostParams::default(), &l).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict")),
        other => panic!("{other:?}"),
    }
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_required_and_checked() {
    let c = Cluster::start().await;
    let anon = c.anonymous().await;
    let a = raw(&anon, "GET", "/api/v1/pods", "", "").await;
    assert_eq!((a.code, a.body["reason"].as_str()), (401, Some("Unauthorized")));
    assert_eq!(raw(&anon, "GET", "/healthz", "", "").await.code, 200);
    let alice = c.as_user("alice", &["developers"]).await;
    let a = raw(&alice, "GET", "/api/v1/namespaces/default/secrets", "", "").await;
    assert_eq!(a.code, 403);
    assert_eq!(
        a.body["message"],
        "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
    );
    let a = raw(
        &alice,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        r#"{"metadata":{"name":"x"}}"#,
    )
    .await;
    assert_eq!(a.code, 403);
    assert!(c.store.get(&edgehive_store::resources::CONFIGMAPS, "default", "x").await.is_err());
    // Discovery is open to any authenticated user.
    assert_eq!(raw(&alice, "GET", "/api/v1", "", "").await.code, 200);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_tokens_authenticate_and_forged_ones_do_not() {
    let c = Cluster::start().await;
    let now = time::OffsetDateTime::now_utc();
    let for_default = edgehive_pki::TokenFor {
        namespace: "default",
        name: "default",
        uid: "u",
        validity: std::time::Duration::from_secs(3600),
        ..Default::default()
    };
    // Signed with the key the server keeps under its data directory.
    let ours = edgehive_pki::ServiceAccountTokens::load_or_create(&c.dir.path().join("tls")).unwrap();
    let (token, _) = ours.issue(&for_default, now).unwrap();
    let sa = c.with_bearer(&token).await;
    let a = raw(&sa, "GET", "/api/v1/namespaces/default/secrets", "", "").await;
    assert_eq!(a.code, 403, "authenticated, not authorized: {}", a.body);
    assert!(
        a.body["message"].as_str().unwrap().contains("User \"system:serviceaccount:default:default\""),
        "{}",
        a.body
    );
    // Another key's token is no credential.
    let (forged, _) = edgehive_pki::ServiceAccountTokens::generate().unwrap().issue(&for_default, now).unwrap();
    let a = raw(&c.with_bearer(&forged).await, "GET", "/api/v1/namespaces/default/secrets", "", "").await;
    assert_eq!(a.code, 401);
    c.stop().await;
}

/// Runs `request` and checks it is refused with `code`/`reason` and leaves
/// the store's revision where it was.
async fn refused(
    c: &Cluster,
    client: &kube::Client,
    method: &str,
    path: &str,
    ct: &str,
    body: &[u8],
    want: (u16, &str),
) -> Value {
    let (code, reason) = want;
    let before = c.store.current_rev().await.unwrap();
    let a = raw(client, method, path, ct, body.to_vec()).await;
    assert_eq!(a.code, code, "{method} {path}: {}", a.body);
    assert_eq!(a.body["kind"], "Status", "{}", a.body);
    assert_eq!(a.body["reason"], reason, "{}", a.body);
    assert_eq!(a.body["code"], code);
    assert!(a.body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(c.store.current_rev().await.unwrap(), before, "{method} {path} changed the store");
    a.body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_status_and_stores_nothing() {
    let c = Cluster::start().await;
    let client = c.admin().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let json = "application/json";
    let ok = raw(&client, "POST", cms, json, r#"{"metadata":{"name":"keep"},"data":{"a":"1"}}"#).await;
    assert_eq!(ok.code, 201);

    let b = refused(&c, &client, "POST", cms, json, b"{\"metadata\":", (400, "BadRequest")).await;
    assert!(b["message"].as_str().unwrap().contains("not valid JSON"));
    refused(&c, &client, "POST", cms, "application/yaml", b"metadata: [unclosed\n", (400, "BadRequest")).await;
    refused(&c, &client, "POST", cms, json, b"[1,2,3]", (400, "BadRequest")).await;
    refused(&c, &client, "POST", cms, json, b"", (400, "BadRequest")).await;
    refused(
        &c,
        &client,
        "POST",
        cms,
        json,
        br#"{"apiVersion":"apps/v1","metadata":{"name":"x"}}"#,
        (400, "BadRequest"),
    )
    .await;
    refused(&c, &client, "POST", cms, json, br#"{"metadata":{"name":"x","namespace":"other"}}"#, (400, "BadRequest"))
        .await;
    refused(&c, &client, "POST", cms, json, br#"{"metadata":{"name":"x"},"data":"not-a-map"}"#, (400, "BadRequest"))
        .await;
    refused(&c, &client, "POST", cms, "application/xml", b"<x/>", (415, "UnsupportedMediaType")).await;
    let proto = "application/vnd.kubernetes.protobuf";
    refused(&c, &client, "POST", cms, proto, b"no magic here", (400, "BadRequest")).await;
    refused(&c, &client, "POST", cms, proto, b"k8s\x00\x0a\xff\xff\xff\xff\x0f", (400, "BadRequest")).await;
    // An envelope naming a type the decoder does not know: apps/v1 Deployment.
    let mut env = b"k8s\x00".to_vec();
    let type_meta = [&[0x0a, 7][..], b"apps/v1", &[0x12, 10][..], b"Deployment"].concat();
    env.extend_from_slice(&[0x0a, u8::try_from(type_meta.len()).unwrap()]);
    env.extend_from_slice(&type_meta);
    env.extend_from_slice(&[0x12, 0]);
    refused(&c, &client, "POST", cms, proto, &env, (415, "UnsupportedMediaType")).await;
    let inv = refused(&c, &client, "POST", cms, json, br#"{"metadata":{"name":"Bad_Name"}}"#, (422, "Invalid")).await;
    assert_eq!(inv["details"]["causes"][0]["field"], "metadata.name");
    assert!(
        inv["message"].as_str().unwrap().starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value")
    );
    let inv = refused(
        &c,
        &client,
        "POST",
        "/api/v1/namespaces/default/pods",
        json,
        br#"{"metadata":{"name":"p"},"spec":{}}"#,
        (422, "Invalid"),
    )
    .await;
    assert_eq!(inv["details"]["causes"][0]["field"], "spec.containers");
    let big = format!(r#"{{"metadata":{{"name":"big"}},"data":{{"a":"{}"}}}}"#, "x".repeat(4 << 20));
    refused(&c, &client, "POST", cms, json, big.as_bytes(), (413, "RequestEntityTooLarge")).await;
    refused(&c, &client, "POST", cms, json, br#"{"metadata":{"name":"keep"}}"#, (409, "AlreadyExists")).await;
    let stale = br#"{"metadata":{"name":"keep","resourceVersion":"1"},"data":{"a":"2"}}"#;
    refused(&c, &client, "PUT", &format!("{cms}/keep"), json, stale, (409, "Conflict")).await;
    refused(&c, &client, "PUT", &format!("{cms}/keep"), json, br#"{"metadata":{"name":"other"}}"#, (400, "BadRequest"))
        .await;
    refused(&c, &client, "GET", &format!("{cms}/missing"), "", b"", (404, "NotFound")).await;
    let nf = refused(
        &c,
        &client,
        "POST",
        "/api/v1/namespaces/nowhere/configmaps",
        json,
        br#"{"metadata":{"name":"x"}}"#,
        (404, "NotFound"),
    )
    .await;
    assert_eq!(nf["message"], "namespaces \"nowhere\" not found");
    refused(&c, &client, "GET", "/api/v1/widgets", "", b"", (404, "NotFound")).await;
    refused(&c, &client, "GET", &format!("{cms}?labelSelector=a%20in%20(",), "", b"", (400, "BadRequest")).await;
    let f =
        refused(&c, &client, "GET", &format!("{cms}?fieldSelector=spec.nodeName%3Dx"), "", b"", (400, "BadRequest"))
            .await;
    assert_eq!(f["message"], "field label not supported: spec.nodeName");
    refused(&c, &client, "GET", &format!("{cms}?limit=1&continue=garbage"), "", b"", (400, "BadRequest")).await;
    refused(&c, &client, "GET", &format!("{cms}?limit=abc"), "", b"", (400, "BadRequest")).await;
    // Patches.
    let patch = format!("{cms}/keep");
    refused(
        &c,
        &client,
        "PATCH",
        &patch,
        "application/json-patch+json",
        br#"[{"op":"test","path":"/data/a","value":"9"}]"#,
        (422, "Invalid"),
    )
    .await;
    refused(&c, &client, "PATCH", &patch, "application/json-patch+json", br#"{"op":"add"}"#, (400, "BadRequest")).await;
    refused(
        &c,
        &client,
        "PATCH",
        &patch,
        "application/merge-patch+json",
        br#"{"metadata":{"name":"Bad_Name"}}"#,
        (400, "BadRequest"),
    )
    .await;
    refused(
        &c,
        &client,
        "PATCH",
        &patch,
        "application/strategic-merge-patch+json",
        br#"{"metadata":{"$patch":"bogus"}}"#,
        (400, "BadRequest"),
    )
    .await;
    refused(&c, &client, "PATCH", &patch, "text/plain", b"x", (415, "UnsupportedMediaType")).await;
    let dev = raw(
        &client,
        "POST",
        "/apis/devices.kubeedge.io/v1beta1/namespaces/default/devices",
        json,
        r#"{"metadata":{"name":"d"},"spec":{}}"#,
    )
    .await;
    assert_eq!(dev.code, 201, "{}", dev.body);
    refused(
        &c,
        &client,
        "PATCH",
        "/apis/devices.kubeedge.io/v1beta1/namespaces/default/devices/d",
        "application/strategic-merge-patch+json",
        b"{}",
        (415, "UnsupportedMediaType"),
    )
    .await;
    // Deletes.
    refused(&c, &client, "DELETE", &patch, json, br#"{"preconditions":{"uid":"nope"}}"#, (409, "Conflict")).await;
    refused(&c, &client, "DELETE", "/api/v1/namespaces/default", "", b"", (403, "Forbidden")).await;
    refused(&c, &client, "DELETE", &patch, json, b"{not json", (400, "BadRequest")).await;
    // The object that was there all along is untouched.
    let keep = c.store.get(&edgehive_store::resources::CONFIGMAPS, "default", "keep").await.unwrap();
    assert_eq!(keep.value().unwrap()["data"]["a"], "1");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_a_compacted_revision_is_gone() {
    let c = Cluster::start_with(|s| s.watch_history = 64).await;
    let client = c.admin().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = cms
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "c0"}})).unwrap())
        .await
        .unwrap();
    let rv = first.metadata.resource_version.unwrap();
    // The hub keeps 64 events here: write past them.
    for i in 1..100 {
        c.store
            .create(
                &edgehive_store::resources::CONFIGMAPS,
                json!({"metadata": {"name": format!("c{i}"), "namespace": "default"}}),
            )
            .await
            .unwrap();
    }
    let a = raw(
        &client,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=5"),
        "",
        "",
    )
    .await;
    assert_eq!(a.code, 200);
    assert_eq!(a.body["type"], "ERROR", "{}", a.body);
    assert_eq!(a.body["object"]["code"], 410);
    assert_eq!(a.body["object"]["reason"], "Expired");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_graceful_delete_and_namespaces() {
    let c = Cluster::start().await;
    let client = c.admin().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web", json!({}), Some("edge-1"))).await.unwrap();
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let t = get_accept(&client, "/api/v1/namespaces/default/pods", accept).await;
    assert_eq!(t.body["kind"], "Table");
    let cols: Vec<&str> =
        t.body["columnDefinitions"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(cols, ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]);
    let row = &t.body["rows"][0];
    assert_eq!(row["cells"][0], "web");
    assert_eq!(row["cells"][1], "0/1");
    assert_eq!(row["cells"][2], "Pending");
    assert_eq!(row["cells"][6], "edge-1");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");

    // A bound pod terminates gracefully; the node's confirmation removes it.
    let marked = raw(&client, "DELETE", "/api/v1/namespaces/default/pods/web", "", "").await;
    assert_eq!(marked.code, 200);
    assert!(marked.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(marked.body["metadata"]["deletionGracePeriodSeconds"], 30);
    let t = get_accept(&client, "/api/v1/namespaces/default/pods", accept).await;
    assert_eq!(t.body["rows"][0]["cells"][2], "Terminating");
    pods.delete("web", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    assert!(pods.get_opt("web").await.unwrap().is_none());

    // Namespace deletion waits for its content's finalizers, refuses new content meanwhile.
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap())
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let held: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["example.com/x"]}})).unwrap();
    cms.create(&PostParams::default(), &held).await.unwrap();
    nss.delete("team", &DeleteParams::default()).await.unwrap();
    let ns = nss.get("team").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let refused = raw(
        &client,
        "POST",
        "/api/v1/namespaces/team/configmaps",
        "application/json",
        r#"{"metadata":{"name":"late"}}"#,
    )
    .await;
    assert_eq!(refused.code, 403, "{}", refused.body);
    // Release the finalizer: the controller finishes the namespace.
    let mut waited = Duration::ZERO;
    loop {
        if let Some(cm) = cms.get_opt("held").await.unwrap()
            && cm.metadata.deletion_timestamp.is_some()
        {
            cms.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
                .await
                .unwrap();
        }
        if nss.get_opt("team").await.unwrap().is_none() {
            break;
        }
        assert!(waited < WAIT, "namespace not removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    let m = raw(&client, "GET", "/metrics", "", "").await;
    let text = m.body.as_str().unwrap_or_default().to_string();
    assert!(text.contains("apiserver_request_total{verb=\"create\",resource=\"pods\",code=\"201\"} 1"), "{text}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_collection_and_event_selectors() {
    let c = Cluster::start().await;
    let client = c.admin().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    cms.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=x")).await.unwrap();
    let left: Vec<_> =
        cms.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    assert_eq!(left, ["c"]);

    // Events are selected the way `kubectl describe` asks for them.
    let events = "/api/v1/namespaces/default/events";
    for (name, obj) in [("e1", "web"), ("e2", "db")] {
        let ev = json!({"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": obj, "namespace": "default"},
                        "reason": "Scheduled", "message": "assigned", "type": "Normal", "source": {"component": "edgehive"}});
        let a = raw(&client, "POST", events, "application/json", serde_json::to_vec(&ev).unwrap()).await;
        assert_eq!(a.code, 201, "{}", a.body);
    }
    let q = format!(
        "{events}?fieldSelector=involvedObject.name%3Dweb%2CinvolvedObject.namespace%3Ddefault%2CinvolvedObject.kind%3DPod%2Csource%3Dedgehive"
    );
    let a = raw(&client, "GET", &q, "", "").await;
    assert_eq!(a.code, 200, "{}", a.body);
    let names: Vec<&str> =
        a.body["items"].as_array().unwrap().iter().filter_map(|e| e["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["e1"]);
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_always_succeeds() {
    // The namespace controller may empty and remove a namespace before the
    // DELETE that marked it has written its Terminating phase; the DELETE
    // still succeeded and must say so (it once answered 404 in that race).
    let c = Cluster::start().await;
    let client = c.admin().await;
    for i in 0..100 {
        let name = format!("race-{i}");
        let made = raw(
            &client,
            "POST",
            "/api/v1/namespaces",
            "application/json",
            json!({"metadata": {"name": name}}).to_string(),
        )
        .await;
        assert_eq!(made.code, 201);
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1"}}).to_string();
        let made = raw(&client, "POST", &format!("/api/v1/namespaces/{name}/configmaps"), "application/json", cm).await;
        assert_eq!(made.code, 201);
        let gone = raw(&client, "DELETE", &format!("/api/v1/namespaces/{name}"), "", "").await;
        assert_eq!(gone.code, 200, "{name}: {}", gone.body);
        assert!(gone.body["metadata"]["deletionTimestamp"].is_string());
    }
}
