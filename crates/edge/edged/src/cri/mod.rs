//! The CRI runtime: containerd (or any runtime speaking CRI `runtime.v1`)
//! over its gRPC unix socket. A pod is a sandbox (`RunPodSandbox`, with the
//! pause image containerd is configured with), each container attempt is
//! `CreateContainer` + `StartContainer`. One relist of the node's
//! containers every 250 ms (as kubelet's) tells edged which ended; edged
//! stops with `StopContainer` and the grace period, runs exec probes with
//! `ExecSync`, and rotates each
//! container's log at the same cap as the process runtime
//! (`ReopenContainerLog`). Each attempt logs to `{name}/{attempt}.log` under
//! the sandbox's log directory (kubelet's layout, [`crate::logs`]).
//!
//! Sandboxes carry kubelet's labels (`io.kubernetes.pod.uid` and friends)
//! and `edgehive.io/node`, so that a restarted edged finds and replaces what
//! its earlier run left, and never touches another node's pods on a shared
//! runtime. Images are not pulled unless missing (`IfNotPresent`), as
//! kubelet does.
//!
//! `kubectl exec` reaches a container through the runtime's `Exec` and its
//! streaming server, as with kubelet (`cri/stream.rs`).

pub mod api;
mod forward;
pub mod grpc;
mod stream;

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use edgehive_viaduct::{StreamRx, StreamTx};

use crate::runtime::{BoxFuture, Container, ContainerSpec, ExecSpec, Exit, PodInfo, Runtime, RuntimeError, Sandbox};
use api::{IMAGE, RUNTIME};
use grpc::{Channel, GrpcError, code};

/// Label on every sandbox: the node whose edged made it.
pub const NODE_LABEL: &str = "edgehive.io/node";
const POD_UID: &str = "io.kubernetes.pod.uid";
const POD_NAME: &str = "io.kubernetes.pod.name";
const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
const CONTAINER_NAME: &str = "io.kubernetes.container.name";

/// How often this node's containers are listed to see which ended
/// (kubelet relists every second).
pub const POLL: Duration = Duration::from_millis(250);
/// How often a running container's log size is checked.
const LOG_CHECK: Duration = Duration::from_secs(10);

/// Settings of the CRI runtime.
#[derive(Debug, Clone)]
pub struct CriConfig {
    /// `unix:///run/containerd/containerd.sock` or a plain path.
    pub endpoint: String,
    /// This node (labels its sandboxes).
    pub node_name: String,
    /// Deadline of one request (kubelet's `runtimeRequestTimeout`, 2 min).
    pub request_timeout: Duration,
    /// What a relative streaming URL (the answer to `Exec`) is relative to.
    /// Runtimes answer with absolute ones (containerd: its
    /// `stream_server_address` and port); the default is containerd's
    /// default streaming server.
    pub stream_base: String,
}

/// containerd's default streaming server (`stream_server_address`,
/// `stream_server_port`).
pub const DEFAULT_STREAM_BASE: &str = "http://127.0.0.1:10010";

impl CriConfig {
    /// Kubelet's defaults for `endpoint`.
    pub fn new(endpoint: impl Into<String>, node_name: impl Into<String>) -> CriConfig {
        CriConfig {
            endpoint: endpoint.into(),
            node_name: node_name.into(),
            request_timeout: Duration::from_secs(120),
            stream_base: DEFAULT_STREAM_BASE.into(),
        }
    }
}

#[derive(Debug)]
struct Inner {
    ch: Channel,
    cfg: CriConfig,
    version: String,
    runtime_name: String,
    waiters: std::sync::Mutex<Waiters>,
}

/// Containers whose end a task waits for: one relist of this node's
/// containers wakes them all (as kubelet's relist does), instead of a
/// status request per container.
#[derive(Debug, Default)]
struct Waiters {
    by_id: HashMap<String, Arc<Notify>>,
    relisting: bool,
}

/// A CRI runtime.
#[derive(Debug, Clone)]
pub struct CriRuntime {
    inner: Arc<Inner>,
}

fn err(reason: &'static str) -> impl Fn(GrpcError) -> RuntimeError {
    move |e| RuntimeError::new(reason, e.to_string())
}

