//! The Events the controllers record, with Kubernetes' components, reasons
//! and messages. They follow from the writes: before a write the executor
//! asks [`intent`] what it would say about the controller's object, and after
//! it records the success or the failure. So plans stay plain writes, and an
//! Event is recorded only for what really happened (a scale that conflicted
//! and is decided again says nothing).

use std::borrow::Cow;

use edgehive_events::{Note, ObjectRef};
use edgehive_store::resources::{
    CRON_JOBS, DAEMON_SETS, DEPLOYMENTS, JOBS, POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS, ResourceDef, STATEFUL_SETS,
};
use serde_json::Value;

use crate::plan::Action;
use crate::run::Task;
use crate::world::{Stored, World, str_at};

/// The Kubernetes component that records a controller's Events.
pub(crate) fn component(task: &Task) -> &'static str {
    match task {
        Task::ReplicaSet(_) => "replicaset-controller",
        Task::Deployment(_) => "deployment-controller",
        Task::DaemonSet(_) => "daemonset-controller",
        Task::StatefulSet(_) => "statefulset-controller",
        Task::Job(_) => "job-controller",
        Task::CronJob(_) => "cronjob-controller",
        Task::Disruption(_) => "controllermanager",
        Task::Collect(_) => "garbage-collector-controller",
        Task::Endpoints(_) => "endpoint-controller",
        Task::RootCa(_) => "root-ca-cert-publisher",
    }
}

/// The controller's object: its resource, namespace and name.
fn subject(task: &Task) -> Option<(&'static ResourceDef, &str, &str)> {
    let (res, (ns, name)) = match task {
        Task::ReplicaSet(k) => (&REPLICA_SETS, k),
        Task::Deployment(k) => (&DEPLOYMENTS, k),
        Task::DaemonSet(k) => (&DAEMON_SETS, k),
        Task::StatefulSet(k) => (&STATEFUL_SETS, k),
        Task::Job(k) => (&JOBS, k),
        Task::CronJob(k) => (&CRON_JOBS, k),
        Task::Disruption(k) => (&POD_DISRUPTION_BUDGETS, k),
        Task::Collect(_) | Task::Endpoints(_) | Task::RootCa(_) => return None,
    };
    Some((res, ns, name))
}

/// What a write would say.
#[derive(Debug, Clone, PartialEq)]
enum Says {
    /// A pod created (`statefulset`: the set's name, for its wording).
    CreatePod {
        statefulset: Option<String>,
        name: String,
    },
    DeletePod {
        statefulset: Option<String>,
        name: String,
    },
    CreateJob,
    DeleteJob {
        name: String,
    },
    /// A Deployment's ReplicaSet resized.
    Scale {
        rs: String,
        from: i64,
        to: i64,
    },
    /// Notes that hold once the write is in (a Job finished, a CronJob saw
    /// its Jobs finish).
    Notes(Vec<(bool, Cow<'static, str>, String)>),
}

/// What a write would say about the controller's object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Intent {
    involved: ObjectRef,
    says: Says,
}

/// The Event a write of `task` would cause, if any.
pub(crate) fn intent(world: &World, task: &Task, a: &Action) -> Option<Intent> {
    intent_about(world, task, &subject_of(world, task)?, a)
}

/// The controller's object of `task`, parsed (once for a batch of writes).
pub(crate) fn subject_of(world: &World, task: &Task) -> Option<Stored> {
    let (res, ns, name) = subject(task)?;
    world.objects(res)?.get(ns, name)
}

/// [`intent`] with the controller's object `obj` at hand.
pub(crate) fn intent_about(world: &World, task: &Task, obj: &Stored, a: &Action) -> Option<Intent> {
    let (res, _, name) = subject(task)?;
    let involved = ObjectRef::of(res, &obj.value);
    let sts = matches!(task, Task::StatefulSet(_)).then(|| name.to_string());
    let says = match a {
        Action::Create { res: r, object } if std::ptr::eq(*r, &PODS) => {
            Says::CreatePod { statefulset: sts, name: str_at(object, "/metadata/name").to_string() }
        }
        Action::Delete { res: r, name, .. } if std::ptr::eq(*r, &PODS) => {
            Says::DeletePod { statefulset: sts, name: name.clone() }
        }
        Action::Create { res: r, .. } if std::ptr::eq(*r, &JOBS) && matches!(task, Task::CronJob(_)) => Says::CreateJob,
        Action::Delete { res: r, name, .. } if std::ptr::eq(*r, &JOBS) && matches!(task, Task::CronJob(_)) => {
            Says::DeleteJob { name: name.clone() }
        }
        Action::Create { res: r, object } if std::ptr::eq(*r, &REPLICA_SETS) && matches!(task, Task::Deployment(_)) => {
            let to = object.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
            if to == 0 {
                return None;
            }
            Says::Scale { rs: str_at(object, "/metadata/name").to_string(), from: 0, to }
        }
        Action::Patch { res: r, namespace, name, patch, .. }
            if std::ptr::eq(*r, &REPLICA_SETS) && matches!(task, Task::Deployment(_)) =>
        {
            let to = patch.pointer("/spec/replicas").and_then(Value::as_i64)?;
            let from =
                world.replica_sets.get(namespace, name)?.value.pointer("/spec/replicas").and_then(Value::as_i64)?;
            if from == to {
                return None;
            }
            Says::Scale { rs: name.clone(), from, to }
        }
        Action::Patch { res: r, patch, .. } if std::ptr::eq(*r, &JOBS) && matches!(task, Task::Job(_)) => {
            Says::Notes(job_finished(&obj.value, patch)?)
        }
        Action::Patch { res: r, patch, .. } if std::ptr::eq(*r, &CRON_JOBS) => {
            Says::Notes(jobs_seen_finished(world, &obj.value, patch)?)
        }
        _ => return None,
    };
    Some(Intent { involved, says })
}

fn true_condition<'a>(conditions: Option<&'a Value>, ty: &str) -> Option<&'a Value> {
    conditions?.as_array()?.iter().find(|c| c["type"] == ty && c["status"] == "True")
}

