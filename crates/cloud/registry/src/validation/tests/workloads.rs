//! The workloads (apps/v1, batch/v1): each rule with Kubernetes' path and text.

use super::*;
use serde_json::{Value, json};

const UID: &str = "9f5a3c0e-1b2d-4e6f-8a7b-0c1d2e3f4a5b";

/// An object as a create meets validation: with its uid, defaulted, prepared by its strategy.
fn admitted(group: &str, kind: &str, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(meta) = o.as_object_mut().map(|m| m.entry("metadata").or_insert_with(|| json!({})))
        && let Some(meta) = meta.as_object_mut()
    {
        meta.insert("uid".into(), json!(UID));
    }
    crate::defaults::apply_defaults(group, kind, &mut o);
    crate::defaults::prepare_for_create(group, kind, &mut o);
    o
}

fn errs(group: &str, kind: &str, obj: &Value) -> Vec<String> {
    super::super::validate_create(group, kind, &admitted(group, kind, obj)).iter().map(FieldError::message).collect()
}

fn update_errs(group: &str, kind: &str, new: &Value, old: &Value) -> Vec<String> {
    validate_update(group, kind, new, old).iter().map(FieldError::message).collect()
}

fn none() -> Vec<String> {
    Vec::new()
}

fn template(app: &str) -> Value {
    json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}})
}

fn deployment() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template("web")}})
}

fn deploy(obj: &Value) -> Vec<String> {
    errs("apps", "Deployment", obj)
}

const NOT_MATCHING: &str = "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`";

// --- Deployment -----------------------------------------------------------------------------------------

#[test]
fn deployment_valid_and_defaulted() {
    assert_eq!(deploy(&deployment()), none());
    let d = admitted("apps", "Deployment", &deployment());
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
}

#[test]
fn deployment_without_selector_is_refused_as_kubernetes_does() {
    let no_selector = without(deployment(), "/spec/selector");
    assert_eq!(deploy(&no_selector), vec!["spec.selector: Required value", NOT_MATCHING]);
    let mut obj = no_selector;
    let e = crate::admit::create(&edgehive_store::resources::DEPLOYMENTS, &mut obj).unwrap_err();
    assert_eq!(e.code.as_u16(), 422);
    assert_eq!(
        e.message,
        format!("Deployment.apps \"web\" is invalid: [spec.selector: Required value, {NOT_MATCHING}]")
    );
    assert_eq!(e.details.causes.len(), 2);
    assert_eq!(e.details.causes[1].field, "spec.template.metadata.labels");
    assert_eq!(e.details.causes[1].reason, "FieldValueInvalid");
}

#[test]
fn deployment_selectors() {
    assert_eq!(
        deploy(&with(deployment(), "/spec/selector", json!({}))),
        vec![
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        ]
    );
    assert_eq!(deploy(&with(deployment(), "/spec/selector/matchLabels/app", json!("db"))), vec![NOT_MATCHING]);
    let expr = json!({"matchExpressions": [{"key": "app", "operator": "Has", "values": ["web"]}]});
    assert_eq!(
        deploy(&with(deployment(), "/spec/selector", expr)),
        vec![
            "spec.selector.matchExpressions[0].operator: Invalid value: \"Has\": not a valid selector operator",
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"app\", Operator:\"Has\", \
Values:[]string{\"web\"}}}}: invalid label selector",
        ]
    );
    let in_expr = json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]});
    assert_eq!(deploy(&with(deployment(), "/spec/selector", in_expr)), none());
}

#[test]
fn deployment_template_is_a_pod_template() {
    assert_eq!(
        deploy(&without(deployment(), "/spec/template/spec/containers/0/image")),
        vec!["spec.template.spec.containers[0].image: Required value"]
    );
    assert_eq!(
        deploy(&with(deployment(), "/spec/template/spec/restartPolicy", json!("Never"))),
        vec!["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
    );
    assert_eq!(
        deploy(&with(deployment(), "/spec/template/spec/activeDeadlineSeconds", json!(10))),
        vec![
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"
        ]
    );
    let bad_label = with(deployment(), "/spec/template/metadata/labels/-bad", json!("x"));
    let e = deploy(&bad_label);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("spec.template.labels: Invalid value: \"-bad\": name part must consist of"), "{e:?}");
    let cost = with(
        deployment(),
        "/spec/template/metadata/annotations",
        json!({"controller.kubernetes.io/pod-deletion-cost": "x"}),
    );
    assert_eq!(
        deploy(&cost),
        vec![
            "spec.template.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: \"x\": must be a 32bit integer"
        ]
    );
    let ephemeral = with(deployment(), "/spec/template/spec/ephemeralContainers", json!([{"name": "e", "image": "x"}]));
    assert!(
        deploy(&ephemeral).contains(
            &"spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"
                .to_string()
        )
    );
}

