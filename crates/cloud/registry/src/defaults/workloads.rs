//! Defaults of the workloads, from Kubernetes 1.32's `pkg/apis/apps/v1/defaults.go` and
//! `pkg/apis/batch/v1/defaults.go`, plus the generated defaulters' pass over each pod template
//! (`SetDefaults_PodSpec` and below, not the Pod-only defaults), and what the Job and StatefulSet
//! strategies change before validation (`PrepareForCreate`, `PrepareForUpdate`).

use serde_json::{Map, Value, json};

use super::{object_at, object_entry, objects_in, pod_spec, set_if_absent, set_if_empty, str_of};

/// The Job label naming the Job's uid, which the generated selector selects.
pub(crate) const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// The Job label naming the Job.
pub(crate) const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The unprefixed forms Kubernetes still sets (and checks) beside the prefixed ones.
pub(crate) const LEGACY_CONTROLLER_UID_LABEL: &str = "controller-uid";
/// The unprefixed job-name label.
pub(crate) const LEGACY_JOB_NAME_LABEL: &str = "job-name";

/// A pod template's spec gets what `SetDefaults_PodSpec` gives (the template and its spec exist once
/// decoded: Go's struct fields are never nil).
fn pod_template(spec: &mut Map<String, Value>) {
    if let Some(template) = object_entry(spec, "template")
        && let Some(pod) = object_entry(template, "spec")
    {
        pod_spec(pod, false);
    }
}

