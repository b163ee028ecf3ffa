//! The scenarios: a fleet brought up, something done to it or through the
//! API, and what the cloud and the fleet did in answer, measured.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::api::Api;
use crate::fleet::{Fleet, FleetConfig, provision};
use crate::report::{ProcSample, Report};
use crate::{SimError, limits};

/// How the cloud under test is reached besides the fleet's links.
pub struct Cloud {
    /// Its API.
    pub api: Arc<Api>,
    /// Its process, for memory and CPU (`None`: not measured).
    pub pid: Option<u32>,
    /// Kills the cloud (SIGKILL) and starts it again on the same data;
    /// its new process id (`None`: the sim cannot restart the cloud).
    pub restart: Option<Box<dyn Fn() -> Result<u32, SimError> + Send + Sync>>,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud").field("pid", &self.pid).finish_non_exhaustive()
    }
}

/// How a storm starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StormKind {
    /// Every node's connection breaks at once (a network flap).
    Disconnect,
    /// The cloud is killed with SIGKILL and started again.
    CloudRestart,
}

/// What to run.
#[derive(Debug, Clone)]
pub enum Scenario {
    /// Connect and stay idle for `duration`.
    Hold {
        /// The measured window.
        duration: Duration,
    },
    /// Create `per_node` pods per node at `rate` a second and wait for them
    /// to be Running.
    Pods {
        /// Pods per node.
        per_node: usize,
        /// Creates a second.
        rate: f64,
        /// Bind each pod to its node (`spec.nodeName`); else the scheduler
        /// places it.
        bind: bool,
    },
    /// One configmap used by every node, updated `writes` times, `interval` apart.
    Fanout {
        /// Updates.
        writes: usize,
        /// Between updates.
        interval: Duration,
    },
    /// Every node disconnects at once; how they come back.
    Storm {
        /// How.
        kind: StormKind,
        /// Pods per node put in place first (with a configmap each), so
        /// there is something that must not be sent again.
        per_node: usize,
    },
    /// Nodes join and leave continuously.
    Churn {
        /// Nodes replaced a second.
        rate: f64,
        /// For how long.
        duration: Duration,
    },
}

impl Scenario {
    /// The scenario's name.
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Hold { .. } => "hold",
            Scenario::Pods { .. } => "pods",
            Scenario::Fanout { .. } => "fanout",
            Scenario::Storm { .. } => "storm",
            Scenario::Churn { .. } => "churn",
        }
    }
}

/// Options every scenario shares.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Nodes in the fleet.
    pub nodes: usize,
    /// The namespace the scenario's objects go in (created if missing).
    pub namespace: String,
    /// Keep the namespace at the end (else it is deleted, with what the
    /// scenario made in it).
    pub keep: bool,
    /// How long bringing the fleet up (or a storm's return) may take.
    pub deadline: Duration,
    /// Print a progress line a second (to stderr).
    pub progress: bool,
}

/// Prints a line of progress.
fn say(opts: &RunOptions, line: String) {
    if opts.progress {
        eprintln!("{line}");
    }
}

/// The fleet's progress in one line.
fn status_line(start: Instant, fleet: &Fleet, nodes: usize, last: &mut (Instant, u64)) -> String {
    let s = fleet.stats();
    let objects = s.objects_received.load(Relaxed);
    let now = Instant::now();
    let rate = (objects - last.1) as f64 / now.duration_since(last.0).as_secs_f64().max(1e-3);
    *last = (now, objects);
    format!(
        "[{:>6.1}s] connected {}/{nodes}  dial failures {}  registered {}  objects {} ({rate:.0}/s)  pods started {}  resent unchanged {}",
        start.elapsed().as_secs_f64(),
        s.connected.load(Relaxed),
        fleet.link_metrics().dial_failures(),
        s.registered.load(Relaxed),
        objects,
        s.pods_started.load(Relaxed),
        s.unchanged_resent.load(Relaxed),
    )
}

