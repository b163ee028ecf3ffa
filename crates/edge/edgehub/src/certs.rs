//! The edge's certificate: join with a token, load it at later starts, renew
//! it over mutual TLS before it expires (docs/protocol.md §3).
//!
//! Files, under the data directory: `ca.crt` (the cloud's CA, PEM),
//! `edge.crt` (this node's certificate, PEM) and `edge.key` (its key,
//! PKCS#8 PEM, mode 0600). Each is written atomically. A join writes the key
//! before the certificate, so a crash in between leaves no certificate and
//! the next start joins again. A renewal keeps the key and replaces only the
//! certificate, so no crash can leave a certificate without its key.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use edgehive_viaduct::{ClientTls, Identity};
use http::Request;
use http_body_util::Full;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::https::{self, Endpoint, Trust};

/// What can go wrong joining or renewing.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A setting is unusable.
    #[error("{0}")]
    Config(String),
    /// The join token is malformed.
    #[error("join token: {0}")]
    Token(String),
    /// The CA the server sent is not the one the token names.
    #[error("the CA from {server} has SHA-256 {got}, but the join token names {want}: wrong cloud or wrong token")]
    CaMismatch {
        /// The join server.
        server: String,
        /// The token's hash.
        want: String,
        /// The downloaded CA's hash.
        got: String,
    },
    /// TLS material could not be used.
    #[error("TLS: {0}")]
    Tls(String),
    /// The exchange failed.
    #[error("{0}")]
    Http(String),
    /// The cloud answered with an error.
    #[error("{what}: HTTP {status}: {reason}")]
    Refused {
        /// The request.
        what: String,
        /// HTTP status.
        status: u16,
        /// The answer's text.
        reason: String,
    },
    /// A certificate or key file is unreadable or damaged.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl CertError {
    pub(crate) fn context(self, what: &str) -> CertError {
        match self {
            CertError::Http(e) => CertError::Http(format!("{what}: {e}")),
            other => other,
        }
    }

    fn file(path: &Path, reason: impl std::fmt::Display) -> CertError {
        CertError::File { path: path.to_owned(), reason: reason.to_string() }
    }
}

/// Where the edge keeps its certificate files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The cloud's CA (PEM).
    pub ca: PathBuf,
    /// This node's certificate (PEM).
    pub cert: PathBuf,
    /// This node's key (PKCS#8 PEM, mode 0600).
    pub key: PathBuf,
}

impl CertFiles {
    /// `ca.crt`, `edge.crt` and `edge.key` in `dir`.
    pub fn under(dir: &Path) -> CertFiles {
        CertFiles { ca: dir.join("ca.crt"), cert: dir.join("edge.crt"), key: dir.join("edge.key") }
    }
}

/// The edge's TLS material.
#[derive(Debug)]
pub struct EdgeCerts {
    /// The cloud's CA.
    pub ca: CertificateDer<'static>,
    /// This node's certificate.
    pub cert: CertificateDer<'static>,
    /// Its key.
    pub key: PrivateKeyDer<'static>,
    /// Start of the certificate's validity.
    pub not_before: SystemTime,
    /// End of the certificate's validity.
    pub not_after: SystemTime,
}

impl Clone for EdgeCerts {
    fn clone(&self) -> Self {
        EdgeCerts {
            ca: self.ca.clone(),
            cert: self.cert.clone(),
            key: self.key.clone_key(),
            not_before: self.not_before,
            not_after: self.not_after,
        }
    }
}

impl EdgeCerts {
    fn new(
        ca: CertificateDer<'static>,
        cert: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
    ) -> Result<EdgeCerts, String> {
        let (rest, parsed) =
            x509_parser::parse_x509_certificate(&cert).map_err(|e| format!("not a certificate: {e}"))?;
        if !rest.is_empty() {
            return Err("bytes after the certificate".into());
        }
        let to_system = |t: x509_parser::time::ASN1Time| {
            let secs = t.timestamp();
            if secs >= 0 {
                SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
            } else {
                SystemTime::UNIX_EPOCH
            }
        };
        let validity = parsed.validity();
        let (not_before, not_after) = (to_system(validity.not_before), to_system(validity.not_after));
        let certs = EdgeCerts { ca, cert, key, not_before, not_after };
        // rustls checks that the key belongs to the certificate.
        certs.rustls_check()?;
        Ok(certs)
    }

