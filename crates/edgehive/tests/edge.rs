//! `edgehive edge` as a process against `edgehive cloud` as a process:
//! join with a token, objects created with kubectl reaching the edge's
//! store, a restart without the token, an edge killed between receiving a
//! change and committing it, a link cut by a fault-injecting proxy, stores
//! restored, emptied or damaged, and random changes with edge and cloud
//! kills.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::collections::BTreeSet;
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

/// The edge serves its metrics at `metricsAddress` (hyper's HTTP/1.1
/// server), the cloud at the API's `/metrics`: each process one registry,
/// every module's metrics in it.
#[test]
fn the_edge_and_the_cloud_serve_their_metrics() {
    let dir = TempDir::new("edge-metrics");
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = Edge::new(dir.path());
    edge.configure("edge-m", &format!("127.0.0.1:{}", cloud.ws), cloud.join, Some(&cloud.token()));
    let port = edgehive_testkit::fixtures::free_port();
    let mut config = std::fs::read_to_string(edge.config()).unwrap();
    config.push_str(&format!("metricsAddress: 127.0.0.1:{port}\n"));
    std::fs::write(edge.config(), config).unwrap();
    edge.start(&[]);
    wait_until("the node is registered and Ready", || cloud.node_ready("edge-m").as_deref() == Some("True"));

    let scrape = |path: &str| -> Option<String> {
        use std::io::{Read as _, Write as _};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(conn, "GET {path} HTTP/1.1\r\nHost: edge\r\n\r\n").ok()?;
        let mut answer = String::new();
        conn.read_to_string(&mut answer).ok()?;
        Some(answer)
    };
    let mut answer = String::new();
    wait_until("the edge reports itself connected", || {
        answer = scrape("/metrics").unwrap_or_default();
        answer.contains("\nedgehive_edgehub_connected 1\n")
    });
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("content-type: application/openmetrics-text"), "{answer}");
    for sample in [
        "\nedgehive_edgehub_connects_total ",
        "\nedgehive_metamanager_store_rebuilt 0\n",
        "\nedgehive_beehive_queue_depth{module=\"metamanager\"} ",
    ] {
        assert!(answer.contains(sample), "{sample} in\n{answer}");
    }
    assert!(answer.contains("\n# TYPE edgehive_metamanager_committed counter\n"), "{answer}");
    assert!(answer.ends_with("\n# EOF\n"), "{answer}");
    assert!(scrape("/").is_some_and(|a| a.starts_with("HTTP/1.1 404 ")), "only /metrics is served");

    let text = cloud.kubectl(&["get", "--raw", "/metrics"], None);
    for sample in [
        "\nedgehive_cloudhub_connected_nodes 1\n",
        "\nedgehive_join_certificates_issued_total 1\n",
        "\nedgehive_viaduct_handshakes_total{transport=\"websocket\",result=\"accepted\"} ",
        "\nedgehive_edgecontroller_upstream_total ",
        "\nedgehive_synccontroller_ticks_total ",
        "\nedgehive_beehive_queue_depth{module=\"cloudhub\"} ",
        "\nedgehive_apiserver_request_total{verb=\"get\",resource=\"nodes\",code=\"200\"} ",
        "\nedgehive_store_revision ",
    ] {
        assert!(text.contains(sample), "{sample} in\n{text}");
    }
    // One family per name: no metric is registered twice.
    let mut families: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
    let all = families.len();
    families.sort_unstable();
    families.dedup();
    assert_eq!(families.len(), all, "{text}");
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
    // No Lease renewals, no status reports: the link's pings keep it Ready
    // past the grace period, and the cloud keeps its Lease for it, which
    // `kubectl describe node` shows.
    wait_until("the cloud keeps the node's Lease", || {
        cloud.kubectl_output(&["get", "lease", "-n", "kube-node-lease", "edge-x"], None).status.success()
    });
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(cloud.node_ready("edge-x").as_deref(), Some("True"));
    let lease = cloud.json(&["get", "lease", "-n", "kube-node-lease", "edge-x"]);
    assert_eq!(lease["spec"]["holderIdentity"], "edge-x");
    let described = cloud.kubectl(&["describe", "node", "edge-x"], None);
    assert!(!described.contains("Failed to get lease"), "{described}");
    assert!(described.contains("HolderIdentity:  edge-x"), "{described}");
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
    wait_until("the edge store equals the cloud's view of the node", || {
        edge.object_view() == cloud.node_view("edge-x")
    });
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