/// Waits for `done` with a progress line a second; false at the deadline.
async fn wait_for(
    opts: &RunOptions,
    fleet: &Fleet,
    what: &str,
    deadline: Instant,
    mut done: impl FnMut() -> bool,
) -> bool {
    let start = Instant::now();
    let mut last = (start, fleet.stats().objects_received.load(Relaxed));
    let mut next_line = start + Duration::from_secs(1);
    loop {
        if done() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            say(opts, format!("{what}: not reached in time"));
            return false;
        }
        if now >= next_line {
            next_line = now + Duration::from_secs(1);
            say(opts, format!("{what}: {}", status_line(start, fleet, opts.nodes, &mut last)));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Runs `scenario` with a fleet of `opts.nodes` nodes configured by `cfg`
/// against `cloud`.
pub async fn run(scenario: Scenario, cfg: FleetConfig, opts: RunOptions, cloud: Cloud) -> Result<Report, SimError> {
    let limits = limits::check(opts.nodes, cfg.transport, &cfg.sources).map_err(SimError::Limit)?;
    for w in &limits.warnings {
        say(&opts, format!("note: {w}"));
    }
    let mut report = Report::new(scenario.name());
    report.add("nodes", "nodes", opts.nodes, "");
    report.add("transport", "transport", format!("{:?}", cfg.transport), "");
    let started = Instant::now();
    let certs = provision(&cfg, 0..opts.nodes, &|n| say(&opts, format!("certificates: {n}/{}", opts.nodes))).await?;
    report.num("certificates_s", "certificates ready after", started.elapsed().as_secs_f64(), 1, "s");
    let sim0 = ProcSample::own().unwrap_or_default();
    let cloud0 = cloud.pid.and_then(ProcSample::of);
    let up = Instant::now();
    let fleet = Fleet::start(cfg.clone(), 0, certs)?;
    let deadline = up + opts.deadline;
    let all = opts.nodes;
    let connected =
        wait_for(&opts, &fleet, "connecting", deadline, || fleet.stats().connected.load(Relaxed) >= all).await;
    report.num("connect_all_s", "all connected after", up.elapsed().as_secs_f64(), 2, "s");
    let registered =
        wait_for(&opts, &fleet, "registering", deadline, || fleet.stats().registered.load(Relaxed) >= all).await;
    report.num("register_all_s", "all registered after", up.elapsed().as_secs_f64(), 2, "s");
    if !connected || !registered {
        fleet.shutdown();
        return Err(SimError::Incomplete(format!(
            "{} of {all} nodes connected and {} registered within {:?}",
            fleet.stats().connected.load(Relaxed),
            fleet.stats().registered.load(Relaxed),
            opts.deadline
        )));
    }
    let sim1 = ProcSample::own().unwrap_or_default();
    report.num(
        "sim_kib_per_node",
        "simulator memory per node",
        (sim1.rss.saturating_sub(sim0.rss)) as f64 / 1024.0 / all as f64,
        1,
        "KiB",
    );
    if let (Some(before), Some(after)) = (cloud0, cloud.pid.and_then(ProcSample::of)) {
        report.num("cloud_rss_before_mib", "cloud RSS before the fleet", mib(before.rss), 1, "MiB");
        report.num("cloud_rss_mib", "cloud RSS with the fleet", mib(after.rss), 1, "MiB");
        report.num(
            "cloud_kib_per_node",
            "cloud memory per node",
            after.rss.saturating_sub(before.rss) as f64 / 1024.0 / all as f64,
            1,
            "KiB",
        );
    }
    let scenario_name = scenario.name();
    let result = match scenario {
        Scenario::Hold { duration } => hold(&fleet, &cloud, duration, &mut report).await,
        Scenario::Pods { per_node, rate, bind } => {
            pods(&fleet, &cfg, &opts, &cloud, per_node, rate, bind, &mut report).await.map(|_| ())
        }
        Scenario::Fanout { writes, interval } => {
            fanout(&fleet, &cfg, &opts, &cloud, writes, interval, &mut report).await
        }
        Scenario::Storm { kind, per_node } => storm(&fleet, &cfg, &opts, &cloud, kind, per_node, &mut report).await,
        Scenario::Churn { rate, duration } => churn(&fleet, &cfg, &opts, &cloud, rate, duration, &mut report).await,
    };
    let result = match result {
        Ok(()) => check_ready(&fleet, &cfg, &opts, &cloud, &mut report).await,
        Err(e) => Err(e),
    };
    if !opts.keep && matches!(scenario_name, "pods" | "fanout" | "storm") {
        let _ = cloud.api.call(Method::DELETE, &format!("/api/v1/namespaces/{}", opts.namespace), None).await;
    }
    fleet.shutdown();
    result.map(|()| report)
}

/// Bytes on the wire both ways, summed over the fleet's links.
fn wire(fleet: &Fleet) -> (u64, u64) {
    fleet.link_metrics().wire_bytes()
}

async fn hold(fleet: &Fleet, cloud: &Cloud, duration: Duration, report: &mut Report) -> Result<(), SimError> {
    let n = fleet.len().max(1) as f64;
    // Let the joins' writes (Node, status, Lease) settle first.
    tokio::time::sleep(Duration::from_secs(2).min(duration)).await;
    let (cpu0, sim0, wire0, connects0) = (
        cloud.pid.and_then(ProcSample::of),
        ProcSample::own().unwrap_or_default(),
        wire(fleet),
        fleet.stats().connects.load(Relaxed),
    );
    let t0 = Instant::now();
    tokio::time::sleep(duration).await;
    let secs = t0.elapsed().as_secs_f64();
    let (sent, received) = wire(fleet);
    report.num("window_s", "measured for", secs, 1, "s");
    report.num("up_bytes_per_node_s", "edge → cloud per node", (sent - wire0.0) as f64 / n / secs, 2, "B/s");
    report.num("down_bytes_per_node_s", "cloud → edge per node", (received - wire0.1) as f64 / n / secs, 2, "B/s");
    report.add("reconnects", "reconnections in the window", fleet.stats().connects.load(Relaxed) - connects0, "");
    if let (Some(a), Some(b)) = (cpu0, cloud.pid.and_then(ProcSample::of)) {
        report.num("cloud_cpu_percent", "cloud CPU (of one core)", (b.cpu - a.cpu) / secs * 100.0, 1, "%");
        report.num("cloud_cpu_us_per_node_s", "cloud CPU per node", (b.cpu - a.cpu) / secs / n * 1e6, 2, "µs/s");
        report.num("cloud_rss_end_mib", "cloud RSS at the end", mib(b.rss), 1, "MiB");
    }
    let sim1 = ProcSample::own().unwrap_or_default();
    report.num("sim_cpu_percent", "simulator CPU (of one core)", (sim1.cpu - sim0.cpu) / secs * 100.0, 1, "%");
    Ok(())
}

/// Makes sure `namespace` exists.
async fn namespace(api: &Api, namespace: &str) -> Result<(), SimError> {
    let (status, v) = api
        .call(
            Method::POST,
            "/api/v1/namespaces",
            Some(&json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace}})),
        )
        .await?;
    if status.is_success() || status == http::StatusCode::CONFLICT {
        Ok(())
    } else {
        Err(SimError::Api(format!("create namespace {namespace}: {status}: {}", v["message"])))
    }
}

