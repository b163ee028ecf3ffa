//! What a stream session the cloud opens to an edge is for, and the edge's
//! first answer (docs/protocol.md, "Stream sessions").
//!
//! The cloud opens a session with a [`SessionRequest`] (JSON) as its header.
//! The edge's first frame on the session is a [`SessionReply`] (JSON): `200`
//! when it serves the request, otherwise the Kubernetes status code, reason
//! and message the API server answers the client with. After an accepted
//! reply:
//! - `log`: the edge sends the log's bytes (as `kubectl logs` prints them)
//!   and finishes when the log ends (at once, or when the container ends
//!   when following);
//! - `exec`, `attach`: both ways carry Kubernetes' remote command channels
//!   (`v5.channel.k8s.io`): each frame is one channel byte and its data —
//!   0 stdin, 1 stdout, 2 stderr, 3 error (the final `Status`, JSON), 4
//!   resize (`{"Width":w,"Height":h}`), 255 close (its one data byte is the
//!   channel closed; only stdin is closed this way);
//! - `portforward`: both ways carry the bytes of one TCP connection to
//!   `port` in the pod;
//! - `metrics`: the edge sends one [`UsageSummary`] (JSON) of the node's
//!   and its containers' CPU and memory, then finishes;
//! - `proxy`: the edge answers a GET of one of its own endpoints (`path`),
//!   sends the body and finishes; the reply's `contentType` says what it is.

use serde::{Deserialize, Serialize};

/// What a session is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    /// A container's log (`pods/log`).
    Log,
    /// A command run in a container (`pods/exec`).
    Exec,
    /// The container's own stdin/stdout/stderr (`pods/attach`).
    Attach,
    /// A TCP connection to a port of the pod (`pods/portforward`).
    Portforward,
    /// The node's and its containers' resource usage (`metrics.k8s.io`).
    Metrics,
    /// One of the node's own endpoints (`nodes/{name}/proxy`).
    Proxy,
}

/// The options of `pods/log`, as the API takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogOptions {
    /// Follow the log until the container ends.
    #[serde(default, skip_serializing_if = "is_false")]
    pub follow: bool,
    /// The log of the container's previous attempt.
    #[serde(default, skip_serializing_if = "is_false")]
    pub previous: bool,
    /// Prefix each line with its RFC 3339 time.
    #[serde(default, skip_serializing_if = "is_false")]
    pub timestamps: bool,
    /// Only the last lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail_lines: Option<u64>,
    /// Only lines newer than this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seconds: Option<u64>,
    /// Only lines from this time on (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_time: Option<String>,
    /// Stop after this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The header of a session the cloud opens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionRequest {
    /// What for.
    pub kind: Option<SessionKind>,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's uid the cloud knows (empty: any).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The container (log, exec, attach).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container: String,
    /// The command (exec).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Streams wanted (exec, attach).
    #[serde(default, skip_serializing_if = "is_false")]
    pub stdin: bool,
    /// Stdout wanted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stdout: bool,
    /// Stderr wanted (ignored with a terminal: it is stdout's).
    #[serde(default, skip_serializing_if = "is_false")]
    pub stderr: bool,
    /// A terminal.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tty: bool,
    /// Log options (log).
    #[serde(default, skip_serializing_if = "LogOptions::is_default")]
    pub log: LogOptions,
    /// The port (portforward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The path and query asked of the node (proxy).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
}

impl LogOptions {
    fn is_default(&self) -> bool {
        *self == LogOptions::default()
    }
}

/// The edge's first frame on a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionReply {
    /// `200`, or the HTTP status the API answers with.
    pub code: u16,
    /// Kubernetes' reason word (`NotFound`, `BadRequest`, …); empty on 200.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The media type of the body that follows (proxy).
    #[serde(default, rename = "contentType", skip_serializing_if = "String::is_empty")]
    pub content_type: String,
}

impl SessionReply {
    /// The request is served.
    pub fn ok() -> SessionReply {
        SessionReply { code: 200, reason: String::new(), message: String::new(), content_type: String::new() }
    }

    /// The request is served with a body of `content_type`.
    pub fn ok_with(content_type: &str) -> SessionReply {
        SessionReply { content_type: content_type.to_owned(), ..SessionReply::ok() }
    }

    /// The request is refused.
    pub fn refuse(code: u16, reason: &str, message: impl Into<String>) -> SessionReply {
        SessionReply { code, reason: reason.to_owned(), message: message.into(), content_type: String::new() }
    }
}

/// Most bytes of a [`UsageSummary`] the cloud reads.
pub const MAX_SUMMARY: usize = 4 << 20;

/// CPU and memory in use, as `metrics.k8s.io` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// CPU: nanocores (10^-9 of a core) averaged over the window.
    pub cpu_nano_cores: u64,
    /// CPU: nanoseconds of CPU time used in all (since the container, or
    /// the node, started).
    #[serde(default)]
    pub cpu_core_nano_seconds: u64,
    /// Memory: the working set in bytes (what is in use and cannot be
    /// reclaimed at once: usage less inactive file pages).
    pub memory_bytes: u64,
}

/// One container's usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerUsage {
    /// The container's name.
    pub name: String,
    /// What it uses.
    pub usage: Usage,
}

/// One pod's containers' usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodUsage {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Its running containers.
    pub containers: Vec<ContainerUsage>,
}

/// What an edge answers a `metrics` session with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageSummary {
    /// When the usage was sampled (RFC 3339, UTC).
    pub timestamp: String,
    /// The window CPU usage is averaged over, in milliseconds.
    pub window_ms: u64,
    /// The node's own usage.
    pub node: Usage,
    /// Its pods' usage.
    pub pods: Vec<PodUsage>,
}

/// The remote command channels.
pub mod channel {
    /// The client's input.
    pub const STDIN: u8 = 0;
    /// The command's output.
    pub const STDOUT: u8 = 1;
    /// The command's error output.
    pub const STDERR: u8 = 2;
    /// The final status (a `Status` object, JSON).
    pub const ERROR: u8 = 3;
    /// Terminal size changes (`{"Width":w,"Height":h}`).
    pub const RESIZE: u8 = 4;
    /// Closes the channel named by the one data byte (v5).
    pub const CLOSE: u8 = 255;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_in_their_json() {
        let r = SessionRequest {
            kind: Some(SessionKind::Log),
            namespace: "default".into(),
            pod: "web".into(),
            container: "main".into(),
            log: LogOptions { follow: true, tail_lines: Some(10), ..LogOptions::default() },
            ..SessionRequest::default()
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"log","namespace":"default","pod":"web","container":"main","log":{"follow":true,"tailLines":10}}"#
        );
        assert_eq!(serde_json::from_str::<SessionRequest>(&json).unwrap(), r);
        let reply: SessionReply = serde_json::from_str(r#"{"code":404,"reason":"NotFound","message":"no"}"#).unwrap();
        assert_eq!(reply, SessionReply::refuse(404, "NotFound", "no"));
        assert_eq!(serde_json::to_string(&SessionReply::ok()).unwrap(), r#"{"code":200}"#);
    }
}
