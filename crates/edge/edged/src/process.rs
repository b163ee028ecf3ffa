//! The process runtime: each container is a supervised host process started
//! from its `command` and `args`, with its `env`, in a working directory
//! under the pod's directory, its own process group (so a stop reaches the
//! whole tree), and stdout/stderr pipes that a task per container copies
//! into the attempt's log file in the CRI log format containerd writes
//! ([`crate::logs`]), rotated at a size cap. The image name is recorded,
//! not pulled. CPU and memory limits go into a cgroup per container where
//! the host lets edged make one ([`crate::cgroup`]); what could not be
//! applied is reported.
//!
//! A process has no mount namespace, so a container's root is its working
//! directory: a volume mounted at `/etc/cfg` appears at `{workdir}/etc/cfg`
//! (a symlink to the volume), and the container reads it by that relative
//! path. Pods share the host's network.
//!
//! Every container process carries its identity in its environment from
//! the moment it exists: `EDGEHIVE_CONTAINER={pods dir}/{pod uid}/{container}/{attempt}`
//! (see [`MARKER`]). A process edged did not start is not its child and
//! cannot be waited for, so what an earlier run left (the edge was killed,
//! its containers were not) is found by that marker in `/proc/{pid}/environ`
//! — also when the edge died between the spawn and any record of it — and
//! killed before a pod starts again: a container never runs twice.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, PidfdFlags, Signal, kill_process_group, pidfd_open, pidfd_send_signal};
use tokio::process::{Child, Command};

use crate::cgroup::{Applied, Cgroups};
pub use crate::runtime::Exit;
use crate::runtime::{BoxFuture, Container, ContainerSpec, ExecSpec, Mount, PodInfo, Runtime, RuntimeError, Sandbox};
use edgehive_viaduct::{StreamRx, StreamTx};

/// The process runtime's name and version, as `nodeInfo.containerRuntimeVersion` shows it.
pub const RUNTIME_VERSION: &str = concat!("process://edgehive-", env!("CARGO_PKG_VERSION"));

/// The spawn after which `EDGEHIVE_FAILPOINT` aborts, if it names one.
fn failpoint(value: &str) -> Option<u64> {
    match value.strip_prefix("edged-after-spawn")? {
        "" => Some(1),
        n => n.strip_prefix('=')?.parse().ok().filter(|n| *n > 0),
    }
}

/// The environment variable every container process carries:
/// `{pods dir}/{pod uid}/{container}/{attempt}`. The pods directory scopes
/// it to one edge (several may share a host); the rest names the container.
pub const MARKER: &str = "EDGEHIVE_CONTAINER";

/// How long the cleanup at start waits for the leftovers it killed to end.
const LEFTOVER_DEADLINE: Duration = Duration::from_secs(5);

/// The process runtime.
#[derive(Debug)]
pub struct ProcessRuntime {
    pods_dir: PathBuf,
    cgroups: Cgroups,
    /// Fault injection for tests: abort edged right after the n-th
    /// container process it spawns, before anything else records it.
    abort_after_spawn: Option<u64>,
    /// Container processes spawned so far (counted for the fault injection).
    spawned: std::sync::atomic::AtomicU64,
}

impl ProcessRuntime {
    /// A runtime whose pods live under `pods_dir`, with this host's cgroups.
    ///
    /// `EDGEHIVE_FAILPOINT=edged-after-spawn` (or `edged-after-spawn=N`) in
    /// the environment makes the process abort right after it spawns its
    /// first (N-th) container process (the crash test uses it).
    pub fn new(pods_dir: impl Into<PathBuf>) -> ProcessRuntime {
        let mut rt = ProcessRuntime::with_cgroups(pods_dir, Cgroups::detect());
        rt.abort_after_spawn = std::env::var("EDGEHIVE_FAILPOINT").ok().as_deref().and_then(failpoint);
        rt
    }

    /// A runtime with the given cgroups.
    pub fn with_cgroups(pods_dir: impl Into<PathBuf>, cgroups: Cgroups) -> ProcessRuntime {
        ProcessRuntime { pods_dir: pods_dir.into(), cgroups, abort_after_spawn: None, spawned: Default::default() }
    }

