//! The stream sessions the cloud opens to this node (docs/protocol.md,
//! "Stream sessions"): a container's log, a command run in a container
//! (exec), a container's output (attach) and a pod's port, for `kubectl
//! logs`, `exec`, `cp`, `attach` and `port-forward`; the node's resource
//! usage for `kubectl top`; and the node's own endpoints for
//! `nodes/{name}/proxy`.
//!
//! EdgeHub hands each session to a [`SessionServer`]; it reads the
//! [`SessionRequest`] in the session's header, finds the pod and container
//! among the pods edged runs, and answers with a [`SessionReply`] first: a
//! refusal carries the status the API server gives the client (no such pod
//! or container, a container that has not started, no previous attempt).
//! Then it serves the session until it ends or the cloud resets it, which
//! stops whatever the session started (a followed log, an exec's process).
//! At most [`MAX_SESSIONS`] are served at once; more are refused.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use edgehive_model::session::{SessionKind, SessionReply, SessionRequest, channel};
use edgehive_viaduct::stream::MAX_DATA;
use edgehive_viaduct::{Stream, StreamRx, StreamTx};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::pod::PodState;
use crate::runtime::ExecSpec;
use crate::usage::{Sampler, Subject};

/// Most sessions served at once; more are refused.
pub const MAX_SESSIONS: usize = 128;

/// A pod edged runs, as sessions find it.
#[derive(Debug, Clone)]
pub(crate) struct PodEntry {
    pub(crate) uid: String,
    pub(crate) state: Arc<Mutex<PodState>>,
}

/// The pods edged runs, by `{namespace}/{name}`.
pub(crate) type PodTable = Arc<Mutex<HashMap<String, PodEntry>>>;

/// Serves the stream sessions the cloud opens to this node.
#[derive(Debug, Clone)]
pub struct SessionServer {
    pods: PodTable,
    sampler: Arc<Sampler>,
}

impl SessionServer {
    pub(crate) fn new(pods: PodTable, sampler: Arc<Sampler>) -> SessionServer {
        SessionServer { pods, sampler }
    }

