//! CPU and memory limits for the process runtime, with cgroups v1 or v2,
//! and an honest account of what could not be applied.
//!
//! A container's cgroup lives under edged's own: v1
//! `{controller mount}{own path}/edgehive/{pod uid}/{container}` in the
//! `memory` and `cpu` hierarchies; v2 `{own path}/edgehive-pods/{pod
//! uid}/{container}`. cgroup v2 lets a cgroup hand controllers to its
//! children only while it holds no process itself, so on v2 edged first
//! moves itself into `{own path}/edgehive-agent` (as container engines do
//! when a service manager delegates a subtree to them). The container's
//! process joins its cgroups before it runs anything: it is started through
//! a shell that writes its own pid into each `cgroup.procs` and then execs
//! the command (the pid stays the same).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;

/// CFS period used for CPU quotas (kubelet's).
const CPU_PERIOD_US: u64 = 100_000;

/// A container's limits (`resources.limits`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `cpu`, in millicores.
    pub cpu_millis: Option<u64>,
    /// `memory`, in bytes.
    pub memory_bytes: Option<u64>,
}

impl Limits {
    /// Reads `container.resources.limits`; a value that is not a
    /// Kubernetes quantity is an error naming it.
    pub fn of(container: &Value) -> Result<Limits, String> {
        let limits = &container["resources"]["limits"];
        let read = |key: &str, scale: f64| -> Result<Option<u64>, String> {
            let v = &limits[key];
            let text = match v {
                Value::Null => return Ok(None),
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("resources.limits.{key}: {other} is not a quantity")),
            };
            let q = quantity(&text).ok_or_else(|| format!("resources.limits.{key}: {text:?} is not a quantity"))?;
            Ok(Some((q * scale).ceil() as u64))
        };
        Ok(Limits { cpu_millis: read("cpu", 1000.0)?, memory_bytes: read("memory", 1.0)? })
    }

    /// Nothing asked.
    pub fn is_empty(&self) -> bool {
        self.cpu_millis.is_none() && self.memory_bytes.is_none()
    }
}

/// Parses a Kubernetes quantity (`500m`, `1.5`, `64Mi`, `1G`, `129e6`).
fn quantity(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let value: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    let v = value * scale;
    (v.is_finite() && v >= 0.0).then_some(v)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Layout {
    /// No cgroups found.
    None,
    /// v1: (controller, directory of this process's cgroup in it).
    V1(Vec<(String, PathBuf)>),
    /// v2: this process's cgroup directory.
    V2(PathBuf),
}

/// Where containers' cgroups can be made.
#[derive(Debug)]
pub struct Cgroups {
    layout: Layout,
    /// v2: the one-time move into `edgehive-agent` and controller delegation.
    v2_ready: Mutex<Option<Result<(), String>>>,
}

/// The cgroups made for one container.
#[derive(Debug, Default)]
pub struct Applied {
    /// `cgroup.procs` files the container's process joins.
    pub procs: Vec<PathBuf>,
    /// Directories made, innermost last.
    pub dirs: Vec<PathBuf>,
    /// What was asked but not applied, and why.
    pub not_applied: Vec<String>,
}

impl Applied {
    /// The kernel's OOM killer killed a process of this container
    /// (`oom_kill` in v1's `memory.oom_control` or v2's `memory.events`).
    pub fn oom_killed(&self) -> bool {
        self.dirs.iter().flat_map(|d| [d.join("memory.oom_control"), d.join("memory.events")]).any(|f| {
            std::fs::read_to_string(f).is_ok_and(|t| {
                t.lines().any(|l| l.strip_prefix("oom_kill ").is_some_and(|n| n.trim().parse::<u64>().unwrap_or(0) > 0))
            })
        })
    }

    /// Removes the container's cgroup directories (after its process ended).
    pub fn remove(&self) {
        for d in self.dirs.iter().rev() {
            if let Err(e) = std::fs::remove_dir(d)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::debug!(cgroup = %d.display(), error = %e, "cgroup not removed");
            }
        }
    }
}

fn io_note(what: &str, path: &Path, e: &std::io::Error) -> String {
    format!("{what} not applied: {}: {e}", path.display())
}

impl Cgroups {
    /// This process's cgroups, from `/proc/self/cgroup` and `/proc/self/mountinfo`.
    pub fn detect() -> Cgroups {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Cgroups::from_parts(Path::new("/"), &own, &mounts)
    }

