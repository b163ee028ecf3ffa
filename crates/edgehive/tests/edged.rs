//! Pods run by `edgehive edge` (edged, process runtime) as seen through
//! kubectl: Running and ready, restarted with a rising restartCount,
//! `restartPolicy: Never` ending in Failed, deletion stopping the process
//! within the grace period, and pods running again within 2 s of an edge
//! restart with the cloud unreachable; an edge killed at any point of a
//! burst of pod starts never runs a container twice; a pod whose configmap
//! or secret is missing waits in `CreateContainerConfigError` until it
//! exists; the node's Hostname address is its name.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

#[path = "edged/events.rs"]
mod events;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use edgehive_testkit::fixtures::TempDir;
use support::*;

fn pod(name: &str, node: &str, policy: &str, script: &str) -> String {
    shell_pod(name, node, policy, script, "busybox")
}

use support::pod_field as field;

/// The pid in `process://{pid}`.
fn pid_of(cloud: &Cloud, pod: &str) -> Option<u32> {
    field(cloud, pod, ".status.containerStatuses[0].containerID").strip_prefix("process://")?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn start(dir: &TempDir, cloud: &Cloud, server: &str, node: &str) -> Edge {
    let mut edge = Edge::new(dir.path());
    edge.edged = true;
    edge.configure(node, server, cloud.join, Some(&cloud.token()));
    edge.start(&[]);
    wait_until("the node is Ready", || cloud.node_ready(node).as_deref() == Some("True"));
    let runtime =
        cloud.kubectl(&["get", "node", node, "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}"], None);
    assert!(runtime.starts_with("process://edgehive-"), "{runtime}");
    // edged's node: the host's capacity, allocatable less kubelet's reserve,
    // the pressure conditions beside Ready.
    let node_field = |path: &str| cloud.kubectl(&["get", "node", node, "-o", &format!("jsonpath={{{path}}}")], None);
    let conditions = node_field(".status.conditions[*].type");
    for c in ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"] {
        assert!(conditions.contains(c), "{conditions}");
    }
    let kib = |q: String| q.trim_end_matches("Ki").parse::<u64>().unwrap();
    let (capacity, allocatable) =
        (kib(node_field(".status.capacity.memory")), kib(node_field(".status.allocatable.memory")));
    assert_eq!(capacity - allocatable, 100 * 1024);
    assert_eq!(node_field(".status.capacity.pods"), "110");
    // Kubelet's Hostname address is its hostnameOverride: the node's name.
    assert_eq!(node_field(".status.addresses[?(@.type==\"Hostname\")].address"), node);
    edge
}

#[test]
fn pods_run_restart_fail_and_stop_as_kubectl_shows() {
    let dir = TempDir::new("edged-lifecycle");
    let cloud = Cloud::start(dir.path(), &[]);
    let _edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-p");
    run_lifecycle_pods(&cloud, "edge-p", "busybox");

    // An update of the pod's image restarts that container with it.
    let before = pid_of(&cloud, "loop").unwrap();
    cloud.kubectl(&["set", "image", "pod/loop", "main=busybox:1.36"], None);
    wait_until("loop restarts with the new image", || {
        field(&cloud, "loop", ".status.containerStatuses[0].image") == "busybox:1.36"
            && field(&cloud, "loop", ".status.containerStatuses[0].ready") == "true"
    });
    assert_eq!(field(&cloud, "loop", ".status.containerStatuses[0].restartCount"), "1");
    assert!(!alive(before), "the old process was stopped");

    // Delete: the process is stopped within the grace period and the pod goes.
    let pid = pid_of(&cloud, "loop").unwrap();
    assert!(alive(pid));
    let started = Instant::now();
    cloud.kubectl(&["delete", "pod", "loop", "--timeout=30s"], None);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    wait_until("the process is gone", || !alive(pid));
}

#[test]
fn after_a_restart_with_the_cloud_unreachable_pods_run_again_within_2s() {
    let dir = TempDir::new("edged-autonomy");
    let cloud = Cloud::start(dir.path(), &[]);
    let proxy = CutProxy::start(cloud.ws);
    let mut edge = start(&dir, &cloud, &proxy.addr(), "edge-a");
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod("keeper", "edge-a", "Always", "while true; do sleep 1; done")));
    wait_until("keeper is Running", || field(&cloud, "keeper", ".status.phase") == "Running");
    let first = pid_of(&cloud, "keeper").unwrap();

    // The cloud is unreachable; the edge is killed and started again.
    proxy.cut(true);
    edge.kill();
    let restarted = Instant::now();
    edge.start(&[]);
    // The pod's process runs again, from the local store alone, and the
    // one the killed edge left behind is gone: one copy, not two.
    let deadline = restarted + Duration::from_secs(20);
    let again = loop {
        let procs = keeper_processes();
        if procs.iter().any(|p| *p != first) && !procs.contains(&first) {
            break restarted.elapsed();
        }
        assert!(Instant::now() < deadline, "keeper not running again: {procs:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(again < Duration::from_secs(2), "running again after {again:?}");
    assert_eq!(keeper_processes().len(), 1);
    proxy.cut(false);
}

/// Pids of the `keeper` pod's shell: its command line is unique, and it
/// leads its process group (the shell's short-lived forks do not).
fn keeper_processes() -> Vec<u32> {
    let leads_group = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rfind(')').map_or("", |i| &stat[i + 2..]);
        after.split(' ').nth(2).and_then(|g| g.parse::<u32>().ok()) == Some(pid)
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains("while true; do sleep 1; done") && alive(pid) && leads_group(pid) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn env_comes_from_configmaps_and_secrets() {
    let dir = TempDir::new("edged-env");
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-e");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\ndata: {greeting: hello}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\nstringData: {password: s3cret}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: envy, namespace: default}\nspec:\n  nodeName: edge-e\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'echo \"$GREETING/$SECRET_password/$ME\"; sleep 600']\n    env:\n    - name: GREETING\n      valueFrom: {configMapKeyRef: {name: cfg, key: greeting}}\n    - name: ME\n      valueFrom: {fieldRef: {fieldPath: metadata.name}}\n    envFrom:\n    - prefix: SECRET_\n      secretRef: {name: creds}\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(yaml));
    wait_until("envy is Running", || field(&cloud, "envy", ".status.phase") == "Running");
    let uid = field(&cloud, "envy", ".metadata.uid");
    let log = edge.dir.join("data/pods").join(uid).join("logs/main/0.log");
    wait_until("the log shows the environment", || {
        std::fs::read_to_string(&log).unwrap_or_default().contains("hello/s3cret/envy")
    });
}

#[test]
fn probes_restart_on_liveness_failure_and_gate_readiness() {
    let dir = TempDir::new("edged-probes");
    let cloud = Cloud::start(dir.path(), &[]);
    let _edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-q");
    // Healthy for two seconds, then its liveness file goes: restarted.
    // Ready only while the file `ready` exists in its working directory.
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: probed, namespace: default}\nspec:\n  nodeName: edge-q\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'touch alive; sleep 2; rm -f alive; sleep 600']\n    livenessProbe: {exec: {command: [test, -f, alive]}, periodSeconds: 1, failureThreshold: 1}\n  - name: gated\n    image: busybox\n    command: [sh, -c, 'sleep 600']\n    readinessProbe: {exec: {command: [test, -f, ready]}, periodSeconds: 1}\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(yaml));
    wait_until("probed is Running", || field(&cloud, "probed", ".status.phase") == "Running");
    // The readiness probe fails: the pod is not Ready.
    let ready = |i: usize| field(&cloud, "probed", &format!(".status.containerStatuses[{i}].ready"));
    assert_eq!(ready(1), "false");
    assert!(cloud.kubectl(&["get", "pod", "probed", "--no-headers"], None).contains("/2"));
    // The liveness probe fails after two seconds: the container restarts.
    wait_until("a liveness restart", || {
        field(&cloud, "probed", ".status.containerStatuses[0].restartCount").parse::<u32>().unwrap_or(0) >= 1
    });
    // Making `gated` ready flips its readiness.
    let uid = field(&cloud, "probed", ".metadata.uid");
    let workdir = _edge.dir.join("data/pods").join(uid).join("containers/gated");
    std::fs::write(workdir.join("ready"), b"").unwrap();
    wait_until("gated is ready", || ready(1) == "true");
}