    /// Serves every session `sessions` yields until it ends or `cancel`.
    pub async fn run(self, mut sessions: mpsc::Receiver<Stream>, cancel: CancellationToken) {
        let permits = Arc::new(Semaphore::new(MAX_SESSIONS));
        let tasks = tokio_util::task::TaskTracker::new();
        loop {
            let s = tokio::select! {
                () = cancel.cancelled() => break,
                s = sessions.recv() => match s { Some(s) => s, None => break },
            };
            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                let (mut tx, _rx) = s.split();
                let why = format!("the node serves at most {MAX_SESSIONS} stream sessions at once");
                let _ = reply(&mut tx, &SessionReply::refuse(503, "ServiceUnavailable", why)).await;
                continue;
            };
            let this = self.clone();
            let cancel = cancel.clone();
            tasks.spawn(async move {
                let _permit = permit;
                tokio::select! {
                    () = this.serve(s) => {}
                    // Dropping the session resets it at the cloud.
                    () = cancel.cancelled() => {}
                }
            });
        }
        tasks.close();
        tasks.wait().await;
    }

    /// Serves one session.
    pub(crate) async fn serve(&self, s: Stream) {
        let request: Result<SessionRequest, _> = serde_json::from_slice(s.header());
        let (mut tx, rx) = s.split();
        let request = match request {
            Ok(r) => r,
            Err(e) => {
                let _ = reply(&mut tx, &SessionReply::refuse(400, "BadRequest", format!("session header: {e}"))).await;
                return;
            }
        };
        match request.kind {
            Some(SessionKind::Metrics) => {
                let summary = self.sampler.summary(self.subjects()).await;
                if reply(&mut tx, &SessionReply::ok_with("application/json")).await.is_ok() {
                    send_body(tx, serde_json::to_vec(&*summary).unwrap_or_default()).await;
                }
                return;
            }
            Some(SessionKind::Proxy) => {
                match self.proxy(&request.path).await {
                    Ok((content_type, body)) => {
                        if reply(&mut tx, &SessionReply::ok_with(content_type)).await.is_ok() {
                            send_body(tx, body).await;
                        }
                    }
                    Err(refusal) => {
                        let _ = reply(&mut tx, &refusal).await;
                    }
                }
                return;
            }
            _ => {}
        }
        let target = match self.find(&request) {
            Ok(t) => t,
            Err(refusal) => {
                tracing::info!(pod = %request.pod, container = %request.container, message = %refusal.message, "stream session refused");
                let _ = reply(&mut tx, &refusal).await;
                return;
            }
        };
        tracing::info!(pod = %format!("{}/{}", request.namespace, request.pod), container = %request.container,
            kind = ?request.kind, "stream session");
        match (request.kind, target) {
            (Some(SessionKind::Log), Target::Log { path, entry, index }) => {
                if reply(&mut tx, &SessionReply::ok()).await.is_err() {
                    return;
                }
                serve_log(tx, rx, path, &request, entry, index).await;
            }
            (Some(SessionKind::Attach), Target::Log { path, entry, index }) => {
                if reply(&mut tx, &SessionReply::ok()).await.is_err() {
                    return;
                }
                let live = entry.state.lock().unwrap_or_else(|p| p.into_inner()).containers[index].live.clone();
                match live {
                    Some(live) if live.container.attaches() => {
                        let spec = ExecSpec {
                            command: Vec::new(),
                            stdin: request.stdin,
                            stdout: request.stdout,
                            stderr: request.stderr,
                            tty: request.tty,
                        };
                        live.container.attach_session(spec, tx, rx).await;
                    }
                    _ => serve_attach(tx, rx, path, entry, index).await,
                }
            }
            (Some(SessionKind::Exec), Target::Exec(live)) => {
                if reply(&mut tx, &SessionReply::ok()).await.is_err() {
                    return;
                }
                let spec = ExecSpec {
                    command: request.command.clone(),
                    stdin: request.stdin,
                    stdout: request.stdout,
                    stderr: request.stderr,
                    tty: request.tty,
                };
                live.container.exec_session(spec, tx, rx).await;
            }
            (Some(SessionKind::Portforward), Target::Forward(host, port)) => {
                if reply(&mut tx, &SessionReply::ok()).await.is_err() {
                    return;
                }
                serve_forward(tx, rx, host, port, &request.pod).await;
            }
            (Some(SessionKind::Portforward), Target::ForwardVia(live, port)) => {
                if reply(&mut tx, &SessionReply::ok()).await.is_err() {
                    return;
                }
                live.container.forward_session(port, request.pod.clone(), tx, rx).await;
            }
            _ => {
                let _ = reply(&mut tx, &SessionReply::refuse(500, "InternalError", "session kind mismatch")).await;
            }
        }
    }

    /// The running containers, for the sampler.
    fn subjects(&self) -> Vec<Subject> {
        let pods: Vec<(String, PodEntry)> =
            self.pods.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|(k, e)| (k.clone(), e.clone())).collect();
        let mut out = Vec::new();
        for (key, entry) in pods {
            let Some((namespace, pod)) = key.split_once('/') else { continue };
            let state = entry.state.lock().unwrap_or_else(|p| p.into_inner());
            for c in &state.containers {
                if let Some(live) = &c.live {
                    out.push(Subject {
                        namespace: namespace.to_string(),
                        pod: pod.to_string(),
                        uid: entry.uid.clone(),
                        container: c.name().to_string(),
                        id: live.container.id(),
                        handle: Arc::clone(&live.container),
                    });
                }
            }
        }
        out
    }

    /// One of the node's own endpoints (a GET of `path`): its media type
    /// and body, or the refusal.
    async fn proxy(&self, path: &str) -> Result<(&'static str, Vec<u8>), SessionReply> {
        let route = path.split('?').next().unwrap_or("").trim_end_matches('/');
        match route {
            "/healthz" => Ok(("text/plain; charset=utf-8", b"ok".to_vec())),
            "/pods" => {
                let pods: Vec<(String, PodEntry)> = self
                    .pods
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .map(|(k, e)| (k.clone(), e.clone()))
                    .collect();
                let items: Vec<_> = pods
                    .into_iter()
                    .filter_map(|(key, e)| {
                        let (namespace, name) = key.split_once('/')?;
                        let status = e.state.lock().unwrap_or_else(|p| p.into_inner()).status("");
                        Some(json!({
                            "metadata": {"name": name, "namespace": namespace, "uid": e.uid},
                            "status": status,
                        }))
                    })
                    .collect();
                let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items});
                Ok(("application/json", serde_json::to_vec(&list).unwrap_or_default()))
            }
            "/stats/summary" => {
                let s = self.sampler.summary(self.subjects()).await;
                Ok(("application/json", serde_json::to_vec(&crate::usage::stats_summary(&s)).unwrap_or_default()))
            }
            "/metrics/resource" => {
                let s = self.sampler.summary(self.subjects()).await;
                Ok(("text/plain; version=0.0.4; charset=utf-8", crate::usage::resource_metrics(&s).into_bytes()))
            }
            _ => Err(SessionReply::refuse(
                404,
                "NotFound",
                format!(
                    "the node serves no {route:?}; it serves /healthz, /pods, /stats/summary and /metrics/resource"
                ),
            )),
        }
    }

    /// What a request reaches, or the refusal.
    fn find(&self, r: &SessionRequest) -> Result<Target, SessionReply> {
        let not_found = || SessionReply::refuse(404, "NotFound", format!("pods \"{}\" not found", r.pod));
        let kind = r.kind.ok_or_else(|| SessionReply::refuse(400, "BadRequest", "session kind missing or unknown"))?;
        let entry =
            self.pods.lock().unwrap_or_else(|p| p.into_inner()).get(&format!("{}/{}", r.namespace, r.pod)).cloned();
        let entry = entry.ok_or_else(not_found)?;
        if !r.uid.is_empty() && r.uid != entry.uid {
            return Err(not_found());
        }
        let state = entry.state.lock().unwrap_or_else(|p| p.into_inner());
        if kind == SessionKind::Portforward {
            let port = r
                .port
                .filter(|p| *p > 0)
                .ok_or_else(|| SessionReply::refuse(400, "BadRequest", "a port between 1 and 65535 must be given"))?;
            let live = state.containers.iter().find_map(|c| c.live.clone());
            if let Some(live) = live.as_ref().filter(|l| l.container.forwards()) {
                return Ok(Target::ForwardVia(live.clone(), port));
            }
            return match (&state.reach, live.is_some()) {
                (Some(host), true) => Ok(Target::Forward(host.clone(), port)),
                _ => Err(SessionReply::refuse(
                    400,
                    "BadRequest",
                    format!("pod {} is not running: no container of it runs", r.pod),
                )),
            };
        }
        let Some(index) = state.containers.iter().position(|c| c.name() == r.container) else {
            return Err(SessionReply::refuse(
                400,
                "BadRequest",
                format!("container {} is not valid for pod {}", r.container, r.pod),
            ));
        };
        let c = &state.containers[index];
        match kind {
            SessionKind::Log | SessionKind::Attach => {
                let path = if r.log.previous && kind == SessionKind::Log {
                    c.previous_log.clone().ok_or_else(|| {
                        SessionReply::refuse(
                            400,
                            "BadRequest",
                            format!("previous terminated container \"{}\" in pod \"{}\" not found", r.container, r.pod),
                        )
                    })?
                } else {
                    match (&c.log, c.waiting_reason()) {
                        (Some(p), _) if kind == SessionKind::Log || c.live.is_some() => p.clone(),
                        (_, reason) => {
                            return Err(SessionReply::refuse(
                                400,
                                "BadRequest",
                                format!(
                                    "container \"{}\" in pod \"{}\" is waiting to start: {}",
                                    r.container,
                                    r.pod,
                                    reason.unwrap_or_else(|| "ContainerCreating".into())
                                ),
                            ));
                        }
                    }
                };
                drop(state);
                Ok(Target::Log { path, entry, index })
            }
            SessionKind::Exec => match &c.live {
                Some(live) => Ok(Target::Exec(live.clone())),
                None => Err(SessionReply::refuse(
                    400,
                    "BadRequest",
                    format!("container not found ({:?}): it is not running", r.container),
                )),
            },
            SessionKind::Portforward | SessionKind::Metrics | SessionKind::Proxy => {
                Err(SessionReply::refuse(500, "InternalError", "session kind answered before containers are looked up"))
            }
        }
    }
}

