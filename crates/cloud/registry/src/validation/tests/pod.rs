//! Error, metadata and Pod rules.

use super::*;
use serde_json::{Value, json};

// --- errors ------------------------------------------------------------------------------------------------

#[test]
fn reasons_and_texts_are_kubernetes() {
    assert_eq!(ErrorType::Required.reason(), "FieldValueRequired");
    assert_eq!(ErrorType::Invalid.reason(), "FieldValueInvalid");
    assert_eq!(ErrorType::Duplicate.reason(), "FieldValueDuplicate");
    assert_eq!(ErrorType::NotSupported.reason(), "FieldValueNotSupported");
    assert_eq!(ErrorType::TooLong.reason(), "FieldValueTooLong");
    assert_eq!(ErrorType::TooMany.reason(), "FieldValueTooMany");
    assert_eq!(ErrorType::Forbidden.reason(), "FieldValueForbidden");
    assert_eq!(ErrorType::NotFound.reason(), "FieldValueNotFound");
    assert_eq!(ErrorType::TypeInvalid.reason(), "FieldValueTypeInvalid");
    assert_eq!(FieldError::too_many("spec.x", 5, 3).message(), "spec.x: Too many: 5: must have at most 3 items");
    assert_eq!(FieldError::invalid("a", 3, "bad").message(), "a: Invalid value: 3: bad");
    assert_eq!(FieldError::invalid("a", "x\"y\n", "bad").message(), "a: Invalid value: \"x\\\"y\\n\": bad");
    assert_eq!(FieldError::invalid("a", Value::Null, "bad").message(), "a: Invalid value: null: bad");
    assert_eq!(
        FieldError::invalid("a", json!(["p", "q"]), "bad").message(),
        "a: Invalid value: []string{\"p\", \"q\"}: bad"
    );
    assert_eq!(FieldError::required("a", "").status_code(), 422);
}

#[test]
fn public_dns_helpers() {
    assert!(dns1123_subdomain("a.b-c").is_empty());
    assert_eq!(dns1123_subdomain("A"), vec![SUBDOMAIN_MSG]);
    assert_eq!(dns1123_label("Ab"), vec![LABEL_MSG]);
    assert!(dns1123_label("ab").is_empty());
}

#[test]
fn resource_version_on_create() {
    assert!(resource_version_set_on_create(&json!({"metadata": {"resourceVersion": "12"}})));
    assert!(!resource_version_set_on_create(&json!({"metadata": {"resourceVersion": "-1"}})));
    assert!(!resource_version_set_on_create(&pod()));
}

// --- metadata ----------------------------------------------------------------------------------------------

#[test]
fn valid_objects_have_no_errors() {
    assert_eq!(core("Pod", &pod()), Vec::<String>::new());
    assert_eq!(core("Namespace", &json!({"metadata": {"name": "dev"}})), Vec::<String>::new());
    assert_eq!(core("Node", &json!({"metadata": {"name": "edge-1.local"}})), Vec::<String>::new());
    assert_eq!(
        core("ConfigMap", &json!({"metadata": {"name": "c", "namespace": "d"}, "data": {"a.b": "x"}})),
        Vec::<String>::new()
    );
}

#[test]
fn name_required_unless_generate_name() {
    let p = without(pod(), "/metadata/name");
    assert_eq!(core("Pod", &p), vec!["metadata.name: Required value: name or generateName is required"]);
    let g = with(p.clone(), "/metadata/generateName", json!("web-"));
    assert_eq!(core("Pod", &g), Vec::<String>::new());
    let bad = with(p, "/metadata/generateName", json!("Web-"));
    assert_eq!(core("Pod", &bad), vec![format!("metadata.generateName: Invalid value: \"Web-\": {SUBDOMAIN_MSG}")]);
}

#[test]
fn name_rules_per_kind() {
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/name", json!("Foo"))),
        vec![format!("metadata.name: Invalid value: \"Foo\": {SUBDOMAIN_MSG}")]
    );
    assert_eq!(
        core("Namespace", &json!({"metadata": {"name": "a.b"}})),
        vec!["metadata.name: Invalid value: \"a.b\": must not contain dots"]
    );
    let svc = json!({"metadata": {"name": "1abc", "namespace": "d"}, "spec": {"ports": [{"port": 80}]}});
    assert_eq!(
        core("Service", &svc),
        vec![
            "metadata.name: Invalid value: \"1abc\": a DNS-1035 label must consist of lower case alphanumeric characters \
or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex \
used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
    let long = "a".repeat(254);
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/name", json!(long))),
        vec![format!("metadata.name: Invalid value: \"{long}\": must be no more than 253 characters")]
    );
}