impl CriRuntime {
    /// Connects to the runtime and asks its version (which also proves it
    /// speaks CRI `runtime.v1`).
    pub async fn connect(cfg: CriConfig) -> Result<CriRuntime, RuntimeError> {
        let path = cfg.endpoint.strip_prefix("unix://").unwrap_or(&cfg.endpoint);
        if !path.starts_with('/') {
            return Err(RuntimeError::new(
                "RuntimeNotReady",
                format!("endpoint {:?}: only unix sockets (unix:///path) are supported", cfg.endpoint),
            ));
        }
        let ch = Channel::new(path);
        let v: api::VersionResponse = ch
            .call(&format!("{RUNTIME}Version"), &api::VersionRequest { version: "v1".into() }, Duration::from_secs(10))
            .await
            .map_err(|e| RuntimeError::new("RuntimeNotReady", format!("{}: {e}", cfg.endpoint)))?;
        tracing::info!(endpoint = %cfg.endpoint, runtime = %v.runtime_name, version = %v.runtime_version, api = %v.runtime_api_version, "container runtime connected");
        Ok(CriRuntime {
            inner: Arc::new(Inner {
                ch,
                version: format!("{}://{}", v.runtime_name, v.runtime_version),
                runtime_name: v.runtime_name,
                cfg,
                waiters: std::sync::Mutex::default(),
            }),
        })
    }
}

impl Inner {
    /// Registers `id` with the relist; the returned notify is woken once
    /// the container is seen exited or gone.
    fn watch(self: &Arc<Self>, id: &str) -> Arc<Notify> {
        let mut w = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        let n = Arc::clone(w.by_id.entry(id.to_owned()).or_default());
        if !w.relisting {
            w.relisting = true;
            tokio::spawn(relist(Arc::downgrade(self)));
        }
        n
    }

