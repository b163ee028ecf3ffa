//! The runtime interface: what edged asks of whatever runs containers. Two
//! runtimes implement it: [`crate::process::ProcessRuntime`] (a supervised
//! host process per container, no dependency) and [`crate::cri::CriRuntime`]
//! (containerd, or any CRI runtime, over its gRPC socket).
//!
//! A pod gets a sandbox first (the process runtime's is the host itself; a
//! CRI runtime's holds the pod's namespaces and IP), then its containers
//! are started in it one attempt at a time. edged owns restarts, probes and
//! status; a runtime only starts, waits for, stops and execs in containers.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use edgehive_viaduct::{StreamRx, StreamTx};

use crate::cgroup::Limits;

/// A boxed future, so that runtimes can be used as trait objects.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a runtime needs to know of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// The pod's directory on the host (`{root}/pods/{uid}`): volumes,
    /// logs, the process runtime's working directories.
    pub dir: PathBuf,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// The node's address.
    pub node_ip: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
}

/// A pod's sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The runtime's id for it.
    pub id: String,
    /// The pod's IP.
    pub ip: String,
}

/// A volume mounted into a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where the data is on the host.
    pub host_path: PathBuf,
    /// Where the container sees it (`mountPath`).
    pub container_path: String,
    /// `readOnly`.
    pub read_only: bool,
}

/// A container's `stdin`, `stdinOnce` and `tty`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interactive {
    /// Its stdin stays open (for attach).
    pub stdin: bool,
    /// Its stdin closes when the first attach ends.
    pub stdin_once: bool,
    /// It runs on a terminal.
    pub tty: bool,
}

/// One attempt at running a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    /// `name`.
    pub name: String,
    /// `image`.
    pub image: String,
    /// `imagePullPolicy` (`Always`, `IfNotPresent`, `Never`).
    pub pull_policy: String,
    /// `command` (empty: the image's entrypoint).
    pub command: Vec<String>,
    /// `args`.
    pub args: Vec<String>,
    /// Environment, in order.
    pub env: Vec<(String, String)>,
    /// `workingDir` (empty: the image's).
    pub working_dir: String,
    /// The container's directory on the host (`{pod dir}/containers/{name}`).
    pub host_dir: PathBuf,
    /// The log file for stdout and stderr.
    pub log: PathBuf,
    /// Volume mounts.
    pub mounts: Vec<Mount>,
    /// CPU and memory limits.
    pub limits: Limits,
    /// How many times this container was started before.
    pub attempt: u32,
    /// `stdin`, `stdinOnce` and `tty`: the container keeps its input open
    /// for attach (the CRI runtime's interactive containers).
    pub interactive: Interactive,
}

/// How a container ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Exit code (128 + signal for a signalled process, as kubelet reports).
    pub code: i32,
    /// It was killed by this signal, when the runtime says so.
    pub signal: Option<i32>,
    /// The kernel killed it at its memory limit (`reason: OOMKilled`).
    pub oom_killed: bool,
}

impl Exit {
    /// An exit with `code`, no signal known.
    pub fn code(code: i32) -> Exit {
        Exit { code, signal: None, oom_killed: false }
    }
}

/// Why a runtime could not do something; `reason` is what
/// `containerStatuses[].state.waiting.reason` shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct RuntimeError {
    /// Kubelet's reason word (`CreateContainerError`, `ErrImagePull`, …).
    pub reason: &'static str,
    /// What happened.
    pub message: String,
}

impl RuntimeError {
    /// An error with kubelet's `reason`.
    pub fn new(reason: &'static str, message: impl Into<String>) -> RuntimeError {
        RuntimeError { reason, message: message.into() }
    }
}

/// A runtime.
pub trait Runtime: Send + Sync + Debug {
    /// `nodeInfo.containerRuntimeVersion`, e.g. `containerd://1.6.20`.
    fn version(&self) -> String;

    /// Makes the pod's sandbox, replacing one an earlier run of edged left.
    fn run_sandbox<'a>(&'a self, pod: &'a PodInfo) -> BoxFuture<'a, Result<Sandbox, RuntimeError>>;