#[test]
fn deployment_counts() {
    let mut d = deployment();
    d["spec"]["replicas"] = json!(-1);
    d["spec"]["minReadySeconds"] = json!(-2);
    d["spec"]["revisionHistoryLimit"] = json!(-3);
    d["spec"]["progressDeadlineSeconds"] = json!(-4);
    assert_eq!(
        deploy(&d),
        vec![
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.minReadySeconds: Invalid value: -2: must be greater than or equal to 0",
            "spec.revisionHistoryLimit: Invalid value: -3: must be greater than or equal to 0",
            "spec.progressDeadlineSeconds: Invalid value: -4: must be greater than or equal to 0",
            "spec.progressDeadlineSeconds: Invalid value: -4: must be greater than minReadySeconds",
        ]
    );
    let mut equal = deployment();
    equal["spec"]["minReadySeconds"] = json!(10);
    equal["spec"]["progressDeadlineSeconds"] = json!(10);
    assert_eq!(
        deploy(&equal),
        vec!["spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds"]
    );
    equal["spec"]["progressDeadlineSeconds"] = json!(11);
    assert_eq!(deploy(&equal), none());
}

#[test]
fn deployment_strategies() {
    let strategy = |s: Value| deploy(&with(deployment(), "/spec/strategy", s));
    assert_eq!(
        strategy(json!({"type": "Foo"})),
        vec![
            "spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:\"Foo\", \
RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", \"RollingUpdate\""
        ]
    );
    assert_eq!(strategy(json!({"type": "Recreate"})), none());
    assert_eq!(
        strategy(json!({"type": "Recreate", "rollingUpdate": {"maxSurge": 1}})),
        vec!["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]
    );
    assert_eq!(
        strategy(json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}})),
        vec![
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: \
may not be 0 when `maxSurge` is 0"
        ]
    );
    assert_eq!(
        strategy(json!({"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": "0%"}})),
        vec![
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"0%\"}: \
may not be 0 when `maxSurge` is 0"
        ]
    );
    assert_eq!(
        strategy(json!({"rollingUpdate": {"maxSurge": -1, "maxUnavailable": "150%"}})),
        vec![
            "spec.strategy.rollingUpdate.maxSurge: Invalid value: -1: must be greater than or equal to 0",
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, \
StrVal:\"150%\"}: must not be greater than 100%",
        ]
    );
    let e = strategy(json!({"rollingUpdate": {"maxSurge": "lots"}}));
    assert_eq!(
        e,
        vec![
            "spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"lots\"}: \
a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for \
validation is '[0-9]+%')"
        ]
    );
    // A surge above 100% is fine (only maxUnavailable is capped).
    assert_eq!(strategy(json!({"rollingUpdate": {"maxSurge": "200%"}})), none());
}

#[test]
fn deployment_update_keeps_the_selector() {
    let old = admitted("apps", "Deployment", &deployment());
    let scaled = with(old.clone(), "/spec/replicas", json!(5));
    assert_eq!(update_errs("apps", "Deployment", &scaled, &old), none());
    let mut moved = old.clone();
    moved["spec"]["selector"] = json!({"matchLabels": {"app": "web2"}});
    moved["spec"]["template"]["metadata"]["labels"] = json!({"app": "web2"});
    assert_eq!(
        update_errs("apps", "Deployment", &moved, &old),
        vec![
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web2\"}, \
MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"
        ]
    );
    let new_image = with(old.clone(), "/spec/template/spec/containers/0/image", json!("nginx:1.27"));
    assert_eq!(update_errs("apps", "Deployment", &new_image, &old), none());
}

#[test]
fn deployment_decode_errors() {
    let decode = |obj: Value| -> (u16, String) {
        let mut o = obj;
        let e = crate::admit::create(&edgehive_store::resources::DEPLOYMENTS, &mut o).unwrap_err();
        (e.code.as_u16(), e.message)
    };
    assert_eq!(
        decode(with(deployment(), "/spec/replicas", json!("3"))),
        (
            400,
            "Deployment in version \"apps/v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go \
struct field DeploymentSpec.spec.replicas of type int32"
                .to_string()
        )
    );
    let surge = with(deployment(), "/spec/strategy", json!({"rollingUpdate": {"maxSurge": true}}));
    assert!(decode(surge).1.ends_with("json: cannot unmarshal bool into Go value of type int32"));
    let containers = with(deployment(), "/spec/template/spec/containers", json!("x"));
    assert!(
        decode(containers)
            .1
            .ends_with("json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container")
    );
    let selector = with(deployment(), "/spec/selector/matchLabels", json!(["app"]));
    assert!(
        decode(selector)
            .1
            .ends_with("json: cannot unmarshal array into Go struct field LabelSelector.spec.selector.matchLabels of type map[string]string")
    );
    let stamp = with(deployment(), "/status", json!({"conditions": [{"type": "Available", "lastUpdateTime": 5}]}));
    assert!(decode(stamp).1.ends_with("json: cannot unmarshal number into Go value of type string"));
}

// --- ReplicaSet -----------------------------------------------------------------------------------------

fn replica_set() -> Value {
    json!({"metadata": {"name": "web-1", "namespace": "default"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template("web")}})
}