#[test]
fn configmap_and_secret_volumes_are_files_that_follow_their_objects() {
    let dir = TempDir::new("edged-volumes");
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-v");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\ndata: {greeting: hello}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\nstringData: {password: s3cret}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: vols, namespace: default}\nspec:\n  nodeName: edge-v\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'while true; do echo \"$(cat etc/cfg/greeting)\"; sleep 0.2; done']\n    volumeMounts:\n    - {name: cfg, mountPath: /etc/cfg}\n    - {name: creds, mountPath: /run/creds}\n    - {name: scratch, mountPath: /tmp/scratch}\n  volumes:\n  - name: cfg\n    configMap: {name: cfg}\n  - name: creds\n    secret: {secretName: creds, defaultMode: 256}\n  - name: scratch\n    emptyDir: {}\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(yaml));
    wait_until("vols is Running", || field(&cloud, "vols", ".status.phase") == "Running");
    let uid = field(&cloud, "vols", ".metadata.uid");
    let pod_dir = edge.dir.join("data/pods").join(uid);
    let log = pod_dir.join("logs/main/0.log");
    wait_until("the configmap file is read", || std::fs::read_to_string(&log).unwrap_or_default().contains("hello"));
    // The secret's file, decoded, with the mode asked for (0400).
    let secret = pod_dir.join("containers/main/run/creds/password");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&secret).unwrap().permissions().mode() & 0o777, 0o400);
    assert!(pod_dir.join("containers/main/tmp/scratch").is_dir());
    // The configmap changes: the running container sees the new file.
    cloud.kubectl(&["patch", "configmap", "cfg", "-p", r#"{"data":{"greeting":"changed"}}"#], None);
    wait_until("the update reaches the file", || std::fs::read_to_string(&log).unwrap_or_default().contains("changed"));
}

#[test]
fn cpu_and_memory_limits_go_into_cgroups_or_are_reported() {
    let dir = TempDir::new("edged-limits");
    let cloud = Cloud::start(dir.path(), &[]);
    let _edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-l");
    // `hog` grows a shell variable past its 32 MiB limit.
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: capped, namespace: default}\nspec:\n  nodeName: edge-l\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'sleep 600']\n    resources: {limits: {cpu: 200m, memory: 32Mi}}\n  - name: hog\n    image: busybox\n    command: [sh, -c, 'sleep 1; x=$(head -c 200000000 /dev/zero | tr \"\\0\" a); echo survived']\n    resources: {limits: {memory: 32Mi}}\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(yaml));
    wait_until("capped is Running", || {
        !field(&cloud, "capped", ".status.containerStatuses[0].state.running.startedAt").is_empty()
    });
    let conditions = field(&cloud, "capped", ".status.conditions[*].type");
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let pid = pid_of(&cloud, "capped").unwrap();
    let theirs = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    if conditions.contains("edgehive.io/ResourceLimits") {
        // This host gives edged no cgroups: the pod says so.
        let message = field(&cloud, "capped", ".status.conditions[?(@.type==\"edgehive.io/ResourceLimits\")].message");
        assert!(message.contains("not applied"), "{message}");
        eprintln!("limits not enforced here: {message}\nour cgroups: {cgroups}");
        return;
    }
    // Applied: the container's process is in its own memory and cpu cgroups
    // with the limits written.
    let mem = theirs.lines().find(|l| l.contains(":memory:") || l.starts_with("0::")).unwrap();
    assert!(mem.contains("/main"), "{theirs}");
    // The hog is killed by the kernel at its limit: exit 137, OOMKilled.
    wait_until("the hog is killed", || {
        !field(&cloud, "capped", ".status.containerStatuses[1].state.terminated.exitCode").is_empty()
    });
    assert_eq!(field(&cloud, "capped", ".status.containerStatuses[1].state.terminated.exitCode"), "137");
    assert_eq!(field(&cloud, "capped", ".status.containerStatuses[1].state.terminated.reason"), "OOMKilled");
}

/// A pod whose one container is `sleep {seconds}`: the number tells the
/// pods apart on the host.
fn sleeper(name: &str, node: &str, seconds: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    command: [sleep, '{seconds}']\n"
    )
}