    /// The marker of one attempt of a container of pod `uid`.
    fn marker(&self, uid: &str, container: &str, attempt: u32) -> String {
        format!("{}/{uid}/{container}/{attempt}", self.pods_dir.display())
    }
}

impl Runtime for ProcessRuntime {
    fn version(&self) -> String {
        RUNTIME_VERSION.to_owned()
    }

    fn run_sandbox<'a>(&'a self, pod: &'a PodInfo) -> BoxFuture<'a, Result<Sandbox, RuntimeError>> {
        // The host is the sandbox: its network, its IP.
        Box::pin(async move { Ok(Sandbox { id: pod.uid.clone(), ip: pod.node_ip.clone() }) })
    }

    fn remove_sandbox<'a>(&'a self, _pod: &'a PodInfo, _sandbox: &'a Sandbox) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn start<'a>(
        &'a self,
        pod: &'a PodInfo,
        _sandbox: &'a Sandbox,
        spec: &'a ContainerSpec,
    ) -> BoxFuture<'a, Result<Arc<dyn Container>, RuntimeError>> {
        Box::pin(async move {
            let argv: Vec<String> = spec.command.iter().chain(&spec.args).cloned().collect();
            if argv.is_empty() {
                return Err(RuntimeError::new("CreateContainerError", StartError::NoCommand.to_string()));
            }
            let workdir = spec.host_dir.clone();
            tokio::fs::create_dir_all(&workdir)
                .await
                .map_err(|e| RuntimeError::new("CreateContainerError", format!("{}: {e}", workdir.display())))?;
            link_mounts(&spec.mounts, &workdir);
            // The current and the previous attempt's logs are kept.
            crate::logs::prune_attempts(&pod.dir, &spec.name, spec.attempt)
                .await
                .map_err(|e| RuntimeError::new("CreateContainerError", format!("{}: {e}", spec.log.display())))?;
            let cgroup = self.cgroups.create(&format!("{}/{}", pod.uid, spec.name), &spec.limits);
            for note in &cgroup.not_applied {
                tracing::warn!(pod = %pod.name, container = %spec.name, "{note}");
            }
            let ps = ProcessSpec {
                argv: crate::cgroup::wrap(&argv, &cgroup.procs),
                env: spec.env.clone(),
                workdir,
                log: spec.log.clone(),
                marker: Some(self.marker(&pod.uid, &spec.name, spec.attempt)),
                abort_after_spawn: self
                    .abort_after_spawn
                    .is_some_and(|n| self.spawned.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 == n),
                stdin: spec.interactive.stdin,
            };
            match start(&ps).await {
                Ok(mut running) => Ok(Arc::new(ProcessContainer {
                    pid: running.pid,
                    pgid: running.pgid,
                    stdin: tokio::sync::Mutex::new(running.stdin.take()),
                    stdin_once: spec.interactive.stdin_once,
                    running: tokio::sync::Mutex::new(running),
                    env: ps.env,
                    workdir: ps.workdir,
                    cgroup,
                }) as Arc<dyn Container>),
                Err(e) => {
                    cgroup.remove();
                    Err(RuntimeError::new("RunContainerError", e.to_string()))
                }
            }
        })
    }

    fn adopt<'a>(
        &'a self,
        _pod: &'a PodInfo,
        _sandbox: &'a Sandbox,
        _spec: &'a ContainerSpec,
    ) -> BoxFuture<'a, Option<(Arc<dyn Container>, u32)>> {
        // A process edged did not start is not its child: it cannot be
        // waited for, so a leftover is stopped and started again instead.
        Box::pin(async { None })
    }

    fn keeps_containers(&self) -> bool {
        false
    }

    fn cleanup<'a>(&'a self, keep: &'a HashSet<String>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Every container process an earlier run left goes, kept pods'
            // too: edged cannot adopt them, and starts those pods again.
            kill_leftovers(&self.pods_dir).await;
            let Ok(mut dirs) = tokio::fs::read_dir(&self.pods_dir).await else { return };
            while let Ok(Some(d)) = dirs.next_entry().await {
                let uid = d.file_name().to_string_lossy().into_owned();
                // Pid files of a version without markers.
                if let Ok(mut cs) = tokio::fs::read_dir(d.path().join("containers")).await {
                    while let Ok(Some(c)) = cs.next_entry().await {
                        if c.path().extension().is_some_and(|e| e == "pid") {
                            let workdir = c.path().with_extension("");
                            reap_leftover(&ProcessSpec { workdir, ..ProcessSpec::default() }).await;
                        }
                    }
                }
                if keep.contains(&uid) {
                    continue;
                }
                tracing::info!(uid = %uid, "removing what an earlier run left of a pod no longer here");
                let _ = tokio::fs::remove_dir_all(d.path()).await;
                self.cgroups.remove_pod(&uid);
            }
        })
    }
}

