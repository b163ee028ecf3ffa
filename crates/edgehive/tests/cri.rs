//! The same pod lifecycle as `tests/edged.rs`, on the CRI runtime: `edgehive
//! edge` drives a real containerd (started by the test with its state in a
//! temporary directory, images built locally from busybox-static and
//! imported), and kubectl shows the result; a container whose configmap is
//! missing waits in `CreateContainerConfigError` until it exists. If
//! containerd cannot start here, these tests fail and say why; they are not
//! skipped.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod support;

use std::time::{Duration, Instant};

use edgehive_testkit::containerd::Containerd;
use edgehive_testkit::fixtures::TempDir;
use support::*;

fn containerd() -> Containerd {
    Containerd::start().unwrap_or_else(|e| panic!("the CRI tests need containerd: {e}"))
}

fn pod(name: &str, node: &str, policy: &str, script: &str) -> String {
    shell_pod(name, node, policy, script, Containerd::IMAGE)
}

use support::pod_field as field;

fn start(dir: &TempDir, cloud: &Cloud, ctd: &Containerd, node: &str) -> Edge {
    let mut edge = Edge::new(dir.path());
    edge.edged = true;
    edge.runtime_endpoint = Some(ctd.endpoint());
    edge.configure(node, &format!("127.0.0.1:{}", cloud.ws), cloud.join, Some(&cloud.token()));
    edge.start(&[]);
    wait_until("the node is Ready", || cloud.node_ready(node).as_deref() == Some("True"));
    let runtime =
        cloud.kubectl(&["get", "node", node, "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}"], None);
    assert!(runtime.starts_with("containerd://"), "{runtime}");
    edge
}

/// Tasks containerd runs.
fn tasks(ctd: &Containerd) -> String {
    ctd.ctr(&["tasks", "ls"])
}

#[test]
fn pods_run_restart_fail_and_stop_on_containerd() {
    let dir = TempDir::new("cri-lifecycle");
    let ctd = containerd();
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &ctd, "edge-c");
    run_lifecycle_pods(&cloud, "edge-c", Containerd::IMAGE);

    let id = field(&cloud, "loop", ".status.containerStatuses[0].containerID");
    let id = id.strip_prefix("containerd://").unwrap_or_else(|| panic!("{id}")).to_owned();
    assert!(tasks(&ctd).contains(&id), "containerd runs {id}:\n{}", tasks(&ctd));
    // Its output is in the pod's log directory (CRI log format).
    let uid = field(&cloud, "loop", ".metadata.uid");
    let log = edge.dir.join("data/pods").join(&uid).join("logs/main/0.log");
    wait_until("the log has ticks", || std::fs::read_to_string(&log).unwrap_or_default().contains("stdout F tick"));

    // Delete: containerd stops the container within the grace period.
    let started = Instant::now();
    cloud.kubectl(&["delete", "pod", "loop", "--timeout=30s"], None);
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    wait_until("the container is gone from containerd", || !tasks(&ctd).contains(&id));
}

