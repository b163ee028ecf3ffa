//! `edgehive sim` at CI size: 200 simulated nodes (real links, through the
//! command line, the cloud started by the simulator) in the pods, storm and
//! churn scenarios. What is asserted is correctness — every pod delivered
//! and Running, every node back after a storm, nothing the nodes already
//! had sent again, every running node Ready in the API at the end, a
//! deleted node gone for good — never timing.

use std::path::Path;
use std::process::Command;

use edgehive_testkit::fixtures::TempDir;
use serde_json::Value;

const NODES: &str = "200";

/// Runs `edgehive sim` with `args` on a fresh cloud it starts (WebSocket
/// only); its JSON summary.
fn sim(dir: &Path, args: &[&str]) -> Value {
    sim_on(dir, args, &["--no-quic"])
}

/// [`sim`] with `cloud` as the cloud's own arguments.
fn sim_on(dir: &Path, args: &[&str], cloud: &[&str]) -> Value {
    let json = dir.join("summary.json");
    let out = Command::new(env!("CARGO_BIN_EXE_edgehive"))
        .arg("sim")
        .args(args)
        .args(["--nodes", NODES, "--spawn-cloud", "--quiet", "--deadline", "120s"])
        .arg("--data-dir")
        .arg(dir.join("cloud"))
        .arg("--certs-dir")
        .arg(dir.join("certs"))
        .arg("--json")
        .arg(&json)
        // The cloud the simulator starts: a quick sync tick.
        .arg("--")
        .args(cloud)
        .args(["--sync-interval", "1"])
        .output()
        .unwrap();
    let log = std::fs::read_to_string(dir.join("cloud").join("cloud.log")).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(40).collect();
    assert!(
        out.status.success(),
        "edgehive sim {args:?} failed ({}):\n{}\n{}\n--- cloud log (last lines, newest first):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        tail.join("\n")
    );
    let summary: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    summary["figures"].clone()
}

#[test]
fn two_hundred_simulated_nodes_get_every_pod_and_report_it_running() {
    let dir = TempDir::new("sim-pods");
    let f = sim(dir.path(), &["pods", "--pods-per-node", "2", "--rate", "400", "--pod-start", "100ms"]);
    assert_eq!(f["nodes"], 200);
    assert_eq!(f["pods"], 400);
    // Every pod reached its node, which reported it, and the API says Running.
    assert_eq!(f["pods_running"], 400, "{f:#}");
    assert_eq!(f["pod_start_samples"], 400, "{f:#}");
    assert_eq!(f["api_create_samples"], 400, "{f:#}");
    assert_eq!(f["ready_at_end"], "200/200", "{f:#}");
}

#[test]
fn after_a_storm_every_node_is_back_and_nothing_it_had_is_sent_again() {
    let dir = TempDir::new("sim-storm");
    let f = sim(dir.path(), &["storm", "--pods-per-node", "1"]);
    assert_eq!(f["connected"], 200, "{f:#}");
    assert!(f["all_back_s"].is_number(), "{f:#}");
    assert_eq!(f["unchanged_resent"], 0, "{f:#}");
    // The cloud killed and restarted: the same, from its store; its
    // session ticket keys derive from a secret kept in its data directory,
    // so every edge resumes its TLS session with the new process too.
    let f = sim(dir.path(), &["storm", "--storm", "cloud-restart", "--pods-per-node", "1"]);
    assert_eq!(f["connected"], 200, "{f:#}");
    assert!(f["all_back_s"].is_number(), "{f:#}");
    assert_eq!(f["unchanged_resent"], 0, "{f:#}");
    assert_eq!(f["tls_resumed"], 200, "{f:#}");
    assert_eq!(f["ready_at_end"], "200/200", "{f:#}");
}

#[test]
fn over_quic_a_storm_resumes_every_session_and_a_restarted_cloud_resets_every_link_and_resumes_too() {
    let dir = TempDir::new("sim-storm-quic");
    let quic = ["--transport", "quic", "--pods-per-node", "1"];
    let f = sim_on(dir.path(), &[&["storm"][..], &quic].concat(), &[]);
    assert_eq!(f["connected"], 200, "{f:#}");
    assert_eq!(f["unchanged_resent"], 0, "{f:#}");
    // Every edge came back on its session ticket: no certificate was
    // signed or verified again.
    assert_eq!(f["tls_resumed"], 200, "{f:#}");
    assert_eq!(f["ready_at_end"], "200/200", "{f:#}");
    // The cloud killed and restarted: it answers the edges' next packets
    // with stateless resets (its reset secret is kept in its data
    // directory), so no edge waits out its idle timeout (three 15 s
    // heartbeats) before it dials again.
    let f = sim_on(dir.path(), &[&["storm", "--storm", "cloud-restart"][..], &quic].concat(), &[]);
    assert_eq!(f["connected"], 200, "{f:#}");
    assert_eq!(f["unchanged_resent"], 0, "{f:#}");
    assert_eq!(f["ready_at_end"], "200/200", "{f:#}");
    assert_eq!(f["tls_resumed"], 200, "{f:#}");
    let back = f["all_back_s"].as_f64().unwrap();
    assert!(back < 45.0, "the edges waited out their idle timeout: back after {back} s\n{f:#}");
}

#[test]
fn nodes_that_leave_stay_gone_and_those_that_join_are_ready() {
    let dir = TempDir::new("sim-churn");
    let f = sim(dir.path(), &["churn", "--churn-rate", "20", "--duration", "3s"]);
    let replaced = f["replaced"].as_u64().unwrap();
    assert!(replaced > 0, "{f:#}");
    assert_eq!(f["registered_new"], replaced, "{f:#}");
    assert_eq!(f["removed_left"], 0, "{f:#}");
    assert_eq!(f["ready_at_end"], "200/200", "{f:#}");
}