/// Links each mount under the container's working directory.
fn link_mounts(mounts: &[Mount], workdir: &Path) {
    for m in mounts {
        let rel = m.container_path.trim_start_matches('/');
        if rel.is_empty() || rel.split('/').any(|p| p == "..") {
            tracing::warn!(mount = %m.container_path, "mount path not usable by the process runtime");
            continue;
        }
        let link = workdir.join(rel);
        let made = link
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| match std::fs::symlink_metadata(&link) {
                Ok(_) => std::fs::remove_file(&link),
                Err(_) => Ok(()),
            })
            .and_then(|()| std::os::unix::fs::symlink(&m.host_path, &link));
        if let Err(e) = made {
            tracing::warn!(mount = %m.container_path, error = %e, "volume mount not linked");
        }
    }
}

/// A container of the process runtime.
#[derive(Debug)]
struct ProcessContainer {
    pid: u32,
    pgid: Option<Pid>,
    /// The process's stdin, while open (a container with `stdin`).
    stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    /// `stdinOnce`: the first attach's end closes it.
    stdin_once: bool,
    running: tokio::sync::Mutex<Running>,
    env: Vec<(String, String)>,
    workdir: PathBuf,
    cgroup: Applied,
}

impl Drop for ProcessContainer {
    fn drop(&mut self) {
        self.cgroup.remove();
    }
}

impl Container for ProcessContainer {
    fn id(&self) -> String {
        format!("process://{}", self.pid)
    }

    fn wait(&self) -> BoxFuture<'_, Exit> {
        Box::pin(async move {
            let exit = self.running.lock().await.wait().await;
            Exit { oom_killed: exit.signal == Some(9) && self.cgroup.oom_killed(), ..exit }
        })
    }

    fn stop(&self, grace: Duration) -> BoxFuture<'_, Exit> {
        Box::pin(async move {
            // Signal first: a wait in progress holds the lock until the end.
            if let Some(pg) = self.pgid {
                let _ = kill_process_group(pg, Signal::TERM);
            }
            self.running.lock().await.escalate(grace).await
        })
    }

    fn exec<'a>(&'a self, argv: &'a [String], timeout: Duration) -> BoxFuture<'a, Result<i32, RuntimeError>> {
        Box::pin(async move {
            let Some((program, args)) = argv.split_first() else {
                return Err(RuntimeError::new("ExecError", "empty command"));
            };
            let status = Command::new(program)
                .args(args)
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()))
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .current_dir(&self.workdir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(true)
                .status();
            match tokio::time::timeout(timeout, status).await {
                Ok(Ok(s)) => Ok(s.code().unwrap_or(-1)),
                Ok(Err(e)) => Err(RuntimeError::new("ExecError", format!("{program}: {e}"))),
                Err(_) => Err(RuntimeError::new("ExecError", format!("{program}: no exit within {timeout:?}"))),
            }
        })
    }

    fn not_applied(&self) -> Vec<String> {
        self.cgroup.not_applied.clone()
    }

    fn exec_session(&self, spec: ExecSpec, tx: StreamTx, rx: StreamRx) -> BoxFuture<'_, ()> {
        let at =
            crate::streams::ProcessExec { env: &self.env, workdir: &self.workdir, cgroup_procs: &self.cgroup.procs };
        Box::pin(crate::streams::exec_process(at, spec, tx, rx))
    }

    fn takes_input(&self) -> bool {
        self.stdin.try_lock().map_or(true, |s| s.is_some())
    }

    fn write_input(&self, data: bytes::Bytes) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let mut stdin = self.stdin.lock().await;
            let pipe = stdin.as_mut().ok_or("the container's stdin is closed")?;
            tokio::io::AsyncWriteExt::write_all(pipe, &data)
                .await
                .map_err(|e| format!("write to the container's stdin: {e}"))
        })
    }

    fn input_ended(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.stdin_once {
                self.stdin.lock().await.take();
            }
        })
    }

    fn usage(&self) -> BoxFuture<'_, Option<crate::usage::ContainerStat>> {
        let dirs = self.cgroup.dirs.clone();
        let leader = self.pgid.map(|p| p.as_raw_nonzero().get().unsigned_abs());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                crate::usage::cgroup_stat(&dirs).or_else(|| crate::usage::process_group_stat(leader?))
            })
            .await
            .ok()
            .flatten()
        })
    }
}

