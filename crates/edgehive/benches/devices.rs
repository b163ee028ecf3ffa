//! Devices end to end, with the real processes (`edgehive cloud`,
//! `edgehive edge`, `edgehive mapper`, release builds) on loopback:
//!
//! ```sh
//! cargo bench -p edgehive --bench devices                          # everything, 3 runs each
//! cargo bench -p edgehive --bench devices -- --latency 100 --reports 30 --fleet 0
//! cargo bench -p edgehive --bench devices -- --latency 0 --reports 0 --fleet 1000 --window 60 --runs 3
//! ```
//!
//! 1. `--latency N`: N PATCHes of a Modbus Device's desired value through
//!    the API, ~300 ms apart; each is timed from the PATCH's response to the
//!    simulated device's holding register taking the value (the simulator
//!    runs in this process and is polled every 1 ms).
//! 2. `--reports N`: N new values set in the simulator's register, each
//!    more than 1.2 s after the last was seen (DeviceController writes a changed
//!    Device at most once a second; closer values would measure that
//!    limit); each is timed from the set to a watch on the Device seeing
//!    it in `status.twins[].reported.value`. collectCycle and reportCycle
//!    are 100 ms.
//! 3. `--fleet N`: N virtual devices (`virtualprotocol`, two properties
//!    each, collect and report every 1 s) on one edge with one mapper;
//!    once all report, a `--window` (60 s) of the edge's and the mapper's
//!    RSS and CPU, the edge's upstream messages (its metrics endpoint) and
//!    bytes (a counting proxy between edge and cloud: TLS bytes on the
//!    wire), and the cloud's Device status writes. Two variants: values
//!    that never change (`min == max`) and values that change every second
//!    (a random whole number).
//!
//! Each part runs `--runs` times (3) on fresh processes; every run is
//! printed, and the worst is the one to report (BENCHMARKS.md's rules).
//! `EDGEHIVE_BENCH_EDGE_BIN=target/edge/edgehive` runs the edge with the
//! edge-only build (`cargo build --profile edge -p edgehive
//! --no-default-features --features edge`).
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::disallowed_methods)]

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_mapper::simulator::{Device, serve};
use edgehive_testkit::fixtures::{TempDir, free_port};
use futures_util::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

const NODE: &str = "edge-1";

struct Args {
    latency: usize,
    reports: usize,
    fleet: usize,
    window: u64,
    runs: usize,
    variants: Vec<bool>,
}

fn args() -> Args {
    let mut a = Args { latency: 100, reports: 30, fleet: 1000, window: 60, runs: 3, variants: vec![false, true] };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let next = || argv.get(i + 1).cloned().unwrap_or_default();
        match argv[i].as_str() {
            "--latency" => a.latency = next().parse().unwrap(),
            "--reports" => a.reports = next().parse().unwrap(),
            "--fleet" => a.fleet = next().parse().unwrap(),
            "--window" => a.window = next().parse().unwrap(),
            "--runs" => a.runs = next().parse().unwrap(),
            "--variant" => {
                a.variants = match next().as_str() {
                    "constant" => vec![false],
                    "changing" => vec![true],
                    _ => vec![false, true],
                }
            }
            _ => {
                i += 1; // `--bench` and the like, from cargo
                continue;
            }
        }
        i += 2;
    }
    a
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        if a.latency > 0 || a.reports > 0 {
            for run in 1..=a.runs {
                latency_run(run, a.latency, a.reports).await;
            }
        }
        if a.fleet > 0 {
            for &changing in &a.variants {
                for run in 1..=a.runs {
                    fleet_run(run, a.fleet, a.window, changing).await;
                }
            }
        }
    });
}

// ---------------------------------------------------------------- processes

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_edgehive")
}

/// The edge's binary: `EDGEHIVE_BENCH_EDGE_BIN` (e.g. the edge-only build,
/// `target/edge/edgehive`), else the full one.
fn edge_bin() -> String {
    std::env::var("EDGEHIVE_BENCH_EDGE_BIN").unwrap_or_else(|_| bin().to_owned())
}

fn spawn(args: &[String], log: &Path) -> Child {
    spawn_bin(bin(), args, log)
}