#[test]
fn replica_set_rules() {
    let rs = |obj: Value| errs("apps", "ReplicaSet", &obj);
    assert_eq!(rs(replica_set()), none());
    assert_eq!(
        rs(with(replica_set(), "/spec/selector", json!({"matchLabels": {}}))),
        vec![
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{}, \
MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"
        ]
    );
    assert_eq!(
        rs(with(replica_set(), "/spec/minReadySeconds", json!(-1))),
        vec!["spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"]
    );
    assert_eq!(rs(without(replica_set(), "/spec/selector")), vec!["spec.selector: Required value", NOT_MATCHING]);
    let old = admitted("apps", "ReplicaSet", &replica_set());
    let moved =
        with(old.clone(), "/spec/selector/matchExpressions", json!([{"key": "tier", "operator": "DoesNotExist"}]));
    let e = update_errs("apps", "ReplicaSet", &moved, &old);
    assert_eq!(e.len(), 1);
    assert!(
        e[0].starts_with("spec.selector: Invalid value: v1.LabelSelector{") && e[0].ends_with("field is immutable")
    );
}

// --- DaemonSet ------------------------------------------------------------------------------------------

fn daemon_set() -> Value {
    json!({"metadata": {"name": "agent", "namespace": "kube-system"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template("web")}})
}

#[test]
fn daemon_set_rules() {
    let ds = |obj: Value| errs("apps", "DaemonSet", &obj);
    assert_eq!(ds(daemon_set()), none());
    // No "Required" for a missing selector: only that nothing matches.
    assert_eq!(ds(without(daemon_set(), "/spec/selector")), vec![NOT_MATCHING]);
    assert_eq!(
        ds(with(daemon_set(), "/spec/selector", json!({}))),
        vec![
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for daemonset"
        ]
    );
    assert_eq!(
        ds(with(daemon_set(), "/spec/template/spec/restartPolicy", json!("OnFailure"))),
        vec!["spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\""]
    );
    assert_eq!(
        ds(with(daemon_set(), "/spec/template/spec/activeDeadlineSeconds", json!(5))),
        vec![
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not Supported"
        ]
    );
    let strategy = |s: Value| ds(with(daemon_set(), "/spec/updateStrategy", s));
    assert_eq!(strategy(json!({"type": "OnDelete"})), none());
    assert_eq!(strategy(json!({"rollingUpdate": {"maxSurge": "20%", "maxUnavailable": 0}})), none());
    assert_eq!(
        strategy(json!({"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}})),
        vec![
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: \
may not be set when maxUnavailable is non-zero"
        ]
    );
    assert_eq!(
        strategy(json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}})),
        vec!["spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"]
    );
    assert_eq!(
        strategy(json!({"rollingUpdate": {"maxSurge": "101%", "maxUnavailable": 0}})),
        vec![
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, \
StrVal:\"101%\"}: must not be greater than 100%"
        ]
    );
    assert_eq!(
        strategy(json!({"type": "Foo"})),
        vec![
            "spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Foo\", \
RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\""
        ]
    );
    assert_eq!(
        ds(with(daemon_set(), "/spec/revisionHistoryLimit", json!(-1))),
        vec!["spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"]
    );
    let old = admitted("apps", "DaemonSet", &daemon_set());
    let moved = with(old.clone(), "/spec/selector/matchLabels/tier", json!("x"));
    let moved = with(moved, "/spec/template/metadata/labels/tier", json!("x"));
    assert_eq!(update_errs("apps", "DaemonSet", &moved, &old).len(), 1);
}

// --- StatefulSet ----------------------------------------------------------------------------------------

