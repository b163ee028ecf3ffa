//! The crate's one error type, [`PkiError`].

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong in the certificate authority.
///
/// Messages are verb phrases naming what was being done and, for files, the
/// file: `read CA certificate /var/lib/edgehive/pki/ca.crt: permission denied`.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PkiError {
    /// Reading, writing or creating a file or directory failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `"read CA certificate"`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file exists but does not hold what it should (not PEM, not a
    /// certificate, a key `ring` cannot use, not a CA, ...).
    #[error("parse {what} {}: {reason}", path.display())]
    Parse {
        /// What the file should hold, e.g. `"CA certificate"`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it was refused.
        reason: String,
    },
    /// The CA key file holds a valid key, but not the one whose public half
    /// is in the CA certificate.
    #[error("check CA key {}: it does not belong to the certificate in {}", path.display(), cert.display())]
    Mismatch {
        /// The key file.
        path: PathBuf,
        /// The certificate it was checked against.
        cert: PathBuf,
    },
    /// One of the CA's two files exists and the other does not. Creating a
    /// new CA would overwrite the one that exists, so nothing is done.
    #[error(
        "load CA: {} exists but {} does not; restore it, or remove both for a new CA",
        present.display(),
        missing.display()
    )]
    Incomplete {
        /// The file that exists.
        present: PathBuf,
        /// The file that is missing.
        missing: PathBuf,
    },
    /// A certificate signing request was refused: not DER PKCS#10, its
    /// signature does not verify, or it asks for something that cannot be
    /// signed.
    #[error("sign CSR: {0}")]
    Csr(String),
    /// A certificate signing request over the size limit; it was not parsed.
    #[error("sign CSR: request is {size} bytes, over the {limit}-byte limit")]
    CsrTooLarge {
        /// The size of the request in bytes.
        size: usize,
        /// The limit in bytes ([`crate::CSR_SIZE_LIMIT`]).
        limit: usize,
    },
    /// A caller-supplied value cannot go into a certificate: an empty common
    /// name, a SAN that is neither an IP address nor an ASCII DNS name, a
    /// zero or absurd validity, a file stem with a `/`.
    #[error("issue certificate: invalid {what} {value:?}: {reason}")]
    Invalid {
        /// What the value is, e.g. `"SAN"`.
        what: &'static str,
        /// The value as given.
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// Generating a key or signing a certificate failed.
    #[error("{0}")]
    Generate(String),
    /// A certificate given in memory (not from a file) cannot be read, e.g.
    /// the client certificate handed to [`crate::identity_of`].
    #[error("read certificate: {0}")]
    Certificate(String),
}

impl PkiError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> PkiError {
        PkiError::Io { op, path: path.into(), source }
    }

    pub(crate) fn parse(what: &'static str, path: impl Into<PathBuf>, reason: impl Into<String>) -> PkiError {
        PkiError::Parse { what, path: path.into(), reason: reason.into() }
    }

    pub(crate) fn invalid(what: &'static str, value: impl Into<String>, reason: impl Into<String>) -> PkiError {
        PkiError::Invalid { what, value: value.into(), reason: reason.into() }
    }

    /// `context` is a verb phrase, e.g. `"sign server certificate"`.
    pub(crate) fn generate(context: &str, err: impl std::fmt::Display) -> PkiError {
        PkiError::Generate(format!("{context}: {err}"))
    }
}
