//! Rows for the workload kinds: apps/v1 Deployment, ReplicaSet, DaemonSet, StatefulSet, ControllerRevision and
//! batch/v1 Job, CronJob, as Kubernetes 1.32's `printDeployment`, `printReplicaSet`, ... render them (wide columns
//! included).
//!
//! Where the API server would have filled in a default the stored object lacks, the default is printed, as a real
//! cluster (which defaults objects on write and on read from storage) shows it: `spec.replicas` 1 for Deployments,
//! ReplicaSets and StatefulSets, `spec.suspend` false for CronJobs.

use serde_json::Value;
use time::OffsetDateTime;

use super::selector::{format_label_selector, selector_string};
use super::{
    age, field, flag, format_labels, human_duration, int, is_go_zero, list, name, object, opt_int, present_time, since,
    text,
};

/// `spec.replicas` when absent, as the apps/v1 defaults set it.
const DEFAULT_REPLICAS: i64 = 1;

/// NAME READY UP-TO-DATE AVAILABLE AGE CONTAINERS IMAGES SELECTOR. READY is "ready/desired". Unlike the other kinds,
/// SELECTOR is empty for an empty selector and "<invalid>" for one that does not convert.
pub(super) fn deployment(d: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = containers(d, &["spec", "template"]);
    let selector = selector_string(field(d, &["spec", "selector"])).unwrap_or_else(|_| "<invalid>".to_owned());
    vec![
        name(d),
        format!("{}/{}", int(d, &["status", "readyReplicas"]), replicas(d)).into(),
        int(d, &["status", "updatedReplicas"]).into(),
        int(d, &["status", "availableReplicas"]).into(),
        age(d, now),
        containers.into(),
        images.into(),
        selector.into(),
    ]
}

/// NAME DESIRED CURRENT READY AGE CONTAINERS IMAGES SELECTOR.
pub(super) fn replica_set(rs: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = containers(rs, &["spec", "template"]);
    vec![
        name(rs),
        replicas(rs).into(),
        int(rs, &["status", "replicas"]).into(),
        int(rs, &["status", "readyReplicas"]).into(),
        age(rs, now),
        containers.into(),
        images.into(),
        format_label_selector(field(rs, &["spec", "selector"])).into(),
    ]
}

/// NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE-SELECTOR AGE CONTAINERS IMAGES SELECTOR.
pub(super) fn daemon_set(ds: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = containers(ds, &["spec", "template"]);
    vec![
        name(ds),
        int(ds, &["status", "desiredNumberScheduled"]).into(),
        int(ds, &["status", "currentNumberScheduled"]).into(),
        int(ds, &["status", "numberReady"]).into(),
        int(ds, &["status", "updatedNumberScheduled"]).into(),
        int(ds, &["status", "numberAvailable"]).into(),
        format_labels(object(ds, &["spec", "template", "spec", "nodeSelector"])).into(),
        age(ds, now),
        containers.into(),
        images.into(),
        format_label_selector(field(ds, &["spec", "selector"])).into(),
    ]
}

/// NAME READY AGE CONTAINERS IMAGES, READY being "ready/desired".
pub(super) fn stateful_set(sts: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = containers(sts, &["spec", "template"]);
    vec![
        name(sts),
        format!("{}/{}", int(sts, &["status", "readyReplicas"]), replicas(sts)).into(),
        age(sts, now),
        containers.into(),
        images.into(),
    ]
}

/// NAME CONTROLLER REVISION AGE. CONTROLLER is the controlling owner as "kind.group/name" in lower case ("kind/name"
/// for the core group), or "<none>".
pub(super) fn controller_revision(cr: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(cr), controller(cr).into(), int(cr, &["revision"]).into(), age(cr, now)]
}

