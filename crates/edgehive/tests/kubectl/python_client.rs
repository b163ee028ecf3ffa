//! The official Kubernetes Python client (PyPI `kubernetes`, installed by
//! scripts/test.sh) against `edgehive cloud`: discovery and a watch.

use std::process::Command;

use serde_json::Value;

use super::Cloud;

#[test]
fn the_python_client_discovers_and_watches() {
    let cloud = Cloud::start(&[]);
    let python = std::env::var("EDGEHIVE_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/discovery.py");
    let out = Command::new(&python).arg(script).arg(&cloud.kubeconfig).output().unwrap();
    assert!(
        out.status.success(),
        "the Python client ({python}; scripts/test.sh installs it): {}\nserver log: {}",
        String::from_utf8_lossy(&out.stderr),
        cloud.log()
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
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