fn spawn_bin(bin: &str, args: &[String], log: &Path) -> Child {
    Command::new(bin)
        .args(args)
        .env("EDGEHIVE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A cloud, an edge (behind a byte-counting proxy, with its metrics
/// endpoint) and a mapper of `protocol`.
struct Env {
    // Dropped in this order: mapper, edge, cloud.
    mapper: Proc,
    edge: Proc,
    _cloud: Proc,
    client: kube::Client,
    edge_metrics: u16,
    up_bytes: Arc<AtomicU64>,
    down_bytes: Arc<AtomicU64>,
    dir: TempDir,
}

async fn wait_for<F: FnMut() -> bool>(what: &str, secs: u64, mut cond: F) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Env {
    async fn start(name: &str, protocol: &str) -> Env {
        let dir = TempDir::new(name);
        let data = dir.path().join("cloud");
        let (api, ws, join) = (free_port(), free_port(), free_port());
        let cloud = Proc(spawn(
            &[
                "cloud".into(),
                "--data-dir".into(),
                data.display().to_string(),
                "--bind".into(),
                format!("127.0.0.1:{api}"),
                "--websocket-bind".into(),
                format!("127.0.0.1:{ws}"),
                "--no-quic".into(),
                "--join-bind".into(),
                format!("127.0.0.1:{join}"),
            ],
            &dir.path().join("cloud.log"),
        ));
        wait_for("the cloud listens", 120, || {
            data.join("kubeconfig.yaml").exists()
                && [api, ws, join].iter().all(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
        })
        .await;
        let out = Command::new(bin()).args(["token", "--data-dir"]).arg(&data).output().unwrap();
        assert!(out.status.success(), "edgehive token: {}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8(out.stdout).unwrap().trim().to_owned();

        let (up_bytes, down_bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let proxy = counting_proxy(ws, up_bytes.clone(), down_bytes.clone()).await;
        let edge_dir = dir.path().join("edge");
        std::fs::create_dir_all(&edge_dir).unwrap();
        let dmi = edge_dir.join("dmi.sock");
        let edge_metrics = free_port();
        let yaml = format!(
            "apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\ndataDir: {data}\nmetricsAddress: 127.0.0.1:{edge_metrics}\nmodules:\n  edged: {{enable: false, hostnameOverride: {NODE}}}\n  edgeHub:\n    httpServer: https://127.0.0.1:{join}\n    token: {token}\n    websocket: {{enable: true, server: '127.0.0.1:{proxy}'}}\n  eventBus: {{enable: false}}\n  deviceTwin: {{dmiSockPath: '{dmi}'}}\n",
            data = edge_dir.join("data").display(),
            dmi = dmi.display(),
        );
        let config = edge_dir.join("edge.yaml");
        std::fs::write(&config, yaml).unwrap();
        let edge = Proc(spawn_bin(
            &edge_bin(),
            &["edge".into(), "--config".into(), config.display().to_string()],
            &dir.path().join("edge.log"),
        ));
        let mapper = Proc(spawn(
            &[
                "mapper".into(),
                protocol.into(),
                "--dmi-sock".into(),
                dmi.display().to_string(),
                "--sock".into(),
                dir.path().join("mapper.sock").display().to_string(),
            ],
            &dir.path().join("mapper.log"),
        ));
        let kc = kube::config::Kubeconfig::read_from(data.join("kubeconfig.yaml")).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let env = Env { mapper, edge, _cloud: cloud, client, edge_metrics, up_bytes, down_bytes, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while env.edge_metric("edgehive_edgehub_connected") != Some(1.0) {
            assert!(Instant::now() < deadline, "the edge did not connect; its log:\n{}", env.log("edge.log"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        env
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    fn devices(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "default", &resource("Device", "devices"))
    }

    async fn create(&self, kind: &str, plural: &str, obj: Value) {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), "default", &resource(kind, plural));
        api.create(&PostParams::default(), &serde_json::from_value(obj).unwrap()).await.unwrap();
    }

    fn edge_metrics(&self) -> HashMap<String, f64> {
        use std::io::{Read as _, Write as _};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.edge_metrics)) else { return HashMap::new() };
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n\r\n");
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        parse_metrics(&text)
    }

    fn edge_metric(&self, name: &str) -> Option<f64> {
        self.edge_metrics().get(name).copied()
    }

    async fn cloud_metrics(&self) -> HashMap<String, f64> {
        let req = http::Request::get("/metrics").body(Vec::new()).unwrap();
        parse_metrics(&self.client.request_text(req).await.unwrap())
    }
}

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("devices.kubeedge.io", "v1beta1", kind), plural)
}

fn parse_metrics(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            Some((it.next()?.to_owned(), it.next()?.parse().ok()?))
        })
        .collect()
}

/// A TCP proxy to `upstream` on loopback that counts the bytes each way.
async fn counting_proxy(upstream: u16, up: Arc<AtomicU64>, down: Arc<AtomicU64>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else { continue };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::spawn(pipe(ri, wo, up.clone()));
            tokio::spawn(pipe(ro, wi, down.clone()));
        }
    });
    port
}

