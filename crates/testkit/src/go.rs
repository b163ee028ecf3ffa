//! Building the Go peers some tests run (programs written the way KubeEdge's
//! EdgeHub, EdgeCore and mapper framework talk, with Go, gorilla/websocket
//! and grpc-go from Debian's golang-go, golang-github-gorilla-websocket-dev
//! and golang-google-grpc-dev, which scripts/test.sh installs). Each peer is one `package main` file built together with this
//! crate's `go/model.go` (beehive's message and common helpers).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the Go program `source` (with `go/model.go`) into `out_dir/name`;
/// panics with the compiler's output when it does not build.
pub fn build(source: &Path, out_dir: &Path, name: &str) -> PathBuf {
    // Go builds the files of one directory: both go into `out_dir/{name}-src`.
    let src = out_dir.join(format!("{name}-src"));
    std::fs::create_dir_all(&src).unwrap_or_else(|e| panic!("create {}: {e}", src.display()));
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("go/model.go");
    for (from, to) in [(source, "main.go"), (model.as_path(), "model.go")] {
        std::fs::copy(from, src.join(to)).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
    }
    let bin = out_dir.join(name);
    let out = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(src.join("main.go"))
        .arg(src.join("model.go"))
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", out_dir.join("gocache"))
        .env("GOFLAGS", "")
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `go` ({e}); install golang-go, golang-github-gorilla-websocket-dev and golang-google-grpc-dev (scripts/test.sh does)")
        });
    assert!(out.status.success(), "go build failed:\n{}", String::from_utf8_lossy(&out.stderr));
    bin
}