    fn unwatch(&self, id: &str) {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner()).by_id.remove(id);
    }

    async fn call<Req: prost::Message, Resp: prost::Message + Default>(
        &self,
        method: &str,
        req: &Req,
    ) -> Result<Resp, GrpcError> {
        self.ch.call(method, req, self.cfg.request_timeout).await
    }

    fn sandbox_config(&self, pod: &PodInfo) -> api::PodSandboxConfig {
        let mut labels: HashMap<String, String> = pod.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        labels.insert(POD_UID.into(), pod.uid.clone());
        labels.insert(POD_NAME.into(), pod.name.clone());
        labels.insert(POD_NAMESPACE.into(), pod.namespace.clone());
        labels.insert(NODE_LABEL.into(), self.cfg.node_name.clone());
        let network = if pod.host_network { api::NAMESPACE_NODE } else { api::NAMESPACE_POD };
        api::PodSandboxConfig {
            metadata: Some(api::PodSandboxMetadata {
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                namespace: pod.namespace.clone(),
                attempt: 0,
            }),
            hostname: if pod.host_network { String::new() } else { pod.name.clone() },
            log_directory: pod.dir.join("logs").to_string_lossy().into_owned(),
            labels,
            annotations: HashMap::new(),
            linux: Some(api::LinuxPodSandboxConfig {
                cgroup_parent: String::new(),
                security_context: Some(api::LinuxSandboxSecurityContext {
                    namespace_options: Some(api::NamespaceOption {
                        network,
                        pid: api::NAMESPACE_CONTAINER,
                        ipc: api::NAMESPACE_POD,
                    }),
                }),
            }),
        }
    }

    async fn sandboxes(&self, labels: HashMap<String, String>) -> Result<Vec<api::PodSandbox>, GrpcError> {
        let r: api::ListPodSandboxResponse = self
            .call(
                &format!("{RUNTIME}ListPodSandbox"),
                &api::ListPodSandboxRequest {
                    filter: Some(api::PodSandboxFilter { id: String::new(), label_selector: labels }),
                },
            )
            .await?;
        Ok(r.items)
    }

    /// Stops and removes a sandbox (and so its containers); a sandbox
    /// already gone is fine.
    async fn drop_sandbox(&self, id: &str) {
        let req = api::PodSandboxIdRequest { pod_sandbox_id: id.to_owned() };
        for method in ["StopPodSandbox", "RemovePodSandbox"] {
            let r: Result<api::Empty, _> = self.call(&format!("{RUNTIME}{method}"), &req).await;
            if let Err(e) = r
                && e.code() != Some(code::NOT_FOUND)
            {
                tracing::warn!(sandbox = %id, error = %e, "could not remove a pod sandbox");
            }
        }
    }

    /// Makes sure the image is there: pulled when missing, unless the
    /// policy is `Never`; pulled every time for `Always`.
    async fn ensure_image(&self, spec: &ContainerSpec) -> Result<(), RuntimeError> {
        let image = Some(api::ImageSpec { image: spec.image.clone() });
        let status: api::ImageStatusResponse = self
            .call(&format!("{IMAGE}ImageStatus"), &api::ImageStatusRequest { image: image.clone() })
            .await
            .map_err(err("ErrImageInspect"))?;
        let present = status.image.is_some_and(|i| !i.id.is_empty());
        match (present, spec.pull_policy.as_str()) {
            (true, "IfNotPresent" | "Never") => return Ok(()),
            (false, "Never") => {
                return Err(RuntimeError::new(
                    "ErrImageNeverPull",
                    format!("image {:?} is not present with pull policy of Never", spec.image),
                ));
            }
            // `Always` with the image present: pull, and use the local copy if the pull fails.
            _ => {}
        }
        let pulled: Result<api::PullImageResponse, _> =
            self.call(&format!("{IMAGE}PullImage"), &api::PullImageRequest { image }).await;
        match pulled {
            Ok(_) => Ok(()),
            Err(e) if present => {
                tracing::warn!(image = %spec.image, error = %e, "pull failed; using the local image");
                Ok(())
            }
            Err(e) => Err(RuntimeError::new("ErrImagePull", e.to_string())),
        }
    }

    /// A sandbox's IP (empty on the host's network or when unknown).
    async fn sandbox_ip(&self, id: &str) -> String {
        let req = api::PodSandboxIdRequest { pod_sandbox_id: id.to_owned() };
        match self.call::<_, api::PodSandboxStatusResponse>(&format!("{RUNTIME}PodSandboxStatus"), &req).await {
            Ok(s) => s.status.and_then(|s| s.network).map(|n| n.ip).unwrap_or_default(),
            Err(e) => {
                tracing::warn!(sandbox = %id, error = %e, "sandbox status");
                String::new()
            }
        }
    }

    async fn status(&self, id: &str) -> Result<api::ContainerStatus, GrpcError> {
        let r: api::ContainerStatusResponse = self
            .call(&format!("{RUNTIME}ContainerStatus"), &api::ContainerIdRequest { container_id: id.to_owned() })
            .await?;
        Ok(r.status.unwrap_or_default())
    }
}

impl Runtime for CriRuntime {
    fn version(&self) -> String {
        self.inner.version.clone()
    }

    fn run_sandbox<'a>(&'a self, pod: &'a PodInfo) -> BoxFuture<'a, Result<Sandbox, RuntimeError>> {
        Box::pin(async move {
            let rt = &self.inner;
            // A ready sandbox an earlier run of edged left is taken over
            // (its containers with it); any other goes.
            let mut old = rt
                .sandboxes(HashMap::from([(POD_UID.to_owned(), pod.uid.clone())]))
                .await
                .map_err(err("CreatePodSandboxError"))?;
            old.sort_by_key(|s| s.state != api::SANDBOX_READY);
            let mut kept = None;
            for s in old {
                if kept.is_none() && s.state == api::SANDBOX_READY {
                    tracing::info!(pod = %pod.name, sandbox = %s.id, "adopting the sandbox an earlier run left");
                    kept = Some(s.id);
                } else {
                    tracing::info!(pod = %pod.name, sandbox = %s.id, "removing a sandbox an earlier run left");
                    rt.drop_sandbox(&s.id).await;
                }
            }
            if let Some(id) = kept {
                let ip = rt.sandbox_ip(&id).await;
                return Ok(Sandbox { ip: if ip.is_empty() { pod.node_ip.clone() } else { ip }, id });
            }
            tokio::fs::create_dir_all(pod.dir.join("logs"))
                .await
                .map_err(|e| RuntimeError::new("CreatePodSandboxError", format!("{}: {e}", pod.dir.display())))?;
            let r: api::RunPodSandboxResponse = rt
                .call(
                    &format!("{RUNTIME}RunPodSandbox"),
                    &api::RunPodSandboxRequest { config: Some(rt.sandbox_config(pod)), runtime_handler: String::new() },
                )
                .await
                .map_err(err("CreatePodSandboxError"))?;
            let ip = rt.sandbox_ip(&r.pod_sandbox_id).await;
            let ip = if ip.is_empty() { pod.node_ip.clone() } else { ip };
            tracing::info!(pod = %pod.name, sandbox = %r.pod_sandbox_id, ip = %ip, "pod sandbox running");
            Ok(Sandbox { id: r.pod_sandbox_id, ip })
        })
    }