/// Creates `objects` (path, body) at `rate` a second, up to 64 at once;
/// each create's latency, and the time each was sent, by name.
async fn create_paced(
    api: &Arc<Api>,
    objects: Vec<(String, Value)>,
    rate: f64,
    progress: bool,
) -> Result<(Vec<Duration>, HashMap<String, Instant>), SimError> {
    let permits = Arc::new(Semaphore::new(64));
    let gap = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut next = Instant::now();
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(objects.len())));
    let sent = Arc::new(Mutex::new(HashMap::with_capacity(objects.len())));
    let failed = Arc::new(Mutex::new(None));
    let mut tasks = Vec::with_capacity(objects.len());
    let (total, start) = (objects.len(), Instant::now());
    let mut next_line = start + Duration::from_secs(1);
    for (k, (path, body)) in objects.into_iter().enumerate() {
        tokio::time::sleep_until(next).await;
        next += gap;
        if progress && Instant::now() >= next_line {
            next_line += Duration::from_secs(1);
            eprintln!("creating: [{:>6.1}s] {k}/{total}", start.elapsed().as_secs_f64());
        }
        let permit = Arc::clone(&permits).acquire_owned().await.map_err(|_| SimError::Api("closed".into()))?;
        let (api, latencies, sent, failed) = (api.clone(), latencies.clone(), sent.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = permit;
            let name = body["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let t = Instant::now();
            sent.lock().unwrap_or_else(|p| p.into_inner()).insert(name, t);
            match api.expect(Method::POST, &path, Some(&body)).await {
                Ok(_) => latencies.lock().unwrap_or_else(|p| p.into_inner()).push(t.elapsed()),
                Err(e) => *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e),
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    if let Some(e) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    let latencies = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
    let sent = std::mem::take(&mut *sent.lock().unwrap_or_else(|p| p.into_inner()));
    Ok((latencies, sent))
}

/// The collection's current resourceVersion, to watch from.
async fn list_version(api: &Api, path: &str) -> Result<String, SimError> {
    let v = api.expect(Method::GET, &format!("{path}?limit=1"), None).await?;
    Ok(v["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned())
}

/// When each pod of `namespace` was first seen Running, by name, from a
/// watch started at `from`, filled in until `stop`.
type RunningAt = Arc<Mutex<HashMap<String, Instant>>>;

fn watch_running(
    api: Arc<Api>,
    namespace: String,
    from: String,
    stop: tokio_util::sync::CancellationToken,
) -> (RunningAt, tokio::task::JoinHandle<Result<(), SimError>>) {
    let running: RunningAt = Arc::default();
    let into = Arc::clone(&running);
    let task = tokio::spawn(async move {
        let path = format!("/api/v1/namespaces/{namespace}/pods?watch=1&resourceVersion={from}");
        let mut watch = api.watch(&path).await?;
        loop {
            let ev = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                ev = watch.next() => ev,
            };
            let Some(ev) = ev else {
                return Err(SimError::Api("the pods watch ended".into()));
            };
            let o = &ev["object"];
            if o["status"]["phase"] == "Running"
                && let Some(name) = o["metadata"]["name"].as_str()
            {
                into.lock().unwrap_or_else(|p| p.into_inner()).entry(name.to_owned()).or_insert_with(Instant::now);
            }
        }
    });
    (running, task)
}

fn pod_body(name: &str, namespace: &str, node: Option<&str>, configmap: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "edgehive-sim"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}],
            "tolerations": [{"operator": "Exists"}]}});
    if let Some(n) = node {
        pod["spec"]["nodeName"] = json!(n);
    }
    if let Some(cm) = configmap {
        pod["spec"]["volumes"] = json!([{"name": "config", "configMap": {"name": cm}}]);
    }
    pod
}