fn stateful_set() -> Value {
    json!({"metadata": {"name": "db", "namespace": "default"},
           "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "web"}}, "template": template("web")}})
}

#[test]
fn stateful_set_rules() {
    let sts = |obj: Value| errs("apps", "StatefulSet", &obj);
    assert_eq!(sts(stateful_set()), none());
    assert_eq!(sts(without(stateful_set(), "/spec/serviceName")), none(), "serviceName is optional in 1.32");
    let e = sts(with(stateful_set(), "/metadata/name", json!("db.1")));
    assert_eq!(e, vec!["metadata.name: Invalid value: \"db.1\": must not contain dots"]);
    let e = sts(with(stateful_set(), "/metadata/name", json!("DB")));
    assert_eq!(e, vec![format!("metadata.name: Invalid value: \"DB\": {LABEL_MSG}")]);
    // As in Kubernetes, the template's pod spec is not validated, only its metadata.
    assert_eq!(sts(without(stateful_set(), "/spec/template/spec/containers/0/image")), none());
    assert_eq!(
        sts(with(stateful_set(), "/spec/podManagementPolicy", json!("Foo"))),
        vec!["spec.podManagementPolicy: Invalid value: \"Foo\": must be 'OrderedReady' or 'Parallel'"]
    );
    let strategy = |s: Value| sts(with(stateful_set(), "/spec/updateStrategy", s));
    assert_eq!(
        strategy(json!({"type": "Foo"})),
        vec![
            "spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Foo\", \
RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'"
        ]
    );
    assert_eq!(strategy(json!({"type": "OnDelete"})), none());
    assert_eq!(
        strategy(json!({"type": "OnDelete", "rollingUpdate": {"partition": 1}})),
        vec![
            "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, \
MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"
        ]
    );
    assert_eq!(
        strategy(json!({"rollingUpdate": {"partition": -1}})),
        vec!["spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"]
    );
    assert_eq!(
        sts(with(stateful_set(), "/spec/persistentVolumeClaimRetentionPolicy", json!({"whenDeleted": "Keep"}))),
        vec![
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \
\"Retain\", \"Delete\""
        ]
    );
    assert_eq!(
        sts(with(stateful_set(), "/spec/ordinals", json!({"start": -1}))),
        vec!["spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"]
    );
    assert_eq!(
        sts(with(stateful_set(), "/spec/volumeClaimTemplates", json!([{"metadata": {"name": "data"}}]))),
        vec!["spec.volumeClaimTemplates: Forbidden: volumeClaimTemplates are not supported by this server"]
    );
    assert_eq!(
        sts(with(stateful_set(), "/spec/selector", json!({}))),
        vec![
            "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), \
MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for statefulset"
        ]
    );
    assert_eq!(
        sts(with(stateful_set(), "/spec/template/spec/restartPolicy", json!("Never"))),
        vec!["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
    );
}

#[test]
fn stateful_set_updates_are_limited() {
    let old = admitted("apps", "StatefulSet", &stateful_set());
    let mut allowed = old.clone();
    allowed["spec"]["replicas"] = json!(3);
    allowed["spec"]["minReadySeconds"] = json!(5);
    allowed["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    allowed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("postgres:17");
    assert_eq!(update_errs("apps", "StatefulSet", &allowed, &old), none());
    for (field, value) in [
        ("serviceName", json!("other")),
        ("podManagementPolicy", json!("Parallel")),
        ("revisionHistoryLimit", json!(3)),
    ] {
        let changed = with(old.clone(), &format!("/spec/{field}"), value);
        assert_eq!(
            update_errs("apps", "StatefulSet", &changed, &old),
            vec![
                "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
            ],
            "{field}"
        );
    }
}

// --- ControllerRevision ---------------------------------------------------------------------------------

#[test]
fn controller_revision_rules() {
    let rev = json!({"metadata": {"name": "db-7d9f", "namespace": "default"}, "data": {"spec": {"template": {}}}, "revision": 1});
    let cr = |obj: Value| errs("apps", "ControllerRevision", &obj);
    assert_eq!(cr(rev.clone()), none());
    assert_eq!(cr(without(rev.clone(), "/data")), vec!["data: Required value: data is mandatory"]);
    assert_eq!(
        cr(with(rev.clone(), "/revision", json!(-1))),
        vec!["revision: Invalid value: -1: must be greater than or equal to 0"]
    );
    let old = admitted("apps", "ControllerRevision", &rev);
    assert_eq!(update_errs("apps", "ControllerRevision", &with(old.clone(), "/revision", json!(2)), &old), none());
    assert_eq!(
        update_errs("apps", "ControllerRevision", &with(old.clone(), "/data", json!({"x": 1})), &old),
        vec!["data: Invalid value: {\"x\":1}: field is immutable"]
    );
}

// --- Job ------------------------------------------------------------------------------------------------

fn job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "default"},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}})
}

fn jobs(obj: &Value) -> Vec<String> {
    errs("batch", "Job", obj)
}

