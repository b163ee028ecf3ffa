//! End to end with the real `kubectl` against a running `edgehive cloud`
//! process, on the embedded SQLite store and on a real etcd: every command
//! succeeds and writes nothing to stderr (no warnings).
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use edgehive_testkit::fixtures::{EtcdServer, TempDir};
use serde_json::Value;

#[path = "kubectl/apply.rs"]
mod apply;
#[path = "kubectl/crds.rs"]
mod crds;
#[path = "kubectl/events_v1.rs"]
mod events_v1;
#[path = "kubectl/openapi.rs"]
mod openapi;
#[path = "kubectl/python_client.rs"]
mod python_client;
#[path = "kubectl/rbac.rs"]
mod rbac;
#[path = "kubectl/services.rs"]
mod services;

/// `edgehive cloud` as a child process.
struct Cloud {
    child: Child,
    kubeconfig: PathBuf,
    home: PathBuf,
    dir: TempDir,
}

impl Cloud {
    fn start(store_args: &[&str]) -> Cloud {
        let dir = TempDir::new("kubectl-e2e");
        let log = std::fs::File::create(dir.path().join("cloud.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_edgehive"))
            .args(["cloud", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--websocket-bind", "127.0.0.1:0", "--no-quic", "--join-bind", "127.0.0.1:0"])
            // Port 0 everywhere: a port picked beforehand could be taken by
            // this very process's other listeners; the kubeconfig names the
            // one bound.
            .args(["--bind", "127.0.0.1:0", "--no-fsync"])
            .args(store_args)
            .env("EDGEHIVE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let cloud = Cloud { child, kubeconfig: dir.path().join("data/kubeconfig.yaml"), home, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(addr) = cloud.server_address()
                && std::net::TcpStream::connect(addr).is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "edgehive cloud did not start: {}", cloud.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        cloud
    }

    /// The API server's address, from the kubeconfig once it is written.
    fn server_address(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.kubeconfig).ok()?;
        let url = text.lines().find_map(|l| l.trim().strip_prefix("server: "))?;
        Some(url.trim().trim_matches('"').trim_start_matches("https://").to_owned())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("cloud.log")).unwrap_or_default()
    }

    fn kubectl(&self) -> Command {
        let mut c = Command::new("kubectl");
        c.env("KUBECONFIG", &self.kubeconfig).env("HOME", &self.home).env_remove("KUBECTL_EXTERNAL_DIFF");
        c
    }

    /// Runs kubectl; it must succeed with an empty stderr. Returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, None)
    }

