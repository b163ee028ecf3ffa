//! The controllers' state machines, driven without a store: a simulated
//! cluster applies their plans to the world, a simulated kubelet makes pods
//! run and become ready, and a fake clock moves time.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeMap;

use bytes::Bytes;
use edgehive_store::Object;
use edgehive_store::resources::{
    CONTROLLER_REVISIONS, CRON_JOBS, DAEMON_SETS, DEPLOYMENTS, JOBS, NODES, POD_DISRUPTION_BUDGETS, PODS, REPLICA_SETS,
    ResourceDef, STATEFUL_SETS,
};
use edgehive_workloads::plan::{Action, Plan};
use edgehive_workloads::template::POD_TEMPLATE_HASH;
use edgehive_workloads::world::World;
use edgehive_workloads::{cronjob, daemonset, deployment, disruption, job, replicaset, statefulset};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// A cluster without a store: objects by key, revisions, uids.
struct Sim {
    world: World,
    objects: BTreeMap<(usize, String, String), Value>,
    rev: u64,
    next_id: u64,
    now: OffsetDateTime,
    /// Pods become Running and Ready when the kubelet step runs.
    kubelet: bool,
    /// Writes made, by verb and resource.
    writes: Vec<(String, &'static str)>,
    /// How a Job's running pod ends on the next kubelet step.
    job_exit: &'static str,
}

fn id(res: &'static ResourceDef) -> usize {
    std::ptr::from_ref(res) as usize
}

impl Sim {
    fn new() -> Sim {
        Sim {
            world: World::default(),
            objects: BTreeMap::new(),
            rev: 1,
            next_id: 0,
            now: OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000),
            kubelet: true,
            writes: Vec::new(),
            job_exit: "Succeeded",
        }
    }

