//! The containerd fixture: it starts (or the test fails with the reason),
//! runs a container from the local busybox image, and leaves nothing
//! behind when dropped, not even a container still running.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use edgehive_testkit::containerd::Containerd;

#[test]
fn containerd_runs_the_local_image_and_cleans_up() {
    let c = Containerd::start().unwrap_or_else(|e| panic!("{e}"));
    let images = c.ctr(&["images", "ls", "-q"]);
    assert!(images.contains(Containerd::IMAGE) && images.contains(Containerd::PAUSE_IMAGE), "{images}");
    let socket = c.socket();
    let dir = socket.parent().unwrap().to_owned();
    // runc's state in the fixture's directory and names of this process:
    // another test process with its own containerd shares neither.
    let runc_root = dir.join("runc").display().to_string();
    let name = format!("fixture-{}", std::process::id());
    let run = |args: &[&str]| {
        let mut all = vec!["run", "--snapshotter", "native", "--runc-root", &runc_root];
        all.extend_from_slice(args);
        c.ctr(&all)
    };
    let out = run(&["--rm", Containerd::IMAGE, &format!("{name}-hi"), "sh", "-c", "echo hi"]);
    assert_eq!(out.trim(), "hi");

    // The pause image idles; the fixture kills it when dropped.
    let idle = format!("{name}-idle");
    run(&["-d", Containerd::PAUSE_IMAGE, &idle]);
    let tasks = c.ctr(&["tasks", "ls"]);
    let pid: u32 = tasks
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(idle.as_str())).then(|| f.next().and_then(|p| p.parse().ok())).flatten()
        })
        .unwrap_or_else(|| panic!("{idle} does not run:\n{tasks}\n{}", c.log_tail(20)));
    let cmdline = || std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert_eq!(cmdline(), b"/bin/sleep\x002147483647\x00", "the pause image's entrypoint");

    drop(c);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert_ne!(cmdline(), b"/bin/sleep\x002147483647\x00", "the container outlived the fixture");
    let left = std::process::Command::new("pgrep").args(["-f", &socket.display().to_string()]).output().unwrap();
    assert!(left.stdout.is_empty(), "processes left: {}", String::from_utf8_lossy(&left.stdout));
}
