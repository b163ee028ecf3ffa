//! The Job controller: runs pods until `completions` of them succeeded (or,
//! without completions, until one succeeded and none is active), at most
//! `parallelism` at once, and fails the Job past `backoffLimit` failures or
//! `activeDeadlineSeconds`; Indexed Jobs give each pod its completion index;
//! a finished Job with `ttlSecondsAfterFinished` is deleted when it expires
//! (Kubernetes' `pkg/controller/job` and `ttlafterfinished`).
//!
//! Every pod carries the tracking finalizer until it is counted: a terminal
//! pod's uid goes into `status.uncountedTerminatedPods`, then its finalizer
//! is removed, then it moves into `succeeded` / `failed` — so a pod deleted
//! or lost at any point is counted exactly once, as Kubernetes counts it.

use std::collections::BTreeSet;
use std::time::Duration;

use edgehive_store::Propagation;
use edgehive_store::resources::{JOBS, PODS};
use edgehive_store::selector::LabelSelector;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::plan::{Action, Plan};
use crate::replicaset::claim_pods;
use crate::template::pod_from_template;
use crate::world::{COMPLETION_INDEX, JOB_TRACKING_FINALIZER, OwnerRef, Phase, PodInfo, Stored, World, int_at, str_at};

/// Longest wait before a failed pod is replaced (Kubernetes' `MaxJobPodFailureBackOff`).
const MAX_BACKOFF: Duration = Duration::from_secs(360);
/// First wait (Kubernetes' `DefaultJobPodFailureBackOff`).
const BACKOFF: Duration = Duration::from_secs(10);

fn condition(conditions: &[Value], ty: &str) -> Option<Value> {
    conditions.iter().find(|c| c["type"] == ty).cloned()
}

fn is_true(conditions: &[Value], ty: &str) -> bool {
    condition(conditions, ty).is_some_and(|c| c["status"] == "True")
}

fn new_condition(ty: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({"type": ty, "status": status, "lastProbeTime": now, "lastTransitionTime": now, "reason": reason, "message": message})
}

/// Sets a condition; a changed status moves its transition time.
fn set_condition(conditions: &mut Vec<Value>, c: Value) {
    match conditions.iter_mut().find(|x| x["type"] == c["type"]) {
        Some(x) if x["status"] == c["status"] && x["reason"] == c["reason"] => {}
        Some(x) => *x = c,
        None => conditions.push(c),
    }
}

/// `0-2,4` from a set of indexes.
fn format_indexes(set: &BTreeSet<u32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        out.push(if end == start { start.to_string() } else { format!("{start}-{end}") });
    }
    out.join(",")
}

fn parse_indexes(s: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b.min(a.saturating_add(100_000)));
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

