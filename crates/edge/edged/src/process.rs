//! The process runtime: each container is a supervised host process started
//! from its `command` and `args`, with its `env`, in a working directory
//! under the pod's directory, its own process group (so a stop reaches the
//! whole tree), and stdout/stderr appended to a log file (the process's own
//! file descriptors: nothing is copied through edged) that is rotated at a
//! size cap. The image name is recorded, not pulled. CPU and memory
//! limits go into a cgroup per container where the host lets edged make
//! one ([`crate::cgroup`]); what could not be applied is reported.
//!
//! A process has no mount namespace, so a container's root is its working
//! directory: a volume mounted at `/etc/cfg` appears at `{workdir}/etc/cfg`
//! (a symlink to the volume), and the container reads it by that relative
//! path. Pods share the host's network.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};

use crate::cgroup::{Applied, Cgroups};
pub use crate::runtime::Exit;
use crate::runtime::{BoxFuture, Container, ContainerSpec, Mount, PodInfo, Runtime, RuntimeError, Sandbox};

/// The process runtime's name and version, as `nodeInfo.containerRuntimeVersion` shows it.
pub const RUNTIME_VERSION: &str = concat!("process://edgehive-", env!("CARGO_PKG_VERSION"));

/// The process runtime.
#[derive(Debug)]
pub struct ProcessRuntime {
    pods_dir: PathBuf,
    cgroups: Cgroups,
}

impl ProcessRuntime {
    /// A runtime whose pods live under `pods_dir`, with this host's cgroups.
    pub fn new(pods_dir: impl Into<PathBuf>) -> ProcessRuntime {
        ProcessRuntime::with_cgroups(pods_dir, Cgroups::detect())
    }

    /// A runtime with the given cgroups.
    pub fn with_cgroups(pods_dir: impl Into<PathBuf>, cgroups: Cgroups) -> ProcessRuntime {
        ProcessRuntime { pods_dir: pods_dir.into(), cgroups }
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
            let cgroup = self.cgroups.create(&format!("{}/{}", pod.uid, spec.name), &spec.limits);
            for note in &cgroup.not_applied {
                tracing::warn!(pod = %pod.name, container = %spec.name, "{note}");
            }
            let ps = ProcessSpec {
                argv: crate::cgroup::wrap(&argv, &cgroup.procs),
                env: spec.env.clone(),
                workdir,
                log: spec.log.clone(),
            };
            match start(&ps).await {
                Ok(running) => Ok(Arc::new(ProcessContainer {
                    pid: running.pid,
                    pgid: running.pgid,
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
            let Ok(mut dirs) = tokio::fs::read_dir(&self.pods_dir).await else { return };
            while let Ok(Some(d)) = dirs.next_entry().await {
                let uid = d.file_name().to_string_lossy().into_owned();
                if keep.contains(&uid) {
                    continue;
                }
                if let Ok(mut cs) = tokio::fs::read_dir(d.path().join("containers")).await {
                    while let Ok(Some(c)) = cs.next_entry().await {
                        if c.path().extension().is_some_and(|e| e == "pid") {
                            let workdir = c.path().with_extension("");
                            reap_leftover(&ProcessSpec { workdir, ..ProcessSpec::default() }).await;
                        }
                    }
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
}

/// Largest log file before it is rotated to `{name}.log.1` (one kept).
pub const LOG_CAP: u64 = 10 << 20;

/// What to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessSpec {
    /// Program and arguments (`command` then `args`).
    pub argv: Vec<String>,
    /// Environment, in order.
    pub env: Vec<(String, String)>,
    /// Working directory (created if missing).
    pub workdir: PathBuf,
    /// Log file for stdout and stderr.
    pub log: PathBuf,
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
    pgid: Option<Pid>,
    /// Its process id.
    pub pid: u32,
    log: PathBuf,
}

/// Where a container's process is recorded: `{workdir}.pid` holds its pid
/// and its start time (field 22 of `/proc/{pid}/stat`), so that a restarted
/// edge can tell its own leftover process from an unrelated one that reused
/// the pid.
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

/// Kills the process group a previous run of this edge left behind (the
/// edge was killed, its containers were not), if it is still there.
pub async fn reap_leftover(spec: &ProcessSpec) {
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

/// Starts a container (after stopping what an earlier run left of it).
pub async fn start(spec: &ProcessSpec) -> Result<Running, StartError> {
    let Some((program, args)) = spec.argv.split_first() else { return Err(StartError::NoCommand) };
    reap_leftover(spec).await;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| StartError::Io { path, source }
    };
    tokio::fs::create_dir_all(&spec.workdir).await.map_err(io(&spec.workdir))?;
    if let Some(dir) = spec.log.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io(dir))?;
    }
    // The log file is the process's stdout and stderr (O_APPEND): nothing
    // passes through edged, no buffer per container.
    let log = std::fs::OpenOptions::new().create(true).append(true).open(&spec.log).map_err(io(&spec.log))?;
    let log2 = log.try_clone().map_err(io(&spec.log))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()))
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&spec.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2))
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|source| StartError::Spawn { program: program.clone(), source })?;
    let pid = child.id().unwrap_or(0);
    let pgid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    if let Some(started) = start_time(pid) {
        let path = pid_file(spec);
        tokio::fs::write(&path, format!("{pid} {started}\n")).await.map_err(io(&path))?;
    }
    Ok(Running { child, pgid, pid, log: spec.log.clone() })
}