    /// No cgroups: every limit is reported as not applied.
    pub fn none() -> Cgroups {
        Cgroups { layout: Layout::None, v2_ready: Mutex::new(None) }
    }

    /// From the text of `/proc/self/cgroup` and `/proc/self/mountinfo`,
    /// with mount points under `root` (tests use a fake tree).
    pub fn from_parts(root: &Path, self_cgroup: &str, mountinfo: &str) -> Cgroups {
        // mountinfo: id parent dev root mountpoint opts... - fstype source superopts
        let mounts: Vec<(String, String, String, String)> = mountinfo
            .lines()
            .filter_map(|l| {
                let (pre, post) = l.split_once(" - ")?;
                let f: Vec<&str> = pre.split(' ').collect();
                let p: Vec<&str> = post.split(' ').collect();
                Some((f.get(3)?.to_string(), f.get(4)?.to_string(), p.first()?.to_string(), p.get(2)?.to_string()))
            })
            .collect();
        let under = |mount_root: &str, mountpoint: &str, own: &str| -> PathBuf {
            let rel = own.strip_prefix(mount_root).unwrap_or(own).trim_start_matches('/');
            let mut p = root.join(mountpoint.trim_start_matches('/'));
            if !rel.is_empty() {
                p = p.join(rel);
            }
            p
        };
        let mut v1 = Vec::new();
        for line in self_cgroup.lines() {
            let mut it = line.splitn(3, ':');
            let (Some(_), Some(ctrls), Some(path)) = (it.next(), it.next(), it.next()) else { continue };
            if ctrls.is_empty() {
                // The v2 line; used when no v1 controller of ours is mounted.
                continue;
            }
            for ctrl in ctrls.split(',').filter(|c| *c == "memory" || *c == "cpu") {
                let m =
                    mounts.iter().find(|(_, _, fstype, opts)| fstype == "cgroup" && opts.split(',').any(|o| o == ctrl));
                if let Some((mroot, mpoint, _, _)) = m {
                    v1.push((ctrl.to_owned(), under(mroot, mpoint, path)));
                }
            }
        }
        let layout = if !v1.is_empty() {
            Layout::V1(v1)
        } else if let Some(path) = self_cgroup.lines().find_map(|l| l.strip_prefix("0::"))
            && let Some((mroot, mpoint, _, _)) = mounts.iter().find(|m| m.2 == "cgroup2")
        {
            Layout::V2(under(mroot, mpoint, path))
        } else {
            Layout::None
        };
        Cgroups { layout, v2_ready: Mutex::new(None) }
    }

    /// Makes the cgroups of container `name` (`{pod uid}/{container}`) and
    /// writes its limits.
    pub fn create(&self, name: &str, limits: &Limits) -> Applied {
        let mut out = Applied::default();
        if limits.is_empty() {
            return out;
        }
        let wanted: Vec<(&str, &str)> =
            [("memory", limits.memory_bytes.is_some()), ("cpu", limits.cpu_millis.is_some())]
                .into_iter()
                .filter(|(_, w)| *w)
                .map(|(c, _)| (c, if c == "memory" { "memory limit" } else { "cpu limit" }))
                .collect();
        match &self.layout {
            Layout::None => {
                for (_, what) in wanted {
                    out.not_applied.push(format!("{what} not applied: no cgroup hierarchy found"));
                }
            }
            Layout::V1(ctrls) => {
                for (ctrl, what) in wanted {
                    let Some((_, own)) = ctrls.iter().find(|(c, _)| c == ctrl) else {
                        out.not_applied
                            .push(format!("{what} not applied: no {ctrl} cgroup controller mounted (cgroup v1)"));
                        continue;
                    };
                    let mut dir = own.join("edgehive");
                    let mut made = Ok(());
                    for part in name.split('/') {
                        dir = dir.join(part);
                        made = std::fs::create_dir_all(&dir);
                        if made.is_err() {
                            break;
                        }
                        out.dirs.push(dir.clone());
                    }
                    if let Err(e) = made {
                        out.not_applied.push(io_note(what, &dir, &e));
                        continue;
                    }
                    let files: Vec<(&str, String)> = match ctrl {
                        "memory" => vec![("memory.limit_in_bytes", limits.memory_bytes.unwrap_or(0).to_string())],
                        _ => vec![
                            ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
                            ("cpu.cfs_quota_us", cpu_quota(limits).to_string()),
                        ],
                    };
                    match write_all(&dir, &files) {
                        Ok(()) => out.procs.push(dir.join("cgroup.procs")),
                        Err(note) => out.not_applied.push(format!("{what} not applied: {note}")),
                    }
                }
            }
            Layout::V2(own) => {
                if let Err(note) = self.v2_setup(own) {
                    for (_, what) in wanted {
                        out.not_applied.push(format!("{what} not applied: {note}"));
                    }
                    return out;
                }
                let pods = own.join("edgehive-pods");
                let mut dir = pods.clone();
                for part in name.split('/') {
                    if dir != pods {
                        // An intermediate cgroup hands the controllers down.
                        let _ = std::fs::write(dir.join("cgroup.subtree_control"), "+memory +cpu");
                    }
                    dir = dir.join(part);
                    if let Err(e) = std::fs::create_dir(&dir)
                        && e.kind() != std::io::ErrorKind::AlreadyExists
                    {
                        for (_, what) in &wanted {
                            out.not_applied.push(io_note(what, &dir, &e));
                        }
                        return out;
                    }
                    out.dirs.push(dir.clone());
                }
                let mut ok = false;
                for (ctrl, what) in wanted {
                    let file = match ctrl {
                        "memory" => ("memory.max", limits.memory_bytes.unwrap_or(0).to_string()),
                        _ => ("cpu.max", format!("{} {CPU_PERIOD_US}", cpu_quota(limits))),
                    };
                    match write_all(&dir, &[file]) {
                        Ok(()) => ok = true,
                        Err(note) => out.not_applied.push(format!("{what} not applied: {note}")),
                    }
                }
                if ok {
                    out.procs.push(dir.join("cgroup.procs"));
                }
            }
        }
        out
    }

