//! The containerd fixture: it starts (or the test fails with the reason),
//! runs a container from the local busybox image, and leaves nothing
//! behind when dropped.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use edgehive_testkit::containerd::Containerd;

#[test]
fn containerd_runs_the_local_image_and_cleans_up() {
    let c = Containerd::start().unwrap_or_else(|e| panic!("{e}"));
    let images = c.ctr(&["images", "ls", "-q"]);
    assert!(images.contains(Containerd::IMAGE) && images.contains(Containerd::PAUSE_IMAGE), "{images}");
    let out =
        c.ctr(&["run", "--rm", "--snapshotter", "native", Containerd::IMAGE, "fixture-t1", "sh", "-c", "echo hi"]);
    assert_eq!(out.trim(), "hi");
    let socket = c.socket();
    let dir = socket.parent().unwrap().to_owned();
    drop(c);
    assert!(!dir.exists(), "{} left behind", dir.display());
    let left = std::process::Command::new("pgrep").args(["-f", &socket.display().to_string()]).output().unwrap();
    assert!(left.stdout.is_empty(), "processes left: {}", String::from_utf8_lossy(&left.stdout));
}
