//! WebSocket transport figures over loopback with TLS:
//! one-way messages/s with a ~1 KB pod message, request/response round trip
//! p50/p99, and server memory per idle connection.
//!
//! `cargo bench -p edgehive-viaduct --bench viaduct` (add `-- --conns 10000`
//! for the memory figure at 10,000 connections; needs `ulimit -n` ≥ 10100).

#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::print_stdout, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use edgehive_model::{Content, Message, group, op, source};
use edgehive_testkit::pki::TestCa;
use edgehive_viaduct::quic::QuicClient;
use edgehive_viaduct::ws::connect;
use edgehive_viaduct::{ClientConfig, ClientTls, Connection, Identity, Server, ServerConfig, ServerTls};

#[derive(Clone, Copy, PartialEq)]
enum Proto {
    Ws,
    Quic,
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Ws => "WebSocket",
            Proto::Quic => "QUIC",
        }
    }
}

fn pod_1k() -> Content {
    let containers: Vec<serde_json::Value> = (0..6)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "image": "registry.local/app:1.0", "args": ["--port", "8080", "--verbose"], "env": [{"name": "MODE", "value": "edge"}]}))
        .collect();
    Content::from_serialize(&serde_json::json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "nginx", "namespace": "default", "uid": "8d3e0d2c-0000-4000-8000-000000000001", "resourceVersion": "48213"},
        "spec": {"nodeName": "edge-1", "containers": containers}, "status": {}
    }))
    .unwrap()
}

struct Pki {
    ca: TestCa,
}

impl Pki {
    fn server_tls(&self) -> ServerTls {
        let s = self.ca.server();
        ServerTls { identity: Identity { cert_chain: vec![s.cert], key: s.key }, client_ca: vec![self.ca.cert.clone()] }
    }
    fn client(&self, addr: &str, node: &str) -> ClientConfig {
        let c = self.ca.node(node);
        let tls = ClientTls {
            identity: Identity { cert_chain: vec![c.cert], key: c.key },
            server_ca: vec![self.ca.cert.clone()],
        };
        ClientConfig::new(addr, node, tls)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        })
        .unwrap_or(0)
}

/// A connected pair; the server and client objects are kept alive alongside.
async fn pair(proto: Proto, pki: &Pki) -> (Connection, Connection, Box<dyn std::any::Any + Send>) {
    let cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    match proto {
        Proto::Ws => {
            let mut srv = Server::bind_ws(cfg).await.unwrap();
            let client = connect(&pki.client(&srv.local_addr().to_string(), "edge-1")).await.unwrap();
            let accepted = srv.accept().await.unwrap();
            (client, accepted, Box::new(srv))
        }
        Proto::Quic => {
            let mut srv = Server::bind_quic(cfg).await.unwrap();
            let qc =
                QuicClient::new(pki.client(&srv.local_addr().to_string(), "edge-1"), "127.0.0.1:0".parse().unwrap())
                    .unwrap();
            let client = qc.connect().await.unwrap();
            let accepted = srv.accept().await.unwrap();
            (client, accepted, Box::new((srv, qc)))
        }
    }
}

async fn throughput_and_latency(proto: Proto, quick: bool) {
    let pki = Pki { ca: TestCa::new("bench-ca") };
    let (client, accepted, _keep) = pair(proto, &pki).await;
    let (stx, mut srx) = accepted.split();
    let (ctx, _crx) = client.split();
    println!("== {}", proto.name());
    let content = pod_1k();
    let fresh = |c: &Content| {
        Message::build(source::EDGECONTROLLER, group::RESOURCE, "default/pod/nginx", op::INSERT, c.clone())
    };
    println!("pod message: {} bytes on the wire", fresh(&content).encode().len() + 1);

    // One-way, client -> server.
    let n: u64 = if quick { 20_000 } else { 500_000 };
    let counter = tokio::spawn(async move {
        let mut got = 0u64;
        while got < n {
            srx.recv().await.unwrap();
            got += 1;
        }
        srx
    });
    let t0 = tokio::time::Instant::now();
    for _ in 0..n {
        ctx.write(fresh(&content)).await.unwrap();
    }
    let mut srx = counter.await.unwrap();
    let secs = t0.elapsed().as_secs_f64();
    println!("one-way ~1 KB pod messages: {:.0} msgs/s ({:.1} MB/s)", n as f64 / secs, n as f64 * 1090.0 / secs / 1e6);

    // Round trip: the server echoes an ACK.
    tokio::spawn(async move {
        while let Some(m) = srx.recv().await {
            stx.write(m.response(Content::string("OK"))).await.unwrap();
        }
    });
    let ping = Content::string("ping");
    let samples_n = if quick { 2_000 } else { 100_000 };
    for _ in 0..samples_n / 10 {
        ctx.request(fresh(&ping), Duration::from_secs(10)).await.unwrap();
    }
    let mut samples = Vec::with_capacity(samples_n);
    for _ in 0..samples_n {
        let t = tokio::time::Instant::now();
        ctx.request(fresh(&ping), Duration::from_secs(10)).await.unwrap();
        samples.push(t.elapsed());
    }
    samples.sort();
    println!(
        "request/response round trip over {samples_n}: p50 {:?}  p99 {:?}  p99.9 {:?}",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        percentile(&samples, 0.999)
    );
}

