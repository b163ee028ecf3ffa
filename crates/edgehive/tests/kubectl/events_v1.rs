//! events.k8s.io/v1 Events with the real kubectl (and the Python client):
//! one storage with the core Events, each version seeing every event in its
//! own form, as kube-apiserver serves them.

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Cloud, refused};

const CORE_EVENT: &str = r#"{
  "apiVersion": "v1", "kind": "Event",
  "metadata": {"name": "core-ev", "namespace": "default"},
  "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
  "reason": "Started", "message": "from core", "type": "Normal", "count": 2,
  "source": {"component": "kubelet", "host": "edge-1"},
  "firstTimestamp": "2026-11-25T06:00:00Z", "lastTimestamp": "2026-11-25T06:05:00Z"
}"#;

const V1_EVENT: &str = r#"{
  "apiVersion": "events.k8s.io/v1", "kind": "Event",
  "metadata": {"name": "v1-ev", "namespace": "default"},
  "eventTime": "2026-11-25T07:00:00.000000Z",
  "series": {"count": 2, "lastObservedTime": "2026-11-25T07:01:00.000000Z"},
  "reportingController": "example.com/scaler", "reportingInstance": "scaler-1",
  "action": "Scale", "reason": "ScalingUp", "type": "Normal", "note": "from v1",
  "regarding": {"kind": "Deployment", "name": "web", "namespace": "default", "apiVersion": "apps/v1"},
  "related": {"kind": "ReplicaSet", "name": "web-1", "namespace": "default"}
}"#;

fn names(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!("{}/{}", i["metadata"]["namespace"].as_str().unwrap(), i["metadata"]["name"].as_str().unwrap())
        })
        .collect();
    out.sort();
    out
}

/// `kubectl get ... -w` in the background: its stdout lines as they come.
fn watch(cloud: &Cloud, args: &[&str]) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut child = cloud.kubectl().args(args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Reads watch output until the text seen so far contains every one of `wanted`.
fn wait_for_output(rx: &mpsc::Receiver<String>, seen: &mut String, wanted: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !wanted.iter().all(|w| seen.contains(w)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
            }
            Err(_) => panic!("the watch did not show {wanted:?}; it showed:\n{seen}"),
        }
    }
}