/// Waits until each of `pods` is Running and every container of the edge
/// runs exactly once, in a process the edge's current run started, which
/// carries its marker.
fn one_process_each(cloud: &Cloud, edge: &Edge, pods: &[String]) {
    let pods_dir = edge.dir.join("data/pods");
    let edge_pid = edge.child.as_ref().unwrap().id();
    let edge_started = process_start_ticks(edge_pid).unwrap();
    let mut last = BTreeMap::new();
    wait_until("every container runs exactly once, started by the edge's current run", || {
        last = container_processes(&pods_dir);
        last.len() == pods.len()
            && last
                .values()
                .all(|pids| pids.len() == 1 && process_start_ticks(pids[0]).is_some_and(|t| t >= edge_started))
    });
    for (dir, pids) in &last {
        assert_eq!(pids.len(), 1, "{} runs {} times: {last:?}", dir.display(), pids.len());
        // `{pods dir}/{uid}/containers/main` ↔ `{pods dir}/{uid}/main/{attempt}`.
        let uid = dir.parent().and_then(Path::parent).and_then(Path::file_name).unwrap().to_string_lossy();
        let marker = container_marker(pids[0]).unwrap_or_default();
        let want = format!("{}/{uid}/main/", pods_dir.display());
        assert!(marker.starts_with(&want), "{} carries {marker:?}, not {want}N", pids[0]);
    }
    wait_until("kubectl shows every pod Running", || {
        let phases = cloud.kubectl(&["get", "pods", "-o", "jsonpath={.items[*].status.phase}"], None);
        phases.split_whitespace().filter(|p| *p == "Running").count() == pods.len()
    });
}

#[test]
fn a_killed_edge_never_runs_a_container_twice() {
    let dir = TempDir::new("edged-kill");
    let cloud = Cloud::start(dir.path(), &[]);
    let _leftovers = KillContainerProcesses(dir.path().join("edge/data/pods"));
    let mut edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-k");
    let pods_dir = edge.dir.join("data/pods");

    // The edge dies right after spawning a container, before anything
    // records it (no pid file): the next run finds it by its marker.
    edge.kill();
    edge.start(&[("EDGEHIVE_FAILPOINT", "edged-after-spawn=1")]);
    cloud.kubectl(&["apply", "-f", "-"], Some(&sleeper("k0", "edge-k", 100_000)));
    wait_until("the edge aborts right after the spawn", || edge.exited());
    let left = container_processes(&pods_dir);
    let (workdir, pids) = left.iter().next().unwrap_or_else(|| panic!("no container process left: {left:?}"));
    assert_eq!((left.len(), pids.len()), (1, 1), "{left:?}");
    assert!(!workdir.with_extension("pid").exists(), "the process was recorded nowhere");
    edge.start(&[]);
    let mut pods = vec!["k0".to_owned()];
    one_process_each(&cloud, &edge, &pods);

    // Kills at random points of bursts of pod starts: in odd rounds right
    // after a random one of the burst's spawns (nothing recorded it yet),
    // in even rounds after a random delay, from outside.
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() as u64 | 1;
    eprintln!("kill points from seed {seed}");
    let mut rng = seed;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for round in 1..=4u32 {
        let batch: Vec<String> = (0..8).map(|i| format!("k{round}-{i}")).collect();
        let yaml: Vec<String> =
            batch.iter().enumerate().map(|(i, n)| sleeper(n, "edge-k", 100_000 + round * 10 + i as u32)).collect();
        if round % 2 == 1 {
            // The restarted edge first starts the pods it has, then the burst.
            let spawn = pods.len() as u64 + 1 + next() % batch.len() as u64;
            eprintln!("round {round}: abort after spawn {spawn}");
            edge.kill();
            edge.start(&[("EDGEHIVE_FAILPOINT", &format!("edged-after-spawn={spawn}"))]);
            cloud.kubectl(&["apply", "-f", "-"], Some(&yaml.join("---\n")));
            wait_until("the edge aborts right after the spawn", || edge.exited());
        } else {
            cloud.kubectl(&["apply", "-f", "-"], Some(&yaml.join("---\n")));
            let delay = Duration::from_millis(next() % 400);
            eprintln!("round {round}: kill after {delay:?}");
            std::thread::sleep(delay);
            edge.kill();
        }
        edge.start(&[]);
        pods.extend(batch);
        one_process_each(&cloud, &edge, &pods);
    }

    // Churn: every pod deleted; nothing stays in the edge's store for them.
    cloud.kubectl(&["delete", "pods", "--all", "--timeout=60s"], None);
    wait_until("no pod, status or process is left", || {
        let rows = edge.rows();
        !rows.keys().any(|k| k.contains("/pod/") || k.contains("/podstatus/") || k.contains("/podpatch/"))
            && container_processes(&pods_dir).is_empty()
    });
}

