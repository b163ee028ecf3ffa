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
/// `resumed`; keys derived from `secret` when given).
pub(crate) fn server_config(
    tls: &ServerTls,
    resumed: Counter,
    secret: Option<&[u8; 32]>,
) -> Result<Arc<rustls::ServerConfig>, ConnectError> {
    let mut cfg = server_config_for(tls, &[&rustls::version::TLS13, &rustls::version::TLS12])?;
    stateless_tickets(&mut cfg, resumed, secret)?;
    Ok(Arc::new(cfg))
}

/// Sessions resume from stateless tickets, so a reconnecting edge skips the
/// certificate signature and verification whatever the number of edges.
/// Their keys change every 6 h; they derive from `secret`
/// ([`crate::ServerConfig::restart_secret`], [`KeptTickets`]) so that a
/// restarted server takes its predecessor's tickets, or without one are
/// random to the process and never stored.
/// The client certificate comes back with the session, so whoever checks
/// it after the handshake (CloudHub: identity and revocation) still does.
/// One ticket per handshake (rustls sends two by default): an edge resumes
/// once per connection, and each ticket is work for the server and memory
/// for the client. Tickets the server accepts are counted in `resumed`.
pub(crate) fn stateless_tickets(
    cfg: &mut rustls::ServerConfig,
    resumed: Counter,
    secret: Option<&[u8; 32]>,
) -> Result<(), ConnectError> {
    let inner: Arc<dyn ProducesTickets> = match secret {
        Some(secret) => Arc::new(KeptTickets::new(secret)),
        None => rustls::crypto::ring::Ticketer::new()
            .map_err(|e| ConnectError::TlsConfig(format!("session tickets: {e}")))?,
    };
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

/// How long one ticket key is used to make tickets; a ticket is taken
/// until the end of the next period, so it lives at least this long.
const TICKET_PERIOD_SECS: u64 = 6 * 60 * 60;

/// Stateless tickets whose keys derive from a secret kept across restarts.
///
/// The key of period `p` (Unix time / [`TICKET_PERIOD_SECS`]) is
/// HMAC-SHA256(secret, label ‖ p), used with ChaCha20-Poly1305. A ticket is
/// `p` (8 bytes, big-endian), a random 96-bit nonce, and the sealed session
/// (`p` authenticated with it). It is taken back in its own period and the
/// next one; any other period, a short or altered ticket, yields nothing
/// (the client then makes a full handshake).
struct KeptTickets {
    master: ring::hmac::Key,
    /// The newest two periods' keys.
    keys: std::sync::Mutex<Vec<(u64, Arc<ring::aead::LessSafeKey>)>>,
    rng: ring::rand::SystemRandom,
}

impl std::fmt::Debug for KeptTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeptTickets")
    }
}

const TICKET_PERIOD_LEN: usize = 8;
const TICKET_NONCE_LEN: usize = ring::aead::NONCE_LEN;

impl KeptTickets {
    fn new(secret: &[u8; 32]) -> KeptTickets {
        KeptTickets {
            master: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
            keys: std::sync::Mutex::new(Vec::with_capacity(2)),
            rng: ring::rand::SystemRandom::new(),
        }
    }