/// `SetDefaults_Deployment`.
pub(super) fn deployment(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    set_if_absent(spec, "replicas", json!(1));
    if let Some(strategy) = object_entry(spec, "strategy") {
        set_if_empty(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = object_entry(strategy, "rollingUpdate")
        {
            set_if_absent(rolling, "maxUnavailable", json!("25%"));
            set_if_absent(rolling, "maxSurge", json!("25%"));
        }
    }
    set_if_absent(spec, "revisionHistoryLimit", json!(10));
    set_if_absent(spec, "progressDeadlineSeconds", json!(600));
    pod_template(spec);
}

/// `SetDefaults_ReplicaSet`.
pub(super) fn replica_set(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    set_if_absent(spec, "replicas", json!(1));
    pod_template(spec);
}

/// `SetDefaults_DaemonSet`.
pub(super) fn daemon_set(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    if let Some(strategy) = object_entry(spec, "updateStrategy") {
        set_if_empty(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = object_entry(strategy, "rollingUpdate")
        {
            set_if_absent(rolling, "maxUnavailable", json!(1));
            set_if_absent(rolling, "maxSurge", json!(0));
        }
    }
    set_if_absent(spec, "revisionHistoryLimit", json!(10));
    pod_template(spec);
}

/// `SetDefaults_StatefulSet` (StatefulSetAutoDeletePVC is on in 1.32: the retention policy is defaulted).
pub(super) fn stateful_set(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    set_if_empty(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = object_entry(spec, "updateStrategy") {
        if str_of(strategy, "type").is_empty() {
            strategy.insert("type".into(), json!("RollingUpdate"));
            set_if_absent(strategy, "rollingUpdate", json!({}));
        }
        if str_of(strategy, "type") == "RollingUpdate"
            && let Some(rolling) = object_at(strategy, "rollingUpdate")
        {
            set_if_absent(rolling, "partition", json!(0));
        }
    }
    if let Some(policy) = object_entry(spec, "persistentVolumeClaimRetentionPolicy") {
        set_if_empty(policy, "whenDeleted", "Retain");
        set_if_empty(policy, "whenScaled", "Retain");
    }
    set_if_absent(spec, "replicas", json!(1));
    set_if_absent(spec, "revisionHistoryLimit", json!(10));
    pod_template(spec);
}

/// The job spec defaults of `SetDefaults_Job` (JobPodReplacementPolicy is beta, on, in 1.32), and the
/// nested `SetDefaults_PodFailurePolicyOnPodConditionsPattern`.
fn job_spec(spec: &mut Map<String, Value>) {
    let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    set_if_absent(spec, "parallelism", json!(1));
    let backoff = if unset(spec, "backoffLimitPerIndex") { json!(6) } else { json!(i32::MAX) };
    set_if_absent(spec, "backoffLimit", backoff);
    set_if_absent(spec, "completionMode", json!("NonIndexed"));
    set_if_absent(spec, "suspend", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") { "TerminatingOrFailed" } else { "Failed" };
    set_if_absent(spec, "podReplacementPolicy", json!(replacement));
    set_if_absent(spec, "manualSelector", json!(false));
    on_pod_conditions_status(spec);
}

/// `SetDefaults_PodFailurePolicyOnPodConditionsPattern`: a pattern's status defaults to "True".
fn on_pod_conditions_status(spec: &mut Map<String, Value>) {
    if let Some(policy) = object_at(spec, "podFailurePolicy") {
        for rule in objects_in(policy, "rules") {
            for pattern in objects_in(rule, "onPodConditions") {
                set_if_empty(pattern, "status", "True");
            }
        }
    }
}

/// A Job's labels are its template's when it has none (`SetDefaults_Job`; Go's nil map vs empty map:
/// template labels that are present, even empty, count).
fn job_labels(root: &mut Map<String, Value>) {
    let template_labels =
        root.get("spec").and_then(|s| s.get("template")).and_then(|t| t.get("metadata")).and_then(|m| m.get("labels"));
    let Some(labels) = template_labels.filter(|l| l.is_object()).cloned() else { return };
    if let Some(meta) = object_entry(root, "metadata")
        && meta.get("labels").and_then(Value::as_object).is_none_or(Map::is_empty)
        && meta.get("labels").is_none_or(|l| l.is_null() || l.is_object())
    {
        meta.insert("labels".into(), labels);
    }
}

/// `SetDefaults_Job`.
pub(super) fn job(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    job_spec(spec);
    pod_template(spec);
    job_labels(root);
}

/// `SetDefaults_CronJob`. The job template's spec gets no `SetDefaults_Job` (that runs on Jobs only),
/// only its pod template's defaults and the pod failure policy's.
pub(super) fn cron_job(root: &mut Map<String, Value>) {
    let Some(spec) = object_entry(root, "spec") else { return };
    set_if_empty(spec, "concurrencyPolicy", "Allow");
    set_if_absent(spec, "suspend", json!(false));
    set_if_absent(spec, "successfulJobsHistoryLimit", json!(3));
    set_if_absent(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(template) = object_entry(spec, "jobTemplate")
        && let Some(job) = object_entry(template, "spec")
    {
        on_pod_conditions_status(job);
        pod_template(job);
    }
}

/// What a kind's strategy does to a new object before validation (`PrepareForCreate`), once the object
/// has its uid ([`crate::admit::create`] assigns it first). For a Job without `spec.manualSelector: true`:
/// the selector `batch.kubernetes.io/controller-uid=<uid>` and the template labels
/// `batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name`, `controller-uid` and `job-name`
/// (labels the user already set are kept: validation then checks them). A StatefulSet loses
/// `spec.updateStrategy.rollingUpdate.maxUnavailable` (MaxUnavailableStatefulSet is alpha, off, in 1.32).
/// A CustomResourceDefinition starts with apiextensions' initial status: empty accepted names and the
/// storage version stored, so a client that reads it before the naming controller has run sees a status.
pub fn prepare_for_create(group: &str, kind: &str, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else { return };
    match (group, kind) {
        ("batch", "Job") => {
            let manual = root.get("spec").and_then(|s| s.get("manualSelector")).and_then(Value::as_bool);
            if manual != Some(true) {
                generate_selector(root);
                // Kubernetes defaults the Job again when it reads it back from storage: a Job without labels
                // shows its template's, the generated ones included.
                job_labels(root);
            }
        }
        ("apps", "StatefulSet") => drop_max_unavailable(root),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => initial_crd_status(root),
        _ => {}
    }
}

/// apiextensions' `PrepareForCreate`: `status` is `acceptedNames: {plural: "", kind: ""}` and
/// `storedVersions: [the first version marked storage]`.
fn initial_crd_status(root: &mut Map<String, Value>) {
    let storage = root
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().find(|v| v.get("storage") == Some(&Value::Bool(true))))
        .and_then(|v| v.get("name"))
        .cloned();
    root.insert(
        "status".into(),
        json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": storage.into_iter().collect::<Vec<_>>()}),
    );
}

/// What a kind's strategy does to a changed object before validation (`PrepareForUpdate`): a StatefulSet
/// may keep `maxUnavailable` only if the stored one had it.
pub(crate) fn prepare_for_update(group: &str, kind: &str, new: &mut Value, old: &Value) {
    if (group, kind) != ("apps", "StatefulSet") {
        return;
    }
    let had = old.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable").is_some_and(|v| !v.is_null());
    if !had && let Some(root) = new.as_object_mut() {
        drop_max_unavailable(root);
    }
}

fn drop_max_unavailable(root: &mut Map<String, Value>) {
    if let Some(rolling) =
        object_at(root, "spec").and_then(|s| object_at(s, "updateStrategy")).and_then(|u| object_at(u, "rollingUpdate"))
    {
        rolling.remove("maxUnavailable");
    }
}

/// The Job strategy's `generateSelector`.
fn generate_selector(root: &mut Map<String, Value>) {
    let meta = root.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("").to_string();
    let uid = meta.and_then(|m| m.get("uid")).and_then(Value::as_str).unwrap_or("").to_string();
    let Some(spec) = object_entry(root, "spec") else { return };
    if let Some(template) = object_entry(spec, "template")
        && let Some(template_meta) = object_entry(template, "metadata")
        && let Some(labels) = object_entry(template_meta, "labels")
    {
        for (label, value) in [
            (LEGACY_JOB_NAME_LABEL, &name),
            (JOB_NAME_LABEL, &name),
            (LEGACY_CONTROLLER_UID_LABEL, &uid),
            (CONTROLLER_UID_LABEL, &uid),
        ] {
            labels.entry(label.to_string()).or_insert_with(|| json!(value));
        }
    }
    if let Some(selector) = object_entry(spec, "selector")
        && let Some(match_labels) = object_entry(selector, "matchLabels")
    {
        match_labels.entry(CONTROLLER_UID_LABEL.to_string()).or_insert_with(|| json!(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::super::apply_defaults;
    use super::*;

    fn defaulted(group: &str, kind: &str, obj: Value) -> Value {
        let mut o = obj;
        apply_defaults(group, kind, &mut o);
        o
    }

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}})
    }

    /// What a template's pod spec holds once defaulted (no Pod-only defaults).
    fn defaulted_pod_spec() -> Value {
        json!({
            "containers": [{"name": "c", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                            "resources": {}}],
            "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
            "terminationGracePeriodSeconds": 30, "schedulerName": "default-scheduler"
        })
    }

    #[test]
    fn deployment_defaults() {
        let d = defaulted("apps", "Deployment", json!({"spec": {"template": template()}}));
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(d["spec"]["template"]["spec"], defaulted_pod_spec());
        assert!(d.get("status").is_none(), "a template has no status, nor does the Deployment get one");
    }

    #[test]
    fn deployment_keeps_what_is_set() {
        let d = defaulted(
            "apps",
            "Deployment",
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "revisionHistoryLimit": 0,
                            "progressDeadlineSeconds": 30, "template": template()}}),
        );
        assert_eq!(d["spec"]["replicas"], 0);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}), "Recreate gets no rollingUpdate");
        assert_eq!(d["spec"]["revisionHistoryLimit"], 0);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 30);
        let partial = defaulted(
            "apps",
            "Deployment",
            json!({"spec": {"strategy": {"rollingUpdate": {"maxSurge": 0}}, "template": template()}}),
        );
        assert_eq!(partial["spec"]["strategy"]["rollingUpdate"], json!({"maxSurge": 0, "maxUnavailable": "25%"}));
    }

    #[test]
    fn template_gets_pod_spec_defaults_but_not_pod_only_ones() {
        let mut t = template();
        t["spec"]["hostNetwork"] = json!(true);
        t["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}]);
        t["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
        let d = defaulted("apps", "ReplicaSet", json!({"spec": {"template": t}}));
        let spec = &d["spec"]["template"]["spec"];
        assert_eq!(spec["containers"][0]["ports"], json!([{"containerPort": 80, "protocol": "TCP"}]), "no hostPort");
        assert_eq!(spec["containers"][0]["resources"], json!({"limits": {"cpu": "1"}}), "no requests from limits");
        for pod_only in ["enableServiceLinks", "priority", "preemptionPolicy"] {
            assert!(spec.get(pod_only).is_none(), "{pod_only}");
        }
        assert_eq!(d["spec"]["replicas"], 1);
        let empty = defaulted("apps", "ReplicaSet", json!({"spec": {}}));
        assert_eq!(empty["spec"]["template"]["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn daemon_set_defaults() {
        let d = defaulted("apps", "DaemonSet", json!({"spec": {"template": template()}}));
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert!(d["spec"].get("replicas").is_none());
        let on_delete = defaulted("apps", "DaemonSet", json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}));
        assert_eq!(on_delete["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    }

    #[test]
    fn stateful_set_defaults() {
        let d = defaulted("apps", "StatefulSet", json!({"spec": {"template": template()}}));
        assert_eq!(d["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(d["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
        assert_eq!(
            d["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        // A RollingUpdate type given without rollingUpdate gets none (only an empty type does).
        let typed = defaulted("apps", "StatefulSet", json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}}}));
        assert_eq!(typed["spec"]["updateStrategy"], json!({"type": "RollingUpdate"}));
        let kept = defaulted(
            "apps",
            "StatefulSet",
            json!({"spec": {"podManagementPolicy": "Parallel", "updateStrategy": {"rollingUpdate": {"partition": 2}}}}),
        );
        assert_eq!(kept["spec"]["podManagementPolicy"], "Parallel");
        assert_eq!(kept["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}));
    }

    #[test]
    fn job_defaults() {
        let d = defaulted("batch", "Job", json!({"metadata": {"name": "pi"}, "spec": {"template": template()}}));
        let spec = &d["spec"];
        assert_eq!(
            (&spec["completions"], &spec["parallelism"], &spec["backoffLimit"]),
            (&json!(1), &json!(1), &json!(6))
        );
        assert_eq!(spec["completionMode"], "NonIndexed");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(spec["manualSelector"], false);
        assert_eq!(d["metadata"]["labels"], json!({"app": "web"}), "a Job without labels takes its template's");
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always", "left for validation to refuse");

        let parallel = defaulted("batch", "Job", json!({"spec": {"parallelism": 3, "template": template()}}));
        assert!(parallel["spec"].get("completions").is_none(), "only both unset default completions");
        let completions = defaulted("batch", "Job", json!({"spec": {"completions": 5}}));
        assert_eq!(completions["spec"]["parallelism"], 1);
        let per_index = defaulted("batch", "Job", json!({"spec": {"backoffLimitPerIndex": 1}}));
        assert_eq!(per_index["spec"]["backoffLimit"], i32::MAX);
        let policy = defaulted(
            "batch",
            "Job",
            json!({"spec": {"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}),
        );
        assert_eq!(policy["spec"]["podReplacementPolicy"], "Failed");
        assert_eq!(policy["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"], "True");
        let labelled =
            defaulted("batch", "Job", json!({"metadata": {"labels": {"team": "a"}}, "spec": {"template": template()}}));
        assert_eq!(labelled["metadata"]["labels"], json!({"team": "a"}));
    }

    #[test]
    fn cron_job_defaults() {
        let d = defaulted(
            "batch",
            "CronJob",
            json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template()}}}}),
        );
        let spec = &d["spec"];
        assert_eq!(spec["concurrencyPolicy"], "Allow");
        assert_eq!(spec["suspend"], false);
        assert_eq!(spec["successfulJobsHistoryLimit"], 3);
        assert_eq!(spec["failedJobsHistoryLimit"], 1);
        let job = &spec["jobTemplate"]["spec"];
        assert_eq!(job["template"]["spec"], defaulted_pod_spec());
        for not_defaulted in ["parallelism", "completions", "backoffLimit", "suspend", "manualSelector"] {
            assert!(job.get(not_defaulted).is_none(), "a job template gets no Job defaults: {not_defaulted}");
        }
    }

    #[test]
    fn job_selector_is_generated_on_create() {
        let mut job = defaulted(
            "batch",
            "Job",
            json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {}}}}),
        );
        prepare_for_create("batch", "Job", &mut job);
        let generated = json!({"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi",
                               "controller-uid": "u-1", "job-name": "pi"});
        assert_eq!(job["spec"]["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}));
        assert_eq!(job["spec"]["template"]["metadata"]["labels"], generated);
        assert_eq!(job["metadata"]["labels"], generated, "read back, a Job without labels has its template's");

        let mut own = defaulted(
            "batch",
            "Job",
            json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"metadata": {"labels": {"job-name": "mine"}}}}}),
        );
        prepare_for_create("batch", "Job", &mut own);
        assert_eq!(own["spec"]["template"]["metadata"]["labels"]["job-name"], "mine", "kept, for validation to refuse");
        assert_eq!(own["metadata"]["labels"], json!({"job-name": "mine"}), "labels defaulted before generation stay");

        let mut manual = defaulted(
            "batch",
            "Job",
            json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"manualSelector": true, "template": {}}}),
        );
        prepare_for_create("batch", "Job", &mut manual);
        assert!(manual["spec"].get("selector").is_none());
    }

    #[test]
    fn a_new_definition_has_the_initial_status() {
        let mut crd = json!({"spec": {"versions": [{"name": "v1beta1", "storage": false}, {"name": "v1", "storage": true}]},
                             "status": {"acceptedNames": {"kind": "Forged"}, "storedVersions": ["v0"]}});
        prepare_for_create("apiextensions.k8s.io", "CustomResourceDefinition", &mut crd);
        assert_eq!(crd["status"], json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]}));
    }

    #[test]
    fn stateful_set_max_unavailable_is_dropped() {
        let mut sts = json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1, "maxUnavailable": 2}}}});
        prepare_for_create("apps", "StatefulSet", &mut sts);
        assert_eq!(sts["spec"]["updateStrategy"]["rollingUpdate"], json!({"partition": 1}));
        let old = json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}});
        let mut kept = old.clone();
        prepare_for_update("apps", "StatefulSet", &mut kept, &old);
        assert_eq!(kept, old, "kept when the stored object has it");
        let mut new = old.clone();
        prepare_for_update("apps", "StatefulSet", &mut new, &json!({}));
        assert_eq!(new["spec"]["updateStrategy"]["rollingUpdate"], json!({}));
    }

    #[test]
    fn odd_shapes_are_left_alone() {
        for v in [json!(null), json!(1), json!({"spec": 1}), json!({"spec": {"template": 1, "strategy": "x"}})] {
            for (g, k) in [
                ("apps", "Deployment"),
                ("apps", "ReplicaSet"),
                ("apps", "DaemonSet"),
                ("apps", "StatefulSet"),
                ("batch", "Job"),
                ("batch", "CronJob"),
            ] {
                let mut o = v.clone();
                apply_defaults(g, k, &mut o);
                prepare_for_create(g, k, &mut o);
                prepare_for_update(g, k, &mut o, &v);
            }
        }
    }
}
