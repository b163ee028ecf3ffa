//! Load test of the cloud's delivery path: ACK-mode deliveries from an API
//! write to the edge's ACK, with 1, 100 and 1,000 simulated edge nodes, and
//! the cloud's memory per connected idle node at 1,000 and 10,000 nodes.
//!
//! ```sh
//! cargo bench -p edgehive --bench cloudcore                     # everything
//! cargo bench -p edgehive --bench cloudcore -- --nodes 100 --idle 1000
//! cargo bench -p edgehive --bench cloudcore -- --nodes 0 --idle 0 --daemonset 1000
//! ```
//!
//! `--deployments N`: N Deployments of one replica created through the API
//! (no nodes, so the pods stay Pending): how long until the controllers are
//! idle, the cloud's RSS growth per Deployment (with its ReplicaSet and pod),
//! and after a restart on the same data, how long the controllers take to
//! list and look at everything again, and what they write (nothing, when
//! nothing changed).
//!
//! `--daemonset N`: a DaemonSet rolled to N simulated edge nodes, whose
//! edges report each pod Running and Ready as soon as it arrives (as edged
//! does once its container started): the time from the DaemonSet's create
//! to all N pods Ready in its status, the controllers' store writes, and the
//! cloud's CPU time and RSS growth.
//!
//! `edgehive cloud` runs as its own process (its RSS is its own); the edges
//! are viaduct WebSocket clients in this process that store nothing and ACK
//! at once, over loopback TLS, on the same 2 cores. Every node runs one pod
//! that uses ten configmaps; each round updates the ten configmaps, which
//! fans out to every node. Latency is from the start of the API write to
//! the edge receiving that version (its ACK leaves right after).
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_model::{Content, Message, op};
use edgehive_testkit::fixtures::{TempDir, free_port};
use edgehive_viaduct::{ClientConfig, ClientTls, Identity};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::time::Instant;

const CONFIGMAPS: usize = 10;

struct Cloud {
    child: Child,
    data: std::path::PathBuf,
    ws: u16,
    _dir: TempDir,
}

impl Cloud {
    fn start() -> Cloud {
        Cloud::start_in(TempDir::new("bench-cloudcore"))
    }

