//! What the cloud asks of a KubeEdge edge's own server (edged's kubelet API
//! on `127.0.0.1:10350`) for each stream session, and how its answers read.
//!
//! CloudStream forwards the request kube-apiserver made to "the kubelet":
//! the URL with its host replaced by `127.0.0.1:10350` and the headers as
//! they came (`cloud/pkg/cloudstream/container*_connection.go`), in a
//! connect message whose data is `EdgedLogsConnection` /
//! `EdgedExecConnection` / `EdgedAttachConnection` as JSON. The edge makes
//! that request itself: for logs with an HTTP client, relaying only the
//! response body; for exec and attach it dials the address, writes the
//! request and relays the raw bytes of the connection both ways, response
//! head included (`pkg/stream/edged*connection.go`). [`connect_request`]
//! builds the same request kube-apiserver's `LogLocation` and
//! `streamLocation` would (paths `/containerLogs/…`, `/exec/…`,
//! `/attach/…`, their query in Go's `url.Values.Encode` order and escaping),
//! asking for a WebSocket upgrade speaking Kubernetes' remote command
//! protocol, since the cloud then speaks it to the edge's server itself.

use std::collections::BTreeMap;

use bytes::Bytes;
use edgehive_model::session::{SessionKind, SessionReply, SessionRequest};
use serde::Serialize;

use crate::message::{MessageType, TunnelMessage};

/// Where CloudStream tells the edge to send the request: edged's server
/// (`defaultServerHost`, `constants.ServerPort`).
pub const EDGED_ADDRESS: &str = "127.0.0.1:10350";

/// Remote command protocols offered to the edge's server, best first: v5
/// can close stdin; kubelet before 1.30 speaks v4 at most.
pub(crate) const PROTOCOL_V5: &str = "v5.channel.k8s.io";
pub(crate) const PROTOCOL_V4: &str = "v4.channel.k8s.io";

/// A request for the edge's server, as CloudStream's connect message
/// carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgedRequest {
    /// `LOGS_CONNECT`, `EXEC_CONNECT` or `ATTACH_CONNECT`.
    pub kind: MessageType,
    /// The HTTP method (`GET`).
    pub method: &'static str,
    /// `host:port` of the edge's server.
    pub host: String,
    /// The path, e.g. `/containerLogs/default/web/app`.
    pub path: String,
    /// The query, encoded as Go's `url.Values.Encode` does.
    pub raw_query: String,
    /// Headers, by their canonical Go names (`http.Header`).
    pub header: BTreeMap<String, Vec<String>>,
}

/// `url.URL` as Go's `encoding/json` writes it (Go 1.19 and later).
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct GoUrl<'a> {
    scheme: &'a str,
    opaque: &'a str,
    user: Option<()>,
    host: &'a str,
    path: &'a str,
    raw_path: &'a str,
    omit_host: bool,
    force_query: bool,
    raw_query: &'a str,
    fragment: &'a str,
    raw_fragment: &'a str,
}

/// `EdgedLogsConnection` and `EdgedMetricsConnection` (no `method`),
/// `EdgedExecConnection`,
/// `EdgedAttachConnection`: `ReadChan` and `Stop` are `json:"-"`.
#[derive(Serialize)]
struct Connector<'a> {
    #[serde(rename = "MessID")]
    mess_id: u64,
    url: GoUrl<'a>,
    header: &'a BTreeMap<String, Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
}

impl EdgedRequest {
    /// The connect message for connection `connect_id`, byte for byte as
    /// CloudStream's `CreateConnectMessage` makes it.
    pub fn connect_message(&self, connect_id: u64) -> TunnelMessage {
        let connector = Connector {
            mess_id: connect_id,
            url: GoUrl {
                scheme: "http",
                opaque: "",
                user: None,
                host: &self.host,
                path: &self.path,
                raw_path: "",
                omit_host: false,
                force_query: false,
                raw_query: &self.raw_query,
                fragment: "",
                raw_fragment: "",
            },
            header: &self.header,
            method: (!matches!(self.kind, MessageType::LogsConnect | MessageType::MetricConnect))
                .then_some(self.method),
        };
        let json = serde_json::to_string(&connector).unwrap_or_default();
        TunnelMessage::new(connect_id, self.kind, Bytes::from(edgehive_model::json::go_html_escape(json)))
    }