    /// Removes what is left of a pod's cgroups (its containers' processes
    /// are gone; an earlier run of edged was killed before removing them).
    pub fn remove_pod(&self, uid: &str) {
        let bases: Vec<PathBuf> = match &self.layout {
            Layout::None => return,
            Layout::V1(ctrls) => ctrls.iter().map(|(_, own)| own.join("edgehive").join(uid)).collect(),
            Layout::V2(own) => vec![own.join("edgehive-pods").join(uid)],
        };
        for base in bases {
            if let Ok(entries) = std::fs::read_dir(&base) {
                for e in entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
                    let _ = std::fs::remove_dir(e.path());
                }
            }
            let _ = std::fs::remove_dir(&base);
        }
    }

    /// v2: once, delegate memory and cpu to `edgehive-pods`, moving edged
    /// out of its own cgroup first if it holds processes.
    fn v2_setup(&self, own: &Path) -> Result<(), String> {
        let mut ready = self.v2_ready.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = ready.as_ref() {
            return r.clone();
        }
        let r = (|| {
            let available = std::fs::read_to_string(own.join("cgroup.controllers"))
                .map_err(|e| format!("{}: {e}", own.join("cgroup.controllers").display()))?;
            for c in ["memory", "cpu"] {
                if !available.split_whitespace().any(|a| a == c) {
                    return Err(format!("the {c} controller is not delegated to {} (cgroup v2)", own.display()));
                }
            }
            let control = own.join("cgroup.subtree_control");
            if std::fs::write(&control, "+memory +cpu").is_err() {
                // Processes in `own`: edged moves itself into a leaf first.
                let agent = own.join("edgehive-agent");
                std::fs::create_dir_all(&agent).map_err(|e| format!("{}: {e}", agent.display()))?;
                let procs = agent.join("cgroup.procs");
                std::fs::write(&procs, std::process::id().to_string())
                    .map_err(|e| format!("{}: {e}", procs.display()))?;
                std::fs::write(&control, "+memory +cpu").map_err(|e| format!("{}: {e}", control.display()))?;
            }
            let pods = own.join("edgehive-pods");
            std::fs::create_dir_all(&pods).map_err(|e| format!("{}: {e}", pods.display()))?;
            let control = pods.join("cgroup.subtree_control");
            std::fs::write(&control, "+memory +cpu").map_err(|e| format!("{}: {e}", control.display()))?;
            Ok(())
        })();
        *ready = Some(r.clone());
        r
    }
}

fn cpu_quota(limits: &Limits) -> u64 {
    // Kubelet's floor: 1 ms per period.
    (limits.cpu_millis.unwrap_or(0) * CPU_PERIOD_US / 1000).max(1000)
}

