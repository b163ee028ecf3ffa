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

/// Join tokens are recorded and revocable, a token cannot take over a
/// registered node, an admin's `--rejoin` token can (and the old machine is
/// locked out), and a revoked node stays out — with the real binaries.
#[test]
fn tokens_are_revocable_cannot_take_over_a_node_and_a_revoked_node_stays_out() {
    let dir = TempDir::new("edge-tokens");
    let cloud = Cloud::start(dir.path(), &[]);
    let ws = format!("127.0.0.1:{}", cloud.ws);
    let token = cloud.admin(&["token", "create", "--ttl", "1h", "--description", "line 3"]).trim().to_owned();
    let list = cloud.admin(&["token", "list"]);
    let line = list.lines().find(|l| l.ends_with("line 3")).unwrap_or_else(|| panic!("listed: {list}"));
    let id = line.split_whitespace().next().unwrap().to_owned();
    assert!(line.contains(" 59m ") || line.contains(" 1h "), "{line}");
    // The record is a Kubernetes bootstrap token Secret.
    let secret = cloud.json(&["get", "secret", "-n", "kube-system", &format!("bootstrap-token-{id}")]);
    assert_eq!(secret["type"], "bootstrap.kubernetes.io/token");

    let mut a = Edge::new(&dir.path().join("a"));
    a.configure("edge-1", &ws, cloud.join, Some(&token));
    a.start(&[]);
    wait_until("edge-1 is registered and Ready", || cloud.node_ready("edge-1").as_deref() == Some("True"));

    // Another machine with the same token claims edge-1: refused, and gives up.
    let mut b = Edge::new(&dir.path().join("b"));
    b.configure("edge-1", &ws, cloud.join, Some(&token));
    b.start(&[]);
    wait_until("the impostor exits", || b.exited());
    assert!(b.log_text().contains("is registered and holds a valid certificate"), "{}", b.log_text());
    assert!(!b.dir.join("data/certs/edge.crt").exists());

    // Revoked, the token joins nothing new.
    assert!(cloud.admin(&["token", "revoke", &id]).contains("revoked"));
    assert!(!cloud.admin(&["token", "list"]).contains(&id));
    let mut c = Edge::new(&dir.path().join("c"));
    c.configure("edge-2", &ws, cloud.join, Some(&token));
    c.start(&[]);
    wait_until("the late edge exits", || c.exited());
    assert!(c.log_text().contains(&format!("token {id} is unknown")), "{}", c.log_text());
    let again = cloud.admin_output(&["token", "revoke", &id]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("no token"));

    // The admin re-provisions edge-1 on machine b: the old machine is locked out.
    let rejoin = cloud.admin(&["token", "create", "--rejoin", "edge-1"]).trim().to_owned();
    b.configure("edge-1", &ws, cloud.join, Some(&rejoin));
    b.start(&[]);
    wait_until("machine b joined as edge-1", || b.log_text().contains("connected to the cloud"));
    wait_until("machine a is refused as replaced", || a.log_text().contains("replaced by a newer one"));
    wait_until("edge-1 is Ready from b", || cloud.node_ready("edge-1").as_deref() == Some("True"));

    // Revoking edge-1 ends b's session and keeps it out.
    let out = cloud.admin(&["node", "revoke", "edge-1"]);
    assert!(out.contains("certificates revoked") && out.contains("Node deleted"), "{out}");
    wait_until("machine b is refused as revoked", || b.log_text().contains("were revoked"));
    let node = cloud.admin_output(&["node", "revoke", "Bad_Name"]);
    assert!(!node.status.success());
    let gone = std::process::Command::new("kubectl")
        .env("KUBECONFIG", cloud.data.join("kubeconfig.yaml"))
        .env("HOME", &cloud.home)
        .args(["get", "node", "edge-1"])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "edge-1 did not come back");
}
