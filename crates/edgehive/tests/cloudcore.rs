//! The cloud as a process: a simulated edge (a viaduct client that persists
//! and ACKs) against `edgehive cloud`, which is killed with SIGKILL in the
//! middle of delivering and restarted. Nothing is lost. And a Go peer built
//! as KubeEdge v1.15's EdgeCore talks and reads (`kubeedge/edgecore.go`)
//! finds every answer where EdgeCore looks for it.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

#[path = "cloudcore/sim.rs"]
mod sim;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_model::{Content, Message, op};
use edgehive_testkit::fixtures::{TempDir, free_port};
use edgehive_viaduct::{ClientConfig, ClientTls, Identity};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

struct CloudProcess {
    child: Child,
    data: PathBuf,
    log: PathBuf,
}

impl CloudProcess {
    fn start(data: &Path, api: u16, ws: u16, log: PathBuf) -> CloudProcess {
        CloudProcess::start_with(data, api, ws, log, &["--join-bind", "127.0.0.1:0"])
    }

    fn start_with(data: &Path, api: u16, ws: u16, log: PathBuf, extra: &[&str]) -> CloudProcess {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(["cloud", "--data-dir"])
            .arg(data)
            .args(["--bind", &format!("127.0.0.1:{api}"), "--websocket-bind", &format!("127.0.0.1:{ws}"), "--no-quic"])
            .args(extra)
            .args(["--sync-interval", "1"])
            .env("EDGEHIVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap();
        let p = CloudProcess { child, data: data.to_owned(), log };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !(p.data.join("kubeconfig.yaml").exists()
            && std::net::TcpStream::connect(("127.0.0.1", api)).is_ok()
            && std::net::TcpStream::connect(("127.0.0.1", ws)).is_ok())
        {
            assert!(
                std::time::Instant::now() < deadline,
                "cloud did not start: {}",
                std::fs::read_to_string(&p.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.data.join("kubeconfig.yaml")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    }
}

impl Drop for CloudProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An edge that keeps reconnecting, stores what it gets and ACKs it (unless
/// holding ACKs).
struct SimEdge {
    db: Arc<Mutex<HashMap<String, String>>>,
    hold: Arc<AtomicBool>,
    acked: Arc<AtomicUsize>,
    connects: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl SimEdge {
    fn start(cfg: ClientConfig) -> SimEdge {
        let db = Arc::new(Mutex::new(HashMap::new()));
        let hold = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicUsize::new(0));
        let connects = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let (db, hold, acked, connects) = (db.clone(), hold.clone(), acked.clone(), connects.clone());
            async move {
                loop {
                    let Ok(conn) = edgehive_viaduct::ws::connect(&cfg).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    connects.fetch_add(1, Ordering::SeqCst);
                    let (tx, mut rx) = conn.split();
                    let keepalive = || {
                        Message::new()
                            .with_route("websocket", "resource", "node", op::KEEPALIVE)
                            .with_content(Content::string("ping"))
                    };
                    let _ = tx.try_write(keepalive());
                    let mut tick = tokio::time::interval(Duration::from_secs(1));
                    loop {
                        let m = tokio::select! {
                            m = rx.recv() => match m { Some(m) => m, None => break },
                            _ = tick.tick() => { let _ = tx.try_write(keepalive()); continue; }
                        };
                        if !matches!(m.route.operation.as_str(), op::INSERT | op::UPDATE | op::DELETE) {
                            continue;
                        }
                        {
                            let mut db = db.lock().unwrap();
                            if m.route.operation == op::DELETE {
                                db.remove(m.route.resource.as_str());
                            } else {
                                db.insert(m.route.resource.to_string(), m.header.resource_version.to_string());
                            }
                        }
                        // Persisted, so it may be acknowledged.
                        if !hold.load(Ordering::SeqCst) {
                            acked.fetch_add(1, Ordering::SeqCst);
                            let _ = tx.try_write(m.response(Content::string("OK")));
                        }
                    }
                }
            }
        });
        SimEdge { db, hold, acked, connects, task }
    }
}

async fn eventually<F: FnMut() -> bool>(what: &str, within: Duration, mut f: F) {
    let end = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloud_killed_mid_delivery_and_restarted_loses_nothing() {
    let dir = TempDir::new("cloudcore-kill");
    let data = dir.path().join("data");
    let (api, ws) = (free_port(), free_port());
    let log = dir.path().join("cloud.log");
    let mut cloud = CloudProcess::start(&data, api, ws, log.clone());
    let client = cloud.client().await;

    let nodes: Api<Node> = Api::all(client.clone());
    let node = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "edge-1", "labels": {"node-role.kubernetes.io/edge": ""}}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    // The edge's certificate, from the cloud's CA.
    let ca = edgehive_pki::Ca::load_or_create(&data.join("tls"), "edgehive-ca").unwrap();
    let cert = ca.issue_client("system:node:edge-1", &["system:nodes"], Duration::from_secs(86400)).unwrap();
    let tls = ClientTls {
        identity: Identity { cert_chain: vec![cert.cert_der.clone()], key: cert.key_der.clone_key() },
        server_ca: vec![ca.cert_der().clone()],
    };
    let edge = SimEdge::start(ClientConfig::new(format!("127.0.0.1:{ws}"), "edge-1", tls));
    eventually("edge connected", Duration::from_secs(20), || edge.connects.load(Ordering::SeqCst) == 1).await;

    // The first pods are acknowledged; then the edge stops acknowledging,
    // so the rest are in flight or waiting when the cloud dies.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let make = |i: usize| -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": format!("p{i}")},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap()
    };
    for i in 0..50 {
        pods.create(&PostParams::default(), &make(i)).await.unwrap();
    }
    eventually("first pods acknowledged", Duration::from_secs(20), || edge.acked.load(Ordering::SeqCst) >= 50).await;
    edge.hold.store(true, Ordering::SeqCst);
    for i in 50..300 {
        pods.create(&PostParams::default(), &make(i)).await.unwrap();
    }
    eventually("deliveries in flight", Duration::from_secs(20), || edge.db.lock().unwrap().len() > 60).await;

    cloud.child.kill().unwrap(); // SIGKILL
    cloud.child.wait().unwrap();
    edge.hold.store(false, Ordering::SeqCst);
    let cloud = CloudProcess::start(&data, api, ws, log.clone());
    let client = cloud.client().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let stored = pods.list(&Default::default()).await.unwrap();
    assert_eq!(stored.items.len(), 300, "every acknowledged create survived");
    let want: HashMap<String, String> = stored
        .items
        .iter()
        .map(|p| {
            (
                format!("default/pod/{}", p.metadata.name.as_deref().unwrap()),
                p.metadata.resource_version.clone().unwrap(),
            )
        })
        .collect();
    eventually("the edge has every pod at its stored version", Duration::from_secs(60), || {
        *edge.db.lock().unwrap() == want
    })
    .await;
    assert!(edge.connects.load(Ordering::SeqCst) >= 2, "the edge reconnected to the new process");
    edge.task.abort();
    drop(cloud);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_tokens_from_the_command_and_the_token_secret_are_valid() {
    let dir = TempDir::new("cloudcore-token");
    let data = dir.path().join("data");
    // Before the cloud ever ran there is no CA to sign with.
    let out = Command::new(env!("CARGO_BIN_EXE_edgehive")).args(["token", "--data-dir"]).arg(&data).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("start `edgehive cloud"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let cloud = CloudProcess::start(&data, free_port(), free_port(), dir.path().join("cloud.log"));
    let out = Command::new(env!("CARGO_BIN_EXE_edgehive")).args(["token", "--data-dir"]).arg(&data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(token.split('.').count(), 4, "{token}");
    let ca = edgehive_pki::Ca::load_or_create(&data.join("tls"), "edgehive-ca").unwrap();
    assert_eq!(token.split('.').next().unwrap(), ca.cert_sha256_hex());
    edgehive_pki::verify_token(&ca, &token, time::OffsetDateTime::now_utc()).unwrap();

    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(cloud.client().await, "kubeedge");
    let mut secret = None;
    let end = Instant::now() + Duration::from_secs(20);
    while secret.is_none() && Instant::now() < end {
        secret = secrets.get_opt("tokensecret").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let data = secret.expect("kubeedge/tokensecret").data.unwrap();
    let stored = String::from_utf8(data["tokendata"].0.clone()).unwrap();
    edgehive_pki::verify_token(&ca, &stored, time::OffsetDateTime::now_utc()).unwrap();
}

/// One HTTPS request to the join service, trusting `ca`; (status, body).
async fn https(port: u16, ca: &edgehive_pki::Ca, request_head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der().clone()).unwrap();
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg)).connect(name, tcp).await.unwrap();
    let head = format!("{request_head}Host: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body).await.unwrap();
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status = std::str::from_utf8(&raw[9..12]).unwrap().parse().unwrap();
    (status, raw[split + 4..].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_joins_with_a_token_and_connects_with_the_issued_certificate() {
    let dir = TempDir::new("cloudcore-join");
    let data = dir.path().join("data");
    let (api, ws, join) = (free_port(), free_port(), free_port());
    let cloud = CloudProcess::start_with(
        &data,
        api,
        ws,
        dir.path().join("cloud.log"),
        &["--join-bind", &format!("127.0.0.1:{join}")],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_edgehive")).args(["token", "--data-dir"]).arg(&data).output().unwrap();
    let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let (ca_hash, jwt) = token.split_once('.').unwrap();
    let ca = edgehive_pki::Ca::load_or_create(&data.join("tls"), "edgehive-ca").unwrap();

    // 1. The CA, checked against the token.
    let (status, ca_der) = https(join, &ca, "GET /ca.crt HTTP/1.1\r\n", b"").await;
    assert_eq!(status, 200);
    assert_eq!(ca_der, ca.cert_der().to_vec());
    assert_eq!(ca_hash, ca.cert_sha256_hex());

    // 2. A certificate for a CSR such as a KubeEdge v1.15 edge sends.
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name.push(rcgen::DnType::CommonName, "kubeedge.io");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, "kubeEdge");
    let csr = params.serialize_request(&key).unwrap();
    let head = format!("GET /edge.crt HTTP/1.1\r\nAuthorization: Bearer {jwt}\r\nNodeName: edge-j\r\n");
    let (status, cert_der) = https(join, &ca, &head, csr.der()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&cert_der));
    let id = edgehive_pki::identity_of(&cert_der).unwrap();
    assert_eq!(id.common_name, "system:node:edge-j");
    assert_eq!(id.organizations, ["system:nodes"]);
    // A forged token issues nothing.
    let (status, _) = https(join, &ca, &head.replace(jwt, &format!("{jwt}x")), csr.der()).await;
    assert_eq!(status, 401);

    // 3. That certificate opens a session: a pod bound to edge-j arrives.
    let client = cloud.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let node = serde_json::from_value(
        serde_json::json!({"metadata": {"name": "edge-j", "labels": {"node-role.kubernetes.io/edge": ""}}}),
    )
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let tls = ClientTls {
        identity: Identity {
            cert_chain: vec![rustls_pki_types::CertificateDer::from(cert_der)],
            key: rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        },
        server_ca: vec![ca.cert_der().clone()],
    };
    let edge = SimEdge::start(ClientConfig::new(format!("127.0.0.1:{ws}"), "edge-j", tls));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "hello"},
        "spec": {"nodeName": "edge-j", "containers": [{"name": "c", "image": "busybox"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    eventually("the pod reaches the joined edge", Duration::from_secs(20), || {
        edge.db.lock().unwrap().contains_key("default/pod/hello")
    })
    .await;
    edge.task.abort();
}

fn build_edgecore(dir: &Path) -> PathBuf {
    edgehive_testkit::go::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubeedge/edgecore.go"),
        dir,
        "edgecore",
    )
}

/// A running Go EdgeCore peer and the lines it printed.
struct GoEdgeCore {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl GoEdgeCore {
    fn start(bin: &Path, mode: &str, ws: u16, dir: &Path, ca: &edgehive_pki::Ca, node: &str) -> GoEdgeCore {
        let cert =
            ca.issue_client(&format!("system:node:{node}"), &["system:nodes"], Duration::from_secs(86400)).unwrap();
        let (ca_pem, cert_pem, key_pem) =
            (dir.join(format!("{node}-ca.pem")), dir.join(format!("{node}.pem")), dir.join(format!("{node}.key")));
        std::fs::write(&ca_pem, ca.cert_pem()).unwrap();
        std::fs::write(&cert_pem, &cert.cert_pem).unwrap();
        std::fs::write(&key_pem, &cert.key_pem).unwrap();
        let mut child = Command::new(bin)
            .arg(mode)
            .arg(format!("127.0.0.1:{ws}"))
            .args([&ca_pem, &cert_pem, &key_pem])
            .arg(node)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn({
            let lines = lines.clone();
            move || {
                use std::io::BufRead as _;
                for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            }
        });
        GoEdgeCore { child, lines }
    }

    fn printed(&self, prefix: &str) -> Option<String> {
        self.lines.lock().unwrap().iter().find(|l| l.starts_with(prefix)).cloned()
    }

    fn all(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// Waits until a line starts with `prefix`; fails on a "FAIL" line.
    async fn wait_for(&self, prefix: &str, within: Duration) {
        let end = Instant::now() + within;
        while self.printed(prefix).is_none() {
            assert!(self.printed("FAIL").is_none(), "the peer failed:\n{}", self.all());
            assert!(Instant::now() < end, "timed out waiting for {prefix:?}; the peer printed:\n{}", self.all());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for GoEdgeCore {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a stock EdgeCore (KubeEdge v1.15) trips over if the cloud answers
/// otherwise than CloudCore: its Lease (read, NotFound, create, renew), a
/// pod deletion answered "OK" also when retried after the pod is gone,
/// refusals it reads as failures, and a node whose edged is off getting
/// Ready Unknown ("NodeStatusNeverUpdated") instead of no condition at all
/// — without Node updates pushed down to it (EdgeCore stores a stray row
/// for those). Anything EdgeCore would misread makes the peer print
/// "MISREAD" or "FAIL".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubeedge_edgecore_reads_every_answer_as_cloudcore_would_give_it() {
    let dir = TempDir::new("cloudcore-kubeedge");
    let bin = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || build_edgecore(&dir)
    })
    .await
    .unwrap();
    let data = dir.path().join("data");
    let (api, ws) = (free_port(), free_port());
    let cloud = CloudProcess::start_with(
        &data,
        api,
        ws,
        dir.path().join("cloud.log"),
        &["--join-bind", "127.0.0.1:0", "--node-grace-period", "2"],
    );
    let client = cloud.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    for name in ["edge-ke", "edge-quiet"] {
        let node = serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "labels": {"node-role.kubernetes.io/edge": ""}}}),
        )
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = |name: &str, node: &str| -> Pod {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap()
    };
    pods.create(&PostParams::default(), &pod("doomed", "edge-ke")).await.unwrap();
    pods.create(&PostParams::default(), &pod("elsewhere", "edge-quiet")).await.unwrap();

    let ca = edgehive_pki::Ca::load_or_create(&data.join("tls"), "edgehive-ca").unwrap();
    let quiet = GoEdgeCore::start(&bin, "quiet", ws, dir.path(), &ca, "edge-quiet");
    let edge = GoEdgeCore::start(&bin, "edged", ws, dir.path(), &ca, "edge-ke");
    let within = Duration::from_secs(30);

    // The pod arrives; deleted through the API, it reaches the edge
    // terminating, and the edge confirms once its containers stopped.
    edge.wait_for("got pod default/pod/doomed", within).await;
    pods.delete("doomed", &Default::default()).await.unwrap();
    edge.wait_for("done", within).await;
    let out = edge.all();
    assert!(!out.contains("FAIL") && !out.contains("MISREAD"), "{out}");
    for line in [
        "lease not found",
        "lease created rv=",
        "lease renewed",
        "lease found holder=edge-ke kind=Lease",
        "lease of another node: Forbidden",
        "node query name=edge-ke",
        "configmap query refused",
        "pod delete: OK",
        "pod delete retry: OK",
        "delete of another node's pod: refused",
    ] {
        assert!(edge.printed(line).is_some(), "{line:?} missing from:\n{out}");
    }
    assert!(pods.get_opt("doomed").await.unwrap().is_none(), "the confirmed pod is gone");
    assert!(pods.get_opt("elsewhere").await.unwrap().is_some(), "another node's pod stays");
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let lease = leases.get("edge-ke").await.unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity.as_deref(), Some("edge-ke"));

    // The node whose edged is off: Ready Unknown, never updated, while its
    // session goes on.
    let end = Instant::now() + within;
    let ready = loop {
        let n = nodes.get("edge-quiet").await.unwrap();
        let ready = n.status.and_then(|s| s.conditions).and_then(|c| c.into_iter().find(|c| c.type_ == "Ready"));
        if let Some(ready) = ready {
            break ready;
        }
        assert!(Instant::now() < end, "edge-quiet never got a Ready condition");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ready.status, "Unknown");
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusNeverUpdated"));
    assert_eq!(ready.message.as_deref(), Some("Kubelet never posted node status."));
    // Its Node changed; a pod bound to it afterwards arrives, and nothing
    // about the Node came before it.
    pods.create(&PostParams::default(), &pod("later", "edge-quiet")).await.unwrap();
    eventually("the later pod at the quiet edge", within, || quiet.printed("got pod default/pod/later").is_some())
        .await;
    let out = quiet.all();
    assert!(!out.contains("resType is not pod") && !out.contains("/node/"), "{out}");
}

fn build_edgestream(dir: &Path) -> PathBuf {
    edgehive_testkit::go::build(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kubeedge/edgestream.go"),
        dir,
        "edgestream",
    )
}

/// Runs kubectl against the cloud, with `stdin` on its standard input;
/// (exit code, stdout, stderr).
async fn kubectl(data: &Path, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    use std::io::Write as _;
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(data.join("kubeconfig.yaml"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl (it is on the machines)");
    // A few bytes fit the pipe; closing it is kubectl's end of input.
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    let out =
        tokio::time::timeout(Duration::from_secs(60), tokio::task::spawn_blocking(move || child.wait_with_output()))
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not end within 60s"))
            .unwrap()
            .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubectl logs` and `kubectl exec` of pods on KubeEdge nodes: their
/// EdgeCores connect to CloudHub (which they do not ask for stream
/// sessions) and their EdgeStreams to the stream tunnel, as KubeEdge's
/// edges do with `edgeStream` enabled; the real kubectl reaches their
/// pods through edgehive's API, which goes through the tunnel. One node's
/// server speaks remote command v5 (stdin closes, the exit code comes
/// back), the other's only v4 (kubelet before 1.30).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_logs_and_exec_reach_a_kubeedge_node_through_its_stream_tunnel() {
    let dir = TempDir::new("cloudcore-tunnel");
    let (edgecore, edgestream) = tokio::task::spawn_blocking({
        let dir = dir.path().to_owned();
        move || (build_edgecore(&dir), build_edgestream(&dir))
    })
    .await
    .unwrap();
    let data = dir.path().join("data");
    let (api, ws, tunnel) = (free_port(), free_port(), free_port());
    let cloud = CloudProcess::start_with(
        &data,
        api,
        ws,
        dir.path().join("cloud.log"),
        &["--join-bind", "127.0.0.1:0", "--tunnel-bind", &format!("127.0.0.1:{tunnel}")],
    );
    let client = cloud.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (node, pod) in [("edge-ts", "web"), ("edge-t4", "web4")] {
        let n = serde_json::from_value(
            serde_json::json!({"metadata": {"name": node, "labels": {"node-role.kubernetes.io/edge": ""}}}),
        )
        .unwrap();
        nodes.create(&PostParams::default(), &n).await.unwrap();
        let p = serde_json::from_value(serde_json::json!({"metadata": {"name": pod},
            "spec": {"nodeName": node, "containers": [{"name": "app", "image": "busybox"}, {"name": "gone", "image": "busybox"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    let ca = edgehive_pki::Ca::load_or_create(&data.join("tls"), "edgehive-ca").unwrap();
    let within = Duration::from_secs(30);
    let core = GoEdgeCore::start(&edgecore, "quiet", ws, dir.path(), &ca, "edge-ts");
    core.wait_for("connected", within).await;
    let stream = GoEdgeCore::start(&edgestream, "v5", tunnel, dir.path(), &ca, "edge-ts");
    stream.wait_for("tunnel connected", within).await;

    // Logs; the first try may come before the cloud has recorded the tunnel.
    let end = Instant::now() + within;
    let (code, out, err) = loop {
        let got = kubectl(&data, &["logs", "web", "-c", "app", "--tail=2"], b"").await;
        if got.0 == 0 || Instant::now() > end {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((code, out.as_str()), (0, "line 4\nline 5\n"), "stderr: {err}\npeer: {}", stream.all());
    stream.wait_for("logs request /containerLogs/default/web/app?tailLines=2", within).await;

    // Exec with stdin: its end reaches the command, its exit code comes back.
    let (code, out, err) = kubectl(
        &data,
        &["exec", "-i", "web", "-c", "app", "--", "sh", "-c", "cat; echo oops >&2; exit 3"],
        b"hello tunnel\n",
    )
    .await;
    assert_eq!(out, "hello tunnel\n", "stderr: {err}\npeer: {}", stream.all());
    assert!(err.contains("oops"), "{err}");
    assert_eq!(code, 3, "{err}");
    stream.wait_for("exec protocol v5.channel.k8s.io", within).await;
    assert!(
        stream.printed("exec request GET /exec/default/web/app?command=sh&command=-c&command=cat").is_some(),
        "{}",
        stream.all()
    );

    // A container the node's server does not know: its 404 and message.
    let (code, _, err) = kubectl(&data, &["exec", "web", "-c", "gone", "--", "true"], b"").await;
    assert_ne!(code, 0);
    assert!(err.contains("container not found (\"gone\")"), "{err}");

    // A node whose server speaks v4 only.
    let core4 = GoEdgeCore::start(&edgecore, "quiet", ws, dir.path(), &ca, "edge-t4");
    core4.wait_for("connected", within).await;
    let stream4 = GoEdgeCore::start(&edgestream, "v4", tunnel, dir.path(), &ca, "edge-t4");
    stream4.wait_for("tunnel connected", within).await;
    let end = Instant::now() + within;
    let (code, out, err) = loop {
        let got = kubectl(&data, &["exec", "web4", "-c", "app", "--", "sh", "-c", "echo out; exit 2"], b"").await;
        if got.0 != 1 || Instant::now() > end {
            break got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((code, out.as_str()), (2, "out\n"), "stderr: {err}\npeer: {}", stream4.all());
    stream4.wait_for("exec protocol v4.channel.k8s.io", within).await;

    // kubectl top and the node's own endpoints (METRIC_CONNECT: the edge
    // relays what its kubelet server answers; for top, its Summary API).
    let (code, out, err) = kubectl(&data, &["top", "node", "edge-ts", "--no-headers"], b"").await;
    assert_eq!(code, 0, "{err}\npeer: {}", stream.all());
    assert_eq!(out.split_whitespace().take(2).collect::<Vec<_>>(), ["edge-ts", "250m"], "{out}");
    let (code, out, err) = kubectl(&data, &["top", "pod", "web", "--containers", "--no-headers"], b"").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), ["web", "app", "20m", "8Mi"], "{out}");
    let (code, out, err) = kubectl(&data, &["get", "--raw", "/api/v1/nodes/edge-ts/proxy/healthz"], b"").await;
    assert_eq!((code, out.trim()), (0, "ok"), "{err}");
    stream.wait_for("metrics request /stats/summary", within).await;

    // The tunnel's metrics, on the API's /metrics.
    let (_, metrics, _) = kubectl(&data, &["get", "--raw", "/metrics"], b"").await;
    assert!(metrics.contains("edgehive_tunnel_connected_nodes 2"), "{metrics}");
    assert!(!stream.all().contains("FAIL") && !stream4.all().contains("FAIL"), "{}\n{}", stream.all(), stream4.all());

    // A revoked node (its Node kept, its CloudHub session still up): the
    // next session finds the tunnel's certificate refused, and the tunnel
    // closes rather than carry it.
    let out = Command::new(env!("CARGO_BIN_EXE_edgehive"))
        .args(["node", "revoke", "--keep-node", "--data-dir"])
        .arg(&data)
        .arg("edge-t4")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // (kubectl shows its SPDY retry's error: by then the tunnel is gone.)
    let (code, _, err) = kubectl(&data, &["exec", "web4", "-c", "app", "--", "true"], b"").await;
    assert_ne!(code, 0, "{err}");
    stream4.wait_for("tunnel closed: websocket: close 1008 (policy violation): the certificates of node \"edge-t4\" were revoked", within).await;
    let end = Instant::now() + within;
    loop {
        let (_, metrics, _) = kubectl(&data, &["get", "--raw", "/metrics"], b"").await;
        if metrics.contains("edgehive_tunnel_connected_nodes 1") {
            break;
        }
        assert!(Instant::now() < end, "the revoked node's tunnel stays: {metrics}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
