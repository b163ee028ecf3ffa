//! OpenAPI v2/v3 and field validation with the real kubectl: typos refused under Strict (what kubectl
//! asks for), warned about and dropped under Warn, dropped under Ignore, never stored; duplicate fields;
//! `kubectl explain` to any depth; `kubectl apply -f` of a `kind: List` (checked on the client against
//! `/openapi/v2`).

use std::process::Stdio;

use serde_json::Value;

use super::Cloud;

/// Runs kubectl with `stdin`; returns whether it succeeded, stdout and stderr.
fn run(cloud: &Cloud, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
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
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TYPO_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: typo
spec:
  containers:
  - name: c
    image: busybox
    comand: ["sleep", "3600"]
"#;

const TYPO_CONFIG_MAP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: typo
data:
  a: "1"
datta:
  b: "2"
"#;

fn exists(cloud: &Cloud, args: &[&str]) -> bool {
    cloud.kubectl().args(args).output().unwrap().status.success()
}

#[test]
fn unknown_fields_are_refused_warned_or_dropped_and_never_stored() {
    let cloud = Cloud::start(&[]);

    // kubectl apply asks for fieldValidation=Strict: refused with the strict decoding error, nothing stored.
    let (ok, _, err) = run(&cloud, &["apply", "-f", "-"], Some(TYPO_POD));
    assert!(!ok);
    assert!(
        err.contains(r#"Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.containers[0].comand""#),
        "{err}"
    );
    assert!(!exists(&cloud, &["get", "pod", "typo"]));

    // --validate=warn: admitted, kubectl prints the server's warning, the field is dropped.
    let (ok, _, err) = run(&cloud, &["apply", "--validate=warn", "-f", "-"], Some(TYPO_POD));
    assert!(ok, "{err}");
    assert!(err.contains(r#"Warning: unknown field "spec.containers[0].comand""#), "{err}");
    let pod = cloud.json(&["get", "pod", "typo"]);
    assert_eq!(pod["spec"]["containers"][0].get("comand"), None, "{pod}");
    assert_eq!(pod["spec"]["containers"][0]["image"], "busybox");
    cloud.ok(&["delete", "pod", "typo", "--wait=false"]);
    wait_gone(&cloud, &["get", "pod", "typo"]);

    // --validate=false: fieldValidation=Ignore, admitted silently, still dropped.
    let (ok, _, err) = run(&cloud, &["apply", "--validate=false", "-f", "-"], Some(TYPO_POD));
    assert!(ok && !err.contains("Warning"), "{err}");
    let pod = cloud.json(&["get", "pod", "typo"]);
    assert_eq!(pod["spec"]["containers"][0].get("comand"), None, "{pod}");

    // A ConfigMap with an unknown top-level field, likewise.
    let (ok, _, err) = run(&cloud, &["create", "-f", "-"], Some(TYPO_CONFIG_MAP));
    assert!(!ok);
    assert!(err.contains(r#"strict decoding error: unknown field "datta""#), "{err}");
    assert!(!exists(&cloud, &["get", "configmap", "typo"]));
    let (ok, _, err) = run(&cloud, &["create", "--validate=warn", "-f", "-"], Some(TYPO_CONFIG_MAP));
    assert!(ok, "{err}");
    assert!(err.contains(r#"Warning: unknown field "datta""#), "{err}");
    let cm = cloud.json(&["get", "configmap", "typo"]);
    assert_eq!(cm.get("datta"), None, "{cm}");
    assert_eq!(cm["data"]["a"], "1");

    // A patch: the patched object is checked; the default (Warn) drops the field with a warning.
    let (ok, _, err) = run(&cloud, &["patch", "configmap", "typo", "-p", r#"{"data":{"b":"2"},"foo":1}"#], None);
    assert!(ok, "{err}");
    assert!(err.contains(r#"Warning: unknown field "foo""#), "{err}");
    let cm = cloud.json(&["get", "configmap", "typo"]);
    assert_eq!((cm.get("foo"), &cm["data"]["b"]), (None, &Value::from("2")), "{cm}");

    // Duplicate keys (kubectl's own decoding would hide them: sent as they are with --raw).
    let dup = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup2"},"extra":1}"#;
    let (ok, _, err) = run(
        &cloud,
        &["create", "--raw", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", "-f", "-"],
        Some(dup),
    );
    assert!(!ok);
    assert!(
        err.contains(r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: duplicate field "metadata.name", unknown field "extra""#),
        "{err}"
    );
    assert!(!exists(&cloud, &["get", "configmap", "dup2"]));
    let (ok, _, err) = run(&cloud, &["create", "--raw", "/api/v1/namespaces/default/configmaps", "-f", "-"], Some(dup));
    assert!(ok, "{err}");
    assert!(err.contains(r#"Warning: duplicate field "metadata.name""#), "{err}");
    let cm = cloud.json(&["get", "configmap", "dup2"]);
    assert_eq!(cm.get("extra"), None, "{cm}");

    // An unknown directive: 422 naming the supported values.
    let (ok, _, err) = run(
        &cloud,
        &["create", "--raw", "/api/v1/namespaces/default/configmaps?fieldValidation=strict", "-f", "-"],
        Some(dup),
    );
    assert!(!ok);
    assert!(err.contains(r#"fieldValidation: Unsupported value: "strict""#), "{err}");
}

fn wait_gone(cloud: &Cloud, args: &[&str]) {
    super::wait_for("the object to be gone", || !exists(cloud, args));
}

#[test]
fn explain_walks_every_type_and_lists_apply_through_openapi_v2() {
    let cloud = Cloud::start(&[]);

    let out = cloud.ok(&["explain", "pod.spec.containers.resources"]);
    assert!(out.contains("limits") && out.contains("requests"), "{out}");
    let out = cloud.ok(&["explain", "deployment.spec.template.spec.affinity.nodeAffinity"]);
    assert!(out.contains("requiredDuringSchedulingIgnoredDuringExecution"), "{out}");
    let out = cloud.ok(&["explain", "pod.spec.topologySpreadConstraints.labelSelector.matchExpressions"]);
    assert!(out.contains("operator"), "{out}");
    let out = cloud.ok(&["explain", "clusterrole.rules"]);
    assert!(out.contains("verbs"), "{out}");
    // The v2 document, as kubectl reads it (protobuf).
    let out = cloud.ok(&["explain", "pod.spec.containers.resources", "--output=plaintext-openapiv2"]);
    assert!(out.contains("limits"), "{out}");

    // The JSON form of /openapi/v2.
    let doc: Value = serde_json::from_str(&cloud.ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["definitions"]["io.k8s.api.core.v1.PodSpec"]["properties"]["affinity"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Affinity"
    );

    // A List: each item validated on the client against /openapi/v2, then created.
    let list = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed}
  data: {x: "1"}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: listed}
  spec:
    selector: {matchLabels: {app: listed}}
    template:
      metadata: {labels: {app: listed}}
      spec:
        containers: [{name: c, image: busybox}]
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms: [{matchExpressions: [{key: k, operator: Exists}]}]
"#;
    let out = cloud.apply(list);
    assert!(out.contains("configmap/listed created") && out.contains("deployment.apps/listed created"), "{out}");
    let d = cloud.json(&["get", "deployment", "listed"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["operator"],
        "Exists"
    );
    // A typo in an item is kubectl's client-side validation error.
    let typo = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: other}\n  datta: {}\n";
    let (ok, _, err) = run(&cloud, &["apply", "-f", "-"], Some(typo));
    assert!(!ok);
    assert!(err.contains(r#"unknown field "datta" in io.k8s.api.core.v1.ConfigMap"#), "{err}");
    assert!(!exists(&cloud, &["get", "configmap", "other"]));
}
