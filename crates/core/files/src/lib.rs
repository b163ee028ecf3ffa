//! Files only their owner may read: the SQLite databases that hold Secrets
//! (the cloud's `state.db`, the edge's `edgecore.db`) and the directories
//! they live in.
//!
//! SQLite creates a database with the process's umask (0644 under the usual
//! 022) and gives its `-wal` and `-shm` the database's mode, so creating the
//! database file 0600 before SQLite opens it keeps all three private.
//!
//! **Architecture Invariant:** this crate knows no database and no other
//! crate of ours; it sets and checks file modes.

use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The mode of `path` as `chmod` writes it (`0644`) when group or others
/// may use it; `None` when only its owner may (or it does not exist).
pub fn open_to_others(path: &Path) -> Option<String> {
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o077 != 0).then(|| format!("{mode:04o}"))
}

/// A database file and SQLite's `-wal` and `-shm` beside it.
pub fn database_files(path: &Path) -> [PathBuf; 3] {
    ["", "-wal", "-shm"].map(|suffix| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    })
}

/// Makes the database at `path` private before SQLite opens it; `what`
/// names it in warnings ("the store", "the edge store").
///
/// The directory is created 0700 if missing; one that other users may
/// enter is reported, not changed (it may not be ours). The file is
/// created 0600; an existing file, `-wal` or `-shm` that others may read
/// is set to 0600 with a warning (or, if that fails — another user's file
/// — reported).
///
/// ```
/// # use std::os::unix::fs::PermissionsExt as _;
/// let dir = std::env::temp_dir().join(format!("edgehive-files-doc-{}", std::process::id()));
/// let db = dir.join("state.db");
/// edgehive_files::make_private_database(&db, "the store")?;
/// assert_eq!(std::fs::metadata(&db)?.permissions().mode() & 0o777, 0o600);
/// assert_eq!(std::fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn make_private_database(path: &Path, what: &str) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    if let Some(mode) = open_to_others(dir) {
        tracing::warn!(dir = %dir.display(), %mode, "the directory of {what} is open to other users; make it 0700");
    }
    std::fs::OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(path)?;
    for file in database_files(path) {
        if let Some(mode) = open_to_others(&file) {
            match std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)) {
                Ok(()) => {
                    tracing::warn!(file = %file.display(), %mode, "{what} was open to other users; set it to 0600")
                }
                Err(error) => tracing::warn!(file = %file.display(), %mode, %error, "{what} is open to other users"),
            }
        }
    }
    Ok(())
}