/// An edge store restored from an older copy, emptied, or damaged is made
/// whole from the inventory the edge sends after connecting, although the
/// cloud's success points say the edge has everything: what changed
/// arrives, what went is deleted, a damaged store is set aside and the
/// cloud records an Event about it.
#[test]
fn an_edge_store_restored_emptied_or_damaged_is_made_whole() {
    let dir = TempDir::new("edge-reset");
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = Edge::new(dir.path());
    let ws = format!("127.0.0.1:{}", cloud.ws);
    edge.configure("edge-r", &ws, cloud.join, Some(&cloud.token()));
    edge.start(&[]);
    cloud.kubectl(&["apply", "-f", "-"], Some(&OBJECTS.replace("NODE", "edge-r")));
    let whole = |edge: &Edge| edge.object_view() == cloud.node_view("edge-r");
    wait_until("the objects arrive", || whole(&edge) && edge.object_view().len() == 3);
    let restart_with = |edge: &mut Edge, change: &dyn Fn(&Edge)| {
        edge.terminate();
        edge.kill();
        edge.checkpoint();
        change(edge);
        edge.configure("edge-r", &ws, cloud.join, None);
        edge.start(&[]);
    };

    // An older copy: taken, then the configmap changes and a pod is added.
    let copy = dir.path().join("older.db");
    restart_with(&mut edge, &|e: &Edge| {
        std::fs::copy(e.db(), &copy).unwrap();
    });
    cloud.kubectl(&["patch", "configmap", "cfg", "-p", r#"{"data":{"greeting":"changed"}}"#], None);
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod_yaml("second", "edge-r")));
    wait_until("the changes arrive", || whole(&edge) && edge.object_view().len() == 4);
    restart_with(&mut edge, &|e: &Edge| {
        std::fs::copy(&copy, e.db()).unwrap();
    });
    wait_until("the restored store is made whole", || whole(&edge) && edge.rows().contains_key("default/pod/second"));
    assert_eq!(edge.rows()["default/configmap/cfg"].1["data"]["greeting"], "changed");

    // Emptied: a zero-length file.
    restart_with(&mut edge, &|e: &Edge| {
        std::fs::write(e.db(), b"").unwrap();
    });
    wait_until("the emptied store is made whole", || whole(&edge) && edge.object_view().len() == 4);

    // Damaged: a page of the table overwritten.
    restart_with(&mut edge, &|e: &Edge| {
        use std::io::{Seek as _, SeekFrom, Write as _};
        let mut f = std::fs::OpenOptions::new().write(true).open(e.db()).unwrap();
        f.seek(SeekFrom::Start(4096)).unwrap();
        f.write_all(&[0xA5; 4096]).unwrap();
    });
    wait_until("the damaged store is set aside and made whole", || whole(&edge) && edge.object_view().len() == 4);
    let aside: Vec<_> = std::fs::read_dir(edge.db().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("edgecore.db.damaged-") && !n.ends_with("-wal") && !n.ends_with("-shm"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(edge.log_text().contains("the edge store is damaged"), "{}", edge.log_text());
    wait_until("the cloud recorded the Event", || {
        cloud.json(&["get", "events", "-n", "default"])["items"].as_array().unwrap().iter().any(|e| {
            e["reason"] == "EdgeStoreRebuilt" && e["involvedObject"]["name"] == "edge-r" && e["type"] == "Warning"
        })
    });

    // What went while the edge was away, in a copy that still holds it, is deleted.
    restart_with(&mut edge, &|e: &Edge| {
        std::fs::copy(e.db(), &copy).unwrap();
    });
    cloud.kubectl(&["delete", "pod", "web", "--grace-period=0", "--force"], None);
    wait_until("the pod and what only it used leave the edge", || whole(&edge) && edge.object_view().len() == 1);
    restart_with(&mut edge, &|e: &Edge| {
        std::fs::copy(&copy, e.db()).unwrap();
    });
    wait_until("the restored copy loses what went", || {
        edge.log_text().matches("inventory of the edge store sent").count() >= 6 && whole(&edge)
    });
    assert_eq!(edge.object_view().keys().collect::<Vec<_>>(), ["default/pod/second"]);
}

/// xorshift64*: a seeded sequence, so that a failing run can be replayed
/// (`EDGEHIVE_CHAOS_SEED`).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Random creates, updates, uses, unuses, deletes and recreates of pods,
/// configmaps and secrets over two edges, with edges and the cloud killed
/// (`kill -9`) and an edge's store emptied along the way: at the end every
/// edge's store holds exactly what the API says its node should hold, at
/// the versions the API has.
#[test]
fn random_changes_with_edge_and_cloud_kills_leave_every_edge_store_as_the_api_says() {
    let seed = std::env::var("EDGEHIVE_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("EDGEHIVE_CHAOS_SEED={seed}");
    let mut rng = Rng(seed);
    let dir = TempDir::new("edge-chaos");
    let mut cloud = Cloud::start(dir.path(), &[]);
    let ws = format!("127.0.0.1:{}", cloud.ws);
    let nodes = ["chaos-a", "chaos-b"];
    let mut edges: Vec<Edge> = nodes
        .iter()
        .map(|n| {
            let mut e = Edge::new(&dir.path().join(n));
            e.configure(n, &ws, cloud.join, Some(&cloud.token()));
            e.start(&[]);
            e
        })
        .collect();
    for n in nodes {
        wait_until("the node registers", || cloud.node_ready(n).is_some());
    }
    for (e, n) in edges.iter().zip(nodes) {
        e.configure(n, &ws, cloud.join, None);
    }
    let (cms, secrets, pods) = (["cm0", "cm1", "cm2"], ["s0", "s1", "s2"], ["p0", "p1", "p2", "p3", "p4"]);
    let (mut have_cm, mut have_secret, mut have_pod) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut log = Vec::new();
    for step in 0..60 {
        let roll = rng.below(100);
        let what = match roll {
            0..15 => {
                let name = cms[rng.below(cms.len())];
                let yaml = format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata: {{v: '{}'}}\n",
                    rng.below(1000)
                );
                cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
                have_cm.insert(name);
                format!("apply configmap {name}")
            }
            15..27 => {
                let name = secrets[rng.below(secrets.len())];
                let yaml = format!(
                    "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: default}}\nstringData: {{k: '{}'}}\n",
                    rng.below(1000)
                );
                cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
                have_secret.insert(name);
                format!("apply secret {name}")
            }
            27..35 => {
                let (kind, name) = if rng.below(2) == 0 {
                    ("configmap", cms[rng.below(cms.len())])
                } else {
                    ("secret", secrets[rng.below(secrets.len())])
                };
                let set = if kind == "configmap" { &mut have_cm } else { &mut have_secret };
                if !set.remove(name) {
                    continue;
                }
                cloud.kubectl(&["delete", kind, name], None);
                format!("delete {kind} {name}")
            }
            35..70 => {
                // Create, or delete and create again (possibly on the other node, using other objects).
                let name = pods[rng.below(pods.len())];
                if have_pod.contains(name) {
                    cloud.kubectl(&["delete", "pod", name, "--grace-period=0", "--force"], None);
                }
                let node = nodes[rng.below(nodes.len())];
                let cm = cms[rng.below(cms.len())];
                let secret = secrets[rng.below(secrets.len())];
                let yaml = format!(
                    "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: {node}\n  containers:\n  - name: c\n    image: busybox\n    env: [{{name: S, valueFrom: {{secretKeyRef: {{name: {secret}, key: k, optional: true}}}}}}]\n  volumes: [{{name: v, configMap: {{name: {cm}, optional: true}}}}]\n"
                );
                cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
                let again = !have_pod.insert(name);
                format!("{} pod {name} on {node} using {cm} and {secret}", if again { "recreate" } else { "create" })
            }
            70..82 => {
                let name = pods[rng.below(pods.len())];
                if !have_pod.remove(name) {
                    continue;
                }
                cloud.kubectl(&["delete", "pod", name, "--grace-period=0", "--force"], None);
                format!("delete pod {name}")
            }
            82..90 => {
                let i = rng.below(edges.len());
                edges[i].kill();
                edges[i].start(&[]);
                format!("kill -9 edge {}", nodes[i])
            }
            90..94 => {
                let i = rng.below(edges.len());
                edges[i].kill();
                std::fs::write(edges[i].db(), b"").unwrap();
                for suffix in ["-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", edges[i].db().display()));
                }
                edges[i].start(&[]);
                format!("empty the store of edge {}", nodes[i])
            }
            _ => {
                cloud.kill_and_restart();
                "kill -9 the cloud".to_owned()
            }
        };
        log.push(format!("{step}: {what}"));
    }
    eprintln!("steps:\n{}", log.join("\n"));
    for (e, n) in edges.iter().zip(nodes) {
        wait_until(&format!("edge {n}'s store is what the API says it should hold"), || {
            let (have, want) = (e.object_view(), cloud.node_view(n));
            if have != want {
                eprintln!("{n}: edge holds {have:?}\n{n}: API says {want:?}");
            }
            have == want
        });
    }
}