    fn rustls_check(&self) -> Result<(), String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = provider.key_provider.load_private_key(self.key.clone_key()).map_err(|e| format!("key: {e}"))?;
        let certified = rustls::sign::CertifiedKey::new(vec![self.cert.clone()], key);
        certified.keys_match().map_err(|e| format!("the key does not belong to the certificate: {e}"))
    }

    /// Loads the files, or `None` when the certificate or key is missing (the
    /// edge has not joined yet). A damaged file is an error naming it.
    pub fn load(files: &CertFiles) -> Result<Option<EdgeCerts>, CertError> {
        if !files.cert.exists() || !files.key.exists() || !files.ca.exists() {
            return Ok(None);
        }
        let ca = CertificateDer::from_pem_file(&files.ca).map_err(|e| CertError::file(&files.ca, e))?;
        let cert = CertificateDer::from_pem_file(&files.cert).map_err(|e| CertError::file(&files.cert, e))?;
        let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| CertError::file(&files.key, e))?;
        EdgeCerts::new(ca, cert, key).map(Some).map_err(|e| CertError::file(&files.cert, e))
    }

    /// The node this certificate names (`CN=system:node:{node}`), if any.
    pub fn node_name(&self) -> Option<String> {
        edgehive_viaduct::CertIdentity::from_der(&self.cert)?.node_name().map(str::to_owned)
    }

    /// TLS material for viaduct.
    pub fn client_tls(&self) -> ClientTls {
        ClientTls {
            identity: Identity { cert_chain: vec![self.cert.clone()], key: self.key.clone_key() },
            server_ca: vec![self.ca.clone()],
        }
    }

    /// When to renew: `fraction` (0.7–0.9) of the way through the validity.
    pub fn renew_at(&self, fraction: f64) -> SystemTime {
        let lifetime = self.not_after.duration_since(self.not_before).unwrap_or_default();
        self.not_before + lifetime.mul_f64(fraction.clamp(0.0, 1.0))
    }
}

/// A join token split into the CA hash and the bearer JWT.
#[derive(Debug)]
struct Token<'a> {
    ca_hash: String,
    jwt: &'a str,
}

fn parse_token(token: &str) -> Result<Token<'_>, CertError> {
    let token = token.trim();
    let (hash, jwt) = token.split_once('.').ok_or_else(|| CertError::Token("no '.' in it".into()))?;
    if jwt.split('.').count() != 3 {
        return Err(CertError::Token(format!("expected 4 '.'-separated parts, got {}", 1 + jwt.split('.').count())));
    }
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CertError::Token("the first part is not a SHA-256 in hex".into()));
    }
    Ok(Token { ca_hash: hash.to_ascii_lowercase(), jwt })
}

/// Whether `token` was made by the cloud whose CA is `ca` (its first part
/// is that CA's SHA-256): a kept certificate of another cloud's CA must be
/// joined again with this token.
pub fn token_names_ca(token: &str, ca: &CertificateDer<'_>) -> Result<bool, CertError> {
    Ok(parse_token(token)?.ca_hash == sha256_hex(ca))
}

fn sha256_hex(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A CSR for `node` with `key`: `O=system:nodes, CN=system:node:{node}`
/// (the cloud sets the subject anyway).
fn csr(node: &str, key: &KeyPair) -> Result<Vec<u8>, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| CertError::Tls(e.to_string()))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "system:nodes");
    dn.push(DnType::CommonName, format!("system:node:{node}"));
    params.distinguished_name = dn;
    let request = params.serialize_request(key).map_err(|e| CertError::Tls(format!("CSR: {e}")))?;
    Ok(request.der().to_vec())
}

fn edge_crt_request(node: &str, bearer: Option<&str>, csr: Vec<u8>) -> Result<Request<Full<Bytes>>, CertError> {
    let mut request =
        Request::get("/edge.crt").header("NodeName", node).header("Content-Type", "application/octet-stream");
    if let Some(jwt) = bearer {
        request = request.header("Authorization", format!("Bearer {jwt}"));
    }
    request.body(Full::new(Bytes::from(csr))).map_err(|e| CertError::Config(format!("request: {e}")))
}

fn signed(what: &str, (status, body): (u16, Bytes)) -> Result<CertificateDer<'static>, CertError> {
    if status != 200 || body.is_empty() {
        let reason = String::from_utf8_lossy(&body[..body.len().min(512)]).trim().to_owned();
        return Err(CertError::Refused { what: what.into(), status, reason });
    }
    Ok(CertificateDer::from(body.to_vec()))
}

fn store(files: &CertFiles, certs: &EdgeCerts, with_key: bool) -> Result<(), CertError> {
    let io = |path: &Path, e: std::io::Error| CertError::file(path, e);
    if let Some(dir) = files.cert.parent() {
        crate::files::create_private_dir(dir).map_err(|e| io(dir, e))?;
    }
    let write = |path: &Path, label: &str, der: &[u8], mode: u32| {
        crate::files::write_atomic(path, crate::files::pem(label, der).as_bytes(), mode).map_err(|e| io(path, e))
    };
    if with_key {
        write(&files.key, "PRIVATE KEY", certs.key.secret_der(), 0o600)?;
    }
    write(&files.ca, "CERTIFICATE", &certs.ca, 0o644)?;
    write(&files.cert, "CERTIFICATE", &certs.cert, 0o644)
}

