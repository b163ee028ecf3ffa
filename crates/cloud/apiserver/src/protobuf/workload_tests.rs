//! Whole-body tests of the workload types: apps/v1 `Deployment`, `ReplicaSet`, `DaemonSet`,
//! `StatefulSet`, `ControllerRevision`; batch/v1 `Job`, `CronJob`; autoscaling/v1 `Scale`.
//!
//! As in `tests.rs`, the bodies are built the way gogo-protobuf writes them (every
//! non-pointer scalar on the wire even when zero, non-nullable messages always, pointers
//! only when set), with field numbers taken from the `generated.proto` text independently
//! of the descriptor tables, and checked against the JSON Go's `encoding/json` writes for
//! the same object.

use serde_json::{Value, json};

use super::testenc::{Enc, envelope, int_val, new_object_meta, quantity, str_val, time};
use super::{ProtoError, decode, supports};

fn decoded(body: &[u8]) -> Value {
    match decode(body) {
        Ok((_, _, object)) => object,
        Err(e) => panic!("decode failed: {e}"),
    }
}

/// An `ObjectMeta` with an `app` label, as gogo writes it.
fn meta(name: &str, namespace: &str, app: &str) -> Enc {
    new_object_meta(name, namespace).entry(11, "app", app)
}

/// A `LabelSelector` matching `app`.
fn selector(app: &str) -> Enc {
    Enc::new().entry(1, "app", app)
}

/// A `Container` as gogo writes it, with a port and resources.
fn container(name: &str, image: &str, cpu: &str, memory: &str) -> Enc {
    let resources = Enc::new()
        .quantity_entry(1, "memory", memory)
        .quantity_entry(2, "cpu", cpu)
        .quantity_entry(2, "memory", memory);
    Enc::new()
        .str(1, name)
        .str(2, image)
        .str(5, "")
        .msg(6, Enc::new().str(1, "http").int(2, 0).int(3, 8080).str(4, "TCP").str(5, ""))
        .msg(8, resources)
        .str(13, "/dev/termination-log")
        .str(14, "IfNotPresent")
        .bool(16, false)
        .bool(17, false)
        .bool(18, false)
        .str(20, "File")
}

/// The JSON of [`container`].
fn container_json(name: &str, image: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "name": name,
        "image": image,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {"limits": {"memory": memory}, "requests": {"cpu": cpu, "memory": memory}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    })
}

/// A `PodTemplateSpec` as gogo writes it: template metadata with every value field, and a
/// `PodSpec` with its value fields.
fn template(app: &str, container: Enc, restart: &str) -> Enc {
    let spec = Enc::new()
        .msg(2, container)
        .str(3, restart)
        .int(4, 30)
        .str(6, "ClusterFirst")
        .str(8, "")
        .str(9, "")
        .str(10, "")
        .bool(11, false)
        .bool(12, false)
        .bool(13, false)
        .msg(14, Enc::new())
        .str(16, "")
        .str(17, "")
        .str(19, "default-scheduler");
    Enc::new().msg(1, meta("", "", app)).msg(2, spec)
}

/// The JSON of [`template`].
fn template_json(app: &str, container: Value, restart: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [container],
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler"
        }
    })
}

/// A condition with the common layout (`type` 1, `status` 2, then a transition time,
/// reason and message at the numbers given).
fn condition(kind: &str, status: &str, time_field: u32, reason_field: u32) -> Enc {
    Enc::new()
        .str(1, kind)
        .str(2, status)
        .msg(time_field, time(1_700_000_000, 0))
        .str(reason_field, "Reason")
        .str(reason_field + 1, "")
}

/// A rolled-out Deployment with a rolling update of `maxUnavailable: 1, maxSurge: "25%"`.
pub(super) fn deployment_body() -> Vec<u8> {
    let selector = selector("web").msg(2, Enc::new().str(1, "tier").str(2, "In").str(3, "frontend").str(3, "edge"));
    let strategy = Enc::new().str(1, "RollingUpdate").msg(2, Enc::new().msg(1, int_val(1)).msg(2, str_val("25%")));
    let spec = Enc::new()
        .int(1, 3)
        .msg(2, selector)
        .msg(3, template("web", container("web", "nginx:1.27", "250m", "128Mi"), "Always"))
        .msg(4, strategy)
        .int(5, 0)
        .int(6, 10)
        .bool(7, false)
        .int(9, 600);
    let available = Enc::new()
        .str(1, "Available")
        .str(2, "True")
        .msg(6, time(1_700_000_000, 0))
        .msg(7, time(1_699_999_000, 0))
        .str(4, "MinimumReplicasAvailable")
        .str(5, "Deployment has minimum availability.");
    let status = Enc::new().int(1, 4).int(2, 3).int(3, 3).int(7, 3).int(4, 3).int(5, 0).int(9, 0).msg(6, available);
    let meta = meta("web", "default", "web").entry(12, "deployment.kubernetes.io/revision", "3").int(7, 4);
    envelope("apps/v1", "Deployment", Enc::new().msg(1, meta).msg(2, spec).msg(3, status))
}

