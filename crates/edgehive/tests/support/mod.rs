//! Processes for the edge tests: `edgehive cloud`, `edgehive edge`, kubectl
//! against the cloud, and a TCP proxy that cuts the link.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use edgehive_testkit::fixtures::free_port;

pub const WAIT: Duration = Duration::from_secs(40);

pub struct Cloud {
    pub child: Child,
    pub data: PathBuf,
    pub api: u16,
    pub ws: u16,
    pub join: u16,
    pub log: PathBuf,
    pub home: PathBuf,
    extra: Vec<String>,
}

impl Cloud {
    pub fn start(dir: &Path, extra: &[&str]) -> Cloud {
        let data = dir.join("cloud");
        let (api, ws, join) = (free_port(), free_port(), free_port());
        let log = dir.join("cloud.log");
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        let child = Cloud::spawn(&data, [api, ws, join], &log, &extra);
        let c = Cloud { child, data, api, ws, join, log, home, extra };
        c.wait_listening();
        c
    }

    fn spawn(data: &Path, [api, ws, join]: [u16; 3], log: &Path, extra: &[String]) -> Child {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
        Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(["cloud", "--data-dir"])
            .arg(data)
            .args(["--bind", &format!("127.0.0.1:{api}"), "--websocket-bind", &format!("127.0.0.1:{ws}")])
            .args(["--no-quic", "--join-bind", &format!("127.0.0.1:{join}"), "--sync-interval", "1"])
            .args(extra)
            .env("EDGEHIVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap()
    }

    fn wait_listening(&self) {
        wait_until("the cloud listens", || {
            self.data.join("kubeconfig.yaml").exists()
                && [self.api, self.ws, self.join]
                    .iter()
                    .all(|p| std::net::TcpStream::connect(("127.0.0.1", *p)).is_ok())
        });
    }

    /// `kill -9`, then the same cloud again: same data, same ports.
    pub fn kill_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Cloud::spawn(&self.data, [self.api, self.ws, self.join], &self.log, &self.extra);
        self.wait_listening();
    }

    /// What the API says `node` should hold, as the edge's store keys it
    /// (`default/{type}/{name}` → resourceVersion): the pods bound to it
    /// and the configmaps and secrets they name (volumes, env, envFrom)
    /// that exist.
    pub fn node_view(&self, node: &str) -> BTreeMap<String, String> {
        let rv = |o: &serde_json::Value| o["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_owned();
        let index = |kind: &str| -> BTreeMap<String, String> {
            self.json(&["get", kind, "-n", "default"])["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| (o["metadata"]["name"].as_str().unwrap().to_owned(), rv(o)))
                .collect()
        };
        let (configmaps, secrets) = (index("configmaps"), index("secrets"));
        let mut want = BTreeMap::new();
        for pod in self.json(&["get", "pods", "-n", "default"])["items"].as_array().unwrap() {
            if pod["spec"]["nodeName"] != node {
                continue;
            }
            want.insert(format!("default/pod/{}", pod["metadata"]["name"].as_str().unwrap()), rv(pod));
            let spec = &pod["spec"];
            let mut refs: Vec<(&str, &serde_json::Value)> = Vec::new();
            for v in spec["volumes"].as_array().into_iter().flatten() {
                refs.push(("configmap", &v["configMap"]["name"]));
                refs.push(("secret", &v["secret"]["secretName"]));
            }
            for c in spec["containers"].as_array().into_iter().flatten() {
                for e in c["env"].as_array().into_iter().flatten() {
                    refs.push(("configmap", &e["valueFrom"]["configMapKeyRef"]["name"]));
                    refs.push(("secret", &e["valueFrom"]["secretKeyRef"]["name"]));
                }
                for e in c["envFrom"].as_array().into_iter().flatten() {
                    refs.push(("configmap", &e["configMapRef"]["name"]));
                    refs.push(("secret", &e["secretRef"]["name"]));
                }
            }
            for (kind, name) in refs {
                let Some(name) = name.as_str() else { continue };
                let table = if kind == "configmap" { &configmaps } else { &secrets };
                if let Some(rv) = table.get(name) {
                    want.insert(format!("default/{kind}/{name}"), rv.clone());
                }
            }
        }
        want
    }

    pub fn token(&self) -> String {
        self.admin(&["token"]).trim().to_owned()
    }

    /// Runs `edgehive ARGS --data-dir DATA`; it must succeed. Returns stdout.
    pub fn admin(&self, args: &[&str]) -> String {
        let out = self.admin_output(args);
        assert!(out.status.success(), "edgehive {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs `edgehive ARGS --data-dir DATA`, whatever its outcome.
    pub fn admin_output(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_edgehive")).args(args).arg("--data-dir").arg(&self.data).output().unwrap()
    }

    /// Runs kubectl against the cloud; it must succeed. Returns stdout.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl_output(args, stdin);
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs kubectl against the cloud, whatever its outcome.
    /// kubectl running, its three streams piped.
    pub fn kubectl_spawn(&self, args: &[&str]) -> std::process::Child {
        Command::new("kubectl")
            .env("KUBECONFIG", self.data.join("kubeconfig.yaml"))
            .env("HOME", &self.home)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is on the machines")
    }

    pub fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        let mut child = self.kubectl_spawn(args);
        if let Some(input) = stdin {
            child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        }
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all, None)).unwrap()
    }

    pub fn node_ready(&self, node: &str) -> Option<String> {
        let out = Command::new("kubectl")
            .env("KUBECONFIG", self.data.join("kubeconfig.yaml"))
            .env("HOME", &self.home)
            .args(["get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"])
            .output()
            .unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned()).filter(|s| !s.is_empty())
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- cloud log ---\n{}", std::fs::read_to_string(&self.log).unwrap_or_default());
        }
    }
}

