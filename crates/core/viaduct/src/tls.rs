//! rustls configuration with mutual TLS, and the identity in a peer certificate.
//!
//! Both sides use TLS 1.3 and TLS 1.2 with ECDHE AEAD suites (ring's defaults),
//! which include what Go's `crypto/tls` client offers by default, so KubeEdge's
//! EdgeCore can connect. The server requires a client certificate chained to
//! the configured CA; an absent, foreign or expired certificate fails the
//! handshake.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::server::{ProducesTickets, StoresServerSessions, WebPkiClientVerifier};
use rustls::{NamedGroup, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName};

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

/// Server configuration: our certificate, client certificates required,
/// sessions resumed from [stateless tickets](stateless_tickets) (counted in
/// `resumed`).
pub(crate) fn server_config(tls: &ServerTls, resumed: Counter) -> Result<Arc<rustls::ServerConfig>, ConnectError> {
    let mut cfg = server_config_for(tls, &[&rustls::version::TLS13, &rustls::version::TLS12])?;
    stateless_tickets(&mut cfg, resumed)?;
    Ok(Arc::new(cfg))
}

/// Sessions resume from stateless tickets (encrypted with keys the process
/// rotates every 6 h and never stores), so a reconnecting edge skips the
/// certificate signature and verification whatever the number of edges.
/// The client certificate comes back with the session, so whoever checks
/// it after the handshake (CloudHub: identity and revocation) still does.
/// One ticket per handshake (rustls sends two by default): an edge resumes
/// once per connection, and each ticket is work for the server and memory
/// for the client. Tickets the server accepts are counted in `resumed`.
pub(crate) fn stateless_tickets(cfg: &mut rustls::ServerConfig, resumed: Counter) -> Result<(), ConnectError> {
    let inner =
        rustls::crypto::ring::Ticketer::new().map_err(|e| ConnectError::TlsConfig(format!("session tickets: {e}")))?;
    cfg.ticketer = Arc::new(CountedTickets { inner, resumed });
    cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    cfg.send_tls13_tickets = 1;
    Ok(())
}

/// The server keeps up to `sessions` sessions (the oldest forgotten first)
/// instead of handing out stateless tickets (`cfg` must have none): what
/// rustls needs to accept 0-RTT. Sessions resumed are counted in `resumed`.
pub(crate) fn keep_sessions(cfg: &mut rustls::ServerConfig, sessions: usize, resumed: Counter) {
    cfg.session_storage =
        Arc::new(CountedSessions { inner: rustls::server::ServerSessionMemoryCache::new(sessions), resumed });
    cfg.send_tls13_tickets = 1;
}

/// Stateless tickets, counting those accepted back.
#[derive(Debug)]
struct CountedTickets {
    inner: Arc<dyn ProducesTickets>,
    resumed: Counter,
}

impl ProducesTickets for CountedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.inner.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let plain = self.inner.decrypt(cipher);
        if plain.is_some() {
            self.resumed.inc();
        }
        plain
    }
}

/// Sessions the server keeps, counting those resumed.
#[derive(Debug)]
struct CountedSessions {
    inner: Arc<rustls::server::ServerSessionMemoryCache>,
    resumed: Counter,
}

impl CountedSessions {
    fn count(&self, found: Option<Vec<u8>>) -> Option<Vec<u8>> {
        if found.is_some() {
            self.resumed.inc();
        }
        found
    }
}

impl StoresServerSessions for CountedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.count(self.inner.get(key))
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.count(self.inner.take(key))
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

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
    cfg.resumption = rustls::client::Resumption::store(Arc::new(OneServer::default()));
    Ok(cfg)
}

/// What a client keeps to resume its TLS sessions: a configuration talks
/// to one server name (an edge's cloud endpoint), so one slot holds that
/// server's newest ticket and the key-exchange group it chose. rustls's
/// own cache keeps a table of servers with room for eight tickets each,
/// ~7 KB allocated up front by default and ~2 KB at two sessions; a fleet
/// simulator keeps one configuration per simulated edge. A name other
/// than the slot's takes the slot.
#[derive(Debug, Default)]
pub(crate) struct OneServer(std::sync::Mutex<Option<Box<Slot>>>);

#[derive(Debug)]
pub(crate) struct Slot {
    name: ServerName<'static>,
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    tls13: Option<Tls13ClientSessionValue>,
}

impl OneServer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Box<Slot>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes the slot of `name`, made (or taken from another name) first.
    fn update(&self, name: ServerName<'static>, change: impl FnOnce(&mut Slot)) {
        let mut slot = self.lock();
        if slot.as_ref().is_none_or(|s| s.name != name) {
            *slot = Some(Box::new(Slot { name, kx_hint: None, tls12: None, tls13: None }));
        }
        if let Some(s) = slot.as_mut() {
            change(s);
        }
    }

    /// Reads (or changes) the slot of `name`, if it holds that name.
    fn with<T>(&self, name: &ServerName<'_>, read: impl FnOnce(&mut Slot) -> Option<T>) -> Option<T> {
        let mut slot = self.lock();
        slot.as_mut().filter(|s| s.name == *name).and_then(|s| read(s))
    }
}

impl ClientSessionStore for OneServer {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.update(name, |s| s.kx_hint = Some(group));
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.with(name, |s| s.kx_hint)
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.update(name, |s| s.tls12 = Some(value));
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.with(name, |s| s.tls12.clone())
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.with(name, |s| s.tls12.take());
    }

    /// The newest ticket replaces the one kept: the server sends one per
    /// handshake, and a ticket is used once.
    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.update(name, |s| s.tls13 = Some(value));
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.with(name, |s| s.tls13.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server_keeps_one_name_and_another_takes_its_slot() {
        let store = OneServer::default();
        let cloud = ServerName::try_from("cloud.example").unwrap();
        let other = ServerName::try_from("other.example").unwrap();
        assert_eq!(store.kx_hint(&cloud), None, "nothing kept at first");
        store.set_kx_hint(cloud.clone(), NamedGroup::X25519);
        assert_eq!(store.kx_hint(&cloud), Some(NamedGroup::X25519));
        assert_eq!(store.kx_hint(&other), None, "a name gets only its own");
        assert!(store.take_tls13_ticket(&cloud).is_none());
        assert!(store.tls12_session(&cloud).is_none());
        store.set_kx_hint(other.clone(), NamedGroup::secp256r1);
        assert_eq!(store.kx_hint(&other), Some(NamedGroup::secp256r1));
        assert_eq!(store.kx_hint(&cloud), None, "the other name took the slot");
    }
}