#[test]
fn events_k8s_io_serves_the_core_events_in_its_own_form() {
    let cloud = Cloud::start(&[]);
    let resources = cloud.ok(&["api-resources", "--api-group=events.k8s.io"]);
    assert!(resources.lines().any(|l| l.starts_with("events") && l.contains("events.k8s.io/v1")), "{resources}");

    // A core Event is listed by both versions, each in its form.
    cloud.ok_with(&["create", "-f", "-"], Some(CORE_EVENT));
    let core_list = cloud.json(&["get", "events", "-A"]);
    let v1_list = cloud.json(&["get", "events.v1.events.k8s.io", "-A"]);
    assert_eq!(names(&v1_list), names(&core_list));
    let item = v1_list["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == "core-ev").unwrap();
    assert_eq!(item["apiVersion"], "events.k8s.io/v1");
    assert_eq!(item["note"], "from core");
    assert_eq!(item["regarding"]["name"], "p");
    assert_eq!(item["deprecatedSource"]["host"], "edge-1");
    assert_eq!(item["deprecatedCount"], 2);
    assert_eq!(item["deprecatedFirstTimestamp"], "2026-11-25T06:00:00Z");
    assert!(item.get("message").is_none() && item.get("involvedObject").is_none(), "{item}");
    // The human table is the core one (kubectl's printers for both versions).
    let table = cloud.ok(&["get", "events.v1.events.k8s.io", "-n", "default"]);
    assert!(table.contains("Started") && table.contains("pod/p") && table.contains("from core"), "{table}");

    // Field selectors by their events.k8s.io names.
    let selected =
        cloud.ok(&["get", "events.v1.events.k8s.io", "-A", "--field-selector", "regarding.name=p", "-o", "name"]);
    assert_eq!(selected.trim(), "event.events.k8s.io/core-ev");
    let none =
        cloud.ok(&["get", "events.v1.events.k8s.io", "-A", "--field-selector", "regarding.name=q", "-o", "name"]);
    assert_eq!(none.trim(), "");
    let err =
        refused(&cloud, &["get", "events.v1.events.k8s.io", "-A", "--field-selector", "involvedObject.name=p"], None);
    assert!(err.contains("field label not supported: involvedObject.name"), "{err}");

    // A watch through events.k8s.io sees a new event in its form.
    let (mut watcher, rx) = watch(&cloud, &["get", "events.v1.events.k8s.io", "-n", "default", "-w", "-o", "json"]);
    let mut seen = String::new();
    wait_for_output(&rx, &mut seen, &["\"note\": \"from core\""]);

    // An events.k8s.io Event, created there, read as a core Event.
    let created = cloud.ok_with(&["create", "-f", "-", "-o", "json"], Some(V1_EVENT));
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created["note"], "from v1");
    let core = cloud.json(&["get", "event", "v1-ev", "-n", "default"]);
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "from v1");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["involvedObject"]["kind"], "Deployment");
    assert_eq!(core["related"]["name"], "web-1");
    assert_eq!(core["reportingComponent"], "example.com/scaler");
    assert_eq!(core["reportingInstance"], "scaler-1");
    assert_eq!(core["action"], "Scale");
    assert_eq!(core["reason"], "ScalingUp");
    assert_eq!(core["eventTime"], "2026-11-25T07:00:00.000000Z");
    assert_eq!(core["series"]["count"], 2);
    assert_eq!(core["metadata"]["uid"], created["metadata"]["uid"]);
    for v1_only in ["note", "regarding", "reportingController"] {
        assert!(core.get(v1_only).is_none(), "{v1_only} in {core}");
    }
    wait_for_output(&rx, &mut seen, &["\"note\": \"from v1\"", "\"reportingController\": \"example.com/scaler\""]);
    let _ = watcher.kill();
    let _ = watcher.wait();

    // A patch applies to the events.k8s.io form and is stored in the core one.
    let patched = cloud.ok(&[
        "patch",
        "events.v1.events.k8s.io",
        "v1-ev",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"tier":"web"}},"series":{"count":3,"lastObservedTime":"2026-11-25T07:02:00.000000Z"}}"#,
        "-o",
        "json",
    ]);
    let patched: Value = serde_json::from_str(&patched).unwrap();
    assert_eq!((patched["note"].as_str(), patched["series"]["count"].as_i64()), (Some("from v1"), Some(3)));
    let core = cloud.json(&["get", "event", "v1-ev", "-n", "default"]);
    assert_eq!(core["metadata"]["labels"]["tier"], "web");
    assert_eq!(core["message"], "from v1");
    assert_eq!(core["involvedObject"]["name"], "web");

    // Kubernetes' strict rules for events.k8s.io creates, with its messages.
    let no_time = V1_EVENT.replace("\"eventTime\": \"2026-11-25T07:00:00.000000Z\",", "").replace("v1-ev", "bad-1");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&no_time));
    assert!(err.contains(r#"The Event "bad-1" is invalid: eventTime: Required value"#), "{err}");
    let no_controller =
        V1_EVENT.replace("\"reportingController\": \"example.com/scaler\",", "").replace("v1-ev", "bad-2");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&no_controller));
    assert!(err.contains(r#"The Event "bad-2" is invalid: "#), "{err}");
    assert!(err.contains("reportingController: Required value"), "{err}");
    let with_count = V1_EVENT.replace("\"note\"", "\"deprecatedCount\": 4, \"note\"").replace("v1-ev", "bad-3");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&with_count));
    assert!(err.contains(r#"count: Invalid value: "": needs to be unset"#), "{err}");
    let long_note = V1_EVENT.replace("from v1", &"n".repeat(1025)).replace("v1-ev", "bad-4");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&long_note));
    assert!(err.contains(r#"message: Invalid value: "": can have at most 1024 characters"#), "{err}");
    let err = refused(&cloud, &["get", "event", "bad-1", "-n", "default"], None);
    assert!(err.contains("not found"), "{err}");

    // The Python client's typed events.k8s.io/v1 models read both kinds of event.
    cloud.ok(&["create", "namespace", "py"]);
    cloud.ok_with(&["create", "-f", "-"], Some(&V1_EVENT.replace("\"default\"", "\"py\"")));
    let core_in_py = r#"{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "core-py", "namespace": "py"},
      "involvedObject": {"kind": "Pod", "name": "p", "namespace": "py"}, "eventTime": "2026-11-25T07:00:00.000000Z",
      "reportingComponent": "kubelet", "reportingInstance": "edge-1", "action": "Start", "reason": "Started",
      "message": "core in py", "type": "Normal"}"#;
    cloud.ok_with(&["create", "-f", "-"], Some(core_in_py));
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/events_v1.py");
    let out = Command::new(&python).arg(script).arg(&cloud.kubeconfig).arg("py").output().unwrap();
    assert!(out.status.success(), "the Python client ({python}): {}", String::from_utf8_lossy(&out.stderr));
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen,
        serde_json::json!([
            ["core-py", "core in py", "p", "kubelet"],
            ["v1-ev", "from v1", "web", "example.com/scaler"],
        ])
    );

    // Deleted through events.k8s.io, gone from core.
    cloud.ok(&["delete", "events.v1.events.k8s.io", "v1-ev", "-n", "default"]);
    let err = refused(&cloud, &["get", "event", "v1-ev", "-n", "default"], None);
    assert!(err.contains(r#"events "v1-ev" not found"#), "{err}");
    let err = refused(&cloud, &["get", "events.v1.events.k8s.io", "v1-ev", "-n", "default"], None);
    assert!(err.contains(r#"events.events.k8s.io "v1-ev" not found"#), "{err}");
}