    fn period_now() -> u64 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        now.as_secs() / TICKET_PERIOD_SECS
    }

    fn key(&self, period: u64) -> Option<Arc<ring::aead::LessSafeKey>> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, k)) = keys.iter().find(|(p, _)| *p == period) {
            return Some(Arc::clone(k));
        }
        let mut label = b"edgehive tls ticket key ".to_vec();
        label.extend_from_slice(&period.to_be_bytes());
        let derived = ring::hmac::sign(&self.master, &label);
        let unbound = ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, derived.as_ref()).ok()?;
        let key = Arc::new(ring::aead::LessSafeKey::new(unbound));
        keys.push((period, Arc::clone(&key)));
        // Keep the newest two.
        keys.sort_by_key(|(p, _)| std::cmp::Reverse(*p));
        keys.truncate(2);
        Some(key)
    }

    /// A ticket of `period`: the period, the nonce, then the session sealed
    /// in place after them.
    fn seal(&self, period: u64, plain: &[u8]) -> Option<Vec<u8>> {
        use ring::rand::SecureRandom as _;
        let key = self.key(period)?;
        let mut nonce = [0u8; TICKET_NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let head = period.to_be_bytes();
        let tag_len = ring::aead::CHACHA20_POLY1305.tag_len();
        let mut out = Vec::with_capacity(TICKET_PERIOD_LEN + TICKET_NONCE_LEN + plain.len() + tag_len);
        out.extend_from_slice(&head);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plain);
        let tag = key
            .seal_in_place_separate_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(head),
                &mut out[TICKET_PERIOD_LEN + TICKET_NONCE_LEN..],
            )
            .ok()?;
        out.extend_from_slice(tag.as_ref());
        Some(out)
    }

    /// What a ticket holds, if it is taken in period `now`.
    fn open(&self, now: u64, cipher: &[u8]) -> Option<Vec<u8>> {
        let (head, rest) = cipher.split_first_chunk::<TICKET_PERIOD_LEN>()?;
        let (nonce, sealed) = rest.split_first_chunk::<TICKET_NONCE_LEN>()?;
        let period = u64::from_be_bytes(*head);
        if period != now && period.checked_add(1) != Some(now) {
            return None;
        }
        let key = self.key(period)?;
        let mut buf = sealed.to_vec();
        let len = key
            .open_in_place(ring::aead::Nonce::assume_unique_for_key(*nonce), ring::aead::Aad::from(*head), &mut buf)
            .ok()?
            .len();
        buf.truncate(len);
        Some(buf)
    }
}

impl ProducesTickets for KeptTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        TICKET_PERIOD_SECS as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.seal(KeptTickets::period_now(), plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        self.open(KeptTickets::period_now(), cipher)
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
    use super::KeptTickets;

    #[test]
    fn kept_tickets_outlive_the_process_and_nothing_else_opens_them() {
        let now = KeptTickets::period_now();
        let a = KeptTickets::new(&[1; 32]);
        let session = b"the session, the client certificate in it".to_vec();
        let ticket = a.seal(now, &session).unwrap();
        assert!(!ticket.windows(session.len()).any(|w| w == session), "sealed");
        // Another process with the same secret (a restart) takes it, in its
        // period and the next; not later, and never from the future.
        let restarted = KeptTickets::new(&[1; 32]);
        assert_eq!(restarted.open(now, &ticket).as_deref(), Some(&session[..]));
        assert_eq!(restarted.open(now + 1, &ticket).as_deref(), Some(&session[..]));
        assert_eq!(restarted.open(now + 2, &ticket), None);
        assert_eq!(restarted.open(now - 1, &ticket), None);
        // Another secret, a bit flipped anywhere, a cut ticket: nothing.
        assert_eq!(KeptTickets::new(&[2; 32]).open(now, &ticket), None);
        for i in 0..ticket.len() {
            let mut bad = ticket.clone();
            bad[i] ^= 1;
            assert_eq!(restarted.open(now, &bad), None, "bit flipped at byte {i}");
        }
        for n in 0..ticket.len() {
            assert_eq!(restarted.open(now, &ticket[..n]), None, "cut to {n} bytes");
        }
        // A ticket re-labelled with the next period (to live longer) fails
        // its authentication: the period is sealed with it.
        let mut relabelled = ticket.clone();
        relabelled[..8].copy_from_slice(&(now + 1).to_be_bytes());
        assert_eq!(restarted.open(now + 2, &relabelled), None);
        assert_eq!(restarted.open(now + 1, &relabelled), None);
        // Two tickets of the same session differ (fresh nonces).
        assert_ne!(a.seal(now, &session).unwrap(), ticket);
    }

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
