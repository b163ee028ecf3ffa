//! Pod rows: the READY, STATUS and RESTARTS logic of Kubernetes' `printPod`, over an untyped core/v1 Pod.

use serde_json::Value;
use time::OffsetDateTime;

use super::{age, field, flag, int, list, name, or, since, text, timestamp};

/// `status.reason` the node lifecycle controller sets on pods of an unreachable node; such a pod, once being
/// deleted, shows "Unknown".
const NODE_UNREACHABLE_POD_REASON: &str = "NodeLost";

/// The cells of a Pod row: NAME READY STATUS RESTARTS AGE IP NODE NOMINATED-NODE READINESS-GATES.
pub(super) fn cells(pod: &Value, now: OffsetDateTime) -> Vec<Value> {
    let summary = Summary::of(pod);
    let restarts = match summary.restarts.last {
        Some(last) if summary.restarts.count != 0 => {
            format!("{} ({} ago)", summary.restarts.count, since(Some(last), now))
        }
        _ => summary.restarts.count.to_string(),
    };
    vec![
        name(pod),
        format!("{}/{}", summary.ready, summary.total).into(),
        summary.reason.into(),
        restarts.into(),
        age(pod, now),
        or(pod_ip(pod), "<none>").into(),
        or(text(pod, &["spec", "nodeName"]), "<none>").into(),
        or(text(pod, &["status", "nominatedNodeName"]), "<none>").into(),
        readiness_gates(pod).into(),
    ]
}

/// Restart count and the latest restart of a set of containers.
#[derive(Debug, Default, Clone, Copy)]
struct Restarts {
    count: i64,
    /// Latest `lastState.terminated.finishedAt` seen; `None` when no container reported one.
    last: Option<OffsetDateTime>,
}

impl Restarts {
    /// Adds one container status's restarts.
    fn add(&mut self, status: &Value) {
        self.count = self.count.saturating_add(int(status, &["restartCount"]));
        if let Some(finished) = timestamp(status, &["lastState", "terminated", "finishedAt"])
            && self.last.is_none_or(|last| last < finished)
        {
            self.last = Some(finished);
        }
    }
}

/// What `printPod` works out from the container statuses.
#[derive(Debug)]
struct Summary {
    /// Ready containers, counting started-and-ready sidecars (restartable init containers).
    ready: usize,
    /// Regular containers plus sidecars.
    total: usize,
    /// The STATUS cell.
    reason: String,
    restarts: Restarts,
}

impl Summary {
    fn of(pod: &Value) -> Self {
        let init_specs = list(pod, &["spec", "initContainers"]);
        let is_sidecar = |container: &str| {
            init_specs.iter().any(|c| text(c, &["name"]) == container && text(c, &["restartPolicy"]) == "Always")
        };
        let sidecars = init_specs.iter().filter(|c| text(c, &["restartPolicy"]) == "Always").count();
        let total = list(pod, &["spec", "containers"]).len() + sidecars;

        // The API server stores every pod with a phase (Pending at creation); a pod written without one reads as
        // Pending here too.
        let phase = or(text(pod, &["status", "phase"]), "Pending");
        let mut reason = or(text(pod, &["status", "reason"]), &phase);
        let conditions = list(pod, &["status", "conditions"]);
        if conditions.iter().any(|c| text(c, &["type"]) == "PodScheduled" && text(c, &["reason"]) == "SchedulingGated")
        {
            reason = "SchedulingGated".to_owned();
        }

        let mut ready = 0;
        let mut restarts = Restarts::default();
        let mut sidecar_restarts = Restarts::default();
        let mut initializing = false;
        for (index, status) in list(pod, &["status", "initContainerStatuses"]).iter().enumerate() {
            restarts.add(status);
            let sidecar = is_sidecar(text(status, &["name"]));
            if sidecar {
                sidecar_restarts.add(status);
            }
            let terminated = field(status, &["state", "terminated"]);
            let waiting_reason = text(status, &["state", "waiting", "reason"]);
            if terminated.is_some_and(|t| int(t, &["exitCode"]) == 0) {
                continue;
            }
            if sidecar && flag(status, &["started"]) {
                if flag(status, &["ready"]) {
                    ready += 1;
                }
                continue;
            }
            reason = if let Some(terminated) = terminated {
                termination_reason(terminated, "Init:")
            } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
                format!("Init:{waiting_reason}")
            } else {
                format!("Init:{index}/{}", init_specs.len())
            };
            initializing = true;
            break;
        }