#[test]
fn namespace_required_for_namespaced_kinds_only() {
    assert_eq!(core("Pod", &without(pod(), "/metadata/namespace")), vec!["metadata.namespace: Required value"]);
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/namespace", json!("a.b"))),
        vec!["metadata.namespace: Invalid value: \"a.b\": must not contain dots"]
    );
    // Kubernetes clears a namespace sent for a cluster-scoped object.
    assert_eq!(core("Node", &json!({"metadata": {"name": "n", "namespace": "x"}})), Vec::<String>::new());
}

#[test]
fn labels_and_annotations() {
    let p = with(pod(), "/metadata/labels", json!({"app": "web", "bad key": "v", "k": "-v"}));
    assert_eq!(
        core("Pod", &p),
        vec![
            "metadata.labels: Invalid value: \"bad key\": name part must consist of alphanumeric characters, '-', '_' or '.', \
and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for \
validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "metadata.labels: Invalid value: \"-v\": a valid label must be an empty string or consist of alphanumeric \
characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or \
'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ]
    );
    let long_value = "v".repeat(64);
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/labels", json!({"k": long_value}))),
        vec![format!("metadata.labels: Invalid value: \"{long_value}\": must be no more than 63 characters")]
    );
    let ok = with(pod(), "/metadata/annotations", json!({"Example.com/Key": "anything at all"}));
    assert_eq!(core("Pod", &ok), Vec::<String>::new());
    let big = with(pod(), "/metadata/annotations", json!({"k": "x".repeat(256 * 1024)}));
    assert_eq!(core("Pod", &big), vec!["metadata.annotations: Too long: must have at most 262144 bytes"]);
    let bad = with(pod(), "/metadata/annotations", json!({"a/b/c": ""}));
    assert_eq!(validate_create("", "Pod", &bad)[0].field, "metadata.annotations");
}

#[test]
fn finalizers_and_owner_references() {
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/finalizers", json!(["example.com/keep", "kubernetes"]))),
        Vec::<String>::new()
    );
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/finalizers", json!(["keep"]))),
        vec![
            "metadata.finalizers[0]: Invalid value: \"keep\": name is neither a standard finalizer name nor is it fully qualified"
        ]
    );
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/finalizers", json!(["orphan", "foregroundDeletion"]))),
        vec![
            "metadata.finalizers: Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
        ]
    );
    let owner = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": ""}]);
    assert_eq!(
        core("Pod", &with(pod(), "/metadata/ownerReferences", owner)),
        vec!["metadata.ownerReferences.uid: Invalid value: \"\": must not be empty"]
    );
}

#[test]
fn metadata_update_immutability() {
    let old = stored("", "Pod", &with(pod(), "/metadata/uid", json!("u1")));
    assert_eq!(core_update("Pod", &old, &old), Vec::<String>::new());
    let renamed = with(old.clone(), "/metadata/name", json!("other"));
    assert_eq!(core_update("Pod", &renamed, &old), vec!["metadata.name: Invalid value: \"other\": field is immutable"]);
    let moved = with(old.clone(), "/metadata/uid", json!("u2"));
    assert_eq!(core_update("Pod", &moved, &old), vec!["metadata.uid: Invalid value: \"u2\": field is immutable"]);
    // An update that leaves uid out keeps the stored one (Kubernetes copies it).
    assert_eq!(core_update("Pod", &without(old.clone(), "/metadata/uid"), &old), Vec::<String>::new());
    let ns = json!({"metadata": {"name": "dev", "uid": "1"}});
    let created = with(ns.clone(), "/metadata/creationTimestamp", json!("2024-01-02T03:04:05Z"));
    assert_eq!(
        core_update("Namespace", &created, &ns),
        vec!["metadata.creationTimestamp: Invalid value: 2024-01-02 03:04:05 +0000 UTC: field is immutable"]
    );
}

// --- Pod ---------------------------------------------------------------------------------------------------

#[test]
fn containers_required() {
    assert_eq!(core("Pod", &with(pod(), "/spec/containers", json!([]))), vec!["spec.containers: Required value"]);
}