#[test]
fn a_pod_waits_in_create_container_config_error_until_its_configmap_and_secret_exist() {
    let dir = TempDir::new("edged-config-error");
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-w");
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: waiter, namespace: default}\nspec:\n  nodeName: edge-w\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'echo \"$GREETING/$PASSWORD/${OPT-unset}\"; sleep 600']\n    env:\n    - name: GREETING\n      valueFrom: {configMapKeyRef: {name: cfg, key: greeting}}\n    - name: PASSWORD\n      valueFrom: {secretKeyRef: {name: creds, key: password}}\n    - name: OPT\n      valueFrom: {configMapKeyRef: {name: nope, key: k, optional: true}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: mounter, namespace: default}\nspec:\n  nodeName: edge-w\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'cat etc/vcfg/greeting; echo; sleep 600']\n    volumeMounts: [{name: vcfg, mountPath: /etc/vcfg}]\n  volumes: [{name: vcfg, configMap: {name: vcfg}}]\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(yaml));
    let waiting =
        |pod: &str, what: &str| field(&cloud, pod, &format!(".status.containerStatuses[0].state.waiting.{what}"));
    wait_until("waiter waits for its configmap", || waiting("waiter", "reason") == "CreateContainerConfigError");
    assert_eq!(waiting("waiter", "message"), r#"configmap "cfg" not found"#);
    let table = cloud.kubectl(&["get", "pod", "waiter", "--no-headers"], None);
    assert!(table.contains("CreateContainerConfigError"), "{table}");
    assert_eq!(field(&cloud, "waiter", ".status.phase"), "Pending");
    // A volume's missing configmap keeps its pod ContainerCreating, as kubelet's mount does.
    wait_until("mounter says what its volume waits for", || {
        waiting("mounter", "message").contains(r#"configmap "vcfg" not found"#)
    });
    assert_eq!(waiting("mounter", "reason"), "ContainerCreating");

    // Each object as it comes: the next thing missing is named.
    cloud.kubectl(&["create", "configmap", "cfg", "--from-literal=other=x"], None);
    wait_until("the missing key is named", || {
        waiting("waiter", "message") == "couldn't find key greeting in ConfigMap default/cfg"
    });
    cloud.kubectl(&["patch", "configmap", "cfg", "-p", r#"{"data":{"greeting":"hello"}}"#], None);
    wait_until("the missing secret is named", || waiting("waiter", "message") == r#"secret "creds" not found"#);
    cloud.kubectl(&["create", "secret", "generic", "creds", "--from-literal=password=s3cret"], None);
    wait_until("waiter runs", || field(&cloud, "waiter", ".status.phase") == "Running");
    let log = |pod: &str| {
        let uid = field(&cloud, pod, ".metadata.uid");
        std::fs::read_to_string(edge.dir.join("data/pods").join(uid).join("logs/main/0.log")).unwrap_or_default()
    };
    wait_until("waiter has its values; the optional one is unset", || log("waiter").contains("hello/s3cret/unset"));
    assert_eq!(field(&cloud, "waiter", ".status.containerStatuses[0].restartCount"), "0");

    cloud.kubectl(&["create", "configmap", "vcfg", "--from-literal=greeting=mounted"], None);
    wait_until("mounter runs", || field(&cloud, "mounter", ".status.phase") == "Running");
    wait_until("mounter reads its file", || log("mounter").contains("mounted"));
}

/// A Deployment of `replicas` shell loops on nodes labelled `tier: edge`,
/// rolled one pod at a time. The loops ignore SIGTERM, so a deleted pod
/// stays for its 2 s grace period (long enough to see what waits for it).
fn web_deployment(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: default}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  strategy: {{rollingUpdate: {{maxSurge: 1, maxUnavailable: 0}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      nodeSelector: {{tier: edge}}\n      terminationGracePeriodSeconds: 2\n      containers:\n      - name: main\n        image: busybox\n        command: [sh, -c, 'trap : TERM; while true; do sleep 1; done']\n        readinessProbe: {{exec: {{command: [\"true\"]}}, periodSeconds: 1}}\n"
    )
}

/// `(name, node, image, phase)` of the Deployment's live pods.
fn web_pods(cloud: &Cloud) -> Vec<(String, String, String, String)> {
    let list = cloud.json(&["get", "pods", "-l", "app=web"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
        .map(|p| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&p["metadata"]["name"]),
                s(&p["spec"]["nodeName"]),
                s(&p["spec"]["containers"][0]["image"]),
                s(&p["status"]["phase"]),
            )
        })
        .collect()
}

#[test]
fn deployments_and_daemon_sets_run_on_edge_nodes_roll_out_undo_scale_and_cascade() {
    let dir = TempDir::new("edged-deployment");
    let cloud = Cloud::start(dir.path(), &[]);
    let server = format!("127.0.0.1:{}", cloud.ws);
    let _edges: Vec<Edge> = ["edge-d1", "edge-d2", "edge-d3"]
        .iter()
        .map(|node| {
            let d = dir.path().join(node);
            std::fs::create_dir_all(&d).unwrap();
            start_in(&d, &cloud, &server, node)
        })
        .collect();
    cloud.kubectl(&["label", "node", "edge-d1", "edge-d2", "tier=edge"], None);

    cloud.kubectl(&["apply", "-f", "-"], Some(&web_deployment(3)));
    cloud.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"], None);
    let pods = web_pods(&cloud);
    assert_eq!(pods.len(), 3, "{pods:?}");
    for (name, node, _, phase) in &pods {
        assert_eq!(phase, "Running", "{name}");
        assert!(node == "edge-d1" || node == "edge-d2", "{name} on {node}: the nodeSelector");
    }
    let table = cloud.kubectl(&["get", "deploy", "web"], None);
    assert!(table.contains("READY") && table.contains("UP-TO-DATE") && table.contains("3/3"), "{table}");

    // `set image`: a new ReplicaSet, one pod at a time, never fewer than 3 ready.
    cloud.kubectl(&["set", "image", "deployment/web", "main=busybox:1.36"], None);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let pods = web_pods(&cloud);
        let running = pods.iter().filter(|p| p.3 == "Running").count();
        assert!(pods.len() <= 4, "maxSurge 1: {pods:?}");
        assert!(running >= 3 || pods.len() < 3, "maxUnavailable 0: {pods:?}");
        if pods.len() == 3 && pods.iter().all(|p| p.2 == "busybox:1.36" && p.3 == "Running") {
            break;
        }
        assert!(Instant::now() < deadline, "rollout did not finish: {pods:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    cloud.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"], None);
    let history = cloud.kubectl(&["rollout", "history", "deployment/web"], None);
    assert!(history.contains('1') && history.contains('2'), "{history}");
    assert_eq!(cloud.json(&["get", "rs", "-l", "app=web"])["items"].as_array().unwrap().len(), 2);

    // `rollout undo`: the first template again, from its own ReplicaSet.
    cloud.kubectl(&["rollout", "undo", "deployment/web"], None);
    cloud.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"], None);
    wait_until("the old image is back", || {
        let pods = web_pods(&cloud);
        pods.len() == 3 && pods.iter().all(|p| p.2 == "busybox")
    });
    assert_eq!(cloud.json(&["get", "rs", "-l", "app=web"])["items"].as_array().unwrap().len(), 2);

    // `rollout restart`: every pod replaced, through a new ReplicaSet.
    let before: Vec<String> = web_pods(&cloud).into_iter().map(|p| p.0).collect();
    cloud.kubectl(&["rollout", "restart", "deployment/web"], None);
    cloud.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"], None);
    wait_until("every pod replaced", || {
        let pods = web_pods(&cloud);
        pods.len() == 3 && pods.iter().all(|p| !before.contains(&p.0) && p.3 == "Running")
    });

    // Scale to zero and back, through the scale subresource.
    cloud.kubectl(&["scale", "deployment/web", "--replicas=0"], None);
    wait_until("no pods", || web_pods(&cloud).is_empty());
    cloud.kubectl(&["scale", "deployment/web", "--replicas=2"], None);
    cloud.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"], None);
    assert_eq!(web_pods(&cloud).len(), 2);

    // `kubectl drain`: evictions that a PodDisruptionBudget refuses, then allows.
    let target = web_pods(&cloud)[0].1.clone();
    let budget = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: default}\nspec:\n  minAvailable: 2\n  selector: {matchLabels: {app: web}}\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(budget));
    let allowed = |cloud: &Cloud| {
        let status = cloud.json(&["get", "pdb", "web"])["status"].clone();
        (status["currentHealthy"].as_i64(), status["disruptionsAllowed"].as_i64())
    };
    wait_until("the budget counts both pods", || allowed(&cloud) == (Some(2), Some(0)));
    let refused = cloud.kubectl_output(&["drain", &target, "--ignore-daemonsets", "--timeout=6s"], None);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "the drain went through the budget");
    assert!(err.contains("Cannot evict pod as it would violate the pod's disruption budget."), "{err}");
    assert_eq!(web_pods(&cloud).len(), 2, "nothing evicted");
    let node = cloud.json(&["get", "node", &target]);
    assert_eq!(node["spec"]["unschedulable"], true, "drain cordons first");
    cloud.kubectl(&["patch", "pdb", "web", "--type=merge", "-p", r#"{"spec":{"minAvailable":1}}"#], None);
    wait_until("one disruption allowed", || allowed(&cloud) == (Some(2), Some(1)));
    cloud.kubectl(&["drain", &target, "--ignore-daemonsets", "--timeout=60s"], None);
    wait_until("the evicted pod is replaced on another node", || {
        let pods = web_pods(&cloud);
        pods.len() == 2 && pods.iter().all(|p| p.1 != target && p.3 == "Running")
    });
    cloud.kubectl(&["uncordon", &target], None);
    cloud.kubectl(&["delete", "pdb", "web"], None);

    // Foreground: the Deployment is the last to go.
    cloud.kubectl(&["delete", "deployment", "web", "--cascade=foreground", "--wait=false"], None);
    let mut saw_owner_waiting = false;
    wait_until("everything is gone", || {
        let deploys = cloud.json(&["get", "deploy"]);
        let rs = cloud.json(&["get", "rs"]);
        let left = |l: &serde_json::Value| l["items"].as_array().map_or(0, Vec::len);
        if left(&deploys) == 1 && (left(&rs) > 0 || !web_pods(&cloud).is_empty()) {
            saw_owner_waiting = true;
        }
        assert!(left(&deploys) == 1 || (left(&rs) == 0), "the owner went before its dependents");
        left(&deploys) == 0 && left(&rs) == 0 && web_pods(&cloud).is_empty()
    });
    assert!(saw_owner_waiting, "the Deployment waited for its dependents");

    // A DaemonSet: a pod on each `tier: edge` node, and on a node that joins later.
    let daemon = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent, namespace: default}\nspec:\n  selector: {matchLabels: {app: agent}}\n  template:\n    metadata: {labels: {app: agent}}\n    spec:\n      nodeSelector: {tier: edge}\n      terminationGracePeriodSeconds: 1\n      containers:\n      - name: main\n        image: busybox\n        command: [sh, -c, 'while true; do sleep 1; done']\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(daemon));
    cloud.kubectl(&["rollout", "status", "daemonset/agent", "--timeout=60s"], None);
    let agents = |cloud: &Cloud| -> Vec<String> {
        let mut nodes: Vec<String> = cloud.json(&["get", "pods", "-l", "app=agent"])["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["status"]["phase"] == "Running" && p["metadata"].get("deletionTimestamp").is_none())
            .map(|p| p["spec"]["nodeName"].as_str().unwrap_or_default().to_owned())
            .collect();
        nodes.sort();
        nodes
    };
    assert_eq!(agents(&cloud), ["edge-d1", "edge-d2"]);
    let d4 = dir.path().join("edge-d4");
    std::fs::create_dir_all(&d4).unwrap();
    let _late = start_in(&d4, &cloud, &server, "edge-d4");
    cloud.kubectl(&["label", "node", "edge-d4", "tier=edge"], None);
    wait_until("the joining node runs its daemon", || agents(&cloud) == ["edge-d1", "edge-d2", "edge-d4"]);
    let table = cloud.kubectl(&["get", "ds", "agent"], None);
    assert!(table.contains("NODE SELECTOR") && table.contains("tier=edge"), "{table}");
    cloud.kubectl(&["delete", "ds", "agent"], None);
    wait_until("the daemons are gone", || agents(&cloud).is_empty());

    // A Job of five completions, two at a time, runs to completion on the edges.
    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: count, namespace: default}\nspec:\n  completions: 5\n  parallelism: 2\n  template:\n    spec:\n      nodeSelector: {tier: edge}\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox\n        command: [sh, -c, 'sleep 1']\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(job));
    wait_until("the job completes", || {
        let pods = cloud.json(&["get", "pods", "-l", "job-name=count"]);
        let running =
            pods["items"].as_array().into_iter().flatten().filter(|p| p["status"]["phase"] == "Running").count();
        assert!(running <= 2, "parallelism 2: {running} running");
        let status = cloud.json(&["get", "job", "count"])["status"].clone();
        status["succeeded"] == 5
            && status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Complete" && c["status"] == "True")
    });
    let table = cloud.kubectl(&["get", "job", "count"], None);
    assert!(table.contains("COMPLETIONS") && table.contains("5/5"), "{table}");
    cloud.kubectl(&["delete", "job", "count"], None);
}

/// A CronJob every minute, on an edge, as Kubernetes' e2e tests run one:
/// in real minutes. Its Jobs run to completion; after the second one only
/// `successfulJobsHistoryLimit` (1) is kept, and the CronJob's Events say
/// what it did.
#[test]
fn a_cronjob_every_minute_runs_its_jobs_on_an_edge_and_keeps_its_history_limit() {
    let dir = TempDir::new("edged-cronjob");
    let cloud = Cloud::start(dir.path(), &[]);
    let server = format!("127.0.0.1:{}", cloud.ws);
    let _edge = start_in(dir.path(), &cloud, &server, "edge-c1");
    let cronjob = "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: tick, namespace: default}\nspec:\n  schedule: '* * * * *'\n  concurrencyPolicy: Forbid\n  successfulJobsHistoryLimit: 1\n  failedJobsHistoryLimit: 1\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: main\n            image: busybox\n            command: [sh, -c, 'echo tick']\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(cronjob));
    // Two minutes and some: the first run at the next minute, the second a minute later.
    let deadline = Instant::now() + Duration::from_secs(200);
    let mut seen = std::collections::BTreeSet::new();
    loop {
        let jobs = cloud.json(&["get", "jobs"]);
        let jobs = jobs["items"].as_array().cloned().unwrap_or_default();
        for j in &jobs {
            assert_eq!(j["metadata"]["ownerReferences"][0]["name"], "tick", "{j}");
            seen.insert(j["metadata"]["name"].as_str().unwrap().to_string());
        }
        let complete = |j: &serde_json::Value| {
            j["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Complete" && c["status"] == "True")
        };
        if seen.len() >= 2 && jobs.len() == 1 && complete(&jobs[0]) {
            break;
        }
        assert!(jobs.len() <= 2, "history limit 1, and at most one running (Forbid): {jobs:?}");
        assert!(Instant::now() < deadline, "two runs and the history trimmed: seen {seen:?}, now {jobs:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let cj = cloud.json(&["get", "cronjob", "tick"]);
    assert!(cj["status"]["lastScheduleTime"].is_string() && cj["status"]["lastSuccessfulTime"].is_string(), "{cj}");
    let first = seen.iter().next().unwrap().clone();
    wait_until("the CronJob's Events", || {
        let events = cloud.kubectl(&["events", "--for", "cronjob/tick"], None);
        events.contains(&format!("Created job {first}"))
            && events.contains(&format!("Saw completed job: {first}, condition: Complete"))
            && events.contains(&format!("Deleted job {first}"))
    });
    cloud.kubectl(&["delete", "cronjob", "tick"], None);
    wait_until("its Jobs are collected", || cloud.json(&["get", "jobs"])["items"].as_array().is_none_or(Vec::is_empty));
}

/// An edge with edged in `dir`, joined and Ready.
fn start_in(dir: &Path, cloud: &Cloud, server: &str, node: &str) -> Edge {
    let mut edge = Edge::new(dir);
    edge.edged = true;
    edge.configure(node, server, cloud.join, Some(&cloud.token()));
    edge.start(&[]);
    wait_until("the node is Ready", || cloud.node_ready(node).as_deref() == Some("True"));
    edge
}

/// kubectl logs, exec and cp reach a pod on the edge through the edge's own
/// connection to the cloud.
#[test]
fn kubectl_logs_exec_and_cp_reach_pods_on_the_edge() {
    let dir = TempDir::new("edged-streams");
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-s");
    let talker = "apiVersion: v1\nkind: Pod\nmetadata: {name: talker, namespace: default}\nspec:\n  nodeName: edge-s\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    env: [{name: X, value: hello-x}]\n    command: [sh, -c, 'i=0; while true; do i=$((i+1)); echo line $i; echo err $i >&2; sleep 0.05; done']\n";
    let crash =
        shell_pod("crasher", "edge-s", "Always", "echo run-$(cat /proc/sys/kernel/random/uuid); exit 1", "busybox");
    cloud.kubectl(&["apply", "-f", "-"], Some(&format!("{talker}---\n{crash}")));
    wait_until("talker runs", || field(&cloud, "talker", ".status.phase") == "Running");

    // logs: stdout and stderr, in order; --tail; --timestamps.
    wait_until("talker has logged", || cloud.kubectl(&["logs", "talker"], None).contains("line 3"));
    let all = cloud.kubectl(&["logs", "talker"], None);
    assert!(all.starts_with("line 1\nerr 1\nline 2\n"), "{all}");
    let tail = cloud.kubectl(&["logs", "talker", "--tail=2"], None);
    assert_eq!(tail.lines().count(), 2, "{tail}");
    let stamped = cloud.kubectl(&["logs", "talker", "--tail=1", "--timestamps"], None);
    let (stamp, rest) = stamped.split_once(' ').unwrap();
    assert!(time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339).is_ok(), "{stamped}");
    assert!(rest.starts_with("line ") || rest.starts_with("err "), "{stamped}");
    let limited = cloud.kubectl(&["logs", "talker", "--limit-bytes=5"], None);
    assert_eq!(limited, "line ");

    // logs -f: lines written after it started arrive while it runs.
    let mut follow = std::process::Command::new("kubectl")
        .env("KUBECONFIG", cloud.data.join("kubeconfig.yaml"))
        .env("HOME", &cloud.home)
        .args(["logs", "-f", "talker", "--tail=0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(follow.stdout.take().unwrap()));
    let first = lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    assert!(first.starts_with("line ") || first.starts_with("err "), "{first}");
    assert_ne!(first, second);
    follow.kill().unwrap();
    let _ = follow.wait();

    // exec: the container's environment and directory, exit codes, stdin.
    assert_eq!(cloud.kubectl(&["exec", "talker", "--", "sh", "-c", "echo $X"], None), "hello-x\n");
    let pwd = cloud.kubectl(&["exec", "talker", "--", "pwd"], None);
    assert!(pwd.trim_end().ends_with("/containers/main"), "{pwd}");
    for (cmd, code) in [("false", 1), ("exit 7", 7)] {
        let out = cloud.kubectl_output(&["exec", "talker", "--", "sh", "-c", cmd], None);
        assert_eq!(out.status.code(), Some(code), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let echoed =
        cloud.kubectl(&["exec", "-i", "talker", "--", "sh", "-c", "tr a-z A-Z"], Some("stdin reaches the pod\n"));
    assert_eq!(echoed, "STDIN REACHES THE POD\n");
    let both = cloud.kubectl_output(&["exec", "talker", "--", "sh", "-c", "echo out; echo err >&2"], None);
    assert_eq!(String::from_utf8_lossy(&both.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&both.stderr), "err\n");

    // exec -t: the command gets a terminal of its own (kubectl needs one
    // too: `script` gives it one).
    let terminal = std::process::Command::new("script")
        .env("KUBECONFIG", cloud.data.join("kubeconfig.yaml"))
        .env("HOME", &cloud.home)
        .args(["-qec", "kubectl exec -it talker -- sh -c 'tty; stty size; echo $TERM; exit 3'", "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&terminal.stdout);
    assert!(shown.contains("/dev/pts/"), "{shown}");
    assert!(shown.contains("xterm"), "{shown}");
    assert_eq!(terminal.status.code(), Some(3), "{shown}");

    // A client that goes away while its command is silent: the session
    // ends, and with it the command at the edge.
    let sleepers = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == b"sleep\x00607\x00"))
            .count()
    };
    let mut silent = cloud.kubectl_spawn(&["exec", "talker", "--", "sleep", "607"]);
    wait_until("the silent command runs", || sleepers() == 1);
    silent.kill().unwrap();
    let _ = silent.wait();
    wait_until("the silent command ends with its client gone", || sleepers() == 0);

    // cp, both ways (exec with tar).
    let local = dir.path().join("payload.txt");
    let payload: String = (0..20_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(&local, &payload).unwrap();
    cloud.kubectl(&["cp", local.to_str().unwrap(), "talker:payload.txt"], None);
    assert_eq!(
        cloud.kubectl(&["exec", "talker", "--", "wc", "-c", "payload.txt"], None).split_whitespace().next(),
        Some(payload.len().to_string().as_str())
    );
    let back = dir.path().join("back.txt");
    cloud.kubectl(&["cp", "talker:payload.txt", back.to_str().unwrap()], None);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), payload);

    // The official Python client: logs, exec with its exit code, and
    // port-forward (WebSocket) to an HTTP server in a pod.
    let port = edgehive_testkit::fixtures::free_port();
    let server = shell_pod(
        "web",
        "edge-s",
        "Always",
        &format!("echo hello-from-the-pod > hello.txt; exec python3 -m http.server {port} --bind 127.0.0.1"),
        "python",
    );
    cloud.kubectl(&["apply", "-f", "-"], Some(&server));
    wait_until("the web server listens", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/streams.py");
    let kubeconfig = cloud.data.join("kubeconfig.yaml");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(&kubeconfig)
        .args(["talker", &port.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the Python client ({python}; scripts/test.sh installs it): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = &out;
    let forwarded = std::process::Command::new(&python)
        .arg(script)
        .arg(&kubeconfig)
        .args(["web", &port.to_string()])
        .output()
        .unwrap();
    assert!(forwarded.status.success(), "{}", String::from_utf8_lossy(&forwarded.stderr));
    let talker_view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(talker_view["exec"], "hello-x\n");
    assert_eq!(talker_view["exec_code"], 4);
    assert!(
        talker_view["log"].as_str().unwrap().starts_with("line ")
            || talker_view["log"].as_str().unwrap().starts_with("err ")
    );
    assert_eq!(talker_view["metrics_containers"], serde_json::json!(["main"]));
    assert_eq!(talker_view["node_healthz"], "ok");
    let web_view: serde_json::Value = serde_json::from_slice(&forwarded.stdout).unwrap();
    let page = web_view["forward"].as_str().unwrap();
    assert!(page.starts_with("HTTP/1.0 200") && page.ends_with("hello-from-the-pod\n"), "{page}");
    assert!(web_view["forward_error"].is_null(), "{web_view}");
    let refused = web_view["closed_port_error"].as_str().unwrap_or_default();
    assert!(refused.contains("error forwarding port 1") && refused.contains("refused"), "{web_view}");
    // kubectl port-forward speaks SPDY: refused with a message saying what is served.
    let kpf = cloud.kubectl_output(&["port-forward", "pod/web", &format!("0:{port}")], None);
    assert!(!kpf.status.success());
    let why = String::from_utf8_lossy(&kpf.stderr);
    assert!(why.contains("v4.channel.k8s.io"), "{why}");

    // kubectl top: usage the edge measures when asked; a busy container
    // shows its CPU.
    let burner = shell_pod("burner", "edge-s", "Always", "while :; do :; done", "busybox");
    cloud.kubectl(&["apply", "-f", "-"], Some(&burner));
    wait_until("burner runs", || field(&cloud, "burner", ".status.phase") == "Running");
    let millicores = |cpu: &str| cpu.strip_suffix('m').and_then(|m| m.parse::<u64>().ok()).unwrap_or(0);
    let top = cloud.kubectl(&["top", "node", "--no-headers"], None);
    let row: Vec<&str> =
        top.lines().find(|l| l.starts_with("edge-s ")).unwrap_or_else(|| panic!("{top}")).split_whitespace().collect();
    assert!(millicores(row[1]) > 0 && row[2].ends_with('%') && row[3].ends_with("Mi"), "{top}");
    // A node's summary answers for 10 s: a new pod shows within that.
    wait_until("burner burns", || {
        let pods = cloud.kubectl_output(&["top", "pod", "burner", "--no-headers"], None);
        String::from_utf8_lossy(&pods.stdout).split_whitespace().nth(1).is_some_and(|cpu| millicores(cpu) >= 10)
    });
    let listed = cloud.kubectl(&["top", "pod", "--containers", "--no-headers"], None);
    for (pod, container) in [("talker", "main"), ("burner", "main"), ("web", "main")] {
        assert!(
            listed.lines().any(|l| l.split_whitespace().take(2).eq([pod, container])),
            "{pod}/{container} in\n{listed}"
        );
    }
    let raw: serde_json::Value =
        serde_json::from_str(&cloud.kubectl(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/edge-s"], None))
            .unwrap();
    assert_eq!(raw["kind"], "NodeMetrics");
    assert!(raw["usage"]["cpu"].as_str().unwrap().ends_with('n'), "{raw}");
    let e = cloud.kubectl_output(&["get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/ghost"], None);
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("NotFound")
            || String::from_utf8_lossy(&e.stderr).contains("not found")
    );
    // The node's own endpoints, through nodes/proxy.
    let proxied = |path: &str| cloud.kubectl(&["get", "--raw", &format!("/api/v1/nodes/edge-s/proxy{path}")], None);
    assert_eq!(proxied("/healthz"), "ok");
    let resource = proxied("/metrics/resource");
    assert!(
        resource.contains("container_cpu_usage_seconds_total{container=\"main\",namespace=\"default\",pod=\"burner\"}"),
        "{resource}"
    );
    let summary: serde_json::Value = serde_json::from_str(&proxied("/stats/summary")).unwrap();
    assert!(summary["node"]["memory"]["workingSetBytes"].as_u64().unwrap() > 0, "{summary}");
    let pods: serde_json::Value = serde_json::from_str(&proxied("/pods")).unwrap();
    assert!(pods["items"].as_array().unwrap().iter().any(|p| p["metadata"]["name"] == "talker"), "{pods}");
    let e = cloud.kubectl_output(&["get", "--raw", "/api/v1/nodes/edge-s/proxy/nope"], None);
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("the node serves no"),
        "{}",
        String::from_utf8_lossy(&e.stderr)
    );
    cloud.kubectl(&["delete", "pod", "burner", "--wait=false"], None);

    // attach -i: input to a container with `stdin: true` (its stdin is a
    // pipe edged holds), output from its log. The input is sent until the
    // answer shows (the attach follows the log from when it started).
    let reader = "apiVersion: v1\nkind: Pod\nmetadata: {name: reader, namespace: default}\nspec:\n  nodeName: edge-s\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    stdin: true\n    command: [sh, -c, 'while read l; do echo got $l; done']\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(reader));
    wait_until("reader runs", || field(&cloud, "reader", ".status.phase") == "Running");
    let mut attached = cloud.kubectl_spawn(&["attach", "-i", "reader"]);
    let mut input = attached.stdin.take().unwrap();
    let feeding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let feeder = std::thread::spawn({
        let feeding = feeding.clone();
        move || {
            while feeding.load(std::sync::atomic::Ordering::Relaxed)
                && std::io::Write::write_all(&mut input, b"hello\n").is_ok()
            {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    });
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(attached.stdout.take().unwrap()));
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("got hello"));
    feeding.store(false, std::sync::atomic::Ordering::Relaxed);
    attached.kill().unwrap();
    let _ = attached.wait();
    feeder.join().unwrap();

    // --previous: the attempt before the current one.
    wait_until("crasher restarted twice", || {
        field(&cloud, "crasher", ".status.containerStatuses[0].restartCount").parse::<u32>().unwrap_or(0) >= 2
    });
    let previous = cloud.kubectl(&["logs", "crasher", "--previous"], None);
    assert!(previous.starts_with("run-") && previous.lines().count() == 1, "{previous}");

    // Bad input: clear errors, nothing else hurt.
    let refused = |args: &[&str]| {
        let out = cloud.kubectl_output(args, None);
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = refused(&["logs", "talker", "-c", "nope"]);
    assert!(e.contains("container nope is not valid for pod talker"), "{e}");
    let e = refused(&["exec", "ghost", "--", "true"]);
    assert!(e.contains("pods \"ghost\" not found"), "{e}");
    let e = refused(&["exec", "talker", "-c", "nope", "--", "true"]);
    assert!(e.contains("container nope is not valid for pod talker"), "{e}");

    // An offline node: a clear error at once, not a hang.
    edge.terminate();
    let started = Instant::now();
    let e = refused(&["logs", "talker"]);
    assert!(e.contains("not connected to the cloud"), "{e}");
    let e = refused(&["exec", "talker", "--", "true"]);
    assert!(e.contains("not connected to the cloud"), "{e}");
    let e = refused(&["get", "--raw", "/api/v1/nodes/edge-s/proxy/healthz"]);
    assert!(e.contains("not connected to the cloud"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

/// A 100 MiB burst through an exec and a `kubectl logs -f` that stops
/// reading hold back neither the node's deliveries nor each other: a
/// configmap update still reaches another pod's volume.
#[test]
fn a_stream_burst_and_a_stuck_log_reader_hold_back_no_delivery() {
    let dir = TempDir::new("edged-burst");
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &format!("127.0.0.1:{}", cloud.ws), "edge-b");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: default}\ndata: {greeting: v0}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: holder, namespace: default}\nspec:\n  nodeName: edge-b\n  containers:\n  - name: main\n    image: busybox\n    command: [sh, -c, 'while true; do sleep 1; done']\n    volumeMounts: [{name: cfg, mountPath: /etc/cfg}]\n  volumes: [{name: cfg, configMap: {name: cfg}}]\n";
    let chatty = shell_pod("chatty", "edge-b", "Always", "while true; do seq 1 2000; done", "busybox");
    cloud.kubectl(&["apply", "-f", "-"], Some(&format!("{yaml}---\n{chatty}")));
    wait_until("both run", || {
        field(&cloud, "holder", ".status.phase") == "Running" && field(&cloud, "chatty", ".status.phase") == "Running"
    });
    let file = edge.dir.join("data/pods").join(field(&cloud, "holder", ".metadata.uid")).join("volumes/cfg/greeting");
    let update = |value: &str| {
        let started = Instant::now();
        let patch = format!(r#"{{"data":{{"greeting":"{value}"}}}}"#);
        cloud.kubectl(&["patch", "configmap", "cfg", "-p", &patch], None);
        wait_until("the update reaches the volume", || std::fs::read_to_string(&file).unwrap_or_default() == value);
        started.elapsed()
    };
    let quiet = update("v1");

    // A log follower that never reads, and a 100 MiB exec output.
    let kubectl = |args: &[&str]| {
        let mut c = std::process::Command::new("kubectl");
        c.env("KUBECONFIG", cloud.data.join("kubeconfig.yaml")).env("HOME", &cloud.home).args(args);
        c
    };
    let mut stuck = kubectl(&["logs", "-f", "chatty"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut burst = kubectl(&["exec", "chatty", "--", "head", "-c", "104857600", "/dev/zero"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = burst.stdout.take().unwrap();
    let counter = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()).unwrap());
    let mut busy = Vec::new();
    for i in 2..6 {
        busy.push(update(&format!("v{i}")));
    }
    let copied = counter.join().unwrap();
    assert!(burst.wait().unwrap().success());
    assert_eq!(copied, 100 << 20, "the whole burst arrived");
    eprintln!("configmap update to a volume: quiet {quiet:?}; during the burst and a stuck follower {busy:?}");
    // The stuck follower is still there, and still served once it reads.
    let mut first = [0u8; 16];
    std::io::Read::read_exact(stuck.stdout.as_mut().unwrap(), &mut first).unwrap();
    stuck.kill().unwrap();
    let _ = stuck.wait();
}