enum Target {
    Log {
        path: PathBuf,
        entry: PodEntry,
        index: usize,
    },
    Exec(crate::pod::Live),
    /// The host and port a forwarded connection goes to.
    Forward(String, u16),
    /// A port the runtime reaches in the pod's network namespace.
    ForwardVia(crate::pod::Live, u16),
}

/// Longest wait for a forwarded port to accept the connection.
const FORWARD_CONNECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// A port-forward: a TCP connection to the pod's port, its bytes both ways
/// until both directions ended. A port that cannot be reached resets the
/// session with why (the API shows it on the port's error channel).
async fn serve_forward(mut tx: StreamTx, mut rx: StreamRx, host: String, port: u16, pod: &str) {
    let addr = format!("{host}:{port}");
    let tcp = match tokio::time::timeout(FORWARD_CONNECT_DEADLINE, tokio::net::TcpStream::connect(&addr)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            tx.reset(&format!("error forwarding port {port} to pod {pod}: dial tcp {addr}: {e}"));
            return;
        }
        Err(_) => {
            tx.reset(&format!("error forwarding port {port} to pod {pod}: dial tcp {addr}: no answer within 5s"));
            return;
        }
    };
    let _ = tcp.set_nodelay(true);
    let (mut read, mut write) = tcp.into_split();
    let upstream = async move {
        loop {
            match rx.recv().await {
                Ok(Some(b)) => {
                    if write.write_all(&b).await.is_err() {
                        return;
                    }
                }
                Ok(None) => {
                    let _ = write.shutdown().await;
                    return;
                }
                Err(_) => return,
            }
        }
    };
    let downstream = async move {
        let mut buf = vec![0u8; MAX_DATA];
        loop {
            match read.read(&mut buf).await {
                Ok(0) => {
                    let _ = tx.finish().await;
                    return Some(tx);
                }
                Ok(n) => {
                    if tx.send(Bytes::copy_from_slice(&buf[..n])).await.is_err() {
                        return None;
                    }
                }
                Err(e) => {
                    tx.reset(&format!("reading port {port}: {e}"));
                    return None;
                }
            }
        }
    };
    // Each direction ends on its own (a half-closed connection goes on);
    // the session ends when both have.
    let ((), tx) = tokio::join!(upstream, downstream);
    drop(tx);
}

