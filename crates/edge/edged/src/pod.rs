//! One pod: a supervisor task per container (start, wait, restart by the
//! pod's `restartPolicy` with exponential back-off, stop with the grace
//! period), and the pod's status built from their states.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::probe::Probe;
use crate::process::{self, Exit, ProcessSpec};

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
    pid: Option<u32>,
    /// The readiness probe's verdict (`None`: no readiness probe, ready
    /// while running).
    ready: Option<bool>,
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
            pid: None,
            ready: None,
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
        let never_ran = self.containers.iter().all(|c| {
            c.restarts == 0 && matches!(&c.state, State::Waiting { reason, .. } if reason == "ContainerCreating")
        });
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
    pub(crate) fn status(&self, pod_ip: &str) -> Value {
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
                if let Some(pid) = c.pid {
                    s["containerID"] = json!(format!("process://{pid}"));
                }
                s
            })
            .collect();
        json!({
            "phase": self.phase(),
            "conditions": [cond("Initialized", true), cond("Ready", ready), cond("ContainersReady", ready), cond("PodScheduled", true)],
            "hostIP": pod_ip, "hostIPs": [{"ip": pod_ip}],
            "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": self.start_time,
            "containerStatuses": statuses,
        })
    }
}

/// Where a pod lives on disk, and how its containers run.
#[derive(Debug, Clone)]
pub(crate) struct PodEnv {
    pub(crate) dir: PathBuf,
    pub(crate) backoff: Backoff,
    pub(crate) node: String,
    pub(crate) pod_ip: String,
    pub(crate) sources: Sources,
}

/// A running pod: its state and how to stop it.
#[derive(Debug)]
pub(crate) struct PodHandle {
    pub(crate) uid: String,
    pub(crate) state: Arc<Mutex<PodState>>,
    stop: CancellationToken,
    grace: Arc<Mutex<Duration>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
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
}

