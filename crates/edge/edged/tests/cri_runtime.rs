//! The CRI runtime against a real containerd: sandbox, container start,
//! exit codes, exec, stop with the grace period, adoption of what an
//! earlier run left, cleanup of pods no longer here, a missing image.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use edgehive_edged::cri::{CriConfig, CriRuntime};
use edgehive_edged::runtime::{Container, ContainerSpec, PodInfo, Runtime};
use edgehive_testkit::containerd::Containerd;
use edgehive_testkit::fixtures::TempDir;

const IMAGE: &str = Containerd::IMAGE;

fn containerd() -> Containerd {
    Containerd::start().unwrap_or_else(|e| panic!("the CRI tests need containerd: {e}"))
}

fn pod(dir: &TempDir, uid: &str) -> PodInfo {
    PodInfo {
        uid: uid.into(),
        name: format!("pod-{uid}"),
        namespace: "default".into(),
        dir: dir.path().join(uid),
        host_network: true,
        node_ip: "127.0.0.1".into(),
        labels: Default::default(),
    }
}

fn spec(pod: &PodInfo, name: &str, script: &str) -> ContainerSpec {
    ContainerSpec {
        name: name.into(),
        image: IMAGE.into(),
        pull_policy: "IfNotPresent".into(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        args: vec![],
        env: vec![("GREETING".into(), "hello".into())],
        working_dir: String::new(),
        host_dir: pod.dir.join("containers").join(name),
        log: pod.dir.join("logs").join(name).join("0.log"),
        mounts: vec![],
        limits: Default::default(),
        interactive: Default::default(),
        attempt: 0,
    }
}

/// `s` as attempt `n`, logging to that attempt's file.
fn attempt(pod: &PodInfo, s: ContainerSpec, n: u32) -> ContainerSpec {
    ContainerSpec { attempt: n, log: pod.dir.join("logs").join(&s.name).join(format!("{n}.log")), ..s }
}

async fn runtime(ctd: &Containerd, node: &str) -> CriRuntime {
    CriRuntime::connect(CriConfig::new(ctd.endpoint(), node)).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_start_exit_exec_and_stop() {
    let dir = TempDir::new("cri-rt");
    let ctd = containerd();
    let rt = runtime(&ctd, "node-a").await;
    assert!(rt.version().starts_with("containerd://"), "{}", rt.version());
    // The pod network: a sandbox of its own with an IP from the CNI bridge.
    let p = PodInfo { host_network: false, ..pod(&dir, "uid-a1") };
    let sb = rt.run_sandbox(&p).await.unwrap();
    assert!(sb.ip.starts_with("10.") && sb.ip != p.node_ip, "{sb:?}");
    let c: Arc<dyn Container> = rt.start(&p, &sb, &spec(&p, "main", "echo $GREETING; exit 7")).await.unwrap();
    assert!(c.id().starts_with("containerd://"));
    assert_eq!(c.wait().await.code, 7);
    let log = std::fs::read_to_string(p.dir.join("logs/main/0.log")).unwrap();
    assert!(log.contains("stdout F hello"), "{log}");

    // A second attempt replaces the first; exec runs inside it.
    let s2 = attempt(&p, spec(&p, "main", "echo second; touch /tmp/here; sleep 600"), 1);
    let c2 = rt.start(&p, &sb, &s2).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c2.exec(&["test".into(), "-f".into(), "/tmp/here".into()], Duration::from_secs(5)).await.unwrap(), 0);
    assert_eq!(c2.exec(&["test".into(), "-f".into(), "/tmp/nope".into()], Duration::from_secs(5)).await.unwrap(), 1);
    // SIGTERM ends a plain sleep: stopped well within the grace period.
    let t = tokio::time::Instant::now();
    let exit = c2.stop(Duration::from_secs(10)).await;
    assert!(t.elapsed() < Duration::from_secs(8), "{:?}", t.elapsed());
    assert_eq!(exit.code, 143, "{exit:?}");
    // One that ignores SIGTERM is killed after the grace period.
    let c3 = rt
        .start(&p, &sb, &attempt(&p, spec(&p, "main", "trap '' TERM; while true; do sleep 1; done"), 2))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let exit = c3.stop(Duration::from_secs(1)).await;
    assert_eq!(exit.code, 137, "{exit:?}");
    // A log file per attempt: the current one and the previous one are kept.
    let log = std::fs::read_to_string(p.dir.join("logs/main/1.log")).unwrap();
    assert!(log.contains("stdout F second"), "{log}");
    assert!(p.dir.join("logs/main/2.log").exists());
    assert!(!p.dir.join("logs/main/0.log").exists(), "attempt 0's log went when attempt 2 started");
    rt.remove_sandbox(&p, &sb).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_adopt_sandboxes_and_cleanup_spares_other_nodes() {
    let dir = TempDir::new("cri-rt2");
    let ctd = containerd();
    let rt = runtime(&ctd, "node-b").await;
    let other = runtime(&ctd, "node-c").await;
    let (p1, p2, p3) = (pod(&dir, "uid-b1"), pod(&dir, "uid-b2"), pod(&dir, "uid-c1"));
    let s1 = rt.run_sandbox(&p1).await.unwrap();
    let s2 = rt.run_sandbox(&p2).await.unwrap();
    let s3 = other.run_sandbox(&p3).await.unwrap();
    // A new edged run makes p1's sandbox again: the old one goes.
    // A container of p1 runs; a new edged run takes the ready sandbox and
    // the container over instead of making them again.
    let c = rt.start(&p1, &s1, &attempt(&p1, spec(&p1, "main", "sleep 600"), 4)).await.unwrap();
    let s1b = rt.run_sandbox(&p1).await.unwrap();
    assert_eq!(s1, s1b, "the ready sandbox is adopted");
    let (adopted, attempt) = rt.adopt(&p1, &s1b, &spec(&p1, "main", "")).await.unwrap();
    assert_eq!((adopted.id(), attempt), (c.id(), 4));
    assert!(rt.adopt(&p1, &s1b, &spec(&p1, "other", "")).await.is_none(), "nothing of that name runs");
    assert!(rt.keeps_containers());
    // p2 is no longer this node's: cleanup removes it, and nothing of node-c's.
    rt.cleanup(&HashSet::from(["uid-b1".to_owned()])).await;
    let ids = ctd.ctr(&["containers", "ls", "-q"]);
    assert!(ids.contains(&s1b.id) && !ids.contains(&s2.id) && ids.contains(&s3.id), "{ids:?}");
    rt.remove_sandbox(&p1, &s1b).await;
    other.remove_sandbox(&p3, &s3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_is_an_error_kubelet_would_name() {
    let dir = TempDir::new("cri-rt3");
    let ctd = containerd();
    let rt = runtime(&ctd, "node-d").await;
    let p = pod(&dir, "uid-d1");
    let sb = rt.run_sandbox(&p).await.unwrap();
    let never =
        ContainerSpec { image: "edgehive.local/none:1".into(), pull_policy: "Never".into(), ..spec(&p, "x", "") };
    let e = rt.start(&p, &sb, &never).await.unwrap_err();
    assert_eq!(e.reason, "ErrImageNeverPull", "{e}");
    let pull = ContainerSpec { pull_policy: "IfNotPresent".into(), ..never };
    let e = rt.start(&p, &sb, &pull).await.unwrap_err();
    assert_eq!(e.reason, "ErrImagePull", "{e}");
    rt.remove_sandbox(&p, &sb).await;
    // A socket with nothing behind it: a clear error, not a hang.
    let e = CriRuntime::connect(CriConfig::new(format!("unix://{}/none.sock", dir.path().display()), "n"))
        .await
        .unwrap_err();
    assert_eq!(e.reason, "RuntimeNotReady");
    assert!(e.message.contains("none.sock"), "{e}");
}
