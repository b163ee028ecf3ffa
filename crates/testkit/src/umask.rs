//! Running a test under a given umask: the mode a file gets depends on the
//! umask of the process that creates it, and the test harness's is whatever
//! the shell had.

/// True in a child process running test `name` under `umask 022` (the
/// usual default, under which files are created 0644); in the parent, runs
/// that child (marked by the environment variable `marker`), checks that it
/// ran the test and passed, and returns false.
///
/// ```no_run
/// #[test]
/// fn a_new_file_is_private() {
///     if !edgehive_testkit::umask::in_child_with_umask_022("MY_UMASK_CHILD", "a_new_file_is_private") {
///         return;
///     }
///     // ... runs under umask 022
/// }
/// ```
pub fn in_child_with_umask_022(marker: &str, name: &str) -> bool {
    if std::env::var_os(marker).is_some() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        assert!(status.lines().any(|l| l == "Umask:\t0022"), "the child's umask is 022");
        return true;
    }
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("this test's executable: {e}"));
    let out = std::process::Command::new("sh")
        .args(["-c", "umask 022 && exec \"$0\" \"$@\""])
        .arg(exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(marker, "1")
        .output()
        .unwrap_or_else(|e| panic!("run the test under umask 022: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("1 passed"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    false
}

/// The mode of `path` as `chmod` writes it (`0600`).
pub fn mode(path: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{:04o}", meta.permissions().mode() & 0o7777)
}