    /// Stops and removes the pod's sandbox (its containers are stopped
    /// already).
    fn remove_sandbox<'a>(&'a self, pod: &'a PodInfo, sandbox: &'a Sandbox) -> BoxFuture<'a, ()>;

    /// Starts one attempt of a container in the pod's sandbox.
    fn start<'a>(
        &'a self,
        pod: &'a PodInfo,
        sandbox: &'a Sandbox,
        spec: &'a ContainerSpec,
    ) -> BoxFuture<'a, Result<Arc<dyn Container>, RuntimeError>>;

    /// Takes over the container `spec` names that an earlier run of edged
    /// left running in this sandbox: the container and its attempt number
    /// (its restart count). `None` when there is none or the runtime's
    /// containers end with edged.
    fn adopt<'a>(
        &'a self,
        pod: &'a PodInfo,
        sandbox: &'a Sandbox,
        spec: &'a ContainerSpec,
    ) -> BoxFuture<'a, Option<(Arc<dyn Container>, u32)>>;

    /// Containers outlive edged: its shutdown leaves them running, and the
    /// next run adopts them (kubelet's way with a container runtime).
    fn keeps_containers(&self) -> bool;
    /// The runtime pulls images itself as it starts a container (a CRI
    /// runtime). One that does not (the process runtime) has every image
    /// "already present", as kubelet's `Pulled` Event says.
    fn pulls_images(&self) -> bool {
        false
    }

    /// Stops and removes what earlier runs of edged left of pods whose uid
    /// is not in `keep`. A runtime that cannot adopt (the process runtime)
    /// stops every container an earlier run left, kept pods' too: edged
    /// starts those again, and a container never runs twice.
    fn cleanup<'a>(&'a self, keep: &'a HashSet<String>) -> BoxFuture<'a, ()>;
}

/// A started container.
pub trait Container: Send + Sync + Debug {
    /// `containerStatuses[].containerID`, e.g. `containerd://0123…`.
    fn id(&self) -> String;

    /// Waits for the container to end.
    fn wait(&self) -> BoxFuture<'_, Exit>;

    /// Stops it: SIGTERM, then SIGKILL after `grace`. Returns how it ended.
    fn stop(&self, grace: Duration) -> BoxFuture<'_, Exit>;

    /// Runs `argv` in the container (an exec probe); its exit code.
    fn exec<'a>(&'a self, argv: &'a [String], timeout: Duration) -> BoxFuture<'a, Result<i32, RuntimeError>>;

    /// Limits asked for but not enforced, and why (empty when all were).
    fn not_applied(&self) -> Vec<String>;

    /// Runs a command in the container with its standard streams carried by
    /// a stream session in Kubernetes' remote command channels, and ends
    /// with the command's status on the error channel
    /// ([`crate::streams`]). A runtime that cannot says so there.
    fn exec_session(&self, spec: ExecSpec, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        let _ = (spec, rx);
        Box::pin(crate::streams::fail(tx, "exec is not supported by this container runtime".into()))
    }

    /// Whether [`Container::attach_session`] reaches the container's own
    /// streams (otherwise attach shows the container's output from its log).
    fn attaches(&self) -> bool {
        false
    }

    /// Attaches a stream session to the container's own stdin, stdout and
    /// stderr, in the remote command channels as for
    /// [`Container::exec_session`].
    fn attach_session(&self, spec: ExecSpec, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        let _ = (spec, rx);
        Box::pin(crate::streams::fail(tx, "attach is not supported by this container runtime".into()))
    }

    /// Whether the container's stdin is open to attach's input (a
    /// container with `stdin` whose output attach reads from its log).
    fn takes_input(&self) -> bool {
        false
    }

    /// Writes attach's input to the container's stdin.
    fn write_input(&self, data: bytes::Bytes) -> BoxFuture<'_, Result<(), String>> {
        let _ = data;
        Box::pin(async { Err("the container's stdin is not open (its spec has no stdin: true)".to_string()) })
    }

    /// An attach's input ended: with `stdinOnce`, the container's stdin
    /// closes.
    fn input_ended(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Whether [`Container::forward_session`] reaches the pod's ports
    /// (otherwise edged connects to where the node reaches the pod).
    fn forwards(&self) -> bool {
        false
    }

    /// Carries one TCP connection to `port` in the pod of `pod` (its name,
    /// for errors) over a stream session; a failure resets the session.
    fn forward_session(&self, port: u16, pod: String, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        let _ = rx;
        tx.reset(&format!("error forwarding port {port} to pod {pod}: not supported by this container runtime"));
        Box::pin(async {})
    }

    /// Its CPU time and working set now (`kubectl top`); `None` when the
    /// runtime cannot tell.
    fn usage(&self) -> BoxFuture<'_, Option<crate::usage::ContainerStat>> {
        Box::pin(async { None })
    }
}

/// A command run with its streams (`kubectl exec`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecSpec {
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The client sends input.
    pub stdin: bool,
    /// The client reads output.
    pub stdout: bool,
    /// The client reads error output.
    pub stderr: bool,
    /// A terminal.
    pub tty: bool,
}
