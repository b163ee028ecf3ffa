//! CustomResourceDefinitions with the real kubectl: a definition with a
//! structural schema, two versions, status and scale subresources and
//! printer columns is established and served; its objects are pruned,
//! defaulted and validated with apiextensions' messages; the second version
//! reads the same objects; deleting the definition deletes its objects.
//! KubeEdge's own definitions, as KubeEdge publishes them, apply and take
//! objects.

use serde_json::{Value, json};

use super::{Cloud, refused, wait_for};

const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              color: {type: string, enum: [red, green, blue]}
              replicas: {type: integer, minimum: 0, maximum: 10, default: 1}
              name: {type: string, pattern: '^[a-z]+$', maxLength: 8}
              port: {x-kubernetes-int-or-string: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
              conditions:
                type: array
                items:
                  type: object
                  properties:
                    type: {type: string}
                    status: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET: &str = r#"
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  color: red
  port: http
  extra: {anything: [1, 2]}
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: b}}
"#;

fn established(cloud: &Cloud, crd: &str) -> bool {
    let out = cloud.kubectl().args(["get", "crd", crd, "-o", "json"]).output().unwrap();
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else { return false };
    v["status"]["conditions"]
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
}

#[test]
fn a_custom_resource_definition_is_served_as_kubectl_expects() {
    let cloud = Cloud::start(&[]);
    cloud.apply(WIDGETS);
    wait_for("the definition to be established", || established(&cloud, "widgets.example.com"));
    let crd = cloud.json(&["get", "crd", "widgets.example.com"]);
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
    assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList", "defaulted");
    assert_eq!(crd["spec"]["conversion"]["strategy"], "None", "defaulted");
    let crds = cloud.ok(&["get", "crds"]);
    assert!(crds.starts_with("NAME") && crds.contains("CREATED AT") && crds.contains("widgets.example.com"), "{crds}");
    let resources = cloud.ok(&["api-resources", "--api-group=example.com"]);
    assert!(resources.contains("widgets") && resources.contains("wd") && resources.contains("Widget"), "{resources}");

    // Strict field validation (kubectl's default) refuses an unknown field
    // with its path; --validate=false prunes it.
    let typo = WIDGET.replace("color: red", "color: red\n  colour: blue");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&typo));
    assert!(err.contains("unknown field \"spec.colour\""), "{err}");
    cloud.ok_with(&["create", "--validate=false", "-f", "-"], Some(&typo));
    let w = cloud.json(&["get", "widget", "w1"]);
    assert!(w["spec"].get("colour").is_none(), "pruned: {w}");
    // Defaults, int-or-string, preserved unknown fields, embedded resources.
    assert_eq!(w["spec"]["replicas"], 1, "defaulted: {w}");
    assert_eq!(w["spec"]["port"], "http");
    assert_eq!(w["spec"]["extra"], json!({"anything": [1, 2]}));
    assert_eq!(w["spec"]["template"]["data"], json!({"a": "b"}));
    assert_eq!(w["metadata"]["generation"], 1);

    // apiextensions' validation messages.
    let bad = WIDGET.replace("name: w1", "name: w2").replace("color: red", "color: pink\n  replicas: 11\n  name: Bad1");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&bad));
    for want in [
        "The Widget \"w2\" is invalid",
        "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"green\", \"blue\"",
        "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
        "spec.name: Invalid value: \"Bad1\": spec.name in body should match '^[a-z]+$'",
    ] {
        assert!(err.contains(want), "{want} not in {err}");
    }
    let missing = WIDGET.replace("name: w1", "name: w3").replace("  color: red\n", "");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&missing));
    assert!(err.contains("spec.color: Required value"), "{err}");
    let wrong_type = WIDGET.replace("name: w1", "name: w4").replace("color: red", "color: red\n  replicas: many");
    let err = refused(&cloud, &["create", "--validate=false", "-f", "-"], Some(&wrong_type));
    assert!(
        err.contains(
            "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
        ),
        "{err}"
    );

    // Printer columns.
    cloud.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":1,"selector":"app=w","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    let table = cloud.ok(&["get", "widgets"]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header, ["NAME", "COLOR", "REPLICAS", "READY", "AGE"], "{table}");
    let row: Vec<&str> = table.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[..4], ["w1", "red", "1", "True"], "{table}");
    // Short name and category.
    assert!(cloud.ok(&["get", "wd"]).contains("w1"));
    assert!(cloud.ok(&["get", "all"]).contains("widget.example.com/w1"));

    // Status is the status subresource's: the main resource ignores it.
    cloud.ok(&["patch", "widget", "w1", "--type=merge", "-p", r#"{"status":{"replicas":7}}"#]);
    assert_eq!(cloud.json(&["get", "widget", "w1"])["status"]["replicas"], 1);
    // Scale.
    cloud.ok(&["scale", "widget", "w1", "--replicas=3"]);
    let w = cloud.json(&["get", "widget", "w1"]);
    assert_eq!(w["spec"]["replicas"], 3);
    assert_eq!(w["metadata"]["generation"], 2, "a spec change moves the generation");
    let scale: Value =
        serde_json::from_str(&cloud.ok(&["get", "--raw", "/apis/example.com/v1/namespaces/default/widgets/w1/scale"]))
            .unwrap();
    assert_eq!(scale["status"]["selector"], "app=w");

    // The other version reads and writes the same objects.
    let beta = cloud.json(&["get", "widgets.v1beta1.example.com", "w1"]);
    assert_eq!(beta["apiVersion"], "example.com/v1beta1");
    assert_eq!(beta["spec"]["replicas"], 3);
    cloud.ok_with(
        &["apply", "-f", "-"],
        Some("apiVersion: example.com/v1beta1\nkind: Widget\nmetadata: {name: w5}\nspec: {color: blue}\n"),
    );
    let w5 = cloud.json(&["get", "widgets.v1.example.com", "w5"]);
    assert_eq!(w5["apiVersion"], "example.com/v1");
    assert_eq!(w5["spec"]["color"], "blue");

    // Server-side apply creates and changes custom objects through the same admission.
    let ssa = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w6}\nspec: {color: green}\n";
    cloud.ok_with(&["apply", "--server-side", "-f", "-"], Some(ssa));
    cloud.ok_with(&["apply", "--server-side", "-f", "-"], Some(&ssa.replace("green", "blue")));
    let w6 = cloud.json(&["get", "widget", "w6"]);
    assert_eq!((&w6["spec"]["color"], &w6["spec"]["replicas"]), (&json!("blue"), &json!(1)), "{w6}");
    let err = refused(&cloud, &["apply", "--server-side", "-f", "-"], Some(&ssa.replace("green", "pink")));
    assert!(err.contains("spec.color: Unsupported value: \"pink\""), "{err}");

    // kubectl explain walks the schema.
    let explain = cloud.ok(&["explain", "widget.spec.color"]);
    assert!(explain.contains("color") && explain.contains("string"), "{explain}");
    let v2: Value = serde_json::from_str(&cloud.ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    let widget = &v2["definitions"]["com.example.v1.Widget"];
    assert_eq!(widget["properties"]["spec"]["properties"]["color"]["enum"], json!(["red", "green", "blue"]));
    assert_eq!(widget["x-kubernetes-group-version-kind"][0]["kind"], "Widget");

    // Watches see custom objects.
    let mut watch = cloud
        .kubectl()
        .args(["get", "widgets", "--watch-only", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The watch is open once a change made after it starts arrives.
    wait_for("the watch to see a new widget", || {
        let _ = cloud
            .kubectl()
            .args(["annotate", "widget", "w1", "--overwrite", &format!("seen={}", rand_suffix())])
            .output();
        rx.recv_timeout(std::time::Duration::from_millis(300)).is_ok_and(|l| l.contains("widget.example.com/w1"))
    });
    let _ = watch.kill();
    let _ = watch.wait();

    // A webhook conversion is refused clearly.
    let webhook = WIDGETS
        .replace("widgets.example.com", "gizmos.example.com")
        .replace(
            "plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]",
            "plural: gizmos, kind: Gizmo",
        )
        .replace("  scope: Namespaced\n", "  scope: Namespaced\n  conversion: {strategy: Webhook}\n");
    let err = refused(&cloud, &["create", "-f", "-"], Some(&webhook));
    assert!(
        err.contains("spec.conversion.strategy: Unsupported value: \"Webhook\": supported values: \"None\""),
        "{err}"
    );

    // Deleting the definition deletes its objects, then the definition.
    cloud.ok(&["delete", "crd", "widgets.example.com", "--wait=false"]);
    wait_for("the definition to go", || {
        !cloud.kubectl().args(["get", "crd", "widgets.example.com"]).output().unwrap().status.success()
    });
    let err = refused(&cloud, &["get", "--raw", "/apis/example.com/v1/namespaces/default/widgets"], None);
    assert!(err.contains("NotFound") || err.contains("not found"), "{err}");
    // Created again, it is empty: the objects went with it.
    cloud.apply(WIDGETS);
    wait_for("the definition to be established again", || established(&cloud, "widgets.example.com"));
    assert_eq!(cloud.json(&["get", "widgets"])["items"], json!([]));
    // Also when the definitions go as a collection.
    cloud.ok_with(&["create", "-f", "-"], Some(WIDGET));
    cloud.ok(&["delete", "--raw", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"]);
    wait_for("the definitions to go", || cloud.json(&["get", "crds"])["items"] == json!([]));
    cloud.apply(WIDGETS);
    wait_for("the definition to be established once more", || established(&cloud, "widgets.example.com"));
    assert_eq!(cloud.json(&["get", "widgets"])["items"], json!([]));
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// KubeEdge's CustomResourceDefinitions, unchanged, apply cleanly; the ones
/// edgehive serves built in (devices, device models, object syncs) stay
/// served by the built-ins; an object of every other kind can be created.
#[test]
fn kubeedge_definitions_apply_and_their_objects_can_be_created() {
    let cloud = Cloud::start(&[]);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubeedge-crds");
    let out = cloud.ok(&["apply", "-f", dir.to_str().unwrap()]);
    assert_eq!(out.lines().filter(|l| l.contains("created")).count(), 13, "{out}");
    for name in [
        "rules.rules.kubeedge.io",
        "ruleendpoints.rules.kubeedge.io",
        "nodegroups.apps.kubeedge.io",
        "edgeapplications.apps.kubeedge.io",
        "nodeupgradejobs.operations.kubeedge.io",
        "imageprepulljobs.operations.kubeedge.io",
        "configupdatejobs.operations.kubeedge.io",
        "serviceaccountaccesses.policy.kubeedge.io",
        "devices.devices.kubeedge.io",
        "devicestatuses.devices.kubeedge.io",
    ] {
        wait_for(&format!("{name} to be established"), || established(&cloud, name));
    }
    cloud.apply(
        r#"
apiVersion: rules.kubeedge.io/v1
kind: RuleEndpoint
metadata: {name: my-rest}
spec: {ruleEndpointType: rest, properties: {}}
---
apiVersion: rules.kubeedge.io/v1
kind: Rule
metadata: {name: my-rule}
spec: {source: my-rest, sourceResource: {path: /a}, target: my-eventbus, targetResource: {topic: t}}
---
apiVersion: apps.kubeedge.io/v1alpha1
kind: NodeGroup
metadata: {name: beijing}
spec: {nodes: [edge-1]}
---
apiVersion: operations.kubeedge.io/v1alpha2
kind: NodeUpgradeJob
metadata: {name: upgrade}
spec: {version: v1.21.0}
"#,
    );
    assert_eq!(cloud.json(&["get", "rules.rules.kubeedge.io", "my-rule"])["spec"]["target"], "my-eventbus");
    assert!(cloud.ok(&["get", "nodegroups"]).contains("beijing"));
    // The built-in Device still serves (and still has its KubeEdge webhook).
    cloud.apply(
        r#"
apiVersion: devices.kubeedge.io/v1beta1
kind: Device
metadata: {name: thermo}
spec: {deviceModelRef: {name: m}, nodeName: edge-1}
"#,
    );
    assert_eq!(cloud.json(&["get", "device", "thermo"])["spec"]["nodeName"], "edge-1");
    // Deleting the definition of a built-in leaves its objects alone.
    cloud.ok(&["delete", "crd", "devices.devices.kubeedge.io"]);
    assert_eq!(cloud.json(&["get", "device", "thermo"])["metadata"]["name"], "thermo");
}