/// Largest log file: past it, the file is renamed to `{log}.1` (one kept)
/// and a new one begun.
pub const LOG_CAP: u64 = 10 << 20;

/// How long the end of a container waits for its last output to reach the
/// log (a process it left behind may hold its pipes open longer).
const LOG_DRAIN: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessSpec {
    /// Program and arguments (`command` then `args`).
    pub argv: Vec<String>,
    /// Environment, in order.
    pub env: Vec<(String, String)>,
    /// Working directory (created if missing).
    pub workdir: PathBuf,
    /// Log file for stdout and stderr (CRI log format).
    pub log: PathBuf,
    /// The process's [`MARKER`] value (set in its environment last, so a
    /// container's own `env` cannot hide it).
    pub marker: Option<String>,
    /// Fault injection for tests: abort this process right after the spawn.
    pub abort_after_spawn: bool,
    /// Its stdin is a pipe edged holds (the container's `stdin`), for attach.
    pub stdin: bool,
}

/// Why a container could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No command: the process runtime cannot run an image's entrypoint.
    #[error("no command: the process runtime runs `command`/`args`, it cannot run an image's entrypoint")]
    NoCommand,
    /// The program could not be started.
    #[error("start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The working directory or log could not be prepared.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A running container process.
#[derive(Debug)]
pub struct Running {
    child: Child,
    /// Its stdin, when [`ProcessSpec::stdin`] asked for a pipe.
    pub stdin: Option<tokio::process::ChildStdin>,
    pgid: Option<Pid>,
    /// Its process id.
    pub pid: u32,
    /// The task copying its output into the log, until it ends or is let go.
    pump: Option<tokio::task::JoinHandle<()>>,
}

/// Where a container's process is recorded once it runs: `{workdir}.pid`
/// holds its pid and its start time (field 22 of `/proc/{pid}/stat`), for
/// tools and tests. It is written after the spawn, so a restarted edge does
/// not rely on it: it finds leftovers by their [`MARKER`], and reads pid
/// files only as versions without markers left them.
fn pid_file(spec: &ProcessSpec) -> PathBuf {
    let mut p = spec.workdir.clone().into_os_string();
    p.push(".pid");
    PathBuf::from(p)
}

/// A process's start time in clock ticks since boot, from `/proc`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields resume after its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}

/// Kills the process group recorded in the pid file of `spec`'s working
/// directory, if it is still there (same pid and start time: never a
/// reused pid). Versions before markers recorded processes only so.
async fn reap_leftover(spec: &ProcessSpec) {
    let path = pid_file(spec);
    let Ok(text) = tokio::fs::read_to_string(&path).await else { return };
    let mut it = text.split_whitespace().map(str::parse::<u64>);
    if let (Some(Ok(pid)), Some(Ok(started))) = (it.next(), it.next())
        && let Ok(pid32) = u32::try_from(pid)
        && start_time(pid32) == Some(started)
        && let Some(pg) = i32::try_from(pid).ok().and_then(Pid::from_raw)
    {
        tracing::info!(pid, workdir = %spec.workdir.display(), "stopping a container process left by an earlier run");
        let _ = kill_process_group(pg, Signal::KILL);
    }
    let _ = tokio::fs::remove_file(&path).await;
}