/// A Job's status patch that makes it Complete or Failed: `Completed`, or
/// the failure's own reason and message (`BackoffLimitExceeded`, ...).
fn job_finished(job: &Value, patch: &Value) -> Option<Vec<(bool, Cow<'static, str>, String)>> {
    let before = job.pointer("/status/conditions");
    let after = patch.pointer("/status/conditions")?;
    if true_condition(Some(after), "Complete").is_some() && true_condition(before, "Complete").is_none() {
        return Some(vec![(false, "Completed".into(), "Job completed".to_string())]);
    }
    let failed = true_condition(Some(after), "Failed")?;
    if true_condition(before, "Failed").is_some() {
        return None;
    }
    // The condition's own reason and message, as Kubernetes' Job controller says them.
    let reason = failed["reason"].as_str().filter(|r| !r.is_empty()).unwrap_or("JobFailed").to_string();
    Some(vec![(true, reason.into(), str_at(failed, "/message").to_string())])
}

/// A CronJob's status patch that drops finished Jobs from `active`:
/// `SawCompletedJob` for each.
fn jobs_seen_finished(world: &World, cj: &Value, patch: &Value) -> Option<Vec<(bool, Cow<'static, str>, String)>> {
    let names = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().map(|r| str_at(r, "/name").to_string()).collect())
            .unwrap_or_default()
    };
    // Absent: `active` unchanged; `null` or a list: what remains active.
    let after = names(Some(patch.pointer("/status/active")?));
    let ns = str_at(cj, "/metadata/namespace");
    let notes: Vec<_> = names(cj.pointer("/status/active"))
        .into_iter()
        .filter(|n| !after.contains(n))
        .filter_map(|n| {
            let job = world.jobs.get(ns, &n)?;
            let conditions = job.value.pointer("/status/conditions");
            let ty = ["Complete", "Failed"].into_iter().find(|t| true_condition(conditions, t).is_some())?;
            Some((false, "SawCompletedJob".into(), format!("Saw completed job: {n}, condition: {ty}")))
        })
        .collect();
    (!notes.is_empty()).then_some(notes)
}