    /// The URL the edge requests (`url.URL.String()`).
    pub fn url(&self) -> String {
        if self.raw_query.is_empty() {
            format!("http://{}{}", self.host, self.path)
        } else {
            format!("http://{}{}?{}", self.host, self.path, self.raw_query)
        }
    }
}

/// Go's `url.QueryEscape`.
fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(char::from(b)),
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Go's `url.Values.Encode`: keys sorted, each key's values in order.
fn encode_query(params: &[(&str, String)]) -> String {
    let mut sorted: Vec<&(&str, String)> = params.iter().collect();
    // A stable sort keeps each key's values in the order they were added.
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    sorted.iter().map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v))).collect::<Vec<_>>().join("&")
}

/// The request for a session, or the refusal for a session the tunnel
/// cannot carry. `websocket_key` is the `Sec-WebSocket-Key` of an exec's or
/// attach's upgrade.
pub fn connect_request(r: &SessionRequest, host: &str, websocket_key: &str) -> Result<EdgedRequest, SessionReply> {
    let kind = r.kind.ok_or_else(|| SessionReply::refuse(400, "BadRequest", "session kind missing or unknown"))?;
    let mut params: Vec<(&str, String)> = Vec::new();
    let (kind, path) = match kind {
        SessionKind::Log => {
            let o = &r.log;
            if o.follow {
                params.push(("follow", "true".into()));
            }
            if o.previous {
                params.push(("previous", "true".into()));
            }
            if o.timestamps {
                params.push(("timestamps", "true".into()));
            }
            if let Some(s) = o.since_seconds {
                params.push(("sinceSeconds", s.to_string()));
            }
            if let Some(t) = &o.since_time {
                params.push(("sinceTime", t.clone()));
            }
            if let Some(t) = o.tail_lines {
                params.push(("tailLines", t.to_string()));
            }
            if let Some(l) = o.limit_bytes {
                params.push(("limitBytes", l.to_string()));
            }
            (MessageType::LogsConnect, format!("/containerLogs/{}/{}/{}", r.namespace, r.pod, r.container))
        }
        SessionKind::Exec | SessionKind::Attach => {
            // streamParams: input, output, error, tty, then each command word.
            for (on, name) in [(r.stdin, "input"), (r.stdout, "output"), (r.stderr, "error"), (r.tty, "tty")] {
                if on {
                    params.push((name, "1".into()));
                }
            }
            if kind == SessionKind::Exec {
                params.extend(r.command.iter().map(|c| ("command", c.clone())));
                (MessageType::ExecConnect, format!("/exec/{}/{}/{}", r.namespace, r.pod, r.container))
            } else {
                (MessageType::AttachConnect, format!("/attach/{}/{}/{}", r.namespace, r.pod, r.container))
            }
        }
        // The node's usage: kubelet's Summary API, which the bridge reads
        // into a usage summary (`METRIC_CONNECT`, as CloudStream forwards
        // metrics-server's scrapes).
        SessionKind::Metrics => (MessageType::MetricConnect, SUMMARY_PATH.to_owned()),
        // One of the node's own endpoints, its query as the client sent it.
        SessionKind::Proxy => {
            let (path, query) = r.path.split_once('?').unwrap_or((r.path.as_str(), ""));
            if !path.starts_with('/') || path.contains("/../") || path.ends_with("/..") {
                return Err(SessionReply::refuse(400, "BadRequest", format!("not a path of the node: {:?}", r.path)));
            }
            let mut req = metric_request(host, path);
            req.raw_query = query.to_owned();
            return Ok(req);
        }
        other => return Err(unsupported(other)),
    };
    let mut header = BTreeMap::new();
    if !matches!(kind, MessageType::LogsConnect | MessageType::MetricConnect) {
        let mut set = |k: &str, v: &str| {
            header.insert(k.to_owned(), vec![v.to_owned()]);
        };
        set("Connection", "Upgrade");
        set("Upgrade", "websocket");
        set("Sec-Websocket-Version", "13");
        set("Sec-Websocket-Key", websocket_key);
        set("Sec-Websocket-Protocol", &format!("{PROTOCOL_V5}, {PROTOCOL_V4}"));
    }
    Ok(EdgedRequest { kind, method: "GET", host: host.to_owned(), path, raw_query: encode_query(&params), header })
}

/// kubelet's Summary API, where a KubeEdge edge's usage is read.
pub const SUMMARY_PATH: &str = "/stats/summary";