/// Starts a container. What an earlier run left is the runtime's cleanup's
/// business ([`ProcessRuntime`] kills it by its marker before any pod starts).
pub async fn start(spec: &ProcessSpec) -> Result<Running, StartError> {
    let Some((program, args)) = spec.argv.split_first() else { return Err(StartError::NoCommand) };
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| StartError::Io { path, source }
    };
    tokio::fs::create_dir_all(&spec.workdir).await.map_err(io(&spec.workdir))?;
    if let Some(dir) = spec.log.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io(dir))?;
    }
    // Stdout and stderr are pipes a task copies into the log as CRI records.
    let log = crate::logs::LogFile::open(&spec.log, LOG_CAP).await.map_err(io(&spec.log))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()))
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(spec.marker.iter().map(|m| (MARKER, m.as_str())))
        .current_dir(&spec.workdir)
        .stdin(if spec.stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|source| StartError::Spawn { program: program.clone(), source })?;
    if spec.abort_after_spawn {
        tracing::error!(pid = ?child.id(), marker = ?spec.marker, "failpoint edged-after-spawn: aborting");
        std::process::abort();
    }
    let pid = child.id().unwrap_or(0);
    let pgid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    if let Some(started) = start_time(pid) {
        let path = pid_file(spec);
        tokio::fs::write(&path, format!("{pid} {started}\n")).await.map_err(io(&path))?;
    }
    // The pipes as tokio's pipe type, which waits for readability without
    // a read buffer (see `logs::pump`).
    let pipe = |fd: std::io::Result<std::os::fd::OwnedFd>| fd.and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    let stdout = child.stdout.take().map(|o| pipe(o.into_owned_fd()));
    let stderr = child.stderr.take().map(|e| pipe(e.into_owned_fd()));
    let (stdout, stderr) = match (stdout.transpose(), stderr.transpose()) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => return Err(StartError::Io { path: spec.log.clone(), source: e }),
    };
    let pump = tokio::spawn(crate::logs::pump(stdout, stderr, log));
    let stdin = child.stdin.take();
    Ok(Running { child, stdin, pgid, pid, pump: Some(pump) })
}

/// A process an earlier run left: found by its marker, held by a pidfd (so
/// a signal can only reach that very process, never one that reused its pid).
#[derive(Debug)]
struct Leftover {
    pid: u32,
    pidfd: std::os::fd::OwnedFd,
    marker: String,
}

/// The marker in `/proc/{pid}/environ`, if the process carries one under
/// `prefix` (`{pods dir}/`).
fn marker_of(pid: u32, prefix: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let want = format!("{MARKER}=");
    environ.split(|b| *b == 0).find_map(|var| {
        let value = std::str::from_utf8(var.strip_prefix(want.as_bytes())?).ok()?;
        // `{uid}/{container}/{attempt}` after the prefix.
        let rest = value.strip_prefix(prefix)?;
        (rest.split('/').count() == 3).then(|| value.to_owned())
    })
}

/// The processes under `/proc` carrying a marker of `pods_dir`.
fn find_leftovers(pods_dir: &Path) -> Vec<Leftover> {
    let prefix = format!("{}/", pods_dir.display());
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { continue };
        if pid == me {
            continue;
        }
        // The pidfd first: if the environ read below is of another process
        // (this one ended and its pid was reused), signals through the
        // pidfd fail instead of reaching that other process.
        let Ok(pidfd) = pidfd_open(raw, PidfdFlags::empty()) else { continue };
        if let Some(marker) = marker_of(pid, &prefix) {
            out.push(Leftover { pid, pidfd, marker });
        }
    }
    out
}

/// A process's group id, from `/proc`.
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split(' ').nth(2)?.parse().ok()
}