#[test]
fn job_valid_with_a_generated_selector() {
    assert_eq!(jobs(&job()), none());
    let mut created = job();
    crate::admit::create(&edgehive_store::resources::JOBS, &mut created).unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(created["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
    assert_eq!(created["spec"]["template"]["metadata"]["labels"]["job-name"], "pi");
}

#[test]
fn job_restart_policy() {
    assert_eq!(
        jobs(&without(job(), "/spec/template/spec/restartPolicy")),
        vec!["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
    );
    assert_eq!(
        jobs(&with(job(), "/spec/template/spec/restartPolicy", json!("Always"))),
        vec!["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
    );
    assert_eq!(jobs(&with(job(), "/spec/template/spec/restartPolicy", json!("OnFailure"))), none());
    assert_eq!(
        jobs(&with(job(), "/spec/template/spec/restartPolicy", json!("Sometimes"))),
        vec![
            "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \
\"OnFailure\", \"Never\"",
            "spec.template.spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"",
        ]
    );
}

#[test]
fn job_counts() {
    let mut j = job();
    for (field, v) in [
        ("parallelism", -1),
        ("completions", -2),
        ("activeDeadlineSeconds", -3),
        ("backoffLimit", -4),
        ("ttlSecondsAfterFinished", -5),
    ] {
        j["spec"][field] = json!(v);
    }
    assert_eq!(
        jobs(&j),
        vec![
            "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
            "spec.completions: Invalid value: -2: must be greater than or equal to 0",
            "spec.activeDeadlineSeconds: Invalid value: -3: must be greater than or equal to 0",
            "spec.backoffLimit: Invalid value: -4: must be greater than or equal to 0",
            "spec.ttlSecondsAfterFinished: Invalid value: -5: must be greater than or equal to 0",
        ]
    );
}

#[test]
fn job_selectors() {
    let mut manual = with(job(), "/spec/manualSelector", json!(true));
    manual["spec"]["template"]["metadata"] = json!({"labels": {"app": "pi"}});
    assert_eq!(
        jobs(&manual),
        vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"pi\"}: `selector` does not match template `labels`",
        ]
    );
    manual["spec"]["selector"] = json!({"matchLabels": {"app": "pi"}});
    assert_eq!(jobs(&manual), none());

    let own_name = with(job(), "/spec/template/metadata", json!({"labels": {"job-name": "other"}}));
    assert_eq!(
        jobs(&own_name),
        vec![format!(
            "spec.template.metadata.labels[job-name]: Invalid value: map[string]string{{\"batch.kubernetes.io/controller-uid\":\"{UID}\", \
\"batch.kubernetes.io/job-name\":\"pi\", \"controller-uid\":\"{UID}\", \"job-name\":\"other\"}}: must be 'pi'"
        )]
    );
    let wrong_uid =
        with(job(), "/spec/selector", json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "other"}}));
    let e = jobs(&wrong_uid);
    let not_generated = "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\
\"batch.kubernetes.io/controller-uid\":\"other\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: \
`selector` not auto-generated";
    assert!(e.contains(&not_generated.to_string()), "{e:?}");
    assert!(
        e.iter().any(|m| m.starts_with("spec.template.metadata.labels: Invalid value: map[string]string{")),
        "{e:?}"
    );
}

#[test]
fn job_completion_modes() {
    assert_eq!(
        jobs(&with(job(), "/spec/completionMode", json!("Sometimes"))),
        vec!["spec.completionMode: Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""]
    );
    let mut indexed = with(job(), "/spec/completionMode", json!("Indexed"));
    indexed["spec"]["parallelism"] = json!(2);
    assert_eq!(jobs(&indexed), vec!["spec.completions: Required value: when completion mode is Indexed"]);
    indexed["spec"]["completions"] = json!(3);
    indexed["spec"]["maxFailedIndexes"] = json!(4);
    assert_eq!(
        jobs(&indexed),
        vec![
            "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
            "spec.maxFailedIndexes: Invalid value: 4: must be less than or equal to completions",
        ]
    );
    indexed["spec"]["backoffLimitPerIndex"] = json!(1);
    indexed["spec"]["maxFailedIndexes"] = json!(1);
    assert_eq!(jobs(&indexed), none());
    let per_index = with(job(), "/spec/backoffLimitPerIndex", json!(1));
    assert_eq!(jobs(&per_index), vec!["spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode"]);
    let mut long = with(indexed.clone(), "/metadata/name", json!("a".repeat(62)));
    long["spec"]["completions"] = json!(10);
    assert_eq!(
        jobs(&long),
        vec![format!(
            "metadata.name: Invalid value: \"{}\": will not able to create pod with invalid DNS label: {}-9",
            "a".repeat(62),
            "a".repeat(62)
        )]
    );
}

#[test]
fn job_pod_failure_policy() {
    let policy = |rules: Value| jobs(&with(job(), "/spec/podFailurePolicy", json!({"rules": rules})));
    assert_eq!(policy(json!([{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 2]}}])), none());
    assert_eq!(
        policy(json!([{"action": "", "onExitCodes": {"operator": "In", "values": [1]}}])),
        vec![
            "spec.podFailurePolicy.rules[0].action: Required value: valid values: [\"Count\" \"FailIndex\" \"FailJob\" \"Ignore\"]"
        ]
    );
    assert_eq!(
        policy(json!([{"action": "Retry", "onExitCodes": {"operator": "In", "values": [1]}}])),
        vec![
            "spec.podFailurePolicy.rules[0].action: Unsupported value: \"Retry\": supported values: \"Count\", \
\"FailIndex\", \"FailJob\", \"Ignore\""
        ]
    );
    assert_eq!(
        policy(json!([{"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [1]}}])),
        vec![
            "spec.podFailurePolicy.rules[0].action: Invalid value: \"FailIndex\": requires the backoffLimitPerIndex to be set"
        ]
    );
    assert_eq!(
        policy(
            json!([{"action": "FailJob", "onExitCodes": {"containerName": "x", "operator": "In", "values": [0, 3, 3, 1]}}])
        ),
        vec![
            "spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: \"x\": must be one of the container or \
initContainer names in the pod template",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[0]: Invalid value: 0: must not be 0 for the In operator",
            "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
            "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{0, 3, 3, 1}: must be ordered",
        ]
    );
    assert_eq!(
        policy(json!([{"action": "Ignore", "onExitCodes": {"operator": "In", "values": []}}])),
        vec![
            "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{}: at least one value is required"
        ]
    );
    assert_eq!(
        policy(
            json!([{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "DisruptionTarget"}]}])
        ),
        vec![
            "spec.podFailurePolicy.rules[0]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported"
        ]
    );
    assert_eq!(
        policy(json!([{"action": "Ignore"}])),
        vec![
            "spec.podFailurePolicy.rules[0]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required"
        ]
    );
    assert_eq!(
        policy(json!([{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]}])),
        vec![
            "spec.podFailurePolicy.rules[0].onPodConditions[0].status: Unsupported value: \"Maybe\": supported values: \
\"False\", \"True\", \"Unknown\""
        ]
    );
    let mut on_failure = with(
        job(),
        "/spec/podFailurePolicy",
        json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}),
    );
    on_failure["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    assert_eq!(
        jobs(&on_failure),
        vec![
            "spec.template.spec.restartPolicy: Invalid value: \"OnFailure\": only \"Never\" is supported when podFailurePolicy is specified"
        ]
    );
    let too_many: Vec<Value> =
        (0..21).map(|_| json!({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]})).collect();
    assert_eq!(
        policy(Value::Array(too_many)),
        vec!["spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items"]
    );
}