/// The data of the configmaps and secrets a pod's environment uses, by
/// (`configmap` | `secret`, name); secret values already decoded.
pub(crate) type Sources = BTreeMap<(&'static str, String), crate::volume::Data>;

/// The configmaps and secrets a pod's containers take environment from.
pub(crate) fn env_sources(pod: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for f in c["envFrom"].as_array().into_iter().flatten() {
            if let Some(n) = f.pointer("/configMapRef/name").and_then(Value::as_str) {
                out.push(("configmap", n.to_owned()));
            }
            if let Some(n) = f.pointer("/secretRef/name").and_then(Value::as_str) {
                out.push(("secret", n.to_owned()));
            }
        }
        for e in c["env"].as_array().into_iter().flatten() {
            if let Some(n) = e.pointer("/valueFrom/configMapKeyRef/name").and_then(Value::as_str) {
                out.push(("configmap", n.to_owned()));
            }
            if let Some(n) = e.pointer("/valueFrom/secretKeyRef/name").and_then(Value::as_str) {
                out.push(("secret", n.to_owned()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn env_of(container: &Value, pod: &Value, pod_ip: &str, node: &str, sources: &Sources) -> Vec<(String, String)> {
    let meta = &pod["metadata"];
    let mut env = vec![("HOSTNAME".to_owned(), meta["name"].as_str().unwrap_or_default().to_owned())];
    // envFrom first; `env` entries override them, as kubelet does.
    for f in container["envFrom"].as_array().into_iter().flatten() {
        let prefix = f["prefix"].as_str().unwrap_or_default();
        for (kind, field) in [("configmap", "configMapRef"), ("secret", "secretRef")] {
            let Some(name) = f[field]["name"].as_str() else { continue };
            match sources.get(&(kind, name.to_owned())) {
                Some(data) => env.extend(
                    data.iter().map(|(k, v)| (format!("{prefix}{k}"), String::from_utf8_lossy(v).into_owned())),
                ),
                None if f[field]["optional"].as_bool() == Some(true) => {}
                None => tracing::warn!(pod = ?meta["name"], source = name, kind, "envFrom source not found; skipped"),
            }
        }
    }
    for e in container["env"].as_array().into_iter().flatten() {
        let Some(name) = e["name"].as_str() else { continue };
        let from_source = |kind: &'static str, field: &str| -> Option<Option<String>> {
            let r = e.pointer(&format!("/valueFrom/{field}"))?;
            let value = sources
                .get(&(kind, r["name"].as_str().unwrap_or_default().to_owned()))
                .and_then(|d| d.get(r["key"].as_str().unwrap_or_default()))
                .map(|b| String::from_utf8_lossy(b).into_owned());
            if value.is_none() && r["optional"].as_bool() != Some(true) {
                tracing::warn!(pod = ?meta["name"], env = name, kind, "referenced key not found; left unset");
            }
            Some(value)
        };
        let value = if let Some(v) = e["value"].as_str() {
            Some(v.to_owned())
        } else if let Some(v) = from_source("configmap", "configMapKeyRef") {
            v
        } else if let Some(v) = from_source("secret", "secretKeyRef") {
            v
        } else if let Some(path) = e.pointer("/valueFrom/fieldRef/fieldPath").and_then(Value::as_str) {
            match path {
                "metadata.name" => meta["name"].as_str().map(str::to_owned),
                "metadata.namespace" => meta["namespace"].as_str().map(str::to_owned),
                "metadata.uid" => meta["uid"].as_str().map(str::to_owned),
                "spec.nodeName" => Some(node.to_owned()),
                "status.podIP" | "status.hostIP" => Some(pod_ip.to_owned()),
                _ => None,
            }
        } else {
            None
        };
        match value {
            Some(v) => {
                env.retain(|(k, _)| k != name);
                env.push((name.to_owned(), v));
            }
            None if e.get("valueFrom").is_some_and(|v| v.get("fieldRef").is_some()) => {
                tracing::warn!(pod = ?meta["name"], env = name, "fieldRef not supported; left unset")
            }
            None => {}
        }
    }
    env
}

/// Starts the pod's containers.
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
    }));
    crate::volume::prepare(pod, &env.dir, &env.sources);
    let stop = CancellationToken::new();
    let grace = Arc::new(Mutex::new(Duration::from_secs(30)));
    let tasks = containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let name = c["name"].as_str().unwrap_or_default().to_owned();
            let argv: Vec<String> = c["command"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(c["args"].as_array().into_iter().flatten())
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            let workdir = env.dir.join("containers").join(&name);
            if std::fs::create_dir_all(&workdir).is_ok() {
                crate::volume::mount(pod, c, &env.dir, &workdir);
            }
            let spec = ProcessSpec {
                argv,
                env: env_of(c, pod, &env.pod_ip, &env.node, &env.sources),
                workdir: workdir.clone(),
                log: env.dir.join("logs").join(format!("{name}.log")),
            };
            let sup = Supervisor {
                index: i,
                name: name.clone(),
                startup: Probe::parse(&c["startupProbe"]),
                liveness: Probe::parse(&c["livenessProbe"]),
                readiness: Probe::parse(&c["readinessProbe"]),
                spec,
                policy: policy.clone(),
                backoff: env.backoff,
                state: Arc::clone(&state),
                changed: changed.clone(),
                key: key.clone(),
                stop: stop.clone(),
                grace: Arc::clone(&grace),
            };
            tokio::spawn(sup.run())
        })
        .collect();
    PodHandle { uid, state, stop, grace, tasks }
}