    fn remove_sandbox<'a>(&'a self, _pod: &'a PodInfo, sandbox: &'a Sandbox) -> BoxFuture<'a, ()> {
        Box::pin(self.inner.drop_sandbox(&sandbox.id))
    }

    fn start<'a>(
        &'a self,
        pod: &'a PodInfo,
        sandbox: &'a Sandbox,
        spec: &'a ContainerSpec,
    ) -> BoxFuture<'a, Result<Arc<dyn Container>, RuntimeError>> {
        Box::pin(async move {
            let rt = &self.inner;
            rt.ensure_image(spec).await?;
            // The previous attempt of this container is removed first (its
            // exit is in edged's status already; its log stays on disk).
            let previous: api::ListContainersResponse = rt
                .call(
                    &format!("{RUNTIME}ListContainers"),
                    &api::ListContainersRequest {
                        filter: Some(api::ContainerFilter {
                            pod_sandbox_id: sandbox.id.clone(),
                            label_selector: HashMap::from([(CONTAINER_NAME.to_owned(), spec.name.clone())]),
                        }),
                    },
                )
                .await
                .map_err(err("CreateContainerError"))?;
            for c in previous.containers {
                let r: Result<api::Empty, _> = rt
                    .call(&format!("{RUNTIME}RemoveContainer"), &api::ContainerIdRequest { container_id: c.id.clone() })
                    .await;
                if let Err(e) = r {
                    tracing::warn!(container = %c.id, error = %e, "could not remove an earlier attempt");
                }
            }
            // `{name}/{attempt}.log` under the sandbox's log directory: the
            // directory is made here (a runtime may not), and the logs of
            // attempts before the previous one go.
            crate::logs::prune_attempts(&pod.dir, &spec.name, spec.attempt)
                .await
                .map_err(|e| RuntimeError::new("CreateContainerError", format!("{}: {e}", spec.log.display())))?;
            let log_dir = pod.dir.join("logs");
            let log_path = spec.log.strip_prefix(&log_dir).unwrap_or(&spec.log).to_string_lossy().into_owned();
            let limits = &spec.limits;
            let resources = api::LinuxContainerResources {
                cpu_period: limits.cpu_millis.map_or(0, |_| 100_000),
                cpu_quota: limits.cpu_millis.map_or(0, |m| (m as i64 * 100).max(1000)),
                cpu_shares: limits.cpu_millis.map_or(0, |m| (m as i64 * 1024 / 1000).max(2)),
                memory_limit_in_bytes: limits.memory_bytes.map_or(0, |b| b as i64),
            };
            let config = api::ContainerConfig {
                metadata: Some(api::ContainerMetadata { name: spec.name.clone(), attempt: spec.attempt }),
                image: Some(api::ImageSpec { image: spec.image.clone() }),
                command: spec.command.clone(),
                args: spec.args.clone(),
                working_dir: spec.working_dir.clone(),
                envs: spec.env.iter().map(|(k, v)| api::KeyValue { key: k.clone(), value: v.clone() }).collect(),
                mounts: spec
                    .mounts
                    .iter()
                    .map(|m| api::Mount {
                        container_path: m.container_path.clone(),
                        host_path: m.host_path.to_string_lossy().into_owned(),
                        readonly: m.read_only,
                    })
                    .collect(),
                labels: HashMap::from([
                    (CONTAINER_NAME.to_owned(), spec.name.clone()),
                    (POD_UID.to_owned(), pod.uid.clone()),
                    (NODE_LABEL.to_owned(), rt.cfg.node_name.clone()),
                ]),
                log_path,
                stdin: spec.interactive.stdin,
                stdin_once: spec.interactive.stdin_once,
                tty: spec.interactive.tty,
                linux: Some(api::LinuxContainerConfig { resources: Some(resources), security_context: None }),
            };
            let created: api::CreateContainerResponse = rt
                .call(
                    &format!("{RUNTIME}CreateContainer"),
                    &api::CreateContainerRequest {
                        pod_sandbox_id: sandbox.id.clone(),
                        config: Some(config),
                        sandbox_config: Some(rt.sandbox_config(pod)),
                    },
                )
                .await
                .map_err(err("CreateContainerError"))?;
            let id = created.container_id;
            let started: Result<api::Empty, _> = rt
                .call(&format!("{RUNTIME}StartContainer"), &api::ContainerIdRequest { container_id: id.clone() })
                .await;
            if let Err(e) = started {
                return Err(RuntimeError::new("RunContainerError", e.to_string()));
            }
            Ok(Arc::new(CriContainer {
                rt: Arc::clone(&self.inner),
                id,
                sandbox: sandbox.id.clone(),
                log: spec.log.clone(),
            }) as Arc<dyn Container>)
        })
    }

    fn adopt<'a>(
        &'a self,
        pod: &'a PodInfo,
        sandbox: &'a Sandbox,
        spec: &'a ContainerSpec,
    ) -> BoxFuture<'a, Option<(Arc<dyn Container>, u32)>> {
        Box::pin(async move {
            let rt = &self.inner;
            let req = api::ListContainersRequest {
                filter: Some(api::ContainerFilter {
                    pod_sandbox_id: sandbox.id.clone(),
                    label_selector: HashMap::from([(CONTAINER_NAME.to_owned(), spec.name.clone())]),
                }),
            };
            let list = match rt.call::<_, api::ListContainersResponse>(&format!("{RUNTIME}ListContainers"), &req).await
            {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(sandbox = %sandbox.id, error = %e, "could not list containers to adopt");
                    return None;
                }
            };
            let c = list.containers.into_iter().find(|c| c.state == api::CONTAINER_RUNNING)?;
            let attempt = c.metadata.as_ref().map_or(0, |m| m.attempt);
            let log = crate::logs::log_path(&pod.dir, &spec.name, attempt);
            let adopted: Arc<dyn Container> =
                Arc::new(CriContainer { rt: Arc::clone(&self.inner), id: c.id, sandbox: sandbox.id.clone(), log });
            Some((adopted, attempt))
        })
    }

    fn keeps_containers(&self) -> bool {
        true
    }

    fn pulls_images(&self) -> bool {
        true
    }

    fn cleanup<'a>(&'a self, keep: &'a HashSet<String>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let rt = &self.inner;
            let mine = match rt.sandboxes(HashMap::from([(NODE_LABEL.to_owned(), rt.cfg.node_name.clone())])).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "could not list pod sandboxes");
                    return;
                }
            };
            for s in mine {
                let uid = s.labels.get(POD_UID).cloned().unwrap_or_default();
                if !keep.contains(&uid) {
                    tracing::info!(sandbox = %s.id, uid = %uid, "removing the sandbox of a pod no longer here");
                    rt.drop_sandbox(&s.id).await;
                }
            }
        })
    }
}