impl Intent {
    /// The notes once the write is done: `Ok(name)` with the name written
    /// (a `generateName` resolved), or `Err(error)`.
    pub(crate) fn notes(self, result: Result<&str, &str>) -> Vec<Note> {
        let o = self.involved;
        let note = |warning: bool, reason: Cow<'static, str>, message: String| {
            if warning { Note::warning(o.clone(), reason, message) } else { Note::normal(o.clone(), reason, message) }
        };
        match (self.says, result) {
            (Says::CreatePod { statefulset: Some(set), name }, Ok(_)) => {
                vec![note(
                    false,
                    "SuccessfulCreate".into(),
                    format!("create Pod {name} in StatefulSet {set} successful"),
                )]
            }
            (Says::CreatePod { statefulset: Some(set), name }, Err(e)) => {
                vec![note(
                    true,
                    "FailedCreate".into(),
                    format!("create Pod {name} in StatefulSet {set} failed error: {e}"),
                )]
            }
            (Says::CreatePod { statefulset: None, .. }, Ok(name)) => {
                vec![note(false, "SuccessfulCreate".into(), format!("Created pod: {name}"))]
            }
            (Says::CreatePod { statefulset: None, .. }, Err(e)) => {
                vec![note(true, "FailedCreate".into(), format!("Error creating: {e}"))]
            }
            (Says::DeletePod { statefulset: Some(set), name }, Ok(_)) => {
                vec![note(
                    false,
                    "SuccessfulDelete".into(),
                    format!("delete Pod {name} in StatefulSet {set} successful"),
                )]
            }
            (Says::DeletePod { statefulset: Some(set), name }, Err(e)) => {
                vec![note(
                    true,
                    "FailedDelete".into(),
                    format!("delete Pod {name} in StatefulSet {set} failed error: {e}"),
                )]
            }
            (Says::DeletePod { statefulset: None, name }, Ok(_)) => {
                vec![note(false, "SuccessfulDelete".into(), format!("Deleted pod: {name}"))]
            }
            (Says::DeletePod { statefulset: None, .. }, Err(e)) => {
                vec![note(true, "FailedDelete".into(), format!("Error deleting: {e}"))]
            }
            (Says::CreateJob, Ok(name)) => vec![note(false, "SuccessfulCreate".into(), format!("Created job {name}"))],
            (Says::CreateJob, Err(e)) => vec![note(true, "FailedCreate".into(), format!("Error creating job: {e}"))],
            (Says::DeleteJob { name }, Ok(_)) => {
                vec![note(false, "SuccessfulDelete".into(), format!("Deleted job {name}"))]
            }
            (Says::DeleteJob { .. }, Err(e)) => vec![note(true, "FailedDelete".into(), format!("Deleted job: {e}"))],
            (Says::Scale { rs, from, to }, Ok(_)) => {
                let way = if to > from { "up" } else { "down" };
                vec![note(
                    false,
                    "ScalingReplicaSet".into(),
                    format!("Scaled {way} replica set {rs} from {from} to {to}"),
                )]
            }
            (Says::Notes(notes), Ok(_)) => notes.into_iter().map(|(w, r, m)| note(w, r, m)).collect(),
            (Says::Scale { .. } | Says::Notes(_), Err(_)) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use edgehive_store::Object;
    use serde_json::json;

    use super::*;

    fn stored(res: &'static ResourceDef, v: Value) -> Object {
        let key = res.key(str_at(&v, "/metadata/namespace"), str_at(&v, "/metadata/name"));
        Object::from_stored(res, key, 7, edgehive_store::encode_for_storage(&v).unwrap())
    }

    fn meta(name: &str, uid: &str) -> Value {
        json!({"name": name, "namespace": "default", "uid": uid})
    }

    #[test]
    fn a_deployment_says_how_it_scaled_its_replica_sets() {
        let mut w = World::default();
        w.upsert(&stored(&DEPLOYMENTS, json!({"metadata": meta("web", "d1"), "spec": {"replicas": 3}})));
        w.upsert(&stored(&REPLICA_SETS, json!({"metadata": meta("web-abc", "r1"), "spec": {"replicas": 1}})));
        let task = Task::Deployment(("default".into(), "web".into()));
        let create = Action::Create {
            res: &REPLICA_SETS,
            object: json!({"metadata": {"name": "web-def", "namespace": "default"}, "spec": {"replicas": 1}}),
        };
        let notes = intent(&w, &task, &create).unwrap().notes(Ok("web-def"));
        assert_eq!(notes[0].reason, "ScalingReplicaSet");
        assert_eq!(notes[0].message, "Scaled up replica set web-def from 0 to 1");
        assert_eq!(notes[0].involved.kind, "Deployment");
        assert_eq!(notes[0].involved.uid, "d1");
        let down = Action::Patch {
            res: &REPLICA_SETS,
            namespace: "default".into(),
            name: "web-abc".into(),
            uid: "r1".into(),
            rev: None,
            patch: json!({"spec": {"replicas": 0}}),
        };
        let notes = intent(&w, &task, &down).unwrap().notes(Ok("web-abc"));
        assert_eq!(notes[0].message, "Scaled down replica set web-abc from 1 to 0");
        // A failed or conflicting scale says nothing.
        assert!(intent(&w, &task, &down).unwrap().notes(Err("conflict")).is_empty());
        // A status or annotation patch is no scaling.
        let status = Action::Patch {
            res: &REPLICA_SETS,
            namespace: "default".into(),
            name: "web-abc".into(),
            uid: "r1".into(),
            rev: None,
            patch: json!({"metadata": {"annotations": {}}}),
        };
        assert_eq!(intent(&w, &task, &status), None);
    }

    #[test]
    fn pod_writes_are_told_in_each_controllers_words() {
        let mut w = World::default();
        w.upsert(&stored(&REPLICA_SETS, json!({"metadata": meta("web-abc", "r1")})));
        w.upsert(&stored(&STATEFUL_SETS, json!({"metadata": meta("db", "s1")})));
        let create = |name: &str| Action::Create {
            res: &PODS,
            object: json!({"metadata": {"name": name, "generateName": "web-abc-", "namespace": "default"}}),
        };
        let rs = Task::ReplicaSet(("default".into(), "web-abc".into()));
        let n = intent(&w, &rs, &create("")).unwrap().notes(Ok("web-abc-x7k2p"));
        assert_eq!((n[0].reason.as_ref(), n[0].message.as_str()), ("SuccessfulCreate", "Created pod: web-abc-x7k2p"));
        let n = intent(&w, &rs, &create("")).unwrap().notes(Err("pods \"\" is forbidden: exceeded quota"));
        assert!(n[0].warning);
        assert_eq!(n[0].message, "Error creating: pods \"\" is forbidden: exceeded quota");
        let sts = Task::StatefulSet(("default".into(), "db".into()));
        let n = intent(&w, &sts, &create("db-0")).unwrap().notes(Ok("db-0"));
        assert_eq!(n[0].message, "create Pod db-0 in StatefulSet db successful");
        let n = intent(&w, &sts, &Action::delete(&PODS, "default", "db-1", "p1")).unwrap().notes(Ok("db-1"));
        assert_eq!(
            (n[0].reason.as_ref(), n[0].message.as_str()),
            ("SuccessfulDelete", "delete Pod db-1 in StatefulSet db successful")
        );
        // An object the world does not hold (deleted meanwhile): nothing to say.
        let gone = Task::ReplicaSet(("default".into(), "gone".into()));
        assert_eq!(intent(&w, &gone, &create("")), None);
    }

    #[test]
    fn a_job_says_once_that_it_finished() {
        let mut w = World::default();
        w.upsert(&stored(&JOBS, json!({"metadata": meta("pi", "j1"), "status": {"conditions": []}})));
        let task = Task::Job(("default".into(), "pi".into()));
        let patch = |conditions: Value| Action::Patch {
            res: &JOBS,
            namespace: "default".into(),
            name: "pi".into(),
            uid: "j1".into(),
            rev: None,
            patch: json!({"status": {"conditions": conditions}}),
        };
        let done = patch(json!([{"type": "Complete", "status": "True"}]));
        let n = intent(&w, &task, &done).unwrap().notes(Ok("pi"));
        assert_eq!((n[0].reason.as_ref(), n[0].message.as_str(), n[0].warning), ("Completed", "Job completed", false));
        let failed = patch(json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit"}]));
        let n = intent(&w, &task, &failed).unwrap().notes(Ok("pi"));
        assert_eq!(
            (n[0].reason.as_ref(), n[0].message.as_str(), n[0].warning),
            ("BackoffLimitExceeded", "Job has reached the specified backoff limit", true)
        );
        // Any other failure: the condition's own words.
        let policy = patch(json!([{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
            "message": "Container main for pod default/pi-x exited with non-zero exit code 42 matching FailJob rule at index 0"}]));
        let n = intent(&w, &task, &policy).unwrap().notes(Ok("pi"));
        assert_eq!((n[0].reason.as_ref(), n[0].warning), ("PodFailurePolicy", true));
        assert!(n[0].message.contains("exit code 42"), "{}", n[0].message);
        // Already complete: said before.
        let mut w = World::default();
        w.upsert(&stored(
            &JOBS,
            json!({"metadata": meta("pi", "j1"), "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
        ));
        assert_eq!(intent(&w, &task, &done), None);
    }

    #[test]
    fn a_cronjob_says_which_jobs_it_saw_finish() {
        let mut w = World::default();
        w.upsert(&stored(
            &CRON_JOBS,
            json!({"metadata": meta("tick", "c1"), "status": {"active": [{"name": "tick-1"}, {"name": "tick-2"}]}}),
        ));
        w.upsert(&stored(
            &JOBS,
            json!({"metadata": meta("tick-1", "j1"), "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
        ));
        w.upsert(&stored(&JOBS, json!({"metadata": meta("tick-2", "j2")})));
        let task = Task::CronJob(("default".into(), "tick".into()));
        let patch = Action::Patch {
            res: &CRON_JOBS,
            namespace: "default".into(),
            name: "tick".into(),
            uid: "c1".into(),
            rev: None,
            patch: json!({"status": {"active": [{"name": "tick-2"}]}}),
        };
        let n = intent(&w, &task, &patch).unwrap().notes(Ok("tick"));
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].message, "Saw completed job: tick-1, condition: Complete");
        let create = Action::Create { res: &JOBS, object: json!({"metadata": {"name": "tick-3"}}) };
        assert_eq!(intent(&w, &task, &create).unwrap().notes(Ok("tick-3"))[0].message, "Created job tick-3");
    }
}