/// The CONTROLLER cell: the first owner reference marked `controller: true` (`metav1.GetControllerOf`).
fn controller(obj: &Value) -> String {
    let Some(owner) = list(obj, &["metadata", "ownerReferences"]).iter().find(|r| flag(r, &["controller"])) else {
        return "<none>".to_owned();
    };
    let owner_name = text(owner, &["name"]);
    // schema.ParseGroupVersion: "" and "/" are the empty version, "v1" has no group, "group/version" one; more
    // slashes are an error, on which Kubernetes fails the whole request. A row needs a cell, so it reads "<invalid>".
    let api_version = text(owner, &["apiVersion"]);
    let group = match api_version.matches('/').count() {
        _ if api_version == "/" => "",
        0 => "",
        1 => api_version.split_once('/').map_or("", |(group, _)| group),
        _ => return "<invalid>".to_owned(),
    };
    let kind = text(owner, &["kind"]);
    // formatResourceName: the bare name when group and kind are both empty.
    match (group, kind) {
        ("", "") => owner_name.to_owned(),
        ("", kind) => format!("{}/{owner_name}", kind.to_lowercase()),
        (group, kind) => format!("{}.{}/{owner_name}", kind.to_lowercase(), group.to_lowercase()),
    }
}

/// NAME STATUS COMPLETIONS DURATION AGE CONTAINERS IMAGES SELECTOR.
pub(super) fn job(job: &Value, now: OffsetDateTime) -> Vec<Value> {
    let succeeded = int(job, &["status", "succeeded"]);
    let completions = match opt_int(job, &["spec", "completions"]) {
        Some(completions) => format!("{succeeded}/{completions}"),
        None => match int(job, &["spec", "parallelism"]) {
            parallelism if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
            _ => format!("{succeeded}/1"),
        },
    };
    // Blank until the job starts; the time so far while it runs; completion minus start once done.
    let duration = match (present_time(job, &["status", "startTime"]), present_time(job, &["status", "completionTime"]))
    {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(completion)) => human_duration(completion - start),
    };
    let (containers, images) = containers(job, &["spec", "template"]);
    vec![
        name(job),
        job_status(job).into(),
        completions.into(),
        duration.into(),
        age(job, now),
        containers.into(),
        images.into(),
        format_label_selector(field(job, &["spec", "selector"])).into(),
    ]
}

/// The STATUS cell of a Job: its terminal condition, then Terminating while it is being deleted, then Suspended or
/// FailureTarget by condition, else Running. (Kubernetes 1.32 has no SuccessCriteriaMet status; it came in 1.34.)
fn job_status(job: &Value) -> &'static str {
    // hasJobCondition: the first condition of the type decides.
    let has = |kind: &str| {
        list(job, &["status", "conditions"])
            .iter()
            .find(|c| text(c, &["type"]) == kind)
            .is_some_and(|c| text(c, &["status"]) == "True")
    };
    if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if present_time(job, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

/// NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST-SCHEDULE AGE CONTAINERS IMAGES SELECTOR.
pub(super) fn cron_job(cj: &Value, now: OffsetDateTime) -> Vec<Value> {
    // An absent time zone prints "<none>"; a present one as it is, even empty.
    let time_zone = field(cj, &["spec", "timeZone"]).and_then(Value::as_str).unwrap_or("<none>");
    let suspend = field(cj, &["spec", "suspend"]).and_then(Value::as_bool).unwrap_or(false);
    let active = list(cj, &["status", "active"]).iter().filter(|a| a.is_object()).count();
    let last_schedule = match present_time(cj, &["status", "lastScheduleTime"]) {
        None => "<none>".to_owned(),
        Some(t) => since(Some(t).filter(|t| !is_go_zero(*t)), now),
    };
    let template = ["spec", "jobTemplate", "spec", "template"];
    let (containers, images) = containers(cj, &template);
    vec![
        name(cj),
        text(cj, &["spec", "schedule"]).into(),
        time_zone.into(),
        if suspend { "True" } else { "False" }.into(),
        active.into(),
        last_schedule.into(),
        age(cj, now),
        containers.into(),
        images.into(),
        format_label_selector(field(cj, &["spec", "jobTemplate", "spec", "selector"])).into(),
    ]
}

/// NAME MIN-AVAILABLE MAX-UNAVAILABLE ALLOWED-DISRUPTIONS AGE; an unset count prints "N/A".
pub(super) fn pod_disruption_budget(pdb: &Value, now: OffsetDateTime) -> Vec<Value> {
    let count = |key: &str| match field(pdb, &["spec", key]) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".to_owned(),
    };
    vec![
        name(pdb),
        count("minAvailable").into(),
        count("maxUnavailable").into(),
        opt_int(pdb, &["status", "disruptionsAllowed"]).unwrap_or(0).into(),
        age(pdb, now),
    ]
}