fn metric_request(host: &str, path: &str) -> EdgedRequest {
    EdgedRequest {
        kind: MessageType::MetricConnect,
        method: "GET",
        host: host.to_owned(),
        path: path.to_owned(),
        raw_query: String::new(),
        header: BTreeMap::new(),
    }
}

/// A usage summary from kubelet's Summary API (`/stats/summary`): the
/// node's and each running container's CPU rate and working set.
pub fn usage_from_summary(summary: &[u8]) -> Result<edgehive_model::session::UsageSummary, String> {
    use edgehive_model::session::{ContainerUsage, PodUsage, Usage, UsageSummary};
    let v: serde_json::Value =
        serde_json::from_slice(summary).map_err(|e| format!("the node's /stats/summary does not parse: {e}"))?;
    let usage = |s: &serde_json::Value| Usage {
        cpu_nano_cores: s["cpu"]["usageNanoCores"].as_u64().unwrap_or(0),
        cpu_core_nano_seconds: s["cpu"]["usageCoreNanoSeconds"].as_u64().unwrap_or(0),
        memory_bytes: s["memory"]["workingSetBytes"].as_u64().unwrap_or(0),
    };
    let node = &v["node"];
    if !node.is_object() {
        return Err("the node's /stats/summary has no node".into());
    }
    let pods = v["pods"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| PodUsage {
            namespace: p["podRef"]["namespace"].as_str().unwrap_or_default().to_owned(),
            name: p["podRef"]["name"].as_str().unwrap_or_default().to_owned(),
            uid: p["podRef"]["uid"].as_str().unwrap_or_default().to_owned(),
            containers: p["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["cpu"].is_object() || c["memory"].is_object())
                .map(|c| ContainerUsage { name: c["name"].as_str().unwrap_or_default().to_owned(), usage: usage(c) })
                .collect(),
        })
        .collect();
    Ok(UsageSummary {
        timestamp: node["cpu"]["time"].as_str().unwrap_or_default().to_owned(),
        // kubelet's rates are over its stats collector's interval.
        window_ms: SUMMARY_WINDOW_MS,
        node: usage(node),
        pods,
    })
}

/// The window kubelet's CPU rates are over (its housekeeping interval).
const SUMMARY_WINDOW_MS: u64 = 10_000;

/// The refusal of a session KubeEdge's tunnel cannot carry.
fn unsupported(kind: SessionKind) -> SessionReply {
    let what = match kind {
        SessionKind::Portforward => "port forwarding".to_owned(),
        other => format!("a {other:?} session"),
    };
    SessionReply::refuse(
        400,
        "BadRequest",
        format!(
            "{what} to a KubeEdge node is not supported: its stream tunnel carries container logs, exec, \
             attach and the node's metrics only"
        ),
    )
}

/// The head of the edge's server's HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResponseHead {
    pub(crate) status: u16,
    /// Header names lowercased.
    pub(crate) headers: Vec<(String, String)>,
}