    fn ok_with(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut cmd = self.kubectl();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::piped());
        let mut child = cmd.spawn().expect("run kubectl (it is on the machines)");
        {
            use std::io::Write as _;
            let mut pipe = child.stdin.take().unwrap();
            if let Some(input) = stdin {
                pipe.write_all(input.as_bytes()).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success() && stderr.is_empty(),
            "kubectl {args:?} failed ({}):\nstdout: {stdout}\nstderr: {stderr}\nserver log tail: {}",
            out.status,
            self.log().lines().rev().take(20).collect::<Vec<_>>().join("\n")
        );
        stdout
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    fn apply(&self, manifest: &str) -> String {
        self.ok_with(&["apply", "-f", "-"], Some(manifest))
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const MANIFEST: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: edge-1
  labels:
    node-role.kubernetes.io/edge: ""
---
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  nodeName: edge-1
  terminationGracePeriodSeconds: 30
  containers:
  - name: app
    image: nginx:1.25
    ports:
    - containerPort: 80
    env:
    - name: MODE
      value: "edge"
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  level: "1"
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
type: Opaque
data:
  token: c2VjcmV0
---
apiVersion: devices.kubeedge.io/v1beta1
kind: Device
metadata:
  name: thermometer
spec:
  deviceModelRef:
    name: thermo-model
  nodeName: edge-1
"#;

fn session(cloud: &Cloud) {
    // The Kubernetes release the API reports is the one edged reports as its
    // kubelet's, and kubectl (stderr empty) sees no version skew.
    let version = cloud.json(&["version"]);
    let server = &version["serverVersion"];
    let release = edgehive_model::well_known::KUBERNETES_VERSION;
    assert!(server["gitVersion"].as_str().unwrap().starts_with(&format!("{release}-")), "{version}");
    let (major, minor) = (server["major"].as_str().unwrap(), server["minor"].as_str().unwrap());
    assert_eq!(format!("v{major}.{minor}.0"), release, "{version}");
    assert_eq!(server["minor"], "33", "{version}");

    // Every namespace has its default service account, also `kubeedge`,
    // which the cloud makes directly in its store.
    wait_for("the kubeedge namespace's default service account", || {
        cloud.kubectl().args(["get", "serviceaccount", "default", "-n", "kubeedge"]).output().unwrap().status.success()
    });

    // Discovery.
    let resources = cloud.ok(&["api-resources"]);
    for r in ["pods", "nodes", "configmaps", "secrets", "leases", "devices", "objectsyncs", "clusterobjectsyncs"] {
        assert!(resources.lines().any(|l| l.starts_with(&format!("{r} "))), "{r} missing:\n{resources}");
    }

    // apply, and apply again after an edit: an update, not an error.
    let out = cloud.apply(MANIFEST);
    for line in [
        "pod/web created",
        "configmap/settings created",
        "secret/creds created",
        "device.devices.kubeedge.io/thermometer created",
    ] {
        assert!(out.contains(line), "{out}");
    }
    let out = cloud.apply(MANIFEST);
    assert!(out.contains("pod/web unchanged") && out.contains("configmap/settings unchanged"), "{out}");
    let edited = MANIFEST
        .replace("nginx:1.25", "nginx:1.26")
        .replace("level: \"1\"", "level: \"2\"")
        .replace("thermo-model", "thermo-v2");
    let out = cloud.apply(&edited);
    assert!(out.contains("pod/web configured") && out.contains("configmap/settings configured"), "{out}");
    assert!(out.contains("device.devices.kubeedge.io/thermometer configured"), "{out}");
    assert_eq!(cloud.json(&["get", "pod", "web"])["spec"]["containers"][0]["image"], "nginx:1.26");
    assert_eq!(cloud.json(&["get", "device", "thermometer"])["spec"]["deviceModelRef"]["name"], "thermo-v2");
    // As in Kubernetes 1.33, pods and custom resources have a generation
    // that moves with their spec; ConfigMaps have none.
    assert_eq!(cloud.json(&["get", "pod", "web"])["metadata"]["generation"], 2, "one spec change");
    assert_eq!(cloud.json(&["get", "device", "thermometer"])["metadata"]["generation"], 2, "one spec change");

    // get, -o wide, -o yaml.
    let table = cloud.ok(&["get", "pods"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
    assert!(table.lines().nth(1).unwrap().starts_with("web "), "{table}");
    let wide = cloud.ok(&["get", "pods", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("NODE"), "{wide}");
    assert!(wide.lines().nth(1).unwrap().contains("edge-1"), "{wide}");
    let yaml = cloud.ok(&["get", "configmap", "settings", "-o", "yaml"]);
    assert!(yaml.contains("level: \"2\"") && yaml.contains("resourceVersion:"), "{yaml}");
    assert!(!yaml.contains("generation:"), "a ConfigMap has no generation: {yaml}");
    let nodes = cloud.ok(&["get", "nodes"]);
    let header: Vec<&str> = nodes.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
    assert!(nodes.lines().nth(1).unwrap().split_whitespace().nth(2) == Some("edge"), "{nodes}");

    // describe.
    let d = cloud.ok(&["describe", "pod", "web"]);
    assert!(d.contains("Name:") && d.contains("web") && d.contains("nginx:1.26"), "{d}");
    cloud.ok(&["describe", "device", "thermometer"]);

    // label, annotate, patch (strategic by default; merge and json).
    cloud.ok(&["label", "pod", "web", "tier=front"]);
    cloud.ok(&["annotate", "configmap", "settings", "owner=ops"]);
    cloud.ok(&["patch", "pod", "web", "-p", r#"{"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}"#]);
    cloud.ok(&["patch", "device", "thermometer", "--type", "merge", "-p", r#"{"metadata":{"labels":{"room":"a"}}}"#]);
    cloud.ok(&[
        "patch",
        "configmap",
        "settings",
        "--type",
        "json",
        "-p",
        r#"[{"op":"add","path":"/data/extra","value":"x"}]"#,
    ]);
    let pod = cloud.json(&["get", "pod", "web"]);
    assert_eq!(pod["metadata"]["labels"]["tier"], "front");
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(pod["spec"]["containers"][0]["env"][0]["name"], "MODE", "strategic merge kept the rest");
    let cm = cloud.json(&["get", "configmap", "settings"]);
    assert_eq!(
        (cm["metadata"]["annotations"]["owner"].as_str(), cm["data"]["extra"].as_str()),
        (Some("ops"), Some("x"))
    );
    let out = cloud.ok(&["get", "pods", "-l", "tier=front", "-o", "name"]);
    assert_eq!(out.trim(), "pod/web");

    // edit through KUBE_EDITOR.
    let editor = cloud.dir.path().join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/level: \"2\"/level: \"3\"/' \"$1\"\n").unwrap();
    set_executable(&editor);
    let mut edit = cloud.kubectl();
    let out = edit.args(["edit", "configmap", "settings"]).env("KUBE_EDITOR", &editor).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "edit: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(cloud.json(&["get", "configmap", "settings"])["data"]["level"], "3");

    // create configmap/secret from literals (kubectl sends protobuf here).
    cloud.ok(&["create", "configmap", "literal", "--from-literal=k=v"]);
    assert_eq!(cloud.json(&["get", "configmap", "literal"])["data"]["k"], "v");
    cloud.ok(&["create", "secret", "generic", "pw", "--from-literal=password=hunter2"]);
    assert_eq!(cloud.json(&["get", "secret", "pw"])["data"]["password"], "aHVudGVyMg==");

    // A server-side dry run answers what create would store (uid,
    // creationTimestamp), stores nothing.
    let dry: Value = serde_json::from_str(&cloud.ok(&[
        "create",
        "configmap",
        "dry",
        "--from-literal=a=b",
        "--dry-run=server",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(dry["metadata"]["uid"].as_str().map(str::len), Some(36), "{dry}");
    assert!(dry["metadata"]["creationTimestamp"].is_string(), "{dry}");
    assert_eq!(cloud.ok(&["get", "configmap", "dry", "--ignore-not-found"]), "");

    cloud.ok(&["create", "namespace", "team"]);
    cloud.ok(&["get", "serviceaccount", "default", "-n", "team"]);
    cloud.ok(&["create", "service", "clusterip", "api", "--tcp=80:8080", "-n", "team"]);
    let svc = cloud.json(&["get", "service", "api", "-n", "team"]);
    assert_eq!(
        (svc["spec"]["ports"][0]["port"].as_i64(), svc["spec"]["ports"][0]["targetPort"].as_i64()),
        (Some(80), Some(8080))
    );
    let svcs = cloud.ok(&["get", "services", "-n", "team"]);
    assert!(svcs.lines().next().unwrap().contains("CLUSTER-IP"), "{svcs}");
    cloud.ok(&["delete", "namespace", "team"]);

    // get -w sees a change made by another command.
    let mut watch = cloud
        .kubectl()
        .args(["get", "configmaps", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    wait_for("the watch's initial list", || {
        lines.extend(rx.try_iter());
        lines.iter().any(|l| l.starts_with("settings "))
    });
    cloud.ok(&["create", "configmap", "from-watch", "--from-literal=a=b"]);
    wait_for("the watch to show a configmap created by another command", || {
        lines.extend(rx.try_iter());
        lines.iter().any(|l| l.starts_with("from-watch "))
    });
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    assert!(out.stderr.is_empty(), "get -w stderr: {}", String::from_utf8_lossy(&out.stderr));

    // delete: pods gracefully.
    let out = cloud.ok(&["delete", "pod", "web", "--wait=false"]);
    assert!(out.contains("pod \"web\" deleted"), "{out}");
    let pod = cloud.json(&["get", "pod", "web"]);
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "graceful: still there, terminating");
    assert!(cloud.ok(&["get", "pod", "web"]).contains("Terminating"));
    // A shorter grace period replaces the pending one; when it runs out the
    // pod goes, and kubectl's wait for the deletion returns.
    let out = cloud.ok(&["delete", "pod", "web", "--grace-period=1"]);
    assert!(out.contains("deleted"), "{out}");
    let gone = cloud.ok(&["get", "pods", "--ignore-not-found"]);
    assert!(!gone.contains("web"), "{gone}");
    cloud.ok(&["delete", "configmap", "settings", "literal"]);
    cloud.ok(&["delete", "device", "thermometer"]);
    cloud.ok(&["run", "once", "--image=busybox", "--restart=Never"]);
    cloud.ok(&["delete", "pod", "once"]); // unbound: gone at once, kubectl's wait returns
}

#[cfg(unix)]
fn set_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn kubectl_session_on_sqlite() {
    let cloud = Cloud::start(&[]);
    session(&cloud);
}

#[test]
fn kubectl_session_on_etcd() {
    let etcd = EtcdServer::start();
    let cloud = Cloud::start(&["--store", "etcd", "--etcd-endpoints", &etcd.url]);
    session(&cloud);
}

#[test]
fn kubectl_reports_errors_clearly() {
    let cloud = Cloud::start(&[]);
    let bad = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Not_Valid"}}"#;
    let out = cloud
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write as _;
            c.stdin.take().unwrap().write_all(bad.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is invalid") && err.contains("metadata.name"), "{err}");
    let out = cloud.kubectl().args(["get", "pod", "missing"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("pods \"missing\" not found"));
    let out = cloud.kubectl().args(["delete", "namespace", "default"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("forbidden"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Runs kubectl expecting failure; returns stderr.
fn refused(cloud: &Cloud, args: &[&str], stdin: Option<&str>) -> String {
    let mut child =
        cloud.kubectl().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    {
        use std::io::Write as _;
        let mut pipe = child.stdin.take().unwrap();
        if let Some(input) = stdin {
            pipe.write_all(input.as_bytes()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "kubectl {args:?} succeeded: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn workloads_speak_kubectl() {
    let cloud = Cloud::start(&[]);
    // Discovery: apps/v1 and batch/v1 with kubectl's short names.
    let resources = cloud.ok(&["api-resources", "--api-group=apps"]);
    for (name, short) in
        [("deployments", "deploy"), ("replicasets", "rs"), ("daemonsets", "ds"), ("statefulsets", "sts")]
    {
        assert!(resources.lines().any(|l| l.starts_with(name) && l.contains(short)), "{name}:\n{resources}");
    }
    assert!(cloud.ok(&["api-resources", "--api-group=batch"]).contains("cj"));

    // `kubectl create deployment`, then the controllers' work as kubectl shows it.
    cloud.ok(&["create", "deployment", "web", "--image=busybox", "--replicas=3"]);
    wait_for("three pods", || cloud.json(&["get", "pods", "-l", "app=web"])["items"].as_array().unwrap().len() == 3);
    let table = cloud.ok(&["get", "deploy", "web"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], "{table}");
    wait_for("the status", || cloud.ok(&["get", "deploy", "web"]).contains("0/3     3            0"));
    let rs = cloud.ok(&["get", "rs", "-o", "wide"]);
    assert!(rs.lines().next().unwrap().contains("DESIRED") && rs.contains("pod-template-hash="), "{rs}");

    // The scale subresource, as `kubectl scale` and clients use it.
    cloud.ok(&["scale", "deploy/web", "--replicas=1"]);
    wait_for("one pod", || cloud.json(&["get", "pods", "-l", "app=web"])["items"].as_array().unwrap().len() == 1);
    let scale: Value =
        serde_json::from_str(&cloud.ok(&["get", "--raw", "/apis/apps/v1/namespaces/default/deployments/web/scale"]))
            .unwrap();
    assert_eq!((scale["kind"].as_str(), scale["spec"]["replicas"].as_i64()), (Some("Scale"), Some(1)), "{scale}");
    assert_eq!(scale["status"]["selector"], "app=web", "{scale}");
    let err = refused(&cloud, &["scale", "deploy/web", "--replicas=-1"], None);
    assert!(err.contains("replicas"), "{err}");
    // The controllers' Events, as `kubectl describe` and `kubectl events` show them.
    let rs_name =
        cloud.json(&["get", "rs", "-l", "app=web"])["items"][0]["metadata"]["name"].as_str().unwrap().to_string();
    wait_for("the Deployment's Events", || {
        cloud.ok(&["describe", "deploy", "web"]).contains(&format!("Scaled down replica set {rs_name} from 3 to 1"))
    });
    let described = cloud.ok(&["describe", "deploy", "web"]);
    assert!(described.contains(&format!("Scaled up replica set {rs_name} from 0 to 3")), "{described}");
    assert!(described.contains("deployment-controller"), "{described}");
    wait_for("the ReplicaSet's Events", || {
        let events = cloud.ok(&["events", "--for", &format!("rs/{rs_name}")]);
        events.contains("SuccessfulCreate") && events.contains("Created pod: ") && events.contains("SuccessfulDelete")
    });
    let err = refused(&cloud, &["scale", "deploy/web", "--replicas=2", "--resource-version=1"], None);
    assert!(err.contains("resource version") || err.contains("the object has been modified"), "{err}");

    // Kubernetes' refusal of a Deployment without a selector.
    let no_selector = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: c, image: busybox}]}\n";
    let err = refused(&cloud, &["apply", "-f", "-"], Some(no_selector));
    assert!(
        err.contains("The Deployment \"bad\" is invalid")
            && err.contains("spec.selector: Required value")
            && err.contains("spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"),
        "{err}"
    );
    // A client cannot choose an object's uid.
    let chosen = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine, uid: 00000000-0000-0000-0000-000000000001}\n";
    cloud.ok_with(&["create", "-f", "-"], Some(chosen));
    assert_ne!(cloud.json(&["get", "cm", "mine"])["metadata"]["uid"], "00000000-0000-0000-0000-000000000001");

    // A StatefulSet names its pods and starts them in order: db-1 waits for
    // db-0, which waits for a node; the scheduler says why, in Kubernetes' words.
    let sts = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec:\n  replicas: 2\n  serviceName: db\n  selector: {matchLabels: {app: db}}\n  template:\n    metadata: {labels: {app: db}}\n    spec: {containers: [{name: c, image: busybox}]}\n";
    cloud.ok_with(&["apply", "-f", "-"], Some(sts));
    let scheduled = |pod: &str| {
        cloud.json(&["get", "pod", pod])["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "PodScheduled").cloned())
    };
    wait_for("db-0 pending with a reason", || scheduled("db-0").is_some());
    let pod = cloud.json(&["get", "pod", "db-0"]);
    assert_eq!((pod["spec"]["hostname"].as_str(), pod["spec"]["subdomain"].as_str()), (Some("db-0"), Some("db")));
    let cond = scheduled("db-0").unwrap();
    assert_eq!((cond["status"].as_str(), cond["reason"].as_str()), (Some("False"), Some("Unschedulable")), "{cond}");
    assert!(cond["message"].as_str().unwrap().starts_with("0/0 nodes are available"), "{cond}");
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: edge-small, labels: {node-role.kubernetes.io/edge: ''}}\n";
    cloud.ok_with(&["create", "-f", "-"], Some(node));
    wait_for("the node counted", || {
        scheduled("db-0").is_some_and(|c| c["message"] == "0/1 nodes are available: 1 node(s) were not ready.")
    });
    assert!(refused(&cloud, &["get", "pod", "db-1"], None).contains("not found"), "db-1 waits for db-0");
    let sts = cloud.json(&["get", "sts", "db"]);
    assert!(sts["status"]["updateRevision"].as_str().unwrap().starts_with("db-"), "{}", sts["status"]);
    cloud.ok(&["delete", "sts", "db"]);
    cloud.ok(&["delete", "node", "edge-small"]);

    // PodDisruptionBudgets as kubectl's typed client sends them (protobuf), with Kubernetes' columns.
    cloud.ok(&["create", "pdb", "web", "--selector=app=web", "--min-available=50%"]);
    let table = cloud.ok(&["get", "pdb", "web"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"], "{table}");
    assert!(table.lines().nth(1).unwrap().contains("50%"), "{table}");
    let err = refused(
        &cloud,
        &["create", "pdb", "both", "--selector=app=web", "--min-available=1", "--max-unavailable=1"],
        None,
    );
    assert!(
        err.contains("min-available and max-unavailable cannot be both specified")
            || err.contains("cannot be both set"),
        "{err}"
    );
    cloud.ok(&["delete", "pdb", "web"]);

    // kubectl explain reads the published schemas.
    let explain = cloud.ok(&["explain", "deployment.spec.strategy"]);
    assert!(explain.contains("rollingUpdate") && explain.contains("type"), "{explain}");
    let explain = cloud.ok(&["explain", "job.spec.backoffLimit"]);
    assert!(explain.contains("integer"), "{explain}");

    // `--cascade=orphan` keeps the ReplicaSet and lets go of it.
    cloud.ok(&["delete", "deploy", "web", "--cascade=orphan"]);
    let rs = cloud.json(&["get", "rs", "-l", "app=web"]);
    let items = rs["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    wait_for("the set is orphaned", || {
        cloud.json(&["get", "rs", "-l", "app=web"])["items"][0]["metadata"].get("ownerReferences").is_none()
    });
    let err = refused(&cloud, &["delete", "rs", "--all", "--cascade=sideways"], None);
    assert!(err.contains("cascade"), "{err}");
    cloud.ok(&["delete", "rs", "--all"]);
    wait_for("the orphaned set's pods collected", || {
        cloud.json(&["get", "pods", "-l", "app=web"])["items"].as_array().unwrap().is_empty()
    });

    // Jobs from kubectl, with their table.
    cloud.ok(&["create", "job", "once", "--image=busybox", "--", "true"]);
    let job = cloud.json(&["get", "job", "once"]);
    assert_eq!(job["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"], job["metadata"]["uid"]);
    let table = cloud.ok(&["get", "jobs"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], "{table}");
    wait_for("the job's pod", || {
        cloud.json(&["get", "pods", "-l", "job-name=once"])["items"].as_array().unwrap().len() == 1
    });
}