#[test]
fn container_name_and_image() {
    assert_eq!(
        core("Pod", &with(pod(), "/spec/containers/0/image", json!(""))),
        vec!["spec.containers[0].image: Required value"]
    );
    assert_eq!(
        core("Pod", &with(pod(), "/spec/containers/0/image", json!(" nginx"))),
        vec!["spec.containers[0].image: Invalid value: \" nginx\": must not have leading or trailing whitespace"]
    );
    assert_eq!(
        core("Pod", &with(pod(), "/spec/containers/0/name", json!("C"))),
        vec![format!("spec.containers[0].name: Invalid value: \"C\": {LABEL_MSG}")]
    );
    let dup = with(pod(), "/spec/initContainers", json!([{"name": "c", "image": "busybox"}]));
    assert_eq!(core("Pod", &dup), vec!["spec.initContainers[0].name: Duplicate value: \"c\""]);
    let dup2 = with(pod(), "/spec/containers", json!([{"name": "c", "image": "nginx"}, {"name": "c", "image": "x"}]));
    assert_eq!(core("Pod", &dup2), vec!["spec.containers[1].name: Duplicate value: \"c\""]);
}

#[test]
fn container_ports() {
    let ok = with(
        pod(),
        "/spec/containers/0/ports",
        json!([{"containerPort": 80, "name": "http"}, {"containerPort": 80, "protocol": "UDP"}]),
    );
    assert_eq!(core("Pod", &ok), Vec::<String>::new());
    let bad = with(
        pod(),
        "/spec/containers/0/ports",
        json!([{"containerPort": 0}, {"containerPort": 70000}, {"containerPort": 81, "protocol": "HTTP"}, {"containerPort": 82, "name": "Web_1"}]),
    );
    assert_eq!(
        core("Pod", &bad),
        vec![
            "spec.containers[0].ports[0].containerPort: Required value",
            "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[0].ports[2].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[0].ports[3].name: Invalid value: \"Web_1\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
        ]
    );
    let host = with(
        pod(),
        "/spec/containers/0/ports",
        json!([{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 8080}]),
    );
    assert_eq!(core("Pod", &host), vec!["spec.containers[0].ports[1].hostPort: Duplicate value: \"TCP//8080\""]);
}

#[test]
fn env_vars() {
    let ok = with(
        pod(),
        "/spec/containers/0/env",
        json!([{"name": "A_B.c-d", "value": "1"}, {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]),
    );
    assert_eq!(core("Pod", &ok), Vec::<String>::new());
    let bad = with(
        pod(),
        "/spec/containers/0/env",
        json!([
            {"name": "1A"},
            {"name": "B", "valueFrom": {}},
            {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}, "secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "D", "value": "x", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": ""},
        ]),
    );
    assert_eq!(
        core("Pod", &bad),
        vec![
            "spec.containers[0].env[0].name: Invalid value: \"1A\": a valid environment variable name must consist of \
alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  \
or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')",
            "spec.containers[0].env[1].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, \
`configMapKeyRef` or `secretKeyRef`",
            "spec.containers[0].env[2].valueFrom: Invalid value: \"\": may not have more than one field specified at a time",
            "spec.containers[0].env[3].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
            "spec.containers[0].env[4].name: Required value",
        ]
    );
}