async fn pipe(mut r: tokio::net::tcp::OwnedReadHalf, mut w: tokio::net::tcp::OwnedWriteHalf, n: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let k = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(k) => k,
        };
        n.fetch_add(k as u64, Ordering::Relaxed);
        if w.write_all(&buf[..k]).await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

// ---------------------------------------------------------------- /proc

fn clk_tck() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().ok();
    out.and_then(|o| String::from_utf8(o.stdout).ok()?.trim().parse().ok()).unwrap_or(100.0)
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// A `/proc/PID/status` line's value in KiB (VmRSS, VmHWM).
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status.lines().find(|l| l.starts_with(key)).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn percentiles(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (at(0.50), at(0.99), v[v.len() - 1])
}

/// A cheap jitter in 0..ms, so that the samples do not lock to a cycle.
fn jitter(ms: u64) -> Duration {
    let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64;
    Duration::from_millis(n % ms)
}

// ---------------------------------------------------------------- parts 1 and 2

fn modbus_device(port: u16) -> Value {
    let visitor = |offset: u16| {
        json!({"protocolName": "modbus",
        "configData": {"register": "HoldingRegister", "offset": offset, "limit": 1, "scale": 1}})
    };
    json!({
        "apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
        "metadata": {"name": "thermo", "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "deviceModelRef": {"name": "thermo-model"},
            "protocol": {"protocolName": "modbus", "configData": {"ip": "127.0.0.1", "port": port, "slaveID": 1}},
            "properties": properties_with(&visitor, "100"),
        }
    })
}

fn properties_with(visitor: &dyn Fn(u16) -> Value, desired: &str) -> Value {
    json!([
        {"name": "temperature", "collectCycle": 100, "reportCycle": 100, "visitors": visitor(0)},
        {"name": "humidity", "desired": {"value": desired}, "collectCycle": 100, "reportCycle": 100,
         "visitors": visitor(1)},
    ])
}

fn model(protocol: &str) -> Value {
    json!({
        "apiVersion": "devices.kubeedge.io/v1beta1", "kind": "DeviceModel",
        "metadata": {"name": "thermo-model", "namespace": "default"},
        "spec": {"protocol": protocol, "properties": [
            {"name": "temperature", "type": "INT", "accessMode": "ReadWrite"},
            {"name": "humidity", "type": "INT", "accessMode": "ReadWrite"},
        ]}
    })
}

fn reported(d: &DynamicObject, property: &str) -> Option<String> {
    let twins = d.data.pointer("/status/twins")?.as_array()?;
    let t = twins.iter().find(|t| t["propertyName"] == property)?;
    t.pointer("/reported/value")?.as_str().map(str::to_owned)
}

