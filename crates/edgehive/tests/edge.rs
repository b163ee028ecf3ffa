//! `edgehive edge` as a process against `edgehive cloud` as a process:
//! join with a token, objects created with kubectl reaching the edge's
//! store, a restart without the token, an edge killed between receiving a
//! change and committing it, and a link cut by a fault-injecting proxy.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use edgehive_testkit::fixtures::TempDir;
use support::*;

#[test]
fn an_edge_joins_gets_its_objects_and_restarts_without_the_token() {
    let dir = TempDir::new("edge-join");
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = Edge::new(dir.path());
    let ws = format!("127.0.0.1:{}", cloud.ws);
    edge.configure("edge-1", &ws, cloud.join, Some(&cloud.token()));
    edge.start(&[]);

    // Joined: certificate and key kept, the key private.
    wait_until("the node is registered and Ready", || cloud.node_ready("edge-1").as_deref() == Some("True"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(edge.dir.join("data/certs/edge.key")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let node = cloud.json(&["get", "node", "edge-1"]);
    assert_eq!(node.pointer("/metadata/labels/node-role.kubernetes.io~1edge"), Some(&serde_json::json!("")));
    assert!(node.pointer("/status/capacity/cpu").is_some(), "{node}");

    // Objects created with kubectl reach the edge's store.
    cloud.kubectl(&["apply", "-f", "-"], Some(&OBJECTS.replace("NODE", "edge-1")));
    wait_until("pod, configmap and secret are in the edge store", || {
        let rows = edge.rows();
        ["default/pod/web", "default/configmap/cfg", "default/secret/creds"].iter().all(|k| rows.contains_key(*k))
    });
    let pod = cloud.json(&["get", "pod", "web"]);
    let rv = pod.pointer("/metadata/resourceVersion").unwrap().as_str().unwrap().to_owned();
    assert_eq!(edge.rows()["default/pod/web"].0, rv);

    // Restart without the token: the stored certificate is used.
    edge.kill();
    edge.configure("edge-1", &ws, cloud.join, None);
    edge.start(&[]);
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod_yaml("second", "edge-1")));
    wait_until("a pod created after the restart arrives", || edge.rows().contains_key("default/pod/second"));
    assert!(edge.log_text().matches("joined: certificate issued").count() == 1, "joined once");
}

#[test]
fn an_edge_killed_before_its_commit_gets_the_change_again_and_stores_it_once() {
    let dir = TempDir::new("edge-crash");
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = Edge::new(dir.path());
    // This edge keeps alive as KubeEdge's does: keepalive messages and Lease renewals.
    let server = format!("127.0.0.1:{}", cloud.ws);
    edge.configure_with("edge-c", &server, cloud.join, Some(&cloud.token()), "    pingKeepalive: false\n");
    edge.start(&[("EDGEHIVE_FAILPOINT", "meta-before-commit")]);
    wait_until("the node is registered", || cloud.node_ready("edge-c").is_some());
    let lease = || cloud.json(&["get", "lease", "-n", "kube-node-lease", "edge-c"])["spec"]["renewTime"].clone();
    wait_until("the edge renews its Lease", || {
        let first = lease();
        std::thread::sleep(Duration::from_millis(1500));
        first.is_string() && lease() != first
    });
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod_yaml("p", "edge-c")));
    // The edge receives the pod and dies before committing it: no ACK.
    let mut child = edge.child.take().unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "the failpoint did not fire");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert!(!edge.rows().contains_key("default/pod/p"), "nothing was committed");
    let pod = cloud.json(&["get", "pod", "p"]);
    let uid = pod.pointer("/metadata/uid").unwrap().as_str().unwrap().to_owned();
    let rv = pod.pointer("/metadata/resourceVersion").unwrap().as_str().unwrap().to_owned();
    // The success point: provisional ("0") until the ACK, the pod's version after.
    let synced = |cloud: &Cloud| {
        let list = cloud.json(&["get", "objectsyncs", "-n", "default"]);
        list["items"].as_array().unwrap().iter().any(|o| {
            o["metadata"]["name"] == format!("edge-c.{uid}") && o["status"]["objectResourceVersion"] == rv.as_str()
        })
    };
    assert!(!synced(&cloud), "no success point without an ACK");

    // Restarted, the edge gets the pod again, stores it once and ACKs it.
    edge.configure_with("edge-c", &server, cloud.join, None, "    pingKeepalive: false\n");
    edge.start(&[]);
    wait_until("the pod is stored after the restart", || edge.rows().contains_key("default/pod/p"));
    wait_until("the cloud records the success point", || synced(&cloud));
    let rows = edge.rows();
    assert_eq!(rows.keys().filter(|k| k.ends_with("/pod/p")).count(), 1);
}