/// Kills every process an earlier run of the edge whose pods live under
/// `pods_dir` left, and waits (up to [`LEFTOVER_DEADLINE`]) for them to end.
/// Returns how many it killed.
pub async fn kill_leftovers(pods_dir: &Path) -> usize {
    let dir = pods_dir.to_owned();
    let found = tokio::task::spawn_blocking(move || find_leftovers(&dir)).await.unwrap_or_default();
    let mut ended = Vec::new();
    for l in found {
        // Stopped, the process cannot end: its pid, and so its group id,
        // stay its own while the group is killed.
        if pidfd_send_signal(&l.pidfd, Signal::STOP).is_err() {
            continue;
        }
        tracing::info!(pid = l.pid, container = %l.marker, "stopping a container process an earlier run left");
        if process_group(l.pid) == Some(l.pid)
            && let Some(pg) = i32::try_from(l.pid).ok().and_then(Pid::from_raw)
        {
            let _ = kill_process_group(pg, Signal::KILL);
        }
        let _ = pidfd_send_signal(&l.pidfd, Signal::KILL);
        ended.push(l);
    }
    let killed = ended.len();
    if killed > 0 {
        let waited = tokio::task::spawn_blocking(move || wait_ended(ended, LEFTOVER_DEADLINE)).await;
        for l in waited.unwrap_or_default() {
            tracing::warn!(pid = l.pid, container = %l.marker, "a killed leftover container process has not ended");
        }
    }
    killed
}

/// Waits until every one of `procs` has ended (its pidfd turns readable),
/// or `deadline` passes; returns those still running.
fn wait_ended(mut procs: Vec<Leftover>, deadline: Duration) -> Vec<Leftover> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let until = tokio::time::Instant::now() + deadline;
    while !procs.is_empty() {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            break;
        }
        let timeout = Timespec { tv_sec: left.as_secs() as i64, tv_nsec: i64::from(left.subsec_nanos()) };
        let ended: Vec<bool> = {
            let mut fds: Vec<PollFd<'_>> = procs.iter().map(|l| PollFd::new(&l.pidfd, PollFlags::IN)).collect();
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) => fds.iter().map(|f| !f.revents().is_empty()).collect(),
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
        };
        let mut it = ended.into_iter();
        procs.retain(|_| !it.next().unwrap_or(false));
    }
    procs
}

