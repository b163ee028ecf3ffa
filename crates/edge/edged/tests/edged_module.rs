//! edged on a real beehive with a stand-in MetaManager: pods in the store
//! start at once, a crash-looping pod's status is coalesced (it does not
//! flood the link), and the first Running is reported without waiting for
//! a report tick.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgehive_beehive::{Beehive, FnModule, ModuleContext};
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
    let seen: Seen = Arc::default();
    let mut b = Beehive::builder();
    let mut cfg = EdgedConfig::new("edge-m", "127.0.0.1", dir.path().to_owned());
    cfg.backoff = Backoff { base: Duration::from_millis(20), cap: Duration::from_millis(40) };
    b.register(Arc::new(Edged::new(cfg))).unwrap();
    let seen2 = seen.clone();
    let meta =
        FnModule::new(source::METAMANAGER, group::META, move |mut ctx: ModuleContext, cancel: CancellationToken| {
            let (seen, pods) = (seen2.clone(), pods.clone());
            Box::pin(async move {
                while let Some(m) = ctx.receive_until(&cancel).await {
                    if m.route.operation == op::QUERY {
                        let _ = ctx.send_resp(m.response(Content::from_serialize(&pods).unwrap()));
                        continue;
                    }
                    seen.lock().unwrap().push((tokio::time::Instant::now(), m));
                }
                Ok(())
            }) as edgehive_beehive::ModuleFuture
        });
    b.register(Arc::new(meta)).unwrap();
    let hive = b.build();
    let stop = CancellationToken::new();
    tokio::spawn(hive.run(stop.clone()));
    (seen, stop)
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
