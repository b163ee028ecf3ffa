//! What the node and its containers use of CPU and memory, for `kubectl top`
//! (`metrics.k8s.io`) and the node's `/stats/summary` and
//! `/metrics/resource` (docs/protocol.md, "Stream sessions").
//!
//! Nothing runs while nobody asks: a [`Sampler`] reads the counters when a
//! summary is asked for. CPU is a rate, so it needs two readings: the one
//! before (kept from the previous request, when it is recent enough), or,
//! on a first request, one taken [`FIRST_WINDOW`] earlier. Requests closer
//! together than [`MIN_WINDOW`] share one summary.
//!
//! Sources: the node from `/proc/stat` (time not idle) and `/proc/meminfo`
//! (total less available); a process-runtime container from its cgroup
//! (v2 `cpu.stat` and `memory.current` less `inactive_file`; v1
//! `cpuacct.usage` and `memory.usage_in_bytes` less `total_inactive_file`),
//! or, without one, from its process group's `/proc/{pid}/stat` and
//! `statm`; a CRI container from the runtime's `ContainerStats`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use edgehive_model::session::{ContainerUsage, PodUsage, Usage, UsageSummary};
use tokio::time::Instant;

use crate::runtime::Container;

/// The window of a first request's CPU rate.
pub const FIRST_WINDOW: Duration = Duration::from_millis(500);
/// Requests closer together than this share one summary.
pub const MIN_WINDOW: Duration = Duration::from_secs(1);
/// A reading older than this is not used as the start of a window.
pub const MAX_WINDOW: Duration = Duration::from_secs(300);

/// Cumulative counters of one container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContainerStat {
    /// CPU time used since it started, in nanoseconds.
    pub cpu_ns: u64,
    /// Working set now, in bytes.
    pub memory_bytes: u64,
}

/// A container to read, as the sampler is given it.
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub(crate) namespace: String,
    pub(crate) pod: String,
    pub(crate) uid: String,
    pub(crate) container: String,
    /// The runtime's container id: a restart is a new counter.
    pub(crate) id: String,
    pub(crate) handle: Arc<dyn Container>,
}

#[derive(Debug, Clone)]
struct Reading {
    at: Instant,
    node_cpu_ns: u64,
    node_memory: u64,
    /// By container id.
    containers: HashMap<String, ContainerStat>,
}

/// Reads usage when asked; see the module's docs.
#[derive(Debug, Default)]
pub struct Sampler {
    state: tokio::sync::Mutex<SamplerState>,
}

#[derive(Debug, Default)]
struct SamplerState {
    last: Option<Reading>,
    summary: Option<(Instant, Arc<UsageSummary>)>,
}

impl Sampler {
    /// The usage of the node and of `subjects`, now.
    pub(crate) async fn summary(&self, subjects: Vec<Subject>) -> Arc<UsageSummary> {
        let mut state = self.state.lock().await;
        if let Some((at, s)) = &state.summary
            && at.elapsed() < MIN_WINDOW
        {
            return Arc::clone(s);
        }
        let before = match state.last.take() {
            Some(r) if r.at.elapsed() <= MAX_WINDOW => r,
            _ => {
                let r = read(&subjects).await;
                tokio::time::sleep(FIRST_WINDOW).await;
                r
            }
        };
        let now = read(&subjects).await;
        let summary = Arc::new(summarize(&before, &now, &subjects));
        state.last = Some(now.clone());
        state.summary = Some((now.at, Arc::clone(&summary)));
        summary
    }
}

async fn read(subjects: &[Subject]) -> Reading {
    let mut containers = HashMap::with_capacity(subjects.len());
    for s in subjects {
        if let Some(stat) = s.handle.usage().await {
            containers.insert(s.id.clone(), stat);
        }
    }
    let (node_cpu_ns, node_memory) =
        tokio::task::spawn_blocking(|| (node_cpu_ns(), node_memory())).await.unwrap_or((0, 0));
    Reading { at: Instant::now(), node_cpu_ns, node_memory, containers }
}

