//! Probes, as kubelet runs them: `exec` (a command in the container's
//! working directory and environment; exit 0 passes), `httpGet` (status
//! 200–399 passes), `tcpSocket` (a connection passes), with
//! `initialDelaySeconds`, `periodSeconds`, `timeoutSeconds`,
//! `successThreshold` and `failureThreshold`. The process runtime shares the
//! host network, so ports are on 127.0.0.1 unless the probe names a host.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run a command.
    Exec(Vec<String>),
    /// `GET http://{host}:{port}{path}`.
    Http {
        /// Host (default 127.0.0.1).
        host: String,
        /// Port.
        port: u16,
        /// Path.
        path: String,
    },
    /// Connect to `{host}:{port}`.
    Tcp {
        /// Host.
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
        let host = |h: &Value| h["host"].as_str().filter(|s| !s.is_empty()).unwrap_or("127.0.0.1").to_owned();
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

    /// One check.
    pub async fn check(&self, workdir: &PathBuf, env: &[(String, String)]) -> bool {
        let run = async {
            match &self.action {
                Action::Exec(argv) => {
                    let Some((program, args)) = argv.split_first() else { return false };
                    let status = tokio::process::Command::new(program)
                        .args(args)
                        .env_clear()
                        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()))
                        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                        .current_dir(workdir)
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .kill_on_drop(true)
                        .status()
                        .await;
                    status.is_ok_and(|s| s.success())
                }
                Action::Tcp { host, port } => tokio::net::TcpStream::connect((host.as_str(), *port)).await.is_ok(),
                Action::Http { host, port, path } => {
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
        assert_eq!(p.action, Action::Tcp { host: "127.0.0.1".into(), port: 8080 });
        assert_eq!(
            (p.period, p.timeout, p.success_threshold, p.failure_threshold),
            (Duration::from_secs(10), Duration::from_secs(1), 1, 3)
        );
        let h = Probe::parse(&json!({"httpGet": {"path": "/healthz", "port": "9000"}, "periodSeconds": 2})).unwrap();
        assert_eq!(h.action, Action::Http { host: "127.0.0.1".into(), port: 9000, path: "/healthz".into() });
        assert!(Probe::parse(&json!({"httpGet": {"port": "http"}})).is_none(), "named ports are not known here");
        assert!(Probe::parse(&json!(null)).is_none());
    }

    #[tokio::test]
    async fn checks_pass_and_fail() {
        let dir = std::env::temp_dir();
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
        let http = |path: &str| probe(Action::Http { host: "127.0.0.1".into(), port, path: path.into() });
        assert!(http("/ok").check(&dir, &[]).await);
        assert!(!http("/bad").check(&dir, &[]).await);
        assert!(probe(Action::Tcp { host: "127.0.0.1".into(), port }).check(&dir, &[]).await);
        let env = vec![("WANT".to_owned(), "yes".to_owned())];
        assert!(
            probe(Action::Exec(vec!["sh".into(), "-c".into(), "test \"$WANT\" = yes".into()])).check(&dir, &env).await
        );
        assert!(!probe(Action::Exec(vec!["false".into()])).check(&dir, &[]).await);
    }
}