/// Creates `per_node` pods per node (bound, or left to the scheduler) at
/// `rate` and waits until all are Running; the pods' names.
#[allow(clippy::too_many_arguments)]
async fn pods(
    fleet: &Fleet,
    cfg: &FleetConfig,
    opts: &RunOptions,
    cloud: &Cloud,
    per_node: usize,
    rate: f64,
    bind: bool,
    report: &mut Report,
) -> Result<Vec<String>, SimError> {
    namespace(&cloud.api, &opts.namespace).await?;
    let base = format!("/api/v1/namespaces/{}/pods", opts.namespace);
    let from = list_version(&cloud.api, &base).await?;
    let stop = tokio_util::sync::CancellationToken::new();
    let (running, watcher) = watch_running(Arc::clone(&cloud.api), opts.namespace.clone(), from, stop.clone());
    let mut objects = Vec::with_capacity(opts.nodes * per_node);
    for j in 0..per_node {
        for i in 0..opts.nodes {
            let node = cfg.node_name(i);
            let name = format!("{node}-p{j}");
            let body = pod_body(&name, &opts.namespace, bind.then_some(node.as_str()), None);
            objects.push((base.clone(), body));
        }
    }
    let total = objects.len();
    let names: Vec<String> =
        objects.iter().filter_map(|(_, b)| b["metadata"]["name"].as_str().map(str::to_owned)).collect();
    let cpu0 = cloud.pid.and_then(ProcSample::of);
    let started0 = fleet.stats().pods_started.load(Relaxed);
    let t0 = Instant::now();
    let (mut api_latency, sent) = create_paced(&cloud.api, objects, rate, opts.progress).await?;
    let created_s = t0.elapsed().as_secs_f64();
    let deadline = Instant::now() + opts.deadline;
    let reached =
        wait_for(opts, fleet, "pods", deadline, || fleet.stats().pods_started.load(Relaxed) - started0 >= total as u64)
            .await;
    // The API sees Running a little after the edges report it (failing
    // pods never run).
    let expect_running = if cfg.behaviour.fail_percent == 0 { total } else { 0 };
    let settle = Instant::now() + Duration::from_secs(60);
    while Instant::now() < settle && !watcher.is_finished() {
        if running.lock().unwrap_or_else(|p| p.into_inner()).len() >= expect_running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    watcher.await.map_err(|e| SimError::Api(format!("pods watch: {e}")))??;
    let running = std::mem::take(&mut *running.lock().unwrap_or_else(|p| p.into_inner()));
    let seen = running.len();
    let mut start: Vec<Duration> =
        sent.iter().filter_map(|(name, t)| running.get(name).map(|r| r.saturating_duration_since(*t))).collect();
    report.add("pods", "pods created", total, "");
    report.num("create_rate", "create rate achieved", total as f64 / created_s.max(1e-3), 1, "/s");
    report.add("pods_running", "pods Running in the API", seen, "");
    report.tail("pod_start", "pod start (create → Running in the API)", &mut start);
    report.tail("api_create", "API create", &mut api_latency);
    if let (Some(a), Some(b)) = (cpu0, cloud.pid.and_then(ProcSample::of)) {
        let secs = t0.elapsed().as_secs_f64();
        report.num(
            "cloud_cpu_percent",
            "cloud CPU during the run (of one core)",
            (b.cpu - a.cpu) / secs * 100.0,
            1,
            "%",
        );
        report.num("cloud_rss_end_mib", "cloud RSS at the end", mib(b.rss), 1, "MiB");
    }
    if !reached {
        return Err(SimError::Incomplete(format!(
            "{} of {total} pods started on the simulated nodes within {:?}",
            fleet.stats().pods_started.load(Relaxed) - started0,
            opts.deadline
        )));
    }
    Ok(names)
}

async fn fanout(
    fleet: &Fleet,
    cfg: &FleetConfig,
    opts: &RunOptions,
    cloud: &Cloud,
    writes: usize,
    interval: Duration,
    report: &mut Report,
) -> Result<(), SimError> {
    let Some(receipts) = fleet.receipts() else {
        return Err(SimError::Config("fanout needs the fleet to record its configmap".into()));
    };
    let (ns, cm) = cfg.record_configmap.clone().unwrap_or_else(|| (opts.namespace.clone(), "sim-fanout".into()));
    namespace(&cloud.api, &ns).await?;
    tracing::debug!(%ns, "fanout: namespace ready");
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut current = match cloud.api.call(Method::GET, &format!("{cms}/{cm}"), None).await? {
        (s, v) if s.is_success() => v,
        _ => {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm, "namespace": ns},
                "data": {"v": "0"}});
            cloud.api.expect(Method::POST, &cms, Some(&body)).await?
        }
    };
    // One pod per node uses it.
    let base = format!("/api/v1/namespaces/{ns}/pods");
    let objects: Vec<(String, Value)> = (0..opts.nodes)
        .map(|i| {
            let node = cfg.node_name(i);
            (base.clone(), pod_body(&format!("{node}-fanout"), &ns, Some(&node), Some(&cm)))
        })
        .collect();
    let received0 = fleet.stats().objects_received.load(Relaxed);
    tracing::debug!(pods = objects.len(), "fanout: creating the pods that use the configmap");
    let (_, _) = create_paced(&cloud.api, objects, 500.0, opts.progress).await?;
    tracing::debug!("fanout: pods created");
    let all = opts.nodes;
    // Every node holds the configmap and its pod.
    let deadline = Instant::now() + opts.deadline;
    wait_for(opts, fleet, "placing", deadline, || {
        fleet.stats().objects_received.load(Relaxed) - received0 >= 2 * all as u64
    })
    .await;
    receipts.take();
    let mut written: HashMap<u64, (Instant, Instant)> = HashMap::new();
    let t0 = Instant::now();
    for w in 0..writes {
        tokio::time::sleep_until(t0 + interval * w as u32).await;
        // Each update changes the data (an update to the same data is no
        // write at all).
        current["data"] = json!({"v": format!("{}-{w}", fastrand::u64(..))});
        let t = Instant::now();
        current = cloud.api.expect(Method::PUT, &format!("{cms}/{cm}"), Some(&current)).await?;
        let rv = current["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
        written.insert(rv, (t, Instant::now()));
    }
    let expected = writes * all;
    let deadline = Instant::now() + opts.deadline;
    let mut got: Vec<(u64, Instant)> = Vec::new();
    let mut next_line = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        got.extend(receipts.take());
        let arrived = got.iter().filter(|(rv, _)| written.contains_key(rv)).count();
        if arrived >= expected {
            break;
        }
        if Instant::now() >= next_line {
            next_line += Duration::from_secs(1);
            say(opts, format!("fanout: {arrived} of {expected} deliveries"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    got.extend(receipts.take());
    let (mut lat, mut after): (Vec<Duration>, Vec<Duration>) = got
        .iter()
        .filter_map(|(rv, at)| {
            written.get(rv).map(|(t, a)| (at.saturating_duration_since(*t), at.saturating_duration_since(*a)))
        })
        .unzip();
    let last = got.iter().map(|(_, at)| *at).max().unwrap_or(t0);
    report.add("writes", "configmap updates", writes, "");
    report.add("deliveries", "deliveries", lat.len(), "");
    report.add("expected", "deliveries expected", expected, "");
    report.num(
        "deliveries_per_s",
        "deliveries a second",
        lat.len() as f64 / last.saturating_duration_since(t0).as_secs_f64().max(1e-3),
        0,
        "/s",
    );
    report.tail("write_edge", "write → edge", &mut lat);
    report.tail("answer_edge", "write answered → edge", &mut after);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn storm(
    fleet: &Fleet,
    cfg: &FleetConfig,
    opts: &RunOptions,
    cloud: &Cloud,
    kind: StormKind,
    per_node: usize,
    report: &mut Report,
) -> Result<(), SimError> {
    if kind == StormKind::CloudRestart && cloud.restart.is_none() {
        return Err(SimError::Config(
            "a cloud-restart storm needs a cloud the simulator started (--spawn-cloud)".into(),
        ));
    }
    if per_node > 0 {
        pods(fleet, cfg, opts, cloud, per_node, 500.0, true, &mut Report::default()).await?;
        report.add("pods", "pods in place", per_node * opts.nodes, "");
    }
    // Quiet first: every ACK in, every point recorded.
    let quiet = Instant::now() + Duration::from_secs(60);
    let mut last = fleet.stats().objects_received.load(Relaxed);
    let mut still = Instant::now();
    while Instant::now() < quiet && still.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = fleet.stats().objects_received.load(Relaxed);
        if now != last {
            (last, still) = (now, Instant::now());
        }
    }
    let s = fleet.stats();
    let (connects0, received0, unchanged0) =
        (s.connects.load(Relaxed), s.objects_received.load(Relaxed), s.unchanged_resent.load(Relaxed));
    let all = opts.nodes as u64;
    // A restarted cloud counts from zero.
    let handshakes0 = match kind {
        StormKind::Disconnect => handshake_outcomes(&cloud.api).await,
        StormKind::CloudRestart => HANDSHAKE_OUTCOMES.iter().map(|_| Some(0.0)).collect(),
    };
    let mut pid = cloud.pid;
    let t0 = Instant::now();
    match kind {
        StormKind::Disconnect => fleet.break_all_links(),
        StormKind::CloudRestart => {
            if let Some(restart) = &cloud.restart {
                pid = Some(restart()?);
            }
        }
    }
    // Back: every node connected again since the storm.
    let deadline = t0 + opts.deadline;
    let mut peak = 0u64;
    let mut back = None;
    let mut next_line = Instant::now() + Duration::from_secs(1);
    let mut line = (t0, received0);
    while Instant::now() < deadline {
        if let Some(p) = pid.and_then(ProcSample::of) {
            peak = peak.max(p.rss);
        }
        if s.connects.load(Relaxed) - connects0 >= all && s.connected.load(Relaxed) as u64 >= all {
            back = Some(t0.elapsed());
            break;
        }
        if Instant::now() >= next_line {
            next_line += Duration::from_secs(1);
            say(opts, format!("storm: {}", status_line(t0, fleet, opts.nodes, &mut line)));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // What the reconnections cost once they settle.
    let settle = Instant::now() + Duration::from_secs(20);
    let mut last = s.objects_received.load(Relaxed);
    let mut still = Instant::now();
    while Instant::now() < settle && still.elapsed() < Duration::from_secs(5) {
        if let Some(p) = pid.and_then(ProcSample::of) {
            peak = peak.max(p.rss);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = s.objects_received.load(Relaxed);
        if now != last {
            (last, still) = (now, Instant::now());
        }
    }
    report.add("kind", "storm", format!("{kind:?}"), "");
    match back {
        Some(d) => report.num("all_back_s", "all connected again after", d.as_secs_f64(), 2, "s"),
        None => report.add("all_back_s", "all connected again after", "never", ""),
    }
    report.add("connected", "connected at the end", s.connected.load(Relaxed), "");
    let received = s.objects_received.load(Relaxed) - received0;
    let unchanged = s.unchanged_resent.load(Relaxed) - unchanged0;
    report.add("objects_resent", "objects sent after the storm", received, "");
    report.add("unchanged_resent", "of which the node already had", unchanged, "");
    report.num("unchanged_per_node", "unchanged objects resent per node", unchanged as f64 / all as f64, 3, "");
    if peak > 0 {
        report.num("cloud_peak_rss_mib", "cloud peak RSS during the storm", mib(peak), 1, "MiB");
    }
    // What the server made of the reconnections (when its metrics answer).
    let handshakes = handshake_outcomes(&cloud.api).await;
    for ((key, label, _, _), (before, after)) in HANDSHAKE_OUTCOMES.iter().zip(handshakes0.iter().zip(&handshakes)) {
        if let (Some(b), Some(a)) = (before, after) {
            report.add(key, label, (a - b).max(0.0) as u64, "");
        }
    }
    if back.is_none() {
        return Err(SimError::Incomplete(format!(
            "{} of {all} nodes connected again within {:?}",
            s.connected.load(Relaxed),
            opts.deadline
        )));
    }
    Ok(())
}

/// The cloud's handshake counters a storm report shows: report key, label,
/// metric and the label its samples must carry (summed over transports).
const HANDSHAKE_OUTCOMES: [(&str, &str, &str, &str); 9] = [
    ("handshakes_accepted", "cloud: handshakes completed", "edgehive_viaduct_handshakes_total", "result=\"accepted\""),
    (
        "handshakes_refused",
        "cloud: refused, server behind",
        "edgehive_viaduct_handshakes_total",
        "result=\"refused_overload\"",
    ),
    ("handshakes_timed_out", "cloud: past the deadline", "edgehive_viaduct_handshakes_total", "result=\"timeout\""),
    (
        "handshakes_evicted_budget",
        "cloud: given up for a new one (slow)",
        "edgehive_viaduct_handshakes_evicted_total",
        "limit=\"budget\"",
    ),
    (
        "handshakes_evicted_source",
        "cloud: evicted, source at its limit",
        "edgehive_viaduct_handshakes_evicted_total",
        "limit=\"source\"",
    ),
    (
        "handshakes_evicted_server",
        "cloud: evicted, server at its limit",
        "edgehive_viaduct_handshakes_evicted_total",
        "limit=\"server\"",
    ),
    ("quic_retries", "cloud: QUIC Retries", "edgehive_viaduct_quic_retries_total", "transport=\"quic\""),
    (
        "quic_deferred",
        "cloud: QUIC dials left to retransmit",
        "edgehive_viaduct_quic_deferred_total",
        "transport=\"quic\"",
    ),
    ("tls_resumed", "cloud: TLS sessions resumed", "edgehive_viaduct_tls_resumed_total", "transport="),
];

/// [`HANDSHAKE_OUTCOMES`] now (`None` each: the metrics did not answer).
async fn handshake_outcomes(api: &Api) -> Vec<Option<f64>> {
    let mut out = Vec::with_capacity(HANDSHAKE_OUTCOMES.len());
    for (_, _, metric, label) in HANDSHAKE_OUTCOMES {
        out.push(api.metric(metric, &[label]).await.ok().map(|v| v.unwrap_or(0.0)));
    }
    out
}

async fn churn(
    fleet: &Fleet,
    cfg: &FleetConfig,
    opts: &RunOptions,
    cloud: &Cloud,
    rate: f64,
    duration: Duration,
    report: &mut Report,
) -> Result<(), SimError> {
    let gap = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let mut live: Vec<usize> = (0..opts.nodes).collect();
    let mut next_index = opts.nodes;
    let t0 = Instant::now();
    let mut joins = Vec::new();
    let registered0 = fleet.stats().registered.load(Relaxed);
    let mut peak = 0u64;
    let rss0 = cloud.pid.and_then(ProcSample::of).map(|p| p.rss);
    let mut replaced = 0usize;
    let mut removed = std::collections::HashSet::new();
    let mut next = t0;
    while t0.elapsed() < duration {
        next += gap;
        tokio::time::sleep_until(next).await;
        // One leaves: its link closes and its Node is deleted. It is one
        // that registered: a node stopped before its registration reached
        // the cloud may still create its Node after the delete.
        let Some(at) = (0..32).map(|_| fastrand::usize(0..live.len())).find(|&at| fleet.is_registered(live[at])) else {
            continue;
        };
        let victim = live.swap_remove(at);
        fleet.stop_node(victim);
        let name = cfg.node_name(victim);
        let (status, _) = cloud.api.call(Method::DELETE, &format!("/api/v1/nodes/{name}"), None).await?;
        if !status.is_success() && status != http::StatusCode::NOT_FOUND {
            return Err(SimError::Api(format!("delete node {name}: {status}")));
        }
        removed.insert(name);
        // One joins: a certificate from the join service, then its link.
        let i = next_index;
        next_index += 1;
        let joined = Instant::now();
        let certs = provision(cfg, i..i + 1, &|_| {}).await?;
        if let Some(c) = certs.into_iter().next() {
            fleet.add_node(i, c);
        }
        live.push(i);
        joins.push(joined);
        replaced += 1;
        if let Some(p) = cloud.pid.and_then(ProcSample::of) {
            peak = peak.max(p.rss);
        }
    }
    let deadline = Instant::now() + opts.deadline;
    let want = registered0 + replaced;
    let done = wait_for(opts, fleet, "churn", deadline, || fleet.stats().registered.load(Relaxed) >= want).await;
    let left = nodes_in_api(cloud).await?.into_iter().filter(|(n, _)| removed.contains(n)).count();
    report.add("removed_left", "removed nodes still in the API", left, "");
    report.add("replaced", "nodes replaced", replaced, "");
    report.num("rate", "replacements a second", replaced as f64 / t0.elapsed().as_secs_f64(), 1, "/s");
    report.add("connected", "connected at the end", fleet.stats().connected.load(Relaxed), "");
    report.add("registered_new", "new nodes registered", fleet.stats().registered.load(Relaxed) - registered0, "");
    if let (Some(before), Some(after)) = (rss0, cloud.pid.and_then(ProcSample::of)) {
        report.num("cloud_rss_start_mib", "cloud RSS at the start", mib(before), 1, "MiB");
        report.num("cloud_rss_end_mib", "cloud RSS at the end", mib(after.rss), 1, "MiB");
        report.num("cloud_peak_rss_mib", "cloud peak RSS", mib(peak.max(after.rss)), 1, "MiB");
    }
    if !done {
        return Err(SimError::Incomplete(format!(
            "{replaced} nodes joined, not all registered within {:?}",
            opts.deadline
        )));
    }
    if left > 0 {
        return Err(SimError::Incomplete(format!("{left} deleted nodes are back in the API")));
    }
    Ok(())
}

/// Nodes listed per request.
const NODES_PAGE: usize = 128;

/// The nodes in the API, and whether each is Ready (listed in pages: a
/// fleet's Nodes are more than one answer may hold).
async fn nodes_in_api(cloud: &Cloud) -> Result<HashMap<String, bool>, SimError> {
    let mut out = HashMap::new();
    let mut token = String::new();
    loop {
        let path = if token.is_empty() {
            format!("/api/v1/nodes?limit={NODES_PAGE}")
        } else {
            format!("/api/v1/nodes?limit={NODES_PAGE}&continue={token}")
        };
        let list = cloud.api.expect(Method::GET, &path, None).await?;
        for n in list["items"].as_array().map(Vec::as_slice).unwrap_or_default() {
            let Some(name) = n.pointer("/metadata/name").and_then(Value::as_str) else { continue };
            let ready = n
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
            out.insert(name.to_owned(), ready);
        }
        match list.pointer("/metadata/continue").and_then(Value::as_str) {
            Some(t) if !t.is_empty() => token = t.to_owned(),
            _ => return Ok(out),
        }
    }
}

/// At the end of a scenario every node the fleet runs is Ready in the API:
/// none was left behind (lost its Node, or was marked NotReady while
/// connected). Waits for it until the deadline.
async fn check_ready(
    fleet: &Fleet,
    cfg: &FleetConfig,
    opts: &RunOptions,
    cloud: &Cloud,
    report: &mut Report,
) -> Result<(), SimError> {
    let running: Vec<String> = fleet.running().into_iter().map(|(i, _)| cfg.node_name(i)).collect();
    let deadline = Instant::now() + opts.deadline;
    loop {
        let nodes = nodes_in_api(cloud).await?;
        let ready = running.iter().filter(|n| nodes.get(n.as_str()).copied().unwrap_or(false)).count();
        if ready == running.len() || Instant::now() >= deadline {
            report.add("ready_at_end", "nodes Ready in the API at the end", format!("{ready}/{}", running.len()), "");
            if ready < running.len() {
                let missing: Vec<&str> = running
                    .iter()
                    .filter(|n| !nodes.get(n.as_str()).copied().unwrap_or(false))
                    .take(5)
                    .map(String::as_str)
                    .collect();
                return Err(SimError::Incomplete(format!(
                    "{} of {} running nodes are not Ready in the API (e.g. {})",
                    running.len() - ready,
                    running.len(),
                    missing.join(", ")
                )));
            }
            return Ok(());
        }
        say(opts, format!("ready: {ready}/{} nodes Ready in the API", running.len()));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
