//! Random secrets a server keeps across restarts (CloudHub's restart
//! secret: its session ticket keys and QUIC stateless reset keys derive
//! from it): 32 bytes from the system's generator, kept as 64
//! hexadecimal digits and a newline in a file of mode 0600, written
//! atomically at first start and read on every later one.

use std::fmt::Write as _;
use std::path::Path;

use ring::rand::{SecureRandom, SystemRandom};

use crate::PkiError;
use crate::files::{PRIVATE_MODE, create_private_dir, read_optional, write_atomic};

/// A secret's length in bytes.
pub const SECRET_LEN: usize = 32;

/// Loads the secret kept at `path`, or makes one and keeps it there (mode
/// 0600, the directory created 0700 if missing). `what` names the secret in
/// errors and logs.
///
/// A file that is there but is not 64 hexadecimal digits (a newline after
/// them is allowed) is refused with an error naming it, and left as it is:
/// replacing it silently would change the secret under every peer that
/// relies on it. Removing the file makes a new one at the next start.
pub fn load_or_create_secret(path: &Path, what: &'static str) -> Result<[u8; SECRET_LEN], PkiError> {
    if let Some(text) = read_optional(path, "read secret", what)? {
        return parse(&text).map_err(|reason| {
            PkiError::parse(what, path, format!("{reason}; remove the file to make a new secret at the next start"))
        });
    }
    let mut secret = [0u8; SECRET_LEN];
    SystemRandom::new().fill(&mut secret).map_err(|e| PkiError::generate(what, e))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        create_private_dir(dir)?;
    }
    let mut text = String::with_capacity(2 * SECRET_LEN + 1);
    for b in secret {
        let _ = write!(text, "{b:02x}");
    }
    text.push('\n');
    write_atomic(path, text.as_bytes(), PRIVATE_MODE, "write secret")?;
    tracing::info!(path = %path.display(), secret = what, "created a secret");
    Ok(secret)
}

fn parse(text: &[u8]) -> Result<[u8; SECRET_LEN], String> {
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.len() != 2 * SECRET_LEN {
        return Err(format!("expected {} hexadecimal digits, found {} bytes", 2 * SECRET_LEN, digits.len()));
    }
    let mut out = [0u8; SECRET_LEN];
    for (i, pair) in digits.chunks(2).enumerate() {
        let hex = |c: u8| (c as char).to_digit(16).ok_or_else(|| format!("not a hexadecimal digit at byte {}", 2 * i));
        out[i] = (hex(pair[0])? << 4 | hex(pair[1])?) as u8;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("edgehive-pki-secret-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_secret_is_made_once_kept_private_and_read_back_the_same() {
        let d = dir("keep");
        let path = d.join("tls").join("cloudhub.secret");
        let first = load_or_create_secret(&path, "restart secret").unwrap();
        assert_ne!(first, [0u8; SECRET_LEN]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
            assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        }
        assert_eq!(load_or_create_secret(&path, "restart secret").unwrap(), first);
        // Another file, another secret.
        assert_ne!(load_or_create_secret(&d.join("other.secret"), "other").unwrap(), first);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_damaged_secret_is_refused_with_its_path_and_left_in_place() {
        let d = dir("bad");
        std::fs::create_dir_all(&d).unwrap();
        let path = d.join("cloudhub.secret");
        let good = "ab".repeat(SECRET_LEN);
        for bad in [
            String::new(),
            "ab".repeat(SECRET_LEN - 1),
            format!("{good}00"),
            format!("zz{}", &good[2..]),
            format!("{good}\n\n"),
        ] {
            std::fs::write(&path, &bad).unwrap();
            let err = load_or_create_secret(&path, "restart secret").unwrap_err().to_string();
            assert!(err.contains("cloudhub.secret") && err.contains("remove the file"), "{bad:?}: {err}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), bad, "the file is left as it was");
        }
        std::fs::write(&path, format!("{good}\n")).unwrap();
        assert_eq!(load_or_create_secret(&path, "restart secret").unwrap(), [0xab; SECRET_LEN]);
        std::fs::write(&path, good.to_uppercase()).unwrap();
        assert_eq!(load_or_create_secret(&path, "restart secret").unwrap(), [0xab; SECRET_LEN]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