/// Sends the session's first frame.
async fn reply(tx: &mut StreamTx, r: &SessionReply) -> Result<(), edgehive_viaduct::StreamError> {
    tx.send(Bytes::from(serde_json::to_vec(r).unwrap_or_default())).await
}

/// Sends `body` in frames and finishes.
async fn send_body(mut tx: StreamTx, body: Vec<u8>) {
    let body = Bytes::from(body);
    for at in (0..body.len()).step_by(MAX_DATA) {
        if tx.send(body.slice(at..(at + MAX_DATA).min(body.len()))).await.is_err() {
            return;
        }
    }
    let _ = tx.finish().await;
}

/// Whether the attempt that writes `path` may still write to it.
fn still_writing(entry: &PodEntry, index: usize, path: &std::path::Path) -> bool {
    let state = entry.state.lock().unwrap_or_else(|p| p.into_inner());
    state.containers.get(index).is_some_and(|c| c.live.is_some() && c.log.as_deref() == Some(path))
}

/// Streams a log, then finishes; a reset from the cloud stops it.
async fn serve_log(
    mut tx: StreamTx,
    _rx: StreamRx,
    path: PathBuf,
    request: &SessionRequest,
    entry: PodEntry,
    index: usize,
) {
    let (out, mut chunks) = mpsc::channel::<Bytes>(4);
    let writing = {
        let (entry, path) = (entry.clone(), path.clone());
        move || still_writing(&entry, index, &path)
    };
    let opts = request.log.clone();
    let read = async move {
        if let Err(e) = crate::logs::stream_log(&path, &opts, &writing, &out).await {
            tracing::warn!(log = %path.display(), error = %e, "log not read");
        }
    };
    // The forwarder owns `chunks`: when the session fails it drops them,
    // which ends the reader's sends; the reader ends when the log does,
    // which ends the forwarder.
    let forward = async move {
        while let Some(b) = chunks.recv().await {
            if tx.send(b).await.is_err() {
                return None;
            }
        }
        Some(tx)
    };
    let ((), tx) = tokio::join!(read, forward);
    if let Some(mut tx) = tx {
        let _ = tx.finish().await;
    }
}

