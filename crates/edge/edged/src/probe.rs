//! Probes, as kubelet runs them: `exec` (a command run in the container by
//! its runtime; exit 0 passes), `httpGet` (status 200–399 passes),
//! `tcpSocket` (a connection passes), with `initialDelaySeconds`,
//! `periodSeconds`, `timeoutSeconds`, `successThreshold` and
//! `failureThreshold`. Ports are on the pod's IP (127.0.0.1 for pods on the
//! host's network) unless the probe names a host.

use std::time::Duration;

use crate::runtime::Container;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run a command.
    Exec(Vec<String>),
    /// `GET http://{host}:{port}{path}`.
    Http {
        /// Host (empty: the pod's).
        host: String,
        /// Port.
        port: u16,
        /// Path.
        path: String,
    },
    /// Connect to `{host}:{port}`.
    Tcp {
        /// Host (empty: the pod's).
        host: String,
        /// Port.
        port: u16,
    },
}

/// One probe of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// What to check.
    pub action: Action,
    /// Wait before the first check.
    pub initial_delay: Duration,
    /// Time between checks.
    pub period: Duration,
    /// Deadline of one check.
    pub timeout: Duration,
    /// Passes in a row that make it pass.
    pub success_threshold: u32,
    /// Failures in a row that make it fail.
    pub failure_threshold: u32,
}

fn secs(v: &Value, key: &str, default: u64) -> Duration {
    Duration::from_secs(v[key].as_u64().unwrap_or(default))
}

fn port_of(v: &Value) -> Option<u16> {
    v["port"].as_u64().and_then(|p| u16::try_from(p).ok()).or_else(|| v["port"].as_str()?.parse().ok())
}