#[test]
fn deployment_with_rolling_update_template_and_status() {
    assert_eq!(
        decoded(&deployment_body()),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "generation": 4, "labels": {"app": "web"},
                         "annotations": {"deployment.kubernetes.io/revision": "3"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"},
                             "matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend", "edge"]}]},
                "template": template_json("web", container_json("web", "nginx:1.27", "250m", "128Mi"), "Always"),
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}},
                "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600
            },
            "status": {
                "observedGeneration": 4,
                "replicas": 3,
                "updatedReplicas": 3,
                "readyReplicas": 3,
                "availableReplicas": 3,
                "terminatingReplicas": 0,
                "conditions": [{"type": "Available", "status": "True",
                                "lastUpdateTime": "2023-11-14T22:13:20Z",
                                "lastTransitionTime": "2023-11-14T21:56:40Z",
                                "reason": "MinimumReplicasAvailable",
                                "message": "Deployment has minimum availability."}]
            }
        })
    );
}

#[test]
fn deployment_zero_values() {
    // `replicas: 0` and `maxUnavailable: 0` are pointers and stay; `paused: false` and
    // `minReadySeconds: 0` are omitempty values and go; an all-zero status is `{}`.
    let strategy = Enc::new().str(1, "RollingUpdate").msg(2, Enc::new().msg(1, int_val(0)).msg(2, int_val(1)));
    let spec = Enc::new().int(1, 0).msg(3, Enc::new()).msg(4, strategy).int(5, 0).bool(7, false);
    let status = Enc::new().int(1, 0).int(2, 0).int(3, 0).int(7, 0).int(4, 0).int(5, 0);
    let body =
        envelope("apps/v1", "Deployment", Enc::new().msg(1, new_object_meta("idle", "")).msg(2, spec).msg(3, status));
    assert_eq!(
        decoded(&body),
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "idle"},
            "spec": {"replicas": 0, "template": {},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}},
            "status": {}
        })
    );
    // Recreate: no rollingUpdate at all.
    let spec = Enc::new().msg(4, Enc::new().str(1, "Recreate"));
    let body = envelope("apps/v1", "Deployment", Enc::new().msg(2, spec));
    assert_eq!(decoded(&body)["spec"], json!({"strategy": {"type": "Recreate"}}));
}

#[test]
fn replica_set_owned_by_a_deployment() {
    let owner =
        Enc::new().str(5, "apps/v1").str(1, "Deployment").str(3, "web").str(4, "d-uid").bool(6, true).bool(7, true);
    let meta = meta("web-6d4", "default", "web").msg(13, owner);
    let spec = Enc::new()
        .int(1, 3)
        .int(4, 0)
        .msg(2, selector("web"))
        .msg(3, template("web", container("web", "nginx:1.27", "1", "1Gi"), "Always"));
    let status =
        Enc::new().int(1, 3).int(2, 3).int(4, 2).int(5, 2).int(3, 1).msg(6, condition("ReplicaFailure", "True", 3, 4));
    let body = envelope("apps/v1", "ReplicaSet", Enc::new().msg(1, meta).msg(2, spec).msg(3, status));
    assert_eq!(
        decoded(&body),
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web-6d4", "namespace": "default", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "uid": "d-uid", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": template_json("web", container_json("web", "nginx:1.27", "1", "1Gi"), "Always")},
            "status": {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                       "observedGeneration": 1,
                       "conditions": [{"type": "ReplicaFailure", "status": "True",
                                       "lastTransitionTime": "2023-11-14T22:13:20Z", "reason": "Reason"}]}
        })
    );
    // A ReplicaSet scaled to zero: `replicas` is a value without omitempty in the status.
    let body = envelope("apps/v1", "ReplicaSet", Enc::new().msg(2, Enc::new().int(1, 0)).msg(3, Enc::new().int(1, 0)));
    assert_eq!(decoded(&body)["spec"], json!({"replicas": 0}));
    assert_eq!(decoded(&body)["status"], json!({"replicas": 0}));
}