        if !initializing || initialized(conditions) {
            // Restarts of init containers that ran to completion are history; only sidecars keep counting.
            restarts = sidecar_restarts;
            let mut has_running = false;
            // Walked backwards so that the first container's state has the last word, as in Kubernetes.
            for status in list(pod, &["status", "containerStatuses"]).iter().rev() {
                restarts.add(status);
                let waiting_reason = text(status, &["state", "waiting", "reason"]);
                if !waiting_reason.is_empty() {
                    reason = waiting_reason.to_owned();
                } else if let Some(terminated) = field(status, &["state", "terminated"]) {
                    reason = termination_reason(terminated, "");
                } else if flag(status, &["ready"]) && field(status, &["state", "running"]).is_some() {
                    has_running = true;
                    ready += 1;
                }
            }
            // A pod whose containers partly completed but one still runs is still running.
            if reason == "Completed" && has_running {
                reason = if ready_condition(conditions) { "Running" } else { "NotReady" }.to_owned();
            }
        }

        if field(pod, &["metadata", "deletionTimestamp"]).is_some() {
            if text(pod, &["status", "reason"]) == NODE_UNREACHABLE_POD_REASON {
                reason = "Unknown".to_owned();
            } else if phase != "Succeeded" && phase != "Failed" {
                reason = "Terminating".to_owned();
            }
        }

        Self { ready, total, reason, restarts }
    }
}

/// The reason of a terminated container: its `reason`, else "Signal:N", else "ExitCode:N", after `prefix`.
fn termination_reason(terminated: &Value, prefix: &str) -> String {
    let reason = text(terminated, &["reason"]);
    let signal = int(terminated, &["signal"]);
    if !reason.is_empty() {
        format!("{prefix}{reason}")
    } else if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", int(terminated, &["exitCode"]))
    }
}

/// Whether the first `Initialized` condition is True.
fn initialized(conditions: &[Value]) -> bool {
    conditions.iter().find(|c| text(c, &["type"]) == "Initialized").is_some_and(|c| text(c, &["status"]) == "True")
}

/// Whether any `Ready` condition is True.
fn ready_condition(conditions: &[Value]) -> bool {
    conditions.iter().any(|c| text(c, &["type"]) == "Ready" && text(c, &["status"]) == "True")
}

/// The pod's primary IP. `status.podIP` is authoritative when set (as in Kubernetes' v1 conversion), else the first
/// of `status.podIPs`.
fn pod_ip(pod: &Value) -> &str {
    let ip = text(pod, &["status", "podIP"]);
    if !ip.is_empty() {
        return ip;
    }
    list(pod, &["status", "podIPs"]).first().map_or("", |first| text(first, &["ip"]))
}