pub struct Edge {
    /// Run pods (edged); off by default, where only the store matters.
    pub edged: bool,
    /// The CRI runtime's endpoint; `None`: the process runtime.
    pub runtime_endpoint: Option<String>,
    pub child: Option<Child>,
    pub dir: PathBuf,
    pub log: PathBuf,
}

impl Edge {
    pub fn config(&self) -> PathBuf {
        self.dir.join("edge.yaml")
    }

    pub fn db(&self) -> PathBuf {
        self.dir.join("data/edgecore.db")
    }

    /// Writes the configuration: `server` is the WebSocket address (the
    /// cloud's, or a proxy's); a token only when given.
    pub fn configure(&self, node: &str, server: &str, join: u16, token: Option<&str>) {
        self.configure_with(node, server, join, token, "");
    }

    /// As `configure`, with more `edgeHub` keys (lines indented 4 spaces).
    pub fn configure_with(&self, node: &str, server: &str, join: u16, token: Option<&str>, hub_extra: &str) {
        let token = token.map(|t| format!("    token: {t}\n")).unwrap_or_default();
        let runtime = self
            .runtime_endpoint
            .as_ref()
            .map(|e| {
                format!(", tailoredKubeletConfig: {{containerRuntimeEndpoint: '{e}', runtimeRequestTimeout: 30s}}")
            })
            .unwrap_or_default();
        let yaml = format!(
            "apiVersion: edgecore.config.kubeedge.io/v1alpha2\nkind: EdgeCore\ndataDir: {data}\nmodules:\n  edged: {{enable: {edged}, hostnameOverride: {node}, nodeLeaseDurationSeconds: 4, restartBackoff: {{base: 0.2, cap: 1}}{runtime}}}\n  edgeHub:\n    heartbeat: 1\n    httpServer: https://127.0.0.1:{join}\n{token}    websocket: {{enable: true, server: '{server}'}}\n    reconnect: {{base: 0.1, cap: 0.5}}\n{hub_extra}",
            data = self.dir.join("data").display(),
            edged = self.edged,
        );
        std::fs::write(self.config(), yaml).unwrap();
    }

    pub fn new(dir: &Path) -> Edge {
        let dir = dir.join("edge");
        std::fs::create_dir_all(&dir).unwrap();
        Edge { edged: false, runtime_endpoint: None, child: None, log: dir.join("edge.log"), dir }
    }