#[test]
fn job_replacement_and_success_policies() {
    assert_eq!(
        jobs(&with(job(), "/spec/podReplacementPolicy", json!("Never"))),
        vec![
            "spec.podReplacementPolicy: Unsupported value: \"Never\": supported values: \"Failed\", \"TerminatingOrFailed\""
        ]
    );
    let mut with_policy = with(
        job(),
        "/spec/podFailurePolicy",
        json!({"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}),
    );
    with_policy["spec"]["podReplacementPolicy"] = json!("TerminatingOrFailed");
    assert_eq!(
        jobs(&with_policy),
        vec!["spec.podReplacementPolicy: Unsupported value: \"TerminatingOrFailed\": supported values: \"Failed\""]
    );
    let success = json!({"rules": [{"succeededIndexes": "0-1,5"}]});
    let e = jobs(&with(job(), "/spec/successPolicy", success.clone()));
    assert_eq!(
        e,
        vec![
            "spec.successPolicy: Invalid value: {\"rules\":[{\"succeededIndexes\":\"0-1,5\"}]}: requires indexed completion mode"
        ]
    );
    let mut indexed = with(job(), "/spec/completionMode", json!("Indexed"));
    indexed["spec"]["completions"] = json!(3);
    indexed["spec"]["successPolicy"] = success;
    assert_eq!(
        jobs(&indexed),
        vec![
            "spec.successPolicy.rules[0].succeededIndexes: Invalid value: \"0-1,5\": error parsing succeededIndexes: too large index: \"5\""
        ]
    );
    indexed["spec"]["successPolicy"] = json!({"rules": [{"succeededIndexes": "0-1", "succeededCount": 3}]});
    assert_eq!(
        jobs(&indexed),
        vec![
            "spec.successPolicy.rules[0].succeededCount: Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified succeededIndexes field)"
        ]
    );
    indexed["spec"]["successPolicy"] = json!({"rules": [{}]});
    assert_eq!(
        jobs(&indexed),
        vec![
            "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified"
        ]
    );
    indexed["spec"]["successPolicy"] = json!({"rules": [{"succeededCount": 2}]});
    assert_eq!(jobs(&indexed), none());
}

#[test]
fn job_managed_by_and_template() {
    assert_eq!(
        jobs(&with(job(), "/spec/managedBy", json!("kueue"))),
        vec!["spec.managedBy: Invalid value: \"kueue\": must be a domain-prefixed path (such as \"acme.io/foo\")"]
    );
    assert_eq!(jobs(&with(job(), "/spec/managedBy", json!("kueue.x-k8s.io/multikueue"))), none());
    assert_eq!(
        jobs(&without(job(), "/spec/template/spec/containers/0/image")),
        vec!["spec.template.spec.containers[0].image: Required value"]
    );
}

#[test]
fn job_updates() {
    let old = admitted("batch", "Job", &job());
    assert_eq!(update_errs("batch", "Job", &with(old.clone(), "/spec/parallelism", json!(4)), &old), none());
    assert_eq!(
        update_errs("batch", "Job", &with(old.clone(), "/spec/completions", json!(4)), &old),
        vec!["spec.completions: Invalid value: 4: field is immutable"]
    );
    let e = update_errs(
        "batch",
        "Job",
        &with(old.clone(), "/spec/template/spec/containers/0/image", json!("perl:5")),
        &old,
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("spec.template: Invalid value: {") && e[0].ends_with("}: field is immutable"), "{e:?}");
    let e = update_errs("batch", "Job", &with(old.clone(), "/spec/completionMode", json!("Indexed")), &old);
    assert!(e.contains(&"spec.completionMode: Invalid value: \"Indexed\": field is immutable".to_string()), "{e:?}");
    let e = update_errs("batch", "Job", &with(old.clone(), "/spec/managedBy", json!("acme.io/x")), &old);
    assert_eq!(e, vec!["spec.managedBy: Invalid value: \"acme.io/x\": field is immutable"]);

    // A suspended Job that never started may change its scheduling directives.
    let suspended = admitted("batch", "Job", &with(job(), "/spec/suspend", json!(true)));
    let moved = with(suspended.clone(), "/spec/template/spec/nodeSelector", json!({"zone": "a"}));
    assert_eq!(update_errs("batch", "Job", &moved, &suspended), none());
    let started = with(suspended.clone(), "/status", json!({"startTime": "2026-01-01T00:00:00Z"}));
    assert_eq!(update_errs("batch", "Job", &moved, &started).len(), 1);

    // An Indexed Job scales completions together with parallelism.
    let mut indexed = with(job(), "/spec/completionMode", json!("Indexed"));
    indexed["spec"]["completions"] = json!(3);
    indexed["spec"]["parallelism"] = json!(3);
    let old = admitted("batch", "Job", &indexed);
    let mut both = old.clone();
    both["spec"]["completions"] = json!(5);
    both["spec"]["parallelism"] = json!(5);
    assert_eq!(update_errs("batch", "Job", &both, &old), none());
    assert_eq!(
        update_errs("batch", "Job", &with(old.clone(), "/spec/completions", json!(5)), &old),
        vec!["spec.completions: Invalid value: 5: can only be modified in tandem with spec.parallelism"]
    );
}

#[test]
fn job_decode_errors() {
    let e = validate_create("batch", "Job", &with(job(), "/spec/parallelism", json!("2")));
    assert_eq!(
        e.iter().map(FieldError::message).collect::<Vec<_>>(),
        vec!["json: cannot unmarshal string into Go struct field JobSpec.spec.parallelism of type int32"]
    );
    assert!(e[0].is_decode_error());
    let e = validate_create("batch", "Job", &with(job(), "/status", json!({"startTime": 5})));
    assert_eq!(e[0].message(), "json: cannot unmarshal number into Go value of type string");
}

// --- CronJob --------------------------------------------------------------------------------------------

fn cron_job() -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "hello", "namespace": "default"},
           "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
               "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}})
}

