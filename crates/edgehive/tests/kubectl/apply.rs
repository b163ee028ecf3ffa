//! Server-side apply with the real kubectl: `kubectl apply --server-side`
//! creates and updates, a second manager's change to an owned field is a
//! conflict (kubectl prints Kubernetes' message) that `--force-conflicts`
//! overrides, fields dropped from the manifest go, `kubectl diff
//! --server-side` shows a change without making it, and managedFields list
//! every manager; bad apply requests get Kubernetes' errors.

use std::io::Write as _;
use std::process::Stdio;

use serde_json::Value;

use super::{Cloud, refused};

fn deployment(replicas: u32, labels: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{{labels}}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports: [{{containerPort: 80}}]
"#
    )
}

const CONFIGMAP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
  size: "1"
"#;

fn server_side(cloud: &Cloud, manifest: &str, extra: &[&str]) -> String {
    let mut args = vec!["apply", "--server-side", "-f", "-"];
    args.extend_from_slice(extra);
    cloud.ok_with(&args, Some(manifest))
}

/// The managers of an object's managedFields: (manager, operation).
fn managers(obj: &Value) -> Vec<(String, String)> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    (e["manager"].as_str().unwrap_or("").to_string(), e["operation"].as_str().unwrap_or("").to_string())
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Runs kubectl with `stdin`; gives (exit code, stdout, stderr).
fn run(cloud: &Cloud, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child =
        cloud.kubectl().args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kubectl_apply_server_side_manages_fields() {
    let cloud = Cloud::start(&[]);

    // Create by apply: one Apply entry for kubectl's manager.
    let out = server_side(&cloud, &deployment(2, "app: web, tier: front"), &[]);
    assert!(out.contains("deployment.apps/web serverside-applied"), "{out}");
    let d = cloud.json(&["get", "deployment", "web", "--show-managed-fields"]);
    assert_eq!(managers(&d), vec![("kubectl".to_string(), "Apply".to_string())]);
    assert_eq!(d["spec"]["replicas"], 2);
    let fields = &d["metadata"]["managedFields"][0]["fieldsV1"];
    assert!(fields.pointer("/f:spec/f:replicas").is_some(), "{fields}");
    assert!(
        fields.pointer("/f:spec/f:template/f:spec/f:containers/k:{\"name\":\"nginx\"}/f:image").is_some(),
        "{fields}"
    );

    // Applying the same manifest again changes nothing.
    let rv = d["metadata"]["resourceVersion"].clone();
    server_side(&cloud, &deployment(2, "app: web, tier: front"), &[]);
    let again = cloud.json(&["get", "deployment", "web"]);
    assert_eq!(again["metadata"]["resourceVersion"], rv);

    // Another manager changing the replicas kubectl applied: a conflict,
    // printed as Kubernetes words it.
    let other = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 5\n";
    let err = refused(&cloud, &["apply", "--server-side", "--field-manager=other", "-f", "-"], Some(other));
    assert!(err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas"#), "{err}");
    assert_eq!(cloud.json(&["get", "deployment", "web"])["spec"]["replicas"], 2);

    // Forced, it takes the field over.
    server_side(&cloud, other, &["--field-manager=other", "--force-conflicts"]);
    let d = cloud.json(&["get", "deployment", "web", "--show-managed-fields"]);
    assert_eq!(d["spec"]["replicas"], 5);
    let mut ms = managers(&d);
    ms.sort();
    assert_eq!(ms, vec![("kubectl".into(), "Apply".into()), ("other".into(), "Apply".into())]);
    let kubectl =
        d["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == "kubectl").unwrap();
    assert!(kubectl["fieldsV1"].pointer("/f:spec/f:replicas").is_none(), "{kubectl}");

    // `kubectl get -o yaml --show-managed-fields` shows both; without the flag kubectl hides them.
    let yaml = cloud.ok(&["get", "deployment", "web", "-o", "yaml", "--show-managed-fields"]);
    assert!(yaml.contains("manager: kubectl") && yaml.contains("manager: other"), "{yaml}");
    assert!(!cloud.ok(&["get", "deployment", "web", "-o", "yaml"]).contains("managedFields"));

    // A label dropped from the manifest goes (kubectl no longer applies it,
    // nobody else owns it); the replicas stay other's.
    let dropped = deployment(5, "app: web").replace("  replicas: 5\n", "");
    server_side(&cloud, &dropped, &[]);
    let d = cloud.json(&["get", "deployment", "web"]);
    assert_eq!(d["metadata"]["labels"], serde_json::json!({"app": "web"}));
    assert_eq!(d["spec"]["replicas"], 5);

    // `kubectl diff --server-side` shows the change (exit 1) and makes none.
    let changed = dropped.replace("nginx:1.25", "nginx:1.27");
    let (code, stdout, stderr) = run(&cloud, &["diff", "--server-side", "-f", "-"], &changed);
    assert_eq!(code, 1, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("-      - image: nginx:1.25") && stdout.contains("+      - image: nginx:1.27"), "{stdout}");
    let image = &cloud.json(&["get", "deployment", "web"])["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, "nginx:1.25");
    let (code, stdout, _) = run(&cloud, &["diff", "--server-side", "-f", "-"], &dropped);
    assert_eq!(code, 0, "{stdout}");

    // A ConfigMap, then an edit by a client-side manager that takes the
    // field it changed (kubectl keeps the other) and that the next apply
    // conflicts with.
    let out = server_side(&cloud, CONFIGMAP, &[]);
    assert!(out.contains("configmap/settings serverside-applied"), "{out}");
    cloud.ok(&["patch", "configmap", "settings", "--type=merge", "-p", r#"{"data":{"mode":"slow"}}"#]);
    let cm = cloud.json(&["get", "configmap", "settings", "--show-managed-fields"]);
    let mut ms = managers(&cm);
    ms.sort();
    assert_eq!(ms, vec![("kubectl".into(), "Apply".into()), ("kubectl-patch".into(), "Update".into())]);
    let err = refused(&cloud, &["apply", "--server-side", "-f", "-"], Some(CONFIGMAP));
    assert!(
        err.contains(r#"Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.mode"#),
        "{err}"
    );
    server_side(&cloud, CONFIGMAP, &["--force-conflicts"]);
    assert_eq!(cloud.json(&["get", "configmap", "settings"])["data"]["mode"], "fast");
}

/// A PATCH sent as it is (kubectl cannot send apply patches by hand):
/// gives the status code and the JSON answered.
fn raw_patch(cloud: &Cloud, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(&cloud.kubeconfig).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let req = http::Request::patch(path)
            .header("content-type", content_type)
            .body(kube::client::Body::from(body.as_bytes().to_vec()))
            .unwrap();
        let resp = client.send(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    })
}

const APPLY: &str = "application/apply-patch+yaml";
const CM_PATH: &str = "/api/v1/namespaces/default/configmaps/c";

#[test]
fn bad_apply_requests_get_kubernetes_errors() {
    let cloud = Cloud::start(&[]);
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: v\n";
    let expect = |path: &str, ct: &str, body: &str, code: u16, reason: &str, message: &str| {
        let (got, status) = raw_patch(&cloud, path, ct, body);
        assert_eq!(got, code, "{path}: {status}");
        assert_eq!(status["reason"], reason, "{status}");
        assert_eq!(status["message"], message, "{status}");
        status
    };
    expect(
        CM_PATH,
        APPLY,
        cm,
        422,
        "Invalid",
        r#"PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch"#,
    );
    expect(
        &format!("{CM_PATH}?fieldManager=m&force=true"),
        "application/merge-patch+json",
        r#"{"data":{"k":"w"}}"#,
        422,
        "Invalid",
        r#"PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch"#,
    );
    let long = "m".repeat(129);
    let status = raw_patch(&cloud, &format!("{CM_PATH}?fieldManager={long}"), APPLY, cm).1;
    assert_eq!(status["code"], 422, "{status}");
    assert_eq!(status["details"]["causes"][0]["reason"], "FieldValueTooLong", "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "fieldManager", "{status}");

    let (code, status) = raw_patch(&cloud, &format!("{CM_PATH}?fieldManager=m"), APPLY, "data: [1\n");
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")), "{status}");
    assert!(status["message"].as_str().unwrap().starts_with("error decoding YAML: "), "{status}");
    expect(
        &format!("{CM_PATH}?fieldManager=m"),
        APPLY,
        "- a\n- b\n",
        400,
        "BadRequest",
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}",
    );
    expect(
        &format!("{CM_PATH}?fieldManager=m"),
        APPLY,
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: c\n",
        400,
        "BadRequest",
        "invalid object type: /v1, Kind=Secret",
    );
    expect(
        &format!("{CM_PATH}?fieldManager=m"),
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
        400,
        "BadRequest",
        "the name of the object (other) does not match the name on the URL (c)",
    );
    expect(
        &format!("{CM_PATH}?fieldManager=m"),
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  managedFields: []\n",
        400,
        "BadRequest",
        "metadata.managedFields must be nil",
    );

    // A dry run of an apply that would create answers 201 and creates nothing.
    let (code, obj) = raw_patch(&cloud, &format!("{CM_PATH}?fieldManager=m&dryRun=All"), APPLY, cm);
    assert_eq!(code, 201, "{obj}");
    assert_eq!(obj["metadata"]["managedFields"][0]["manager"], "m", "{obj}");
    refused(&cloud, &["get", "configmap", "c"], None);

    // JSON is YAML: the apply creates (201), then updates (200).
    let json_cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
    let (code, obj) = raw_patch(&cloud, &format!("{CM_PATH}?fieldManager=m"), APPLY, json_cm);
    assert_eq!(code, 201, "{obj}");
    let (code, obj) = raw_patch(&cloud, &format!("{CM_PATH}?fieldManager=m"), APPLY, cm);
    assert_eq!(code, 200, "{obj}");

    // A conflict's Status, field by field.
    let (code, status) = raw_patch(
        &cloud,
        &format!("{CM_PATH}?fieldManager=n"),
        APPLY,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  k: w\n",
    );
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(status["message"], r#"Apply failed with 1 conflict: conflict with "m": .data.k"#);
    assert_eq!(
        status["details"]["causes"],
        serde_json::json!([{"reason": "FieldManagerConflict", "message": "conflict with \"m\"", "field": ".data.k"}])
    );
}