/// Attach: the container's output from now on, as remote command stdout,
/// until the attempt ends. Input is not taken: the container's stdin is
/// not open.
async fn serve_attach(tx: StreamTx, mut rx: StreamRx, path: PathBuf, entry: PodEntry, index: usize) {
    let live = entry.state.lock().unwrap_or_else(|p| p.into_inner()).containers.get(index).and_then(|c| c.live.clone());
    // The client's input goes to the container's stdin, if it is open;
    // the output comes from the log.
    let input = async move {
        let Some(live) = live.filter(|l| l.container.takes_input()) else {
            // Nothing to write to: the input is read and dropped.
            while let Ok(Some(_)) = rx.recv().await {}
            return std::future::pending::<()>().await;
        };
        loop {
            match rx.recv().await {
                Ok(Some(f)) if f.first() == Some(&channel::STDIN) => {
                    if let Err(e) = live.container.write_input(f.slice(1..)).await {
                        tracing::info!(error = %e, "attach input");
                    }
                }
                Ok(Some(f)) if f.first() == Some(&channel::CLOSE) && f.get(1) == Some(&channel::STDIN) => {
                    live.container.input_ended().await;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    live.container.input_ended().await;
                    return std::future::pending::<()>().await;
                }
            }
        }
    };
    tokio::select! {
        () = input => {}
        () = attach_output(tx, path, entry, index) => {}
    }
}

/// The container's output from its log, as an attach's stdout.
async fn attach_output(mut tx: StreamTx, path: PathBuf, entry: PodEntry, index: usize) {
    let opts = edgehive_model::session::LogOptions { follow: true, tail_lines: Some(0), ..Default::default() };
    let (out, mut chunks) = mpsc::channel::<Bytes>(4);
    let writing = {
        let (entry, path) = (entry.clone(), path.clone());
        move || still_writing(&entry, index, &path)
    };
    let read = async move {
        let _ = crate::logs::stream_log(&path, &opts, &writing, &out).await;
    };
    let forward = async move {
        while let Some(b) = chunks.recv().await {
            for part in b.chunks(MAX_DATA - 1) {
                if tx.send(framed(channel::STDOUT, part)).await.is_err() {
                    return None;
                }
            }
        }
        Some(tx)
    };
    let ((), tx) = tokio::join!(read, forward);
    if let Some(mut tx) = tx {
        let _ = tx.send(status(None)).await;
        let _ = tx.finish().await;
    }
}

/// One channel frame.
pub(crate) fn framed(ch: u8, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(data.len() + 1);
    b.extend_from_slice(&[ch]);
    b.extend_from_slice(data);
    b.freeze()
}

