//! One pod: a supervisor task per container (start, wait, restart by the
//! pod's `restartPolicy` with exponential back-off, stop with the grace
//! period), and the pod's status built from their states.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cgroup::Limits;
use crate::config::{CONFIG_ERROR, ConfigReader, EnvPlan};
use crate::events::{Note, PodRef, Recorder};
use crate::probe::Probe;
use crate::runtime::{Container, ContainerSpec, Exit, PodInfo, Runtime, RuntimeError, Sandbox};

/// Restart back-off: kubelet's 10 s doubling to 5 min, reset after a
/// container ran 10 min.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// First delay.
    pub base: Duration,
    /// Largest delay.
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { base: Duration::from_secs(10), cap: Duration::from_secs(300) }
    }
}

/// A container's state, as `containerStatuses[].state` shows it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    Waiting { reason: String, message: String },
    Running { started: String },
    Terminated { code: i32, signal: Option<i32>, reason: String, started: String, finished: String },
}

#[derive(Debug, Clone)]
pub(crate) struct ContainerStatus {
    name: String,
    image: String,
    state: State,
    last: Option<State>,
    restarts: u32,
    /// The runtime's id of the running container.
    container_id: Option<String>,
    /// Limits asked for but not enforced.
    notes: Vec<String>,
    /// The readiness probe's verdict (`None`: no readiness probe, ready
    /// while running).
    ready: Option<bool>,
    /// The running attempt (for exec and attach).
    pub(crate) live: Option<Live>,
    /// The log of the latest attempt, and of the one before it.
    pub(crate) log: Option<PathBuf>,
    pub(crate) previous_log: Option<PathBuf>,
}

/// A container attempt that is running: what streams reach.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(crate) container: Arc<dyn Container>,
}

impl ContainerStatus {
    /// A container not started yet (`ContainerCreating`).
    fn new(name: String, image: String) -> ContainerStatus {
        ContainerStatus {
            name,
            image,
            state: State::Waiting { reason: "ContainerCreating".into(), message: String::new() },
            last: None,
            restarts: 0,
            container_id: None,
            notes: Vec::new(),
            ready: None,
            live: None,
            log: None,
            previous_log: None,
        }
    }

    /// The container's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Why the container is not running now, in kubelet's words (`None`
    /// while it runs).
    pub(crate) fn waiting_reason(&self) -> Option<String> {
        match &self.state {
            State::Running { .. } => None,
            State::Waiting { reason, .. } => Some(reason.clone()),
            State::Terminated { reason, .. } => Some(reason.clone()),
        }
    }

    fn is_ready(&self) -> bool {
        matches!(self.state, State::Running { .. }) && self.ready.unwrap_or(true)
    }
}

/// What the pod's containers are doing, shared with the edged loop.
#[derive(Debug)]
pub(crate) struct PodState {
    pub(crate) containers: Vec<ContainerStatus>,
    pub(crate) start_time: String,
    restart_policy: String,
    /// The sandbox's IP, once it runs.
    pub(crate) pod_ip: Option<String>,
    /// Where the node reaches the pod's ports (loopback for a pod on the
    /// host's network), once its sandbox runs.
    pub(crate) reach: Option<String>,
}