fn write_all(dir: &Path, files: &[(&str, String)]) -> Result<(), String> {
    for (file, value) in files {
        let p = dir.join(file);
        std::fs::write(&p, value).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// The command line that joins `procs` and then execs `argv` (unchanged
/// when there is nothing to join). A failed join ends the start with exit
/// code 126 and says why on stderr (the container's log).
pub fn wrap(argv: &[String], procs: &[PathBuf]) -> Vec<String> {
    if procs.is_empty() {
        return argv.to_vec();
    }
    let script = r#"for f do [ "$f" = -- ] && break; echo $$ > "$f" || { echo "edgehive: cannot join cgroup $f" >&2; exit 126; }; shift; done; shift; exec "$@""#;
    let mut out = vec!["/bin/sh".to_owned(), "-c".to_owned(), script.to_owned(), "edgehive-cgroup".to_owned()];
    out.extend(procs.iter().map(|p| p.to_string_lossy().into_owned()));
    out.push("--".to_owned());
    out.extend(argv.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgehive_testkit::fixtures::TempDir;
    use serde_json::json;

    #[test]
    fn quantities_read_as_kubernetes_writes_them() {
        let l = |cpu: Value, mem: Value| Limits::of(&json!({"resources": {"limits": {"cpu": cpu, "memory": mem}}}));
        assert_eq!(
            l(json!("500m"), json!("64Mi")).unwrap(),
            Limits { cpu_millis: Some(500), memory_bytes: Some(64 << 20) }
        );
        assert_eq!(
            l(json!("0.5"), json!("1G")).unwrap(),
            Limits { cpu_millis: Some(500), memory_bytes: Some(1_000_000_000) }
        );
        assert_eq!(
            l(json!(2), json!("1.5Gi")).unwrap(),
            Limits { cpu_millis: Some(2000), memory_bytes: Some(3 << 29) }
        );
        assert_eq!(l(json!("1"), json!("129e6")).unwrap().memory_bytes, Some(129_000_000));
        assert_eq!(l(json!("1"), json!("1e3")).unwrap().memory_bytes, Some(1000));
        assert_eq!(l(json!("100M"), json!(null)).unwrap().memory_bytes, None);
        assert!(Limits::of(&json!({})).unwrap().is_empty());
        let e = l(json!("1"), json!("12XB")).unwrap_err();
        assert_eq!(e, "resources.limits.memory: \"12XB\" is not a quantity");
        assert!(l(json!("-1"), json!(null)).unwrap_err().contains("resources.limits.cpu"));
        assert!(l(json!("lots"), json!(null)).is_err());
        assert!(l(json!([1]), json!(null)).is_err());
    }

    const V1_MOUNTS: &str = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n35 31 0:32 /outer /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";

    #[test]
    fn v1_writes_limits_in_each_hierarchy() {
        let root = TempDir::new("cg-v1");
        let own = "4:memory:/outer/agent\n1:cpu:/\n0::/\n";
        std::fs::create_dir_all(root.path().join("sys/fs/cgroup/memory/agent")).unwrap();
        std::fs::create_dir_all(root.path().join("sys/fs/cgroup/cpu")).unwrap();
        let cg = Cgroups::from_parts(root.path(), own, V1_MOUNTS);
        let a = cg.create("uid1/main", &Limits { cpu_millis: Some(250), memory_bytes: Some(1 << 26) });
        assert!(a.not_applied.is_empty(), "{:?}", a.not_applied);
        let mem = root.path().join("sys/fs/cgroup/memory/agent/edgehive/uid1/main");
        let cpu = root.path().join("sys/fs/cgroup/cpu/edgehive/uid1/main");
        assert_eq!(std::fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap(), "67108864");
        assert_eq!(std::fs::read_to_string(cpu.join("cpu.cfs_quota_us")).unwrap(), "25000");
        assert_eq!(std::fs::read_to_string(cpu.join("cpu.cfs_period_us")).unwrap(), "100000");
        assert_eq!(a.procs, [mem.join("cgroup.procs"), cpu.join("cgroup.procs")]);
        // No cpu hierarchy: said so, memory still applied.
        let cg = Cgroups::from_parts(root.path(), "4:memory:/outer/agent\n", V1_MOUNTS);
        let a = cg.create("uid2/main", &Limits { cpu_millis: Some(100), memory_bytes: Some(1 << 20) });
        assert_eq!(a.not_applied, ["cpu limit not applied: no cpu cgroup controller mounted (cgroup v1)"]);
        assert_eq!(a.procs.len(), 1);
        // Nothing asked, nothing made.
        let a = cg.create("uid3/main", &Limits::default());
        assert!(a.procs.is_empty() && a.dirs.is_empty() && a.not_applied.is_empty());
    }

    const V2_MOUNTS: &str = "30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";

    #[test]
    fn v2_delegates_then_writes_limits() {
        let root = TempDir::new("cg-v2");
        let own = root.path().join("sys/fs/cgroup/edge.service");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join("cgroup.controllers"), "cpuset cpu io memory pids").unwrap();
        std::fs::create_dir_all(own.join("edgehive-pods")).unwrap();
        let cg = Cgroups::from_parts(root.path(), "0::/edge.service\n", V2_MOUNTS);
        let a = cg.create("uid1/main", &Limits { cpu_millis: Some(1500), memory_bytes: Some(1 << 26) });
        assert!(a.not_applied.is_empty(), "{:?}", a.not_applied);
        let dir = own.join("edgehive-pods/uid1/main");
        assert_eq!(std::fs::read_to_string(dir.join("memory.max")).unwrap(), "67108864");
        assert_eq!(std::fs::read_to_string(dir.join("cpu.max")).unwrap(), "150000 100000");
        assert_eq!(std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(), "+memory +cpu");
        assert_eq!(std::fs::read_to_string(own.join("edgehive-pods/cgroup.subtree_control")).unwrap(), "+memory +cpu");
        assert_eq!(
            std::fs::read_to_string(own.join("edgehive-pods/uid1/cgroup.subtree_control")).unwrap(),
            "+memory +cpu"
        );
        assert_eq!(a.procs, [dir.join("cgroup.procs")]);

        // Controllers not delegated: both limits reported, nothing made.
        let other = root.path().join("sys/fs/cgroup/user.slice");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("cgroup.controllers"), "pids").unwrap();
        let cg = Cgroups::from_parts(root.path(), "0::/user.slice\n", V2_MOUNTS);
        let a = cg.create("uid2/main", &Limits { cpu_millis: Some(100), memory_bytes: Some(1 << 20) });
        assert_eq!(a.not_applied.len(), 2, "{:?}", a.not_applied);
        assert!(a.not_applied[0].contains("memory controller is not delegated"), "{:?}", a.not_applied);
        assert!(a.procs.is_empty());
        let a = Cgroups::none().create("u/c", &Limits { cpu_millis: None, memory_bytes: Some(1) });
        assert_eq!(a.not_applied, ["memory limit not applied: no cgroup hierarchy found"]);
    }

    #[test]
    fn the_wrapper_joins_then_execs_with_the_same_pid() {
        let dir = TempDir::new("cg-wrap");
        let procs = dir.path().join("cgroup.procs");
        let argv =
            vec!["sh".to_owned(), "-c".to_owned(), "echo $$; echo \"$0 'x y'\"".to_owned(), "arg zero".to_owned()];
        let w = wrap(&argv, std::slice::from_ref(&procs));
        let out = std::process::Command::new(&w[0]).args(&w[1..]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut lines = text.lines();
        let pid = lines.next().unwrap();
        assert_eq!(std::fs::read_to_string(&procs).unwrap().trim(), pid, "joined with the pid that then ran");
        assert_eq!(lines.next(), Some("arg zero 'x y'"));
        assert_eq!(wrap(&argv, &[]), argv);
        // A cgroup that cannot be joined: exit 126 with the reason.
        let bad = wrap(&argv, &[dir.path().join("no/such/cgroup.procs")]);
        let out = std::process::Command::new(&bad[0]).args(&bad[1..]).output().unwrap();
        assert_eq!(out.status.code(), Some(126));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot join cgroup"));
    }

    /// What this host allows: a memory limit is applied (the file holds it)
    /// or the reason it is not is given.
    #[test]
    fn this_host_applies_or_explains() {
        let cg = Cgroups::detect();
        let name = format!("test-{}/c", std::process::id());
        let a = cg.create(&name, &Limits { cpu_millis: Some(200), memory_bytes: Some(64 << 20) });
        eprintln!("layout {:?}: procs {:?}, not applied {:?}", cg.layout, a.procs, a.not_applied);
        assert_eq!(a.procs.len() + a.not_applied.len(), 2, "every limit is applied or explained");
        for p in &a.procs {
            let dir = p.parent().unwrap();
            if let Ok(v) = std::fs::read_to_string(dir.join("memory.limit_in_bytes")) {
                assert_eq!(v.trim(), (64u64 << 20).to_string());
            }
        }
        a.remove();
        for d in &a.dirs {
            assert!(!d.exists(), "{} left", d.display());
        }
    }
}