    fn store(&mut self, res: &'static ResourceDef, mut v: Value) {
        self.rev += 1;
        v["metadata"]["resourceVersion"] = json!(self.rev.to_string());
        let ns = v["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let name = v["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let key = res.key(&ns, &name);
        let obj = Object::from_stored(res, key, self.rev, Bytes::from(serde_json::to_vec(&v).unwrap()));
        self.world.upsert(&obj);
        self.objects.insert((id(res), ns, name), v);
    }

    /// Creates as the API would: defaults and validation first.
    fn create(&mut self, res: &'static ResourceDef, mut v: Value) {
        edgehive_registry::admit::create(res, &mut v).unwrap();
        self.next_id += 1;
        if v["metadata"].get("name").is_none() {
            let prefix = v["metadata"]["generateName"].as_str().unwrap_or("x-").to_string();
            v["metadata"]["name"] = json!(format!("{prefix}{:05}", self.next_id));
        }
        if v["metadata"].get("uid").is_none() {
            v["metadata"]["uid"] = json!(format!("uid-{}", self.next_id));
        }
        v["metadata"]["creationTimestamp"] = json!(edgehive_store::rfc3339(self.now));
        v["metadata"]["generation"] = json!(1);
        self.store(res, v);
    }

    fn get(&self, res: &'static ResourceDef, ns: &str, name: &str) -> Option<&Value> {
        self.objects.get(&(id(res), ns.to_string(), name.to_string()))
    }

    fn list(&self, res: &'static ResourceDef) -> Vec<&Value> {
        self.objects.iter().filter(|((r, _, _), _)| *r == id(res)).map(|(_, v)| v).collect()
    }

    fn keys(&self, res: &'static ResourceDef) -> Vec<(String, String)> {
        self.objects.keys().filter(|(r, _, _)| *r == id(res)).map(|(_, ns, n)| (ns.clone(), n.clone())).collect()
    }

    fn apply(&mut self, plan: Plan) -> usize {
        let n = plan.actions.len();
        for a in plan.actions {
            self.writes.push((a.verb().to_string(), a.resource().plural));
            match a {
                Action::Create { res, object } => self.create(res, object),
                Action::Patch { res, namespace, name, uid, rev, patch } => {
                    let Some(cur) = self.get(res, &namespace, &name).cloned() else { continue };
                    let cur_rev: u64 = cur["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
                    if cur["metadata"]["uid"] != uid.as_str() || rev.is_some_and(|r| r != cur_rev) {
                        continue;
                    }
                    let mut new = cur.clone();
                    edgehive_registry::patch::merge_patch(&mut new, &patch);
                    let spec_changed = new.get("spec") != cur.get("spec");
                    if spec_changed {
                        let g = new["metadata"]["generation"].as_i64().unwrap_or(1);
                        new["metadata"]["generation"] = json!(g + 1);
                    }
                    if new != cur {
                        self.store(res, new);
                    }
                }
                Action::Delete { res, namespace, name, uid, .. } => {
                    let key = (id(res), namespace.clone(), name.clone());
                    if self.objects.get(&key).is_some_and(|v| v["metadata"]["uid"] == uid.as_str()) {
                        let v = self.objects.remove(&key).unwrap();
                        self.rev += 1;
                        let obj = Object::from_stored(
                            res,
                            res.key(&namespace, &name),
                            self.rev,
                            Bytes::from(serde_json::to_vec(&v).unwrap()),
                        );
                        self.world.remove(&obj, true);
                    }
                }
            }
        }
        n
    }

    /// The kubelet: every pod not yet running is Running and Ready now.
    fn run_pods(&mut self) {
        if !self.kubelet {
            return;
        }
        let pods: Vec<Value> = self.list(&PODS).into_iter().cloned().collect();
        for mut p in pods {
            let of_job = p["metadata"]["ownerReferences"][0]["kind"] == "Job";
            if p["status"]["phase"] == "Running" && of_job {
                let exit = if self.job_exit == "Succeeded" { 0 } else { 1 };
                p["status"] = json!({"phase": self.job_exit, "containerStatuses": [{"name": "c", "restartCount": 0,
                    "state": {"terminated": {"exitCode": exit, "finishedAt": edgehive_store::rfc3339(self.now)}}}]});
                self.store(&PODS, p);
                continue;
            }
            if p["status"]["phase"] != "Pending" && p["status"].get("phase").is_some() {
                continue;
            }
            if p["spec"].get("nodeName").is_none() {
                p["spec"]["nodeName"] = json!("edge-1");
            }
            p["status"] = json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": edgehive_store::rfc3339(self.now)}]});
            self.store(&PODS, p);
        }
    }

    /// One round: every ReplicaSet and Deployment synced once, their plans applied.
    fn round(&mut self) -> usize {
        let mut writes = 0;
        let deployments: Vec<(String, String)> = self
            .list(&DEPLOYMENTS)
            .iter()
            .map(|d| {
                (d["metadata"]["namespace"].as_str().unwrap().into(), d["metadata"]["name"].as_str().unwrap().into())
            })
            .collect();
        for (ns, name) in deployments {
            let plan = deployment::sync_all(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        let sets: Vec<(String, String)> = self
            .list(&REPLICA_SETS)
            .iter()
            .map(|d| {
                (d["metadata"]["namespace"].as_str().unwrap().into(), d["metadata"]["name"].as_str().unwrap().into())
            })
            .collect();
        for (ns, name) in sets {
            let plan = replicaset::sync(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        let daemons: Vec<(String, String)> = self
            .list(&DAEMON_SETS)
            .iter()
            .map(|d| {
                (d["metadata"]["namespace"].as_str().unwrap().into(), d["metadata"]["name"].as_str().unwrap().into())
            })
            .collect();
        for (ns, name) in daemons {
            let plan = daemonset::sync(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        for (ns, name) in self.keys(&STATEFUL_SETS) {
            let plan = statefulset::sync(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        for (ns, name) in self.keys(&POD_DISRUPTION_BUDGETS) {
            let plan = disruption::sync(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        let jobs: Vec<(String, String)> = self
            .list(&JOBS)
            .iter()
            .map(|d| {
                (d["metadata"]["namespace"].as_str().unwrap().into(), d["metadata"]["name"].as_str().unwrap().into())
            })
            .collect();
        for (ns, name) in jobs {
            let plan = job::sync(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        let crons: Vec<(String, String)> = self
            .list(&CRON_JOBS)
            .iter()
            .map(|d| {
                (d["metadata"]["namespace"].as_str().unwrap().into(), d["metadata"]["name"].as_str().unwrap().into())
            })
            .collect();
        for (ns, name) in crons {
            let plan = cronjob::sync(&self.world, &ns, &name, self.now);
            writes += self.apply(plan);
        }
        self.run_pods();
        writes
    }

    /// Rounds until nothing is written; checks `invariant` after each.
    fn settle(&mut self, mut invariant: impl FnMut(&Sim)) -> usize {
        for i in 0..200 {
            let n = self.round();
            invariant(self);
            if n == 0 {
                return i;
            }
        }
        panic!("did not settle in 200 rounds");
    }

    fn pods_of(&self, rs_name: &str) -> Vec<&Value> {
        self.list(&PODS).into_iter().filter(|p| p["metadata"]["ownerReferences"][0]["name"] == rs_name).collect()
    }

    fn images(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for p in self.list(&PODS) {
            if p["metadata"].get("deletionTimestamp").is_none() {
                *out.entry(p["spec"]["containers"][0]["image"].as_str().unwrap().to_string()).or_default() += 1;
            }
        }
        out
    }
}

fn deployment(name: &str, replicas: i64, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image}]}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
    })
}

fn set_template_image(sim: &mut Sim, name: &str, image: &str) {
    let mut d = sim.get(&DEPLOYMENTS, "default", name).unwrap().clone();
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
    let g = d["metadata"]["generation"].as_i64().unwrap();
    d["metadata"]["generation"] = json!(g + 1);
    sim.store(&DEPLOYMENTS, d);
}

fn replica_sets(sim: &Sim) -> Vec<(String, i64, String)> {
    sim.list(&REPLICA_SETS)
        .iter()
        .map(|rs| {
            (
                rs["metadata"]["name"].as_str().unwrap().to_string(),
                rs["spec"]["replicas"].as_i64().unwrap(),
                rs["metadata"]["annotations"][deployment::REVISION].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_deployment_makes_a_hashed_replica_set_and_its_pods_and_reports_them() {
    let mut sim = Sim::new();
    sim.create(&DEPLOYMENTS, deployment("web", 3, "busybox:1"));
    sim.settle(|_| {});
    let sets = replica_sets(&sim);
    assert_eq!(sets.len(), 1, "{sets:?}");
    let rs = sim.list(&REPLICA_SETS)[0].clone();
    let hash = rs["metadata"]["labels"][POD_TEMPLATE_HASH].as_str().unwrap().to_string();
    assert_eq!(rs["metadata"]["name"], format!("web-{hash}"));
    assert_eq!(rs["spec"]["selector"]["matchLabels"][POD_TEMPLATE_HASH], hash.as_str());
    assert_eq!(rs["spec"]["template"]["metadata"]["labels"][POD_TEMPLATE_HASH], hash.as_str());
    assert_eq!(rs["metadata"]["annotations"][deployment::REVISION], "1");
    assert_eq!(rs["metadata"]["ownerReferences"][0]["kind"], "Deployment");
    assert_eq!(rs["metadata"]["ownerReferences"][0]["controller"], true);
    let pods = sim.pods_of(rs["metadata"]["name"].as_str().unwrap());
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().all(|p| p["metadata"]["labels"][POD_TEMPLATE_HASH] == hash.as_str()));
    assert_eq!(rs["status"]["readyReplicas"], 3);
    let d = sim.get(&DEPLOYMENTS, "default", "web").unwrap();
    assert_eq!(d["metadata"]["annotations"][deployment::REVISION], "1");
    for (k, v) in [("replicas", 3), ("updatedReplicas", 3), ("readyReplicas", 3), ("availableReplicas", 3)] {
        assert_eq!(d["status"][k], v, "{k}: {}", d["status"]);
    }
    assert_eq!(d["status"]["observedGeneration"], 1);
    let conds = d["status"]["conditions"].as_array().unwrap();
    let reason = |t: &str| conds.iter().find(|c| c["type"] == t).map(|c| c["reason"].clone());
    assert_eq!(reason("Available"), Some(json!("MinimumReplicasAvailable")));
    assert_eq!(reason("Progressing"), Some(json!("NewReplicaSetAvailable")));
    // An annotation added to the Deployment later follows to its ReplicaSet.
    let mut d = sim.get(&DEPLOYMENTS, "default", "web").unwrap().clone();
    d["metadata"]["annotations"][replicaset::REPLACE_OFFLINE_AFTER] = json!("300");
    sim.store(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    let rs = &sim.list(&REPLICA_SETS)[0];
    assert_eq!(rs["metadata"]["annotations"][replicaset::REPLACE_OFFLINE_AFTER], "300", "{}", rs["metadata"]);
}

#[test]
fn set_image_with_max_unavailable_zero_rolls_one_pod_at_a_time_and_undo_brings_the_old_set_back() {
    let mut sim = Sim::new();
    let mut d = deployment("web", 3, "busybox:1");
    d["spec"]["strategy"]["rollingUpdate"] = json!({"maxSurge": 1, "maxUnavailable": 0});
    sim.create(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    let first = replica_sets(&sim)[0].0.clone();
    set_template_image(&mut sim, "web", "busybox:2");
    // Never fewer than 3 ready pods, never more than 4 pods.
    sim.settle(|s| {
        let live: Vec<&Value> =
            s.list(&PODS).into_iter().filter(|p| p["metadata"].get("deletionTimestamp").is_none()).collect();
        let ready = live.iter().filter(|p| p["status"]["phase"] == "Running").count();
        assert!(live.len() <= 4, "{} pods", live.len());
        assert!(ready >= 3, "{ready} ready");
    });
    assert_eq!(sim.images(), BTreeMap::from([("busybox:2".to_string(), 3)]));
    let sets = replica_sets(&sim);
    assert_eq!(sets.len(), 2, "{sets:?}");
    let old = sets.iter().find(|s| s.0 == first).unwrap();
    assert_eq!((old.1, old.2.as_str()), (0, "1"));
    let new = sets.iter().find(|s| s.0 != first).unwrap();
    assert_eq!((new.1, new.2.as_str()), (3, "2"));
    assert_eq!(sim.get(&DEPLOYMENTS, "default", "web").unwrap()["metadata"]["annotations"][deployment::REVISION], "2");
    // `kubectl rollout undo`: the old template back.
    set_template_image(&mut sim, "web", "busybox:1");
    sim.settle(|_| {});
    assert_eq!(sim.images(), BTreeMap::from([("busybox:1".to_string(), 3)]));
    let sets = replica_sets(&sim);
    assert_eq!(sets.len(), 2, "no third ReplicaSet: {sets:?}");
    let back = sets.iter().find(|s| s.0 == first).unwrap();
    assert_eq!((back.1, back.2.as_str()), (3, "3"));
    let rs = sim.get(&REPLICA_SETS, "default", &first).unwrap();
    assert_eq!(rs["metadata"]["annotations"][deployment::REVISION_HISTORY], "1");
}

#[test]
fn recreate_stops_every_old_pod_before_a_new_one_starts() {
    let mut sim = Sim::new();
    let mut d = deployment("db", 2, "db:1");
    d["spec"]["strategy"] = json!({"type": "Recreate"});
    sim.create(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    set_template_image(&mut sim, "db", "db:2");
    sim.settle(|s| {
        let images = s.images();
        assert!(images.len() <= 1, "old and new at once: {images:?}");
    });
    assert_eq!(sim.images(), BTreeMap::from([("db:2".to_string(), 2)]));
}

#[test]
fn scaling_to_zero_and_back_and_pausing() {
    let mut sim = Sim::new();
    sim.create(&DEPLOYMENTS, deployment("web", 3, "a"));
    sim.settle(|_| {});
    let mut d = sim.get(&DEPLOYMENTS, "default", "web").unwrap().clone();
    d["spec"]["replicas"] = json!(0);
    sim.store(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    assert!(sim.images().is_empty());
    let mut d = sim.get(&DEPLOYMENTS, "default", "web").unwrap().clone();
    d["spec"]["replicas"] = json!(5);
    d["spec"]["paused"] = json!(true);
    sim.store(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    // Paused: scaling still happens, a template change does not roll.
    assert_eq!(sim.images(), BTreeMap::from([("a".to_string(), 5)]));
    set_template_image(&mut sim, "web", "b");
    sim.settle(|_| {});
    assert_eq!(sim.images(), BTreeMap::from([("a".to_string(), 5)]));
    let d = sim.get(&DEPLOYMENTS, "default", "web").unwrap();
    let progressing =
        d["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Progressing").unwrap();
    assert_eq!(progressing["reason"], "DeploymentPaused");
    let mut d = d.clone();
    d["spec"]["paused"] = json!(false);
    sim.store(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    assert_eq!(sim.images(), BTreeMap::from([("b".to_string(), 5)]));
}

#[test]
fn a_rollout_that_does_not_progress_exceeds_its_deadline_on_the_fake_clock() {
    let mut sim = Sim::new();
    let mut d = deployment("web", 2, "a");
    d["spec"]["progressDeadlineSeconds"] = json!(60);
    sim.create(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    sim.kubelet = false;
    set_template_image(&mut sim, "web", "never-starts");
    sim.settle(|_| {});
    let reason = |sim: &Sim| {
        let d = sim.get(&DEPLOYMENTS, "default", "web").unwrap();
        d["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Progressing").unwrap()["reason"]
            .clone()
    };
    assert_eq!(reason(&sim), "ReplicaSetUpdated");
    let plan = deployment::sync_all(&sim.world, "default", "web", sim.now);
    assert!(plan.requeue_after.is_some_and(|d| d.as_secs() <= 60), "{:?}", plan.requeue_after);
    sim.now += time::Duration::seconds(61);
    sim.settle(|_| {});
    assert_eq!(reason(&sim), "ProgressDeadlineExceeded");
}

#[test]
fn old_replica_sets_beyond_the_history_limit_are_deleted() {
    let mut sim = Sim::new();
    let mut d = deployment("web", 1, "v0");
    d["spec"]["revisionHistoryLimit"] = json!(2);
    sim.create(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    for i in 1..=5 {
        set_template_image(&mut sim, "web", &format!("v{i}"));
        sim.settle(|_| {});
    }
    let sets = replica_sets(&sim);
    assert_eq!(sets.len(), 3, "new + 2 old: {sets:?}");
    let mut revisions: Vec<i64> = sets.iter().map(|s| s.2.parse().unwrap()).collect();
    revisions.sort();
    assert_eq!(revisions, [4, 5, 6]);
}

#[test]
fn resizing_during_a_rollout_is_proportional() {
    let mut sim = Sim::new();
    let mut d = deployment("web", 10, "a");
    d["spec"]["strategy"]["rollingUpdate"] = json!({"maxSurge": 3, "maxUnavailable": 2});
    sim.create(&DEPLOYMENTS, d);
    sim.settle(|_| {});
    sim.kubelet = false;
    set_template_image(&mut sim, "web", "b");
    sim.round();
    sim.round();
    let before: i64 = replica_sets(&sim).iter().map(|s| s.1).sum();
    assert!(replica_sets(&sim).iter().all(|s| s.1 > 0), "{:?}", replica_sets(&sim));
    let mut d = sim.get(&DEPLOYMENTS, "default", "web").unwrap().clone();
    d["spec"]["replicas"] = json!(20);
    sim.store(&DEPLOYMENTS, d);
    sim.round();
    let sets = replica_sets(&sim);
    let after: i64 = sets.iter().map(|s| s.1).sum();
    assert_eq!(after, 23, "20 + surge 3 (was {before}): {sets:?}");
    assert!(sets.iter().all(|s| s.1 > 0), "both sets grew: {sets:?}");
}

fn replica_set(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}},
    })
}

fn pod(name: &str, labels: Value, status: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": status})
}

#[test]
fn a_replica_set_adopts_matching_orphans_releases_strays_and_deletes_the_least_useful_first() {
    let mut sim = Sim::new();
    sim.kubelet = false;
    sim.create(&REPLICA_SETS, replica_set("rs", 2));
    let t0 = sim.now - time::Duration::hours(1);
    let ready = |since: OffsetDateTime| json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": edgehive_store::rfc3339(since)}]});
    sim.create(&PODS, pod("old-ready", json!({"app": "rs"}), ready(t0)));
    sim.create(&PODS, pod("new-ready", json!({"app": "rs"}), ready(sim.now)));
    sim.create(&PODS, pod("pending", json!({"app": "rs"}), json!({"phase": "Pending"})));
    sim.create(&PODS, pod("other", json!({"app": "other"}), ready(t0)));
    let plan = replicaset::sync(&sim.world, "default", "rs", sim.now);
    let adopted: Vec<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Patch { res, name, patch, .. } if std::ptr::eq(*res, &PODS) => {
                assert_eq!(patch["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
                Some(name.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(adopted, ["new-ready", "old-ready", "pending"]);
    // Three claimed, two wanted: the pending one goes first.
    let deleted: Vec<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, ["pending"]);
    sim.apply(plan);
    // Scaled to one: the pod ready for less time goes.
    let mut rs = sim.get(&REPLICA_SETS, "default", "rs").unwrap().clone();
    rs["spec"]["replicas"] = json!(1);
    sim.store(&REPLICA_SETS, rs);
    sim.apply(replicaset::sync(&sim.world, "default", "rs", sim.now));
    assert!(sim.get(&PODS, "default", "new-ready").is_none());
    assert!(sim.get(&PODS, "default", "old-ready").is_some());
    // A pod whose labels no longer match is released.
    let mut p = sim.get(&PODS, "default", "old-ready").unwrap().clone();
    p["metadata"]["labels"]["app"] = json!("moved");
    sim.store(&PODS, p);
    let plan = replicaset::sync(&sim.world, "default", "rs", sim.now);
    assert!(plan.actions.iter().any(|a| matches!(a,
        Action::Patch { name, patch, .. } if name == "old-ready" && patch["metadata"]["ownerReferences"].is_null())));
    assert!(plan.actions.iter().any(|a| matches!(a, Action::Create { .. })), "a replacement");
}

#[test]
fn pods_of_an_offline_node_stay_counted_and_deleted_pods_are_replaced() {
    let mut sim = Sim::new();
    sim.create(&REPLICA_SETS, replica_set("rs", 2));
    sim.settle(|_| {});
    assert_eq!(sim.list(&PODS).len(), 2);
    // The node went offline: its pods are no longer ready, but still there.
    for mut p in sim.list(&PODS).into_iter().cloned().collect::<Vec<_>>() {
        p["status"]["conditions"][0]["status"] = json!("False");
        sim.store(&PODS, p);
    }
    sim.kubelet = false;
    sim.settle(|_| {});
    assert_eq!(sim.list(&PODS).len(), 2, "no replacements for an outage");
    let rs = sim.get(&REPLICA_SETS, "default", "rs").unwrap();
    assert_eq!(rs["status"]["replicas"], 2);
    assert!(rs["status"].get("readyReplicas").is_none_or(Value::is_null), "{}", rs["status"]);
    // A pod being deleted is replaced.
    let mut p = sim.list(&PODS)[0].clone();
    p["metadata"]["deletionTimestamp"] = json!(edgehive_store::rfc3339(sim.now));
    sim.store(&PODS, p);
    sim.settle(|_| {});
    assert_eq!(sim.list(&PODS).len(), 3);
}

#[test]
fn a_set_that_asks_for_it_replaces_the_pods_of_a_node_offline_long_enough_and_sheds_the_surplus_on_return() {
    let mut sim = Sim::new();
    node(&mut sim, "edge-1", json!({}), json!([]));
    let ready = |sim: &mut Sim, status: &str| {
        let mut n = sim.get(&NODES, "", "edge-1").unwrap().clone();
        n["status"] = json!({"conditions": [{"type": "Ready", "status": status,
            "lastTransitionTime": edgehive_store::rfc3339(sim.now)}]});
        sim.store(&NODES, n);
    };
    ready(&mut sim, "True");
    let mut rs = replica_set("rs", 2);
    rs["metadata"]["annotations"] = json!({replicaset::REPLACE_OFFLINE_AFTER: "60"});
    sim.create(&REPLICA_SETS, rs);
    sim.settle(|_| {});
    let originals: Vec<String> =
        sim.list(&PODS).iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(originals.len(), 2);
    // Offline: nothing happens within the minute, and the controller asks to look again then.
    sim.kubelet = false;
    ready(&mut sim, "Unknown");
    sim.settle(|_| {});
    assert_eq!(sim.list(&PODS).len(), 2, "not yet");
    let plan = replicaset::sync(&sim.world, "default", "rs", sim.now);
    assert_eq!(plan.requeue_after, Some(std::time::Duration::from_secs(60)));
    sim.now += time::Duration::seconds(61);
    sim.settle(|_| {});
    let pods = sim.list(&PODS);
    assert_eq!(pods.len(), 4, "two replacements beside the offline copies");
    for name in &originals {
        assert!(sim.get(&PODS, "default", name).unwrap()["metadata"].get("deletionTimestamp").is_none(), "{name} kept");
    }
    // Back online: the surplus goes, the replacements (newest, ready the shortest) first.
    ready(&mut sim, "True");
    sim.kubelet = true;
    sim.settle(|_| {});
    let mut left: Vec<String> =
        sim.list(&PODS).iter().map(|p| p["metadata"]["name"].as_str().unwrap().to_string()).collect();
    left.sort();
    assert_eq!(left, originals);
}

#[test]
fn available_waits_for_min_ready_seconds_and_asks_to_look_again() {
    let mut sim = Sim::new();
    let mut rs = replica_set("rs", 1);
    rs["spec"]["minReadySeconds"] = json!(30);
    sim.create(&REPLICA_SETS, rs);
    sim.settle(|_| {});
    let plan = replicaset::sync(&sim.world, "default", "rs", sim.now);
    assert!(plan.requeue_after.is_some_and(|d| d.as_secs() <= 30 && d.as_secs() >= 29), "{:?}", plan.requeue_after);
    assert!(sim.get(&REPLICA_SETS, "default", "rs").unwrap()["status"].get("availableReplicas").is_none());
    sim.now += time::Duration::seconds(30);
    sim.settle(|_| {});
    assert_eq!(sim.get(&REPLICA_SETS, "default", "rs").unwrap()["status"]["availableReplicas"], 1);
}

#[test]
fn creations_and_deletions_per_sync_are_bounded() {
    let mut sim = Sim::new();
    sim.create(&REPLICA_SETS, replica_set("big", 1200));
    let plan = replicaset::sync(&sim.world, "default", "big", sim.now);
    let creates = plan.actions.iter().filter(|a| matches!(a, Action::Create { .. })).count();
    assert_eq!(creates, replicaset::BURST_REPLICAS);
}

fn node(sim: &mut Sim, name: &str, labels: Value, taints: Value) {
    let v = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}});
    match sim.get(&NODES, "", name).cloned() {
        Some(mut cur) => {
            cur["metadata"]["labels"] = v["metadata"]["labels"].clone();
            cur["spec"] = v["spec"].clone();
            sim.store(&NODES, cur);
        }
        None => sim.create(&NODES, v),
    }
}

fn daemon_set(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"nodeSelector": {"tier": "edge"}, "containers": [{"name": "c", "image": image}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "revisionHistoryLimit": 10},
    })
}

/// node -> image of the live daemon pods.
fn daemons(sim: &Sim) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in sim.list(&PODS) {
        if p["metadata"].get("deletionTimestamp").is_none() && p["metadata"]["labels"]["app"] == "agent" {
            let node = p["spec"]["nodeName"].as_str().unwrap().to_string();
            assert!(
                out.insert(node.clone(), p["spec"]["containers"][0]["image"].as_str().unwrap().to_string()).is_none(),
                "two pods on {node}"
            );
        }
    }
    out
}

#[test]
fn a_daemon_set_puts_one_pod_on_each_matching_node_and_follows_nodes_that_come_go_and_change() {
    let mut sim = Sim::new();
    node(&mut sim, "e1", json!({"tier": "edge"}), json!([]));
    node(&mut sim, "e2", json!({"tier": "edge"}), json!([]));
    node(&mut sim, "cloud", json!({"tier": "cloud"}), json!([]));
    node(
        &mut sim,
        "gpu",
        json!({"tier": "edge"}),
        json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    );
    // Cordoned and not-ready nodes keep their daemons.
    node(
        &mut sim,
        "cordoned",
        json!({"tier": "edge"}),
        json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]),
    );
    sim.create(&DAEMON_SETS, daemon_set("agent:1"));
    sim.settle(|_| {});
    let nodes: Vec<String> = daemons(&sim).into_keys().collect();
    assert_eq!(nodes, ["cordoned", "e1", "e2"]);
    let pod = sim.list(&PODS)[0].clone();
    assert_eq!(
        pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"][0]["values"][0],
        pod["spec"]["nodeName"]
    );
    let tolerations = pod["spec"]["tolerations"].as_array().unwrap();
    assert!(tolerations.iter().any(|t| t["key"] == "node.kubernetes.io/unreachable" && t["effect"] == "NoExecute"));
    assert!(pod["metadata"]["labels"][daemonset::REVISION_HASH].is_string());
    let ds = sim.get(&DAEMON_SETS, "default", "agent").unwrap();
    for (k, v) in [
        ("desiredNumberScheduled", 3),
        ("currentNumberScheduled", 3),
        ("numberReady", 3),
        ("updatedNumberScheduled", 3),
        ("numberAvailable", 3),
    ] {
        assert_eq!(ds["status"][k], v, "{k}: {}", ds["status"]);
    }
    // A node that joins gets its pod; one that stops matching loses it.
    node(&mut sim, "e3", json!({"tier": "edge"}), json!([]));
    node(&mut sim, "e1", json!({"tier": "retired"}), json!([]));
    sim.settle(|_| {});
    let nodes: Vec<String> = daemons(&sim).into_keys().collect();
    assert_eq!(nodes, ["cordoned", "e2", "e3"]);
    // A pod deleted by hand comes back.
    let victim = sim.list(&PODS).into_iter().find(|p| p["spec"]["nodeName"] == "e2").unwrap().clone();
    let (name, uid) = (victim["metadata"]["name"].as_str().unwrap(), victim["metadata"]["uid"].as_str().unwrap());
    sim.apply(Plan { actions: vec![Action::delete(&PODS, "default", name, uid)], requeue_after: None });
    sim.settle(|_| {});
    assert!(daemons(&sim).contains_key("e2"));
}

#[test]
fn a_daemon_set_rolls_node_by_node_within_max_unavailable_and_undo_reuses_the_old_revision() {
    let mut sim = Sim::new();
    for i in 0..5 {
        node(&mut sim, &format!("e{i}"), json!({"tier": "edge"}), json!([]));
    }
    sim.create(&DAEMON_SETS, daemon_set("agent:1"));
    sim.settle(|_| {});
    let revision = |sim: &Sim| {
        let mut r: Vec<(String, i64)> = sim
            .list(&CONTROLLER_REVISIONS)
            .iter()
            .map(|r| (r["metadata"]["name"].as_str().unwrap().to_string(), r["revision"].as_i64().unwrap()))
            .collect();
        r.sort_by_key(|x| x.1);
        r
    };
    assert_eq!(revision(&sim).len(), 1);
    let first = revision(&sim)[0].0.clone();
    let cr = sim.get(&CONTROLLER_REVISIONS, "default", &first).unwrap();
    assert_eq!(cr["data"]["spec"]["template"]["$patch"], "replace");
    let set_image = |sim: &mut Sim, image: &str| {
        let mut ds = sim.get(&DAEMON_SETS, "default", "agent").unwrap().clone();
        ds["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
        let g = ds["metadata"]["generation"].as_i64().unwrap();
        ds["metadata"]["generation"] = json!(g + 1);
        sim.store(&DAEMON_SETS, ds);
    };
    set_image(&mut sim, "agent:2");
    sim.settle(|s| {
        let running = daemons(s);
        assert!(running.len() >= 4, "more than one node without its daemon: {running:?}");
    });
    assert!(daemons(&sim).values().all(|i| i == "agent:2"), "{:?}", daemons(&sim));
    assert_eq!(revision(&sim).len(), 2);
    // `rollout undo`: the old template; its revision becomes the newest.
    set_image(&mut sim, "agent:1");
    sim.settle(|_| {});
    assert!(daemons(&sim).values().all(|i| i == "agent:1"));
    let revs = revision(&sim);
    assert_eq!(revs.len(), 2, "{revs:?}");
    assert_eq!(revs[1], (first, 3));
}

fn job_object(name: &str, spec: Value) -> Value {
    let mut j = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}},
    });
    for (k, v) in spec.as_object().unwrap() {
        j["spec"][k] = v.clone();
    }
    j
}

fn job_status(sim: &Sim, name: &str) -> Value {
    sim.get(&JOBS, "default", name).unwrap()["status"].clone()
}

fn job_condition(sim: &Sim, name: &str, ty: &str) -> Option<Value> {
    job_status(sim, name)["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == ty).cloned())
}

#[test]
fn a_job_of_five_completions_two_at_a_time_completes_counting_each_pod_once() {
    let mut sim = Sim::new();
    sim.create(&JOBS, job_object("batch", json!({"completions": 5, "parallelism": 2})));
    let mut most_active = 0;
    sim.settle(|s| {
        let active = s.list(&PODS).iter().filter(|p| p["status"]["phase"] != "Succeeded").count();
        most_active = most_active.max(active);
    });
    assert!(most_active <= 2, "parallelism 2: {most_active} at once");
    let status = job_status(&sim, "batch");
    assert_eq!(status["succeeded"], 5, "{status}");
    assert!(status.get("active").is_none(), "{status}");
    assert_eq!(job_condition(&sim, "batch", "Complete").unwrap()["status"], "True");
    assert!(status["completionTime"].is_string() && status["startTime"].is_string());
    assert_eq!(sim.list(&PODS).len(), 5, "no extra pods");
    // Every pod was counted and let go of.
    assert!(sim.list(&PODS).iter().all(|p| p["metadata"].get("finalizers").is_none_or(Value::is_null)));
    assert!(status["uncountedTerminatedPods"].as_object().is_none_or(|m| m.is_empty()), "{status}");
}

#[test]
fn a_job_past_its_backoff_limit_fails_and_replacements_wait_for_the_back_off() {
    let mut sim = Sim::new();
    sim.job_exit = "Failed";
    sim.create(&JOBS, job_object("flaky", json!({"backoffLimit": 2})));
    sim.settle(|_| {});
    // One failure so far: the replacement waits 10 s.
    assert_eq!(sim.list(&PODS).len(), 1);
    assert_eq!(job_status(&sim, "flaky")["failed"], 1);
    let plan = job::sync(&sim.world, "default", "flaky", sim.now);
    assert!(plan.requeue_after.is_some_and(|d| d.as_secs() <= 10 && d.as_secs() >= 9), "{:?}", plan.requeue_after);
    sim.now += time::Duration::seconds(10);
    sim.settle(|_| {});
    assert_eq!(job_status(&sim, "flaky")["failed"], 2);
    sim.now += time::Duration::seconds(20);
    sim.settle(|_| {});
    assert_eq!(job_status(&sim, "flaky")["failed"], 3);
    let failed = job_condition(&sim, "flaky", "Failed").unwrap();
    assert_eq!((failed["status"].as_str(), failed["reason"].as_str()), (Some("True"), Some("BackoffLimitExceeded")));
    assert_eq!(sim.list(&PODS).len(), 3);
}

#[test]
fn a_job_past_its_deadline_fails_and_its_pods_go() {
    let mut sim = Sim::new();
    sim.kubelet = false;
    sim.create(&JOBS, job_object("slow", json!({"activeDeadlineSeconds": 30, "parallelism": 2, "completions": 4})));
    sim.settle(|_| {});
    assert_eq!(sim.list(&PODS).len(), 2);
    sim.now += time::Duration::seconds(31);
    sim.settle(|_| {});
    let failed = job_condition(&sim, "slow", "Failed").unwrap();
    assert_eq!(failed["reason"], "DeadlineExceeded");
    assert!(sim.list(&PODS).is_empty());
}

#[test]
fn an_indexed_job_gives_each_pod_its_index_and_a_finished_job_expires() {
    let mut sim = Sim::new();
    sim.create(
        &JOBS,
        job_object(
            "idx",
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed", "ttlSecondsAfterFinished": 60}),
        ),
    );
    sim.settle(|_| {});
    let mut indexes: Vec<String> = sim
        .list(&PODS)
        .iter()
        .map(|p| p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"].as_str().unwrap().to_string())
        .collect();
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    let pod = sim.list(&PODS)[0].clone();
    assert!(pod["spec"]["hostname"].as_str().unwrap().starts_with("idx-"));
    assert_eq!(pod["spec"]["containers"][0]["env"][0]["name"], "JOB_COMPLETION_INDEX");
    assert_eq!(job_status(&sim, "idx")["completedIndexes"], "0-2");
    assert!(job_condition(&sim, "idx", "Complete").is_some());
    assert!(sim.get(&JOBS, "default", "idx").is_some());
    sim.now += time::Duration::seconds(61);
    sim.settle(|_| {});
    assert!(sim.get(&JOBS, "default", "idx").is_none(), "expired");
}

#[test]
fn a_suspended_job_runs_nothing_until_resumed() {
    let mut sim = Sim::new();
    sim.create(&JOBS, job_object("later", json!({"suspend": true})));
    sim.settle(|_| {});
    assert!(sim.list(&PODS).is_empty());
    assert_eq!(job_condition(&sim, "later", "Suspended").unwrap()["status"], "True");
    let mut j = sim.get(&JOBS, "default", "later").unwrap().clone();
    j["spec"]["suspend"] = json!(false);
    sim.store(&JOBS, j);
    sim.settle(|_| {});
    assert_eq!(job_condition(&sim, "later", "Suspended").unwrap()["status"], "False");
    assert_eq!(job_status(&sim, "later")["succeeded"], 1);
}

fn cron_job(name: &str, schedule: &str, spec: Value) -> Value {
    let mut c = json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "x"}]}}}}},
    });
    for (k, v) in spec.as_object().unwrap() {
        c["spec"][k] = v.clone();
    }
    c
}

fn job_names(sim: &Sim) -> Vec<String> {
    let mut n: Vec<String> =
        sim.list(&JOBS).iter().map(|j| j["metadata"]["name"].as_str().unwrap().to_string()).collect();
    n.sort();
    n
}

#[test]
fn a_cron_job_every_minute_makes_jobs_and_keeps_its_history_limits() {
    let mut sim = Sim::new();
    sim.now = edgehive_store::parse_rfc3339("2026-11-24T10:00:30Z").unwrap();
    sim.create(&CRON_JOBS, cron_job("tick", "*/1 * * * *", json!({"successfulJobsHistoryLimit": 2})));
    sim.settle(|_| {});
    assert!(job_names(&sim).is_empty(), "nothing before the first minute");
    let plan = cronjob::sync(&sim.world, "default", "tick", sim.now);
    assert!(plan.requeue_after.is_some_and(|d| d.as_secs() <= 30), "{:?}", plan.requeue_after);
    for _ in 0..4 {
        sim.now += time::Duration::minutes(1);
        sim.settle(|_| {});
    }
    // Four ran; two kept.
    let minutes = |t: &str| edgehive_store::parse_rfc3339(t).unwrap().unix_timestamp() / 60;
    assert_eq!(
        job_names(&sim),
        [format!("tick-{}", minutes("2026-11-24T10:03:00Z")), format!("tick-{}", minutes("2026-11-24T10:04:00Z"))]
    );
    let j = sim.list(&JOBS)[0].clone();
    assert_eq!(j["metadata"]["ownerReferences"][0]["kind"], "CronJob");
    assert!(j["metadata"]["annotations"][cronjob::SCHEDULED_TIMESTAMP].is_string());
    let cj = sim.get(&CRON_JOBS, "default", "tick").unwrap();
    assert_eq!(cj["status"]["lastScheduleTime"], "2026-11-24T10:04:00Z");
    assert!(cj["status"]["lastSuccessfulTime"].is_string());
    assert!(cj["status"].get("active").is_none(), "{}", cj["status"]);
}

#[test]
fn concurrency_policies_and_starting_deadlines() {
    let mut sim = Sim::new();
    sim.kubelet = false;
    sim.now = edgehive_store::parse_rfc3339("2026-11-24T10:00:30Z").unwrap();
    sim.create(&CRON_JOBS, cron_job("forbid", "* * * * *", json!({"concurrencyPolicy": "Forbid"})));
    sim.create(&CRON_JOBS, cron_job("replace", "* * * * *", json!({"concurrencyPolicy": "Replace"})));
    sim.create(&CRON_JOBS, cron_job("late", "0 * * * *", json!({"startingDeadlineSeconds": 30})));
    sim.create(&CRON_JOBS, cron_job("off", "* * * * *", json!({"suspend": true})));
    for _ in 0..3 {
        sim.now += time::Duration::minutes(1);
        sim.settle(|_| {});
    }
    let names = job_names(&sim);
    let of = |p: &str| names.iter().filter(|n| n.starts_with(&format!("{p}-"))).count();
    assert_eq!(of("forbid"), 1, "Forbid waits for the running Job: {names:?}");
    assert_eq!(of("replace"), 1, "Replace keeps only the newest: {names:?}");
    assert!(names.iter().any(|n| n == &format!("replace-{}", sim.now.unix_timestamp() / 60)), "{names:?}");
    assert_eq!(of("off"), 0);
    let cj = sim.get(&CRON_JOBS, "default", "forbid").unwrap();
    assert_eq!(cj["status"]["active"].as_array().map(Vec::len), Some(1));
    // The hourly one: its time came while the cloud was away, past its deadline.
    sim.now = edgehive_store::parse_rfc3339("2026-11-24T11:00:45Z").unwrap();
    sim.settle(|_| {});
    assert_eq!(of_now(&sim, "late"), 0, "45 s late with a 30 s deadline: missed");
    sim.now = edgehive_store::parse_rfc3339("2026-11-24T12:00:20Z").unwrap();
    sim.settle(|_| {});
    assert_eq!(of_now(&sim, "late"), 1, "20 s late: run");
}

fn of_now(sim: &Sim, prefix: &str) -> usize {
    job_names(sim).iter().filter(|n| n.starts_with(&format!("{prefix}-"))).count()
}

fn stateful_set(replicas: i64, spec: Value) -> Value {
    let mut set = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "db:1"}]}},
        },
    });
    edgehive_registry::patch::merge_patch(&mut set["spec"], &spec);
    set
}