/// `spec.replicas`, or its default when absent.
fn replicas(obj: &Value) -> i64 {
    opt_int(obj, &["spec", "replicas"]).unwrap_or(DEFAULT_REPLICAS)
}

/// The CONTAINERS and IMAGES cells (`layoutContainerCells`): the names and the images of the containers of the pod
/// template at `template`, each comma-separated, in order. Entries that are not objects are skipped.
fn containers(obj: &Value, template: &[&str]) -> (String, String) {
    let path: Vec<&str> = template.iter().copied().chain(["spec", "containers"]).collect();
    let containers: Vec<&Value> = list(obj, &path).iter().filter(|c| c.is_object()).collect();
    let join = |key: &str| containers.iter().map(|c| text(c, &[key])).collect::<Vec<_>>().join(",");
    (join("name"), join("image"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::format_description::well_known::Rfc3339;

    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::parse("2024-05-01T12:00:00Z", &Rfc3339).unwrap()
    }

    fn row(group: &str, kind: &str, obj: &Value) -> Vec<Value> {
        let row = super::super::cells(group, kind, obj, now());
        assert_eq!(row.len(), super::super::columns(group, kind).len(), "{group}/{kind}");
        row
    }

    /// Name, type and priority of each column.
    fn layout(group: &str, kind: &str) -> Vec<(&'static str, &'static str, i32)> {
        super::super::columns(group, kind).iter().map(|c| (c.name, c.kind, c.priority)).collect()
    }

    /// A pod template with two containers (the second a sidecar-style log shipper).
    fn template() -> Value {
        json!({
            "metadata": {"labels": {"app": "mapper"}},
            "spec": {"containers": [{"name": "mapper", "image": "kubeedge/modbus-mapper:v1.18.0"},
                                    {"name": "logs", "image": "fluent/fluent-bit:3.0"}],
                     "nodeSelector": {"node-role.kubernetes.io/edge": "", "kubernetes.io/arch": "arm64"}}
        })
    }

    /// Every workload cell of an object that is nothing like one.
    const MALFORMED: &str = r#"{
        "metadata": {"name": ["x"], "creationTimestamp": 5, "ownerReferences": {"controller": true},
                     "deletionTimestamp": "soon"},
        "spec": {"replicas": "three", "selector": "app=x", "template": {"spec": {"containers": "mapper"}},
                 "completions": "all", "parallelism": [2], "schedule": 5, "timeZone": false, "suspend": "no",
                 "jobTemplate": {"spec": 1}},
        "status": {"readyReplicas": "2", "conditions": {"type": "Complete"}, "startTime": 0, "active": 2,
                   "lastScheduleTime": {}, "succeeded": null},
        "revision": "7"
    }"#;

    fn malformed() -> Value {
        serde_json::from_str(MALFORMED).unwrap()
    }

    #[test]
    fn deployment_columns() {
        assert_eq!(
            layout("apps", "Deployment"),
            [
                ("Name", "string", 0),
                ("Ready", "string", 0),
                ("Up-to-date", "string", 0),
                ("Available", "string", 0),
                ("Age", "string", 0),
                ("Containers", "string", 1),
                ("Images", "string", 1),
                ("Selector", "string", 1)
            ]
        );
        assert_eq!(super::super::columns("apps", "Deployment")[0].format, "name");
    }

    #[test]
    fn deployment_row() {
        let deploy = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "modbus-mapper", "namespace": "default", "creationTimestamp": "2024-04-30T12:00:00Z"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "mapper", "tier": "edge"}},
                     "template": template()},
            "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2}
        });
        assert_eq!(
            row("apps", "Deployment", &deploy),
            [
                json!("modbus-mapper"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("24h"),
                json!("mapper,logs"),
                json!("kubeedge/modbus-mapper:v1.18.0,fluent/fluent-bit:3.0"),
                json!("app=mapper,tier=edge")
            ]
        );
    }

    #[test]
    fn deployment_selector_and_defaults() {
        // Just created: no status yet, replicas defaulted; an empty selector prints empty, a bad one "<invalid>".
        let fresh = json!({"metadata": {"name": "web"}, "spec": {"selector": {}}});
        assert_eq!(
            row("apps", "Deployment", &fresh),
            [json!("web"), json!("0/1"), json!(0), json!(0), json!("<unknown>"), json!(""), json!(""), json!("")]
        );
        let scaled_to_zero = json!({"spec": {"replicas": 0, "selector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "api"]}, {"key": "canary", "operator": "DoesNotExist"}]}}});
        let cells = row("apps", "Deployment", &scaled_to_zero);
        assert_eq!((&cells[1], &cells[7]), (&json!("0/0"), &json!("app in (api,web),!canary")));
        let bad = json!({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Equals"}]}}});
        assert_eq!(row("apps", "Deployment", &bad)[7], json!("<invalid>"));
        assert_eq!(row("apps", "Deployment", &json!({}))[7], json!(""));
    }

    #[test]
    fn replica_set_row() {
        let rs = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "modbus-mapper-7d4b9c8f6", "creationTimestamp": "2024-05-01T11:58:30Z",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "modbus-mapper",
                                              "controller": true}]},
            "spec": {"replicas": 3, "template": template(),
                     "selector": {"matchLabels": {"app": "mapper", "pod-template-hash": "7d4b9c8f6"}}},
            "status": {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 1}
        });
        assert_eq!(
            layout("apps", "ReplicaSet"),
            [
                ("Name", "string", 0),
                ("Desired", "integer", 0),
                ("Current", "integer", 0),
                ("Ready", "integer", 0),
                ("Age", "string", 0),
                ("Containers", "string", 1),
                ("Images", "string", 1),
                ("Selector", "string", 1)
            ]
        );
        assert_eq!(
            row("apps", "ReplicaSet", &rs),
            [
                json!("modbus-mapper-7d4b9c8f6"),
                json!(3),
                json!(3),
                json!(1),
                json!("90s"),
                json!("mapper,logs"),
                json!("kubeedge/modbus-mapper:v1.18.0,fluent/fluent-bit:3.0"),
                json!("app=mapper,pod-template-hash=7d4b9c8f6")
            ]
        );
        let bare = json!({"metadata": {"name": "rs"}});
        assert_eq!(
            row("apps", "ReplicaSet", &bare),
            [json!("rs"), json!(1), json!(0), json!(0), json!("<unknown>"), json!(""), json!(""), json!("<none>")]
        );
        let bad = json!({"spec": {"selector": {"matchLabels": {"app": "a b"}}}});
        assert_eq!(row("apps", "ReplicaSet", &bad)[7], json!("<error>"));
    }

    #[test]
    fn daemon_set_row() {
        let ds = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "edge-mesh-agent", "namespace": "kubeedge",
                         "creationTimestamp": "2024-04-23T12:00:00Z"},
            "spec": {"selector": {"matchLabels": {"k8s-app": "edge-mesh-agent"}}, "template": template()},
            "status": {"desiredNumberScheduled": 4, "currentNumberScheduled": 4, "numberReady": 3,
                       "updatedNumberScheduled": 2, "numberAvailable": 3, "numberMisscheduled": 0}
        });
        assert_eq!(
            layout("apps", "DaemonSet"),
            [
                ("Name", "string", 0),
                ("Desired", "integer", 0),
                ("Current", "integer", 0),
                ("Ready", "integer", 0),
                ("Up-to-date", "integer", 0),
                ("Available", "integer", 0),
                ("Node Selector", "string", 0),
                ("Age", "string", 0),
                ("Containers", "string", 1),
                ("Images", "string", 1),
                ("Selector", "string", 1)
            ]
        );
        assert_eq!(
            row("apps", "DaemonSet", &ds),
            [
                json!("edge-mesh-agent"),
                json!(4),
                json!(4),
                json!(3),
                json!(2),
                json!(3),
                json!("kubernetes.io/arch=arm64,node-role.kubernetes.io/edge="),
                json!("8d"),
                json!("mapper,logs"),
                json!("kubeedge/modbus-mapper:v1.18.0,fluent/fluent-bit:3.0"),
                json!("k8s-app=edge-mesh-agent")
            ]
        );
        let no_node_selector = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "b"}]}}}});
        let cells = row("apps", "DaemonSet", &no_node_selector);
        assert_eq!((&cells[6], &cells[8], &cells[9]), (&json!("<none>"), &json!("a"), &json!("b")));
    }

    #[test]
    fn stateful_set_row() {
        let sts = json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "influxdb", "creationTimestamp": "2024-05-01T09:59:00Z"},
            "spec": {"replicas": 2, "serviceName": "influxdb", "selector": {"matchLabels": {"app": "influxdb"}},
                     "template": {"spec": {"containers": [{"name": "influxdb", "image": "influxdb:2.7"}]}}},
            "status": {"replicas": 2, "readyReplicas": 2, "currentReplicas": 2}
        });
        assert_eq!(
            layout("apps", "StatefulSet"),
            [
                ("Name", "string", 0),
                ("Ready", "string", 0),
                ("Age", "string", 0),
                ("Containers", "string", 1),
                ("Images", "string", 1)
            ]
        );
        assert_eq!(
            row("apps", "StatefulSet", &sts),
            [json!("influxdb"), json!("2/2"), json!("121m"), json!("influxdb"), json!("influxdb:2.7")]
        );
        assert_eq!(row("apps", "StatefulSet", &json!({"status": {"readyReplicas": 0}}))[1], json!("0/1"));
    }

    #[test]
    fn controller_revision_row() {
        let cr = json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "edge-mesh-agent-6c9f7b5d4", "creationTimestamp": "2024-05-01T11:59:30Z",
                         "ownerReferences": [
                             {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-the-controller"},
                             {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "edge-mesh-agent",
                              "controller": true, "blockOwnerDeletion": true}]},
            "data": {"spec": {"template": {}}},
            "revision": 3
        });
        assert_eq!(
            layout("apps", "ControllerRevision"),
            [("Name", "string", 0), ("Controller", "string", 0), ("Revision", "string", 0), ("Age", "string", 0)]
        );
        assert_eq!(
            row("apps", "ControllerRevision", &cr),
            [json!("edge-mesh-agent-6c9f7b5d4"), json!("daemonset.apps/edge-mesh-agent"), json!(3), json!("30s")]
        );
        let owned = |owner: Value| json!({"metadata": {"ownerReferences": [owner]}});
        let cases = [
            (json!({"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": true}), "pod/p"),
            (
                json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "controller": true}),
                "widget.example.com/w",
            ),
            (json!({"apiVersion": "/", "kind": "", "name": "n", "controller": true}), "n"),
            (json!({"name": "n", "controller": true}), "n"),
            (json!({"apiVersion": "a/b/c", "kind": "K", "name": "n", "controller": true}), "<invalid>"),
            (json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s", "controller": false}), "<none>"),
        ];
        for (owner, want) in cases {
            assert_eq!(row("apps", "ControllerRevision", &owned(owner.clone()))[1], json!(want), "{owner}");
        }
        assert_eq!(
            row("apps", "ControllerRevision", &json!({"metadata": {"name": "r"}})),
            [json!("r"), json!("<none>"), json!(0), json!("<unknown>")]
        );
    }

    fn job_object(conditions: Value) -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "firmware-rollout", "namespace": "default", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"completions": 5, "parallelism": 2,
                     "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "0d9c1e2a-4b7f-4a52-9d3c-1f2e3d4c5b6a"}},
                     "template": {"spec": {"containers": [{"name": "flash", "image": "busybox:1.36"}],
                                           "restartPolicy": "Never"}}},
            "status": {"startTime": "2024-05-01T11:00:05Z", "succeeded": 3, "active": 2, "conditions": conditions}
        })
    }

    #[test]
    fn job_row() {
        assert_eq!(
            layout("batch", "Job"),
            [
                ("Name", "string", 0),
                ("Status", "string", 0),
                ("Completions", "string", 0),
                ("Duration", "string", 0),
                ("Age", "string", 0),
                ("Containers", "string", 1),
                ("Images", "string", 1),
                ("Selector", "string", 1)
            ]
        );
        assert_eq!(
            row("batch", "Job", &job_object(json!([]))),
            [
                json!("firmware-rollout"),
                json!("Running"),
                json!("3/5"),
                json!("59m"),
                json!("60m"),
                json!("flash"),
                json!("busybox:1.36"),
                json!("batch.kubernetes.io/controller-uid=0d9c1e2a-4b7f-4a52-9d3c-1f2e3d4c5b6a")
            ]
        );
        let mut done = job_object(json!([{"type": "SuccessCriteriaMet", "status": "True"},
                                         {"type": "Complete", "status": "True"}]));
        done["status"]["completionTime"] = json!("2024-05-01T11:03:15Z");
        let cells = row("batch", "Job", &done);
        assert_eq!((&cells[1], &cells[3]), (&json!("Complete"), &json!("3m10s")));
    }

    #[test]
    fn job_status_precedence() {
        let status = |conditions: Value, deleting: bool| {
            let mut job = job_object(conditions);
            if deleting {
                job["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
            }
            row("batch", "Job", &job)[1].clone()
        };
        let cond = |kind: &str, status: &str| json!({"type": kind, "status": status});
        assert_eq!(status(json!([cond("Failed", "True")]), true), json!("Failed"));
        assert_eq!(status(json!([cond("Complete", "True")]), true), json!("Complete"));
        assert_eq!(status(json!([cond("Failed", "True"), cond("Complete", "True")]), false), json!("Complete"));
        assert_eq!(status(json!([cond("Suspended", "True")]), true), json!("Terminating"));
        assert_eq!(status(json!([cond("Suspended", "True")]), false), json!("Suspended"));
        assert_eq!(status(json!([cond("FailureTarget", "True")]), false), json!("FailureTarget"));
        assert_eq!(
            status(json!([cond("Suspended", "True"), cond("FailureTarget", "True")]), false),
            json!("Suspended")
        );
        assert_eq!(status(json!([cond("Suspended", "False")]), false), json!("Running"));
        // Only the first condition of a type counts.
        assert_eq!(status(json!([cond("Complete", "False"), cond("Complete", "True")]), false), json!("Running"));
        // SuccessCriteriaMet alone is still Running in Kubernetes 1.32.
        assert_eq!(status(json!([cond("SuccessCriteriaMet", "True")]), false), json!("Running"));
        assert_eq!(status(json!(null), false), json!("Running"));
    }

    #[test]
    fn job_completions_and_duration() {
        let job = |spec: Value, status: Value| json!({"spec": spec, "status": status});
        let cells = |spec: Value, status: Value| {
            let r = row("batch", "Job", &job(spec, status));
            (r[2].clone(), r[3].clone())
        };
        assert_eq!(cells(json!({}), json!({})), (json!("0/1"), json!("")));
        assert_eq!(cells(json!({"parallelism": 1}), json!({"succeeded": 1})), (json!("1/1"), json!("")));
        assert_eq!(cells(json!({"parallelism": 4}), json!({"succeeded": 2})), (json!("2/1 of 4"), json!("")));
        assert_eq!(cells(json!({"completions": 0, "parallelism": 4}), json!({})), (json!("0/0"), json!("")));
        // Running: now minus start. Completed: completion minus start, whatever now is.
        assert_eq!(cells(json!({}), json!({"startTime": "2024-05-01T11:59:15Z"})).1, json!("45s"));
        assert_eq!(
            cells(json!({}), json!({"startTime": "2024-04-01T00:00:00Z", "completionTime": "2024-04-01T05:30:00Z"})).1,
            json!("5h30m")
        );
        // A completion time without a start prints nothing; one before the start is invalid.
        assert_eq!(cells(json!({}), json!({"completionTime": "2024-04-01T05:30:00Z"})).1, json!(""));
        assert_eq!(
            cells(json!({}), json!({"startTime": "2024-04-01T05:30:00Z", "completionTime": "2024-04-01T05:00:00Z"})).1,
            json!("<invalid>")
        );
    }

    #[test]
    fn pod_disruption_budget_row() {
        assert_eq!(
            layout("policy", "PodDisruptionBudget"),
            [
                ("Name", "string", 0),
                ("Min Available", "string", 0),
                ("Max Unavailable", "string", 0),
                ("Allowed Disruptions", "integer", 0),
                ("Age", "string", 0)
            ]
        );
        let pdb = |spec: Value, status: Value| json!({"metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:00:00Z"}, "spec": spec, "status": status});
        assert_eq!(
            row("policy", "PodDisruptionBudget", &pdb(json!({"minAvailable": 2}), json!({"disruptionsAllowed": 1}))),
            [json!("web"), json!("2"), json!("N/A"), json!(1), json!("60m")]
        );
        assert_eq!(
            row("policy", "PodDisruptionBudget", &pdb(json!({"maxUnavailable": "25%"}), json!({}))),
            [json!("web"), json!("N/A"), json!("25%"), json!(0), json!("60m")]
        );
    }

    fn cron_job_object() -> Value {
        json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "telemetry-export", "namespace": "kubeedge", "creationTimestamp": "2024-04-01T12:00:00Z"},
            "spec": {"schedule": "*/15 * * * *", "timeZone": "Europe/Berlin", "suspend": false,
                     "concurrencyPolicy": "Forbid",
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "containers": [{"name": "export", "image": "ghcr.io/example/export:2.1"},
                                        {"name": "upload", "image": "amazon/aws-cli:2.15.0"}],
                         "restartPolicy": "OnFailure"}}}}},
            "status": {"active": [{"kind": "Job", "namespace": "kubeedge", "name": "telemetry-export-28575345"}],
                       "lastScheduleTime": "2024-05-01T11:45:00Z", "lastSuccessfulTime": "2024-05-01T11:31:02Z"}
        })
    }

    #[test]
    fn cron_job_row() {
        assert_eq!(
            layout("batch", "CronJob"),
            [
                ("Name", "string", 0),
                ("Schedule", "string", 0),
                ("Timezone", "string", 0),
                ("Suspend", "boolean", 0),
                ("Active", "integer", 0),
                ("Last Schedule", "string", 0),
                ("Age", "string", 0),
                ("Containers", "string", 1),
                ("Images", "string", 1),
                ("Selector", "string", 1)
            ]
        );
        assert_eq!(
            row("batch", "CronJob", &cron_job_object()),
            [
                json!("telemetry-export"),
                json!("*/15 * * * *"),
                json!("Europe/Berlin"),
                json!("False"),
                json!(1),
                json!("15m"),
                json!("30d"),
                json!("export,upload"),
                json!("ghcr.io/example/export:2.1,amazon/aws-cli:2.15.0"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn cron_job_unset_fields() {
        let mut cj = cron_job_object();
        cj["spec"]["suspend"] = json!(true);
        cj["spec"]["timeZone"] = json!("");
        cj["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"app": "export"}});
        cj["status"] = json!({"lastScheduleTime": "0001-01-01T00:00:00Z"});
        let cells = row("batch", "CronJob", &cj);
        assert_eq!(
            (&cells[2], &cells[3], &cells[4], &cells[5], &cells[9]),
            (&json!(""), &json!("True"), &json!(0), &json!("<unknown>"), &json!("app=export"))
        );
        let bare = json!({"metadata": {"name": "c"}, "spec": {"schedule": "@hourly"}});
        assert_eq!(
            row("batch", "CronJob", &bare),
            [
                json!("c"),
                json!("@hourly"),
                json!("<none>"),
                json!("False"),
                json!(0),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn malformed_objects_print_as_absent_fields() {
        let obj = malformed();
        assert_eq!(
            row("apps", "Deployment", &obj),
            [json!(""), json!("0/1"), json!(0), json!(0), json!("<unknown>"), json!(""), json!(""), json!("")]
        );
        assert_eq!(
            row("apps", "ReplicaSet", &obj),
            [json!(""), json!(1), json!(0), json!(0), json!("<unknown>"), json!(""), json!(""), json!("<none>")]
        );
        assert_eq!(
            row("apps", "DaemonSet", &obj),
            [
                json!(""),
                json!(0),
                json!(0),
                json!(0),
                json!(0),
                json!(0),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
        assert_eq!(
            row("apps", "StatefulSet", &obj),
            [json!(""), json!("0/1"), json!("<unknown>"), json!(""), json!("")]
        );
        assert_eq!(row("apps", "ControllerRevision", &obj), [json!(""), json!("<none>"), json!(0), json!("<unknown>")]);
        assert_eq!(
            row("batch", "Job", &obj),
            [
                json!(""),
                json!("Running"),
                json!("0/1"),
                json!(""),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
        assert_eq!(
            row("batch", "CronJob", &obj),
            [
                json!(""),
                json!(""),
                json!("<none>"),
                json!("False"),
                json!(0),
                json!("<none>"),
                json!("<unknown>"),
                json!(""),
                json!(""),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn non_object_containers_are_skipped() {
        let deploy = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "image": "img-a"}, null, "b", {"name": "c"}, {"image": "img-d"}]}}}});
        let cells = row("apps", "Deployment", &deploy);
        assert_eq!((&cells[5], &cells[6]), (&json!("a,c,"), &json!("img-a,,img-d")));
    }
}
