//! A Go peer built the way KubeEdge's EdgeHub is (Go, gorilla/websocket,
//! crypto/tls; Debian's golang-go and golang-github-gorilla-websocket-dev,
//! which scripts/test.sh installs) joins our WebSocket server, sends its
//! keepalive and ACKs pod inserts.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use edgehive_viaduct::ConnConfig;

fn build_goedge(dir: &Path) -> PathBuf {
    edgehive_testkit::go::build(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goedge/main.go"), dir, "goedge")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_gorilla_edge_joins_and_acks_over_tls13() {
    go_edge_session(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_go_gorilla_edge_joins_and_acks_over_tls12() {
    go_edge_session(true).await;
}

async fn go_edge_session(tls12: bool) {
    let dir = std::env::temp_dir().join(format!("goedge-{}-{tls12}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || build_goedge(&dir)
    })
    .await
    .unwrap();

    let pki = Pki::new();
    let node = pki.ca.node("edge-go");
    std::fs::write(dir.join("ca.pem"), &pki.ca.cert_pem).unwrap();
    std::fs::write(dir.join("edge.pem"), &node.cert_pem).unwrap();
    std::fs::write(dir.join("edge.key"), &node.key_pem).unwrap();
    let mut srv = server(&pki, ConnConfig::default()).await;

    let child = tokio::process::Command::new(&bin)
        .arg(srv.local_addr().to_string())
        .arg(dir.join("ca.pem"))
        .arg(dir.join("edge.pem"))
        .arg(dir.join("edge.key"))
        .arg("edge-go")
        .arg("3")
        .env("GOEDGE_TLS12", if tls12 { "1" } else { "0" })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();

    let conn =
        tokio::time::timeout(Duration::from_secs(30), srv.accept()).await.expect("Go edge never connected").unwrap();
    assert_eq!(conn.peer().node_id, "edge-go", "Go sends Node_id; matched case-insensitively");
    assert_eq!(conn.peer().cert.as_ref().unwrap().node_name(), Some("edge-go"));
    let (tx, mut rx) = conn.split();

    let keepalive = rx.recv().await.unwrap();
    assert_eq!(keepalive.route.operation, "keepalive");
    assert_eq!(keepalive.route.source, "websocket");
    assert_eq!(keepalive.content.as_text().as_deref(), Some("ping"));

    let mut sent = Vec::new();
    for i in 0..3 {
        let m = pod(&format!("p{i}"));
        sent.push(m.header.msg_id.clone());
        tx.write(m).await.unwrap();
    }
    for id in &sent {
        let ack = rx.recv().await.unwrap();
        assert_eq!(&ack.header.parent_msg_id, id);
        assert_eq!(ack.route.operation, "response");
        assert_eq!(ack.content.as_text().as_deref(), Some("OK"));
    }
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "goedge failed: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("ack default/pod/p2 rv=1"), "{stdout}");
    // crypto/tls version codes: 0x303 is TLS 1.2, 0x304 TLS 1.3.
    assert!(stdout.contains(if tls12 { "tls 303" } else { "tls 304" }), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
