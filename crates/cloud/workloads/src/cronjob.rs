//! The CronJob controller: a Job from the template at each time the
//! schedule fires (in the CronJob's `timeZone`, UTC without one), named
//! `{cronjob}-{minutes since the epoch}` so a time is never run twice;
//! `concurrencyPolicy` (Allow, Forbid, Replace), `startingDeadlineSeconds`,
//! `suspend`, and the history limits of finished Jobs (Kubernetes'
//! `pkg/controller/cronjob`, v2).

use std::time::Duration;

use edgehive_registry::cron;
use edgehive_store::Propagation;
use edgehive_store::resources::{CRON_JOBS, JOBS};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::plan::{Action, Plan};
use crate::world::{OwnerRef, Stored, World, int_at, str_at};

/// The annotation with the time a Job was scheduled for.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Missed times beyond this are not looked at one by one (Kubernetes warns at 100).
const MAX_MISSED: usize = 100;

/// Whether a Job has finished, and how: `Some(true)` complete, `Some(false)` failed.
fn finished(job: &Value) -> Option<bool> {
    let conditions = job.pointer("/status/conditions").and_then(Value::as_array)?;
    conditions.iter().find_map(|c| match (c["type"].as_str(), c["status"].as_str()) {
        (Some("Complete"), Some("True")) => Some(true),
        (Some("Failed"), Some("True")) => Some(false),
        _ => None,
    })
}

fn time_at(v: &Value, pointer: &str) -> Option<OffsetDateTime> {
    v.pointer(pointer).and_then(Value::as_str).and_then(edgehive_store::parse_rfc3339)
}

fn after(d: time::Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.whole_milliseconds()).unwrap_or(0).max(1))
}

/// One sync of CronJob `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(cj) = world.cron_jobs.get(ns, name) else { return plan };
    let cj = &cj;
    let v = &cj.value;
    if cj.deleting() {
        return plan;
    }
    let jobs: Vec<Stored> = world.jobs.owned_by(cj.uid()).collect();
    let mut active: Vec<&Stored> = jobs.iter().filter(|j| finished(&j.value).is_none() && !j.deleting()).collect();
    let last_success = jobs
        .iter()
        .filter(|j| finished(&j.value) == Some(true))
        .filter_map(|j| time_at(&j.value, "/status/completionTime"))
        .max();
    let mut last_schedule = time_at(v, "/status/lastScheduleTime");

    let schedule = cron::parse(str_at(v, "/spec/schedule")).ok();
    let zone = v.pointer("/spec/timeZone").and_then(Value::as_str);
    let suspended = v.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    if let (Some(schedule), false) = (&schedule, suspended) {
        // The latest time the schedule fired that has not been run.
        let mut since = last_schedule.or_else(|| time_at(v, "/metadata/creationTimestamp")).unwrap_or(now);
        if let Some(deadline) = int_at(v, "/spec/startingDeadlineSeconds") {
            since = since.max(now - time::Duration::seconds(deadline));
        }
        let mut due = None;
        let mut missed = 0;
        let mut t = since;
        let mut jumped = false;
        while let Some(n) = schedule.next_after(t, zone) {
            if n > now {
                break;
            }
            due = Some(n);
            t = n;
            missed += 1;
            if missed > MAX_MISSED && !jumped {
                // Too many to walk: jump to the last minute before now (once).
                jumped = true;
                t = t.max(now - time::Duration::minutes(1));
            }
        }
        if let Some(at) = due {
            let too_late =
                int_at(v, "/spec/startingDeadlineSeconds").is_some_and(|d| at + time::Duration::seconds(d) < now);
            let policy = str_at(v, "/spec/concurrencyPolicy");
            if too_late {
                tracing::info!(module = "cronjob", cronjob = name, scheduled = %edgehive_store::rfc3339(at), "missed its starting deadline");
            } else if policy == "Forbid" && !active.is_empty() {
                // Wait: the time stays due until the active Job finishes (or its deadline passes).
            } else {
                if policy == "Replace" {
                    for j in &active {
                        plan.push(Action::Delete {
                            res: &JOBS,
                            namespace: ns.to_string(),
                            name: j.name().to_string(),
                            uid: j.uid().to_string(),
                            propagation: Some(Propagation::Background),
                        });
                    }
                    active.clear();
                }
                let job_name = format!("{name}-{}", at.unix_timestamp() / 60);
                if !world.jobs.contains(ns, &job_name) {
                    plan.push(Action::Create { res: &JOBS, object: job_from_template(cj, &job_name, at) });
                }
                last_schedule = Some(at);
            }
        }
        // Look again when it next fires.
        if let Some(n) = schedule.next_after(now, zone) {
            plan.requeue(after(n - now));
        }
    }

    // History: the oldest finished Jobs beyond the limits go.
    for (success, limit) in [
        (true, int_at(v, "/spec/successfulJobsHistoryLimit").unwrap_or(3)),
        (false, int_at(v, "/spec/failedJobsHistoryLimit").unwrap_or(1)),
    ] {
        let mut done: Vec<&Stored> =
            jobs.iter().filter(|j| finished(&j.value) == Some(success) && !j.deleting()).collect();
        let excess = done.len().saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
        done.sort_by_key(|j| (time_at(&j.value, "/status/startTime"), j.name().to_string()));
        for j in done.into_iter().take(excess) {
            plan.push(Action::Delete {
                res: &JOBS,
                namespace: ns.to_string(),
                name: j.name().to_string(),
                uid: j.uid().to_string(),
                propagation: Some(Propagation::Background),
            });
        }
    }

    // Status: the active Jobs (with any just created), the last times.
    let mut refs: Vec<Value> = active
        .iter()
        .map(|j| json!({"kind": "Job", "namespace": ns, "name": j.name(), "uid": j.uid(), "apiVersion": "batch/v1", "resourceVersion": j.rev.to_string()}))
        .collect();
    let mut status = serde_json::Map::new();
    if !refs.is_empty() {
        refs.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        status.insert("active".into(), Value::Array(refs));
    }
    if let Some(t) = last_schedule {
        status.insert("lastScheduleTime".into(), json!(edgehive_store::rfc3339(t)));
    }
    if let Some(t) = last_success.or_else(|| time_at(v, "/status/lastSuccessfulTime")) {
        status.insert("lastSuccessfulTime".into(), json!(edgehive_store::rfc3339(t)));
    }
    let old = v.get("status").cloned().unwrap_or_else(|| json!({}));
    if let Some(patch) = crate::plan::merge_diff(&old, &Value::Object(status)) {
        // A Job created above joins `active` when it is seen (the next sync).
        plan.push(Action::Patch {
            res: &CRON_JOBS,
            namespace: ns.to_string(),
            name: name.to_string(),
            uid: cj.uid().to_string(),
            rev: None,
            patch: json!({"status": patch}),
        });
    }
    plan
}

/// The Job for the time `at`: the template's metadata and spec, owned by the CronJob.
fn job_from_template(cj: &Stored, name: &str, at: OffsetDateTime) -> Value {
    let v = &cj.value;
    let template = v.pointer("/spec/jobTemplate").cloned().unwrap_or_else(|| json!({}));
    let mut annotations = template.pointer("/metadata/annotations").cloned().unwrap_or_else(|| json!({}));
    annotations[SCHEDULED_TIMESTAMP] = json!(edgehive_store::rfc3339(at));
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": str_at(v, "/metadata/namespace"),
            "labels": template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({})),
            "annotations": annotations,
            "ownerReferences": [OwnerRef::controller_to(&CRON_JOBS, v)],
        },
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}
