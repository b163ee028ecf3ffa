//! Load test of `edgehive cloud` through its HTTPS API, per store backend:
//! create and update throughput and latency (flat out and paced at 1,000
//! writes/s), watch fan-out latency at 100 and 1,000 watchers, and the cloud
//! process's RSS with 100,000 pods stored.
//!
//! ```sh
//! cargo bench -p edgehive --bench apiserver                      # both backends
//! cargo bench -p edgehive --bench apiserver -- --backend sqlite --pods 100000
//! EDGEHIVE_BIN=path/to/edgehive cargo bench -p edgehive --bench apiserver -- ...  # another build, to compare
//! ```
//!
//! The cloud runs as its own process (so its RSS is its own); the load comes
//! from this process over loopback TLS, on the same 2 cores.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use edgehive_testkit::fixtures::{EtcdServer, TempDir, free_port};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

struct Cloud {
    child: Child,
    kubeconfig: std::path::PathBuf,
    _dir: TempDir,
}

impl Cloud {
    fn start(extra: &[String]) -> Cloud {
        let dir = TempDir::new("bench-cloud");
        let port = free_port();
        let bin = std::env::var_os("EDGEHIVE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_edgehive").into());
        let child = Command::new(bin)
            .args(["cloud", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--websocket-bind", "127.0.0.1:0", "--no-quic", "--join-bind", "127.0.0.1:0"])
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .args(extra)
            .env("EDGEHIVE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let kubeconfig = dir.path().join("data/kubeconfig.yaml");
        for _ in 0..600 {
            if kubeconfig.exists() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Cloud { child, kubeconfig, _dir: dir }
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn send(client: &kube::Client, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Bytes) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, ct)
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    (code, resp.into_body().collect().await.unwrap().to_bytes())
}

/// A pod of a realistic size (~1.4 KiB of JSON).
fn pod(name: &str, i: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": format!("app-{}", i % 50), "tier": "edge", "release": "stable"},
                     "annotations": {"edgehive.io/bench": "true"}},
        "spec": {
            "nodeName": format!("edge-{}", i % 1000),
            "containers": [{
                "name": "app", "image": "registry.example.com/team/app:1.2.3",
                "args": ["--listen=:8080", "--log-level=info"],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": "MODE", "value": "edge"}, {"name": "REGION", "value": "eu-west"}],
                "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "200m", "memory": "64Mi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            }],
            "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
            "tolerations": [{"key": "node-role.kubernetes.io/edge", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }))
    .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Flat out: `workers` tasks writing for `secs`.
async fn flat_out(
    c: &kube::Client,
    what: &str,
    workers: usize,
    secs: u64,
    next: Arc<std::sync::atomic::AtomicUsize>,
) -> String {
    let lat = Arc::new(Mutex::new(Vec::new()));
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (c, lat, next) = (c.clone(), Arc::clone(&lat), Arc::clone(&next));
        let what = what.to_string();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while Instant::now() < end {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let t = Instant::now();
                let code = write_one(&c, &what, i).await;
                assert!(code < 300, "{what} {i}: {code}");
                mine.push(t.elapsed());
            }
            lat.lock().await.extend(mine);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut lat = lat.lock().await.clone();
    lat.sort();
    format!(
        "| {what}, {workers} concurrent, flat out | {:.0}/s | {} | {} |",
        lat.len() as f64 / secs as f64,
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99))
    )
}

async fn write_one(c: &kube::Client, what: &str, i: usize) -> u16 {
    match what {
        "create" => {
            send(c, "POST", "/api/v1/namespaces/default/pods", "application/json", pod(&format!("p-{i}"), i)).await.0
        }
        _ => {
            let name = format!("p-{}", i % 5000);
            let patch = json!({"metadata": {"labels": {"rev": i.to_string()}}});
            let path = format!("/api/v1/namespaces/default/pods/{name}");
            send(c, "PATCH", &path, "application/merge-patch+json", serde_json::to_vec(&patch).unwrap()).await.0
        }
    }
}

/// Paced: `rate` writes per second for `secs`, each started on schedule
/// (open loop), latency measured from its start.
async fn paced(
    c: &kube::Client,
    what: &str,
    rate: u64,
    secs: u64,
    next: Arc<std::sync::atomic::AtomicUsize>,
) -> String {
    let total = rate * secs;
    let start = Instant::now();
    let gap = Duration::from_secs(1) / u32::try_from(rate).unwrap();
    let mut handles = Vec::with_capacity(usize::try_from(total).unwrap());
    for k in 0..total {
        tokio::time::sleep_until(start + gap * u32::try_from(k).unwrap()).await;
        let (c, next) = (c.clone(), Arc::clone(&next));
        let what = what.to_string();
        handles.push(tokio::spawn(async move {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let t = Instant::now();
            let code = write_one(&c, &what, i).await;
            assert!(code < 300, "{what} {i}: {code}");
            t.elapsed()
        }));
    }
    let mut lat = Vec::new();
    for h in handles {
        lat.push(h.await.unwrap());
    }
    let achieved = total as f64 / start.elapsed().as_secs_f64();
    lat.sort();
    format!(
        "| {what}, paced at {rate}/s | {achieved:.0}/s | {} | {} (max {}) |",
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        ms(*lat.last().unwrap_or(&Duration::ZERO))
    )
}

/// `n` watches on configmaps; 40 writes 50 ms apart; delay from each write's
/// acknowledgement-send time to each watcher's receipt.
async fn fan_out(kubeconfig: &std::path::Path, n: usize) -> String {
    // Several connections, as many clients would use (HTTP/2 streams per
    // connection are bounded).
    let mut clients = Vec::new();
    for _ in 0..n.div_ceil(250) {
        clients.push(client(kubeconfig).await);
    }
    let writer = client(kubeconfig).await;
    let (code, body) = send(&writer, "GET", "/api/v1/namespaces/fan/configmaps", "", Vec::new()).await;
    let rv = if code == 200 {
        serde_json::from_slice::<Value>(&body).unwrap()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string()
    } else {
        "0".into()
    };
    let sent: Arc<Mutex<std::collections::HashMap<String, Instant>>> = Arc::default();
    let delays = Arc::new(Mutex::new(Vec::new()));
    let ready = Arc::new(tokio::sync::Barrier::new(n + 1));
    for w in 0..n {
        let c = clients[w % clients.len()].clone();
        let (sent, delays, ready) = (Arc::clone(&sent), Arc::clone(&delays), Arc::clone(&ready));
        let rv = rv.clone();
        tokio::spawn(async move {
            let path = format!("/api/v1/namespaces/fan/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=120");
            let req = http::Request::builder().uri(path).body(kube::client::Body::empty()).unwrap();
            let resp = c.send(req).await.unwrap();
            ready.wait().await;
            let mut body = resp.into_body();
            let mut buf = Vec::new();
            let mut got = 0;
            while let Some(Ok(frame)) = body.frame().await {
                let Ok(data) = frame.into_data() else { continue };
                buf.extend_from_slice(&data);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    let now = Instant::now();
                    let v: Value = serde_json::from_slice(&line).unwrap();
                    let name = v["object"]["metadata"]["name"].as_str().unwrap_or("").to_string();
                    if let Some(t) = sent.lock().await.get(&name) {
                        delays.lock().await.push(now - *t);
                    }
                    got += 1;
                    if got == 40 {
                        return;
                    }
                }
            }
        });
    }
    ready.wait().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..40 {
        let name = format!("fan-{n}-{i}");
        sent.lock().await.insert(name.clone(), Instant::now());
        let body = serde_json::to_vec(&json!({"metadata": {"name": name}, "data": {"i": i.to_string()}})).unwrap();
        let (code, _) = send(&writer, "POST", "/api/v1/namespaces/fan/configmaps", "application/json", body).await;
        assert_eq!(code, 201);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while delays.lock().await.len() < n * 40 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut d = delays.lock().await.clone();
    d.sort();
    format!(
        "| watch fan-out, {n} watchers | {} deliveries | {} | {} (max {}) |",
        d.len(),
        ms(percentile(&d, 0.5)),
        ms(percentile(&d, 0.99)),
        ms(*d.last().unwrap_or(&Duration::ZERO))
    )
}

async fn fill(c: &kube::Client, from: usize, to: usize) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(from));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (c, next) = (c.clone(), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= to {
                    return;
                }
                let (code, _) =
                    send(&c, "POST", "/api/v1/namespaces/default/pods", "application/json", pod(&format!("p-{i}"), i))
                        .await;
                assert!(code == 201 || code == 409, "fill {i}: {code}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

async fn run_backend(name: &str, extra: Vec<String>, pods: usize) {
    println!("\n### {name}\n");
    let cloud = Cloud::start(&extra);
    let c = client(&cloud.kubeconfig).await;
    let (code, _) =
        send(&c, "POST", "/api/v1/namespaces", "application/json", br#"{"metadata":{"name":"fan"}}"#.to_vec()).await;
    assert_eq!(code, 201);
    println!("| what | throughput | p50 | p99 |\n|---|---|---|---|");
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    println!("{}", flat_out(&c, "create", 32, 10, Arc::clone(&next)).await);
    println!("{}", paced(&c, "create", 1000, 10, Arc::clone(&next)).await);
    println!(
        "{}",
        flat_out(&c, "update (merge patch)", 32, 10, Arc::new(std::sync::atomic::AtomicUsize::new(0))).await
    );
    println!("{}", paced(&c, "update (merge patch)", 1000, 10, Arc::new(std::sync::atomic::AtomicUsize::new(0))).await);
    println!("{}", fan_out(&cloud.kubeconfig, 100).await);
    println!("{}", fan_out(&cloud.kubeconfig, 1000).await);
    let have = next.load(std::sync::atomic::Ordering::Relaxed);
    let t = Instant::now();
    fill(&c, have, pods).await;
    println!("\nFilled to {pods} pods in {:.1} s.", t.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = cloud.rss_kib();
    // A full paged list of every pod, as `kubectl get pods -A` does.
    let t = Instant::now();
    let mut token = String::new();
    let mut listed = 0;
    let mut peak = idle;
    loop {
        let path = format!("/api/v1/pods?limit=500&continue={token}");
        let (code, body) = send(&c, "GET", &path, "", Vec::new()).await;
        assert_eq!(code, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
        listed += v["items"].as_array().map_or(0, Vec::len);
        peak = peak.max(cloud.rss_kib());
        match v["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = t.to_string(),
            _ => break,
        }
    }
    println!("Listed {listed} pods in pages of 500 in {:.1} s.", t.elapsed().as_secs_f64());
    println!("\n| cloud process RSS | value |\n|---|---|");
    println!("| {pods} pods stored, idle | {:.0} MiB |", idle as f64 / 1024.0);
    println!("| peak while listing all of them | {:.0} MiB |", peak as f64 / 1024.0);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).cloned();
    let backend = arg("--backend").unwrap_or_else(|| "all".into());
    let pods: usize = arg("--pods").and_then(|p| p.parse().ok()).unwrap_or(100_000);
    if args.iter().any(|a| a == "--list") {
        return; // `cargo bench -- --list`: nothing to list
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        if backend == "all" || backend == "sqlite" {
            run_backend("SQLite (fsync on every commit)", Vec::new(), pods).await;
        }
        if backend == "all" || backend == "etcd" {
            let etcd = EtcdServer::start();
            run_backend(
                "etcd 3.4 (one member, same machine)",
                vec!["--store".into(), "etcd".into(), "--etcd-endpoints".into(), etcd.url.clone()],
                pods,
            )
            .await;
        }
    });
}
