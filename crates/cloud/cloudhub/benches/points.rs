//! Memory of success points held by CloudHub: 1,000,000 (node, object)
//! pairs over 1,000 nodes, with Kubernetes UUID uids, measured as the growth
//! of this process's RSS.
//!
//! ```sh
//! cargo bench -p edgehive-cloudhub --bench points
//! ```
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::HashMap;

use edgehive_cloudhub::UidKey;
use edgehive_cloudhub::points::NodePoints;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    const NODES: usize = 1000;
    const PER_NODE: usize = 1000;
    let before = rss_kib();
    let mut nodes: HashMap<String, NodePoints> = HashMap::new();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for n in 0..NODES {
        let table = nodes.entry(format!("edge-{n}")).or_default();
        for i in 0..PER_NODE {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let uid = format!(
                "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                seed >> 32,
                seed & 0xffff,
                (seed >> 16) & 0xfff,
                (seed >> 40) & 0xfff,
                seed & 0xffff_ffff_ffff
            );
            table.insert(UidKey::of(&uid), (n * PER_NODE + i) as u64);
        }
    }
    let after = rss_kib();
    let pairs = NODES * PER_NODE;
    println!(
        "{pairs} success points over {NODES} nodes: RSS +{} KiB = {:.1} bytes per pair",
        after - before,
        (after - before) as f64 * 1024.0 / pairs as f64
    );
    assert_eq!(nodes.values().map(HashMap::len).sum::<usize>(), pairs);
}