/// The set's live pods: name → (image, revision label).
fn members(sim: &Sim) -> BTreeMap<String, (String, String)> {
    sim.list(&PODS)
        .into_iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet")
        .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                (
                    p["spec"]["containers"][0]["image"].as_str().unwrap().to_string(),
                    p["metadata"]["labels"][daemonset::REVISION_HASH].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect()
}

fn set_status(sim: &Sim) -> Value {
    sim.get(&STATEFUL_SETS, "default", "db").unwrap()["status"].clone()
}

fn update_set(sim: &mut Sim, change: Value) {
    let mut set = sim.get(&STATEFUL_SETS, "default", "db").unwrap().clone();
    edgehive_registry::patch::merge_patch(&mut set["spec"], &change);
    let g = set["metadata"]["generation"].as_i64().unwrap();
    set["metadata"]["generation"] = json!(g + 1);
    sim.store(&STATEFUL_SETS, set);
}

fn image(i: &str) -> Value {
    json!({"template": {"spec": {"containers": [{"name": "c", "image": i}]}}})
}

#[test]
fn an_ordered_stateful_set_starts_each_pod_after_the_one_before_is_ready_and_names_them_for_good() {
    let mut sim = Sim::new();
    sim.kubelet = false;
    sim.create(&STATEFUL_SETS, stateful_set(3, json!({})));
    sim.settle(|_| {});
    // Only db-0, until it runs.
    assert_eq!(members(&sim).keys().collect::<Vec<_>>(), ["db-0"]);
    let p = sim.get(&PODS, "default", "db-0").unwrap();
    assert_eq!(p["spec"]["hostname"], "db-0");
    assert_eq!(p["spec"]["subdomain"], "db");
    assert_eq!(p["metadata"]["labels"][statefulset::POD_NAME], "db-0");
    assert_eq!(p["metadata"]["labels"][statefulset::POD_INDEX], "0");
    let status = set_status(&sim);
    let revision = status["updateRevision"].as_str().unwrap().to_string();
    assert!(revision.starts_with("db-"), "{revision}");
    assert_eq!(p["metadata"]["labels"][daemonset::REVISION_HASH], revision.as_str());
    assert_eq!(status["currentRevision"], revision.as_str());
    for step in 1..=3 {
        sim.kubelet = true;
        sim.run_pods();
        sim.kubelet = false;
        sim.settle(|_| {});
        let names: Vec<String> = members(&sim).into_keys().collect();
        let want: Vec<String> = (0..(step + 1).min(3)).map(|i| format!("db-{i}")).collect();
        assert_eq!(names, want);
    }
    let status = set_status(&sim);
    for (k, v) in [("replicas", 3), ("readyReplicas", 3), ("currentReplicas", 3), ("updatedReplicas", 3)] {
        assert_eq!(status[k], v, "{k}: {status}");
    }
    assert_eq!(status["availableReplicas"], 3);
    // A pod that failed is made again under its name; one whose node went
    // offline (not ready) is kept, and holds the pods after it.
    let mut p = sim.get(&PODS, "default", "db-1").unwrap().clone();
    p["status"] = json!({"phase": "Failed"});
    sim.store(&PODS, p);
    let mut p = sim.get(&PODS, "default", "db-2").unwrap().clone();
    let uid = p["metadata"]["uid"].clone();
    p["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]});
    sim.store(&PODS, p);
    sim.settle(|_| {});
    assert!(members(&sim).contains_key("db-1"), "db-1 is back: {:?}", members(&sim));
    assert_ne!(sim.get(&PODS, "default", "db-1").unwrap()["status"]["phase"], "Failed");
    assert_eq!(sim.get(&PODS, "default", "db-2").unwrap()["metadata"]["uid"], uid, "the offline pod stays");
}

#[test]
fn scaling_a_stateful_set_down_removes_the_highest_ordinal_first_one_at_a_time() {
    let mut sim = Sim::new();
    sim.create(&STATEFUL_SETS, stateful_set(4, json!({})));
    sim.settle(|_| {});
    assert_eq!(members(&sim).len(), 4);
    update_set(&mut sim, json!({"replicas": 1}));
    let mut seen = Vec::new();
    sim.settle(|s| seen.push(members(s).into_keys().collect::<Vec<_>>()));
    seen.dedup();
    assert_eq!(seen[..3], [vec!["db-0", "db-1", "db-2"], vec!["db-0", "db-1"], vec!["db-0"]]);
    // Parallel: all at once both ways; ordinals from `ordinals.start`.
    update_set(&mut sim, json!({"replicas": 3}));
    sim.kubelet = false;
    let mut parallel = stateful_set(3, json!({"podManagementPolicy": "Parallel", "ordinals": {"start": 5}}));
    parallel["metadata"]["name"] = json!("par");
    parallel["spec"]["selector"]["matchLabels"]["app"] = json!("par");
    parallel["spec"]["template"]["metadata"]["labels"]["app"] = json!("par");
    sim.create(&STATEFUL_SETS, parallel);
    let plan = statefulset::sync(&sim.world, "default", "par", sim.now);
    sim.apply(plan);
    let plan = statefulset::sync(&sim.world, "default", "par", sim.now);
    let names: Vec<String> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Create { object, .. } => Some(object["metadata"]["name"].as_str().unwrap().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(names, ["par-5", "par-6", "par-7"], "all at once, though none is running");
}

#[test]
fn a_stateful_set_rolls_from_the_highest_ordinal_down_to_its_partition_and_back() {
    let mut sim = Sim::new();
    sim.create(&STATEFUL_SETS, stateful_set(3, json!({})));
    sim.settle(|_| {});
    let first = set_status(&sim)["currentRevision"].as_str().unwrap().to_string();
    // Partition 1: db-2 and db-1 move, db-0 stays, and the rollout is not complete.
    update_set(&mut sim, json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}}));
    sim.settle(|_| {});
    update_set(&mut sim, image("db:2"));
    let mut order = Vec::new();
    sim.settle(|s| {
        let m = members(s);
        assert!(m.len() >= 2, "more than one pod down: {m:?}");
        for (name, (image, _)) in m {
            if image == "db:2" && !order.contains(&name) {
                order.push(name);
            }
        }
    });
    assert_eq!(order, ["db-2", "db-1"]);
    let status = set_status(&sim);
    let second = status["updateRevision"].as_str().unwrap().to_string();
    assert_ne!(first, second);
    assert_eq!(status["currentRevision"], first.as_str());
    assert_eq!(status["updatedReplicas"], 2);
    assert_eq!(status["currentReplicas"], 1);
    // A pod below the partition that goes comes back at the current revision.
    let uid = sim.get(&PODS, "default", "db-0").unwrap()["metadata"]["uid"].as_str().unwrap().to_string();
    sim.apply(Plan { actions: vec![Action::delete(&PODS, "default", "db-0", &uid)], requeue_after: None });
    sim.settle(|_| {});
    assert_eq!(members(&sim)["db-0"], ("db:1".to_string(), first.clone()));
    // Partition 0 completes the rollout.
    update_set(&mut sim, json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}));
    sim.settle(|_| {});
    assert!(members(&sim).values().all(|(i, r)| i == "db:2" && *r == second), "{:?}", members(&sim));
    let status = set_status(&sim);
    assert_eq!(status["currentRevision"], second.as_str());
    assert_eq!(status["currentReplicas"], 3);
    // `rollout undo`: the first revision's template again; that revision is renumbered the newest.
    let mut old = sim.get(&CONTROLLER_REVISIONS, "default", &first).unwrap()["data"]["spec"]["template"].clone();
    old.as_object_mut().unwrap().remove("$patch");
    update_set(&mut sim, json!({"template": null}));
    update_set(&mut sim, json!({"template": old}));
    sim.settle(|_| {});
    assert!(members(&sim).values().all(|(i, r)| i == "db:1" && *r == first), "{:?}", members(&sim));
    let cr = sim.get(&CONTROLLER_REVISIONS, "default", &first).unwrap();
    assert_eq!(cr["revision"], 3);
    assert_eq!(sim.list(&CONTROLLER_REVISIONS).len(), 2);
}

