//! edged on a real beehive with a stand-in MetaManager: pods in the store
//! start at once, a crash-looping pod's status is coalesced (it does not
//! flood the link), and the first Running is reported without waiting for
//! a report tick; MetaManager's wake-up (`update podlist`) reconciles the
//! pods with the store; a container whose configmap is missing waits in
//! `CreateContainerConfigError` (a pod whose volume's is, in
//! `ContainerCreating`) and starts as soon as edged is passed the object.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::{Beehive, Context, FnModule, ModuleContext};
use edgehive_edged::{Backoff, Edged, EdgedConfig};
use edgehive_model::{Content, Message, group, op, source};
use edgehive_testkit::fixtures::TempDir;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

type Seen = Arc<Mutex<Vec<(tokio::time::Instant, Message)>>>;

fn pod(name: &str, script: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "edge-m", "restartPolicy": "Always", "containers": [
            {"name": "main", "image": "busybox", "command": ["sh", "-c", script]}
        ]},
    })
    .to_string()
}

/// Starts edged with `pods` in the stand-in store; returns what reached MetaManager.
fn start(dir: &TempDir, pods: Vec<String>) -> (Seen, CancellationToken) {
    let (seen, stop, _) =
        start_answering(dir, quick_backoff(), move |q| q.response(Content::from_serialize(&pods).unwrap()));
    (seen, stop)
}

/// Starts edged with a stand-in MetaManager whose answer to a query is
/// `answer`'s; returns what else reached MetaManager.
fn start_answering(
    dir: &TempDir,
    backoff: Backoff,
    answer: impl Fn(&Message) -> Message + Clone + Send + Sync + 'static,
) -> (Seen, CancellationToken, Context) {
    let mut cfg = EdgedConfig::new("edge-m", "127.0.0.1", dir.path().to_owned());
    cfg.backoff = backoff;
    start_beside(Arc::new(Edged::new(cfg)), move |m| (m.route.operation == op::QUERY).then(|| answer(m)))
}