impl ResponseHead {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Whether the header's comma-separated tokens include `token`.
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

/// Parses a response head (up to and including the blank line).
pub(crate) fn parse_head(head: &[u8]) -> Result<ResponseHead, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the response head is not text".to_owned())?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP/1 response: {:?}", truncate(status_line, 64)));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..600).contains(s))
        .ok_or_else(|| format!("bad status line {:?}", truncate(status_line, 64)))?;
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (k, v) = line.split_once(':').ok_or_else(|| format!("bad header line {:?}", truncate(line, 64)))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
    }
    Ok(ResponseHead { status, headers })
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Kubernetes' reason for an HTTP status.
fn reason_of(status: u16) -> &'static str {
    match status {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

/// The session's refusal for an error response of the edge's server: its
/// status, and the message of its body (a Kubernetes `Status`'s message, or
/// the text kubelet writes).
pub(crate) fn refusal(status: u16, body: &[u8]) -> SessionReply {
    let status = if (400..600).contains(&status) { status } else { 500 };
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = v["message"].as_str()
    {
        let reason = v["reason"].as_str().filter(|r| !r.is_empty()).unwrap_or(reason_of(status));
        return SessionReply::refuse(status, reason, message);
    }
    let text = String::from_utf8_lossy(body);
    let text = truncate(text.trim(), 4096);
    let message = if text.is_empty() {
        format!("the node's server answered {status} without a message")
    } else {
        text.to_owned()
    };
    SessionReply::refuse(status, reason_of(status), message)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use edgehive_model::session::LogOptions;

    use super::*;

    fn exec(command: &[&str]) -> SessionRequest {
        SessionRequest {
            kind: Some(SessionKind::Exec),
            namespace: "default".into(),
            pod: "web".into(),
            container: "app".into(),
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            stdin: true,
            stdout: true,
            stderr: true,
            ..SessionRequest::default()
        }
    }

    /// The connect messages, byte for byte as Go's `json.Marshal` writes
    /// the connectors (checked against Go 1.19's output).
    #[test]
    fn connect_messages_are_the_json_cloudstream_sends() {
        let log = SessionRequest {
            kind: Some(SessionKind::Log),
            namespace: "default".into(),
            pod: "web".into(),
            container: "app".into(),
            log: LogOptions { tail_lines: Some(2), follow: true, ..LogOptions::default() },
            ..SessionRequest::default()
        };
        let r = connect_request(&log, EDGED_ADDRESS, "").unwrap();
        let m = r.connect_message(1);
        assert_eq!(m.kind, MessageType::LogsConnect);
        assert_eq!(
            std::str::from_utf8(&m.data).unwrap(),
            r#"{"MessID":1,"url":{"Scheme":"http","Opaque":"","User":null,"Host":"127.0.0.1:10350","Path":"/containerLogs/default/web/app","RawPath":"","OmitHost":false,"ForceQuery":false,"RawQuery":"follow=true\u0026tailLines=2","Fragment":"","RawFragment":""},"header":{}}"#
        );
        assert_eq!(&m.encode()[..2], b"\x01\x00");

        let r = connect_request(&exec(&["sh", "-c", "echo a&b <~*> é"]), EDGED_ADDRESS, "x").unwrap();
        let m = r.connect_message(7);
        assert_eq!(m.kind, MessageType::ExecConnect);
        assert_eq!(
            std::str::from_utf8(&m.data).unwrap(),
            concat!(
                r#"{"MessID":7,"url":{"Scheme":"http","Opaque":"","User":null,"Host":"127.0.0.1:10350","#,
                r#""Path":"/exec/default/web/app","RawPath":"","OmitHost":false,"ForceQuery":false,"#,
                r#""RawQuery":"command=sh\u0026command=-c\u0026command=echo+a%26b+%3C~%2A%3E+%C3%A9\u0026error=1\u0026input=1\u0026output=1","#,
                r#""Fragment":"","RawFragment":""},"header":{"Connection":["Upgrade"],"Sec-Websocket-Key":["x"],"#,
                r#""Sec-Websocket-Protocol":["v5.channel.k8s.io, v4.channel.k8s.io"],"Sec-Websocket-Version":["13"],"#,
                r#""Upgrade":["websocket"]},"method":"GET"}"#
            )
        );
    }

    #[test]
    fn metrics_and_proxy_are_metric_connects_and_a_summary_reads_as_usage() {
        let metrics = SessionRequest { kind: Some(SessionKind::Metrics), ..SessionRequest::default() };
        let m = connect_request(&metrics, EDGED_ADDRESS, "").unwrap().connect_message(3);
        assert_eq!(m.kind, MessageType::MetricConnect);
        assert_eq!(
            std::str::from_utf8(&m.data).unwrap(),
            r#"{"MessID":3,"url":{"Scheme":"http","Opaque":"","User":null,"Host":"127.0.0.1:10350","Path":"/stats/summary","RawPath":"","OmitHost":false,"ForceQuery":false,"RawQuery":"","Fragment":"","RawFragment":""},"header":{}}"#
        );
        let proxy = |path: &str| {
            connect_request(
                &SessionRequest { kind: Some(SessionKind::Proxy), path: path.into(), ..SessionRequest::default() },
                EDGED_ADDRESS,
                "",
            )
        };
        let r = proxy("/metrics/resource?a=b%20c").unwrap();
        assert_eq!(
            (r.kind, r.path.as_str(), r.raw_query.as_str()),
            (MessageType::MetricConnect, "/metrics/resource", "a=b%20c")
        );
        for bad in ["metrics", "/a/../b", "/.."] {
            assert_eq!(proxy(bad).unwrap_err().code, 400, "{bad}");
        }

        let summary = br#"{"node":{"nodeName":"n","cpu":{"time":"2026-11-25T01:00:00Z","usageNanoCores":250000000,"usageCoreNanoSeconds":9000000000},"memory":{"time":"2026-11-25T01:00:00Z","workingSetBytes":536870912}},
            "pods":[{"podRef":{"name":"web","namespace":"default","uid":"u1"},"containers":[{"name":"app","cpu":{"usageNanoCores":20000000},"memory":{"workingSetBytes":8388608}},{"name":"waiting"}]}]}"#;
        let u = usage_from_summary(summary).unwrap();
        assert_eq!(u.timestamp, "2026-11-25T01:00:00Z");
        assert_eq!(
            (u.node.cpu_nano_cores, u.node.cpu_core_nano_seconds, u.node.memory_bytes),
            (250_000_000, 9_000_000_000, 536_870_912)
        );
        assert_eq!(
            (u.pods[0].namespace.as_str(), u.pods[0].name.as_str(), u.pods[0].uid.as_str()),
            ("default", "web", "u1")
        );
        assert_eq!(u.pods[0].containers.len(), 1, "a container with no stats is left out");
        assert_eq!(u.pods[0].containers[0].usage.memory_bytes, 8_388_608);
        assert!(usage_from_summary(b"404 page not found").unwrap_err().contains("does not parse"));
        assert!(usage_from_summary(b"{}").unwrap_err().contains("no node"));
    }

    #[test]
    fn each_session_kind_reaches_the_kubelet_path_apiserver_would_use() {
        let mut log = SessionRequest {
            kind: Some(SessionKind::Log),
            namespace: "ns".into(),
            pod: "p".into(),
            container: "c".into(),
            ..SessionRequest::default()
        };
        log.log = LogOptions {
            follow: true,
            previous: true,
            timestamps: true,
            tail_lines: Some(10),
            since_seconds: Some(5),
            since_time: None,
            limit_bytes: Some(100),
        };
        assert_eq!(
            connect_request(&log, "h:1", "").unwrap().url(),
            "http://h:1/containerLogs/ns/p/c?follow=true&limitBytes=100&previous=true&sinceSeconds=5&tailLines=10&timestamps=true"
        );
        log.log = LogOptions { since_time: Some("2026-01-02T03:04:05Z".into()), ..LogOptions::default() };
        assert_eq!(
            connect_request(&log, "h:1", "").unwrap().url(),
            "http://h:1/containerLogs/ns/p/c?sinceTime=2026-01-02T03%3A04%3A05Z"
        );
        log.log = LogOptions::default();
        assert_eq!(connect_request(&log, "h:1", "").unwrap().url(), "http://h:1/containerLogs/ns/p/c");

        let attach =
            SessionRequest { kind: Some(SessionKind::Attach), stdin: true, stdout: true, tty: true, ..log.clone() };
        let r = connect_request(&attach, "h:1", "k").unwrap();
        assert_eq!(
            (r.kind, r.url().as_str()),
            (MessageType::AttachConnect, "http://h:1/attach/ns/p/c?input=1&output=1&tty=1")
        );
        assert!(r.connect_message(3).data.ends_with(br#""method":"GET"}"#));

        let forward = SessionRequest { kind: Some(SessionKind::Portforward), port: Some(80), ..log.clone() };
        let refused = connect_request(&forward, "h:1", "").unwrap_err();
        assert_eq!(refused.code, 400);
        assert!(refused.message.contains("port forwarding"), "{}", refused.message);
        assert_eq!(connect_request(&SessionRequest::default(), "h:1", "").unwrap_err().code, 400);
    }

    #[test]
    fn response_heads_and_refusals_read_as_kubelet_writes_them() {
        let h = parse_head(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n").unwrap();
        assert_eq!(h.status, 101);
        assert_eq!(h.header("sec-websocket-protocol"), Some("v4.channel.k8s.io"));
        assert!(h.has_token("connection", "upgrade"));
        assert!(parse_head(b"SSH-2.0\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 abc\r\n\r\n").is_err());

        let r = refusal(404, b"container not found (\"gone\")\n");
        assert_eq!(
            (r.code, r.reason.as_str(), r.message.as_str()),
            (404, "NotFound", "container not found (\"gone\")")
        );
        let status =
            br#"{"kind":"Status","status":"Failure","message":"pod is not running","reason":"BadRequest","code":400}"#;
        let r = refusal(400, status);
        assert_eq!((r.reason.as_str(), r.message.as_str()), ("BadRequest", "pod is not running"));
        assert_eq!(refusal(200, b"").code, 500);
        assert!(refusal(502, b"").message.contains("502"));
    }
}