#[test]
fn an_on_delete_stateful_set_replaces_only_the_pods_deleted_by_hand() {
    let mut sim = Sim::new();
    sim.create(&STATEFUL_SETS, stateful_set(2, json!({"updateStrategy": {"type": "OnDelete"}})));
    sim.settle(|_| {});
    update_set(&mut sim, image("db:2"));
    sim.settle(|_| {});
    assert!(members(&sim).values().all(|(i, _)| i == "db:1"));
    let uid = sim.get(&PODS, "default", "db-1").unwrap()["metadata"]["uid"].as_str().unwrap().to_string();
    sim.apply(Plan { actions: vec![Action::delete(&PODS, "default", "db-1", &uid)], requeue_after: None });
    sim.settle(|_| {});
    let images: Vec<String> = members(&sim).into_values().map(|(i, _)| i).collect();
    assert_eq!(images, ["db:1", "db:2"]);
    assert_eq!(set_status(&sim)["updatedReplicas"], 1);
}

fn budget(spec: Value) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": spec})
}

fn budget_status(sim: &Sim) -> Value {
    sim.get(&POD_DISRUPTION_BUDGETS, "default", "web").unwrap()["status"].clone()
}

#[test]
fn a_disruption_budget_counts_healthy_pods_against_its_minimum_or_its_controllers_scale() {
    let mut sim = Sim::new();
    sim.create(&DEPLOYMENTS, deployment("web", 3, "busybox:1"));
    sim.create(
        &POD_DISRUPTION_BUDGETS,
        budget(json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}})),
    );
    sim.settle(|_| {});
    let status = budget_status(&sim);
    for (k, v) in [
        ("expectedPods", 3),
        ("currentHealthy", 3),
        ("desiredHealthy", 2),
        ("disruptionsAllowed", 1),
        ("observedGeneration", 1),
    ] {
        assert_eq!(status[k], v, "{k}: {status}");
    }
    assert_eq!(status["conditions"][0]["type"], "DisruptionAllowed");
    assert_eq!(
        (status["conditions"][0]["status"].as_str(), status["conditions"][0]["reason"].as_str()),
        (Some("True"), Some("SufficientPods"))
    );

    // An eviction the API recorded: that pod no longer counts, until it goes or two minutes pass.
    let victim = sim.pods_of(&replica_sets(&sim)[0].0)[0]["metadata"]["name"].as_str().unwrap().to_string();
    let mut pdb = sim.get(&POD_DISRUPTION_BUDGETS, "default", "web").unwrap().clone();
    pdb["status"]["disruptionsAllowed"] = json!(0);
    pdb["status"]["disruptedPods"] = json!({victim.clone(): edgehive_store::rfc3339(sim.now)});
    sim.store(&POD_DISRUPTION_BUDGETS, pdb);
    sim.settle(|_| {});
    let status = budget_status(&sim);
    assert_eq!(
        (status["currentHealthy"].as_i64(), status["disruptionsAllowed"].as_i64()),
        (Some(2), Some(0)),
        "{status}"
    );
    assert_eq!(status["conditions"][0]["reason"], "InsufficientPods");
    assert!(status["disruptedPods"].get(&victim).is_some());
    let plan = disruption::sync(&sim.world, "default", "web", sim.now);
    assert!(plan.requeue_after.is_some_and(|d| d <= disruption::DELETION_TIMEOUT), "looks again when it expires");
    sim.now += time::Duration::seconds(121);
    sim.settle(|_| {});
    let status = budget_status(&sim);
    assert_eq!(status["disruptionsAllowed"], 1, "{status}");
    assert!(status.get("disruptedPods").is_none(), "{status}");

    // maxUnavailable as a percentage counts against the Deployment's replicas, rounding up.
    let mut pdb = sim.get(&POD_DISRUPTION_BUDGETS, "default", "web").unwrap().clone();
    pdb["spec"] = json!({"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "web"}}});
    pdb["metadata"]["generation"] = json!(2);
    sim.store(&POD_DISRUPTION_BUDGETS, pdb);
    sim.settle(|_| {});
    let status = budget_status(&sim);
    assert_eq!(
        (status["desiredHealthy"].as_i64(), status["disruptionsAllowed"].as_i64()),
        (Some(1), Some(2)),
        "{status}"
    );
    assert_eq!(status["observedGeneration"], 2);

    // A matching pod without a controller cannot be counted against a scale.
    sim.create(&PODS, pod("stray", json!({"app": "web"}), json!({"phase": "Running"})));
    sim.settle(|_| {});
    let status = budget_status(&sim);
    assert_eq!(status["disruptionsAllowed"], 0);
    assert_eq!(status["conditions"][0]["reason"], "SyncFailed");
    assert!(status["conditions"][0]["message"].as_str().unwrap().contains("found no controllers"), "{status}");
}

// --- Endpoints and EndpointSlices, kube-root-ca.crt ---------------------------------------------------------

fn web_service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default", "labels": {"tier": "front"}},
        "spec": {"selector": {"app": "web"}, "clusterIP": "10.0.0.9",
                 "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
}

/// A pod of `web` on edge-1 with a named port; `ip` and readiness as its edge reported them.
fn web_pod(sim: &mut Sim, name: &str, ip: Option<&str>, ready: bool) {
    if sim.get(&PODS, "default", name).is_none() {
        sim.create(
            &PODS,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
                "spec": {"nodeName": "edge-1", "containers": [{"name": "c", "image": "x",
                    "ports": [{"name": "http", "containerPort": 8080}]}]}}),
        );
    }
    let mut p = sim.get(&PODS, "default", name).unwrap().clone();
    p["status"] = json!({"phase": "Running",
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                        "lastTransitionTime": edgehive_store::rfc3339(sim.now)}]});
    if let Some(ip) = ip {
        p["status"]["podIP"] = json!(ip);
    }
    sim.store(&PODS, p);
}