impl Running {
    /// Waits for the process to end, rotating its log meanwhile.
    pub async fn wait(&mut self) -> Exit {
        let status = loop {
            // `Child::wait` may be cancelled and called again.
            tokio::select! {
                s = self.child.wait() => break s,
                () = tokio::time::sleep(ROTATE_CHECK) => rotate_log(&self.log).await,
            }
        };
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

/// How often a running container's log size is checked.
const ROTATE_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

/// Rotates a log past [`LOG_CAP`] the way `copytruncate` does: the process
/// holds the file open in append mode, so it is copied to `{log}.1` (one
/// kept) and cut to zero, and the process goes on writing at its new end.
/// What is written between the copy and the cut is lost (a few bytes at
/// most, once per 10 MiB).
pub async fn rotate_log(log: &Path) {
    let Ok(meta) = tokio::fs::metadata(log).await else { return };
    if meta.len() <= LOG_CAP {
        return;
    }
    let mut rotated = log.to_owned().into_os_string();
    rotated.push(".1");
    let cut = async {
        tokio::fs::copy(log, &rotated).await?;
        tokio::fs::OpenOptions::new().write(true).open(log).await?.set_len(0).await
    };
    if let Err(e) = cut.await {
        tracing::warn!(log = %log.display(), error = %e, "log not rotated");
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
        }
    }

    #[tokio::test]
    async fn exit_codes_env_workdir_and_logs() {
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-process");
        let mut r = start(&spec(dir.path(), "echo $GREETING; pwd; exit 7")).await.unwrap();
        assert_eq!(r.wait().await, Exit::code(7));
        // The log is written by a task; give it a moment to flush.
        let mut log = String::new();
        for _ in 0..100 {
            log = std::fs::read_to_string(dir.path().join("logs/c.log")).unwrap_or_default();
            if log.lines().count() >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(log.lines().next(), Some("hello"));
        assert!(log.contains("/work"), "{log}");
        let none = ProcessSpec { argv: vec![], ..spec(dir.path(), "") };
        assert!(matches!(start(&none).await, Err(StartError::NoCommand)));
        let missing = ProcessSpec { argv: vec!["/no/such/program".into()], ..spec(dir.path(), "") };
        assert!(matches!(start(&missing).await, Err(StartError::Spawn { .. })));
    }

    #[tokio::test]
    async fn a_log_past_its_cap_is_copied_and_cut_while_the_writer_goes_on() {
        use std::io::Write as _;
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-rotate");
        let log = dir.path().join("c.log");
        let mut writer = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
        writer.write_all(&vec![b'a'; LOG_CAP as usize]).unwrap();
        rotate_log(&log).await;
        assert_eq!(std::fs::metadata(&log).unwrap().len(), LOG_CAP, "not past the cap: left alone");
        writer.write_all(b"b\n").unwrap();
        rotate_log(&log).await;
        assert_eq!(std::fs::metadata(dir.path().join("c.log.1")).unwrap().len(), LOG_CAP + 2);
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 0);
        // The writer's next line lands at the start of the cut file.
        writer.write_all(b"after\n").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "after\n");
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