/// A log-shipping DaemonSet on every edge node.
pub(super) fn daemon_set_body() -> Vec<u8> {
    let log_volume = Enc::new().str(1, "varlog").msg(2, Enc::new().msg(1, Enc::new().str(1, "/var/log").str(2, "")));
    let toleration = Enc::new().str(1, "node-role.kubernetes.io/edge").str(2, "Exists").str(3, "").str(4, "NoSchedule");
    let agent = container("agent", "fluent-bit:3.1", "100m", "200Mi")
        .msg(9, Enc::new().str(1, "varlog").bool(2, true).str(3, "/var/log").str(4, ""));
    let template = Enc::new().msg(1, meta("", "", "logs")).msg(
        2,
        Enc::new().msg(1, log_volume).msg(2, agent).str(3, "Always").msg(22, toleration).str(19, "default-scheduler"),
    );
    let strategy = Enc::new().str(1, "RollingUpdate").msg(2, Enc::new().msg(1, int_val(1)).msg(2, int_val(0)));
    let spec = Enc::new().msg(1, selector("logs")).msg(2, template).msg(3, strategy).int(4, 0).int(6, 10);
    let status = Enc::new().int(1, 3).int(2, 0).int(3, 3).int(4, 2).int(5, 1).int(6, 3).int(7, 2).int(8, 1);
    envelope("apps/v1", "DaemonSet", Enc::new().msg(1, meta("logs", "kube-system", "logs")).msg(2, spec).msg(3, status))
}

#[test]
fn daemon_set_with_tolerations_volumes_and_status() {
    let mut agent = container_json("agent", "fluent-bit:3.1", "100m", "200Mi");
    agent["volumeMounts"] = json!([{"name": "varlog", "readOnly": true, "mountPath": "/var/log"}]);
    assert_eq!(
        decoded(&daemon_set_body()),
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "logs", "namespace": "kube-system", "labels": {"app": "logs"}},
            "spec": {
                "selector": {"matchLabels": {"app": "logs"}},
                "template": {
                    "metadata": {"labels": {"app": "logs"}},
                    "spec": {
                        "volumes": [{"name": "varlog", "hostPath": {"path": "/var/log", "type": ""}}],
                        "containers": [agent],
                        "restartPolicy": "Always",
                        "schedulerName": "default-scheduler",
                        "tolerations": [{"key": "node-role.kubernetes.io/edge", "operator": "Exists",
                                         "effect": "NoSchedule"}]
                    }
                },
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                "revisionHistoryLimit": 10
            },
            "status": {
                "currentNumberScheduled": 3,
                "numberMisscheduled": 0,
                "desiredNumberScheduled": 3,
                "numberReady": 2,
                "observedGeneration": 1,
                "updatedNumberScheduled": 3,
                "numberAvailable": 2,
                "numberUnavailable": 1
            }
        })
    );
}

#[test]
fn daemon_set_zero_values() {
    // The four counters without omitempty are filled in even when not sent; an OnDelete
    // strategy has no rollingUpdate.
    let spec = Enc::new().msg(3, Enc::new().str(1, "OnDelete"));
    let body = envelope("apps/v1", "DaemonSet", Enc::new().msg(2, spec).msg(3, Enc::new()));
    assert_eq!(
        decoded(&body),
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "spec": {"updateStrategy": {"type": "OnDelete"}},
            "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                       "numberReady": 0}
        })
    );
}

