//! Files: atomic writes with the right mode, bounded reads, PEM.
//!
//! Every write goes to a temporary file in the target's directory (created
//! with its final mode, so a key is never readable by others, not even for a
//! moment), is fsynced, renamed over the target, and the directory is fsynced
//! so the rename survives a crash. A crash leaves either the old file or the
//! new one, never half of one; at worst a stray `.{name}.tmp.*` file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::PkiError;

/// Mode of private files (keys, kubeconfigs).
pub(crate) const PRIVATE_MODE: u32 = 0o600;
/// Mode of public files (certificates).
pub(crate) const PUBLIC_MODE: u32 = 0o644;
/// Mode of directories this crate creates.
pub(crate) const DIR_MODE: u32 = 0o700;

/// Files this crate reads are small; anything bigger is not ours.
const READ_LIMIT: u64 = 1024 * 1024;

/// Writes `contents` to `path` atomically with mode 0600 (before umask).
///
/// The file is written to a temporary file in the same directory, created
/// with mode 0600, fsynced and renamed over `path`; the directory is then
/// fsynced. Readers see the old contents or the new, never a mix, and the
/// contents are never readable by other users. The directory must exist.
///
/// Used for private keys and kubeconfigs.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("edgehive-pki-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("admin.kubeconfig");
/// edgehive_pki::write_private_file(&path, b"apiVersion: v1\n")?;
/// assert_eq!(std::fs::read(&path)?, b"apiVersion: v1\n");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_private_file(path: &Path, contents: &[u8]) -> Result<(), PkiError> {
    write_atomic(path, contents, PRIVATE_MODE, "write private file")
}

/// Writes `contents` to `path` atomically (see [`write_private_file`]) with
/// the given mode. `op` names the write in errors, e.g. `"write CA key"`.
pub(crate) fn write_atomic(path: &Path, contents: &[u8], mode: u32, op: &'static str) -> Result<(), PkiError> {
    let (dir, name) = split(path).map_err(|e| PkiError::io(op, path, e))?;
    let (tmp_path, mut file) = create_temp(dir, name, mode).map_err(|e| PkiError::io(op, path, e))?;
    let written = file.write_all(contents).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written.and_then(|()| fs::rename(&tmp_path, path)) {
        // Best effort: the temporary file is garbage either way.
        let _ = fs::remove_file(&tmp_path);
        return Err(PkiError::io(op, path, e));
    }
    sync_dir(dir).map_err(|e| PkiError::io("sync directory", dir, e))
}

/// The directory and file name of `path`.
fn split(path: &Path) -> io::Result<(&Path, &str)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no UTF-8 file name"))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// Creates a fresh temporary file next to the target, with `mode` from the
/// start. `create_new` refuses to follow or reuse anything already there.
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last_err = None;
    for _ in 0..16 {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.tmp.{}.{n}", std::process::id()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        set_file_mode(&mut options, mode);
        match options.open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("no free temporary file name")))
}

#[cfg(unix)]
fn set_file_mode(options: &mut OpenOptions, mode: u32) {
    use std::os::unix::fs::OpenOptionsExt as _;
    options.mode(mode);
}

#[cfg(not(unix))]
fn set_file_mode(_options: &mut OpenOptions, _mode: u32) {}

/// Makes a rename in `dir` durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// Creates `dir` and any missing parents with mode 0700 (before umask). An
/// existing directory is left as it is.
pub(crate) fn create_private_dir(dir: &Path) -> Result<(), PkiError> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(DIR_MODE);
    }
    builder.create(dir).map_err(|e| PkiError::io("create directory", dir, e))
}

/// Reads `path`, or `None` if it does not exist. Files over 1 MiB are refused
/// as not ours (`what` names the file's role in that error).
pub(crate) fn read_optional(path: &Path, op: &'static str, what: &'static str) -> Result<Option<Vec<u8>>, PkiError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(PkiError::io(op, path, e)),
    };
    let mut buf = Vec::new();
    file.take(READ_LIMIT + 1).read_to_end(&mut buf).map_err(|e| PkiError::io(op, path, e))?;
    if buf.len() as u64 > READ_LIMIT {
        return Err(PkiError::parse(what, path, format!("larger than {READ_LIMIT} bytes")));
    }
    Ok(Some(buf))
}

/// PEM-encodes `der` under `label` (`CERTIFICATE`, `PRIVATE KEY`): 64
/// characters a line, `\n` line endings, as OpenSSL and Go write it.
pub(crate) fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = String::with_capacity(b64.len() + b64.len() / 64 + 2 * label.len() + 32);
    out.push_str("-----BEGIN ");
    out.push_str(label);
    out.push_str("-----\n");
    // Base64 output is ASCII, so splitting the bytes splits characters.
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END ");
    out.push_str(label);
    out.push_str("-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_lines_are_64_characters() {
        let pem = pem_encode("CERTIFICATE", &[0xAB; 100]);
        let lines: Vec<&str> = pem.lines().collect();
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        // 100 bytes are 136 base64 characters: 64 + 64 + 8.
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines[2].len(), 64);
        assert_eq!(lines[3].len(), 8);
        assert_eq!(lines[4], "-----END CERTIFICATE-----");
        assert!(pem.ends_with("-----\n"));
    }

    #[test]
    fn split_handles_bare_names() {
        let (dir, name) = split(Path::new("key.pem")).unwrap();
        assert_eq!(dir, Path::new("."));
        assert_eq!(name, "key.pem");
        assert!(split(Path::new("/")).is_err());
    }
}
