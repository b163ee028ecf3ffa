//! The binary as a newcomer runs it.

use std::io::Write;
use std::process::{Command, Stdio};

fn edgehive() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_edgehive"));
    c.env("EDGEHIVE_LOG", "warn");
    c
}

#[test]
fn demo_carries_pods_and_acks_over_the_bus() {
    let out = edgehive().args(["demo", "--pods", "3"]).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "demo failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("3 of 3 pods acknowledged"), "{stdout}");
    // The ACK on the wire is KubeEdge's: a response whose content is "OK".
    let ack = stdout.lines().find(|l| l.starts_with("edge -> cloud: ")).unwrap();
    let json: serde_json::Value = serde_json::from_str(ack.trim_start_matches("edge -> cloud: ")).unwrap();
    assert_eq!(json["route"]["operation"], "response");
    assert_eq!(json["content"], "OK");
    assert!(json["header"]["parent_msg_id"].as_str().is_some_and(|p| p.len() == 36));
}

#[test]
fn inspect_explains_good_lines_and_flags_bad_ones() {
    let mut child = edgehive().arg("inspect").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            concat!(
                r#"{"header":{"msg_id":"k1","timestamp":1},"route":{"source":"websocket","group":"resource","operation":"keepalive","resource":"node"},"content":"ping"}"#,
                "\n",
                r#"{"header":{"msg_id":"#,
                "\n",
                r#"{"header":{"msg_id":"p1","timestamp":1},"route":{"operation":"insert","resource":"node/edge-1/default/pod/nginx"},"content":{}}"#,
                "\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "a bad line makes the exit code 1: {stdout}");
    assert!(stdout.contains("line 1: k1 keepalive node from websocket"), "{stdout}");
    assert!(stdout.contains("line 2: invalid: decode message (Truncated"), "{stdout}");
    assert!(stdout.contains("line 3: p1 insert node/edge-1/default/pod/nginx"), "{stdout}");
    assert!(stdout.contains("cloud-internal path for node edge-1"), "{stdout}");
}

#[test]
fn bad_log_filter_is_a_clear_error() {
    let out = edgehive().args(["--log", "[[[", "demo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("parse log filter"));
}