/// A three-replica database with a claim template per pod.
pub(super) fn stateful_set_body() -> Vec<u8> {
    let claim_spec = Enc::new()
        .str(1, "ReadWriteOnce")
        .msg(2, Enc::new().quantity_entry(2, "storage", "10Gi"))
        .str(3, "")
        .str(5, "local-path")
        .str(6, "Filesystem");
    let claim = Enc::new().msg(1, new_object_meta("data", "")).msg(2, claim_spec).msg(3, Enc::new().str(1, ""));
    let strategy = Enc::new().str(1, "RollingUpdate").msg(2, Enc::new().int(1, 0).msg(2, str_val("50%")));
    let spec = Enc::new()
        .int(1, 3)
        .msg(2, selector("db"))
        .msg(3, template("db", container("postgres", "postgres:16", "500m", "1Gi"), "Always"))
        .msg(4, claim)
        .str(5, "db")
        .str(6, "OrderedReady")
        .msg(7, strategy)
        .int(8, 10)
        .int(9, 0)
        .msg(10, Enc::new().str(1, "Retain").str(2, "Delete"))
        .msg(11, Enc::new().int(1, 0));
    let status = Enc::new()
        .int(1, 2)
        .int(2, 3)
        .int(3, 3)
        .int(4, 3)
        .int(5, 3)
        .str(6, "db-7c9")
        .str(7, "db-7c9")
        .int(9, 0)
        .msg(10, condition("Ready", "True", 3, 4))
        .int(11, 3);
    envelope("apps/v1", "StatefulSet", Enc::new().msg(1, meta("db", "default", "db")).msg(2, spec).msg(3, status))
}

#[test]
fn stateful_set_with_claim_templates_and_status() {
    assert_eq!(
        decoded(&stateful_set_body()),
        json!({
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default", "labels": {"app": "db"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "db"}},
                "template": template_json("db", container_json("postgres", "postgres:16", "500m", "1Gi"), "Always"),
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                             "storageClassName": "local-path", "volumeMode": "Filesystem"},
                    "status": {}
                }],
                "serviceName": "db",
                "podManagementPolicy": "OrderedReady",
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": "50%"}},
                "revisionHistoryLimit": 10,
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
                "ordinals": {"start": 0}
            },
            "status": {
                "observedGeneration": 2,
                "replicas": 3,
                "readyReplicas": 3,
                "currentReplicas": 3,
                "updatedReplicas": 3,
                "currentRevision": "db-7c9",
                "updateRevision": "db-7c9",
                "collisionCount": 0,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z",
                                "reason": "Reason"}],
                "availableReplicas": 3
            }
        })
    );
}

#[test]
fn stateful_set_zero_values_and_claim_status() {
    let body = envelope("apps/v1", "StatefulSet", Enc::new().msg(2, Enc::new()).msg(3, Enc::new()));
    assert_eq!(
        decoded(&body),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "spec": {"serviceName": ""},
               "status": {"replicas": 0, "availableReplicas": 0}})
    );
    // A claim template's status, as a client copying a live claim would send it.
    let claim_status = Enc::new()
        .str(1, "Bound")
        .str(2, "ReadWriteOnce")
        .quantity_entry(3, "storage", "10Gi")
        .msg(
            4,
            Enc::new().str(1, "Resizing").str(2, "True").msg(3, Enc::new()).msg(4, time(0, 0)).str(5, "").str(6, ""),
        )
        .quantity_entry(5, "storage", "20Gi")
        .entry(7, "storage", "ControllerResizeInProgress")
        .str(8, "gold")
        .msg(9, Enc::new().str(1, "").str(2, "Pending"))
        .msg(10, Enc::new().msg(1, Enc::new().str(1, "Abnormal").str(2, "IOErrors")).msg(2, Enc::new()));
    let spec = Enc::new().msg(4, Enc::new().msg(3, claim_status)).str(5, "db");
    let body = envelope("apps/v1", "StatefulSet", Enc::new().msg(2, spec));
    assert_eq!(
        decoded(&body)["spec"]["volumeClaimTemplates"],
        json!([{"status": {
            "phase": "Bound",
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "10Gi"},
            "conditions": [{"type": "Resizing", "status": "True", "lastTransitionTime": "1970-01-01T00:00:00Z"}],
            "allocatedResources": {"storage": "20Gi"},
            "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
            "currentVolumeAttributesClassName": "gold",
            "modifyVolumeStatus": {"status": "Pending"},
            "healthStatus": {"healthConditions": [{"status": "Abnormal", "reason": "IOErrors"}]}
        }}])
    );
}

