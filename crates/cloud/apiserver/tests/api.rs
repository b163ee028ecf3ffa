//! The API through real clients: the `kube` crate (typed, watcher) and raw
//! requests for each error class, checking the `Status` answered and that a
//! refused request stores nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Answer, Cluster, get_accept, raw};
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
    let v = raw(&anon, "GET", "/version", "", "").await;
    assert_eq!((v.code, v.body["major"].as_str()), (200, Some("1")), "/version is public, as in Kubernetes");
    assert_eq!(raw(&anon, "GET", "/metrics", "", "").await.code, 401, "metrics need credentials");
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
    // `/metrics` is not (RBAC: the `system:monitoring` group's).
    let m = raw(&alice, "GET", "/metrics", "", "").await;
    assert_eq!(
        (m.code, m.body["message"].as_str()),
        (403, Some("forbidden: User \"alice\" cannot get path \"/metrics\""))
    );
    let monitor = c.as_user("prometheus", &["system:monitoring"]).await;
    assert_eq!(raw(&monitor, "GET", "/metrics", "", "").await.code, 200);
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

/// The status of a request made with `token` as `Authorization: Bearer`:
/// 403 when the token authenticates (a service account may not read
/// secrets), 401 when it does not.
async fn bearer_status(c: &Cluster, token: &str) -> u16 {
    let a = raw(&c.with_bearer(token).await, "GET", "/api/v1/namespaces/default/secrets", "", "").await;
    if a.code == 401 {
        assert_eq!(a.body["reason"], "Unauthorized", "{}", a.body);
    }
    a.code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_bound_to_a_deleted_or_replaced_pod_or_for_another_audience_is_refused() {
    use edgehive_store::resources::PODS;
    let c = Cluster::start().await;
    let now = time::OffsetDateTime::now_utc();
    let ours = edgehive_pki::ServiceAccountTokens::load_or_create(&c.dir.path().join("tls")).unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let token = |uid: &str, audiences: &[String]| {
        let for_pod = edgehive_pki::TokenFor {
            namespace: "default",
            name: "default",
            uid: "u",
            pod: Some(("web", uid)),
            audiences,
            validity: std::time::Duration::from_secs(3600),
            ..Default::default()
        };
        ours.issue(&for_pod, now).unwrap().0
    };
    let first = c.store.create(&PODS, pod.clone()).await.unwrap().uid().unwrap().to_owned();
    let bound = token(&first, &[]);
    assert_eq!(bearer_status(&c, &bound).await, 403, "bound to the pod as it is: authenticated");
    assert_eq!(bearer_status(&c, &token("another-uid", &[])).await, 401, "bound to another pod of that name");
    assert_eq!(bearer_status(&c, &token(&first, &["vault".to_string()])).await, 401, "meant for another service");

    let opts = edgehive_store::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    let outcome = c.store.delete(&PODS, "default", "web", &opts).await.unwrap();
    assert!(matches!(outcome, edgehive_store::DeleteOutcome::Deleted(_)), "{outcome:?}");
    assert_eq!(bearer_status(&c, &bound).await, 401, "its pod was deleted");

    // The same name again is another pod: the old token stays refused.
    let second = c.store.create(&PODS, pod).await.unwrap().uid().unwrap().to_owned();
    assert_ne!(second, first);
    assert_eq!(bearer_status(&c, &bound).await, 401, "its pod was replaced");
    assert_eq!(bearer_status(&c, &token(&second, &[])).await, 403, "a token for the new pod");
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
    // An envelope naming a type the decoder does not know: networking.k8s.io/v1 Ingress.
    let mut env = b"k8s\x00".to_vec();
    let type_meta = [&[0x0a, 20][..], b"networking.k8s.io/v1", &[0x12, 7][..], b"Ingress"].concat();
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
        r#"{"apiVersion":"devices.kubeedge.io/v1beta1","kind":"Device","metadata":{"name":"d"},"spec":{}}"#,
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
    assert!(m.content_type.starts_with("application/openmetrics-text"), "{}", m.content_type);
    assert!(
        text.contains("\nedgehive_apiserver_request_total{verb=\"create\",resource=\"pods\",code=\"201\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("\n# TYPE edgehive_store_revision gauge\n"), "{text}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_must_name_its_kind() {
    // Kubernetes decodes custom resources (KubeEdge's types are CRDs) as
    // unstructured objects, which must carry `kind`; built-in types take
    // kind and apiVersion from the URL.
    let c = Cluster::start().await;
    let client = c.admin().await;
    let devices = "/apis/devices.kubeedge.io/v1beta1/namespaces/default/devices";
    let json = "application/json";
    let no_kind = r#"{"apiVersion":"devices.kubeedge.io/v1beta1","metadata":{"name":"d"},"spec":{}}"#;
    let b = refused(&c, &client, "POST", devices, json, no_kind.as_bytes(), (400, "BadRequest")).await;
    assert_eq!(
        b["message"],
        format!(
            "the object provided is unrecognized (must be of type Device): Object 'Kind' is missing in '{no_kind}' \
             ({{\"apiVersion\":\"devices.kubeedg ...)"
        )
    );
    // The lax decoder (fieldValidation=Ignore) has defaulted the kind from the URL.
    let b = refused(
        &c,
        &client,
        "POST",
        &format!("{devices}?fieldValidation=Ignore"),
        json,
        format!("{no_kind}\n").as_bytes(),
        (400, "BadRequest"),
    )
    .await;
    assert_eq!(
        b["message"],
        format!("Device in version \"v1beta1\" cannot be handled as a Device: Object 'Kind' is missing in '{no_kind}'")
    );
    let empty = r#"{"kind":"","apiVersion":"devices.kubeedge.io/v1beta1","metadata":{"name":"d"}}"#;
    let b = refused(&c, &client, "POST", devices, json, empty.as_bytes(), (400, "BadRequest")).await;
    assert!(b["message"].as_str().unwrap().contains(&format!("Object 'Kind' is missing in '{empty}'")), "{b}");
    let yaml = "apiVersion: devices.kubeedge.io/v1beta1\nmetadata:\n  name: y\n";
    let b = refused(&c, &client, "POST", devices, "application/yaml", yaml.as_bytes(), (400, "BadRequest")).await;
    assert_eq!(
        b["message"],
        format!(
            "the object provided is unrecognized (must be of type Device): Object 'Kind' is missing in '{yaml}' \
             (61706956657273696f6e3a20646576696365732e6b756265656467652e69 ...)"
        )
    );
    // With a kind but no apiVersion, the decoded object's empty version does not match.
    let b = refused(
        &c,
        &client,
        "POST",
        devices,
        json,
        br#"{"kind":"Device","metadata":{"name":"d"}}"#,
        (400, "BadRequest"),
    )
    .await;
    assert_eq!(
        b["message"],
        "the API version in the data () does not match the expected API version (devices.kubeedge.io/v1beta1)"
    );
    // Any type: a kind that is not a string fails the decoder's first look.
    let b = refused(
        &c,
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        json,
        br#"{"kind":5,"metadata":{"name":"x"}}"#,
        (400, "BadRequest"),
    )
    .await;
    assert_eq!(
        b["message"],
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse \
         error: json: cannot unmarshal number into Go struct field .kind of type string \
         ({\"kind\":5,\"metadata\":{\"name\":\" ...)"
    );
    // A built-in type without either is filled in from the URL.
    let cm = raw(&client, "POST", "/api/v1/namespaces/default/configmaps", json, r#"{"metadata":{"name":"x"}}"#).await;
    assert_eq!((cm.code, &cm.body["kind"], &cm.body["apiVersion"]), (201, &json!("ConfigMap"), &json!("v1")));

    // Update: the same decoding.
    let made = raw(
        &client,
        "POST",
        devices,
        json,
        r#"{"apiVersion":"devices.kubeedge.io/v1beta1","kind":"Device","metadata":{"name":"d"},"spec":{}}"#,
    )
    .await;
    assert_eq!(made.code, 201, "{}", made.body);
    let put = r#"{"apiVersion":"devices.kubeedge.io/v1beta1","metadata":{"name":"d"},"spec":{}}"#;
    let b = refused(&c, &client, "PUT", &format!("{devices}/d"), json, put.as_bytes(), (400, "BadRequest")).await;
    assert!(b["message"].as_str().unwrap().starts_with("the object provided is unrecognized (must be of type Device)"));

    // Patch: the patched object is decoded the same way; Kubernetes answers
    // 422 for the field `patch`, quoting the patched JSON.
    let current = raw(&client, "GET", &format!("{devices}/d"), "", "").await.body;
    let mut patched = current.clone();
    patched.as_object_mut().unwrap().remove("kind");
    let text = patched.to_string();
    let b = refused(
        &c,
        &client,
        "PATCH",
        &format!("{devices}/d"),
        "application/merge-patch+json",
        br#"{"kind":null}"#,
        (422, "Invalid"),
    )
    .await;
    let cause = format!("Invalid value: {}: Object 'Kind' is missing in '{text}'", Value::String(text.clone()));
    assert_eq!(b["message"], format!(" \"\" is invalid: patch: {cause}"));
    assert_eq!(b["details"], json!({"causes": [{"reason": "FieldValueInvalid", "message": cause, "field": "patch"}]}));
    refused(
        &c,
        &client,
        "PATCH",
        &format!("{devices}/d"),
        "application/json-patch+json",
        br#"[{"op":"remove","path":"/kind"}]"#,
        (422, "Invalid"),
    )
    .await;
    // A built-in type's patched kind comes from the URL again.
    let p = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        "application/merge-patch+json",
        r#"{"kind":null}"#,
    )
    .await;
    assert_eq!((p.code, &p.body["kind"]), (200, &json!("ConfigMap")));
    c.stop().await;
}

/// The lines of a watch stream.
fn watch_lines(a: &Answer) -> Vec<Value> {
    match &a.body {
        Value::String(text) => text.lines().map(|l| serde_json::from_str(l).unwrap()).collect(),
        Value::Null => Vec::new(),
        one => vec![one.clone()],
    }
}

/// Kubernetes' `storage.NewTooLargeResourceVersionError` as a Status.
fn too_large(requested: u64, current: u64) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("Timeout: Too large resource version: {requested}, current: {current}"),
        "reason": "Timeout",
        "details": {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1},
        "code": 504,
    })
}

/// The admin's client without the `kube` crate's retries, which repeat a 504
/// (up to 15 times, with backoff) as they would against Kubernetes.
async fn admin_once(c: &Cluster) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(&c.kubeconfig).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_from_a_revision_not_reached_times_out_as_kubernetes_does() {
    let c = Cluster::start().await;
    let client = admin_once(&c).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let made = raw(&client, "POST", cms, "application/json", r#"{"metadata":{"name":"x"}}"#).await;
    assert_eq!(made.code, 201);
    let now = c.store.current_rev().await.unwrap();
    let future = now + 1000;
    let started = tokio::time::Instant::now();
    let timed = |path: String| {
        let client = client.clone();
        async move {
            let a = raw(&client, "GET", &path, "", "").await;
            (a, started.elapsed())
        }
    };
    let ((list, list_took), (get, get_took), (initial, initial_took), (plain, plain_took)) = tokio::join!(
        timed(format!("{cms}?resourceVersion={future}")),
        timed(format!("{cms}/x?resourceVersion={future}")),
        timed(format!(
            "{cms}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan\
             &resourceVersion={future}&timeoutSeconds=30"
        )),
        timed(format!("{cms}?watch=true&resourceVersion={future}&timeoutSeconds=4")),
    );
    // Kubernetes' watch cache waits 3 s (blockTimeout) for the revision.
    let (wait, margin) = (Duration::from_secs(3), Duration::from_secs(3));
    for (what, took) in
        [("list", list_took), ("get", get_took), ("initial events", initial_took), ("plain watch", plain_took)]
    {
        assert!(took >= wait && took < wait + margin, "{what} answered after {took:?}");
    }
    assert_eq!((list.code, &list.body), (504, &too_large(future, now)));
    assert_eq!((get.code, &get.body), (504, &too_large(future, now)));
    // A watch that must send the state at that revision fails in its stream.
    assert_eq!(initial.code, 200);
    assert_eq!(watch_lines(&initial), [json!({"type": "ERROR", "object": too_large(future, now)})]);
    // Without sendInitialEvents Kubernetes would wait for events forever
    // (a client whose revision predates a restore would hear nothing again);
    // here it gets the same ERROR after the same wait, and lists again.
    assert_eq!(plain.code, 200);
    assert_eq!(watch_lines(&plain), [json!({"type": "ERROR", "object": too_large(future, now)})]);

    // kubectl reports the Status.
    let out = tokio::process::Command::new("kubectl")
        .env("KUBECONFIG", &c.kubeconfig)
        .env("HOME", c.dir.path())
        .args(["get", "--raw", &format!("{cms}?resourceVersion={future}")])
        .output()
        .await
        .expect("run kubectl (it is on the machines)");
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("Error from server (Timeout): Timeout: Too large resource version: {future}, current: {now}\n")
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_waiting_for_a_revision_is_answered_when_a_write_reaches_it() {
    let c = Cluster::start().await;
    let client = admin_once(&c).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let next = c.store.current_rev().await.unwrap() + 1;
    let started = tokio::time::Instant::now();
    let list = tokio::spawn({
        let client = client.clone();
        async move { raw(&client, "GET", &format!("{cms}?resourceVersion={next}"), "", "").await }
    });
    let watch = tokio::spawn({
        let client = client.clone();
        let path = format!(
            "{cms}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan\
             &resourceVersion={next}&timeoutSeconds=1"
        );
        async move { raw(&client, "GET", &path, "", "").await }
    });
    // Both are waiting for the revision; the write that makes it ends the wait.
    edgehive_testkit::eventually("both reads wait", WAIT, || c.store.watch_cache().revision_waiters() == 2).await;
    let made = raw(&client, "POST", cms, "application/json", r#"{"metadata":{"name":"late"}}"#).await;
    assert_eq!(made.code, 201);
    let list = list.await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "answered before Kubernetes' 3 s deadline");
    assert_eq!(list.code, 200, "{}", list.body);
    let names: Vec<&str> =
        list.body["items"].as_array().unwrap().iter().filter_map(|o| o["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["late"]);
    let watch = watch.await.unwrap();
    assert_eq!(watch.code, 200);
    let events: Vec<(String, String)> = watch_lines(&watch)
        .iter()
        .map(|e| {
            (e["type"].as_str().unwrap().to_owned(), e["object"]["metadata"]["name"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    assert_eq!(events[..2], [("ADDED".into(), "late".into()), ("BOOKMARK".into(), String::new())], "{events:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generated_name_is_chosen_before_admission() {
    // Kubernetes (RetryGenerateName): the name is generated before the
    // strategy prepares the object, so a Job's generated labels name it.
    let c = Cluster::start().await;
    let client = c.admin().await;
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "pi-"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let jobs = "/apis/batch/v1/namespaces/default/jobs";
    let made = raw(&client, "POST", jobs, "application/json", serde_json::to_vec(&job).unwrap()).await;
    assert_eq!(made.code, 201, "{}", made.body);
    let name = made.body["metadata"]["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("pi-") && name.len() == 8, "{}", made.body);
    for labels in [&made.body["spec"]["template"]["metadata"]["labels"], &made.body["metadata"]["labels"]] {
        assert_eq!(
            (labels["batch.kubernetes.io/job-name"].as_str(), labels["job-name"].as_str()),
            (Some(name), Some(name))
        );
    }
    // A bad prefix is refused as Kubernetes refuses it, naming the prefix.
    let bad = json!({"metadata": {"generateName": "Bad_"}});
    let refused = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        serde_json::to_vec(&bad).unwrap(),
    )
    .await;
    assert_eq!(refused.code, 422, "{}", refused.body);
    assert!(
        refused.body["message"].as_str().is_some_and(|m| m.contains("metadata.generateName: Invalid value: \"Bad_\"")),
        "{}",
        refused.body
    );
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_create_answers_what_create_would_store() {
    // Kubernetes' dry-run create runs the whole create but the write: uid,
    // creationTimestamp and (for kinds that have one) generation are filled
    // in, a taken name is refused, and there is no resourceVersion.
    let c = Cluster::start().await;
    let client = c.admin().await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let before = c.store.current_rev().await.unwrap();
    let a =
        raw(&client, "POST", &format!("{cms}?dryRun=All"), "application/json", r#"{"metadata":{"name":"dry"}}"#).await;
    assert_eq!(a.code, 201, "{}", a.body);
    let meta = &a.body["metadata"];
    assert_eq!(meta["uid"].as_str().map(str::len), Some(36), "{}", a.body);
    assert!(meta["creationTimestamp"].as_str().and_then(edgehive_store::parse_rfc3339).is_some(), "{}", a.body);
    assert_eq!((meta.get("resourceVersion"), meta.get("generation")), (None, None), "{}", a.body);
    assert_eq!(raw(&client, "GET", &format!("{cms}/dry"), "", "").await.code, 404, "nothing stored");
    assert_eq!(c.store.current_rev().await.unwrap(), before, "nothing written");

    let pods = "/api/v1/namespaces/default/pods?dryRun=All";
    let p =
        raw(&client, "POST", pods, "application/json", serde_json::to_vec(&pod("p", json!({}), None)).unwrap()).await;
    assert_eq!(p.code, 201, "{}", p.body);
    assert_eq!(p.body["metadata"]["generation"], 1, "pods have a generation (Kubernetes 1.33): {}", p.body);
    let g =
        raw(&client, "POST", &format!("{cms}?dryRun=All"), "application/json", r#"{"metadata":{"generateName":"g-"}}"#)
            .await;
    assert_eq!(g.code, 201, "{}", g.body);
    assert!(g.body["metadata"]["name"].as_str().is_some_and(|n| n.starts_with("g-") && n.len() == 7), "{}", g.body);

    let made = raw(&client, "POST", cms, "application/json", r#"{"metadata":{"name":"taken"}}"#).await;
    assert_eq!(made.code, 201);
    let again =
        raw(&client, "POST", &format!("{cms}?dryRun=All"), "application/json", r#"{"metadata":{"name":"taken"}}"#)
            .await;
    assert_eq!((again.code, again.body["reason"].as_str()), (409, Some("AlreadyExists")), "{}", again.body);
    c.stop().await;
}

/// A store watch on `namespace/name` of `res`: its initial state, then changes.
async fn watch_one(
    store: &edgehive_store::Store,
    res: &'static edgehive_store::resources::ResourceDef,
    namespace: &str,
    name: &str,
) -> edgehive_store::Watch {
    let filter = edgehive_store::WatchFilter {
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        ..edgehive_store::WatchFilter::all(res)
    };
    let start = edgehive_store::WatchStart::InitialState { end_bookmark: false };
    store.watch(edgehive_store::WatchOptions { filter, start, bookmarks: false }).await.unwrap()
}

/// Waits for `namespace/name` of `res` through a store watch (its initial
/// state, then changes) and returns it.
async fn appears(
    store: &edgehive_store::Store,
    res: &'static edgehive_store::resources::ResourceDef,
    namespace: &str,
    name: &str,
) -> edgehive_store::Object {
    let mut w = watch_one(store, res, namespace, name).await;
    let seen = async {
        loop {
            let ev = w.next().await.unwrap();
            if ev.ty != edgehive_store::EventType::Deleted
                && let Some(o) = ev.object()
            {
                return o.clone();
            }
        }
    };
    tokio::time::timeout(WAIT, seen).await.unwrap_or_else(|_| panic!("{namespace}/{name} never appeared"))
}

/// Waits for the deletion of `namespace/name` of `res`, which exists now.
async fn goes(
    store: &edgehive_store::Store,
    res: &'static edgehive_store::resources::ResourceDef,
    namespace: &str,
    name: &str,
) {
    let mut w = watch_one(store, res, namespace, name).await;
    let gone = async { while w.next().await.unwrap().ty != edgehive_store::EventType::Deleted {} };
    tokio::time::timeout(WAIT, gone).await.unwrap_or_else(|_| panic!("{namespace}/{name} never went"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_namespace_has_its_default_service_account() {
    // As Kubernetes' service account controller: also namespaces that cloud
    // modules create directly in the store (`kubeedge`), with or without a
    // phase, and a `default` that was deleted comes back.
    use edgehive_store::resources::{CONFIGMAPS, NAMESPACES, SERVICE_ACCOUNTS};
    let c = Cluster::start().await;
    let client = c.admin().await;
    let s = &c.store;
    let ns = json!({"metadata": {"name": "kubeedge"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
    s.create(&NAMESPACES, ns).await.unwrap();
    s.create(&NAMESPACES, json!({"metadata": {"name": "bare"}})).await.unwrap();
    let first = appears(s, &SERVICE_ACCOUNTS, "kubeedge", "default").await;
    appears(s, &SERVICE_ACCOUNTS, "bare", "default").await;

    let gone = raw(&client, "DELETE", "/api/v1/namespaces/kubeedge/serviceaccounts/default", "", "").await;
    assert_eq!(gone.code, 200, "{}", gone.body);
    let again = appears(s, &SERVICE_ACCOUNTS, "kubeedge", "default").await;
    assert_ne!(again.uid(), first.uid(), "made again");

    // A terminating namespace gets none: its content is being removed.
    let ns = json!({"metadata": {"name": "going"}, "spec": {"finalizers": ["kubernetes"]}});
    s.create(&NAMESPACES, ns).await.unwrap();
    appears(s, &SERVICE_ACCOUNTS, "going", "default").await;
    let held = json!({"metadata": {"name": "held", "namespace": "going", "finalizers": ["example.com/x"]}});
    s.create(&CONFIGMAPS, held).await.unwrap();
    assert_eq!(raw(&client, "DELETE", "/api/v1/namespaces/going", "", "").await.code, 200);
    goes(s, &SERVICE_ACCOUNTS, "going", "default").await;
    // Deletions reach the controller in order: once a later one has been
    // answered, the terminating namespace's has been seen (and let be).
    assert_eq!(raw(&client, "DELETE", "/api/v1/namespaces/bare/serviceaccounts/default", "", "").await.code, 200);
    appears(s, &SERVICE_ACCOUNTS, "bare", "default").await;
    let left = s.get(&SERVICE_ACCOUNTS, "going", "default").await;
    assert!(matches!(left, Err(edgehive_store::StoreError::NotFound { .. })), "{left:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_honours_the_pods_disruption_budget_as_kubernetes_does() {
    let c = Cluster::start().await;
    // Without retries: the `kube` crate repeats a 429 with backoff, as it would against Kubernetes.
    let client = admin_once(&c).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let running =
        json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}).to_string();
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name, json!({"app": "web"}), Some("edge-1"))).await.unwrap();
        let path = format!("/api/v1/namespaces/default/pods/{name}/status");
        assert_eq!(raw(&client, "PATCH", &path, "application/merge-patch+json", running.as_str()).await.code, 200);
    }
    pods.create(&PostParams::default(), &pod("waiting", json!({"app": "web"}), None)).await.unwrap();
    let evict = |name: &str| {
        let (client, name) = (client.clone(), name.to_string());
        async move {
            let body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
            raw(
                &client,
                "POST",
                &format!("/api/v1/namespaces/default/pods/{name}/eviction"),
                "application/json",
                body.to_string(),
            )
            .await
        }
    };
    // Discovery tells kubectl drain that evictions are served.
    let core = raw(&client, "GET", "/api/v1", "", "").await;
    let sub =
        core.body["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods/eviction").cloned().unwrap();
    assert_eq!(
        (sub["group"].as_str(), sub["version"].as_str(), sub["kind"].as_str()),
        (Some("policy"), Some("v1"), Some("Eviction"))
    );
    assert_eq!(sub["verbs"], json!(["create"]));

    // A pod that has not started goes whatever the budgets say; so does one with no budget.
    let gone = evict("waiting").await;
    assert_eq!((gone.code, gone.body["status"].as_str()), (201, Some("Success")), "{}", gone.body);
    assert!(pods.get_opt("waiting").await.unwrap().is_none());

    let pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}});
    assert_eq!(raw(&client, "POST", pdbs, "application/json", pdb.to_string()).await.code, 201);
    // Its controller has not looked at it yet.
    let early = evict("a").await;
    assert_eq!(early.code, 429, "{}", early.body);
    assert_eq!(early.body["reason"], "TooManyRequests");
    assert_eq!(early.body["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(early.body["details"]["causes"][0]["reason"], "DisruptionBudget");
    assert_eq!(
        early.body["details"]["causes"][0]["message"],
        "The disruption budget web is still being processed by the server."
    );
    let set_status = |allowed: i64| {
        let client = client.clone();
        async move {
            let status = json!({"status": {"observedGeneration": 1, "currentHealthy": 2, "desiredHealthy": 2,
                "expectedPods": 2, "disruptionsAllowed": allowed}});
            let r = raw(
                &client,
                "PATCH",
                &format!("{pdbs}/web/status"),
                "application/merge-patch+json",
                status.to_string(),
            )
            .await;
            assert_eq!(r.code, 200, "{}", r.body);
        }
    };
    set_status(0).await;
    let refused = evict("a").await;
    assert_eq!(refused.code, 429, "{}", refused.body);
    assert_eq!(
        refused.body["details"]["causes"][0]["message"],
        "The disruption budget web needs 2 healthy pods and has 2 currently"
    );
    assert!(pods.get("a").await.unwrap().metadata.deletion_timestamp.is_none(), "nothing deleted");

    // One disruption allowed: the first eviction takes it, the second is refused.
    set_status(1).await;
    let done = evict("a").await;
    assert_eq!(done.code, 201, "{}", done.body);
    assert!(pods.get("a").await.unwrap().metadata.deletion_timestamp.is_some(), "deleted gracefully");
    let budget = raw(&client, "GET", &format!("{pdbs}/web"), "", "").await.body;
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert!(budget["status"]["disruptedPods"]["a"].is_string(), "{}", budget["status"]);
    assert_eq!(evict("b").await.code, 429);

    // Two budgets over one pod: refused, as Kubernetes refuses it.
    let mut second = pdb.clone();
    second["metadata"]["name"] = json!("web-too");
    assert_eq!(raw(&client, "POST", pdbs, "application/json", second.to_string()).await.code, 201);
    let two = evict("b").await;
    assert_eq!(two.code, 500, "{}", two.body);
    assert!(two.body["message"].as_str().unwrap().contains("more than one PodDisruptionBudget"), "{}", two.body);

    // Bad requests.
    assert_eq!(evict("nobody").await.code, 404);
    let mismatch = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"}}).to_string();
    let r =
        raw(&client, "POST", "/api/v1/namespaces/default/pods/b/eviction", "application/json", mismatch.as_str()).await;
    assert_eq!((r.code, r.body["message"].as_str()), (400, Some("name in URL does not match name in Eviction object")));
    let r = raw(&client, "GET", "/api/v1/namespaces/default/pods/b/eviction", "", "").await;
    assert_eq!(r.code, 405, "{}", r.body);
    let r =
        raw(&client, "POST", "/api/v1/namespaces/default/configmaps/x/eviction", "application/json", mismatch.as_str())
            .await;
    assert_eq!(r.code, 404, "only pods have evictions");
    // Budgets are validated as Kubernetes validates them.
    let both = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "bad"},
        "spec": {"minAvailable": 1, "maxUnavailable": 1}});
    let r = raw(&client, "POST", pdbs, "application/json", both.to_string()).await;
    assert_eq!(r.code, 422, "{}", r.body);
}
