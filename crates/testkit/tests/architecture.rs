//! The workspace's crate graph keeps the layers of ARCHITECTURE.md apart.

use std::path::Path;

use edgehive_testkit::arch::workspace_graph;

#[test]
fn crate_graph_respects_the_architecture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let graph = workspace_graph(&root).expect("read the crate graph");
    let violations = graph.violations();
    assert!(violations.is_empty(), "architecture invariants broken:\n{}", violations.join("\n"));
}