#[test]
fn an_edge_cut_off_converges_and_keeps_its_pods_while_notready() {
    let dir = TempDir::new("edge-cut");
    let cloud = Cloud::start(dir.path(), &["--node-grace-period", "4"]);
    let proxy = CutProxy::start(cloud.ws);
    let mut edge = Edge::new(dir.path());
    edge.configure("edge-x", &proxy.addr(), cloud.join, Some(&cloud.token()));
    edge.start(&[]);
    wait_until("the node is Ready", || cloud.node_ready("edge-x").as_deref() == Some("True"));
    // No Lease, no status reports: the link's pings keep it Ready past the grace period.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(cloud.node_ready("edge-x").as_deref(), Some("True"));
    cloud.kubectl(&["apply", "-f", "-"], Some(&OBJECTS.replace("NODE", "edge-x")));
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod_yaml("doomed", "edge-x")));
    wait_until("the first objects arrive", || {
        let rows = edge.rows();
        rows.contains_key("default/pod/web") && rows.contains_key("default/pod/doomed")
    });

    // Cut the link; change things meanwhile; restart the edge while it cannot reach the cloud.
    proxy.cut(true);
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod_yaml("newcomer", "edge-x")));
    cloud.kubectl(&["patch", "configmap", "cfg", "-p", r#"{"data":{"greeting":"changed"}}"#], None);
    cloud.kubectl(&["delete", "pod", "doomed", "--grace-period=0", "--force"], None);
    edge.kill();
    let before = edge.rows().len();
    edge.start(&[]);
    wait_until("the restarted edge opened its store", || edge.log_text().contains(&format!("objects={before}")));
    wait_until("the cloud marks the node NotReady", || cloud.node_ready("edge-x").as_deref() == Some("Unknown"));
    std::thread::sleep(Duration::from_secs(2));
    assert!(cloud.kubectl(&["get", "pods", "-o", "name"], None).contains("pod/web"), "no pod evicted");

    // Heal: the edge converges on the cloud's view and the node is Ready again.
    proxy.cut(false);
    wait_until("the node is Ready again", || cloud.node_ready("edge-x").as_deref() == Some("True"));
    let cloud_view = || {
        let mut want = BTreeMap::new();
        for pod in cloud.json(&["get", "pods", "-n", "default"])["items"].as_array().unwrap() {
            if pod["spec"]["nodeName"] == "edge-x" {
                want.insert(
                    format!("default/pod/{}", pod["metadata"]["name"].as_str().unwrap()),
                    pod["metadata"]["resourceVersion"].as_str().unwrap().to_owned(),
                );
            }
        }
        for (kind, name) in [("configmap", "cfg"), ("secret", "creds")] {
            let o = cloud.json(&["get", kind, name]);
            want.insert(
                format!("default/{kind}/{name}"),
                o["metadata"]["resourceVersion"].as_str().unwrap().to_owned(),
            );
        }
        want
    };
    let edge_view = || {
        edge.rows()
            .into_iter()
            .filter(|(k, _)| ["/pod/", "/configmap/", "/secret/"].iter().any(|t| k.contains(t)))
            .map(|(k, (rv, _))| (k, rv))
            .collect::<BTreeMap<_, _>>()
    };
    wait_until("the edge store equals the cloud's view of the node", || edge_view() == cloud_view());
    assert_eq!(edge.rows()["default/configmap/cfg"].1["data"]["greeting"], "changed");
    drop(proxy);
}