impl Probe {
    /// Reads a probe from a container's `livenessProbe` and the like; `None`
    /// for none or one the process runtime cannot run (named ports, gRPC).
    pub fn parse(v: &Value) -> Option<Probe> {
        if !v.is_object() {
            return None;
        }
        let host = |h: &Value| h["host"].as_str().unwrap_or_default().to_owned();
        let action = if let Some(cmd) = v.pointer("/exec/command").and_then(Value::as_array) {
            Action::Exec(cmd.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        } else if let Some(h) = v.get("httpGet") {
            Action::Http { host: host(h), port: port_of(h)?, path: h["path"].as_str().unwrap_or("/").to_owned() }
        } else if let Some(t) = v.get("tcpSocket") {
            Action::Tcp { host: host(t), port: port_of(t)? }
        } else {
            return None;
        };
        Some(Probe {
            action,
            initial_delay: secs(v, "initialDelaySeconds", 0),
            period: secs(v, "periodSeconds", 10).max(Duration::from_secs(1)),
            timeout: secs(v, "timeoutSeconds", 1).max(Duration::from_secs(1)),
            success_threshold: v["successThreshold"].as_u64().map_or(1, |n| n.max(1) as u32),
            failure_threshold: v["failureThreshold"].as_u64().map_or(3, |n| n.max(1) as u32),
        })
    }

    /// What a failed check says in an `Unhealthy` Event, after kubelet's
    /// `Liveness probe failed: ` (kubelet puts the probe's output there;
    /// a check here tells only pass or fail, so this names what failed).
    pub fn failure(&self, pod_host: &str) -> String {
        let host = |h: &str| if h.is_empty() { pod_host.to_owned() } else { h.to_owned() };
        match &self.action {
            Action::Exec(argv) => format!("command {:?} did not exit with code 0", argv.join(" ")),
            Action::Http { host: h, port, path } => {
                format!("Get \"http://{}:{port}{path}\": no success status within {}s", host(h), self.timeout.as_secs())
            }
            Action::Tcp { host: h, port } => {
                format!("dial tcp {}:{port}: no connection within {}s", host(h), self.timeout.as_secs())
            }
        }
    }

    /// One check of container `c`, whose pod is at `pod_host`.
    pub async fn check(&self, c: &dyn Container, pod_host: &str) -> bool {
        let host_of = |h: &str| if h.is_empty() { pod_host.to_owned() } else { h.to_owned() };
        let run = async {
            match &self.action {
                Action::Exec(argv) => c.exec(argv, self.timeout).await.is_ok_and(|code| code == 0),
                Action::Tcp { host, port } => tokio::net::TcpStream::connect((host_of(host), *port)).await.is_ok(),
                Action::Http { host, port, path } => {
                    let host = host_of(host);
                    let Ok(mut s) = tokio::net::TcpStream::connect((host.as_str(), *port)).await else { return false };
                    let req =
                        format!("GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: edgehive-probe\r\n\r\n");
                    if s.write_all(req.as_bytes()).await.is_err() {
                        return false;
                    }
                    let mut head = [0u8; 64];
                    let n = s.read(&mut head).await.unwrap_or(0);
                    let line = String::from_utf8_lossy(&head[..n]);
                    let code = line.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok());
                    code.is_some_and(|c| (200..400).contains(&c))
                }
            }
        };
        tokio::time::timeout(self.timeout, run).await.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn probes_parse_with_kubelet_defaults() {
        let p = Probe::parse(&json!({"tcpSocket": {"port": 8080}})).unwrap();
        assert_eq!(p.action, Action::Tcp { host: String::new(), port: 8080 });
        assert_eq!(
            (p.period, p.timeout, p.success_threshold, p.failure_threshold),
            (Duration::from_secs(10), Duration::from_secs(1), 1, 3)
        );
        let h = Probe::parse(&json!({"httpGet": {"path": "/healthz", "port": "9000"}, "periodSeconds": 2})).unwrap();
        assert_eq!(h.action, Action::Http { host: String::new(), port: 9000, path: "/healthz".into() });
        assert!(Probe::parse(&json!({"httpGet": {"port": "http"}})).is_none(), "named ports are not known here");
        assert!(Probe::parse(&json!(null)).is_none());
    }

    #[tokio::test]
    async fn checks_pass_and_fail() {
        use crate::runtime::{ContainerSpec, PodInfo, Runtime as _};
        let dir = edgehive_testkit::fixtures::TempDir::new("edged-probe");
        let rt = crate::process::ProcessRuntime::with_cgroups(dir.path(), crate::cgroup::Cgroups::none());
        let pod = PodInfo {
            uid: "u1".into(),
            name: "p".into(),
            namespace: "default".into(),
            dir: dir.path().join("u1"),
            host_network: true,
            node_ip: "127.0.0.1".into(),
            labels: Default::default(),
        };
        let sandbox = rt.run_sandbox(&pod).await.unwrap();
        let spec = ContainerSpec {
            name: "c".into(),
            image: "i".into(),
            pull_policy: "Never".into(),
            command: vec!["sleep".into(), "30".into()],
            args: vec![],
            env: vec![("WANT".to_owned(), "yes".to_owned())],
            working_dir: String::new(),
            host_dir: pod.dir.join("containers/c"),
            log: pod.dir.join("logs/c.log"),
            mounts: vec![],
            limits: Default::default(),
            interactive: Default::default(),
            attempt: 0,
        };
        let c = rt.start(&pod, &sandbox, &spec).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 256];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let ok = String::from_utf8_lossy(&buf[..n]).starts_with("GET /ok ");
                let status = if ok { "200 OK" } else { "500 Internal Server Error" };
                let _ = s.write_all(format!("HTTP/1.0 {status}\r\n\r\n").as_bytes()).await;
            }
        });
        let probe = |action| Probe {
            action,
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            success_threshold: 1,
            failure_threshold: 1,
        };
        let http = |path: &str| probe(Action::Http { host: String::new(), port, path: path.into() });
        assert!(http("/ok").check(&*c, "127.0.0.1").await);
        assert!(!http("/bad").check(&*c, "127.0.0.1").await);
        assert!(probe(Action::Tcp { host: String::new(), port }).check(&*c, "127.0.0.1").await);
        // exec runs in the container's environment.
        assert!(
            probe(Action::Exec(vec!["sh".into(), "-c".into(), "test \"$WANT\" = yes".into()]))
                .check(&*c, "127.0.0.1")
                .await
        );
        assert!(!probe(Action::Exec(vec!["false".into()])).check(&*c, "127.0.0.1").await);
        c.stop(Duration::from_secs(1)).await;
    }
}