/// Child process: a server that holds every connection it accepts, with the
/// TLS material the parent wrote to `BENCH_DIR`.
async fn hold_server(proto: Proto) {
    let dir = std::path::PathBuf::from(std::env::var("BENCH_DIR").unwrap());
    let read = |n: &str| std::fs::read(dir.join(n)).unwrap();
    let tls = ServerTls {
        identity: Identity {
            cert_chain: vec![rustls_pki_types::CertificateDer::from(read("server.der"))],
            key: rustls_pki_types::PrivateKeyDer::Pkcs8(read("server.key").into()),
        },
        client_ca: vec![rustls_pki_types::CertificateDer::from(read("ca.der"))],
    };
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), tls);
    cfg.accept_queue = 20_000;
    // Every connection comes from 127.0.0.1, 200 handshakes at a time: the
    // bounds on pending handshakes are not what this measures. Bursts of 200
    // overflow loopback's queues (TCP SYNs, one UDP socket), so some
    // handshakes wait for a retransmission (1 s, then 3 s or more on QUIC):
    // longer than the 5 s default deadline allows.
    cfg.max_pending_handshakes_per_source = 20_000;
    cfg.handshake_timeout = std::time::Duration::from_secs(30);
    let mut held = Vec::new();
    if proto == Proto::Quic {
        let mut srv = Server::bind_quic(cfg).await.unwrap();
        println!("{}", srv.local_addr());
        while let Some(conn) = srv.accept().await {
            held.push(conn);
        }
    } else {
        let mut srv = Server::bind_ws(cfg).await.unwrap();
        println!("{}", srv.local_addr());
        while let Some(conn) = srv.accept().await {
            held.push(conn);
        }
    }
}

async fn memory_per_connection(proto: Proto, conns: usize) {
    let pki = Pki { ca: TestCa::new("bench-ca") };
    let dir = std::env::temp_dir().join(format!("viaduct-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = pki.ca.server();
    std::fs::write(dir.join("ca.der"), pki.ca.cert.as_ref()).unwrap();
    std::fs::write(dir.join("server.der"), server.cert.as_ref()).unwrap();
    std::fs::write(dir.join("server.key"), server.key.secret_der()).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .arg(if proto == Proto::Quic { "--hold-quic-server" } else { "--hold-server" })
        .env("BENCH_DIR", &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_kib(child.id());

    let cfg = pki.client(&addr, "edge");
    let mut held = Vec::with_capacity(conns);
    let mut batch = Vec::new();
    let quic = std::sync::Arc::new(QuicClient::new(cfg.clone(), "127.0.0.1:0".parse().unwrap()).unwrap());
    for i in 0..conns {
        let mut c = cfg.clone();
        c.node_id = format!("edge-{i}");
        let quic = quic.clone();
        batch.push(tokio::spawn(async move {
            match proto {
                Proto::Ws => connect(&c).await,
                Proto::Quic => quic.connect().await,
            }
        }));
        if batch.len() == 200 || i + 1 == conns {
            for h in batch.drain(..) {
                held.push(h.await.unwrap().expect("connect"));
            }
        }
    }
    // Let the server settle (handshake buffers freed, tasks parked).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_kib(child.id());
    println!(
        "{}: server RSS {before} KiB idle -> {after} KiB with {conns} idle TLS connections: {:.1} KiB per connection",
        proto.name(),
        (after.saturating_sub(before)) as f64 / conns as f64
    );
    drop(held);
    child.kill().unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    if args.iter().any(|a| a == "--hold-server") {
        rt.block_on(hold_server(Proto::Ws));
        return;
    }
    if args.iter().any(|a| a == "--hold-quic-server") {
        rt.block_on(hold_server(Proto::Quic));
        return;
    }
    let quick = !args.iter().any(|a| a == "--bench");
    let conns: usize = args
        .iter()
        .position(|a| a == "--conns")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 100 } else { 10_000 });
    for proto in [Proto::Ws, Proto::Quic] {
        rt.block_on(rt.spawn(throughput_and_latency(proto, quick))).unwrap();
        rt.block_on(rt.spawn(memory_per_connection(proto, conns))).unwrap();
    }
    std::io::stdout().flush().unwrap();
}