/// The final status frame: success, or a failure with an exit code or a
/// message, as kubelet writes it (kubectl takes the exit code from it).
pub(crate) fn status(failure: Option<Result<i32, String>>) -> Bytes {
    let v = match failure {
        None | Some(Ok(0)) => json!({"metadata": {}, "status": "Success"}),
        Some(Ok(code)) => json!({
            "metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        Some(Err(message)) => json!({"metadata": {}, "status": "Failure", "message": message}),
    };
    framed(channel::ERROR, &serde_json::to_vec(&v).unwrap_or_default())
}

/// Ends a remote command session with a failure message.
pub(crate) async fn fail(mut tx: StreamTx, message: String) {
    let _ = tx.send(status(Some(Err(message)))).await;
    let _ = tx.finish().await;
}

/// Runs `cmd` as an exec's process: its stdin, stdout and stderr carried by
/// the session's channels, its exit status last. A reset from the cloud
/// kills it (its whole process group).
pub(crate) async fn run_exec(mut cmd: tokio::process::Command, spec: &ExecSpec, mut tx: StreamTx, rx: StreamRx) {
    let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
    cmd.stdin(piped(spec.stdin))
        .stdout(piped(spec.stdout))
        .stderr(piped(spec.stderr && !spec.tty))
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let program = spec.command.first().cloned().unwrap_or_default();
            let why = if e.kind() == std::io::ErrorKind::NotFound {
                format!("exec: {program:?}: executable file not found in $PATH")
            } else {
                format!("exec: {program:?}: {e}")
            };
            return fail(tx, format!("failed to exec in container: starting container process caused: {why}")).await;
        }
    };
    let pgid = child.id().and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw);
    let (out, mut chunks) = mpsc::channel::<Bytes>(8);
    let readers: Vec<_> = [
        child.stdout.take().map(|r| (channel::STDOUT, Box::new(r) as Box<dyn AsyncRead + Send + Unpin>)),
        child.stderr.take().map(|r| (channel::STDERR, Box::new(r) as Box<dyn AsyncRead + Send + Unpin>)),
    ]
    .into_iter()
    .flatten()
    .map(|(ch, r)| tokio::spawn(copy_out(ch, r, out.clone())))
    .collect();
    drop(out);
    let stdin = child.stdin.take();
    let input = tokio::spawn(copy_in(rx, stdin));
    // Output until every reader ended (the process and its children closed
    // their outputs), then the exit, while the session lasts: a reset (the
    // client went away) ends a command that writes nothing too.
    let mut sent = true;
    loop {
        tokio::select! {
            b = chunks.recv() => match b {
                Some(b) => {
                    if tx.send(b).await.is_err() {
                        sent = false;
                        break;
                    }
                }
                None => break,
            },
            () = tx.reset_by_peer() => {
                sent = false;
                break;
            }
        }
    }
    let waited = if sent {
        tokio::select! {
            w = child.wait() => Some(w),
            () = tx.reset_by_peer() => None,
        }
    } else {
        None
    };
    let Some(waited) = waited else {
        if let Some(pg) = pgid {
            let _ = rustix::process::kill_process_group(pg, rustix::process::Signal::KILL);
        }
        let _ = child.kill().await;
        input.abort();
        for r in readers {
            r.abort();
        }
        return;
    };
    let code = match waited {
        Ok(s) => exit_code(s),
        Err(e) => {
            input.abort();
            return fail(tx, format!("waiting for the command: {e}")).await;
        }
    };
    input.abort();
    let _ = tx.send(status(Some(Ok(code)))).await;
    let _ = tx.finish().await;
}

fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().or_else(|| s.signal().map(|sig| 128 + sig)).unwrap_or(-1)
}