/// Nanocores used between two cumulative readings `elapsed` apart.
fn rate(before: u64, after: u64, elapsed: Duration) -> u64 {
    let ns = elapsed.as_nanos().max(1);
    u64::try_from(u128::from(after.saturating_sub(before)) * 1_000_000_000 / ns).unwrap_or(u64::MAX)
}

fn summarize(before: &Reading, now: &Reading, subjects: &[Subject]) -> UsageSummary {
    let elapsed = now.at.saturating_duration_since(before.at);
    let mut pods: Vec<PodUsage> = Vec::new();
    for s in subjects {
        let Some(after) = now.containers.get(&s.id) else { continue };
        // A container with no earlier reading (started since) is measured
        // from its start: its whole CPU time over the window at most.
        let start = before.containers.get(&s.id).map_or(0, |b| b.cpu_ns);
        let usage = Usage {
            cpu_nano_cores: rate(start, after.cpu_ns, elapsed),
            cpu_core_nano_seconds: after.cpu_ns,
            memory_bytes: after.memory_bytes,
        };
        let entry = match pods.iter_mut().position(|p| p.namespace == s.namespace && p.name == s.pod) {
            Some(i) => &mut pods[i],
            None => {
                pods.push(PodUsage {
                    namespace: s.namespace.clone(),
                    name: s.pod.clone(),
                    uid: s.uid.clone(),
                    containers: Vec::new(),
                });
                pods.last_mut().unwrap_or_else(|| unreachable!("just pushed"))
            }
        };
        entry.containers.push(ContainerUsage { name: s.container.clone(), usage });
    }
    let cpu = rate(before.node_cpu_ns, now.node_cpu_ns, elapsed);
    // Capped at what the node has (a counter read out of step).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    UsageSummary {
        timestamp: crate::pod::now(),
        window_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        node: Usage {
            cpu_nano_cores: cpu.min(cores * 1_000_000_000),
            cpu_core_nano_seconds: now.node_cpu_ns,
            memory_bytes: now.node_memory,
        },
        pods,
    }
}

fn ticks_to_ns(ticks: u64) -> u64 {
    let hz = rustix::param::clock_ticks_per_second().max(1);
    ticks.saturating_mul(1_000_000_000 / hz)
}

/// kubelet's Summary API (`/stats/summary`) of a summary: CPU and memory
/// of the node, its pods and their containers.
pub(crate) fn stats_summary(s: &UsageSummary) -> serde_json::Value {
    use serde_json::json;
    let stats = |u: &Usage| {
        (
            json!({"time": s.timestamp, "usageNanoCores": u.cpu_nano_cores, "usageCoreNanoSeconds": u.cpu_core_nano_seconds}),
            json!({"time": s.timestamp, "workingSetBytes": u.memory_bytes}),
        )
    };
    let (cpu, memory) = stats(&s.node);
    let pods: Vec<_> = s
        .pods
        .iter()
        .map(|p| {
            let total = pod_total(p);
            let (pcpu, pmem) = stats(&total);
            let containers: Vec<_> = p
                .containers
                .iter()
                .map(|c| {
                    let (ccpu, cmem) = stats(&c.usage);
                    json!({"name": c.name, "cpu": ccpu, "memory": cmem})
                })
                .collect();
            json!({
                "podRef": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
                "containers": containers,
                "cpu": pcpu,
                "memory": pmem,
            })
        })
        .collect();
    json!({"node": {"cpu": cpu, "memory": memory}, "pods": pods})
}

/// A pod's usage: its containers' summed.
fn pod_total(p: &PodUsage) -> Usage {
    p.containers.iter().fold(Usage::default(), |mut t, c| {
        t.cpu_nano_cores += c.usage.cpu_nano_cores;
        t.cpu_core_nano_seconds += c.usage.cpu_core_nano_seconds;
        t.memory_bytes += c.usage.memory_bytes;
        t
    })
}