    pub fn start(&mut self, env: &[(&str, &str)]) {
        let out = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_edgehive"));
        cmd.args(["edge", "--config"])
            .arg(self.config())
            .env("EDGEHIVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(out));
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().unwrap());
    }

    /// SIGTERM, and a wait of at most 15 s for the edge to end.
    pub fn terminate(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = Command::new("kill").args(["-s", "TERM", &c.id().to_string()]).status();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
            while std::time::Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }

    /// True once the edge process has ended by itself.
    pub fn exited(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))))
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The edge's `meta` table: key → (resourceVersion, value).
    pub fn rows(&self) -> BTreeMap<String, (String, serde_json::Value)> {
        let Ok(conn) = rusqlite::Connection::open_with_flags(self.db(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        else {
            return BTreeMap::new();
        };
        let Ok(mut stmt) = conn.prepare("SELECT key, value FROM meta") else { return BTreeMap::new() };
        stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap()
            .filter_map(Result::ok)
            .map(|(k, v)| {
                let v: serde_json::Value = serde_json::from_str(&v).unwrap_or_default();
                let rv = v.pointer("/metadata/resourceVersion").and_then(|r| r.as_str()).unwrap_or_default().to_owned();
                (k, (rv, v))
            })
            .collect()
    }

    /// The pods, configmaps and secrets of the edge's store: key →
    /// resourceVersion (compare with [`Cloud::node_view`]).
    pub fn object_view(&self) -> BTreeMap<String, String> {
        self.rows()
            .into_iter()
            .filter(|(k, _)| ["/pod/", "/configmap/", "/secret/"].iter().any(|t| k.contains(t)))
            .map(|(k, (rv, _))| (k, rv))
            .collect()
    }

    /// Folds the store's write-ahead log into the database file, so that
    /// the file alone holds the store (to copy or damage it).
    pub fn checkpoint(&self) {
        let conn = rusqlite::Connection::open(self.db()).unwrap();
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    }

    /// The edge's log, without terminal colours.
    pub fn log_text(&self) -> String {
        let raw = std::fs::read_to_string(&self.log).unwrap_or_default();
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c == 'm' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl Edge {
    /// Kills the container process groups the edge recorded (`*.pid` under
    /// its pod directories): a killed edge leaves its containers running.
    pub fn kill_containers(&self) {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "pid") {
                    out.push(p);
                }
            }
        }
        let mut files = Vec::new();
        walk(&self.dir.join("data/pods"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            if let Some(pid) = text.split_whitespace().next() {
                let _ =
                    Command::new("kill").args(["-s", "KILL", "--", &format!("-{pid}")]).stderr(Stdio::null()).status();
            }
        }
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        if self.edged {
            // Let edged stop its pods and remove their sandboxes/cgroups.
            self.terminate();
        }
        self.kill();
        self.kill_containers();
        if std::thread::panicking() {
            eprintln!("--- edge log ---\n{}", self.log_text());
        }
    }
}

/// The test's fault-injecting proxy in front of the cloud's WebSocket port,
/// on its own runtime thread (the tests themselves are synchronous).
pub struct CutProxy {
    proxy: edgehive_testkit::proxy::FaultProxy,
    _rt: tokio::runtime::Runtime,
}

impl CutProxy {
    pub fn start(upstream: u16) -> CutProxy {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let proxy = rt.block_on(edgehive_testkit::proxy::FaultProxy::start(([127, 0, 0, 1], upstream).into())).unwrap();
        CutProxy { proxy, _rt: rt }
    }

    pub fn addr(&self) -> String {
        self.proxy.addr().to_string()
    }

    /// Cuts the link (open connections reset, new ones refused) or heals it.
    pub fn cut(&self, down: bool) {
        use edgehive_testkit::proxy::Fault;
        self.proxy.set_fault(if down { Fault::Refuse } else { Fault::None });
    }
}

pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + WAIT;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub const OBJECTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: default}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default}
stringData: {password: s3cret}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  nodeName: NODE
  containers:
  - name: c
    image: busybox
    env:
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: creds, key: password}}
    volumeMounts: [{name: cfg, mountPath: /etc/cfg}]
  volumes: [{name: cfg, configMap: {name: cfg}}]