#[test]
fn volumes_and_mounts() {
    let ok = with(
        with(
            pod(),
            "/spec/volumes",
            json!([{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]),
        ),
        "/spec/containers/0/volumeMounts",
        json!([{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg"}]),
    );
    assert_eq!(core("Pod", &ok), Vec::<String>::new());
    let mounts = with(pod(), "/spec/containers/0/volumeMounts", json!([{"name": "data", "mountPath": ""}]));
    assert_eq!(
        core("Pod", &mounts),
        vec![
            "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
            "spec.containers[0].volumeMounts[0].mountPath: Required value"
        ]
    );
    let vols = with(
        pod(),
        "/spec/volumes",
        json!([
            {"name": "a", "emptyDir": {}, "configMap": {"name": "c"}},
            {"name": "b", "secret": {"defaultMode": 512}},
            {"name": "b", "emptyDir": {}},
            {"name": "Bad", "emptyDir": {}},
        ]),
    );
    assert_eq!(
        core("Pod", &vols),
        vec![
            "spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[1].secret.secretName: Required value",
            "spec.volumes[1].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
            format!("spec.volumes[3].name: Invalid value: \"Bad\": {LABEL_MSG}").as_str(),
        ]
    );
    let dup = with(pod(), "/spec/volumes", json!([{"name": "b", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]));
    assert_eq!(core("Pod", &dup), vec!["spec.volumes[1].name: Duplicate value: \"b\""]);
}

#[test]
fn pod_level_fields() {
    assert_eq!(
        core("Pod", &with(pod(), "/spec/restartPolicy", json!("Sometimes"))),
        vec![
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
        ]
    );
    assert_eq!(
        core("Pod", &with(pod(), "/spec/dnsPolicy", json!("Cluster"))),
        vec![
            "spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\""
        ]
    );
    assert_eq!(
        core("Pod", &with(pod(), "/spec/nodeName", json!("Edge_1"))),
        vec![format!("spec.nodeName: Invalid value: \"Edge_1\": {SUBDOMAIN_MSG}")]
    );
    assert_eq!(core("Pod", &with(pod(), "/spec/nodeName", json!("edge-1"))), Vec::<String>::new());
    assert_eq!(
        core("Pod", &with(pod(), "/spec/activeDeadlineSeconds", json!(0))),
        vec!["spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"]
    );
    // Kubernetes accepts a negative grace period (it only warns).
    assert_eq!(core("Pod", &with(pod(), "/spec/terminationGracePeriodSeconds", json!(-1))), Vec::<String>::new());
    assert_eq!(
        core("Pod", &with(pod(), "/spec/dnsPolicy", json!("None"))),
        vec!["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]
    );
    let tol = with(
        pod(),
        "/spec/tolerations",
        json!([{"key": "k", "operator": "Exists", "value": "v"}, {"operator": "Equal"}]),
    );
    assert_eq!(
        core("Pod", &tol),
        vec![
            "spec.tolerations[0].operator: Invalid value: \"v\": value must be empty when `operator` is 'Exists'",
            "spec.tolerations[1].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        ]
    );
}

#[test]
fn resources_and_probes() {
    let ok = with(
        pod(),
        "/spec/containers/0/resources",
        json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}),
    );
    assert_eq!(core("Pod", &ok), Vec::<String>::new());
    let over = with(pod(), "/spec/containers/0/resources", json!({"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}));
    assert_eq!(
        core("Pod", &over),
        vec![
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1"
        ]
    );
    let neg = with(pod(), "/spec/containers/0/resources", json!({"requests": {"memory": "-1"}}));
    assert_eq!(
        core("Pod", &neg),
        vec![
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0"
        ]
    );
    let probe = with(pod(), "/spec/containers/0/livenessProbe", json!({"successThreshold": 2}));
    assert_eq!(
        core("Pod", &probe),
        vec![
            "spec.containers[0].livenessProbe: Required value: must specify a handler type",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ]
    );
    let http = with(pod(), "/spec/containers/0/readinessProbe", json!({"httpGet": {"port": 0}}));
    assert_eq!(
        core("Pod", &http),
        vec![
            "spec.containers[0].readinessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive"
        ]
    );
    let init = with(
        pod(),
        "/spec/initContainers",
        json!([{"name": "i", "image": "busybox", "livenessProbe": {"exec": {"command": ["true"]}}}]),
    );
    assert_eq!(
        core("Pod", &init),
        vec![
            "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"
        ]
    );
}

#[test]
fn every_error_is_reported() {
    let p =
        json!({"metadata": {"name": "Bad"}, "spec": {"containers": [{"name": "", "image": ""}], "restartPolicy": "x"}});
    let errs = validate_create("", "Pod", &p);
    let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "metadata.name",
            "metadata.namespace",
            "spec.containers[0].name",
            "spec.containers[0].image",
            "spec.restartPolicy"
        ]
    );
}

#[test]
fn pod_update_rules() {
    let old = stored("", "Pod", &with(pod(), "/spec/activeDeadlineSeconds", json!(100)));
    let image = with(old.clone(), "/spec/containers/0/image", json!("nginx:2"));
    assert_eq!(core_update("Pod", &image, &old), Vec::<String>::new());
    let shorter = with(old.clone(), "/spec/activeDeadlineSeconds", json!(50));
    assert_eq!(core_update("Pod", &shorter, &old), Vec::<String>::new());
    let longer = with(old.clone(), "/spec/activeDeadlineSeconds", json!(200));
    assert_eq!(
        core_update("Pod", &longer, &old),
        vec!["spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"]
    );
    let added = with(
        old.clone(),
        "/spec/containers",
        json!([old["spec"]["containers"][0].clone(), {"name": "d", "image": "x"}]),
    );
    assert_eq!(
        core_update("Pod", &added, &old),
        vec!["spec.containers: Forbidden: pod updates may not add or remove containers"]
    );
    let changed = with(old.clone(), "/spec/restartPolicy", json!("Never"));
    let errs = core_update("Pod", &changed, &old);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with(
        "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,\
`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` \
(allow it to be set to 1 if it was previously negative)\n"
    ));
    let tolerated =
        with(old.clone(), "/spec/tolerations", json!([{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]));
    assert_eq!(core_update("Pod", &tolerated, &old), Vec::<String>::new());
    let modified = with(tolerated.clone(), "/spec/tolerations/0/effect", json!("NoExecute"));
    assert_eq!(
        core_update("Pod", &modified, &tolerated),
        vec!["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
    );
}
