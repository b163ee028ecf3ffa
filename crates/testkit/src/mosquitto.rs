//! A mosquitto broker for one test (Debian's `mosquitto`, installed by
//! `scripts/test.sh`), and its plain clients `mosquitto_pub` /
//! `mosquitto_sub` as the device side: what a user's MQTT app does.
// Blocking waits with deadlines, for the tests' own threads.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::fixtures::{TempDir, free_port};

const DEADLINE: Duration = Duration::from_secs(30);

/// A broker on a free loopback port, killed when dropped.
#[derive(Debug)]
pub struct Mosquitto {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    conf: PathBuf,
    _dir: TempDir,
}

fn binary() -> &'static str {
    if Path::new("/usr/sbin/mosquitto").exists() { "/usr/sbin/mosquitto" } else { "mosquitto" }
}

impl Mosquitto {
    /// Starts it and waits until it listens.
    ///
    /// # Panics
    /// If mosquitto is not installed or does not listen in 30 s.
    pub fn start() -> Mosquitto {
        let dir = TempDir::new("mosquitto");
        let port = free_port();
        let conf = dir.path().join("mosquitto.conf");
        let text = format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\n"
        );
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
        let mut m = Mosquitto { child: None, port, conf, _dir: dir };
        m.restart();
        m
    }

    /// Stops it (if running) and starts it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new(binary())
            .arg("-c")
            .arg(&self.conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("run mosquitto (Debian's mosquitto package): {e}"));
        self.child = Some(child);
        wait_listening(self.port);
    }

    /// Stops it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `tcp://127.0.0.1:{port}`, as KubeEdge's `mqttServerExternal` says it.
    pub fn url(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.port)
    }
}

impl Drop for Mosquitto {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until something listens on `127.0.0.1:{port}`.
///
/// # Panics
/// After 30 s.
pub fn wait_listening(port: u16) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(start.elapsed() < DEADLINE, "nothing listens on 127.0.0.1:{port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Publishes one message with `mosquitto_pub` (QoS 1), the payload on its
/// standard input (so any size goes).
///
/// # Panics
/// If it fails.
pub fn publish(port: u16, topic: &str, payload: &str) {
    use std::io::Write as _;
    let mut child = Command::new("mosquitto_pub")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-t", topic, "-s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run mosquitto_pub (Debian's mosquitto-clients package): {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(payload.as_bytes()).unwrap_or_else(|e| panic!("mosquitto_pub's stdin: {e}"));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("mosquitto_pub: {e}"));
    assert!(out.status.success(), "mosquitto_pub {topic}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A `mosquitto_sub -v` on a topic filter, collecting `(topic, payload)`.
#[derive(Debug)]
pub struct Subscriber {
    child: Child,
    lines: Arc<Mutex<Vec<(String, String)>>>,
}

impl Subscriber {
    /// Subscribes (QoS 1) and waits until the broker has the subscription:
    /// a probe published on a topic the filter matches must come back.
    ///
    /// # Panics
    /// If the subscription does not work in 30 s.
    pub fn start(port: u16, filter: &str, probe_topic: &str) -> Subscriber {
        let mut child = Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1", "-v", "-t", filter])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("run mosquitto_sub (Debian's mosquitto-clients package): {e}"));
        let lines: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let out = child.stdout.take().unwrap_or_else(|| panic!("mosquitto_sub's stdout"));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let (topic, payload) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                sink.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((topic.to_owned(), payload.to_owned()));
            }
        });
        let s = Subscriber { child, lines };
        let start = Instant::now();
        loop {
            publish(port, probe_topic, "probe");
            let deadline = Instant::now() + Duration::from_millis(300);
            while Instant::now() < deadline {
                if s.received(probe_topic).iter().any(|p| p == "probe") {
                    return s;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            assert!(start.elapsed() < DEADLINE, "mosquitto_sub on {filter} never got its probe");
        }
    }

    /// Payloads received on `topic` so far.
    pub fn received(&self, topic: &str) -> Vec<String> {
        let lines = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        lines.iter().filter(|(t, _)| t == topic).map(|(_, p)| p.clone()).collect()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