fn uids(status: &Value, list: &str) -> Vec<String> {
    status
        .pointer(&format!("/uncountedTerminatedPods/{list}"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// One sync of Job `ns/name` at `now`.
pub fn sync(world: &World, ns: &str, name: &str, now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(job) = world.jobs.get(ns, name) else { return plan };
    let job = &job;
    let v = &job.value;
    let now_s = edgehive_store::rfc3339(now);
    let status = v.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut conditions: Vec<Value> = status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let finished = is_true(&conditions, "Complete") || is_true(&conditions, "Failed");
    let Some(selector) = v.pointer("/spec/selector").and_then(|s| LabelSelector::from_json(s).ok()) else {
        return plan;
    };
    let claimed = if selector.is_empty() { Vec::new() } else { claim_pods(world, &JOBS, job, &selector, &mut plan) };

    // Counting: terminal (or deleted) tracked pods into uncounted, their
    // finalizers off, then into the counts.
    let mut uncounted_ok = uids(&status, "succeeded");
    let mut uncounted_failed = uids(&status, "failed");
    let mut succeeded = int_at(&status, "/succeeded").unwrap_or(0);
    let mut failed = int_at(&status, "/failed").unwrap_or(0);
    let mut completed: BTreeSet<u32> = parse_indexes(str_at(&status, "/completedIndexes"));
    let indexed = str_at(v, "/spec/completionMode") == "Indexed";
    let mut newly_uncounted = false;
    let mut finalizers_off: Vec<&PodInfo> = Vec::new();
    for p in &claimed {
        let terminal = matches!(p.phase, Phase::Succeeded | Phase::Failed);
        let gone = p.deleting && !terminal;
        if !(terminal || gone) || !p.tracked {
            continue;
        }
        let known = uncounted_ok.contains(&p.uid) || uncounted_failed.contains(&p.uid);
        if !known {
            if p.phase == Phase::Succeeded {
                uncounted_ok.push(p.uid.clone());
            } else {
                uncounted_failed.push(p.uid.clone());
            }
            newly_uncounted = true;
        } else {
            finalizers_off.push(p);
        }
    }
    // Uncounted uids whose pods no longer carry the finalizer are counted now.
    let still_tracked = |uid: &String| claimed.iter().any(|p| &p.uid == uid && p.tracked);
    if !newly_uncounted {
        let (done_ok, keep_ok): (Vec<String>, Vec<String>) = uncounted_ok.into_iter().partition(|u| !still_tracked(u));
        let (done_failed, keep_failed): (Vec<String>, Vec<String>) =
            uncounted_failed.into_iter().partition(|u| !still_tracked(u));
        for uid in &done_ok {
            match claimed.iter().find(|p| &p.uid == uid).and_then(|p| p.index) {
                Some(i) if indexed => {
                    completed.insert(i);
                }
                _ => {}
            }
        }
        succeeded =
            if indexed { i64::try_from(completed.len()).unwrap_or(0) } else { succeeded + done_ok.len() as i64 };
        failed += done_failed.len() as i64;
        uncounted_ok = keep_ok;
        uncounted_failed = keep_failed;
    }

    let active: Vec<&PodInfo> = claimed.iter().copied().filter(|p| p.active()).collect();
    let terminating =
        claimed.iter().filter(|p| p.deleting && !matches!(p.phase, Phase::Succeeded | Phase::Failed)).count();
    let ready = active.iter().filter(|p| p.ready()).count();
    let parallelism = int_at(v, "/spec/parallelism").unwrap_or(1).max(0);
    let completions = int_at(v, "/spec/completions");
    let backoff_limit = int_at(v, "/spec/backoffLimit").unwrap_or(6);
    let suspended = v.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let mut start_time = status.get("startTime").cloned().filter(|t| !t.is_null());
    let mut completion_time = status.get("completionTime").cloned().filter(|t| !t.is_null());
    let pending_uncounted = !uncounted_ok.is_empty() || !uncounted_failed.is_empty();

    if !finished && !job.deleting() {
        let on_failure = str_at(v, "/spec/template/spec/restartPolicy") == "OnFailure";
        let restarts: i64 = if on_failure { active.iter().map(|p| p.restarts).sum() } else { 0 };
        let all_failed = failed + uncounted_failed.len() as i64;
        let deadline = int_at(v, "/spec/activeDeadlineSeconds");
        let started = start_time.as_ref().and_then(Value::as_str).and_then(edgehive_store::parse_rfc3339);
        let all_succeeded = succeeded + if indexed { 0 } else { uncounted_ok.len() as i64 };
        let complete = match completions {
            Some(c) => all_succeeded >= c,
            None => all_succeeded > 0 && active.is_empty(),
        };
        let failure = if all_failed + restarts > backoff_limit {
            Some(("BackoffLimitExceeded", "Job has reached the specified backoff limit"))
        } else if let (Some(d), Some(t)) = (deadline, started)
            && !suspended
            && t + time::Duration::seconds(d) <= now
        {
            Some(("DeadlineExceeded", "Job was active longer than specified deadline"))
        } else {
            None
        };
        if let Some((reason, message)) = failure {
            for p in &active {
                plan.push(Action::delete(&PODS, &p.namespace, &p.name, &p.uid));
            }
            if active.is_empty() && !pending_uncounted {
                set_condition(&mut conditions, new_condition("Failed", "True", reason, message, &now_s));
            } else {
                set_condition(&mut conditions, new_condition("FailureTarget", "True", reason, message, &now_s));
            }
        } else if complete {
            for p in &active {
                plan.push(Action::delete(&PODS, &p.namespace, &p.name, &p.uid));
            }
            if active.is_empty() && !pending_uncounted {
                set_condition(
                    &mut conditions,
                    new_condition(
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                        &now_s,
                    ),
                );
                completion_time = Some(json!(now_s));
            }
        } else if suspended {
            for p in &active {
                plan.push(Action::delete(&PODS, &p.namespace, &p.name, &p.uid));
            }
            set_condition(&mut conditions, new_condition("Suspended", "True", "JobSuspended", "Job suspended", &now_s));
        } else {
            if condition(&conditions, "Suspended").is_some_and(|c| c["status"] == "True") {
                set_condition(
                    &mut conditions,
                    new_condition("Suspended", "False", "JobResumed", "Job resumed", &now_s),
                );
                // The deadline counts from the resume.
                start_time = None;
            }
            if start_time.is_none() {
                start_time = Some(json!(now_s));
            }
            if let (Some(d), Some(t)) = (deadline, started) {
                let left = t + time::Duration::seconds(d) - now;
                plan.requeue(Duration::from_millis(u64::try_from(left.whole_milliseconds().max(1)).unwrap_or(1)));
            }
            // Replace failed pods only after the back-off since the last failure.
            let wait = backoff_left(&claimed, all_failed, now);
            if let Some(w) = wait {
                plan.requeue(w);
            } else {
                // Indexes done: counted, or succeeded and on their way to be.
                let mut done = completed.clone();
                done.extend(claimed.iter().filter(|p| p.phase == Phase::Succeeded).filter_map(|p| p.index));
                create_pods(&mut plan, job, &active, &done, all_succeeded, parallelism, completions, indexed);
            }
        }
    }

    // Finalizers off for pods already in uncounted (after the status write below).
    let mut finalizer_actions = Vec::new();
    for p in finalizers_off {
        finalizer_actions.push(Action::Patch {
            res: &PODS,
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: p.uid.clone(),
            rev: Some(p.rev),
            patch: json!({"metadata": {"finalizers": if p.other_finalizers.is_empty() {
                Value::Null
            } else {
                json!(p.other_finalizers)
            }}}),
        });
    }

    let mut new_status = Map::new();
    let put = |m: &mut Map<String, Value>, k: &str, n: i64| {
        if n != 0 {
            m.insert(k.into(), json!(n));
        }
    };
    if let Some(t) = start_time {
        new_status.insert("startTime".into(), t);
    }
    if let Some(t) = completion_time {
        new_status.insert("completionTime".into(), t);
    }
    put(&mut new_status, "active", active.len() as i64);
    put(&mut new_status, "succeeded", succeeded);
    put(&mut new_status, "failed", failed);
    new_status.insert("ready".into(), json!(ready));
    new_status.insert("terminating".into(), json!(terminating));
    if indexed && !completed.is_empty() {
        new_status.insert("completedIndexes".into(), json!(format_indexes(&completed)));
    }
    let mut uncounted = Map::new();
    if !uncounted_ok.is_empty() {
        uncounted.insert("succeeded".into(), json!(uncounted_ok));
    }
    if !uncounted_failed.is_empty() {
        uncounted.insert("failed".into(), json!(uncounted_failed));
    }
    new_status.insert("uncountedTerminatedPods".into(), Value::Object(uncounted));
    if !conditions.is_empty() {
        new_status.insert("conditions".into(), Value::Array(conditions.clone()));
    }
    let new_status = Value::Object(new_status);
    if let Some(patch) = crate::plan::merge_diff(&status, &new_status) {
        // The status first: a pod's finalizer only goes once the Job has it in uncounted.
        plan.actions.insert(
            0,
            Action::Patch {
                res: &JOBS,
                namespace: ns.to_string(),
                name: name.to_string(),
                uid: job.uid().to_string(),
                rev: Some(job.rev),
                patch: json!({"status": patch}),
            },
        );
    }
    if !newly_uncounted {
        plan.actions.extend(finalizer_actions);
    }
    // A finished Job with a time to live goes when it expires.
    if (is_true(&conditions, "Complete") || is_true(&conditions, "Failed")) && !job.deleting() {
        plan.extend(expire(job, &conditions, now));
    }
    plan
}

/// How long until a failed pod may be replaced, if that is still ahead.
fn backoff_left(pods: &[&PodInfo], failures: i64, now: OffsetDateTime) -> Option<Duration> {
    if failures <= 0 {
        return None;
    }
    let last = pods.iter().filter(|p| p.phase == Phase::Failed).filter_map(|p| p.finished).max()?;
    let exp = u32::try_from(failures - 1).unwrap_or(u32::MAX).min(10);
    let wait = BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF);
    let at = last + wait;
    (at > now).then(|| {
        let left = at - now;
        Duration::from_millis(u64::try_from(left.whole_milliseconds()).unwrap_or(0).max(1))
    })
}

#[allow(clippy::too_many_arguments)]
fn create_pods(
    plan: &mut Plan,
    job: &Stored,
    active: &[&PodInfo],
    completed: &BTreeSet<u32>,
    succeeded: i64,
    parallelism: i64,
    completions: Option<i64>,
    indexed: bool,
) {
    let v = &job.value;
    let ns = str_at(v, "/metadata/namespace");
    let want = match completions {
        Some(c) => parallelism.min(c - succeeded).max(0),
        None if succeeded > 0 => 0,
        None => parallelism,
    };
    let missing = want - active.len() as i64;
    if missing <= 0 {
        return;
    }
    let template = v.pointer("/spec/template").cloned().unwrap_or_else(|| json!({}));
    let owner = OwnerRef::controller_to(&JOBS, v);
    let running: BTreeSet<u32> = active.iter().filter_map(|p| p.index).collect();
    let indexes: Vec<Option<u32>> = if indexed {
        let total = u32::try_from(completions.unwrap_or(0)).unwrap_or(0);
        (0..total).filter(|i| !completed.contains(i) && !running.contains(i)).map(Some).collect()
    } else {
        vec![None; usize::try_from(missing).unwrap_or(0)]
    };
    for index in indexes.into_iter().take(usize::try_from(missing).unwrap_or(0)) {
        let prefix = match index {
            Some(i) => format!("{}-{i}", job.name()),
            None => job.name().to_string(),
        };
        let mut pod = pod_from_template(&template, ns, &prefix, owner.clone());
        pod["metadata"]["finalizers"] = json!([JOB_TRACKING_FINALIZER]);
        if let Some(i) = index {
            pod["metadata"]["annotations"][COMPLETION_INDEX] = json!(i.to_string());
            pod["metadata"]["labels"][COMPLETION_INDEX] = json!(i.to_string());
            pod["spec"]["hostname"] = json!(format!("{}-{i}", job.name()));
            if let Some(containers) = pod.pointer_mut("/spec/containers").and_then(Value::as_array_mut) {
                for c in containers {
                    let env = c.as_object_mut().map(|o| o.entry("env").or_insert_with(|| json!([])));
                    if let Some(Value::Array(env)) = env {
                        env.push(json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['{COMPLETION_INDEX}']")}}}));
                    }
                }
            }
        }
        plan.push(Action::Create { res: &PODS, object: pod });
    }
}

/// Deletes the Job (in the foreground, as Kubernetes' TTL controller does)
/// when its time to live after finishing is over; else asks to look again then.
fn expire(job: &Stored, conditions: &[Value], now: OffsetDateTime) -> Plan {
    let mut plan = Plan::none();
    let Some(ttl) = int_at(&job.value, "/spec/ttlSecondsAfterFinished") else { return plan };
    let finished_at = conditions
        .iter()
        .filter(|c| (c["type"] == "Complete" || c["type"] == "Failed") && c["status"] == "True")
        .filter_map(|c| c["lastTransitionTime"].as_str())
        .filter_map(edgehive_store::parse_rfc3339)
        .max()
        .unwrap_or(now);
    let at = finished_at + time::Duration::seconds(ttl);
    if at <= now {
        plan.push(Action::Delete {
            res: &JOBS,
            namespace: str_at(&job.value, "/metadata/namespace").to_string(),
            name: job.name().to_string(),
            uid: job.uid().to_string(),
            propagation: Some(Propagation::Foreground),
        });
    } else {
        let left = at - now;
        plan.requeue(Duration::from_millis(u64::try_from(left.whole_milliseconds()).unwrap_or(0).max(1)));
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completed_indexes_print_as_kubernetes_prints_them() {
        let set: BTreeSet<u32> = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(format_indexes(&set), "0-2,4,6-7");
        assert_eq!(parse_indexes("0-2,4,6-7"), set);
        assert!(parse_indexes("").is_empty());
        assert_eq!(parse_indexes("x,3"), [3].into_iter().collect());
    }
}