/// "<none>" without readiness gates, else "true/total": how many gates have a True condition.
fn readiness_gates(pod: &Value) -> String {
    let gates = list(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_owned();
    }
    let conditions = list(pod, &["status", "conditions"]);
    let passed = gates
        .iter()
        .filter(|gate| {
            let wanted = text(gate, &["conditionType"]);
            conditions.iter().find(|c| text(c, &["type"]) == wanted).is_some_and(|c| text(c, &["status"]) == "True")
        })
        .count();
    format!("{passed}/{}", gates.len())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::format_description::well_known::Rfc3339;

    use super::*;

    fn now() -> OffsetDateTime {
        OffsetDateTime::parse("2024-05-01T12:00:00Z", &Rfc3339).unwrap()
    }

    fn row(pod: &Value) -> Vec<Value> {
        let row = cells(pod, now());
        assert_eq!(row.len(), super::super::columns("", "Pod").len());
        row
    }

    #[test]
    fn running_pod() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "nginx-7c5ddbdf54-x2v9k", "namespace": "default",
                         "creationTimestamp": "2024-05-01T09:14:00Z"},
            "spec": {"nodeName": "edge-node-1",
                     "containers": [{"name": "nginx", "image": "nginx:1.25"}, {"name": "sidecar", "image": "busybox"}]},
            "status": {
                "phase": "Running", "podIP": "10.244.1.17", "podIPs": [{"ip": "10.244.1.17"}],
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"},
                               {"type": "ContainersReady", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [
                    {"name": "nginx", "ready": true, "restartCount": 0, "started": true,
                     "state": {"running": {"startedAt": "2024-05-01T09:14:05Z"}}},
                    {"name": "sidecar", "ready": true, "restartCount": 0, "started": true,
                     "state": {"running": {"startedAt": "2024-05-01T09:14:06Z"}}}
                ]
            }
        });
        assert_eq!(
            row(&pod),
            [
                json!("nginx-7c5ddbdf54-x2v9k"),
                json!("2/2"),
                json!("Running"),
                json!("0"),
                json!("166m"),
                json!("10.244.1.17"),
                json!("edge-node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn pending_unscheduled_pod() {
        let pod = json!({
            "metadata": {"name": "web", "creationTimestamp": "2024-05-01T11:59:15Z"},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            "status": {"phase": "Pending",
                       "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        });
        assert_eq!(
            row(&pod),
            [
                json!("web"),
                json!("0/1"),
                json!("Pending"),
                json!("0"),
                json!("45s"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn pod_without_status_is_pending() {
        let pod = json!({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(row(&pod)[..5], [json!("bare"), json!("0/1"), json!("Pending"), json!("0"), json!("<unknown>")]);
    }

    #[test]
    fn crash_looping_pod() {
        let pod = json!({
            "metadata": {"name": "api-5f7d", "creationTimestamp": "2024-04-30T08:00:00Z"},
            "spec": {"nodeName": "edge-2", "containers": [{"name": "api"}],
                     "readinessGates": [{"conditionType": "example.com/lb-ready"}]},
            "status": {
                "phase": "Running", "podIPs": [{"ip": "fd00::12"}], "nominatedNodeName": "",
                "conditions": [{"type": "Ready", "status": "False"},
                               {"type": "example.com/lb-ready", "status": "True"}],
                "containerStatuses": [{
                    "name": "api", "ready": false, "restartCount": 7,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                 "startedAt": "2024-05-01T11:56:50Z",
                                                 "finishedAt": "2024-05-01T11:57:00Z"}}
                }]
            }
        });
        assert_eq!(
            row(&pod),
            [
                json!("api-5f7d"),
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("7 (3m ago)"),
                json!("28h"),
                json!("fd00::12"),
                json!("edge-2"),
                json!("<none>"),
                json!("1/1")
            ]
        );
    }

    #[test]
    fn restarts_without_finish_time_have_no_ago() {
        let pod = json!({
            "spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Running",
                       "containerStatuses": [{"name": "a", "ready": true, "restartCount": 2,
                                              "state": {"running": {}}}]}
        });
        assert_eq!(row(&pod)[1..4], [json!("1/1"), json!("Running"), json!("2")]);
    }

    #[test]
    fn init_container_running() {
        let pod = json!({
            "metadata": {"name": "db-0", "creationTimestamp": "2024-05-01T11:58:00Z"},
            "spec": {"nodeName": "edge-1", "initContainers": [{"name": "migrate"}, {"name": "seed"}],
                     "containers": [{"name": "db"}]},
            "status": {
                "phase": "Pending", "podIP": "10.0.0.9",
                "conditions": [{"type": "Initialized", "status": "False"}],
                "initContainerStatuses": [
                    {"name": "migrate", "ready": false, "restartCount": 0, "state": {"running": {}}},
                    {"name": "seed", "ready": false, "restartCount": 0,
                     "state": {"waiting": {"reason": "PodInitializing"}}}
                ],
                "containerStatuses": [{"name": "db", "ready": false, "restartCount": 0,
                                       "state": {"waiting": {"reason": "PodInitializing"}}}]
            }
        });
        assert_eq!(
            row(&pod),
            [
                json!("db-0"),
                json!("0/1"),
                json!("Init:0/2"),
                json!("0"),
                json!("2m"),
                json!("10.0.0.9"),
                json!("edge-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn init_container_crash_looping_counts_init_restarts() {
        let pod = json!({
            "metadata": {"name": "db-0", "creationTimestamp": "2024-05-01T11:00:00Z"},
            "spec": {"initContainers": [{"name": "migrate"}, {"name": "seed"}], "containers": [{"name": "db"}]},
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "Initialized", "status": "False"}],
                "initContainerStatuses": [
                    {"name": "migrate", "restartCount": 0,
                     "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "seed", "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                     "lastState": {"terminated": {"exitCode": 2, "finishedAt": "2024-05-01T11:59:30Z"}}}
                ],
                "containerStatuses": [{"name": "db", "restartCount": 0,
                                       "state": {"waiting": {"reason": "PodInitializing"}}}]
            }
        });
        assert_eq!(row(&pod)[1..5], [json!("0/1"), json!("Init:CrashLoopBackOff"), json!("4 (30s ago)"), json!("60m")]);
    }

    #[test]
    fn init_container_failures_without_reason() {
        let failing = |terminated: Value| {
            json!({"spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]},
                   "status": {"phase": "Pending",
                              "initContainerStatuses": [{"name": "i", "state": {"terminated": terminated}}]}})
        };
        assert_eq!(row(&failing(json!({"exitCode": 3})))[2], json!("Init:ExitCode:3"));
        assert_eq!(row(&failing(json!({"exitCode": 137, "signal": 9})))[2], json!("Init:Signal:9"));
        assert_eq!(row(&failing(json!({"exitCode": 1, "reason": "Error"})))[2], json!("Init:Error"));
    }

    #[test]
    fn sidecar_counts_toward_ready_and_total() {
        let pod = json!({
            "spec": {"initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "setup"}],
                     "containers": [{"name": "app"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [
                    {"name": "proxy", "started": true, "ready": true, "restartCount": 1, "state": {"running": {}},
                     "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2024-05-01T10:00:00Z"}}},
                    {"name": "setup", "restartCount": 3, "state": {"terminated": {"exitCode": 0}}}
                ],
                "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "state": {"running": {}}}]
            }
        });
        // The finished init container's 3 restarts no longer count; the sidecar's 1 does.
        assert_eq!(row(&pod)[1..4], [json!("2/2"), json!("Running"), json!("1 (120m ago)")]);
    }

    #[test]
    fn completed_and_failed_pods() {
        let completed = json!({
            "spec": {"containers": [{"name": "job"}]},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "job", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
        });
        assert_eq!(row(&completed)[1..3], [json!("0/1"), json!("Completed")]);

        let killed = json!({
            "spec": {"containers": [{"name": "job"}]},
            "status": {"phase": "Failed", "containerStatuses": [
                {"name": "job", "state": {"terminated": {"exitCode": 143, "signal": 15}}}]}
        });
        assert_eq!(row(&killed)[2], json!("Signal:15"));

        let evicted = json!({"status": {"phase": "Failed", "reason": "Evicted"}});
        assert_eq!(row(&evicted)[2], json!("Evicted"));
    }

    #[test]
    fn completed_container_next_to_a_running_one() {
        let pod = |ready: &str| {
            json!({
                "spec": {"containers": [{"name": "done"}, {"name": "server"}]},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": ready}],
                           "containerStatuses": [
                    {"name": "done", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
                    {"name": "server", "ready": true, "state": {"running": {}}}]}
            })
        };
        assert_eq!(row(&pod("True"))[1..3], [json!("1/2"), json!("Running")]);
        assert_eq!(row(&pod("False"))[1..3], [json!("1/2"), json!("NotReady")]);
    }

    #[test]
    fn terminating_pod() {
        let pod = json!({
            "metadata": {"name": "web-1", "creationTimestamp": "2024-04-21T12:00:00Z",
                         "deletionTimestamp": "2024-05-01T12:00:30Z"},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "web"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.4",
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                                              "state": {"running": {}}}]}
        });
        assert_eq!(
            row(&pod),
            [
                json!("web-1"),
                json!("1/1"),
                json!("Terminating"),
                json!("0"),
                json!("10d"),
                json!("10.0.0.4"),
                json!("edge-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn deleted_pod_on_lost_node_is_unknown_and_finished_pod_keeps_its_status() {
        let lost = json!({"metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z"},
                          "status": {"phase": "Running", "reason": "NodeLost"}});
        assert_eq!(row(&lost)[2], json!("Unknown"));
        let lost_alive = json!({"status": {"phase": "Running", "reason": "NodeLost"}});
        assert_eq!(row(&lost_alive)[2], json!("NodeLost"));
        let done = json!({"metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z"},
                          "status": {"phase": "Succeeded"}});
        assert_eq!(row(&done)[2], json!("Succeeded"));
    }

    #[test]
    fn scheduling_gated_pod() {
        let pod = json!({"spec": {"containers": [{"name": "c"}]},
                         "status": {"phase": "Pending",
                                    "conditions": [{"type": "PodScheduled", "status": "False",
                                                    "reason": "SchedulingGated"}]}});
        assert_eq!(row(&pod)[2], json!("SchedulingGated"));
    }

    #[test]
    fn nominated_node_and_partial_gates() {
        let pod = json!({
            "spec": {"containers": [], "readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}]},
            "status": {"phase": "Pending", "nominatedNodeName": "edge-9", "podIPs": [{"ip": "10.1.1.1"}],
                       "conditions": [{"type": "a", "status": "True"}, {"type": "b", "status": "False"}]}
        });
        assert_eq!(row(&pod)[5..], [json!("10.1.1.1"), json!("<none>"), json!("edge-9"), json!("1/2")]);
    }
}