#[test]
fn probes_volumes_and_env_on_containerd() {
    let dir = TempDir::new("cri-probes");
    let ctd = containerd();
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &ctd, "edge-d");
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg, namespace: default}}\ndata: {{greeting: hello}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: probed, namespace: default}}\nspec:\n  nodeName: edge-d\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [sh, -c, 'touch /tmp/alive; sleep 2; rm -f /tmp/alive; while true; do echo \"$GREETING=$(cat /etc/cfg/greeting)\"; sleep 0.2; done']\n    env:\n    - name: GREETING\n      valueFrom: {{configMapKeyRef: {{name: cfg, key: greeting}}}}\n    livenessProbe: {{exec: {{command: [test, -f, /tmp/alive]}}, periodSeconds: 1, failureThreshold: 1}}\n    volumeMounts:\n    - {{name: cfg, mountPath: /etc/cfg}}\n  volumes:\n  - name: cfg\n    configMap: {{name: cfg}}\n",
        image = Containerd::IMAGE
    );
    cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
    wait_until("probed is Running", || field(&cloud, "probed", ".status.phase") == "Running");
    let uid = field(&cloud, "probed", ".metadata.uid");
    // A log file per attempt (`logs/main/{attempt}.log`); the container restarts.
    let logs = edge.dir.join("data/pods").join(&uid).join("logs/main");
    let log = || -> String {
        let files = std::fs::read_dir(&logs).into_iter().flatten().flatten();
        files.map(|f| std::fs::read_to_string(f.path()).unwrap_or_default()).collect()
    };
    // The env var and the mounted configMap file, inside the container.
    wait_until("the container reads its config", || log().contains("hello=hello"));
    // The liveness probe (ExecSync in the container) fails after 2 s: restarted.
    wait_until("a liveness restart", || {
        field(&cloud, "probed", ".status.containerStatuses[0].restartCount").parse::<u32>().unwrap_or(0) >= 1
    });
    // The configMap changes: the running container sees the new file.
    cloud.kubectl(&["patch", "configmap", "cfg", "-p", r#"{"data":{"greeting":"changed"}}"#], None);
    wait_until("the update reaches the container", || log().contains("hello=changed"));
}

#[test]
fn a_missing_image_is_reported_and_a_restarted_edge_adopts_its_containers() {
    let dir = TempDir::new("cri-restart");
    let ctd = containerd();
    let cloud = Cloud::start(dir.path(), &[]);
    let mut edge = start(&dir, &cloud, &ctd, "edge-r");
    let missing = "apiVersion: v1\nkind: Pod\nmetadata: {name: ghost, namespace: default}\nspec:\n  nodeName: edge-r\n  containers:\n  - name: main\n    image: edgehive.local/no-such-image:1\n    imagePullPolicy: Never\n";
    cloud.kubectl(&["apply", "-f", "-"], Some(missing));
    cloud.kubectl(&["apply", "-f", "-"], Some(&pod("keeper", "edge-r", "Always", "while true; do sleep 1; done")));
    wait_until("ghost says why it cannot start", || {
        field(&cloud, "ghost", ".status.containerStatuses[0].state.waiting.reason") == "ErrImageNeverPull"
    });
    assert_eq!(field(&cloud, "ghost", ".status.phase"), "Pending");
    wait_until("keeper is Running", || field(&cloud, "keeper", ".status.phase") == "Running");
    let first = field(&cloud, "keeper", ".status.containerStatuses[0].containerID");

    let id = first.trim_start_matches("containerd://").to_owned();

    // The edge is killed, then stopped gently: containerd's containers
    // outlive it either way, and each new run adopts the one running — same
    // container, no restart, one copy.
    let running = || -> Vec<String> {
        let mut ids: Vec<String> = tasks(&ctd)
            .lines()
            .filter(|l| l.contains("RUNNING"))
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect();
        ids.sort();
        ids
    };
    let before = running();
    for how in ["SIGKILL", "SIGTERM"] {
        if how == "SIGKILL" {
            edge.kill();
        } else {
            edge.terminate();
        }
        assert!(tasks(&ctd).contains(&id), "after {how} the container runs on:\n{}", tasks(&ctd));
        let adopted_before = edge.log_text().matches("container adopted").count();
        edge.start(&[]);
        wait_until("the new run adopts keeper", || {
            edge.log_text().matches("container adopted").count() > adopted_before
        });
        wait_until("keeper is reported ready", || {
            field(&cloud, "keeper", ".status.containerStatuses[0].ready") == "true"
        });
        assert_eq!(field(&cloud, "keeper", ".status.containerStatuses[0].containerID"), first, "after {how}");
        assert_eq!(field(&cloud, "keeper", ".status.containerStatuses[0].restartCount"), "0");
        // The same containers and sandboxes run as before: nothing made anew.
        assert_eq!(running(), before, "after {how}");
    }
}

#[test]
fn a_container_waits_in_create_container_config_error_until_its_configmap_exists() {
    let dir = TempDir::new("cri-config-error");
    let ctd = containerd();
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &ctd, "edge-g");
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: waiter, namespace: default}}\nspec:\n  nodeName: edge-g\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [sh, -c, 'echo \"greeting=$GREETING opt=${{OPT-unset}}\"; sleep 600']\n    env:\n    - name: GREETING\n      valueFrom: {{configMapKeyRef: {{name: cfg, key: greeting}}}}\n    - name: OPT\n      valueFrom: {{secretKeyRef: {{name: nope, key: k, optional: true}}}}\n",
        image = Containerd::IMAGE
    );
    cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));
    let waiting = |what: &str| field(&cloud, "waiter", &format!(".status.containerStatuses[0].state.waiting.{what}"));
    wait_until("waiter waits for its configmap", || waiting("reason") == "CreateContainerConfigError");
    assert_eq!(waiting("message"), r#"configmap "cfg" not found"#);
    let table = cloud.kubectl(&["get", "pod", "waiter", "--no-headers"], None);
    assert!(table.contains("CreateContainerConfigError"), "{table}");
    // Only the pod's sandbox runs meanwhile (kubelet's order too): no container.
    assert_eq!(tasks(&ctd).matches("RUNNING").count(), 1, "{}", tasks(&ctd));

    cloud.kubectl(&["create", "configmap", "cfg", "--from-literal=greeting=hello"], None);
    wait_until("waiter runs", || field(&cloud, "waiter", ".status.phase") == "Running");
    let uid = field(&cloud, "waiter", ".metadata.uid");
    let log = edge.dir.join("data/pods").join(&uid).join("logs/main/0.log");
    wait_until("the container has the value; the optional one is unset", || {
        std::fs::read_to_string(&log).unwrap_or_default().contains("stdout F greeting=hello opt=unset")
    });
}

