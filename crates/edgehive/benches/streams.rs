//! Stream sessions through the cloud to a real edge (`edgehive cloud` and
//! `edgehive edge` with the process runtime, each its own process, over
//! loopback TLS on the same 2 cores), driven by the `kube` crate's clients
//! (its exec, log stream and WebSocket port-forward):
//!
//! - exec round trip: a line written to `cat`'s stdin until it is read back
//!   from its stdout (API server → CloudHub → edge → process and back);
//! - `logs -f` first byte: from the request to the first byte of the log;
//! - port-forward throughput: a pod's server sends 256 MiB on a connection;
//! - deliveries beside sessions: a configmap update until the file in
//!   another pod's volume changes, with no session open and with 100 open
//!   (50 idle `exec cat`, 50 `logs -f` of a pod writing all the time);
//! - the edge's RSS per idle open session.
//!
//! ```sh
//! cargo bench -p edgehive --bench streams
//! ```
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgehive_testkit::fixtures::{TempDir, free_port};
use futures_util::AsyncBufReadExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, AttachParams, LogParams, Patch, PatchParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Proc(Child);

impl Drop for Proc {
    /// SIGTERM first, so that the edge stops its pods' processes (a killed
    /// edge leaves them running), then SIGKILL after 15 s.
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn wait(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The cloud and one edge joined to it.
struct Fleet {
    // The edge goes first (fields drop in order), while the cloud is there.
    edge: Proc,
    cloud: Proc,
    data: PathBuf,
    edge_dir: PathBuf,
    _dir: TempDir,
}

fn start(dir: TempDir) -> Fleet {
    let bin = env!("CARGO_BIN_EXE_edgehive");
    let data = dir.path().join("cloud");
    let (api, ws, join) = (free_port(), free_port(), free_port());
    let cloud = Proc(
        Command::new(bin)
            .args(["cloud", "--data-dir"])
            .arg(&data)
            .args(["--bind", &format!("127.0.0.1:{api}"), "--websocket-bind", &format!("127.0.0.1:{ws}")])
            .args(["--no-quic", "--join-bind", &format!("127.0.0.1:{join}")])
            .env("EDGEHIVE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("cloud.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait("the cloud", Duration::from_secs(60), || {
        std::net::TcpStream::connect(("127.0.0.1", api)).is_ok() && data.join("kubeconfig.yaml").exists()
    });
    let token = Command::new(bin).args(["token", "--data-dir"]).arg(&data).output().unwrap();
    let token = String::from_utf8(token.stdout).unwrap();
    let edge_dir = dir.path().join("edge");
    std::fs::create_dir_all(&edge_dir).unwrap();
    let config = edge_dir.join("edge.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\ndataDir: {}\nmodules:\n  edged: {{hostnameOverride: edge-1}}\n  edgeHub:\n    httpServer: https://127.0.0.1:{join}\n    token: {}\n    websocket: {{enable: true, server: '127.0.0.1:{ws}'}}\n",
            edge_dir.join("data").display(),
            token.trim()
        ),
    )
    .unwrap();
    let edge = Proc(
        Command::new(bin)
            .args(["edge", "--config"])
            .arg(&config)
            .env("EDGEHIVE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("edge.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    Fleet { edge, cloud, data, edge_dir, _dir: dir }
}

async fn client(data: &Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(data.join("kubeconfig.yaml")).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

fn pod(name: &str, script: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": "edge-1", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]},
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn summary(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} samples)",
        percentile(&v, 0.5).as_secs_f64() * 1e3,
        percentile(&v, 0.99).as_secs_f64() * 1e3,
        v.last().unwrap().as_secs_f64() * 1e3,
        v.len()
    )
}

async fn running(pods: &Api<Pod>, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = pods.get(name).await.unwrap();
        if p.status.and_then(|s| s.phase).as_deref() == Some("Running") {
            return;
        }
        assert!(Instant::now() < deadline, "{name} not Running");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fleet = start(TempDir::new("bench-streams"));
    let client = client(&fleet.data).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    while nodes.get_opt("edge-1").await.unwrap().is_none() {
        assert!(Instant::now() < deadline, "the edge did not register");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let port = free_port();
    let server = format!(
        "exec python3 -c 'import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind((\"127.0.0.1\",{port}))\ns.listen(8)\nchunk=bytes(1<<20)\nwhile True:\n  c,_=s.accept()\n  try:\n    [c.sendall(chunk) for _ in range(256)]\n  except OSError:\n    pass\n  c.close()'"
    );
    let cm: ConfigMap = serde_json::from_value(
        serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"v": "0"}}),
    )
    .unwrap();
    cms.create(&Default::default(), &cm).await.unwrap();
    let mut holder = pod("holder", "while true; do sleep 1; done");
    holder["spec"]["containers"][0]["volumeMounts"] = serde_json::json!([{"name": "cfg", "mountPath": "/etc/cfg"}]);
    holder["spec"]["volumes"] = serde_json::json!([{"name": "cfg", "configMap": {"name": "cfg"}}]);
    for p in [
        pod("shell", "while true; do sleep 1; done"),
        pod("chatty", "while true; do echo chatter; sleep 0.01; done"),
        pod("server", &server),
        holder,
    ] {
        pods.create(&Default::default(), &serde_json::from_value(p).unwrap()).await.unwrap();
    }
    for p in ["shell", "chatty", "server", "holder"] {
        running(&pods, p).await;
    }
    wait("the forwarded server", Duration::from_secs(30), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let uid = pods.get("holder").await.unwrap().metadata.uid.unwrap();
    let volume_file = fleet.edge_dir.join("data/pods").join(uid).join("volumes/cfg/v");

    // Exec round trip.
    let ap = AttachParams::default().stdin(true).stdout(true).stderr(false);
    let mut cat = pods.exec("shell", ["cat"], &ap).await.unwrap();
    let mut stdin = cat.stdin().unwrap();
    let mut stdout = cat.stdout().unwrap();
    let line = [b'x'; 63].iter().chain(b"\n").copied().collect::<Vec<u8>>();
    let mut rtts = Vec::new();
    let mut buf = vec![0u8; line.len()];
    for i in 0..1100 {
        let t = Instant::now();
        stdin.write_all(&line).await.unwrap();
        stdout.read_exact(&mut buf).await.unwrap();
        if i >= 100 {
            rtts.push(t.elapsed());
        }
    }
    drop(stdin);
    println!("exec echo round trip (64 bytes, kube's exec): {}", summary(rtts));

    // logs -f first byte.
    let mut firsts = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let lp = LogParams { follow: true, tail_lines: Some(1), ..LogParams::default() };
        let mut lines = pods.log_stream("chatty", &lp).await.unwrap();
        let mut first = Vec::new();
        lines.read_until(b'\n', &mut first).await.unwrap();
        firsts.push(t.elapsed());
    }
    println!("logs -f first line (tail 1): {}", summary(firsts));

    // Port-forward throughput.
    let mut rates = Vec::new();
    for _ in 0..3 {
        let mut pf = pods.portforward("server", &[port]).await.unwrap();
        let mut s = pf.take_stream(port).unwrap();
        let t = Instant::now();
        let mut got = 0usize;
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            let n = s.read(&mut chunk).await.unwrap();
            if n == 0 {
                break;
            }
            got += n;
        }
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(got, 256 << 20);
        rates.push(got as f64 / secs / 1e6);
        drop(s);
        let _ = pf.join().await;
    }
    println!(
        "port-forward throughput (256 MiB, kube's portforward): {} MB/s (worst {:.0})",
        rates.iter().map(|r| format!("{r:.0}")).collect::<Vec<_>>().join(" / "),
        rates.iter().copied().fold(f64::MAX, f64::min)
    );

    // Deliveries with and without 100 sessions.
    let mut version = 0u32;
    let mut deliveries = |n: usize| {
        let cms = cms.clone();
        let file = volume_file.clone();
        let start = version;
        version += n as u32;
        async move {
            let mut v = Vec::new();
            for i in start + 1..=start + n as u32 {
                let t = Instant::now();
                let patch = serde_json::json!({"data": {"v": i.to_string()}});
                cms.patch("cfg", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
                let want = i.to_string();
                let deadline = Instant::now() + Duration::from_secs(30);
                while std::fs::read_to_string(&file).unwrap_or_default() != want {
                    assert!(Instant::now() < deadline, "update {i} did not arrive");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                v.push(t.elapsed());
            }
            v
        }
    };
    let quiet = deliveries(50).await;
    let rss_before = rss_kib(fleet.edge.0.id());
    let mut idle = Vec::new();
    for _ in 0..50 {
        idle.push(pods.exec("shell", ["cat"], &ap).await.unwrap());
    }
    let rss_idle = rss_kib(fleet.edge.0.id());
    let mut followers = Vec::new();
    for _ in 0..50 {
        let lp = LogParams { follow: true, tail_lines: Some(0), ..LogParams::default() };
        let mut lines = pods.log_stream("chatty", &lp).await.unwrap();
        followers.push(tokio::spawn(async move {
            let mut sink = Vec::new();
            while lines.read_until(b'\n', &mut sink).await.unwrap_or(0) > 0 {
                sink.clear();
            }
        }));
    }
    let busy = deliveries(50).await;
    println!("configmap update to a pod's volume, no session open: {}", summary(quiet));
    println!("configmap update to a pod's volume, 100 sessions open: {}", summary(busy));
    println!(
        "edge RSS: {} KiB before, {} KiB with 50 idle exec sessions ({:.1} KiB per session)",
        rss_before,
        rss_idle,
        (rss_idle as f64 - rss_before as f64) / 50.0
    );
    for f in followers {
        f.abort();
    }
    drop(idle);
    let _ = (&fleet.cloud, &fleet.edge);
}