/// Copies one output of the process into channel frames.
async fn copy_out(ch: u8, mut r: Box<dyn AsyncRead + Send + Unpin>, out: mpsc::Sender<Bytes>) {
    let mut buf = vec![0u8; MAX_DATA - 1];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if out.send(framed(ch, &buf[..n])).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Copies the client's stdin frames into the process; closes its stdin at
/// the client's close of stdin (v5) or the end of its direction. Other
/// channels (resize without a terminal) are ignored.
async fn copy_in(mut rx: StreamRx, mut stdin: Option<tokio::process::ChildStdin>) {
    loop {
        match rx.recv().await {
            Ok(Some(f)) if f.first() == Some(&channel::STDIN) => {
                if let Some(w) = stdin.as_mut()
                    && w.write_all(&f[1..]).await.is_err()
                {
                    stdin = None;
                }
            }
            Ok(Some(f)) if f.first() == Some(&channel::CLOSE) && f.get(1) == Some(&channel::STDIN) => {
                stdin = None;
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

/// What the process runtime runs an exec's command with: the container's
/// environment, directory and cgroups.
#[derive(Debug, Clone)]
pub(crate) struct ProcessExec<'a> {
    pub(crate) env: &'a [(String, String)],
    pub(crate) workdir: &'a std::path::Path,
    pub(crate) cgroup_procs: &'a [PathBuf],
}

/// Runs an exec for the process runtime: a process in the container's
/// directory with its environment, joining its cgroups; with `tty`, on a
/// new pseudo-terminal that is the controlling terminal of a new session.
pub(crate) async fn exec_process(c: ProcessExec<'_>, spec: ExecSpec, tx: StreamTx, rx: StreamRx) {
    if spec.command.is_empty() {
        return fail(tx, "you must specify at least one command for the container".into()).await;
    }
    let argv = crate::cgroup::wrap(&spec.command, c.cgroup_procs);
    let build = |argv: &[String]| {
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()))
            .envs(c.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(c.workdir);
        cmd
    };
    if spec.tty {
        // `setsid --ctty` makes the terminal on its stdin the controlling
        // terminal of a new session (there is no pre_exec: unsafe code is
        // forbidden); its pid is then the session's process group.
        let mut with_session = vec!["setsid".to_owned(), "--ctty".to_owned()];
        with_session.extend(argv);
        let mut cmd = build(&with_session);
        if !c.env.iter().any(|(k, _)| k == "TERM") {
            cmd.env("TERM", "xterm");
        }
        return run_tty(cmd, &spec, tx, rx).await;
    }
    run_exec(build(&argv), &spec, tx, rx).await
}

/// An exec on a pseudo-terminal: its output is stdout (a terminal merges
/// stderr into it), resize frames set its size.
async fn run_tty(mut cmd: tokio::process::Command, spec: &ExecSpec, mut tx: StreamTx, mut rx: StreamRx) {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let opened = (|| -> std::io::Result<(std::os::fd::OwnedFd, std::fs::File)> {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        grantpt(&master)?;
        unlockpt(&master)?;
        let name = ptsname(&master, Vec::new())?;
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes()));
        let slave = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
        Ok((master, slave))
    })();
    let (master, slave) = match opened {
        Ok(p) => p,
        Err(e) => return fail(tx, format!("could not open a terminal for the command: {e}")).await,
    };
    let io = |f: &std::fs::File| f.try_clone().map(Stdio::from);
    let (stdin, stdout, stderr) = match (io(&slave), io(&slave), io(&slave)) {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        _ => return fail(tx, "could not set up the terminal".into()).await,
    };
    cmd.stdin(stdin).stdout(stdout).stderr(stderr).kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail(tx, format!("failed to exec in container: {e}")).await,
    };
    // The command keeps copies of the terminal's other end: closed here,
    // so that reading the terminal ends when the process does.
    drop(cmd);
    drop(slave);
    let pgid = child.id().and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw);
    let master = std::fs::File::from(master);
    let Ok(writer) = master.try_clone() else {
        return fail(tx, "could not set up the terminal".into()).await;
    };
    let resize_fd = match master.try_clone() {
        Ok(f) => f,
        Err(_) => return fail(tx, "could not set up the terminal".into()).await,
    };
    let stdin_wanted = spec.stdin;
    // Input and resizes go to the terminal; reads of it block, so they run
    // on tokio's blocking pool (tokio::fs::File).
    let input = tokio::spawn(async move {
        let mut w = tokio::fs::File::from_std(writer);
        loop {
            match rx.recv().await {
                Ok(Some(f)) if f.first() == Some(&channel::STDIN) && stdin_wanted => {
                    if w.write_all(&f[1..]).await.is_err() || w.flush().await.is_err() {
                        return;
                    }
                }
                Ok(Some(f)) if f.first() == Some(&channel::RESIZE) => {
                    if let Ok(size) = serde_json::from_slice::<serde_json::Value>(&f[1..]) {
                        let dim = |k: &str| size[k].as_u64().and_then(|v| u16::try_from(v).ok()).unwrap_or(0);
                        let ws = rustix::termios::Winsize {
                            ws_row: dim("Height"),
                            ws_col: dim("Width"),
                            ws_xpixel: 0,
                            ws_ypixel: 0,
                        };
                        let _ = rustix::termios::tcsetwinsize(&resize_fd, ws);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => return,
            }
        }
    });
    let mut reader = tokio::fs::File::from_std(master);
    let mut buf = vec![0u8; MAX_DATA - 1];
    let mut gone = false;
    loop {
        tokio::select! {
            r = reader.read(&mut buf) => match r {
                // EIO: every holder of the terminal's other end closed it.
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(framed(channel::STDOUT, &buf[..n])).await.is_err() {
                        gone = true;
                        break;
                    }
                }
            },
            () = tx.reset_by_peer() => {
                gone = true;
                break;
            }
        }
    }
    if gone {
        if let Some(pg) = pgid {
            let _ = rustix::process::kill_process_group(pg, rustix::process::Signal::KILL);
        }
        let _ = child.kill().await;
        input.abort();
        return;
    }
    let code = child.wait().await.map(exit_code);
    input.abort();
    match code {
        Ok(code) => {
            let _ = tx.send(status(Some(Ok(code)))).await;
            let _ = tx.finish().await;
        }
        Err(e) => fail(tx, format!("waiting for the command: {e}")).await,
    }
}