"#;

pub fn pod_yaml(name: &str, node: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: {node}\n  containers: [{{name: c, image: busybox}}]\n"
    )
}

/// A pod of one container `main` running `sh -c script` from `image`.
pub fn shell_pod(name: &str, node: &str, policy: &str, script: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: {node}\n  restartPolicy: {policy}\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: main\n    image: {image}\n    command: [sh, -c, '{script}']\n"
    )
}

/// A field of a pod, by kubectl's jsonpath.
pub fn pod_field(cloud: &Cloud, pod: &str, path: &str) -> String {
    cloud.kubectl(&["get", "pod", pod, "-o", &format!("jsonpath={{{path}}}")], None).trim().to_owned()
}

/// The lifecycle every runtime must show through kubectl, on `node`:
/// `loop` (a shell loop) Running with READY 1/1; `crash` (exits 1)
/// restarted with a rising restartCount and lastState exit 1; `once`
/// (`restartPolicy: Never`, exits 3) Failed with exit code 3, never
/// restarted. `loop` is left running for the caller.
pub fn run_lifecycle_pods(cloud: &Cloud, node: &str, image: &str) {
    let yaml = [
        shell_pod("loop", node, "Always", "while true; do echo tick; sleep 1; done", image),
        shell_pod("crash", node, "Always", "echo boom; exit 1", image),
        shell_pod("once", node, "Never", "exit 3", image),
    ]
    .join("---\n");
    cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
    let field = |pod: &str, path: &str| pod_field(cloud, pod, path);
    wait_until("loop is Running and ready", || {
        field("loop", ".status.phase") == "Running" && field("loop", ".status.containerStatuses[0].ready") == "true"
    });
    let table = cloud.kubectl(&["get", "pod", "loop", "--no-headers"], None);
    assert!(table.contains("1/1") && table.contains("Running"), "{table}");
    wait_until("crash restarts", || {
        field("crash", ".status.containerStatuses[0].restartCount").parse::<u32>().unwrap_or(0) >= 2
    });
    assert_eq!(field("crash", ".status.containerStatuses[0].lastState.terminated.exitCode"), "1");
    wait_until("once has Failed", || field("once", ".status.phase") == "Failed");
    assert_eq!(field("once", ".status.containerStatuses[0].state.terminated.exitCode"), "3");
    assert_eq!(field("once", ".status.containerStatuses[0].restartCount"), "0");
}

/// The live (not zombie) processes whose working directory is a
/// container's under `pods_dir` (`{pods_dir}/{uid}/containers/{name}`),
/// by that directory: the process runtime's containers, found without
/// anything edged records or marks.
pub fn container_processes(pods_dir: &Path) -> BTreeMap<PathBuf, Vec<u32>> {
    let Ok(root) = std::fs::canonicalize(pods_dir) else { return BTreeMap::new() };
    let mut out: BTreeMap<PathBuf, Vec<u32>> = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if cwd.starts_with(&root) && !stat.contains(") Z ") {
            out.entry(cwd).or_default().push(pid);
        }
    }
    out
}

/// The `EDGEHIVE_CONTAINER` marker in a process's environment.
pub fn container_marker(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(b"EDGEHIVE_CONTAINER=").map(|v| String::from_utf8_lossy(v).into_owned()))
}

/// A process's start time (clock ticks since boot), from `/proc`.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split(' ').nth(19)?.parse().ok()
}

/// On drop, SIGKILLs every process working in a container directory under
/// the pods directory: what killed edges left, recorded or not.
pub struct KillContainerProcesses(pub PathBuf);

impl Drop for KillContainerProcesses {
    fn drop(&mut self) {
        for pid in container_processes(&self.0).into_values().flatten() {
            let _ = Command::new("kill").args(["-s", "KILL", &pid.to_string()]).stderr(Stdio::null()).status();
        }
    }
}