fn crons(obj: &Value) -> Vec<String> {
    errs("batch", "CronJob", obj)
}

#[test]
fn cron_job_schedules() {
    assert_eq!(crons(&cron_job()), none());
    for ok in ["@hourly", "@daily", "@every 90m", "0 0 1 jan-jun mon"] {
        assert_eq!(crons(&with(cron_job(), "/spec/schedule", json!(ok))), none(), "{ok}");
    }
    assert_eq!(crons(&with(cron_job(), "/spec/schedule", json!(""))), vec!["spec.schedule: Required value"]);
    assert_eq!(
        crons(&with(cron_job(), "/spec/schedule", json!("every minute"))),
        vec!["spec.schedule: Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/schedule", json!("0 25 * * *"))),
        vec!["spec.schedule: Invalid value: \"0 25 * * *\": end of range (25) above maximum (23): 25"]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/schedule", json!("TZ=UTC 0 0 * * *"))),
        vec![
            "spec.schedule: Invalid value: \"TZ=UTC 0 0 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        ]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/schedule", json!("CRON_TZ=Nowhere 0 0 * * *"))),
        vec![
            "spec.schedule: Invalid value: \"CRON_TZ=Nowhere 0 0 * * *\": provided bad location Nowhere: unknown time zone Nowhere",
            "spec.schedule: Invalid value: \"CRON_TZ=Nowhere 0 0 * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ]
    );
}

#[test]
fn cron_job_time_zones() {
    assert_eq!(crons(&with(cron_job(), "/spec/timeZone", json!("Europe/Berlin"))), none());
    assert_eq!(
        crons(&with(cron_job(), "/spec/timeZone", json!("Mars/Olympus"))),
        vec!["spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/timeZone", json!(""))),
        vec!["spec.timeZone: Invalid value: \"\": timeZone must be nil or non-empty string"]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/timeZone", json!("Local"))),
        vec![
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        ]
    );
}

#[test]
fn cron_job_spec_rules() {
    let mut c = cron_job();
    c["spec"]["concurrencyPolicy"] = json!("Sometimes");
    c["spec"]["startingDeadlineSeconds"] = json!(-1);
    c["spec"]["successfulJobsHistoryLimit"] = json!(-2);
    c["spec"]["failedJobsHistoryLimit"] = json!(-3);
    assert_eq!(
        crons(&c),
        vec![
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            "spec.successfulJobsHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
            "spec.failedJobsHistoryLimit: Invalid value: -3: must be greater than or equal to 0",
        ]
    );
    let name = "n".repeat(53);
    assert_eq!(
        crons(&with(cron_job(), "/metadata/name", json!(name))),
        vec![format!("metadata.name: Invalid value: \"{name}\": must be no more than 52 characters")]
    );
    assert_eq!(crons(&with(cron_job(), "/metadata/name", json!("n".repeat(52)))), none());
}

