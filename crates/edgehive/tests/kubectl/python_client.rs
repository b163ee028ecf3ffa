//! The official Kubernetes Python client (PyPI `kubernetes`, installed by
//! scripts/test.sh) against `edgehive cloud`: discovery and a watch.

use std::process::Command;

use serde_json::Value;

use super::Cloud;

/// Runs `tests/python/{script}` against `cloud`; it must succeed. Returns
/// what it printed, as JSON.
fn run(cloud: &Cloud, script: &str) -> Value {
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(&python).arg(script).arg(&cloud.kubeconfig).output().unwrap();
    assert!(
        out.status.success(),
        "the Python client ({python}; scripts/test.sh installs it): {}\nserver log: {}",
        String::from_utf8_lossy(&out.stderr),
        cloud.log()
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_python_client_discovers_and_watches() {
    let cloud = Cloud::start(&[]);
    let seen = run(&cloud, "discovery.py");
    assert!(seen["version"].as_str().unwrap().starts_with('v'), "{seen}");
    let groups: Vec<&str> = seen["groups"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for g in ["apps", "batch", "coordination.k8s.io", "devices.kubeedge.io", "metrics.k8s.io"] {
        assert!(groups.contains(&g), "{g} in {groups:?}");
    }
    let core: Vec<&str> = seen["core"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for r in
        ["pods", "pods/log", "pods/exec", "pods/status", "configmaps", "services", "nodes", "nodes/proxy", "namespaces"]
    {
        assert!(core.contains(&r), "{r} in {core:?}");
    }
    assert_eq!(
        seen["watched"],
        serde_json::json!([["ADDED", "1"], ["MODIFIED", "2"], ["DELETED", "2"]]),
        "the watch from the list's resourceVersion sees every change in order"
    );
}

#[test]
fn the_python_client_round_trips_a_custom_resource() {
    let cloud = Cloud::start(&[]);
    let seen = run(&cloud, "crds.py");
    assert_eq!(
        seen,
        serde_json::json!({
            "accepted": "CronTab", "defaulted": 1, "pruned": true, "listed": ["c1"], "replicas": 3,
            "phase": "Ok", "invalid": [422, "Invalid"], "deleted": true,
        })
    );
}