pub(crate) fn now() -> String {
    let t = time::OffsetDateTime::now_utc();
    t.replace_nanosecond(0).unwrap_or(t).format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

fn state_json(s: &State) -> Value {
    match s {
        State::Waiting { reason, message } => json!({"waiting": {"reason": reason, "message": message}}),
        State::Running { started } => json!({"running": {"startedAt": started}}),
        State::Terminated { code, signal, reason, started, finished } => {
            let mut t = json!({"exitCode": code, "reason": reason, "startedAt": started, "finishedAt": finished});
            if let Some(sig) = signal {
                t["signal"] = json!(sig);
            }
            json!({"terminated": t})
        }
    }
}

impl PodState {
    /// `status.phase`, as kubelet decides it.
    pub(crate) fn phase(&self) -> &'static str {
        let all_terminated = self.containers.iter().all(|c| matches!(c.state, State::Terminated { .. }));
        let all_ok = self.containers.iter().all(|c| matches!(c.state, State::Terminated { code: 0, .. }));
        let never_ran = self
            .containers
            .iter()
            .all(|c| c.restarts == 0 && c.last.is_none() && matches!(c.state, State::Waiting { .. }));
        if self.containers.is_empty() || never_ran {
            return "Pending";
        }
        if all_terminated {
            return match (self.restart_policy.as_str(), all_ok) {
                (_, true) => "Succeeded",
                ("Never", false) => "Failed",
                _ => "Running",
            };
        }
        "Running"
    }

    /// The pod's `status` for the cloud.
    pub(crate) fn status(&self, host_ip: &str) -> Value {
        let ready = !self.containers.is_empty() && self.containers.iter().all(ContainerStatus::is_ready);
        let t = now();
        let cond = |ty: &str, ok: bool| {
            let mut c = json!({"type": ty, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": t});
            if !ok && (ty == "Ready" || ty == "ContainersReady") {
                let waiting: Vec<&str> =
                    self.containers.iter().filter(|c| !c.is_ready()).map(|c| c.name.as_str()).collect();
                c["reason"] = json!("ContainersNotReady");
                c["message"] = json!(format!("containers with unready status: [{}]", waiting.join(" ")));
            }
            c
        };
        let statuses: Vec<Value> = self
            .containers
            .iter()
            .map(|c| {
                let mut s = json!({
                    "name": c.name, "image": c.image, "imageID": "",
                    "state": state_json(&c.state),
                    "lastState": c.last.as_ref().map_or(json!({}), state_json),
                    "ready": c.is_ready(),
                    "started": matches!(c.state, State::Running { .. }),
                    "restartCount": c.restarts,
                });
                if let Some(id) = &c.container_id {
                    s["containerID"] = json!(id);
                }
                s
            })
            .collect();
        let mut conditions = vec![
            cond("Initialized", true),
            cond("Ready", ready),
            cond("ContainersReady", ready),
            cond("PodScheduled", true),
        ];
        let notes: Vec<String> =
            self.containers.iter().flat_map(|c| c.notes.iter().map(move |n| format!("{}: {n}", c.name))).collect();
        if !notes.is_empty() {
            // Limits asked for but not enforced: said where `kubectl describe pod` shows it.
            conditions.push(json!({
                "type": LIMITS_CONDITION, "status": "False", "reason": "NotEnforced",
                "message": notes.join("; "), "lastProbeTime": null, "lastTransitionTime": t,
            }));
        }
        let mut status = json!({
            "phase": self.phase(),
            "conditions": conditions,
            "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
            "startTime": self.start_time,
            "containerStatuses": statuses,
        });
        if let Some(ip) = &self.pod_ip {
            status["podIP"] = json!(ip);
            status["podIPs"] = json!([{"ip": ip}]);
        }
        status
    }
}

/// What a simulated pod's containers are doing (`edgehive sim`): no
/// runtime runs them, but their status is reported as edged reports a real
/// pod's, with the same builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simulated {
    /// Every container runs.
    Running,
    /// Every container has exited with this code (after `restarts`
    /// restarts): with `restartPolicy: Never` the pod has Failed (or
    /// Succeeded on 0), otherwise it is waiting to start again.
    Exited(i32),
}

/// The `status` edged would report for `pod` (its containers from the
/// spec) whose containers are in `state` since `started` (RFC 3339), each
/// restarted `restarts` times, on a node at `host_ip`.
pub fn simulated_status(
    pod: &serde_json::Value,
    state: Simulated,
    restarts: u32,
    host_ip: &str,
    started: &str,
) -> Value {
    let spec = &pod["spec"];
    let exited = |code: i32| State::Terminated {
        code,
        signal: None,
        reason: if code == 0 { "Completed".into() } else { "Error".into() },
        started: started.to_owned(),
        finished: started.to_owned(),
    };
    let containers = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut s = ContainerStatus::new(
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["image"].as_str().unwrap_or_default().to_owned(),
            );
            s.state = match state {
                Simulated::Running => State::Running { started: started.to_owned() },
                Simulated::Exited(code) => exited(code),
            };
            s.restarts = restarts;
            if restarts > 0 {
                s.last = Some(exited(1));
            }
            s
        })
        .collect();
    let podstate = PodState {
        containers,
        start_time: started.to_owned(),
        restart_policy: spec["restartPolicy"].as_str().unwrap_or("Always").to_owned(),
        pod_ip: None,
        reach: None,
    };
    podstate.status(host_ip)
}

/// The pod condition that says which CPU/memory limits are not enforced.
pub const LIMITS_CONDITION: &str = "edgehive.io/ResourceLimits";