/// kubectl exec, logs and cp reach a container on containerd: the edge asks
/// containerd for an exec URL and relays the session to its streaming
/// server (WebSocket without stdin, SPDY with), as kubelet does.
#[test]
fn kubectl_exec_logs_and_cp_reach_containers_on_containerd() {
    let dir = TempDir::new("cri-streams");
    let ctd = containerd();
    let cloud = Cloud::start(dir.path(), &[]);
    let edge = start(&dir, &cloud, &ctd, "edge-x");
    let talker = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: talker, namespace: default}}\nspec:\n  nodeName: edge-x\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    env: [{{name: X, value: hello-x}}]\n    command: [sh, -c, 'i=0; while true; do i=$((i+1)); echo line $i; sleep 0.1; done']\n",
        image = Containerd::IMAGE
    );
    // Fails once, then runs (an emptyDir keeps the mark across attempts): one
    // restart, so the previous attempt stays the first.
    let twice = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: twice, namespace: default}}\nspec:\n  nodeName: edge-x\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [sh, -c, 'if [ -e /state/ran ]; then echo second run; exec sleep 600; fi; touch /state/ran; echo first run; exit 1']\n    volumeMounts: [{{name: state, mountPath: /state}}]\n  volumes: [{{name: state, emptyDir: {{}}}}]\n",
        image = Containerd::IMAGE
    );
    cloud.kubectl(&["apply", "-f", "-"], Some(&format!("{talker}---\n{twice}")));
    wait_until("talker runs", || field(&cloud, "talker", ".status.phase") == "Running");

    // exec: the container's environment (from the pod spec), exit codes.
    assert_eq!(cloud.kubectl(&["exec", "talker", "--", "sh", "-c", "echo $X"], None), "hello-x\n");
    for (cmd, code) in [("true", 0), ("false", 1), ("exit 7", 7)] {
        let out = cloud.kubectl_output(&["exec", "talker", "--", "sh", "-c", cmd], None);
        assert_eq!(out.status.code(), Some(code), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // stdout and stderr apart, without and with stdin.
    let both = cloud.kubectl_output(&["exec", "talker", "--", "sh", "-c", "echo out; echo err >&2"], None);
    assert_eq!(String::from_utf8_lossy(&both.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&both.stderr), "err\n");
    // stdin, closed at its end (cat ends).
    assert_eq!(
        cloud.kubectl(&["exec", "-i", "talker", "--", "cat"], Some("stdin reaches the container\n")),
        "stdin reaches the container\n"
    );
    let piped = cloud.kubectl_output(
        &["exec", "-i", "talker", "--", "sh", "-c", "tr a-z A-Z; echo done >&2; exit 4"],
        Some("abc\n"),
    );
    assert_eq!(String::from_utf8_lossy(&piped.stdout), "ABC\n");
    // (kubectl adds the exit code to its own stderr.)
    assert_eq!(String::from_utf8_lossy(&piped.stderr), "done\ncommand terminated with exit code 4\n");
    assert_eq!(piped.status.code(), Some(4));
    // A command the image does not have: containerd's error, not a hang.
    let missing = cloud.kubectl_output(&["exec", "talker", "--", "no-such-command"], None);
    assert!(!missing.status.success());
    let e = String::from_utf8_lossy(&missing.stderr);
    assert!(e.contains("no-such-command"), "{e}");

    // exec -t: a terminal in the container (kubectl needs one too: `script`),
    // sized as kubectl's (the resize channel).
    let terminal = std::process::Command::new("script")
        .env("KUBECONFIG", cloud.data.join("kubeconfig.yaml"))
        .env("HOME", &cloud.home)
        .args([
            "-qec",
            // (kubectl sends the size once the exec started: waited for; busybox's
            // `stty size` prints nothing while the size is unknown.)
            "stty rows 31 cols 97; kubectl exec -it talker -- sh -c 'tty; for i in $(seq 50); do s=$(stty size 2>/dev/null); [ -n \"$s\" ] && break; sleep 0.1; done; echo size=$s TERM=$TERM; exit 3'",
            "/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&terminal.stdout);
    assert!(shown.contains("/dev/pts/"), "{shown}");
    assert!(shown.contains("size=31 97 TERM=xterm"), "{shown}");
    assert_eq!(terminal.status.code(), Some(3), "{shown}");

    // kubectl top: containerd's ContainerStats, read when asked.
    wait_until("talker has metrics", || {
        let top = cloud.kubectl_output(&["top", "pod", "talker", "--containers", "--no-headers"], None);
        let top = String::from_utf8_lossy(&top.stdout).into_owned();
        let cols: Vec<&str> = top.split_whitespace().collect();
        cols.len() == 4 && cols[..2] == ["talker", "main"] && cols[3].ends_with("Mi")
    });
    let node = cloud.kubectl(&["top", "node", "edge-x", "--no-headers"], None);
    assert!(node.starts_with("edge-x "), "{node}");

    // cp, both ways (tar over exec, stdin closed at the end of the archive).
    let local = dir.path().join("payload.txt");
    let payload: String = (0..20_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(&local, &payload).unwrap();
    cloud.kubectl(&["cp", local.to_str().unwrap(), "talker:/tmp/payload.txt"], None);
    assert_eq!(
        cloud.kubectl(&["exec", "talker", "--", "wc", "-c", "/tmp/payload.txt"], None).split_whitespace().next(),
        Some(payload.len().to_string().as_str())
    );
    let back = dir.path().join("back.txt");
    cloud.kubectl(&["cp", "talker:/tmp/payload.txt", back.to_str().unwrap()], None);
    assert_eq!(std::fs::read_to_string(&back).unwrap(), payload);

    // A client that goes away: the session is reset, the edge closes its
    // connection to containerd, and the command's stdin ends with it.
    let cats = || {
        cloud.kubectl(&["exec", "talker", "--", "ps", "-o", "args"], None).lines().filter(|l| l.trim() == "cat").count()
    };
    let mut held = std::process::Command::new("kubectl")
        .env("KUBECONFIG", cloud.data.join("kubeconfig.yaml"))
        .env("HOME", &cloud.home)
        .args(["exec", "-i", "talker", "--", "cat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("cat runs in the container", || cats() == 1);
    held.kill().unwrap();
    let _ = held.wait();
    wait_until("cat ends with its client gone", || cats() == 0);

    // Both transports were used, with the exit-code protocol: v4 (containerd
    // 1.6 and 1.7 have no v5 yet; a WebSocket would take it).
    let connected: Vec<String> =
        edge.log_text().lines().filter(|l| l.contains("exec stream connected")).map(str::to_owned).collect();
    for (transport, protocols) in [("websocket", &["v4", "v5"][..]), ("spdy", &["v4"][..])] {
        assert!(
            connected.iter().any(|l| l.contains(&format!("transport={transport}"))
                && protocols.iter().any(|p| l.contains(&format!("protocol={p}.channel.k8s.io")))),
            "{transport}: {connected:#?}"
        );
    }

    // port-forward (the official Python client) through containerd's
    // PortForward, into the pod's network namespace: the server listens on
    // the pod's own loopback, which the node cannot reach by the pod's IP.
    let web = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: default}}\nspec:\n  nodeName: edge-x\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    env: [{{name: X, value: hello-x}}]\n    command: [sh, -c, 'mkdir -p /www && echo hello-from-the-pod > /www/hello.txt && echo serving && exec httpd -f -p 127.0.0.1:8080 -h /www']\n",
        image = Containerd::IMAGE
    );
    cloud.kubectl(&["apply", "-f", "-"], Some(&web));
    wait_until("web serves", || cloud.kubectl_output(&["logs", "web"], None).stdout == b"serving\n");
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = std::process::Command::new(&python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/streams.py"))
        .arg(cloud.data.join("kubeconfig.yaml"))
        .args(["web", "8080"])
        .output()
        .unwrap();
    assert!(out.status.success(), "the Python client ({python}): {}", String::from_utf8_lossy(&out.stderr));
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = view["forward"].as_str().unwrap();
    assert!(page.starts_with("HTTP/1.") && page.ends_with("hello-from-the-pod\n"), "{view}");
    let refused = view["closed_port_error"].as_str().unwrap_or_default();
    assert!(refused.contains("error forwarding port 1") && refused.contains("refused"), "{view}");

    // attach: the container's own streams through containerd's Attach,
    // stdin included.
    let reader = format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: reader, namespace: default}}\nspec:\n  nodeName: edge-x\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    stdin: true\n    command: [sh, -c, 'while read l; do echo got $l; done']\n",
        image = Containerd::IMAGE
    );
    cloud.kubectl(&["apply", "-f", "-"], Some(&reader));
    wait_until("reader runs", || field(&cloud, "reader", ".status.phase") == "Running");
    let mut attached = cloud.kubectl_spawn(&["attach", "-i", "reader"]);
    let mut input = attached.stdin.take().unwrap();
    std::io::Write::write_all(&mut input, b"hello\n").unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(attached.stdout.take().unwrap()));
    let first = lines.next().and_then(Result::ok);
    attached.kill().unwrap();
    let mut why = String::new();
    let _ = std::io::Read::read_to_string(&mut attached.stderr.take().unwrap(), &mut why);
    assert_eq!(first.as_deref(), Some("got hello"), "kubectl attach: {why}\n{}", edge.log_text());
    let _ = attached.wait();

    // logs, and --previous after a restart.
    let logs = cloud.kubectl(&["logs", "talker"], None);
    assert!(logs.starts_with("line 1\nline 2\n"), "{logs}");
    wait_until("twice runs again", || {
        field(&cloud, "twice", ".status.containerStatuses[0].restartCount") == "1"
            && cloud.kubectl_output(&["logs", "twice"], None).stdout == b"second run\n"
    });
    assert_eq!(cloud.kubectl(&["logs", "twice", "--previous"], None), "first run\n");
    assert_eq!(field(&cloud, "twice", ".status.containerStatuses[0].lastState.terminated.exitCode"), "1");
}