/// Every [`POLL`], lists this node's containers once and wakes the waiters
/// of those that exited or are gone; ends when nobody waits.
async fn relist(inner: Weak<Inner>) {
    loop {
        tokio::time::sleep(POLL).await;
        let Some(rt) = inner.upgrade() else { return };
        let ids: Vec<(String, Arc<Notify>)> = {
            let mut w = rt.waiters.lock().unwrap_or_else(|p| p.into_inner());
            if w.by_id.is_empty() {
                w.relisting = false;
                return;
            }
            w.by_id.iter().map(|(k, v)| (k.clone(), Arc::clone(v))).collect()
        };
        let req = api::ListContainersRequest {
            filter: Some(api::ContainerFilter {
                pod_sandbox_id: String::new(),
                label_selector: HashMap::from([(NODE_LABEL.to_owned(), rt.cfg.node_name.clone())]),
            }),
        };
        match rt.call::<_, api::ListContainersResponse>(&format!("{RUNTIME}ListContainers"), &req).await {
            Ok(list) => {
                let live: HashSet<&str> = list
                    .containers
                    .iter()
                    .filter(|c| c.state != api::CONTAINER_EXITED)
                    .map(|c| c.id.as_str())
                    .collect();
                for (id, n) in ids {
                    if !live.contains(id.as_str()) {
                        n.notify_one();
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "container relist"),
        }
    }
}

/// A container started through CRI.
#[derive(Debug)]
struct CriContainer {
    rt: Arc<Inner>,
    id: String,
    /// The pod's sandbox (port forwarding reaches its network namespace).
    sandbox: String,
    log: PathBuf,
}

impl Drop for CriContainer {
    fn drop(&mut self) {
        self.rt.unwatch(&self.id);
    }
}

impl CriContainer {
    fn exit_of(s: &api::ContainerStatus) -> Exit {
        Exit { code: s.exit_code, signal: None, oom_killed: s.reason == "OOMKilled" }
    }

    /// Rotates the log at [`crate::process::LOG_CAP`]: the runtime keeps
    /// writing to the renamed file until told to reopen.
    async fn rotate_log(&self) {
        let Ok(meta) = tokio::fs::metadata(&self.log).await else { return };
        if meta.len() <= crate::process::LOG_CAP {
            return;
        }
        let mut rotated = self.log.clone().into_os_string();
        rotated.push(".1");
        if tokio::fs::rename(&self.log, &rotated).await.is_ok() {
            let r: Result<api::Empty, _> = self
                .rt
                .call(
                    &format!("{RUNTIME}ReopenContainerLog"),
                    &api::ContainerIdRequest { container_id: self.id.clone() },
                )
                .await;
            if let Err(e) = r {
                tracing::warn!(container = %self.id, error = %e, "could not reopen the container log");
            }
        }
    }
}

impl Container for CriContainer {
    fn id(&self) -> String {
        format!("{}://{}", self.rt.runtime_name, self.id)
    }

    fn wait(&self) -> BoxFuture<'_, Exit> {
        Box::pin(async move {
            let ended = self.rt.watch(&self.id);
            loop {
                match self.rt.status(&self.id).await {
                    Ok(s) if s.state == api::CONTAINER_EXITED => return Self::exit_of(&s),
                    Ok(_) => {}
                    Err(e) if e.code() == Some(code::NOT_FOUND) => {
                        // Removed behind edged's back: kubelet reports 137.
                        tracing::warn!(container = %self.id, "container vanished from the runtime");
                        return Exit::code(137);
                    }
                    Err(e) => tracing::warn!(container = %self.id, error = %e, "container status"),
                }
                // Until the relist sees it end; its log is checked meanwhile.
                tokio::select! {
                    () = ended.notified() => {}
                    () = tokio::time::sleep(LOG_CHECK) => self.rotate_log().await,
                }
            }
        })
    }

    fn stop(&self, grace: Duration) -> BoxFuture<'_, Exit> {
        Box::pin(async move {
            let req = api::StopContainerRequest { container_id: self.id.clone(), timeout: grace.as_secs() as i64 };
            let r: Result<api::Empty, _> =
                self.rt.ch.call(&format!("{RUNTIME}StopContainer"), &req, grace + self.rt.cfg.request_timeout).await;
            if let Err(e) = r
                && e.code() != Some(code::NOT_FOUND)
            {
                tracing::warn!(container = %self.id, error = %e, "stop container");
            }
            match self.rt.status(&self.id).await {
                Ok(s) if s.state == api::CONTAINER_EXITED => Self::exit_of(&s),
                _ => Exit::code(137),
            }
        })
    }

    fn exec<'a>(&'a self, argv: &'a [String], timeout: Duration) -> BoxFuture<'a, Result<i32, RuntimeError>> {
        Box::pin(async move {
            let req = api::ExecSyncRequest {
                container_id: self.id.clone(),
                cmd: argv.to_vec(),
                timeout: timeout.as_secs().max(1) as i64,
            };
            let r: api::ExecSyncResponse = self
                .rt
                .ch
                .call(&format!("{RUNTIME}ExecSync"), &req, timeout + Duration::from_secs(5))
                .await
                .map_err(err("ExecError"))?;
            Ok(r.exit_code)
        })
    }

    fn not_applied(&self) -> Vec<String> {
        // The runtime applies limits through its own cgroups or refuses the
        // container.
        Vec::new()
    }

    fn usage(&self) -> BoxFuture<'_, Option<crate::usage::ContainerStat>> {
        Box::pin(async move {
            let req = api::ContainerStatsRequest { container_id: self.id.clone() };
            let r: Result<api::ContainerStatsResponse, _> =
                self.rt.call(&format!("{RUNTIME}ContainerStats"), &req).await;
            match r {
                Ok(r) => {
                    let s = r.stats?;
                    Some(crate::usage::ContainerStat {
                        cpu_ns: s.cpu?.usage_core_nano_seconds?.value,
                        memory_bytes: s.memory.and_then(|m| m.working_set_bytes).map_or(0, |v| v.value),
                    })
                }
                Err(e) => {
                    tracing::debug!(container = %self.id, error = %e, "container stats");
                    None
                }
            }
        })
    }

    /// As kubelet: `Exec` gives a URL on the runtime's streaming server,
    /// which runs the command for the client that connects (`stream.rs`).
    fn exec_session(&self, spec: ExecSpec, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let req = match stream::exec_request(&self.id, &spec) {
                Ok(r) => r,
                Err(why) => return crate::streams::fail(tx, why).await,
            };
            let method = format!("{RUNTIME}Exec");
            let answer = tokio::select! {
                r = self.rt.call::<_, api::ExecResponse>(&method, &req) => r,
                () = tx.reset_by_peer() => return,
            };
            match answer {
                Ok(a) => stream::run(&self.rt.cfg.stream_base, &a.url, &req, tx, rx).await,
                Err(e) => crate::streams::fail(tx, format!("error executing command in container: {e}")).await,
            }
        })
    }

    fn attaches(&self) -> bool {
        true
    }

    /// As kubelet: `Attach` gives a URL on the runtime's streaming server,
    /// which speaks the remote command protocol for the container's own
    /// streams.
    fn attach_session(&self, spec: ExecSpec, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let attach = api::AttachRequest {
                container_id: self.id.clone(),
                stdin: spec.stdin,
                tty: spec.tty,
                stdout: spec.stdout,
                stderr: spec.stderr && !spec.tty,
            };
            // The relay plans its channels from an exec request's flags.
            let plan = api::ExecRequest {
                container_id: self.id.clone(),
                cmd: Vec::new(),
                tty: attach.tty,
                stdin: attach.stdin,
                stdout: attach.stdout,
                stderr: attach.stderr,
            };
            let method = format!("{RUNTIME}Attach");
            let answer = tokio::select! {
                r = self.rt.call::<_, api::UrlResponse>(&method, &attach) => r,
                () = tx.reset_by_peer() => return,
            };
            match answer {
                Ok(a) => stream::run(&self.rt.cfg.stream_base, &a.url, &plan, tx, rx).await,
                Err(e) => crate::streams::fail(tx, format!("error attaching to container: {e}")).await,
            }
        })
    }

    fn forwards(&self) -> bool {
        true
    }

    /// As kubelet: `PortForward` gives a URL on the runtime's streaming
    /// server, which connects inside the pod's network namespace.
    fn forward_session(&self, port: u16, pod: String, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let req = api::PortForwardRequest { pod_sandbox_id: self.sandbox.clone(), port: vec![i32::from(port)] };
            let method = format!("{RUNTIME}PortForward");
            let answer = tokio::select! {
                r = self.rt.call::<_, api::UrlResponse>(&method, &req) => r,
                () = tx.reset_by_peer() => return,
            };
            match answer {
                Ok(a) => forward::run(&self.rt.cfg.stream_base, &a.url, port, &pod, tx, rx).await,
                Err(e) => tx.reset(&format!("error forwarding port {port} to pod {pod}: {e}")),
            }
        })
    }
}