    /// A cloud on the data directory in `dir` (again after a restart).
    fn start_in(dir: TempDir) -> Cloud {
        let extra: Vec<String> =
            std::env::var("CLOUD_ARGS").map(|a| a.split_whitespace().map(str::to_owned).collect()).unwrap_or_default();
        let data = dir.path().join("data");
        let (api, ws) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(["cloud", "--data-dir"])
            .arg(&data)
            .args([
                "--bind",
                &format!("127.0.0.1:{api}"),
                "--websocket-bind",
                &format!("127.0.0.1:{ws}"),
                "--no-quic",
                "--join-bind",
                "127.0.0.1:0",
            ])
            .args(&extra)
            .env("EDGEHIVE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("cloud.log")).unwrap())
            .spawn()
            .unwrap();
        let mut cloud = Cloud { child, data, ws, _dir: dir };
        // Up to two minutes: a restart over many objects reads them all first.
        let deadline = Instant::now() + Duration::from_secs(120);
        while !(std::net::TcpStream::connect(("127.0.0.1", api)).is_ok()
            && std::net::TcpStream::connect(("127.0.0.1", ws)).is_ok()
            && cloud.data.join("kubeconfig.yaml").exists())
        {
            let log = || std::fs::read_to_string(cloud._dir.path().join("cloud.log")).unwrap_or_default();
            if let Some(status) = cloud.child.try_wait().unwrap() {
                panic!("edgehive cloud exited ({status}) before serving; its log:\n{}", log());
            }
            assert!(Instant::now() < deadline, "edgehive cloud not serving after 2 min; its log:\n{}", log());
            std::thread::sleep(Duration::from_millis(50));
        }
        cloud
    }

    async fn client(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(self.data.join("kubeconfig.yaml")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cloud {
    /// Stops the process and hands back its directory.
    fn stop(mut self) -> TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The next start listens on other ports and writes a new kubeconfig
        // after it listens: wait for that one, not this.
        let _ = std::fs::remove_file(self.data.join("kubeconfig.yaml"));
        let placeholder = TempDir::new("bench-cloudcore-stopped");
        std::mem::replace(&mut self._dir, placeholder)
    }
}

/// What the edges received: (node index, resource, rv) → when.
type Receipts = Arc<Mutex<Vec<(usize, String, u64, Instant)>>>;

struct Edges {
    receipts: Receipts,
    connected: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn connect_edges(cloud: &Cloud, nodes: usize) -> Edges {
    connect_reporting_edges(cloud, nodes, false).await
}

/// Edges that, when `report` is set, answer each pod they receive with its
/// status Running and Ready (the podstatus edged sends).
async fn connect_reporting_edges(cloud: &Cloud, nodes: usize, report: bool) -> Edges {
    let ca = edgehive_pki::Ca::load_or_create(&cloud.data.join("tls"), "edgehive-ca").unwrap();
    let receipts: Receipts = Arc::default();
    let connected = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(nodes);
    let permits = Arc::new(tokio::sync::Semaphore::new(64));
    for i in 0..nodes {
        let name = format!("edge-{i}");
        let cert =
            ca.issue_client(&format!("system:node:{name}"), &["system:nodes"], Duration::from_secs(86400)).unwrap();
        let tls = ClientTls {
            identity: Identity { cert_chain: vec![cert.cert_der.clone()], key: cert.key_der.clone_key() },
            server_ca: vec![ca.cert_der().clone()],
        };
        let cfg = ClientConfig::new(format!("127.0.0.1:{}", cloud.ws), name, tls);
        let (receipts, connected, permits) = (receipts.clone(), connected.clone(), permits.clone());
        tasks.push(tokio::spawn(async move {
            let conn = {
                let _p = permits.acquire().await.unwrap();
                edgehive_viaduct::ws::connect(&cfg).await.unwrap()
            };
            connected.fetch_add(1, Ordering::SeqCst);
            let (tx, mut rx) = conn.split();
            let keepalive = || {
                Message::new()
                    .with_route("websocket", "resource", "node", op::KEEPALIVE)
                    .with_content(Content::string("ping"))
            };
            let _ = tx.try_write(keepalive());
            let mut tick = tokio::time::interval(Duration::from_secs(10));
            loop {
                let m = tokio::select! {
                    m = rx.recv() => match m { Some(m) => m, None => return },
                    _ = tick.tick() => { let _ = tx.try_write(keepalive()); continue; }
                };
                if matches!(m.route.operation.as_str(), op::INSERT | op::UPDATE | op::DELETE) {
                    let now = Instant::now();
                    let _ = tx.try_write(m.response(Content::string("OK")));
                    if report && m.route.operation == op::INSERT && m.route.resource.contains("/pod/") {
                        let pod = m.content.to_value();
                        let at = edgehive_store::now_rfc3339();
                        let status = json!({"UID": pod["metadata"]["uid"], "Status": {"phase": "Running",
                            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": at}],
                            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0,
                                "state": {"running": {"startedAt": at}}}]}});
                        let resource = format!(
                            "{}/podstatus/{}",
                            pod["metadata"]["namespace"].as_str().unwrap_or("default"),
                            pod["metadata"]["name"].as_str().unwrap_or_default()
                        );
                        let _ = tx.try_write(
                            Message::new()
                                .with_route("edged", "meta", resource, op::UPDATE)
                                .with_content(Content::from_serialize(&status).unwrap()),
                        );
                    }
                    let rv = m.header.resource_version.parse().unwrap_or(0);
                    receipts.lock().unwrap().push((i, m.route.resource.to_string(), rv, now));
                }
            }
        }));
    }
    let end = Instant::now() + Duration::from_secs(600);
    while connected.load(Ordering::SeqCst) < nodes && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Edges { receipts, connected, tasks }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(((sorted.len() as f64 - 1.0) * p).round() as usize).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

async fn delivery(nodes: usize) {
    println!("--- {nodes} node(s)");
    let cloud = Cloud::start();
    let client = cloud.client().await;
    let node_api: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for c in 0..CONFIGMAPS {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("cm-{c}")}, "data": {"v": "0"}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let volumes: Vec<_> =
        (0..CONFIGMAPS).map(|c| json!({"name": format!("v{c}"), "configMap": {"name": format!("cm-{c}")}})).collect();
    let edges = connect_edges(&cloud, nodes).await;
    let setup = Instant::now();
    // 32 creators at once, as controllers write: the store commits them in
    // groups, so the setup does not wait on one disk flush per object.
    let next = Arc::new(AtomicUsize::new(0));
    let creators: Vec<_> = (0..32)
        .map(|_| {
            let (node_api, pods, next, volumes) = (node_api.clone(), pods.clone(), next.clone(), volumes.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= nodes {
                        return;
                    }
                    let n = serde_json::from_value(json!({"metadata": {"name": format!("edge-{i}"),
                        "labels": {"node-role.kubernetes.io/edge": ""}}}))
                    .unwrap();
                    node_api.create(&PostParams::default(), &n).await.unwrap();
                    let p = serde_json::from_value(json!({"metadata": {"name": format!("p-{i}")},
                        "spec": {"nodeName": format!("edge-{i}"), "containers": [{"name": "c", "image": "busybox"}],
                            "volumes": volumes}}))
                    .unwrap();
                    pods.create(&PostParams::default(), &p).await.unwrap();
                }
            })
        })
        .collect();
    for c in creators {
        c.await.unwrap();
    }
    let created = setup.elapsed().as_secs_f64();
    let initial = nodes * (CONFIGMAPS + 1);
    while edges.receipts.lock().unwrap().len() < initial && setup.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let setup_secs = setup.elapsed().as_secs_f64();
    edges.receipts.lock().unwrap().clear();

    // Rounds of configmap updates, one writer per configmap.
    let rounds = (100_000 / (CONFIGMAPS * nodes)).clamp(5, 500);
    let writes: Arc<Mutex<HashMap<(usize, u64), Instant>>> = Arc::default();
    let start = Instant::now();
    let mut writers = Vec::new();
    for c in 0..CONFIGMAPS {
        let (cms, writes) = (cms.clone(), writes.clone());
        writers.push(tokio::spawn(async move {
            for r in 1..=rounds {
                let mut cm = cms.get(&format!("cm-{c}")).await.unwrap();
                cm.data = Some([("v".to_string(), r.to_string())].into());
                let t = Instant::now();
                let done = cms.replace(&format!("cm-{c}"), &PostParams::default(), &cm).await.unwrap();
                let rv = done.metadata.resource_version.unwrap().parse().unwrap();
                writes.lock().unwrap().insert((c, rv), t);
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let written = start.elapsed();
    // Drain: wait until receipts stop growing.
    let mut last = 0;
    let mut quiet = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let n = edges.receipts.lock().unwrap().len();
        if n != last {
            last = n;
            quiet = Instant::now();
        } else if quiet.elapsed() > Duration::from_secs(2) {
            break;
        }
    }
    let receipts = edges.receipts.lock().unwrap().clone();
    let finished = receipts.iter().map(|r| r.3).max().unwrap_or(start);
    let writes = writes.lock().unwrap().clone();
    let mut lat: Vec<Duration> = receipts
        .iter()
        .filter_map(|(_, res, rv, at)| {
            let c: usize = res.strip_prefix("default/configmap/cm-")?.parse().ok()?;
            Some(at.saturating_duration_since(*writes.get(&(c, *rv))?))
        })
        .collect();
    lat.sort();
    let secs = (finished - start).as_secs_f64();
    println!(
        "nodes={nodes:>5}  setup {initial} deliveries in {setup_secs:.2} s (objects created in {created:.2} s)  |  flat out: {} API writes in {:.2} s, {} acked deliveries in {secs:.2} s = {:.0}/s  |  write→edge p50 {} p99 {} max {}  |  cloud RSS {} MiB",
        writes.len(),
        written.as_secs_f64(),
        receipts.len(),
        receipts.len() as f64 / secs,
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(lat.last().copied().unwrap_or_default()),
        cloud.rss_kib() / 1024,
    );
    // Paced: 10,000 deliveries/s in total (writes spread evenly), for the
    // latency of a cloud that keeps up.
    edges.receipts.lock().unwrap().clear();
    let per_sec = (10_000 / nodes).clamp(1, 1000);
    let paced_writes = (per_sec * 5).min(2000);
    let gap = Duration::from_secs_f64(1.0 / per_sec as f64);
    let counters0 = delivery_counters(&client).await;
    // Each configmap is written from the last answer (no read first): one
    // request per write, so the pace holds while the disk is slow.
    let mut last: Vec<ConfigMap> = Vec::new();
    for c in 0..CONFIGMAPS {
        last.push(cms.get(&format!("cm-{c}")).await.unwrap());
    }
    // Writes in flight at once, each on its own task, so that a slow answer
    // does not hold the next write back.
    let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel();
    let last: Vec<Arc<tokio::sync::Mutex<ConfigMap>>> =
        last.into_iter().map(|c| Arc::new(tokio::sync::Mutex::new(c))).collect();
    let mut tick = tokio::time::interval(gap);
    let phase_start = Instant::now();
    for w in 0..paced_writes {
        tick.tick().await;
        let c = w % CONFIGMAPS;
        let (cms, slot, sent_tx) = (cms.clone(), last[c].clone(), sent_tx.clone());
        tokio::spawn(async move {
            // Writes of one configmap follow each other (each needs the
            // version the last one made).
            let mut cm = slot.lock().await;
            cm.data = Some([("v".to_string(), format!("paced-{w}"))].into());
            let t = Instant::now();
            let done = cms.replace(&format!("cm-{c}"), &PostParams::default(), &cm).await.unwrap();
            let answered = Instant::now();
            let rv = done.metadata.resource_version.clone().unwrap().parse::<u64>().unwrap();
            *cm = done;
            let _ = sent_tx.send(((c, rv), (t, answered)));
        });
    }
    drop(sent_tx);
    let mut sent = Vec::with_capacity(paced_writes);
    while let Some(s) = sent_rx.recv().await {
        sent.push(s);
    }
    let expected = paced_writes * nodes;
    let end = Instant::now() + Duration::from_secs(60);
    while edges.receipts.lock().unwrap().len() < expected && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut api: Vec<Duration> = sent.iter().map(|(_, (t, a))| a.saturating_duration_since(*t)).collect();
    api.sort();
    let writes: HashMap<(usize, u64), (Instant, Instant)> = sent.into_iter().collect();
    let receipts = edges.receipts.lock().unwrap().clone();
    let mut seen = std::collections::HashSet::new();
    let mut duplicates = 0usize;
    let (mut lat, mut after): (Vec<Duration>, Vec<Duration>) = receipts
        .iter()
        .filter_map(|(node, res, rv, at)| {
            let c: usize = res.strip_prefix("default/configmap/cm-")?.parse().ok()?;
            let (t, answered) = writes.get(&(c, *rv))?;
            if !seen.insert((*node, c, *rv)) {
                duplicates += 1;
            }
            Some((at.saturating_duration_since(*t), at.saturating_duration_since(*answered)))
        })
        .unzip();
    lat.sort();
    after.sort();
    // Where a tail comes from: the slowest deliveries, with their write's
    // answer time (a slow write delays all its nodes alike; a slow
    // delivery, some).
    if lat.last().is_some_and(|l| *l > Duration::from_millis(500)) {
        let mut slow: Vec<_> = receipts
            .iter()
            .filter_map(|(node, res, rv, at)| {
                let c: usize = res.strip_prefix("default/configmap/cm-")?.parse().ok()?;
                let (t, answered) = writes.get(&(c, *rv))?;
                Some((at.saturating_duration_since(*t), answered.saturating_duration_since(*t), *node, c, *rv))
            })
            .collect();
        slow.sort();
        let tail = slow.len().saturating_sub(5);
        for (l, a, node, c, rv) in &slow[tail..] {
            println!("  slow: edge-{node} cm-{c}@{rv}: write→edge {} (write answered after {})", ms(*l), ms(*a));
        }
        let late = slow.iter().filter(|s| s.0 > Duration::from_millis(500)).count();
        let writes_late: std::collections::HashSet<_> =
            slow.iter().filter(|s| s.0 > Duration::from_millis(500)).map(|s| (s.3, s.4)).collect();
        println!("  {late} deliveries over 500 ms, of {} writes", writes_late.len());
    }
    // A p99 past the target: which writes made it. One write reaches every
    // node, so a write whose burst was late is 1/50 of the deliveries.
    if percentile(&lat, 0.99) > Duration::from_millis(40) {
        slowest_writes(&receipts, &writes, phase_start);
    }
    let counters = delivery_counters(&client).await;
    let delta: Vec<String> =
        counters.iter().zip(&counters0).map(|((name, v), (_, v0))| format!("{name} {:.0}", v - v0)).collect();
    println!(
        "nodes={nodes:>5}  paced {per_sec} writes/s x {nodes} nodes = {} deliveries/s: {} of {expected} delivered ({duplicates} twice), write→edge p50 {} p99 {} max {}  |  API write p50 {} p99 {} max {}  |  answer→edge p99 {} max {}  |  {}",
        per_sec * nodes,
        lat.len(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(lat.last().copied().unwrap_or_default()),
        ms(percentile(&api, 0.5)),
        ms(percentile(&api, 0.99)),
        ms(api.last().copied().unwrap_or_default()),
        ms(percentile(&after, 0.99)),
        ms(after.last().copied().unwrap_or_default()),
        delta.join(", "),
    );
    for t in edges.tasks {
        t.abort();
    }
}

/// Prints the five writes whose deliveries ended latest after the write's
/// answer: when each was answered (since the paced phase began), how long
/// its commit took, and its deliveries' spread after the answer.
fn slowest_writes(
    receipts: &[(usize, String, u64, Instant)],
    writes: &HashMap<(usize, u64), (Instant, Instant)>,
    phase_start: Instant,
) {
    let mut per_write: HashMap<(usize, u64), Vec<Duration>> = HashMap::new();
    for (_, res, rv, at) in receipts {
        let Some(c) = res.strip_prefix("default/configmap/cm-").and_then(|c| c.parse::<usize>().ok()) else {
            continue;
        };
        if let Some((_, answered)) = writes.get(&(c, *rv)) {
            per_write.entry((c, *rv)).or_default().push(at.saturating_duration_since(*answered));
        }
    }
    let mut rows: Vec<_> = per_write
        .into_iter()
        .map(|(w, mut l)| {
            l.sort();
            (l.last().copied().unwrap_or_default(), percentile(&l, 0.5), w)
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    for (max, p50, (c, rv)) in rows.iter().take(5) {
        let (t, answered) = writes[&(*c, *rv)];
        println!(
            "  slow write cm-{c}@{rv}: answered at {} (commit {}), answer→edge p50 {} max {}",
            ms(answered.saturating_duration_since(phase_start)),
            ms(answered.saturating_duration_since(t)),
            ms(*p50),
            ms(*max),
        );
    }
}

/// The cloud's counters of what a delivery can cost beyond one send: resends
/// after a missed ACK, messages dropped (offline, full inbox or pool) and
/// SyncController's re-sends.
async fn delivery_counters(client: &kube::Client) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    for (name, metric, labels) in [
        ("resent", "edgehive_cloudhub_retries_total", &[][..]),
        ("dropped full", "edgehive_cloudhub_dropped_total", &["reason=\"full\""][..]),
        ("dropped offline", "edgehive_cloudhub_dropped_total", &["reason=\"offline\""][..]),
        ("sync updates", "edgehive_synccontroller_updates_total", &[][..]),
    ] {
        out.push((name, metric_with(client, metric, labels).await));
    }
    out
}

async fn idle(nodes: usize) {
    let cloud = Cloud::start();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = cloud.rss_kib();
    let edges = connect_edges(&cloud, nodes).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = cloud.rss_kib();
    println!(
        "idle nodes={nodes:>6}  connected {}  cloud RSS {} MiB -> {} MiB  = {:.1} KiB per idle node",
        edges.connected.load(Ordering::SeqCst),
        before / 1024,
        after / 1024,
        (after.saturating_sub(before)) as f64 / nodes as f64
    );
    for t in edges.tasks {
        t.abort();
    }
}

/// CPU seconds (user + system) the process `pid` has used.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// The sum of the samples of metric `name` on the cloud's `/metrics`.
async fn metric_sum(client: &kube::Client, name: &str) -> f64 {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn daemonset(nodes: usize) {
    println!("--- DaemonSet to {nodes} node(s)");
    let cloud = Cloud::start();
    let client = cloud.client().await;
    let node_api: Api<Node> = Api::all(client.clone());
    let edges = connect_reporting_edges(&cloud, nodes, true).await;
    for i in 0..nodes {
        let n = serde_json::from_value(json!({"metadata": {"name": format!("edge-{i}"),
            "labels": {"node-role.kubernetes.io/edge": "", "tier": "edge"}}}))
        .unwrap();
        node_api.create(&PostParams::default(), &n).await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss0, cpu0) = (cloud.rss_kib(), cpu_secs(cloud.child.id()));
    let writes0 = metric_sum(&client, "edgehive_workloads_writes_total").await;
    let requests0 = metric_sum(&client, "edgehive_apiserver_request_total").await;
    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}},
            "spec": {"nodeSelector": {"tier": "edge"}, "containers": [{"name": "c", "image": "busybox"}]}}}});
    let api: Api<k8s_openapi::api::apps::v1::DaemonSet> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    api.create(&PostParams::default(), &serde_json::from_value(ds).unwrap()).await.unwrap();
    let (mut scheduled_at, mut ready_at) = (None, None);
    let mut polls = 0.0;
    while ready_at.is_none() && start.elapsed() < Duration::from_secs(600) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        polls += 1.0;
        let status = api.get("agent").await.unwrap().status.unwrap_or_default();
        if scheduled_at.is_none() && status.current_number_scheduled as usize == nodes {
            scheduled_at = Some(start.elapsed());
        }
        if status.number_ready as usize == nodes {
            ready_at = Some(start.elapsed());
        }
    }
    let (rss1, cpu1) = (cloud.rss_kib(), cpu_secs(cloud.child.id()));
    let writes = metric_sum(&client, "edgehive_workloads_writes_total").await - writes0;
    // This bench's own requests (the create, the polls, two metric reads) are not the controllers'.
    let requests = metric_sum(&client, "edgehive_apiserver_request_total").await - requests0 - polls - 3.0;
    let secs = |d: Option<Duration>| d.map_or("timed out".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    println!(
        "daemonset nodes={nodes:>5}  all pods created {}  all Ready {}  controller writes {writes:.0}  \
         other API requests {requests:.0}  cloud CPU {:.2} s  cloud RSS {} -> {} MiB  {}",
        secs(scheduled_at),
        secs(ready_at),
        cpu1 - cpu0,
        rss0 / 1024,
        rss1 / 1024,
        events(&client).await,
    );
    for t in edges.tasks {
        t.abort();
    }
}

/// The sum of the samples of metric `name` whose labels include every one of `labels`.
async fn metric_with(client: &kube::Client, name: &str, labels: &[&str]) -> f64 {
    let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(req).await.unwrap();
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The Event recorder's notes so far, by outcome.
async fn events(client: &kube::Client) -> String {
    let mut out = String::from("events:");
    for outcome in ["created", "counted", "spam", "queue_full", "failed"] {
        let label = format!("outcome=\"{outcome}\"");
        let n = metric_with(client, "edgehive_events_notes_total", &[label.as_str()]).await + 0.0;
        out.push_str(&format!(" {outcome} {n:.0}"));
    }
    out
}

/// Waits until the workload controllers have run at least `min_syncs` syncs
/// and then none for a second (a Deployment whose pods cannot start keeps a
/// delayed check of its progress deadline queued, so the queue is not
/// empty); the time it took.
async fn controllers_idle(client: &kube::Client, since: Instant, min_syncs: f64) -> Duration {
    let mut last = -1.0;
    let mut quiet = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let syncs = metric_sum(client, "edgehive_workloads_syncs_total").await;
        if syncs != last || syncs < min_syncs {
            last = syncs;
            quiet = Instant::now();
        } else if quiet.elapsed() >= Duration::from_secs(1) {
            return quiet.duration_since(since);
        }
    }
}

async fn deployments(count: usize) {
    println!("--- {count} Deployments of one replica");
    let cloud = Cloud::start();
    let client = cloud.client().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss0 = cloud.rss_kib();
    let api: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for _ in 0..16 {
        let (api, next) = (api.clone(), next.clone());
        writers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= count {
                    return;
                }
                let d = json!({"metadata": {"name": format!("d-{i}")}, "spec": {"replicas": 1,
                    "selector": {"matchLabels": {"app": format!("d-{i}")}},
                    "template": {"metadata": {"labels": {"app": format!("d-{i}")}},
                        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
                api.create(&PostParams::default(), &serde_json::from_value(d).unwrap()).await.unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let created = start.elapsed();
    while metric_with(&client, "edgehive_workloads_writes_total", &["verb=\"create\"", "resource=\"pods\""]).await
        < count as f64
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let settled = controllers_idle(&client, start, count as f64).await;
    let rss1 = cloud.rss_kib();
    println!(
        "deployments={count}  created through the API in {:.1} s  controllers idle after {:.1} s  \
         cloud RSS {} -> {} MiB ({:.2} KiB per Deployment with its ReplicaSet and pod)  {}",
        created.as_secs_f64(),
        settled.as_secs_f64(),
        rss0 / 1024,
        rss1 / 1024,
        rss1.saturating_sub(rss0) as f64 / count as f64,
        events(&client).await,
    );
    // A restart: the controllers list everything again and decide; nothing is written.
    let dir = cloud.stop();
    let start = Instant::now();
    let cloud = Cloud::start_in(dir);
    let client = cloud.client().await;
    let up = start.elapsed();
    // Every Deployment and ReplicaSet is looked at again.
    let settled = controllers_idle(&client, start, 2.0 * count as f64).await;
    // (+ 0.0: a sum of no samples is -0.0.)
    let writes = metric_sum(&client, "edgehive_workloads_writes_total").await + 0.0;
    let syncs = metric_sum(&client, "edgehive_workloads_syncs_total").await + 0.0;
    println!(
        "restart: API up in {:.1} s  controllers idle after {:.1} s  syncs {syncs:.0}  writes {writes:.0}  cloud RSS {} MiB",
        up.as_secs_f64(),
        settled.as_secs_f64(),
        cloud.rss_kib() / 1024
    );
}

fn list(args: &[String], flag: &str, default: &[usize]) -> Vec<usize> {
    match args.iter().position(|a| a == flag) {
        Some(i) => args[i + 1].split(',').map(|s| s.parse().unwrap()).collect(),
        None => default.to_vec(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return;
    }
    let nodes = list(&args, "--nodes", &[1, 100, 1000]);
    let idle_nodes = list(&args, "--idle", &[1000, 10_000]);
    let daemon_nodes = list(&args, "--daemonset", &[1000]);
    let deployment_counts = list(&args, "--deployments", &[10_000]);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        for n in nodes.into_iter().filter(|n| *n > 0) {
            delivery(n).await;
        }
        for n in idle_nodes.into_iter().filter(|n| *n > 0) {
            idle(n).await;
        }
        for n in daemon_nodes.into_iter().filter(|n| *n > 0) {
            daemonset(n).await;
        }
        for n in deployment_counts.into_iter().filter(|n| *n > 0) {
            deployments(n).await;
        }
    });
}