/// kubelet's `/metrics/resource` (Prometheus text) of a summary, as
/// metrics-server scrapes it.
pub(crate) fn resource_metrics(s: &UsageSummary) -> String {
    use std::fmt::Write as _;
    let ms = time::OffsetDateTime::parse(&s.timestamp, &time::format_description::well_known::Rfc3339)
        .map_or(0, |t| t.unix_timestamp() * 1000);
    let secs = |ns: u64| ns as f64 / 1e9;
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, rows: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in rows {
            let _ = writeln!(out, "{name}{labels} {v} {ms}");
        }
    };
    let container_rows = |f: &dyn Fn(&Usage) -> f64| -> Vec<(String, f64)> {
        s.pods
            .iter()
            .flat_map(|p| {
                p.containers.iter().map(move |c| {
                    (format!("{{container={:?},namespace={:?},pod={:?}}}", c.name, p.namespace, p.name), f(&c.usage))
                })
            })
            .collect()
    };
    let pod_rows = |f: &dyn Fn(&Usage) -> f64| -> Vec<(String, f64)> {
        s.pods.iter().map(|p| (format!("{{namespace={:?},pod={:?}}}", p.namespace, p.name), f(&pod_total(p)))).collect()
    };
    family(
        "container_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        container_rows(&|u| secs(u.cpu_core_nano_seconds)),
    );
    family(
        "container_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the container in bytes",
        container_rows(&|u| u.memory_bytes as f64),
    );
    family(
        "node_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
        vec![(String::new(), secs(s.node.cpu_core_nano_seconds))],
    );
    family(
        "node_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the node in bytes",
        vec![(String::new(), s.node.memory_bytes as f64)],
    );
    family(
        "pod_cpu_usage_seconds_total",
        "counter",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        pod_rows(&|u| secs(u.cpu_core_nano_seconds)),
    );
    family(
        "pod_memory_working_set_bytes",
        "gauge",
        "[STABLE] Current working set of the pod in bytes",
        pod_rows(&|u| u.memory_bytes as f64),
    );
    let _ = writeln!(
        out,
        "# HELP scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n# TYPE scrape_error gauge\nscrape_error 0"
    );
    out
}

/// The node's CPU time not idle, from the first line of `/proc/stat`.
fn node_cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    parse_proc_stat(&text).map_or(0, ticks_to_ns)
}

/// Ticks not idle (not `idle`, not `iowait`) of `/proc/stat`'s `cpu` line.
fn parse_proc_stat(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest is within user).
    let busy: u64 = f.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, v)| v).sum();
    (f.len() >= 4).then_some(busy)
}

/// The node's memory in use: `MemTotal` less `MemAvailable`.
fn node_memory() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    parse_meminfo(&text)
}

fn parse_meminfo(text: &str) -> u64 {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    match (field("MemTotal"), field("MemAvailable")) {
        (Some(total), Some(available)) => total.saturating_sub(available),
        _ => 0,
    }
}

/// A value `key` of a `memory.stat` or `cpu.stat` file.
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// A container's counters from its cgroup directories (v1: one per
/// hierarchy, v2: one), if they hold them.
pub(crate) fn cgroup_stat(dirs: &[PathBuf]) -> Option<ContainerStat> {
    let mut cpu = None;
    let mut memory = None;
    for d in dirs {
        if cpu.is_none() {
            cpu = read_u64(&d.join("cpuacct.usage")).or_else(|| {
                let t = std::fs::read_to_string(d.join("cpu.stat")).ok()?;
                stat_value(&t, "usage_usec").map(|us| us * 1000)
            });
        }
        if memory.is_none() {
            let stat = std::fs::read_to_string(d.join("memory.stat")).unwrap_or_default();
            memory = read_u64(&d.join("memory.current"))
                .map(|m| m.saturating_sub(stat_value(&stat, "inactive_file").unwrap_or(0)))
                .or_else(|| {
                    read_u64(&d.join("memory.usage_in_bytes"))
                        .map(|m| m.saturating_sub(stat_value(&stat, "total_inactive_file").unwrap_or(0)))
                });
        }
    }
    Some(ContainerStat { cpu_ns: cpu?, memory_bytes: memory? })
}

