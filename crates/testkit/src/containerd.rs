//! A private containerd for the CRI runtime's tests, started by
//! `scripts/cri-dev.sh` with all its state in a temporary directory (its own
//! socket, CNI bridge and subnet; images built from busybox-static and
//! imported, no registry), and stopped with everything it ran when dropped.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fixtures::TempDir;

/// A running containerd.
#[derive(Debug)]
pub struct Containerd {
    dir: TempDir,
    endpoint: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cri-dev.sh")
}

impl Containerd {
    /// The image with busybox's applets (`sh`, `sleep`, `wget`, …).
    pub const IMAGE: &str = "edgehive.local/busybox:1";
    /// The sandbox (pause) image containerd is configured with.
    pub const PAUSE_IMAGE: &str = "edgehive.local/pause:1";

    /// Starts one; the error says why it could not (a missing package,
    /// containerd's own log, a failed import).
    pub fn start() -> Result<Containerd, String> {
        let dir = TempDir::new("containerd");
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(dir.path())
            .output()
            .map_err(|e| format!("run {}: {e}", script().display()))?;
        let endpoint = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let c = Containerd { dir, endpoint };
        if !out.status.success() || !c.endpoint.starts_with("unix://") {
            return Err(format!("containerd did not start: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(c)
    }

    /// The CRI socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("containerd.sock")
    }

    /// `unix:///…/containerd.sock`.
    pub fn endpoint(&self) -> String {
        self.endpoint.clone()
    }

    /// The last lines of containerd's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("containerd.log")).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// What `ctr -n k8s.io {args}` prints.
    pub fn ctr(&self, args: &[&str]) -> String {
        let out = Command::new("ctr").arg("--address").arg(self.socket()).args(["-n", "k8s.io"]).args(args).output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- containerd log ---\n{}", self.log_tail(40));
        }
        let _ = Command::new("bash").arg(script()).arg("stop").arg(self.dir.path()).status();
    }
}