/// Where a pod lives on disk, and how its containers run.
#[derive(Debug, Clone)]
pub(crate) struct PodEnv {
    pub(crate) dir: PathBuf,
    pub(crate) backoff: Backoff,
    pub(crate) node: String,
    pub(crate) node_ip: String,
    pub(crate) runtime: Arc<dyn Runtime>,
    /// Where configmaps and secrets are read.
    pub(crate) config: ConfigReader,
    /// Moves when edged is passed a configmap or secret: whatever waits
    /// for one tries again at once.
    pub(crate) config_changed: tokio::sync::watch::Receiver<u64>,
    /// Where the pod's Events are recorded.
    pub(crate) events: Recorder,
}

/// A running pod: its state and how to stop it.
#[derive(Debug)]
pub(crate) struct PodHandle {
    pub(crate) uid: String,
    pub(crate) state: Arc<Mutex<PodState>>,
    stop: CancellationToken,
    detach: CancellationToken,
    grace: Arc<Mutex<Duration>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Each container's image: a change restarts that container with it.
    images: Vec<tokio::sync::watch::Sender<String>>,
}

impl PodHandle {
    /// Stops every container (SIGTERM, then SIGKILL after `grace`) and waits.
    pub(crate) async fn stop(mut self, grace: Duration) {
        *self.grace.lock().unwrap_or_else(|p| p.into_inner()) = grace;
        self.stop.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    /// Applies an update of the pod: a container whose `image` changed is
    /// stopped and started again with the new image (the only container
    /// field Kubernetes lets an update change).
    pub(crate) fn update(&self, pod: &Value) {
        for (tx, c) in self.images.iter().zip(pod["spec"]["containers"].as_array().into_iter().flatten()) {
            let image = c["image"].as_str().unwrap_or_default();
            tx.send_if_modified(|old| {
                let changed = old != image;
                if changed {
                    image.clone_into(old);
                }
                changed
            });
        }
    }

    /// Lets go of the pod, its containers left running for the next run of
    /// edged to adopt (runtimes whose containers outlive edged).
    pub(crate) async fn detach(mut self) {
        self.detach.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

/// The runtime's view of a pod.
fn pod_info(pod: &Value, env: &PodEnv) -> PodInfo {
    let meta = &pod["metadata"];
    PodInfo {
        uid: meta["uid"].as_str().unwrap_or_default().to_owned(),
        name: meta["name"].as_str().unwrap_or_default().to_owned(),
        namespace: meta["namespace"].as_str().unwrap_or("default").to_owned(),
        dir: env.dir.clone(),
        host_network: pod["spec"]["hostNetwork"].as_bool().unwrap_or(false),
        node_ip: env.node_ip.clone(),
        labels: meta["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect(),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// One container's spec for the runtime (attempt 0; its environment is
/// built at its start, from `EnvPlan`), and the limits it asks for that
/// cannot even be read.
fn container_spec(pod: &Value, c: &Value, env: &PodEnv) -> (ContainerSpec, Vec<String>) {
    let name = c["name"].as_str().unwrap_or_default().to_owned();
    let (limits, bad) = match Limits::of(c) {
        Ok(l) => (l, Vec::new()),
        Err(e) => (Limits::default(), vec![format!("limits not applied: {e}")]),
    };
    let image = c["image"].as_str().unwrap_or_default().to_owned();
    // Kubelet's default: Always for `:latest` or no tag, else IfNotPresent.
    let pull_policy = c["imagePullPolicy"].as_str().map(str::to_owned).unwrap_or_else(|| {
        let tag = image.rsplit('/').next().and_then(|last| last.split_once(':')).map(|(_, t)| t);
        if image.contains('@') || tag.is_some_and(|t| t != "latest") { "IfNotPresent" } else { "Always" }.to_owned()
    });
    let spec = ContainerSpec {
        image,
        pull_policy,
        command: strings(&c["command"]),
        args: strings(&c["args"]),
        env: Vec::new(),
        working_dir: c["workingDir"].as_str().unwrap_or_default().to_owned(),
        host_dir: env.dir.join("containers").join(&name),
        log: crate::logs::log_path(&env.dir, &name, 0),
        mounts: crate::volume::mounts(pod, c, &env.dir),
        limits,
        attempt: 0,
        interactive: crate::runtime::Interactive {
            stdin: c["stdin"].as_bool().unwrap_or(false),
            stdin_once: c["stdinOnce"].as_bool().unwrap_or(false),
            tty: c["tty"].as_bool().unwrap_or(false),
        },
        name,
    };
    (spec, bad)
}

/// Starts the pod: its sandbox, then its containers.
pub(crate) fn run(pod: &Value, env: PodEnv, changed: mpsc::Sender<String>) -> PodHandle {
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
    let key = format!(
        "{}/{}",
        pod["metadata"]["namespace"].as_str().unwrap_or("default"),
        pod["metadata"]["name"].as_str().unwrap_or_default()
    );
    let containers: Vec<Value> = pod["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let policy = pod["spec"]["restartPolicy"].as_str().unwrap_or("Always").to_owned();
    let state = Arc::new(Mutex::new(PodState {
        containers: containers
            .iter()
            .map(|c| {
                ContainerStatus::new(
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["image"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect(),
        start_time: now(),
        restart_policy: policy.clone(),
        pod_ip: None,
        reach: None,
    }));
    let stop = CancellationToken::new();
    let detach = CancellationToken::new();
    let grace = Arc::new(Mutex::new(Duration::from_secs(30)));
    let info = pod_info(pod, &env);
    let (images, image_rxs): (Vec<_>, Vec<_>) = containers
        .iter()
        .map(|c| tokio::sync::watch::channel(c["image"].as_str().unwrap_or_default().to_owned()))
        .unzip();
    let pod = pod.clone();
    let task = {
        let (state, stop, detach, grace) = (Arc::clone(&state), stop.clone(), detach.clone(), Arc::clone(&grace));
        tokio::spawn(async move {
            let runtime = Arc::clone(&env.runtime);
            let reporter =
                |index| Reporter { state: Arc::clone(&state), index, changed: changed.clone(), key: key.clone() };
            let waiting = |reason: &'static str, message: &str| {
                for i in 0..containers.len() {
                    reporter(i)
                        .set(|c| c.state = State::Waiting { reason: reason.into(), message: message.to_owned() });
                }
            };
            let mut config_changed = env.config_changed.clone();
            // The configMap and secret volumes first: the pod stays
            // ContainerCreating until the objects they need exist.
            let mut delay = env.backoff.base;
            let wanted = crate::volume::sources(&pod);
            loop {
                config_changed.borrow_and_update();
                let sources = env.config.fetch(&info.namespace, &wanted).await;
                let why = match &sources {
                    Ok(s) => crate::config::volume_error(&pod, s),
                    Err(e) => Some(format!("MountVolume.SetUp failed: {e}")),
                };
                match (sources, why) {
                    (Ok(s), None) => {
                        crate::volume::prepare(&pod, &env.dir, &s);
                        break;
                    }
                    (_, why) => {
                        let why = why.unwrap_or_default();
                        tracing::warn!(pod = %key, uid = %info.uid, reason = %why, "pod volumes not ready");
                        waiting("ContainerCreating", &why);
                    }
                }
                if !pause(delay, &stop, &detach, Some(&mut config_changed)).await {
                    return;
                }
                delay = (delay * 2).min(env.backoff.cap);
            }
            let mut delay = env.backoff.base;
            let sandbox = loop {
                match runtime.run_sandbox(&info).await {
                    Ok(s) => break s,
                    Err(e) => {
                        tracing::warn!(pod = %key, uid = %info.uid, error = %e, "pod sandbox not created");
                        waiting(e.reason, &e.message);
                        if !pause(delay, &stop, &detach, None).await {
                            return;
                        }
                        delay = (delay * 2).min(env.backoff.cap);
                    }
                }
            };
            let pod_ref =
                Arc::new(PodRef { namespace: info.namespace.clone(), name: info.name.clone(), uid: info.uid.clone() });
            // Probes reach a host-network pod on loopback, others on their IP.
            let probe_host = if sandbox.ip == info.node_ip { "127.0.0.1".to_owned() } else { sandbox.ip.clone() };
            {
                let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
                s.pod_ip = Some(sandbox.ip.clone());
                s.reach = Some(probe_host.clone());
            }
            let supervisors: Vec<_> = containers
                .iter()
                .zip(image_rxs)
                .enumerate()
                .map(|(i, (c, image))| {
                    let (spec, notes) = container_spec(&pod, c, &env);
                    let sup = Supervisor {
                        events: env.events.clone(),
                        pod_ref: Arc::clone(&pod_ref),
                        plan: Some(EnvPlan::new(&pod, c, &env.node, &env.node_ip)),
                        config: env.config.clone(),
                        config_changed: env.config_changed.clone(),
                        name: spec.name.clone(),
                        startup: Probe::parse(&c["startupProbe"]),
                        liveness: Probe::parse(&c["livenessProbe"]),
                        readiness: Probe::parse(&c["readinessProbe"]),
                        spec,
                        notes,
                        runtime: Arc::clone(&runtime),
                        pod: info.clone(),
                        sandbox: sandbox.clone(),
                        probe_host: probe_host.clone(),
                        policy: policy.clone(),
                        backoff: env.backoff,
                        report: reporter(i),
                        key: key.clone(),
                        stop: stop.clone(),
                        detach: detach.clone(),
                        grace: Arc::clone(&grace),
                        image,
                    };
                    tokio::spawn(sup.run())
                })
                .collect();
            // The pod's JSON and its sources are not needed while it runs:
            // edged keeps one copy of the pod, not two.
            drop((pod, containers, env));
            for t in supervisors {
                let _ = t.await;
            }
            if !detach.is_cancelled() {
                runtime.remove_sandbox(&info, &sandbox).await;
            }
        })
    };
    PodHandle { uid, state, stop, detach, grace, tasks: vec![task], images }
}

/// Waits `delay` (or, with `woken`, until it moves); false when the pod is
/// stopped or let go meanwhile.
async fn pause(
    delay: Duration,
    stop: &CancellationToken,
    detach: &CancellationToken,
    woken: Option<&mut tokio::sync::watch::Receiver<u64>>,
) -> bool {
    let woken = async {
        let Some(rx) = woken else { return std::future::pending().await };
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = stop.cancelled() => false,
        () = detach.cancelled() => false,
        () = woken => true,
        () = tokio::time::sleep(delay) => true,
    }
}

struct Supervisor {
    name: String,
    /// Where this container's Events are recorded, and about which pod.
    events: Recorder,
    pod_ref: Arc<PodRef>,
    /// What the container's environment is made of, until it is built (at
    /// its first start; kept from then on).
    plan: Option<EnvPlan>,
    config: ConfigReader,
    config_changed: tokio::sync::watch::Receiver<u64>,
    startup: Option<Probe>,
    liveness: Option<Probe>,
    readiness: Option<Probe>,
    spec: ContainerSpec,
    /// Limits that could not even be read.
    notes: Vec<String>,
    runtime: Arc<dyn Runtime>,
    pod: PodInfo,
    sandbox: Sandbox,
    probe_host: String,
    policy: String,
    backoff: Backoff,
    report: Reporter,
    key: String,
    stop: CancellationToken,
    /// Edged lets go: return, leaving the container running.
    detach: CancellationToken,
    grace: Arc<Mutex<Duration>>,
    /// The container's image, changed by a pod update.
    image: tokio::sync::watch::Receiver<String>,
}

/// Changes one container's status and flags its pod for a report.
#[derive(Clone)]
struct Reporter {
    state: Arc<Mutex<PodState>>,
    index: usize,
    changed: mpsc::Sender<String>,
    key: String,
}

impl Reporter {
    /// Changes the container's record without a status report (what only
    /// streams read).
    fn quietly(&self, f: impl FnOnce(&mut ContainerStatus)) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = s.containers.get_mut(self.index) {
            f(c);
        }
    }

    fn set(&self, f: impl FnOnce(&mut ContainerStatus)) {
        {
            let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(c) = s.containers.get_mut(self.index) {
                f(c);
            }
        }
        // Full: a report is pending already and will carry this state.
        let _ = self.changed.try_send(self.key.clone());
    }
}

/// Records one container's Events: about its pod, with `fieldPath`
/// `spec.containers{name}`.
#[derive(Clone)]
struct Voice {
    events: Recorder,
    pod: Arc<PodRef>,
    container: String,
}

impl Voice {
    fn normal(&self, reason: &'static str, message: String) {
        self.events.record(Note::normal(&self.pod, &self.container, reason, message));
    }

    fn warning(&self, reason: &'static str, message: String) {
        self.events.record(Note::warning(&self.pod, &self.container, reason, message));
    }

    /// What kubelet records when a container could not be started
    /// (`kuberuntime_container.go`'s `startContainer`, the image manager's
    /// pull).
    fn not_started(&self, e: &RuntimeError, image: &str) {
        match e.reason {
            "ErrImagePull" => self.warning("Failed", format!("Failed to pull image {image:?}: {}", e.message)),
            "ErrImageNeverPull" => self.warning(
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
            ),
            _ => {}
        }
        let error = match e.reason {
            "ErrImagePull" | "ErrImageNeverPull" => e.reason.to_owned(),
            _ => e.message.clone(),
        };
        self.warning("Failed", format!("Error: {error}"));
    }
}

/// Checks `p` every period until it has passed `successThreshold` times in
/// a row (`true`, when `until_pass`) or failed `failureThreshold` times in a
/// row (`false`).
async fn settle(p: &Probe, c: &dyn Container, host: &str, until_pass: bool, failed: &(dyn Fn() + Sync)) -> bool {
    let (mut passes, mut fails) = (0, 0);
    loop {
        if p.check(c, host).await {
            passes += 1;
            fails = 0;
        } else {
            // Kubelet records every failed check (`Unhealthy`).
            failed();
            fails += 1;
            passes = 0;
        }
        if until_pass && passes >= p.success_threshold {
            return true;
        }
        if fails >= p.failure_threshold {
            return false;
        }
        tokio::time::sleep(p.period).await;
    }
}

impl Supervisor {
    fn set(&self, f: impl FnOnce(&mut ContainerStatus)) {
        self.report.set(f);
    }

    /// The container's probes for one run of it: a failed startup or
    /// liveness probe notifies `kill`; readiness sets the ready flag. Every
    /// failed check is an `Unhealthy` Event, a restart for a probe a
    /// `Killing` one, as kubelet records them.
    fn probes(&self, c: Arc<dyn Container>, kill: Arc<tokio::sync::Notify>) -> Option<tokio::task::JoinHandle<()>> {
        if self.startup.is_none() && self.liveness.is_none() && self.readiness.is_none() {
            return None;
        }
        let (startup, liveness, readiness) = (self.startup.clone(), self.liveness.clone(), self.readiness.clone());
        let (host, report, key) = (self.probe_host.clone(), self.report.clone(), self.key.clone());
        let voice = self.voice();
        if readiness.is_some() {
            report.set(|c| c.ready = Some(false));
        }
        Some(tokio::spawn(async move {
            let c = &*c;
            let failed = |kind: &'static str, p: &Probe| {
                let message = format!("{kind} probe failed: {}", p.failure(&host));
                let voice = voice.clone();
                move || voice.warning("Unhealthy", message.clone())
            };
            let restart = |kind: &str| {
                let name = &voice.container;
                voice.normal("Killing", format!("Container {name} failed {kind} probe, will be restarted"));
                kill.notify_one();
            };
            if let Some(p) = &startup {
                tokio::time::sleep(p.initial_delay).await;
                if !settle(p, c, &host, true, &failed("Startup", p)).await {
                    tracing::info!(pod = %key, "startup probe failed; restarting the container");
                    restart("startup");
                    return;
                }
            }
            let live = async {
                if let Some(p) = &liveness {
                    tokio::time::sleep(p.initial_delay).await;
                    if !settle(p, c, &host, false, &failed("Liveness", p)).await {
                        tracing::info!(pod = %key, "liveness probe failed; restarting the container");
                        restart("liveness");
                    }
                }
            };
            let ready = async {
                let Some(p) = &readiness else { return };
                let unready = failed("Readiness", p);
                tokio::time::sleep(p.initial_delay).await;
                loop {
                    // Ready after successThreshold passes in a row, unready
                    // again after failureThreshold failures in a row.
                    if settle(p, c, &host, true, &unready).await {
                        report.set(|c| c.ready = Some(true));
                        settle(p, c, &host, false, &unready).await;
                        report.set(|c| c.ready = Some(false));
                    }
                    tokio::time::sleep(p.period).await;
                }
            };
            tokio::join!(live, ready);
        }))
    }

    /// How this container's Events are recorded.
    fn voice(&self) -> Voice {
        Voice { events: self.events.clone(), pod: Arc::clone(&self.pod_ref), container: self.name.clone() }
    }

    async fn run(mut self) {
        let voice = self.voice();
        let mut delay = self.backoff.base;
        let mut attempt = 0u32;
        // A container an earlier run of edged left running is taken over.
        let mut adopted = self.runtime.adopt(&self.pod, &self.sandbox, &self.spec).await;
        if let Some((c, n)) = &adopted {
            tracing::info!(pod = %self.key, container = %self.name, id = %c.id(), attempt = n, "container adopted");
            attempt = n + 1;
            self.set(|s| s.restarts = *n);
        }
        loop {
            let started_at = Instant::now();
            let started = now();
            let image = self.image.borrow_and_update().clone();
            let (result, fresh) = match adopted.take() {
                Some((c, _)) => (Ok(c), false),
                None => match self.build_env().await {
                    Ok(()) => {
                        let log = crate::logs::log_path(&self.pod.dir, &self.name, attempt);
                        // The start prunes the log of the attempt before the
                        // previous one: `--previous` moves on first.
                        self.report.quietly(|s| {
                            if let Some(l) = &s.log {
                                s.previous_log = Some(l.clone());
                            }
                        });
                        let spec = ContainerSpec { attempt, image: image.clone(), log, ..self.spec.clone() };
                        if !self.runtime.pulls_images() {
                            // Nothing to pull: kubelet's word for an image it has.
                            voice.normal("Pulled", format!("Container image {image:?} already present on machine"));
                        }
                        (self.runtime.start(&self.pod, &self.sandbox, &spec).await, true)
                    }
                    Err(e) => (Err(e), true),
                },
            };
            let outcome = match result {
                Ok(c) => {
                    if fresh {
                        attempt += 1;
                    }
                    let id = c.id();
                    if fresh {
                        voice.normal("Created", format!("Created container: {}", self.name));
                        voice.normal("Started", format!("Started container {}", self.name));
                    }
                    let mut notes = self.notes.clone();
                    notes.extend(c.not_applied());
                    tracing::info!(pod = %self.key, container = %self.name, id = %id, "container running");
                    let log = crate::logs::log_path(&self.pod.dir, &self.name, attempt.saturating_sub(1));
                    let live = Live { container: Arc::clone(&c) };
                    self.set(|s| {
                        s.image = image.clone();
                        s.state = State::Running { started: started.clone() };
                        s.container_id = Some(id);
                        s.notes = notes;
                        s.live = Some(live);
                        if s.log.as_ref() != Some(&log) {
                            s.previous_log = s.log.replace(log);
                        }
                    });
                    let kill = Arc::new(tokio::sync::Notify::new());
                    let probing = self.probes(Arc::clone(&c), Arc::clone(&kill));
                    let mut image_rx = self.image.clone();
                    let exit = tokio::select! {
                        exit = c.wait() => exit,
                        Ok(()) = image_rx.changed() => {
                            // The pod was updated with a new image: this
                            // container is replaced at once, no back-off.
                            tracing::info!(pod = %self.key, container = %self.name, "image changed; restarting the container");
                            voice.normal("Killing", format!("Container {} definition changed, will be restarted", self.name));
                            if let Some(t) = probing {
                                t.abort();
                            }
                            let grace = *self.grace.lock().unwrap_or_else(|p| p.into_inner());
                            let exit = c.stop(grace).await;
                            self.terminated(exit, &started);
                            self.set(|s| {
                                s.ready = None;
                                s.last = Some(s.state.clone());
                                s.restarts += 1;
                            });
                            continue;
                        }
                        () = kill.notified() => {
                            let grace = *self.grace.lock().unwrap_or_else(|p| p.into_inner());
                            c.stop(grace).await
                        }
                        () = self.detach.cancelled() => {
                            if let Some(t) = probing {
                                t.abort();
                            }
                            return;
                        }
                        () = self.stop.cancelled() => {
                            if let Some(t) = probing {
                                t.abort();
                            }
                            voice.normal("Killing", format!("Stopping container {}", self.name));
                            let grace = *self.grace.lock().unwrap_or_else(|p| p.into_inner());
                            let exit = c.stop(grace).await;
                            self.terminated(exit, &started);
                            return;
                        }
                    };
                    if let Some(t) = probing {
                        t.abort();
                    }
                    self.set(|s| s.ready = None);
                    self.terminated(exit, &started);
                    Ok(exit.code != 0)
                }
                Err(e) => {
                    tracing::warn!(pod = %self.key, uid = %self.pod.uid, container = %self.name, error = %e, "container did not start");
                    voice.not_started(&e, &image);
                    self.set(|s| s.state = State::Waiting { reason: e.reason.into(), message: e.message.clone() });
                    Err(e)
                }
            };
            // A container that never started is retried whatever the policy.
            let restart = match (&outcome, self.policy.as_str()) {
                (Err(_), _) => true,
                (Ok(_), "Never") => false,
                (Ok(failed), "OnFailure") => *failed,
                (Ok(_), _) => true,
            };
            if !restart {
                return;
            }
            if started_at.elapsed() > Duration::from_secs(600) {
                delay = self.backoff.base;
            }
            let wait = delay;
            delay = (delay * 2).min(self.backoff.cap);
            match &outcome {
                Ok(_) => voice.warning(
                    "BackOff",
                    format!("Back-off restarting failed container {} in pod {}", self.name, self.pod_ref.formatted()),
                ),
                Err(e) if e.reason == "ErrImagePull" => {
                    voice.normal("BackOff", format!("Back-off pulling image {image:?}"));
                    voice.warning("Failed", "Error: ImagePullBackOff".into());
                }
                Err(_) => {}
            }
            self.set(|s| match &outcome {
                Ok(_) => {
                    s.last = Some(s.state.clone());
                    s.state = State::Waiting {
                        reason: "CrashLoopBackOff".into(),
                        message: format!("back-off {}s restarting failed container", wait.as_secs()),
                    };
                }
                Err(e) => {
                    let reason = if e.reason == "ErrImagePull" { "ImagePullBackOff" } else { e.reason };
                    s.state = State::Waiting { reason: reason.into(), message: e.message.clone() };
                }
            });
            // A container waiting for a configmap or secret also tries
            // again as soon as edged is passed one.
            let config_error = matches!(&outcome, Err(e) if e.reason == CONFIG_ERROR);
            if !pause(wait, &self.stop, &self.detach, config_error.then_some(&mut self.config_changed)).await {
                return;
            }
            if outcome.is_ok() {
                self.set(|s| s.restarts += 1);
            }
        }
    }

    /// Builds the container's environment from its configmaps and secrets
    /// (once: it is kept for later attempts). A missing one is kubelet's
    /// `CreateContainerConfigError`.
    async fn build_env(&mut self) -> Result<(), RuntimeError> {
        let Some(plan) = &self.plan else { return Ok(()) };
        // Seen before the read: a change during it wakes the retry.
        self.config_changed.borrow_and_update();
        let built = match self.config.fetch(plan.namespace(), &plan.sources()).await {
            Ok(sources) => plan.build(&self.sandbox.ip, &sources),
            Err(e) => Err(e),
        };
        match built {
            Ok(env) => {
                self.spec.env = env;
                self.plan = None;
                Ok(())
            }
            Err(message) => Err(RuntimeError::new(CONFIG_ERROR, message)),
        }
    }

    fn terminated(&self, exit: Exit, started: &str) {
        let reason = match exit {
            Exit { oom_killed: true, .. } => "OOMKilled",
            Exit { code: 0, .. } => "Completed",
            _ => "Error",
        };
        self.set(|c| {
            c.live = None;
            c.state = State::Terminated {
                code: exit.code,
                signal: exit.signal,
                reason: reason.into(),
                started: started.to_owned(),
                finished: now(),
            };
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(policy: &str, states: &[State]) -> PodState {
        PodState {
            containers: states
                .iter()
                .enumerate()
                .map(|(i, s)| ContainerStatus { state: s.clone(), ..ContainerStatus::new(format!("c{i}"), "i".into()) })
                .collect(),
            start_time: now(),
            restart_policy: policy.into(),
            pod_ip: Some("10.0.0.5".into()),
            reach: None,
        }
    }

    fn term(code: i32) -> State {
        State::Terminated { code, signal: None, reason: "x".into(), started: now(), finished: now() }
    }

    #[test]
    fn phases_follow_kubelet() {
        let creating = State::Waiting { reason: "ContainerCreating".into(), message: String::new() };
        let running = State::Running { started: now() };
        assert_eq!(pod("Always", std::slice::from_ref(&creating)).phase(), "Pending");
        assert_eq!(pod("Always", &[running.clone(), creating]).phase(), "Running");
        assert_eq!(pod("Never", &[term(0), term(0)]).phase(), "Succeeded");
        assert_eq!(pod("Never", &[term(0), term(2)]).phase(), "Failed");
        assert_eq!(pod("OnFailure", &[term(0)]).phase(), "Succeeded");
        assert_eq!(pod("Always", &[term(1)]).phase(), "Running");
        let s = pod("Always", &[running]).status("10.0.0.5");
        assert_eq!(s["podIP"], "10.0.0.5");
        assert_eq!(s["containerStatuses"][0]["ready"], true);
        assert_eq!(s["conditions"][1]["type"], "Ready");
        assert_eq!(s["conditions"][1]["status"], "True");
        let s = pod("Never", &[term(3)]).status("10.0.0.5");
        assert_eq!(s["containerStatuses"][0]["state"]["terminated"]["exitCode"], 3);
        assert_eq!(s["conditions"][1]["reason"], "ContainersNotReady");
    }
}