#[test]
fn controller_revision_embeds_its_data() {
    let data = Enc::new().bytes(1, br#"{"spec":{"template":{"$patch":"replace","spec":{"containers":[]}}}}"#);
    let body = envelope(
        "apps/v1",
        "ControllerRevision",
        Enc::new().msg(1, meta("logs-5f6b", "kube-system", "logs")).msg(2, data).int(3, 2),
    );
    assert_eq!(
        decoded(&body),
        json!({
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {"name": "logs-5f6b", "namespace": "kube-system", "labels": {"app": "logs"}},
            "data": {"spec": {"template": {"$patch": "replace", "spec": {"containers": []}}}},
            "revision": 2
        })
    );
    // An empty `data` is Go's `null`; a missing `revision` is 0.
    let body = envelope("apps/v1", "ControllerRevision", Enc::new().msg(2, Enc::new()));
    assert_eq!(
        decoded(&body),
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "data": null, "revision": 0})
    );
    let body = envelope("apps/v1", "ControllerRevision", Enc::new().msg(2, Enc::new().bytes(1, b"\xd9\xd9\xf7\xa0")));
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
}

/// The `JobSpec` of an indexed job with failure and success policies.
fn indexed_job_spec() -> Enc {
    let on_exit = Enc::new().str(1, "main").str(2, "In").packed(3, &[42, 43]);
    let on_conditions = Enc::new().str(1, "DisruptionTarget").str(2, "True");
    let failure_policy = Enc::new()
        .msg(1, Enc::new().str(1, "FailJob").msg(2, on_exit))
        .msg(1, Enc::new().str(1, "Ignore").msg(3, on_conditions));
    let success_policy = Enc::new().msg(1, Enc::new().str(1, "0-2").int(2, 2));
    let mut main = container("main", "registry.local/batch:1", "1", "1Gi");
    main = main.str(3, "/bin/work");
    Enc::new()
        .int(1, 2)
        .int(2, 4)
        .msg(11, failure_policy)
        .msg(16, success_policy)
        .int(7, 6)
        .bool(5, false)
        .msg(6, template("work", main, "Never"))
        .int(8, 100)
        .str(9, "Indexed")
        .bool(10, false)
        .str(14, "Failed")
}

/// The JSON of [`indexed_job_spec`].
fn indexed_job_spec_json() -> Value {
    let mut main = container_json("main", "registry.local/batch:1", "1", "1Gi");
    main["command"] = json!(["/bin/work"]);
    json!({
        "parallelism": 2,
        "completions": 4,
        "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42, 43]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
        ]},
        "successPolicy": {"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]},
        "backoffLimit": 6,
        "manualSelector": false,
        "template": template_json("work", main, "Never"),
        "ttlSecondsAfterFinished": 100,
        "completionMode": "Indexed",
        "suspend": false,
        "podReplacementPolicy": "Failed"
    })
}

/// A running indexed Job.
pub(super) fn job_body() -> Vec<u8> {
    let running = Enc::new()
        .str(1, "SuccessCriteriaMet")
        .str(2, "True")
        .msg(3, Enc::new())
        .msg(4, time(1_700_000_300, 0))
        .str(5, "SuccessPolicy")
        .str(6, "Matched rules at index 0");
    let status = Enc::new()
        .msg(1, running)
        .msg(2, time(1_700_000_000, 0))
        .int(4, 2)
        .int(5, 1)
        .int(6, 0)
        .int(11, 0)
        .str(7, "0")
        .msg(8, Enc::new().str(1, "uid-a").str(1, "uid-b"))
        .int(9, 2);
    envelope(
        "batch/v1",
        "Job",
        Enc::new().msg(1, new_object_meta("work", "default")).msg(2, indexed_job_spec()).msg(3, status),
    )
}

#[test]
fn job_with_policies_template_and_status() {
    assert_eq!(
        decoded(&job_body()),
        json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "work", "namespace": "default"},
            "spec": indexed_job_spec_json(),
            "status": {
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True",
                                "lastTransitionTime": "2023-11-14T22:18:20Z", "reason": "SuccessPolicy",
                                "message": "Matched rules at index 0"}],
                "startTime": "2023-11-14T22:13:20Z",
                "active": 2,
                "succeeded": 1,
                "terminating": 0,
                "completedIndexes": "0",
                "uncountedTerminatedPods": {"succeeded": ["uid-a", "uid-b"]},
                "ready": 2
            }
        })
    );
}