/// A process group's counters from `/proc`: the CPU time of its live
/// processes (and of the children its leader waited for) and their
/// resident memory.
pub(crate) fn process_group_stat(leader: u32) -> Option<ContainerStat> {
    let page = rustix::param::page_size() as u64;
    let mut ticks = 0u64;
    let mut rss_pages = 0u64;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(f) = stat_fields(&stat) else { continue };
        // Fields after `comm`: [0] state, [2] pgrp, [11] utime, [12] stime,
        // [13] cutime, [14] cstime, [21] rss.
        if f.get(2).and_then(|v| v.parse::<u32>().ok()) != Some(leader) {
            continue;
        }
        found = true;
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        ticks += num(11) + num(12);
        if pid == leader {
            ticks += num(13) + num(14);
        }
        rss_pages += num(21);
    }
    found.then(|| ContainerStat { cpu_ns: ticks_to_ns(ticks), memory_bytes: rss_pages * page })
}

/// The fields of `/proc/{pid}/stat` after the command name (which may hold
/// spaces and parentheses: it ends at the last `)`).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn proc_files_parse_as_the_kernel_writes_them() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n";
        assert_eq!(parse_proc_stat(stat), Some(100 + 5 + 50 + 3 + 2 + 1));
        assert_eq!(parse_proc_stat("intr 1 2\n"), None);
        let meminfo = "MemTotal:       16000 kB\nMemFree:  1000 kB\nMemAvailable:   6000 kB\n";
        assert_eq!(parse_meminfo(meminfo), 10000 * 1024);
        assert_eq!(parse_meminfo("garbage"), 0);
        let f = stat_fields("42 (a (b) c) S 1 42 42 0 -1 0 0 0 0 0 7 3 1 1 20 0 1 0 100 2000 55").unwrap();
        assert_eq!((f[2], f[11], f[12], f[21]), ("42", "7", "3", "55"));
        assert_eq!(stat_value("usage_usec 1500\nuser_usec 1000\n", "usage_usec"), Some(1500));
        assert_eq!(stat_value("inactive_file 5\n", "active_file"), None);
    }

    #[test]
    fn cgroup_files_of_either_version_give_counters() {
        let d = std::env::temp_dir().join(format!("edgehive-usage-{}", std::process::id()));
        let (v2, v1m, v1c) = (d.join("v2"), d.join("v1mem"), d.join("v1cpu"));
        for x in [&v2, &v1m, &v1c] {
            std::fs::create_dir_all(x).unwrap();
        }
        std::fs::write(v2.join("cpu.stat"), "usage_usec 2500\nuser_usec 2000\n").unwrap();
        std::fs::write(v2.join("memory.current"), "10000\n").unwrap();
        std::fs::write(v2.join("memory.stat"), "anon 9000\ninactive_file 4000\n").unwrap();
        assert_eq!(
            cgroup_stat(std::slice::from_ref(&v2)),
            Some(ContainerStat { cpu_ns: 2_500_000, memory_bytes: 6000 })
        );
        std::fs::write(v1m.join("memory.usage_in_bytes"), "8000\n").unwrap();
        std::fs::write(v1m.join("memory.stat"), "inactive_file 1\ntotal_inactive_file 3000\n").unwrap();
        std::fs::write(v1c.join("cpuacct.usage"), "777\n").unwrap();
        assert_eq!(cgroup_stat(&[v1m.clone(), v1c]), Some(ContainerStat { cpu_ns: 777, memory_bytes: 5000 }));
        // A hierarchy without a CPU counter: no reading, not a zero.
        assert_eq!(cgroup_stat(&[v1m]), None);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn this_process_group_is_measured() {
        let own = rustix::process::getpgrp().as_raw_nonzero().get() as u32;
        let s = process_group_stat(own).unwrap();
        assert!(s.memory_bytes > 0);
        assert_eq!(process_group_stat(u32::MAX), None);
    }

    #[test]
    fn rates_are_per_second_of_the_window() {
        assert_eq!(rate(0, 500_000_000, Duration::from_secs(1)), 500_000_000);
        assert_eq!(rate(1_000, 1_000, Duration::from_millis(500)), 0);
        assert_eq!(rate(10, 5, Duration::from_secs(1)), 0, "a counter going back is no usage");
    }
}
