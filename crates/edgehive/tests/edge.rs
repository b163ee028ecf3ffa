//! `edgehive edge` as a process against `edgehive cloud` as a process:
//! join with a token, objects created with kubectl reaching the edge's
//! store, a restart without the token, an edge killed between receiving a
//! change and committing it, and a link cut by a fault-injecting proxy.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use edgehive_testkit::fixtures::{TempDir, free_port};

const WAIT: Duration = Duration::from_secs(40);

struct Cloud {
    child: Child,
    data: PathBuf,
    api: u16,
    ws: u16,
    join: u16,
    log: PathBuf,
    home: PathBuf,
}

impl Cloud {
    fn start(dir: &Path, extra: &[&str]) -> Cloud {
        let data = dir.join("cloud");
        let (api, ws, join) = (free_port(), free_port(), free_port());
        let log = dir.join("cloud.log");
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(["cloud", "--data-dir"])
            .arg(&data)
            .args(["--bind", &format!("127.0.0.1:{api}"), "--websocket-bind", &format!("127.0.0.1:{ws}")])
            .args(["--no-quic", "--join-bind", &format!("127.0.0.1:{join}"), "--sync-interval", "1"])
            .args(extra)
            .env("EDGEHIVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap();
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let c = Cloud { child, data, api, ws, join, log, home };
        wait_until("the cloud listens", || {
            c.data.join("kubeconfig.yaml").exists()
                && [c.api, c.ws, c.join].iter().all(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
        });
        c
    }

    fn token(&self) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(["token", "--data-dir"])
            .arg(&self.data)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Runs kubectl against the cloud; it must succeed. Returns stdout.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut child = Command::new("kubectl")
            .env("KUBECONFIG", self.data.join("kubeconfig.yaml"))
            .env("HOME", &self.home)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is on the machines");
        if let Some(input) = stdin {
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all, None)).unwrap()
    }

    fn node_ready(&self, node: &str) -> Option<String> {
        let out = Command::new("kubectl")
            .env("KUBECONFIG", self.data.join("kubeconfig.yaml"))
            .env("HOME", &self.home)
            .args(["get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"])
            .output()
            .unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|s| !s.is_empty())
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- cloud log ---\n{}", std::fs::read_to_string(&self.log).unwrap_or_default());
        }
    }
}

struct Edge {
    child: Option<Child>,
    dir: PathBuf,
    log: PathBuf,
}

impl Edge {
    fn config(&self) -> PathBuf {
        self.dir.join("edge.yaml")
    }

    fn db(&self) -> PathBuf {
        self.dir.join("data/edgecore.db")
    }

    /// Writes the configuration: `server` is the WebSocket address (the
    /// cloud's, or a proxy's); a token only when given.
    fn configure(&self, node: &str, server: &str, join: u16, token: Option<&str>) {
        self.configure_with(node, server, join, token, "");
    }

    /// As `configure`, with more `edgeHub` keys (lines indented 4 spaces).
    fn configure_with(&self, node: &str, server: &str, join: u16, token: Option<&str>, hub_extra: &str) {
        let token = token.map(|t| format!("    token: {t}\n")).unwrap_or_default();
        let yaml = format!(
            "apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\ndataDir: {data}\nmodules:\n  edged: {{hostnameOverride: {node}, nodeLeaseDurationSeconds: 4}}\n  edgeHub:\n    heartbeat: 1\n    httpServer: https://127.0.0.1:{join}\n{token}    websocket: {{enable: true, server: '{server}'}}\n    reconnect: {{base: 0.1, cap: 0.5}}\n{hub_extra}",
            data = self.dir.join("data").display()
        );
        std::fs::write(self.config(), yaml).unwrap();
    }

    fn new(dir: &Path) -> Edge {
        let dir = dir.join("edge");
        std::fs::create_dir_all(&dir).unwrap();
        Edge { child: None, log: dir.join("edge.log"), dir }
    }

    fn start(&mut self, env: &[(&str, &str)]) {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_edgehive"));
        cmd.args(["edge", "--config"])
            .arg(self.config())
            .env("EDGEHIVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(out));
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().unwrap());
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The edge's `meta` table: key → (resourceVersion, value).
    fn rows(&self) -> BTreeMap<String, (String, serde_json::Value)> {
        let Ok(conn) = rusqlite::Connection::open_with_flags(self.db(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        else {
            return BTreeMap::new();
        };
        let Ok(mut stmt) = conn.prepare("SELECT key, value FROM meta") else { return BTreeMap::new() };
        stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap()
            .filter_map(Result::ok)
            .map(|(k, v)| {
                let v: serde_json::Value = serde_json::from_str(&v).unwrap_or_default();
                let rv = v.pointer("/metadata/resourceVersion").and_then(|r| r.as_str()).unwrap_or_default().to_owned();
                (k, (rv, v))
            })
            .collect()
    }

    /// The edge's log, without terminal colours.
    fn log_text(&self) -> String {
        let raw = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- edge log ---\n{}", self.log_text());
        }
    }
}

/// A TCP proxy the test owns, on 127.0.0.1: passes bytes both ways, or,
/// when cut, closes every connection and refuses new ones (a link down).
struct CutProxy {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl CutProxy {
    fn start(upstream: u16) -> CutProxy {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let generation = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (c, g) = (cut.clone(), generation.clone());
        std::thread::spawn(move || {
            for down in listener.incoming() {
                let Ok(down) = down else { return };
                if c.load(SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(up) = std::net::TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                let born = g.load(SeqCst);
                for (from, to) in [(down.try_clone().unwrap(), up.try_clone().unwrap()), (up, down)] {
                    let g = g.clone();
                    std::thread::spawn(move || pump(from, to, &g, born));
                }
            }
        });
        CutProxy { port, cut, generation }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn cut(&self, down: bool) {
        use std::sync::atomic::Ordering::SeqCst;
        self.cut.store(down, SeqCst);
        if down {
            self.generation.fetch_add(1, SeqCst);
        }
    }
}

/// Copies bytes until either side closes or the proxy is cut (the
/// generation moves on), then shuts both sockets.
fn pump(
    mut from: std::net::TcpStream,
    mut to: std::net::TcpStream,
    generation: &std::sync::atomic::AtomicU64,
    born: u64,
) {
    use std::io::Read as _;
    use std::sync::atomic::Ordering::SeqCst;
    from.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let mut buf = [0u8; 16 * 1024];
    while generation.load(SeqCst) == born {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(std::net::Shutdown::Both);
    let _ = to.shutdown(std::net::Shutdown::Both);
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const OBJECTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: default}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  nodeName: NODE
  containers:
  - name: c
    image: busybox
    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: creds, key: password}}
    volumeMounts: [{name: cfg, mountPath: /etc/cfg}]
  volumes: [{name: cfg, configMap: {name: cfg}}]
"#;

fn pod_yaml(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n"
    )
}

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
    let uid = cloud.json(&["get", "pod", "p"]).pointer("/metadata/uid").unwrap().as_str().unwrap().to_owned();
    let synced = |cloud: &Cloud| {
        let list = cloud.json(&["get", "objectsyncs", "-n", "default"]);
        list["items"].as_array().unwrap().iter().any(|o| o["metadata"]["name"] == format!("edge-c.{uid}"))
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