#[test]
fn cron_job_template_is_a_job_spec() {
    assert_eq!(
        crons(&without(cron_job(), "/spec/jobTemplate/spec/template/spec/restartPolicy")),
        vec![
            "spec.jobTemplate.spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        ]
    );
    assert_eq!(
        crons(&without(cron_job(), "/spec/jobTemplate/spec/template/spec/containers/0/image")),
        vec!["spec.jobTemplate.spec.template.spec.containers[0].image: Required value"]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/jobTemplate/spec/backoffLimit", json!(-1))),
        vec!["spec.jobTemplate.spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0"]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/jobTemplate/spec/selector", json!({"matchLabels": {"a": "b"}}))),
        vec![
            "spec.jobTemplate.spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"a\":\"b\"}, \
MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: `selector` will be auto-generated"
        ]
    );
    assert_eq!(
        crons(&with(cron_job(), "/spec/jobTemplate/spec/manualSelector", json!(true))),
        vec!["spec.jobTemplate.spec.manualSelector: Unsupported value: true: supported values: \"nil\", \"false\""]
    );
    let e = validate_create(
        "batch",
        "CronJob",
        &with(cron_job(), "/spec/jobTemplate/spec/template/spec/containers", json!("x")),
    );
    assert_eq!(
        e[0].message(),
        "json: cannot unmarshal string into Go struct field PodSpec.spec.jobTemplate.spec.template.spec.containers of type []v1.Container"
    );
}

#[test]
fn cron_job_updates() {
    let long = with(cron_job(), "/metadata/name", json!("n".repeat(60)));
    let old = admitted("batch", "CronJob", &long);
    assert_eq!(
        update_errs("batch", "CronJob", &with(old.clone(), "/spec/suspend", json!(true)), &old),
        none(),
        "no name length on update"
    );
    // A schedule stored with a TZ may keep it, but not together with timeZone.
    let tz = with(cron_job(), "/spec/schedule", json!("TZ=UTC 0 0 * * *"));
    let old_tz = admitted("batch", "CronJob", &tz);
    assert_eq!(update_errs("batch", "CronJob", &with(old_tz.clone(), "/spec/suspend", json!(true)), &old_tz), none());
    assert_eq!(
        update_errs("batch", "CronJob", &with(old_tz.clone(), "/spec/timeZone", json!("UTC")), &old_tz),
        vec![
            "spec.schedule: Invalid value: \"TZ=UTC 0 0 * * *\": cannot use both timeZone field and TZ or CRON_TZ in schedule"
        ]
    );
}

#[test]
fn nothing_panics_on_workload_shapes() {
    let shapes =
        [json!(null), json!(1), json!({"spec": 1}), json!({"spec": {"template": [], "selector": "x", "strategy": 3}})];
    for (g, k) in [
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("apps", "DaemonSet"),
        ("apps", "StatefulSet"),
        ("apps", "ControllerRevision"),
        ("batch", "Job"),
        ("batch", "CronJob"),
    ] {
        for s in &shapes {
            let _ = errs(g, k, s);
            let _ = super::super::validate_update(g, k, s, s);
        }
    }
}

// --- PodDisruptionBudget --------------------------------------------------------------------------------

fn pdb(spec: Value) -> Vec<String> {
    errs(
        "policy",
        "PodDisruptionBudget",
        &json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}),
    )
}

#[test]
fn pod_disruption_budgets_take_one_count_or_percentage_and_a_valid_selector() {
    let sel = json!({"matchLabels": {"app": "web"}});
    assert_eq!(pdb(json!({"minAvailable": 2, "selector": sel})), none());
    assert_eq!(
        pdb(json!({"maxUnavailable": "25%", "selector": sel, "unhealthyPodEvictionPolicy": "AlwaysAllow"})),
        none()
    );
    assert_eq!(
        pdb(json!({"minAvailable": 1, "maxUnavailable": 1, "selector": sel})),
        vec!["spec: Invalid value: minAvailable and maxUnavailable cannot be both set"]
    );
    assert_eq!(
        pdb(json!({"minAvailable": -1, "selector": sel})),
        vec!["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]
    );
    let over = pdb(json!({"maxUnavailable": "150%", "selector": sel}));
    assert_eq!(over.len(), 1, "{over:?}");
    assert!(
        over[0].starts_with("spec.maxUnavailable: Invalid value:")
            && over[0].ends_with("must not be greater than 100%"),
        "{over:?}"
    );
    let policy = pdb(json!({"minAvailable": 1, "selector": sel, "unhealthyPodEvictionPolicy": "Sometimes"}));
    assert_eq!(
        policy,
        vec![
            "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
        ]
    );
    let bad_selector = pdb(json!({"minAvailable": 1, "selector": {"matchLabels": {"app": "-x-"}}}));
    assert_eq!(bad_selector.len(), 1, "{bad_selector:?}");
    assert!(bad_selector[0].starts_with("spec.selector.matchLabels: Invalid value: \"-x-\""), "{bad_selector:?}");
    let typed = pdb(json!({"minAvailable": true}));
    assert_eq!(typed.len(), 1, "{typed:?}");
}