struct Supervisor {
    index: usize,
    name: String,
    startup: Option<Probe>,
    liveness: Option<Probe>,
    readiness: Option<Probe>,
    spec: ProcessSpec,
    policy: String,
    backoff: Backoff,
    state: Arc<Mutex<PodState>>,
    changed: mpsc::Sender<String>,
    key: String,
    stop: CancellationToken,
    grace: Arc<Mutex<Duration>>,
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

/// Checks `p` every period until it has passed `successThreshold` times in
/// a row (`true`, when `until_pass`) or failed `failureThreshold` times in a
/// row (`false`).
async fn settle(p: &Probe, workdir: &PathBuf, env: &[(String, String)], until_pass: bool) -> bool {
    let (mut passes, mut fails) = (0, 0);
    loop {
        if p.check(workdir, env).await {
            passes += 1;
            fails = 0;
        } else {
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
    fn reporter(&self) -> Reporter {
        Reporter {
            state: Arc::clone(&self.state),
            index: self.index,
            changed: self.changed.clone(),
            key: self.key.clone(),
        }
    }

    fn set(&self, f: impl FnOnce(&mut ContainerStatus)) {
        self.reporter().set(f);
    }

    /// The container's probes for one run of it: a failed startup or
    /// liveness probe notifies `kill`; readiness sets the ready flag.
    fn probes(&self, kill: Arc<tokio::sync::Notify>) -> Option<tokio::task::JoinHandle<()>> {
        if self.startup.is_none() && self.liveness.is_none() && self.readiness.is_none() {
            return None;
        }
        let (startup, liveness, readiness) = (self.startup.clone(), self.liveness.clone(), self.readiness.clone());
        let (workdir, env, report, key) =
            (self.spec.workdir.clone(), self.spec.env.clone(), self.reporter(), self.key.clone());
        if readiness.is_some() {
            report.set(|c| c.ready = Some(false));
        }
        Some(tokio::spawn(async move {
            if let Some(p) = &startup {
                tokio::time::sleep(p.initial_delay).await;
                if !settle(p, &workdir, &env, true).await {
                    tracing::info!(pod = %key, "startup probe failed; restarting the container");
                    kill.notify_one();
                    return;
                }
            }
            let live = async {
                if let Some(p) = &liveness {
                    tokio::time::sleep(p.initial_delay).await;
                    if !settle(p, &workdir, &env, false).await {
                        tracing::info!(pod = %key, "liveness probe failed; restarting the container");
                        kill.notify_one();
                    }
                }
            };
            let ready = async {
                let Some(p) = &readiness else { return };
                tokio::time::sleep(p.initial_delay).await;
                loop {
                    // Ready after successThreshold passes in a row, unready
                    // again after failureThreshold failures in a row.
                    if settle(p, &workdir, &env, true).await {
                        report.set(|c| c.ready = Some(true));
                        settle(p, &workdir, &env, false).await;
                        report.set(|c| c.ready = Some(false));
                    }
                    tokio::time::sleep(p.period).await;
                }
            };
            tokio::join!(live, ready);
        }))
    }

    async fn run(self) {
        let mut delay = self.backoff.base;
        loop {
            let started_at = Instant::now();
            let started = now();
            let exit = match process::start(&self.spec).await {
                Ok(mut running) => {
                    let pid = running.pid;
                    tracing::info!(pod = %self.key, container = %self.name, pid, "container running");
                    self.set(|c| {
                        c.state = State::Running { started: started.clone() };
                        c.pid = Some(pid);
                    });
                    let kill = Arc::new(tokio::sync::Notify::new());
                    let probing = self.probes(Arc::clone(&kill));
                    let grace = *self.grace.lock().unwrap_or_else(|p| p.into_inner());
                    let exit = tokio::select! {
                        exit = running.wait() => exit,
                        () = kill.notified() => running.stop(grace).await,
                        () = self.stop.cancelled() => {
                            if let Some(t) = probing {
                                t.abort();
                            }
                            let grace = *self.grace.lock().unwrap_or_else(|p| p.into_inner());
                            let exit = running.stop(grace).await;
                            self.terminated(exit, &started);
                            return;
                        }
                    };
                    if let Some(t) = probing {
                        t.abort();
                    }
                    self.set(|c| c.ready = None);
                    Ok(exit)
                }
                Err(e) => Err(e),
            };
            let failed = match exit {
                Ok(exit) => {
                    self.terminated(exit, &started);
                    exit.code != 0
                }
                Err(e) => {
                    tracing::warn!(pod = %self.key, container = %self.spec.log.display(), error = %e, "container did not start");
                    let message = e.to_string();
                    self.set(|c| {
                        c.state = State::Terminated {
                            code: 128,
                            signal: None,
                            reason: "StartError".into(),
                            started: started.clone(),
                            finished: now(),
                        };
                        c.last = Some(State::Waiting { reason: "RunContainerError".into(), message });
                    });
                    true
                }
            };
            let restart = match self.policy.as_str() {
                "Never" => false,
                "OnFailure" => failed,
                _ => true,
            };
            if !restart {
                return;
            }
            if started_at.elapsed() > Duration::from_secs(600) {
                delay = self.backoff.base;
            }
            let wait = delay;
            delay = (delay * 2).min(self.backoff.cap);
            self.set(|c| {
                c.last = Some(c.state.clone());
                c.state = State::Waiting {
                    reason: "CrashLoopBackOff".into(),
                    message: format!("back-off {}s restarting failed container", wait.as_secs()),
                };
            });
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            self.set(|c| c.restarts += 1);
        }
    }

    fn terminated(&self, exit: Exit, started: &str) {
        let reason = if exit.code == 0 { "Completed" } else { "Error" };
        self.set(|c| {
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