/// First start: fetches the CA from `http_server` (`https://host:10002`),
/// checks it against the token's hash, has a new key's CSR signed with the
/// token, and stores CA, certificate and key in `files`.
pub async fn join(
    http_server: &str,
    node: &str,
    token: &str,
    files: &CertFiles,
    deadline: Duration,
) -> Result<EdgeCerts, CertError> {
    let token = parse_token(token)?;
    let endpoint = Endpoint::parse(http_server)?;
    let ca_request = Request::get("/ca.crt")
        .body(Full::new(Bytes::new()))
        .map_err(|e| CertError::Config(format!("request: {e}")))?;
    let (status, body) = https::exchange(&endpoint, Trust::Any, None, ca_request, deadline).await?;
    if status != 200 {
        let reason = String::from_utf8_lossy(&body[..body.len().min(512)]).trim().to_owned();
        return Err(CertError::Refused { what: "GET /ca.crt".into(), status, reason });
    }
    let got = sha256_hex(&body);
    if got != token.ca_hash {
        return Err(CertError::CaMismatch { server: http_server.into(), want: token.ca_hash, got });
    }
    let ca = CertificateDer::from(body.to_vec());
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| CertError::Tls(e.to_string()))?;
    let request = edge_crt_request(node, Some(token.jwt), csr(node, &key)?)?;
    let answer = https::exchange(&endpoint, Trust::Ca(&ca), None, request, deadline).await?;
    let cert = signed("GET /edge.crt", answer)?;
    let key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| CertError::Tls(e.to_string()))?;
    let certs = EdgeCerts::new(ca, cert, key).map_err(|e| CertError::Tls(format!("the issued certificate: {e}")))?;
    store(files, &certs, true)?;
    tracing::info!(node, server = http_server, not_after = ?certs.not_after, "joined: certificate issued");
    Ok(certs)
}

/// Renewal: the same key's CSR, authenticated by the current certificate
/// over mutual TLS (no token). Stores the new certificate.
pub async fn renew(
    http_server: &str,
    node: &str,
    current: &EdgeCerts,
    files: &CertFiles,
    deadline: Duration,
) -> Result<EdgeCerts, CertError> {
    let endpoint = Endpoint::parse(http_server)?;
    let key = KeyPair::try_from(current.key.secret_der()).map_err(|e| CertError::Tls(format!("key: {e}")))?;
    let request = edge_crt_request(node, None, csr(node, &key)?)?;
    let chain = [current.cert.clone()];
    let answer =
        https::exchange(&endpoint, Trust::Ca(&current.ca), Some((&chain, &current.key)), request, deadline).await?;
    let cert = signed("GET /edge.crt (renewal)", answer)?;
    let certs = EdgeCerts::new(current.ca.clone(), cert, current.key.clone_key())
        .map_err(|e| CertError::Tls(format!("the renewed certificate: {e}")))?;
    store(files, &certs, false)?;
    tracing::info!(node, not_after = ?certs.not_after, "certificate renewed");
    Ok(certs)
}

/// Retry delays of a failed renewal: 2 s doubling for 5 steps, then every
/// 32 s (as KubeEdge's certificate manager).
fn renewal_retry(attempt: u32) -> Duration {
    Duration::from_secs(2u64 << attempt.min(4))
}

/// Renews the certificate at 70–90 % of its lifetime (at once if that point
/// has passed, e.g. after a long time offline), publishing every new
/// certificate on `tx` so EdgeHub reconnects with it. Runs until `cancel`.
pub async fn keep_renewed(
    http_server: String,
    node: String,
    files: CertFiles,
    tx: watch::Sender<Arc<EdgeCerts>>,
    cancel: CancellationToken,
) {
    let mut rng = fastrand::Rng::new();
    loop {
        let current = Arc::clone(&tx.borrow());
        let at = current.renew_at(0.7 + 0.2 * rng.f64());
        let wait = at.duration_since(SystemTime::now()).unwrap_or_default();
        tracing::debug!(node = %node, in_secs = wait.as_secs(), "next certificate renewal");
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let mut attempt = 0;
        let renewed = loop {
            match renew(&http_server, &node, &current, &files, Duration::from_secs(30)).await {
                Ok(c) => break c,
                Err(e) => {
                    let expired = SystemTime::now() > current.not_after;
                    tracing::warn!(node = %node, error = %e, expired, "certificate renewal failed; retrying");
                    let delay = renewal_retry(attempt);
                    attempt += 1;
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        };
        tx.send_replace(Arc::new(renewed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_must_have_a_hash_and_a_jwt() {
        let good = format!("{}.a.b.c", "ab".repeat(32));
        let t = parse_token(&good).unwrap();
        assert_eq!(t.jwt, "a.b.c");
        for bad in ["", "abc", &format!("{}.a.b", "ab".repeat(32)), "zz.a.b.c", &format!("{}.a.b.c", "zz".repeat(32))] {
            assert!(matches!(parse_token(bad), Err(CertError::Token(_))), "{bad}");
        }
    }

    #[test]
    fn renewal_retries_back_off_to_32_seconds() {
        let delays: Vec<u64> = (0..7).map(|a| renewal_retry(a).as_secs()).collect();
        assert_eq!(delays, [2, 4, 8, 16, 32, 32, 32]);
    }
}
