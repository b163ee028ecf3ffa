//! The store's modules form layers, not a circle: the backends (SQLite,
//! etcd, compact success points) use nothing above them — not the store,
//! the watch cache or what a success point means, which the store gives them
//! (a change feed, a point codec).

use std::path::Path;

/// Modules above the backends.
const ABOVE: &[&str] =
    &["crate::store", "crate::watch", "crate::objectsync", "crate::pointform", "crate::Store", "crate::WatchCache"];

#[test]
fn backends_use_nothing_above_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backend");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read src/backend") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("read a backend");
        // The code, not its tests or its comments.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for above in ABOVE {
                // The whole name: `crate::Store` is not `crate::StoreError`.
                let named = line
                    .match_indices(above)
                    .any(|(at, _)| !line[at + above.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'));
                if named {
                    found.push(format!("{}:{}: {line}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "backends reach above themselves:\n{}", found.join("\n"));
}