#[test]
fn job_zero_values_and_scheduling() {
    // kubectl's zero status (every value field sent as zero) is `{}`; unset pointers stay out.
    let status = Enc::new().int(4, 0).int(5, 0).int(6, 0).str(7, "");
    let body = envelope("batch/v1", "Job", Enc::new().msg(2, Enc::new().msg(6, Enc::new())).msg(3, status));
    assert_eq!(
        decoded(&body),
        json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {}}, "status": {}})
    );
    // The alpha workload scheduling of a gang job; empty marker messages stay `{}`.
    let scheduling = Enc::new()
        .msg(1, Enc::new().msg(2, Enc::new().int(1, 4)))
        .msg(2, Enc::new().msg(1, Enc::new().str(1, "topology.kubernetes.io/zone")))
        .msg(3, Enc::new().msg(2, Enc::new()))
        .msg(4, Enc::new().str(1, "gpu").str(3, "gpu-template"));
    let body = envelope("batch/v1", "Job", Enc::new().msg(2, Enc::new().msg(17, scheduling)));
    assert_eq!(
        decoded(&body)["spec"],
        json!({"scheduling": {
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]},
            "disruptionMode": {"all": {}},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}]
        }})
    );
    let body = envelope(
        "batch/v1",
        "Job",
        Enc::new().msg(2, Enc::new().msg(17, Enc::new().msg(1, Enc::new().msg(1, Enc::new())))),
    );
    assert_eq!(decoded(&body)["spec"], json!({"scheduling": {"schedulingPolicy": {"basic": {}}}}));
}

/// A nightly backup CronJob with one job running.
pub(super) fn cron_job_body() -> Vec<u8> {
    let job_template = Enc::new().msg(1, meta("", "", "backup")).msg(
        2,
        Enc::new().int(7, 2).msg(6, template("backup", container("dump", "backup:2", "200m", "256Mi"), "OnFailure")),
    );
    let spec = Enc::new()
        .str(1, "0 3 * * *")
        .str(8, "Etc/UTC")
        .int(2, 200)
        .str(3, "Forbid")
        .bool(4, false)
        .msg(5, job_template)
        .int(6, 3)
        .int(7, 1);
    let active = Enc::new()
        .str(1, "Job")
        .str(2, "default")
        .str(3, "backup-28340000")
        .str(4, "job-uid")
        .str(5, "batch/v1")
        .str(6, "812")
        .str(7, "");
    let status = Enc::new().msg(1, active).msg(4, time(1_700_010_000, 0)).msg(5, time(1_699_923_600, 0));
    envelope("batch/v1", "CronJob", Enc::new().msg(1, meta("backup", "default", "backup")).msg(2, spec).msg(3, status))
}

#[test]
fn cron_job_with_job_template_and_status() {
    assert_eq!(
        decoded(&cron_job_body()),
        json!({
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "backup", "namespace": "default", "labels": {"app": "backup"}},
            "spec": {
                "schedule": "0 3 * * *",
                "timeZone": "Etc/UTC",
                "startingDeadlineSeconds": 200,
                "concurrencyPolicy": "Forbid",
                "suspend": false,
                "jobTemplate": {
                    "metadata": {"labels": {"app": "backup"}},
                    "spec": {"backoffLimit": 2,
                             "template": template_json("backup", container_json("dump", "backup:2", "200m", "256Mi"),
                                                       "OnFailure")}
                },
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1
            },
            "status": {
                "active": [{"kind": "Job", "namespace": "default", "name": "backup-28340000", "uid": "job-uid",
                            "apiVersion": "batch/v1", "resourceVersion": "812"}],
                "lastScheduleTime": "2023-11-15T01:00:00Z",
                "lastSuccessfulTime": "2023-11-14T01:00:00Z"
            }
        })
    );
    // Zero values: `schedule` has no omitempty; an empty status is `{}`.
    let body =
        envelope("batch/v1", "CronJob", Enc::new().msg(2, Enc::new().str(3, "").msg(5, Enc::new())).msg(3, Enc::new()));
    assert_eq!(
        decoded(&body),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": "", "jobTemplate": {}}, "status": {}})
    );
}

#[test]
fn scale_bodies() {
    let object = Enc::new()
        .msg(1, new_object_meta("web", "default").str(6, "42"))
        .msg(2, Enc::new().int(1, 5))
        .msg(3, Enc::new().int(1, 3).str(2, "app=web"));
    assert_eq!(
        decoded(&envelope("autoscaling/v1", "Scale", object)),
        json!({
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {"name": "web", "namespace": "default", "resourceVersion": "42"},
            "spec": {"replicas": 5},
            "status": {"replicas": 3, "selector": "app=web"}
        })
    );
    // Scaling to zero: `spec.replicas` is omitempty, as in Go; `status.replicas` is not.
    let object = Enc::new().msg(1, new_object_meta("web", "default")).msg(2, Enc::new().int(1, 0)).msg(3, Enc::new());
    assert_eq!(
        decoded(&envelope("autoscaling/v1", "Scale", object)),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "namespace": "default"},
               "spec": {}, "status": {"replicas": 0}})
    );
}

