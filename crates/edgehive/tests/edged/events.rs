//! The Events edged records, as kubectl shows them: `Pulled`, `Created`,
//! `Started` of a pod that starts, from `kubelet` on the node; a crash loop
//! counted into one `BackOff` Event (a count, not an Event per restart),
//! held to the pod's budget of 25 before anything goes on the link (the
//! edge's `edgehive_edged_events_*` counters); `kubectl describe pod`'s
//! Events section.

use super::*;

/// An edge with edged and its metrics at a port of its own.
fn edge_with_metrics(dir: &TempDir, cloud: &Cloud, node: &str) -> (Edge, u16) {
    let mut edge = Edge::new(dir.path());
    edge.edged = true;
    edge.configure(node, &format!("127.0.0.1:{}", cloud.ws), cloud.join, Some(&cloud.token()));
    let port = edgehive_testkit::fixtures::free_port();
    let mut config = std::fs::read_to_string(edge.config()).unwrap();
    config.push_str(&format!("metricsAddress: 127.0.0.1:{port}\n"));
    std::fs::write(edge.config(), config).unwrap();
    edge.start(&[]);
    wait_until("the node is Ready", || cloud.node_ready(node).as_deref() == Some("True"));
    (edge, port)
}

/// One sample of the edge's metrics (0 when absent).
fn metric(port: u16, sample: &str) -> u64 {
    use std::io::{Read as _, Write as _};
    let scrape = || -> Option<String> {
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(conn, "GET /metrics HTTP/1.1\r\nHost: edge\r\n\r\n").ok()?;
        let mut answer = String::new();
        conn.read_to_string(&mut answer).ok()?;
        Some(answer)
    };
    let text = scrape().unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' ')?.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// The Events about `pod`, as `kubectl get events --field-selector` lists them.
fn events_of(cloud: &Cloud, pod: &str) -> Vec<serde_json::Value> {
    let out = cloud
        .kubectl(&["get", "events", "--field-selector", &format!("involvedObject.name={pod}"), "-o", "json"], None);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap_or_default();
    list["items"].as_array().cloned().unwrap_or_default()
}

fn by_reason<'a>(events: &'a [serde_json::Value], reason: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["reason"] == reason).collect()
}

#[test]
fn kubelet_events_reach_kubectl_and_a_crash_loop_is_one_counted_event() {
    let dir = TempDir::new("edged-events");
    let cloud = Cloud::start(dir.path(), &[]);
    let node = "edge-ev";
    let (_edge, port) = edge_with_metrics(&dir, &cloud, node);
    let yaml = [
        pod("steady", node, "Always", "while true; do sleep 1; done"),
        pod("crash", node, "Always", "echo boom; exit 1"),
    ]
    .join("---\n");
    cloud.kubectl(&["apply", "-f", "-"], Some(&yaml));

    // A pod that starts: Pulled (the process runtime has every image),
    // Created, Started, from kubelet on the node, about its container.
    let mut events = Vec::new();
    wait_until("steady's Pulled, Created and Started", || {
        events = events_of(&cloud, "steady");
        ["Pulled", "Created", "Started"].iter().all(|r| !by_reason(&events, r).is_empty())
    });
    let uid = field(&cloud, "steady", ".metadata.uid");
    for (reason, message) in [
        ("Pulled", "Container image \"busybox\" already present on machine"),
        ("Created", "Created container: main"),
        ("Started", "Started container main"),
    ] {
        let e = by_reason(&events, reason);
        assert_eq!(e.len(), 1, "{reason}: {events:?}");
        let e = e[0];
        assert_eq!(e["message"], message);
        assert_eq!(e["type"], "Normal");
        assert_eq!(e["source"]["component"], "kubelet");
        assert_eq!(e["source"]["host"], node);
        assert_eq!(e["reportingComponent"], "kubelet");
        assert_eq!(e["reportingInstance"], node);
        assert_eq!(e["involvedObject"]["kind"], "Pod");
        assert_eq!(e["involvedObject"]["uid"], uid.as_str());
        assert_eq!(e["involvedObject"]["fieldPath"], "spec.containers{main}");
        assert_eq!(e["count"], 1);
    }

    // A crash loop: one BackOff Event whose count rises.
    let crash_uid = field(&cloud, "crash", ".metadata.uid");
    wait_until("crash's BackOff is counted", || {
        events = events_of(&cloud, "crash");
        by_reason(&events, "BackOff").first().is_some_and(|e| e["count"].as_u64().unwrap_or(0) > 3)
    });
    let backoff = by_reason(&events, "BackOff");
    assert_eq!(backoff.len(), 1, "{events:?}");
    assert_eq!(backoff[0]["type"], "Warning");
    assert_eq!(
        backoff[0]["message"],
        format!("Back-off restarting failed container main in pod crash_default({crash_uid})")
    );
    assert_ne!(backoff[0]["firstTimestamp"], serde_json::Value::Null);
    // Every restart is recorded, but the pod's budget (25, then one per
    // 5 minutes) holds what goes on the link: wait until edged has dropped
    // notes over it, after a dozen restarts.
    wait_until("the crash loop spends the pod's budget", || {
        metric(port, "edgehive_edged_events_dropped_total{reason=\"spam\"}") > 5
    });
    let restarts: u64 = field(&cloud, "crash", ".status.containerStatuses[0].restartCount").parse().unwrap();
    assert!(restarts >= 6, "{restarts}");
    let recorded = metric(port, "edgehive_edged_events_recorded_total");
    let coalesced = metric(port, "edgehive_edged_events_coalesced_total");
    let inserts = metric(port, "edgehive_edged_events_sent_total{operation=\"insert\"}");
    let patches = metric(port, "edgehive_edged_events_sent_total{operation=\"patch\"}");
    assert!(coalesced > 0, "repeats count up an Event: {coalesced}");
    assert!(inserts + patches < recorded, "messages {inserts}+{patches} of {recorded} notes");
    // The Event objects of the crash loop: one per reason, not one per
    // restart; their counts together within the budget (25, and one more
    // for each 5 minutes).
    let events = events_of(&cloud, "crash");
    let reasons: BTreeMap<String, u64> = events
        .iter()
        .map(|e| (e["reason"].as_str().unwrap_or_default().to_owned(), e["count"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(reasons.len(), events.len(), "one Event per reason: {events:?}");
    assert!(events.len() <= 4, "Pulled, Created, Started, BackOff: {reasons:?}");
    let total: u64 = reasons.values().sum();
    assert!((4..=27).contains(&total), "{reasons:?}");
    assert!(total < recorded, "{total} of {recorded} notes written");

    // kubectl describe shows them, from kubelet.
    let described = cloud.kubectl(&["describe", "pod", "crash"], None);
    let section = described.split("Events:").nth(1).unwrap_or_default();
    assert!(section.contains("BackOff") && section.contains("kubelet"), "{described}");
    assert!(section.contains("Back-off restarting failed container main in pod crash_default"), "{described}");
    assert!(section.contains("Started container main"), "{described}");
}
