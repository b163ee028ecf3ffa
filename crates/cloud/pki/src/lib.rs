//! The cloud's certificate authority: the CA itself, serving and client
//! certificates, node CSR signing, and kubeconfig files.
//!
//! - [`Ca`] is created once in a directory (`ca.crt`, `ca.key`) and loaded
//!   from it afterwards. It issues serving certificates
//!   ([`Ca::issue_server`]) and client certificates ([`Ca::issue_client`]),
//!   and signs nodes' PKCS#10 requests ([`Ca::sign_csr`]) with a subject it
//!   chooses, never the one requested.
//! - [`load_or_issue_server`] and [`load_or_issue_client`] keep a
//!   certificate on disk across restarts and replace it when it no longer
//!   fits (other SANs or subject, another CA, 30 days from expiry).
//! - [`identity_of`] turns a verified client certificate into the user (CN)
//!   and groups (O) Kubernetes would see.
//! - [`kubeconfig`] and [`write_private_file`] produce a file `kubectl`
//!   reads directly.
//! - [`load_or_create_secret`] keeps a random secret across restarts (the
//!   secret CloudHub derives its session ticket keys and QUIC stateless
//!   reset keys from).
//!
//! Keys are ECDSA P-256, as KubeEdge generates them. Every file is written
//! atomically (temporary file, fsync, rename, fsync of the directory); keys
//! and kubeconfigs are created with mode 0600, directories with 0700.
//!
//! ```
//! # use std::time::Duration;
//! # let dir = std::env::temp_dir().join(format!("edgehive-pki-lib-doc-{}", std::process::id()));
//! let ca = edgehive_pki::Ca::load_or_create(&dir, "edgehive-ca")?;
//! let sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
//! let serving = edgehive_pki::load_or_issue_server(&dir, &ca, "apiserver", "edgehive-apiserver", &sans)?;
//! let admin = edgehive_pki::load_or_issue_client(&dir, &ca, "admin", "admin", &["system:masters"])?;
//! let url = "https://127.0.0.1:6443";
//! let config = edgehive_pki::kubeconfig(url, ca.cert_pem(), &admin.cert_pem, &admin.key_pem, "edgehive");
//! edgehive_pki::write_private_file(&dir.join("admin.kubeconfig"), config.as_bytes())?;
//! # drop(serving);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), edgehive_pki::PkiError>(())
//! ```
//!
//! Join tokens live here too, because their key is the CA's: [`issue_token`]
//! makes KubeEdge's `{caHash}.{jwt}` token (the CA certificate's SHA-256,
//! [`Ca::cert_sha256_hex`], then an HS256 JWT keyed with the CA private
//! key) carrying an id ([`new_token_id`]), and [`verify_token`] and
//! [`verify_jwt`] check one at a given time. The signature alone does not
//! make a token valid: the cloud also keeps a record of each id, so that
//! tokens can be listed and revoked (`edgehive-credentials`).
//!
//! ```
//! let ca = edgehive_pki::Ca::generate("edgehive-ca")?;
//! let now = time::OffsetDateTime::now_utc();
//! let token = edgehive_pki::issue_token(&ca, &edgehive_pki::new_token_id(), now, edgehive_pki::TOKEN_VALIDITY);
//! let (ca_hash, jwt) = token.split_once('.').expect("four parts");
//! assert_eq!(ca_hash, ca.cert_sha256_hex());
//! assert!(edgehive_pki::verify_jwt(&ca, jwt, now).is_ok());
//! # Ok::<(), edgehive_pki::PkiError>(())
//! ```

mod ca;
mod der;
mod error;
mod files;
mod inspect;
mod jwt;
mod kubeconfig;
mod reuse;
mod satoken;
mod secret;
mod token;

use std::time::Duration;

pub use ca::{Ca, Issued};
pub use error::PkiError;
pub use files::write_private_file;
pub use inspect::{CertificateId, certificate_id};
pub use inspect::{Identity, identity_of};
pub use kubeconfig::kubeconfig;
pub use reuse::{load_or_issue_client, load_or_issue_server};
pub use satoken::{
    BoundPod, SA_API_AUDIENCES, SA_ISSUER, SA_KEY_FILE, SA_MAX_VALIDITY, SA_MIN_VALIDITY, SA_NOT_BEFORE_LEEWAY,
    ServiceAccountIdentity, ServiceAccountTokens, TokenFor,
};
pub use secret::{SECRET_LEN, load_or_create_secret};
pub use token::{
    TOKEN_ID_LEN, TOKEN_REFRESH, TOKEN_VALIDITY, TokenClaims, TokenError, expiry, is_token_id, issue_token,
    issue_token_expiring, new_token_id, verify_jwt, verify_token,
};

/// The CA certificate's file name in the CA directory (PEM).
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA key's file name in the CA directory (PEM, PKCS#8).
pub const CA_KEY_FILE: &str = "ca.key";
/// Largest certificate signing request [`Ca::sign_csr`] reads: 64 KiB. A
/// P-256 request is about 400 bytes.
pub const CSR_SIZE_LIMIT: usize = 64 * 1024;
/// Validity of a new CA: ten years (3,650 days).
pub const CA_VALIDITY: Duration = Duration::from_secs(3650 * 24 * 3600);
/// Validity of the certificates [`load_or_issue_server`] and
/// [`load_or_issue_client`] issue: one year (365 days).
pub const LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// A certificate on disk closer than this to expiry is reissued: 30 days.
pub(crate) const RENEW_BEFORE: time::Duration = time::Duration::days(30);