#[test]
fn workload_kinds_are_supported_only_in_their_group_versions() {
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "DaemonSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "ControllerRevision"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("autoscaling/v1", "Scale"),
    ] {
        assert!(supports(api_version, kind), "{api_version} {kind}");
        // An empty object decodes to nothing but the type and its zero-value fields.
        let (_, _, object) = decode(&envelope(api_version, kind, Enc::new())).expect("decodes");
        assert_eq!(object["apiVersion"], api_version);
        assert_eq!(object["kind"], kind);
    }
    for (api_version, kind) in [
        ("apps/v1beta2", "Deployment"),
        ("extensions/v1beta1", "Deployment"),
        ("v1", "Deployment"),
        ("batch/v1beta1", "CronJob"),
        ("apps/v1", "Job"),
        ("apps/v1", "Scale"),
        ("autoscaling/v2", "Scale"),
        ("v1", "PersistentVolumeClaim"),
    ] {
        assert!(!supports(api_version, kind), "{api_version} {kind}");
    }
}

#[test]
fn errors_inside_workloads() {
    // An IntOrString sent as a varint, deep in the strategy.
    let strategy = Enc::new().msg(2, Enc::new().int(2, 1));
    let body = envelope("apps/v1", "Deployment", Enc::new().msg(2, Enc::new().msg(4, strategy)));
    assert_eq!(decode(&body), Err(ProtoError::BadWireType { field: 2, wire: 0 }));
    // An IntOrString of an impossible type.
    let strategy = Enc::new().msg(2, Enc::new().msg(2, Enc::new().int(1, 2)));
    let body = envelope("apps/v1", "DaemonSet", Enc::new().msg(2, Enc::new().msg(3, strategy)));
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
    // An empty quantity in a claim template.
    let claim =
        Enc::new().msg(2, Enc::new().msg(2, Enc::new().msg(2, Enc::new().str(1, "storage").msg(2, quantity("")))));
    let body = envelope("apps/v1", "StatefulSet", Enc::new().msg(2, Enc::new().msg(4, claim)));
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
    // Pod-condition patterns as a number (a string of exit codes would be a packed run).
    let rule = Enc::new().str(1, "Ignore").int(3, 1);
    let body = envelope("batch/v1", "Job", Enc::new().msg(2, Enc::new().msg(11, Enc::new().msg(1, rule))));
    assert_eq!(decode(&body), Err(ProtoError::BadWireType { field: 3, wire: 0 }));
    // A time past year 9999 in a CronJob's status.
    let body = envelope("batch/v1", "CronJob", Enc::new().msg(3, Enc::new().msg(4, time(i64::MAX, 0))));
    assert!(matches!(decode(&body), Err(ProtoError::Invalid(_))));
}

/// Every hand-built workload body.
pub(super) fn bodies() -> [Vec<u8>; 5] {
    [deployment_body(), daemon_set_body(), stateful_set_body(), job_body(), cron_job_body()]
}

#[test]
fn every_truncation_of_workload_bodies_is_an_error_or_the_same_object() {
    // As in `tests.rs`: only the trailing empty contentEncoding/contentType (two bytes each)
    // may be cut off, and then the object is the same.
    const TRAILER: usize = 4;
    for body in bodies() {
        let full = decode(&body).expect("the whole body decodes");
        for cut in 0..body.len() {
            if let Ok(partial) = decode(body.get(..cut).unwrap_or_default()) {
                assert!(cut >= body.len() - TRAILER, "a body cut at {cut} of {} decoded", body.len());
                assert_eq!(partial, full);
            }
        }
    }
}

#[test]
fn corrupted_workload_bytes_never_panic() {
    for body in bodies() {
        for i in 4..body.len() {
            for value in [0x00, 0x7f, 0x80, 0xff] {
                let mut bad = body.clone();
                if let Some(b) = bad.get_mut(i) {
                    *b = value;
                }
                let _ = decode(&bad);
            }
        }
    }
}