async fn latency_run(run: usize, patches: usize, reports: usize) {
    let env = Env::start("bench-devices-latency", "modbus").await;
    let device = Device::default();
    device.set_holding(0, 1);
    let stop = tokio_util::sync::CancellationToken::new();
    let (addr, _task) = serve("127.0.0.1:0".parse().unwrap(), device.clone(), stop.clone()).await.unwrap();
    env.create("DeviceModel", "devicemodels", model("modbus")).await;
    env.create("Device", "devices", modbus_device(addr.port())).await;

    // Every value the watch saw for the temperature, with when it first did.
    let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let watch = {
        let (api, seen) = (env.devices(), seen.clone());
        tokio::spawn(async move {
            let mut s = std::pin::pin!(kube::runtime::watcher(api, kube::runtime::watcher::Config::default()));
            while let Some(ev) = s.next().await {
                let now = Instant::now();
                if let Ok(kube::runtime::watcher::Event::Apply(o) | kube::runtime::watcher::Event::InitApply(o)) = ev
                    && let Some(v) = reported(&o, "temperature")
                {
                    seen.lock().unwrap().entry(v).or_insert(now);
                }
            }
        })
    };
    wait_for("the first value is reported", 60, || seen.lock().unwrap().contains_key("1")).await;
    wait_for("the first desired value is written", 60, || device.holding(1) == 100).await;

    if patches > 0 {
        let api = env.devices();
        let mut lat = Vec::with_capacity(patches);
        for i in 0..patches {
            let value = 200 + i as u16;
            let visitor = |offset: u16| {
                json!({"protocolName": "modbus",
                "configData": {"register": "HoldingRegister", "offset": offset, "limit": 1, "scale": 1}})
            };
            let patch = json!({"spec": {"properties": properties_with(&visitor, &value.to_string())}});
            api.patch("thermo", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
            let t0 = Instant::now();
            let deadline = t0 + Duration::from_secs(30);
            while device.holding(1) != value {
                assert!(
                    Instant::now() < deadline,
                    "register never took {value}; mapper log:\n{}",
                    env.log("mapper.log")
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            lat.push(t0.elapsed().as_secs_f64() * 1e3);
            tokio::time::sleep(Duration::from_millis(250) + jitter(100)).await;
        }
        let (p50, p99, max) = percentiles(lat);
        println!(
            "desired->device run {run}: n={patches} p50={p50:.1} ms p99={p99:.1} ms max={max:.1} ms (target p99 <= 100 ms)"
        );
    }

    if reports > 0 {
        let mut lat = Vec::with_capacity(reports);
        let writes0 = env.cloud_metrics().await.get("edgehive_devicecontroller_status_writes_total").copied();
        for i in 0..reports {
            let value = 1000 + i as u16;
            device.set_holding(0, value);
            let t0 = Instant::now();
            let key = value.to_string();
            let deadline = t0 + Duration::from_secs(30);
            let at = loop {
                if let Some(at) = seen.lock().unwrap().get(&key) {
                    break *at;
                }
                assert!(Instant::now() < deadline, "the API never showed {value}");
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            lat.push(at.saturating_duration_since(t0).as_secs_f64() * 1e3);
            tokio::time::sleep(Duration::from_millis(1200) + jitter(200)).await;
        }
        let writes1 = env.cloud_metrics().await.get("edgehive_devicecontroller_status_writes_total").copied();
        let (p50, p99, max) = percentiles(lat);
        println!(
            "device->API run {run}: n={reports} p50={p50:.1} ms p99={p99:.1} ms max={max:.1} ms (status writes during: {:?})",
            writes1.zip(writes0).map(|(a, b)| a - b)
        );
    }
    watch.abort();
    stop.cancel();
}

// ---------------------------------------------------------------- part 3

fn virtual_device(name: &str, changing: bool) -> Value {
    let config =
        if changing { json!({"min": 0, "max": 1000000, "dataType": "int"}) } else { json!({"min": 5, "max": 5}) };
    let visitor = json!({"protocolName": "virtualprotocol", "configData": config});
    json!({
        "apiVersion": "devices.kubeedge.io/v1beta1", "kind": "Device",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "deviceModelRef": {"name": "thermo-model"},
            "protocol": {"protocolName": "virtualprotocol"},
            "properties": [
                {"name": "temperature", "collectCycle": 1000, "reportCycle": 1000, "visitors": visitor},
                {"name": "humidity", "collectCycle": 1000, "reportCycle": 1000, "visitors": visitor},
            ],
        }
    })
}

async fn fleet_run(run: usize, n: usize, window: u64, changing: bool) {
    let variant = if changing { "changing" } else { "constant" };
    let env = Env::start("bench-devices-fleet", "virtualprotocol").await;
    env.create("DeviceModel", "devicemodels", model("virtualprotocol")).await;
    let t_create = Instant::now();
    let names: Vec<String> = (0..n).map(|i| format!("v-{i:05}")).collect();
    futures_util::stream::iter(
        names.iter().map(|name| env.create("Device", "devices", virtual_device(name, changing))),
    )
    .buffer_unordered(16)
    .collect::<Vec<()>>()
    .await;
    let created = t_create.elapsed();
    // All reporting: every device's both twins reported in the API.
    let api = env.devices();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let list = api.list(&Default::default()).await.unwrap();
        let done = list
            .items
            .iter()
            .filter(|d| reported(d, "temperature").is_some() && reported(d, "humidity").is_some())
            .count();
        if done == n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {done} of {n} devices reporting after 5 min; edge log:\n{}",
            env.log("edge.log")
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let reporting = t_create.elapsed();
    // Let the first full writes pass: the window starts in the steady state.
    tokio::time::sleep(Duration::from_secs(5)).await;

    let (edge_pid, mapper_pid) = (env.edge.0.id(), env.mapper.0.id());
    let tck = clk_tck();
    let e0 = env.edge_metrics();
    let c0 = env.cloud_metrics().await;
    let (up0, down0) = (env.up_bytes.load(Ordering::Relaxed), env.down_bytes.load(Ordering::Relaxed));
    let (ecpu0, mcpu0) = (cpu_ticks(edge_pid), cpu_ticks(mapper_pid));
    let t0 = Instant::now();
    let (mut edge_rss_max, mut mapper_rss_max) = (0, 0);
    let mut edge_rss_sum = 0;
    let mut samples = 0;
    while t0.elapsed() < Duration::from_secs(window) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let r = status_kib(edge_pid, "VmRSS:");
        edge_rss_max = edge_rss_max.max(r);
        edge_rss_sum += r;
        samples += 1;
        mapper_rss_max = mapper_rss_max.max(status_kib(mapper_pid, "VmRSS:"));
    }
    let secs = t0.elapsed().as_secs_f64();
    let (ecpu1, mcpu1) = (cpu_ticks(edge_pid), cpu_ticks(mapper_pid));
    let (up1, down1) = (env.up_bytes.load(Ordering::Relaxed), env.down_bytes.load(Ordering::Relaxed));
    let e1 = env.edge_metrics();
    let c1 = env.cloud_metrics().await;
    let edge_hwm = status_kib(edge_pid, "VmHWM:");
    let mapper_hwm = status_kib(mapper_pid, "VmHWM:");
    let d = |a: &HashMap<String, f64>, b: &HashMap<String, f64>, k: &str| {
        b.get(k).copied().unwrap_or(f64::NAN) - a.get(k).copied().unwrap_or(f64::NAN)
    };
    let rate = |x: f64| x / secs;
    let writes = d(&c0, &c1, "edgehive_devicecontroller_status_writes_total");
    println!(
        "fleet {variant} run {run}: {n} devices x 2 properties, created in {:.1} s, all reporting after {:.1} s; window {secs:.1} s",
        created.as_secs_f64(),
        reporting.as_secs_f64()
    );
    println!(
        "  edge:   RSS avg {:.1} MB max {:.1} MB, VmHWM {:.1} MB, CPU {:.1} % of one core",
        edge_rss_sum as f64 / samples.max(1) as f64 / 1024.0,
        edge_rss_max as f64 / 1024.0,
        edge_hwm as f64 / 1024.0,
        (ecpu1 - ecpu0) as f64 / tck / secs * 100.0
    );
    println!(
        "  mapper: RSS max {:.1} MB, VmHWM {:.1} MB, CPU {:.1} % of one core",
        mapper_rss_max as f64 / 1024.0,
        mapper_hwm as f64 / 1024.0,
        (mcpu1 - mcpu0) as f64 / tck / secs * 100.0
    );
    println!(
        "  edge->cloud: {:.1} msg/s (edgehub upstream), {:.0} B/s on the wire (TLS), cloud->edge {:.0} B/s; keepalives {:.2}/s, throttled {:.1}/s",
        rate(d(&e0, &e1, "edgehive_edgehub_upstream_total")),
        rate((up1 - up0) as f64),
        rate((down1 - down0) as f64),
        rate(d(&e0, &e1, "edgehive_edgehub_keepalives_total")),
        rate(d(&e0, &e1, "edgehive_edgehub_throttled_total")),
    );
    println!(
        "  DMI reports {:.0}/s, twin reports sent {:.1}/s, twin flushes {:.1}/s",
        rate(d(&e0, &e1, "edgehive_dmi_reports_total")),
        rate(d(&e0, &e1, "edgehive_twin_reports_sent_total")),
        rate(d(&e0, &e1, "edgehive_twin_flushes_total")),
    );
    println!(
        "  cloud: reports {:.1}/s, status writes {:.2}/s = {:.3} per device per 10 s, coalesced {:.1}/s (target when constant: <= 1 per device per 10 s)",
        rate(d(&c0, &c1, "edgehive_devicecontroller_reports_total")),
        rate(writes),
        rate(writes) * 10.0 / n as f64,
        rate(d(&c0, &c1, "edgehive_devicecontroller_coalesced_total")),
    );
    if std::env::var_os("BENCH_METRICS").is_some() {
        for (k, v) in &e1 {
            if k.contains("twin") || k.contains("dmi") || k.contains("edgehub") || k.contains("beehive") {
                println!("    edge {k} {v}");
            }
        }
    }
}