impl Running {
    /// Waits for the process to end, and (up to [`LOG_DRAIN`]) for its last
    /// output to reach its log.
    pub async fn wait(&mut self) -> Exit {
        // `Child::wait` may be cancelled and called again.
        let status = self.child.wait().await;
        if let Some(pump) = &mut self.pump {
            // Cancelled here, the next wait waits again.
            let _ = tokio::time::timeout(LOG_DRAIN, pump).await;
            self.pump = None;
        }
        match status {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt as _;
                match (status.code(), status.signal()) {
                    (Some(code), _) => Exit::code(code),
                    (None, Some(sig)) => Exit { code: 128 + sig, signal: Some(sig), oom_killed: false },
                    (None, None) => Exit::code(-1),
                }
            }
            Err(e) => {
                tracing::warn!(pid = self.pid, error = %e, "wait for a container process");
                Exit::code(-1)
            }
        }
    }

    /// SIGTERM to the process group, then SIGKILL after `grace` if it is
    /// still running. Returns how it ended.
    pub async fn stop(&mut self, grace: Duration) -> Exit {
        if let Some(pg) = self.pgid {
            let _ = kill_process_group(pg, Signal::TERM);
        }
        self.escalate(grace).await
    }

    /// Waits `grace` for the process to end, then SIGKILLs its group.
    async fn escalate(&mut self, grace: Duration) -> Exit {
        match tokio::time::timeout(grace, self.wait()).await {
            Ok(exit) => exit,
            Err(_) => {
                if let Some(pg) = self.pgid {
                    let _ = kill_process_group(pg, Signal::KILL);
                }
                let _ = self.child.start_kill();
                self.wait().await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(dir: &Path, script: &str) -> ProcessSpec {
        ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![("GREETING".into(), "hello".into())],
            workdir: dir.join("work"),
            log: dir.join("logs/c.log"),
            ..ProcessSpec::default()
        }
    }

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    }

    /// A process as an earlier, killed run of edged would have left it: not
    /// recorded anywhere, carrying only its marker (here a child of the
    /// test, so that it can be checked and reaped).
    fn leftover(marker: Option<&str>) -> std::process::Child {
        use std::os::unix::process::CommandExt as _;
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("600").env_clear().process_group(0);
        if let Some(m) = marker {
            cmd.env(MARKER, m);
        }
        cmd.spawn().unwrap()
    }

    #[test]
    fn failpoints_name_a_spawn() {
        assert_eq!(failpoint("edged-after-spawn"), Some(1));
        assert_eq!(failpoint("edged-after-spawn=3"), Some(3));
        assert_eq!(failpoint("edged-after-spawn=0"), None);
        assert_eq!(failpoint("meta-before-commit"), None);
    }

    #[tokio::test]
    async fn leftovers_are_found_by_their_marker_and_killed_only_under_this_pods_dir() {
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-leftover");
        let pods = dir.path().join("pods");
        let rt = ProcessRuntime::with_cgroups(&pods, Cgroups::none());
        // A container this runtime starts carries its marker.
        let pod = PodInfo {
            uid: "uid-1".into(),
            name: "p".into(),
            namespace: "default".into(),
            dir: pods.join("uid-1"),
            host_network: true,
            node_ip: "127.0.0.1".into(),
            labels: Default::default(),
        };
        let cspec = ContainerSpec {
            name: "main".into(),
            image: "busybox".into(),
            pull_policy: "Never".into(),
            command: vec!["sleep".into(), "600".into()],
            args: vec![],
            env: vec![(MARKER.into(), "a container cannot hide its marker".into())],
            working_dir: String::new(),
            host_dir: pod.dir.join("containers/main"),
            log: crate::logs::log_path(&pod.dir, "main", 3),
            mounts: vec![],
            limits: Default::default(),
            interactive: Default::default(),
            attempt: 3,
        };
        let sandbox = rt.run_sandbox(&pod).await.unwrap();
        let c = rt.start(&pod, &sandbox, &cspec).await.unwrap();
        let pid: u32 = c.id().strip_prefix("process://").unwrap().parse().unwrap();
        let prefix = format!("{}/", pods.display());
        assert_eq!(marker_of(pid, &prefix), Some(format!("{}/uid-1/main/3", pods.display())));
        c.stop(Duration::from_secs(1)).await;

        // Left by an earlier run of this edge (no pid file: the edge died
        // right after the spawn), another edge's, and an unmarked process.
        let mut mine = leftover(Some(&format!("{}/uid-2/main/0", pods.display())));
        let mut other_edge = leftover(Some(&format!("{}/elsewhere/pods/uid-2/main/0", dir.path().display())));
        let mut unmarked = leftover(None);
        let killed = kill_leftovers(&pods).await;
        assert_eq!(killed, 1);
        let status = mine.wait().unwrap();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9), "{status:?}");
        assert!(alive(other_edge.id()) && alive(unmarked.id()), "only this edge's leftovers go");
        for c in [&mut other_edge, &mut unmarked] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        // Through the runtime's cleanup, with no pid file anywhere, and for
        // a pod that is kept as well: the process runtime adopts nothing.
        let mut kept = leftover(Some(&format!("{}/uid-1/main/3", pods.display())));
        rt.cleanup(&HashSet::from(["uid-1".to_owned()])).await;
        assert_eq!(kept.wait().unwrap().signal(), Some(9));
        assert!(pods.join("uid-1").exists(), "a kept pod's directory stays");
    }

    #[tokio::test]
    async fn exit_codes_env_workdir_and_logs() {
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-process");
        let mut r = start(&spec(dir.path(), "echo $GREETING; pwd; exit 7")).await.unwrap();
        // The exit waits for the last output to reach the log.
        assert_eq!(r.wait().await, Exit::code(7));
        let log = crate::logs::log_text(&dir.path().join("logs/c.log"));
        assert_eq!(log, format!("hello\n{}\n", dir.path().join("work").display()));
        let none = ProcessSpec { argv: vec![], ..spec(dir.path(), "") };
        assert!(matches!(start(&none).await, Err(StartError::NoCommand)));
        let missing = ProcessSpec { argv: vec!["/no/such/program".into()], ..spec(dir.path(), "") };
        assert!(matches!(start(&missing).await, Err(StartError::Spawn { .. })));
    }

    /// The records of a CRI log: (stream, tag, content).
    fn records(path: &Path) -> Vec<(String, String, String)> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .map(|l| {
                let mut f = l.splitn(4, ' ');
                let time = f.next().unwrap();
                assert!(time.len() == 30 && time.ends_with('Z'), "time {time:?} in {l:?}");
                time::OffsetDateTime::parse(time, &time::format_description::well_known::Rfc3339).unwrap();
                let (stream, tag, content) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap());
                (stream.to_owned(), tag.to_owned(), content.to_owned())
            })
            .collect()
    }

    #[tokio::test]
    async fn stdout_and_stderr_become_cri_records() {
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-cri-log");
        // A line of 40,000 bytes: two P records of 16 KiB and the rest as F;
        // output that ends without a newline: P.
        let script = "echo out; echo err >&2; printf '\\n'; \
                      head -c 40000 /dev/zero | tr '\\0' x; echo; printf 'no newline'";
        let mut r = start(&spec(dir.path(), script)).await.unwrap();
        assert_eq!(r.wait().await, Exit::code(0));
        let recs = records(&dir.path().join("logs/c.log"));
        let of = |stream: &str| -> Vec<(String, String)> {
            recs.iter().filter(|r| r.0 == stream).map(|r| (r.1.clone(), r.2.clone())).collect()
        };
        let x = |n: usize| "x".repeat(n);
        let want: Vec<(String, String)> = vec![
            ("F".into(), "out".into()),
            ("F".into(), String::new()),
            ("P".into(), x(16384)),
            ("P".into(), x(16384)),
            ("F".into(), x(40000 - 2 * 16384)),
            ("P".into(), "no newline".into()),
        ];
        assert_eq!(of("stdout"), want);
        assert_eq!(of("stderr"), vec![("F".to_owned(), "err".to_owned())]);
        assert_eq!(recs.len(), 7, "{recs:?}");
    }

    #[tokio::test]
    async fn the_runtime_keeps_the_current_and_the_previous_attempts_log() {
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-attempts");
        let pods = dir.path().join("pods");
        let rt = ProcessRuntime::with_cgroups(&pods, Cgroups::none());
        let pod = PodInfo {
            uid: "uid-1".into(),
            name: "p".into(),
            namespace: "default".into(),
            dir: pods.join("uid-1"),
            host_network: true,
            node_ip: "127.0.0.1".into(),
            labels: Default::default(),
        };
        // The single file of the layout before per-attempt logs goes.
        std::fs::create_dir_all(pod.dir.join("logs")).unwrap();
        std::fs::write(pod.dir.join("logs/main.log"), "old\n").unwrap();
        let sandbox = rt.run_sandbox(&pod).await.unwrap();
        let logs = pod.dir.join("logs/main");
        for attempt in 0..4u32 {
            let log = crate::logs::log_path(&pod.dir, "main", attempt);
            let cspec = ContainerSpec {
                name: "main".into(),
                image: "busybox".into(),
                pull_policy: "Never".into(),
                command: vec!["sh".into(), "-c".into(), format!("echo attempt {attempt}")],
                args: vec![],
                env: vec![],
                working_dir: String::new(),
                host_dir: pod.dir.join("containers/main"),
                log: log.clone(),
                mounts: vec![],
                limits: Default::default(),
                interactive: Default::default(),
                attempt,
            };
            let c = rt.start(&pod, &sandbox, &cspec).await.unwrap();
            assert_eq!(c.wait().await, Exit::code(0));
            assert_eq!(log, logs.join(format!("{attempt}.log")));
            assert_eq!(crate::logs::log_text(&log), format!("attempt {attempt}\n"));
        }
        let mut left: Vec<String> =
            std::fs::read_dir(&logs).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["2.log", "3.log"]);
        assert!(!pod.dir.join("logs/main.log").exists());
    }

    #[tokio::test]
    async fn stop_escalates_to_kill_after_the_grace_period() {
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-stop");
        // Ignores SIGTERM, and has a child in its group.
        let mut r = start(&spec(dir.path(), "trap '' TERM; sleep 60 & wait")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let exit = r.stop(Duration::from_millis(300)).await;
        assert_eq!(exit.signal, Some(9));
        assert_eq!(exit.code, 137);
        // A polite process ends on SIGTERM.
        let mut r = start(&spec(dir.path(), "sleep 60")).await.unwrap();
        let exit = r.stop(Duration::from_secs(10)).await;
        assert_eq!(exit.signal, Some(15));
    }
}
