//! rustls configuration with mutual TLS, and the identity in a peer certificate.
//!
//! Both sides use TLS 1.3 and TLS 1.2 with ECDHE AEAD suites (ring's defaults),
//! which include what Go's `crypto/tls` client offers by default, so KubeEdge's
//! EdgeCore can connect. The server requires a client certificate chained to
//! the configured CA; an absent, foreign or expired certificate fails the
//! handshake.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::CertificateDer;

use crate::config::{ClientTls, ServerTls};
use crate::error::ConnectError;

/// The subject of a verified peer certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertIdentity {
    /// Subject CN, e.g. `system:node:edge-1`.
    pub common_name: Option<String>,
    /// Subject O values, e.g. `system:nodes`.
    pub organizations: Vec<String>,
    /// The serial number, lowercase hexadecimal without leading zeros: which
    /// of the certificates issued to a subject this is (the cloud checks it
    /// against the ones it has not revoked).
    pub serial: String,
    /// End of the certificate's validity, Unix seconds. The handshake
    /// checks it; a session resumed from a ticket does not (the ticket
    /// carries the certificate from its first handshake), so whoever
    /// accepts resumed sessions checks it again.
    pub not_after: i64,
}

impl CertIdentity {
    /// Whether the certificate has expired at `now` (Unix seconds).
    pub fn expired_at(&self, now: i64) -> bool {
        self.not_after <= now
    }

    /// Reads the subject of a DER certificate.
    pub fn from_der(der: &[u8]) -> Option<CertIdentity> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let subject = cert.subject();
        Some(CertIdentity {
            common_name: subject.iter_common_name().next().and_then(|a| a.as_str().ok()).map(str::to_owned),
            organizations: subject.iter_organization().filter_map(|a| a.as_str().ok()).map(str::to_owned).collect(),
            serial: {
                let hex: String = cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect();
                match hex.trim_start_matches('0') {
                    "" => "0".to_owned(),
                    s => s.to_owned(),
                }
            },
            not_after: cert.validity().not_after.timestamp(),
        })
    }

    /// The node a certificate names: `system:node:{name}` gives `name`.
    pub fn node_name(&self) -> Option<&str> {
        self.common_name.as_deref()?.strip_prefix("system:node:")
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn roots(cas: &[CertificateDer<'static>]) -> Result<RootCertStore, ConnectError> {
    let mut store = RootCertStore::empty();
    for ca in cas {
        store.add(ca.clone()).map_err(|e| ConnectError::TlsConfig(format!("add CA certificate: {e}")))?;
    }
    if store.is_empty() {
        return Err(ConnectError::TlsConfig("no CA certificate given".into()));
    }
    Ok(store)
}

/// Server configuration: our certificate, client certificates required.
/// Sessions resume from stateless tickets (encrypted with keys the process
/// rotates every 6 h and never stores), so a reconnecting edge skips the
/// certificate signature and verification whatever the number of edges;
/// the client certificate comes back with the session, so whoever checks it
/// after the handshake (CloudHub: identity and revocation) still does.
pub(crate) fn server_config(tls: &ServerTls) -> Result<Arc<rustls::ServerConfig>, ConnectError> {
    let mut cfg = server_config_for(tls, &[&rustls::version::TLS13, &rustls::version::TLS12])?;
    cfg.ticketer =
        rustls::crypto::ring::Ticketer::new().map_err(|e| ConnectError::TlsConfig(format!("session tickets: {e}")))?;
    cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    cfg.send_tls13_tickets = 1;
    Ok(Arc::new(cfg))
}

/// Sessions a client keeps to resume: one server, so a couple.
const CLIENT_SESSIONS: usize = 2;

/// Client configuration: verify the server against our CA, present our certificate.
pub(crate) fn client_config(tls: &ClientTls) -> Result<Arc<rustls::ClientConfig>, ConnectError> {
    client_config_for(tls, &[&rustls::version::TLS13, &rustls::version::TLS12]).map(Arc::new)
}

pub(crate) fn server_config_for(
    tls: &ServerTls,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ServerConfig, ConnectError> {
    let provider = provider();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots(&tls.client_ca)?), provider.clone())
        .build()
        .map_err(|e| ConnectError::TlsConfig(format!("client verifier: {e}")))?;
    let cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| ConnectError::TlsConfig(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(tls.identity.cert_chain.clone(), tls.identity.key.clone_key())
        .map_err(|e| ConnectError::TlsConfig(format!("server certificate: {e}")))?;
    Ok(cfg)
}

pub(crate) fn client_config_for(
    tls: &ClientTls,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ClientConfig, ConnectError> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .map_err(|e| ConnectError::TlsConfig(e.to_string()))?
        .with_root_certificates(roots(&tls.server_ca)?)
        .with_client_auth_cert(tls.identity.cert_chain.clone(), tls.identity.key.clone_key())
        .map_err(|e| ConnectError::TlsConfig(format!("client certificate: {e}")))?;
    // rustls keeps 256 sessions by default, ~7 KB allocated up front per
    // configuration; an edge talks to one cloud.
    cfg.resumption = rustls::client::Resumption::in_memory_sessions(CLIENT_SESSIONS);
    Ok(cfg)
}