/// Syncs `web`'s endpoints until nothing changes; the writes of the first sync.
fn sync_web(sim: &mut Sim) -> Vec<(String, &'static str)> {
    let before = sim.writes.len();
    let plan = edgehive_workloads::endpoints::sync(&sim.world, "default", "web", sim.now);
    sim.apply(plan);
    let first = sim.writes[before..].to_vec();
    for _ in 0..5 {
        let plan = edgehive_workloads::endpoints::sync(&sim.world, "default", "web", sim.now);
        if plan.actions.is_empty() {
            return first;
        }
        sim.apply(plan);
    }
    panic!("the endpoints did not settle");
}

fn web_slices(sim: &Sim) -> Vec<Value> {
    sim.list(&edgehive_store::resources::ENDPOINT_SLICES).into_iter().cloned().collect()
}

#[test]
fn endpoints_and_slices_follow_the_selected_pods_readiness() {
    use edgehive_store::resources::{ENDPOINTS, SERVICES};
    let mut sim = Sim::new();
    sim.create(&SERVICES, web_service());
    web_pod(&mut sim, "web-1", Some("10.244.1.5"), true);
    web_pod(&mut sim, "web-2", Some("10.244.1.6"), false);
    web_pod(&mut sim, "web-3", None, false); // no address yet: not an endpoint
    sim.create(&PODS, pod("other", json!({"app": "db"}), json!({"phase": "Running", "podIP": "10.244.1.7"})));
    sync_web(&mut sim);
    let ep = sim.get(&ENDPOINTS, "default", "web").unwrap().clone();
    assert_eq!(ep["metadata"]["labels"], json!({"tier": "front"}));
    assert!(ep["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"].is_string());
    let subset = &ep["subsets"][0];
    assert_eq!(subset["ports"], json!([{"name": "http", "port": 8080, "protocol": "TCP"}]), "targetPort by name");
    assert_eq!(subset["addresses"].as_array().unwrap().len(), 1);
    assert_eq!(subset["addresses"][0]["ip"], "10.244.1.5");
    assert_eq!(subset["addresses"][0]["nodeName"], "edge-1");
    assert_eq!(subset["addresses"][0]["targetRef"]["name"], "web-1");
    assert_eq!(subset["notReadyAddresses"][0]["ip"], "10.244.1.6");
    let slices = web_slices(&sim);
    assert_eq!(slices.len(), 1);
    let s = &slices[0];
    assert!(s["metadata"]["name"].as_str().unwrap().starts_with("web-"));
    assert_eq!(s["metadata"]["labels"]["kubernetes.io/service-name"], "web");
    assert_eq!(s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"], "endpointslice-controller.k8s.io");
    assert_eq!(s["metadata"]["labels"]["tier"], "front");
    assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Service");
    assert_eq!(s["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(s["addressType"], "IPv4");
    assert_eq!(s["ports"], json!([{"name": "http", "port": 8080, "protocol": "TCP"}]));
    let conditions: Vec<(Value, Value)> = s["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["addresses"][0].clone(), e["conditions"]["ready"].clone()))
        .collect();
    assert_eq!(conditions, [(json!("10.244.1.5"), json!(true)), (json!("10.244.1.6"), json!(false))]);

    // Nothing changed: nothing written.
    assert!(sync_web(&mut sim).is_empty());
    // web-2 ready: one write to each.
    web_pod(&mut sim, "web-2", Some("10.244.1.6"), true);
    let writes = sync_web(&mut sim);
    assert_eq!(writes, [("patch".to_string(), "endpoints"), ("patch".to_string(), "endpointslices")]);
    assert_eq!(sim.get(&ENDPOINTS, "default", "web").unwrap()["subsets"][0]["addresses"].as_array().unwrap().len(), 2);
    // web-1 terminating: out of the Endpoints, kept in the slice as terminating and not ready.
    let mut p = sim.get(&PODS, "default", "web-1").unwrap().clone();
    p["metadata"]["deletionTimestamp"] = json!(edgehive_store::rfc3339(sim.now));
    sim.store(&PODS, p);
    sync_web(&mut sim);
    let ep = sim.get(&ENDPOINTS, "default", "web").unwrap();
    assert_eq!(
        ep["subsets"][0]["addresses"],
        json!([{"ip": "10.244.1.6", "nodeName": "edge-1",
        "targetRef": {"kind": "Pod", "namespace": "default", "name": "web-2",
                      "uid": sim.get(&PODS, "default", "web-2").unwrap()["metadata"]["uid"]}}])
    );
    let e1 = web_slices(&sim)[0]["endpoints"][0].clone();
    assert_eq!(e1["conditions"], json!({"ready": false, "serving": true, "terminating": true}));

    // The Service gone: its Endpoints go (its slices go with their owner, by the garbage collector).
    let svc = sim.get(&SERVICES, "default", "web").unwrap().clone();
    sim.apply(Plan {
        actions: vec![Action::delete(&SERVICES, "default", "web", svc["metadata"]["uid"].as_str().unwrap())],
        requeue_after: None,
    });
    sync_web(&mut sim);
    assert!(sim.get(&ENDPOINTS, "default", "web").is_none());
}

#[test]
fn many_pods_fill_slices_of_a_hundred_and_one_change_rewrites_one_slice() {
    use edgehive_store::resources::{ENDPOINTS, SERVICES};
    let mut sim = Sim::new();
    sim.create(&SERVICES, web_service());
    for i in 0..250 {
        web_pod(&mut sim, &format!("web-{i}"), Some(&format!("10.244.{}.{}", i / 200, i % 200 + 1)), true);
    }
    sync_web(&mut sim);
    let mut sizes: Vec<usize> = web_slices(&sim).iter().map(|s| s["endpoints"].as_array().unwrap().len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [50, 100, 100]);
    // One pod not ready: the Endpoints and the one slice that holds it are written, nothing else.
    web_pod(&mut sim, "web-7", Some("10.244.0.8"), false);
    let writes = sync_web(&mut sim);
    assert_eq!(writes, [("patch".to_string(), "endpoints"), ("patch".to_string(), "endpointslices")]);
    // A new pod goes into a slice with room, not a new slice.
    web_pod(&mut sim, "web-new", Some("10.244.9.9"), true);
    sync_web(&mut sim);
    let mut sizes: Vec<usize> = web_slices(&sim).iter().map(|s| s["endpoints"].as_array().unwrap().len()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [51, 100, 100]);
    // Over 1,000 addresses: the Endpoints keeps 1,000 and says it was truncated.
    for i in 250..1100 {
        web_pod(&mut sim, &format!("web-{i}"), Some(&format!("10.245.{}.{}", i / 200, i % 200 + 1)), true);
    }
    sync_web(&mut sim);
    let ep = sim.get(&ENDPOINTS, "default", "web").unwrap();
    let n: usize = ep["subsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["addresses"].as_array().map_or(0, Vec::len) + s["notReadyAddresses"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(n, 1000);
    assert_eq!(ep["metadata"]["annotations"]["endpoints.kubernetes.io/over-capacity"], "truncated");
    assert_eq!(web_slices(&sim).iter().map(|s| s["endpoints"].as_array().unwrap().len()).sum::<usize>(), 1101);
    assert!(web_slices(&sim).iter().all(|s| s["endpoints"].as_array().unwrap().len() <= 100));
}

#[test]
fn a_service_without_pods_has_one_empty_slice_and_one_without_a_selector_has_none() {
    use edgehive_store::resources::{ENDPOINTS, SERVICES};
    let mut sim = Sim::new();
    sim.create(&SERVICES, web_service());
    sync_web(&mut sim);
    let slices = web_slices(&sim);
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0]["endpoints"], json!([]));
    assert_eq!(sim.get(&ENDPOINTS, "default", "web").unwrap()["subsets"], json!([]));
    let mut plain = web_service();
    plain["metadata"]["name"] = json!("manual");
    plain["spec"].as_object_mut().unwrap().remove("selector");
    sim.create(&SERVICES, plain);
    let plan = edgehive_workloads::endpoints::sync(&sim.world, "default", "manual", sim.now);
    assert!(plan.actions.is_empty());
}

#[test]
fn every_live_namespace_gets_the_root_ca_and_keeps_it() {
    use edgehive_store::resources::{CONFIGMAPS, NAMESPACES};
    use edgehive_workloads::rootca;
    let mut sim = Sim::new();
    sim.create(&NAMESPACES, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}));
    sim.create(&NAMESPACES, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "leaving"}}));
    let mut leaving = sim.get(&NAMESPACES, "", "leaving").unwrap().clone();
    leaving["status"]["phase"] = json!("Terminating");
    sim.store(&NAMESPACES, leaving);
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    let plan = rootca::sync(&sim.world, "team-a", pem);
    sim.apply(plan);
    let cm = sim.get(&CONFIGMAPS, "team-a", "kube-root-ca.crt").unwrap().clone();
    assert_eq!(cm["data"], json!({"ca.crt": pem}));
    assert_eq!(cm["metadata"]["annotations"][rootca::DESCRIPTION_ANNOTATION], rootca::DESCRIPTION);
    assert!(rootca::sync(&sim.world, "team-a", pem).actions.is_empty(), "nothing to change");
    assert!(rootca::sync(&sim.world, "leaving", pem).actions.is_empty(), "a terminating namespace gets none");
    assert!(rootca::sync(&sim.world, "missing", pem).actions.is_empty());
    // Changed by someone: put back, extra keys removed.
    let mut forged = cm.clone();
    forged["data"] = json!({"ca.crt": "forged", "extra": "x"});
    sim.store(&CONFIGMAPS, forged);
    let plan = rootca::sync(&sim.world, "team-a", pem);
    sim.apply(plan);
    assert_eq!(sim.get(&CONFIGMAPS, "team-a", "kube-root-ca.crt").unwrap()["data"], json!({"ca.crt": pem}));
    // Other ConfigMaps are not kept in the world.
    sim.create(
        &CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "team-a"}}),
    );
    assert_eq!(sim.world.root_ca.len(), 1);
}
