//! Real components for tests: a temporary directory that removes itself, a
//! free loopback port, and an etcd server started on 127.0.0.1 with its data
//! in a temporary directory and stopped (killed) when dropped.
//!
//! These start processes and poll sockets synchronously, as test setup.
#![allow(clippy::disallowed_methods)]

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A directory under the system's temp dir, removed on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A new empty directory whose name starts with `prefix`.
    pub fn new(prefix: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "{prefix}-{}-{}-{:08x}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            fastrand_u32()
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn fastrand_u32() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    t ^ std::process::id().rotate_left(16)
}

/// A loopback port free at the time of the call, and never handed out
/// before by this process.
///
/// The kernel may give the same ephemeral port to two binds in a row once
/// the first is closed, so a test that asks for three ports at once (API,
/// WebSocket, join) could get one twice and its server would then fail to
/// listen. The ports already returned are remembered and skipped.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Hold every candidate open until one is new, so the kernel cannot
    // offer the same port again while searching.
    let mut held = Vec::new();
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap_or_else(|e| panic!("find a free port: {e}"));
        let port = listener.local_addr().unwrap_or_else(|e| panic!("find a free port: {e}")).port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
        held.push(listener);
        assert!(held.len() < 1000, "find a free port: the kernel keeps offering ports already handed out");
    }
}

/// An etcd server for one test.
#[derive(Debug)]
pub struct EtcdServer {
    child: Child,
    /// Client URL (`http://127.0.0.1:PORT`).
    pub url: String,
    _dir: TempDir,
}

impl EtcdServer {
    /// Starts `etcd` (Debian's `etcd-server`, installed by `scripts/test.sh`)
    /// on free loopback ports and waits until it is healthy.
    ///
    /// # Panics
    /// If etcd is not installed or does not become healthy in 30 s; the
    /// message says why (the test fails, it is never skipped).
    pub fn start() -> EtcdServer {
        let dir = TempDir::new("etcd");
        let (client, peer) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let log = std::fs::File::create(dir.path().join("etcd.log")).unwrap_or_else(|e| panic!("create etcd log: {e}"));
        let child = Command::new("etcd")
            .arg("--name=test")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=test={peer_url}"))
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("start etcd (is Debian's etcd-server installed? scripts/test.sh installs it): {e}")
            });
        let server = EtcdServer { child, url, _dir: dir };
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, client));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if healthy(addr) {
                return server;
            }
            let log = std::fs::read_to_string(server._dir.path().join("etcd.log")).unwrap_or_default();
            assert!(std::time::Instant::now() < deadline, "etcd did not become healthy in 30 s; its log:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn healthy(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.contains("\"health\":\"true\"")
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::free_port;

    #[test]
    fn free_ports_are_never_handed_out_twice() {
        let mut ports: Vec<u16> = (0..500).map(|_| free_port()).collect();
        ports.sort_unstable();
        let before = ports.len();
        ports.dedup();
        assert_eq!(ports.len(), before, "a port was handed out twice");
    }
}