/// Starts `module` with a stand-in MetaManager that answers what `answer`
/// answers and records the rest; returns what it recorded.
fn start_beside(
    module: Arc<dyn edgehive_beehive::Module>,
    answer: impl Fn(&Message) -> Option<Message> + Clone + Send + Sync + 'static,
) -> (Seen, CancellationToken, Context) {
    let seen: Seen = Arc::default();
    let mut b = Beehive::builder();
    b.register(module).unwrap();
    let seen2 = seen.clone();
    let meta =
        FnModule::new(source::METAMANAGER, group::META, move |mut ctx: ModuleContext, cancel: CancellationToken| {
            let (seen, answer) = (seen2.clone(), answer.clone());
            Box::pin(async move {
                while let Some(m) = ctx.receive_until(&cancel).await {
                    if let Some(a) = answer(&m) {
                        let _ = ctx.send_resp(a);
                        continue;
                    }
                    seen.lock().unwrap().push((tokio::time::Instant::now(), m));
                }
                Ok(())
            }) as edgehive_beehive::ModuleFuture
        });
    b.register(Arc::new(meta)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    tokio::spawn(hive.run(stop.clone()));
    (seen, stop, ctx)
}

/// Restarts after 20 ms, at most 40 ms.
fn quick_backoff() -> Backoff {
    Backoff { base: Duration::from_millis(20), cap: Duration::from_millis(40) }
}

fn statuses(seen: &Seen, name: &str) -> Vec<(tokio::time::Instant, Value)> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(_, m)| m.route.resource == format!("default/podstatus/{name}"))
        .map(|(t, m)| (*t, m.content.to_value()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_is_coalesced_and_the_first_running_goes_at_once() {
    let dir = TempDir::new("edged-module");
    let t0 = tokio::time::Instant::now();
    let (seen, stop) = start(&dir, vec![pod("steady", "sleep 600"), pod("crashy", "exit 1")]);
    // The steady pod's Running is reported well before a 500 ms tick would.
    let running_at = loop {
        let found = statuses(&seen, "steady")
            .into_iter()
            .find(|(_, s)| s["Status"]["containerStatuses"][0]["state"]["running"].is_object());
        if let Some((t, _)) = found {
            break t;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "steady never reported Running");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(running_at - t0 < Duration::from_millis(400), "first Running after {:?}", running_at - t0);

    // 3 s of a container restarting every ~40 ms: dozens of state changes,
    // reported as a burst of three, then about two a second.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reports = statuses(&seen, "crashy");
    let restarts = reports.last().unwrap().1["Status"]["containerStatuses"][0]["restartCount"].as_u64().unwrap();
    assert!(restarts >= 20, "the container restarted {restarts} times");
    let allowed = 3 + (t0.elapsed().as_secs_f64() / 0.5).ceil() as usize;
    assert!(reports.len() <= allowed, "{} reports for {restarts} restarts (at most {allowed})", reports.len());
    assert!(reports.len() >= 4, "held-back changes are still reported: {}", reports.len());
    // The last report is at most an interval (and a tick) behind the state.
    let last = reports.last().unwrap().0;
    assert!(last.elapsed() < Duration::from_millis(800), "last report {:?} ago", last.elapsed());
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// The stand-in MetaManager's store: wire resource → object JSON.
type Store = Arc<Mutex<BTreeMap<String, Value>>>;

/// Starts edged with a stand-in MetaManager that answers queries from
/// `store` as MetaManager's store does (a JSON array of stored values);
/// returns what reached MetaManager and the bus (to pass edged changes).
fn start_with_store(dir: &TempDir, store: Store, backoff: Backoff) -> (Seen, CancellationToken, Context) {
    start_answering(dir, backoff, move |q| {
        let prefix = format!("{}/", q.route.resource);
        let rows: Vec<String> = store
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| **k == *q.route.resource || k.starts_with(&prefix))
            .map(|(_, v)| v.to_string())
            .collect();
        q.response(Content::from_serialize(&rows).unwrap())
    })
}

fn versioned_pod(name: &str, rv: u64, image: &str, script: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": rv.to_string()},
        "spec": {"nodeName": "edge-m", "restartPolicy": "Always", "terminationGracePeriodSeconds": 1, "containers": [
            {"name": "main", "image": image, "command": ["sh", "-c", script]}
        ]},
    })
}

/// The last status edged reported for `name`.
fn last_status(seen: &Seen, name: &str) -> Value {
    statuses(seen, name).last().map(|(_, s)| s["Status"].clone()).unwrap_or(Value::Null)
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn running_pid(seen: &Seen, name: &str) -> Option<u32> {
    let s = last_status(seen, name);
    if !s["containerStatuses"][0]["state"]["running"].is_object() {
        return None;
    }
    s["containerStatuses"][0]["containerID"].as_str()?.strip_prefix("process://")?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn passed(operation: &'static str, resource: &str, obj: &Value) -> Message {
    Message::new()
        .with_route(source::METAMANAGER, group::META, resource.to_owned(), operation)
        .with_content(Content::from_serialize(obj).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_up_reconciles_the_pods_with_the_store() {
    let dir = TempDir::new("edged-resync");
    let store: Store = Arc::default();
    let put = |store: &Store, p: Value| {
        let key = format!("default/pod/{}", p["metadata"]["name"].as_str().unwrap());
        store.lock().unwrap().insert(key, p);
    };
    put(&store, versioned_pod("kept", 1, "busybox:1", "sleep 600"));
    put(&store, versioned_pod("gone", 1, "busybox:1", "sleep 600"));
    let backoff = Backoff { base: Duration::from_millis(20), cap: Duration::from_millis(40) };
    let (seen, stop, ctx) = start_with_store(&dir, store.clone(), backoff);
    eventually("both pods run", || running_pid(&seen, "kept").is_some() && running_pid(&seen, "gone").is_some()).await;
    let (kept, gone) = (running_pid(&seen, "kept").unwrap(), running_pid(&seen, "gone").unwrap());

    // Changes edged was never passed (MetaManager's mailbox to it was
    // full): one pod deleted, one added, one with a new image.
    store.lock().unwrap().remove("default/pod/gone");
    put(&store, versioned_pod("new", 1, "busybox:1", "sleep 600"));
    put(&store, versioned_pod("kept", 2, "busybox:2", "sleep 600"));
    ctx.send("edged", passed(op::UPDATE, "podlist", &json!("read the store again"))).await.unwrap();

    eventually("the missing pod runs", || running_pid(&seen, "new").is_some()).await;
    eventually("the pod gone from the store is stopped", || !alive(gone)).await;
    eventually("the changed pod runs its new image", || {
        let s = last_status(&seen, "kept");
        s["containerStatuses"][0]["image"] == "busybox:2" && running_pid(&seen, "kept").is_some()
    })
    .await;
    assert!(!alive(kept), "the old image's process was replaced");
    assert_eq!(last_status(&seen, "kept")["containerStatuses"][0]["restartCount"], 1);

    // A copy older than what edged runs (passed on after a re-read that saw
    // a newer one) changes nothing.
    let now = running_pid(&seen, "kept").unwrap();
    ctx.send("edged", passed(op::UPDATE, "default/pod/kept", &versioned_pod("kept", 1, "busybox:1", "sleep 600")))
        .await
        .unwrap();
    ctx.send("edged", passed(op::UPDATE, "podlist", &json!("read the store again"))).await.unwrap();
    // The re-read after it is a no-op too. Edged takes its mailbox in
    // order: once a pod passed after them runs, both are through.
    let marker = versioned_pod("marker", 1, "busybox:1", "sleep 600");
    ctx.send("edged", passed(op::INSERT, "default/pod/marker", &marker)).await.unwrap();
    eventually("the pod passed last runs", || running_pid(&seen, "marker").is_some()).await;
    assert_eq!(running_pid(&seen, "kept"), Some(now));
    assert!(alive(now));
    assert_eq!(last_status(&seen, "kept")["containerStatuses"][0]["image"], "busybox:2");
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_configmap_holds_its_containers_until_edged_is_passed_it() {
    let dir = TempDir::new("edged-missing-config");
    let store: Store = Arc::default();
    let mut envy = versioned_pod("envy", 1, "busybox", "echo \"greeting=$GREETING opt=${OPT-unset}\"; sleep 600");
    envy["spec"]["containers"][0]["env"] = json!([
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
        {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": true}}},
    ]);
    let mut mounty = versioned_pod("mounty", 1, "busybox", "cat etc/cfg/greeting; echo; sleep 600");
    mounty["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "cfg", "mountPath": "/etc/cfg"}]);
    mounty["spec"]["volumes"] = json!([{"name": "cfg", "configMap": {"name": "cfg"}}]);
    store.lock().unwrap().insert("default/pod/envy".into(), envy);
    store.lock().unwrap().insert("default/pod/mounty".into(), mounty);
    // A back-off far beyond the test's deadline: only being passed the
    // object can start the containers in time.
    let backoff = Backoff { base: Duration::from_secs(60), cap: Duration::from_secs(60) };
    let (seen, stop, ctx) = start_with_store(&dir, store.clone(), backoff);
    let waiting = |name: &str| last_status(&seen, name)["containerStatuses"][0]["state"]["waiting"].clone();
    eventually("envy waits for its configmap", || waiting("envy")["reason"] == "CreateContainerConfigError").await;
    assert_eq!(waiting("envy")["message"], r#"configmap "cfg" not found"#);
    assert_eq!(last_status(&seen, "envy")["phase"], "Pending");
    eventually("mounty waits for its volume", || {
        waiting("mounty")["message"] == r#"MountVolume.SetUp failed for volume "cfg" : configmap "cfg" not found"#
    })
    .await;
    assert_eq!(waiting("mounty")["reason"], "ContainerCreating");

    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default", "resourceVersion": "5"}, "data": {"greeting": "hello"}});
    store.lock().unwrap().insert("default/configmap/cfg".into(), cfg.clone());
    ctx.send("edged", passed(op::INSERT, "default/configmap/cfg", &cfg)).await.unwrap();
    eventually("both run", || running_pid(&seen, "envy").is_some() && running_pid(&seen, "mounty").is_some()).await;
    let log = |name: &str| {
        std::fs::read_to_string(dir.path().join(format!("pods/uid-{name}/logs/main/0.log"))).unwrap_or_default()
    };
    eventually("envy has its value; the optional one is unset", || log("envy").contains("greeting=hello opt=unset"))
        .await;
    eventually("mounty reads its file", || log("mounty").contains("hello")).await;
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// A store that cannot be read is not an empty one: edged starts and stops
/// nothing while MetaManager answers the pod list with an error, and runs
/// the pods once it can read them (before, the error became an empty list:
/// every container was cleaned up and the pods never came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_store_stops_nothing_and_the_pods_start_once_it_reads() {
    let dir = TempDir::new("edged-unreadable");
    let failures = Arc::new(std::sync::atomic::AtomicUsize::new(2));
    let pods = vec![pod("kept", "sleep 600")];
    let left = failures.clone();
    let (seen, stop, _) = start_answering(&dir, quick_backoff(), move |q| {
        let n = left.load(std::sync::atomic::Ordering::SeqCst);
        if n == 0 {
            return q.response(Content::from_serialize(&pods).unwrap());
        }
        left.store(n - 1, std::sync::atomic::Ordering::SeqCst);
        let mut e = q.response(Content::string("database disk image is malformed"));
        e.route.operation = op::ERROR.into();
        e
    });
    let t0 = tokio::time::Instant::now();
    let running = loop {
        let found = statuses(&seen, "kept")
            .into_iter()
            .find(|(_, s)| s["Status"]["containerStatuses"][0]["state"]["running"].is_object());
        if let Some((t, _)) = found {
            break t;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the pod never started once the store read");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(failures.load(std::sync::atomic::Ordering::SeqCst), 0, "it started only after the store read");
    // Two failed reads, retried after 1 s and 2 s.
    assert!(running - t0 >= Duration::from_secs(3), "started after {:?}", running - t0);
    stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// The node agent of an edge whose cloud takes the link's pings as its
/// heartbeat renews no Lease, but still reports its status every status
/// interval for such links, not only on connect: that report is what sets
/// the node Ready again if the cloud marked it while the session lived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_session_liveness_the_status_still_goes_every_liveness_status_interval() {
    use edgehive_edged::{HostInfo, NodeAgent, NodeAgentConfig};
    let mut cfg = NodeAgentConfig::new("edge-l", HostInfo::detect(Some([127, 0, 0, 1].into())));
    cfg.lease_interval = Duration::from_millis(50);
    cfg.liveness_status_interval = Duration::from_millis(300);
    // The registration is answered as the cloud does.
    let (seen, stop, ctx) = start_beside(Arc::new(NodeAgent::new(cfg)), |m| {
        (m.route.operation == op::INSERT).then(|| m.response(Content::string("OK")))
    });
    let mut connected = Message::new()
        .with_route(source::EDGEHUB, group::META, edgehive_model::well_known::NODE_CONNECTION, op::CONNECT)
        .with_content(Content::string(edgehive_model::well_known::CLOUD_CONNECTED));
    connected.header.message_type = edgehive_model::well_known::SESSION_LIVENESS.into();
    ctx.send_to_group(group::EDGED, connected).await.unwrap();
    let count =
        |ty: &str| seen.lock().unwrap().iter().filter(|(_, m)| m.route.resource.contains(&format!("/{ty}/"))).count();
    eventually("three status reports on one connection", || count("nodepatch") >= 3).await;
    assert_eq!(count("lease"), 0, "the session is the heartbeat: no Lease renewals");
    stop.cancel();
}
