//! The cloud's certificate authority: created once, kept on disk, and used
//! to issue serving and client certificates and to sign nodes' CSRs.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PublicKeyData, SanType,
    SerialNumber,
};
use rustls_pki_types::pem::{self, PemObject as _};
use rustls_pki_types::{CertificateDer, CertificateSigningRequestDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer as _;

use crate::der::{encode_name, resign_with_names};
use crate::files::{PRIVATE_MODE, PUBLIC_MODE, create_private_dir, pem_encode, read_optional, write_atomic};
use crate::inspect::{San, parse_certificate};
use crate::{CA_CERT_FILE, CA_KEY_FILE, CA_VALIDITY, CSR_SIZE_LIMIT, PkiError, RENEW_BEFORE};

/// How far back `notBefore` is set, so that a node whose clock is a little
/// behind still accepts a certificate issued a moment ago.
const BACKDATE: time::Duration = time::Duration::minutes(5);

/// Lowercase hexadecimal digits, for [`Ca::cert_sha256_hex`].
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Longest validity accepted for an issued certificate.
const MAX_VALIDITY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A certificate and its freshly generated private key.
///
/// `Debug` shows neither the key nor its PEM.
pub struct Issued {
    /// The certificate, DER.
    pub cert_der: CertificateDer<'static>,
    /// The private key, PKCS#8 DER.
    pub key_der: PrivateKeyDer<'static>,
    /// The certificate, PEM (`CERTIFICATE`).
    pub cert_pem: String,
    /// The private key, PEM (`PRIVATE KEY`, PKCS#8).
    pub key_pem: String,
}

impl Issued {
    pub(crate) fn new(cert_der: CertificateDer<'static>, key: &KeyPair) -> Issued {
        Issued {
            cert_pem: pem_encode("CERTIFICATE", &cert_der),
            key_pem: pem_encode("PRIVATE KEY", key.serialized_der()),
            key_der: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            cert_der,
        }
    }

    /// Writes the key to `{stem}.key` (mode 0600) and then the certificate
    /// to `{stem}.crt` (mode 0644) in `dir`, each atomically. The key goes
    /// first: a crash in between leaves a pair that does not match, which
    /// the `load_or_issue_*` functions replace.
    pub(crate) fn write(&self, dir: &Path, stem: &str) -> Result<(), PkiError> {
        write_atomic(&dir.join(format!("{stem}.key")), self.key_pem.as_bytes(), PRIVATE_MODE, "write private key")?;
        write_atomic(&dir.join(format!("{stem}.crt")), self.cert_pem.as_bytes(), PUBLIC_MODE, "write certificate")
    }
}

impl Clone for Issued {
    fn clone(&self) -> Self {
        Issued {
            cert_der: self.cert_der.clone(),
            key_der: self.key_der.clone_key(),
            cert_pem: self.cert_pem.clone(),
            key_pem: self.key_pem.clone(),
        }
    }
}

impl fmt::Debug for Issued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Issued")
            .field("cert_der", &format_args!("<{} bytes>", self.cert_der.len()))
            .field("key_der", &format_args!("<redacted>"))
            .finish_non_exhaustive()
    }
}

/// The cloud's certificate authority.
///
/// An ECDSA P-256 key and a self-signed CA certificate valid for ten years
/// (key usages keyCertSign, cRLSign and digitalSignature). It issues:
///
/// - serving certificates ([`Ca::issue_server`]),
/// - client certificates whose subject Kubernetes reads as user (CN) and
///   groups (one O each) ([`Ca::issue_client`]),
/// - certificates for keys that nodes generated themselves, from a PKCS#10
///   CSR ([`Ca::sign_csr`]).
///
/// Issued certificates carry a random serial (158 random bits), an
/// authority key identifier, basicConstraints `CA:FALSE`, and a `notBefore`
/// five minutes in the past for clock skew.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    /// The CA certificate's subject `Name`, DER: the issuer of everything it
    /// signs, byte for byte.
    subject: Vec<u8>,
}

impl fmt::Debug for Ca {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let subject = parse_certificate(&self.cert_der).map(|c| c.subject().to_string()).unwrap_or_default();
        f.debug_struct("Ca").field("subject", &subject).finish_non_exhaustive()
    }
}

impl Ca {
    /// Creates a new CA in memory, named `common_name`. Nothing is written;
    /// [`Ca::load_or_create`] is the function for a CA that must persist.
    pub fn generate(common_name: &str) -> Result<Ca, PkiError> {
        check_name("common name", common_name)?;
        let key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| PkiError::generate("generate CA key", e))?;
        let now = OffsetDateTime::now_utc();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        (params.not_before, params.not_after) = validity_window(now, CA_VALIDITY)?;
        params.serial_number = Some(random_serial()?);
        let cert = params.self_signed(&key).map_err(|e| PkiError::generate("self-sign CA certificate", e))?;
        Ca::assemble(cert.der().clone(), key).map_err(|e| PkiError::generate("assemble CA", e))
    }

    /// Loads the CA from `dir/ca.crt` and `dir/ca.key` (PEM), or creates it
    /// there if neither file exists.
    ///
    /// Loading checks that the certificate is a CA certificate and that the
    /// key (PKCS#8, `PRIVATE KEY`) belongs to it; a file that fails a check
    /// is an error naming it and is left untouched, never replaced. So is the
    /// case where only one of the two files exists. An expired or soon
    /// expiring CA is loaded with a warning. The CA's common name is that of
    /// the certificate on disk; `common_name` only names a new CA.
    ///
    /// Creating makes `dir` (mode 0700) if needed, then writes the key (mode
    /// 0600 from the moment the file exists) and the certificate (0644),
    /// each atomically. Only one process should create a CA in a directory
    /// at a time.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("edgehive-pki-ca-doc-{}", std::process::id()));
    /// let ca = edgehive_pki::Ca::load_or_create(&dir, "edgehive-ca")?;
    /// let again = edgehive_pki::Ca::load_or_create(&dir, "edgehive-ca")?;
    /// assert_eq!(ca.cert_der(), again.cert_der());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), edgehive_pki::PkiError>(())
    /// ```
    pub fn load_or_create(dir: &Path, common_name: &str) -> Result<Ca, PkiError> {
        let cert_path = dir.join(CA_CERT_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        let cert = read_optional(&cert_path, "read CA certificate", "CA certificate")?;
        let key = read_optional(&key_path, "read CA key", "CA key")?;
        match (cert, key) {
            (Some(cert), Some(key)) => {
                let ca = Ca::load(&cert, &key, &cert_path, &key_path)?;
                tracing::debug!(dir = %dir.display(), "loaded certificate authority");
                Ok(ca)
            }
            (None, None) => {
                let ca = Ca::generate(common_name)?;
                create_private_dir(dir)?;
                let key_pem = pem_encode("PRIVATE KEY", ca.issuer.key().serialized_der());
                write_atomic(&key_path, key_pem.as_bytes(), PRIVATE_MODE, "write CA key")?;
                write_atomic(&cert_path, ca.cert_pem.as_bytes(), PUBLIC_MODE, "write CA certificate")?;
                tracing::info!(dir = %dir.display(), common_name, "created certificate authority");
                Ok(ca)
            }
            (Some(_), None) => Err(PkiError::Incomplete { present: cert_path, missing: key_path }),
            (None, Some(_)) => Err(PkiError::Incomplete { present: key_path, missing: cert_path }),
        }
    }

    fn load(cert_pem: &[u8], key_pem: &[u8], cert_path: &Path, key_path: &Path) -> Result<Ca, PkiError> {
        const CERT: &str = "CA certificate";
        const KEY: &str = "CA key";
        let cert_der = CertificateDer::from_pem_slice(cert_pem)
            .map_err(|e| PkiError::parse(CERT, cert_path, pem_reason(&e, "CERTIFICATE")))?;
        let cert = parse_certificate(&cert_der).map_err(|r| PkiError::parse(CERT, cert_path, r))?;
        if !cert.is_ca() {
            return Err(PkiError::parse(CERT, cert_path, "not a CA certificate (no basicConstraints CA:TRUE)"));
        }
        let key = key_from_pem(key_pem).map_err(|r| PkiError::parse(KEY, key_path, r))?;
        if key.public_key_raw() != &*cert.public_key().subject_public_key.data {
            return Err(PkiError::Mismatch { path: key_path.to_owned(), cert: cert_path.to_owned() });
        }
        let not_after = cert.validity().not_after.to_datetime();
        let now = OffsetDateTime::now_utc();
        if not_after <= now {
            tracing::warn!(cert = %cert_path.display(), %not_after, "CA certificate has expired");
        } else if not_after - now < RENEW_BEFORE {
            tracing::warn!(cert = %cert_path.display(), %not_after, "CA certificate expires within 30 days");
        }
        let cert_der = cert_der.into_owned();
        Ca::assemble(cert_der, key).map_err(|r| PkiError::parse(CERT, cert_path, r))
    }

    fn assemble(cert_der: CertificateDer<'static>, key: KeyPair) -> Result<Ca, String> {
        let subject = parse_certificate(&cert_der)?.subject().as_raw().to_vec();
        let issuer = Issuer::from_ca_cert_der(&cert_der, key).map_err(|e| format!("unusable as an issuer: {e}"))?;
        let cert_pem = pem_encode("CERTIFICATE", &cert_der);
        Ok(Ca { issuer, cert_der, cert_pem, subject })
    }

    /// The CA certificate, DER: the trust anchor for clients and nodes.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The lowercase hex SHA-256 of the CA certificate's DER: the first part
    /// of a join token (KubeEdge's "caHash"), which a node compares with the
    /// hash of the certificate it downloads before trusting it.
    ///
    /// ```
    /// let ca = edgehive_pki::Ca::generate("edgehive-ca")?;
    /// let hash = ca.cert_sha256_hex();
    /// assert_eq!(hash.len(), 64);
    /// assert!(hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    /// # Ok::<(), edgehive_pki::PkiError>(())
    /// ```
    pub fn cert_sha256_hex(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, &self.cert_der);
        let mut hex = String::with_capacity(64);
        for byte in digest.as_ref() {
            hex.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            hex.push(char::from(HEX_DIGITS[usize::from(byte & 0x0F)]));
        }
        hex
    }

    /// The CA private key, PKCS#8 DER: the HMAC key of join tokens. Never
    /// leaves the crate.
    pub(crate) fn key_der(&self) -> &[u8] {
        self.issuer.key().serialized_der()
    }

    /// Issues a serving certificate for a new ECDSA P-256 key.
    ///
    /// Each SAN that parses as an IP address becomes an IP SAN, any other a
    /// DNS SAN (compared and written in lower case); duplicates are dropped.
    /// The subject is `CN=common_name`. Extended key usage serverAuth, key
    /// usages digitalSignature and keyEncipherment.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let ca = edgehive_pki::Ca::generate("edgehive-ca")?;
    /// let sans = ["localhost".to_string(), "127.0.0.1".to_string()];
    /// let serving = ca.issue_server("edgehive-apiserver", &sans, Duration::from_secs(86400))?;
    /// assert!(serving.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    /// # Ok::<(), edgehive_pki::PkiError>(())
    /// ```
    pub fn issue_server(&self, common_name: &str, sans: &[String], validity: Duration) -> Result<Issued, PkiError> {
        let sans = sans.iter().map(|s| San::parse(s)).collect::<Result<std::collections::BTreeSet<_>, _>>()?;
        let mut params = self.leaf_params(common_name, &[], validity)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        for san in sans {
            params.subject_alt_names.push(match san {
                San::Ip(ip) => SanType::IpAddress(ip),
                San::Dns(dns) => SanType::DnsName(
                    dns.as_str().try_into().map_err(|e| PkiError::invalid("SAN", dns.as_str(), format!("{e}")))?,
                ),
            });
        }
        self.issue_with_new_key(&params, common_name, &[])
    }

    /// Issues a client certificate for a new ECDSA P-256 key, with subject
    /// `O=org1, O=org2, ..., CN=common_name`: Kubernetes reads the user from
    /// the CN and one group from each O. Extended key usage clientAuth.
    pub fn issue_client(
        &self,
        common_name: &str,
        organizations: &[&str],
        validity: Duration,
    ) -> Result<Issued, PkiError> {
        let mut params = self.leaf_params(common_name, organizations, validity)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue_with_new_key(&params, common_name, organizations)
    }

    /// Signs the public key of a PKCS#10 certificate signing request (DER) as
    /// a client certificate.
    ///
    /// The request's signature must verify (proof that the requester holds
    /// the key). Everything else it asks for is ignored: the subject is
    /// exactly `O=..., CN=common_name` as given, extended key usage
    /// clientAuth, no SANs, not a CA, `validity` from now. Requests over
    /// [`CSR_SIZE_LIMIT`] are refused unread ([`PkiError::CsrTooLarge`]);
    /// anything that is not one well-formed, verifiable request is
    /// [`PkiError::Csr`]. That includes requests asking for extensions rcgen
    /// cannot parse (it knows SAN, key usage, extended key usage and basic
    /// constraints; Go's and KubeEdge's CSRs carry at most those).
    pub fn sign_csr(
        &self,
        csr_der: &[u8],
        common_name: &str,
        organizations: &[&str],
        validity: Duration,
    ) -> Result<CertificateDer<'static>, PkiError> {
        if csr_der.len() > CSR_SIZE_LIMIT {
            return Err(PkiError::CsrTooLarge { size: csr_der.len(), limit: CSR_SIZE_LIMIT });
        }
        if csr_der.is_empty() {
            return Err(PkiError::Csr("empty request".into()));
        }
        // Parse once ourselves to refuse trailing bytes (rcgen ignores them)
        // and to keep the requested key for the check below.
        let (rest, request) = x509_parser::certification_request::X509CertificationRequest::from_der(csr_der)
            .map_err(|e| PkiError::Csr(format!("not a DER PKCS#10 certificate signing request: {e}")))?;
        if !rest.is_empty() {
            return Err(PkiError::Csr(format!("{} bytes after the request", rest.len())));
        }
        let requested_spki = request.certification_request_info.subject_pki.raw;
        // This parses again and verifies the request's signature.
        let csr = CertificateSigningRequestParams::from_der(&CertificateSigningRequestDer::from(csr_der))
            .map_err(csr_reason)?;

        let mut params = self.leaf_params(common_name, organizations, validity)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let der = self.sign(&params, &csr.public_key, common_name, organizations)?;

        // rcgen derives the key's algorithm from the request's signature
        // algorithm; a key it would re-encode differently (say P-384 signed
        // with SHA-256) must not end up in a certificate.
        let cert = parse_certificate(&der).map_err(|e| PkiError::generate("check signed CSR", e))?;
        if cert.public_key().raw != requested_spki {
            return Err(PkiError::Csr("the requested key's algorithm is not supported".into()));
        }
        Ok(der)
    }

    /// Parameters shared by every leaf certificate; the names are checked
    /// here and written later by [`Ca::sign`].
    fn leaf_params(
        &self,
        common_name: &str,
        organizations: &[&str],
        validity: Duration,
    ) -> Result<CertificateParams, PkiError> {
        check_name("common name", common_name)?;
        for org in organizations {
            check_name("organization", org)?;
        }
        let mut params = CertificateParams::default();
        // rcgen's names hold one O at most; `sign` replaces the whole subject.
        // A non-empty one here keeps rcgen from marking the SANs critical
        // (which RFC 5280 wants only for certificates without a subject).
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.is_ca = IsCa::ExplicitNoCa;
        (params.not_before, params.not_after) = validity_window(OffsetDateTime::now_utc(), validity)?;
        params.serial_number = Some(random_serial()?);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        Ok(params)
    }

    fn issue_with_new_key(
        &self,
        params: &CertificateParams,
        common_name: &str,
        organizations: &[&str],
    ) -> Result<Issued, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| PkiError::generate("generate key", e))?;
        let der = self.sign(params, &key, common_name, organizations)?;
        Ok(Issued::new(der, &key))
    }

    /// Signs `params` for `public_key`, then writes the real issuer and
    /// subject names (see `der.rs`) and checks the result against this CA.
    fn sign(
        &self,
        params: &CertificateParams,
        public_key: &impl PublicKeyData,
        common_name: &str,
        organizations: &[&str],
    ) -> Result<CertificateDer<'static>, PkiError> {
        let draft =
            params.signed_by(public_key, &self.issuer).map_err(|e| PkiError::generate("sign certificate", e))?;
        let subject = encode_name(common_name, organizations);
        let der = resign_with_names(draft.der(), &self.subject, &subject, self.issuer.key())?;
        let cert = parse_certificate(&der).map_err(|e| PkiError::generate("check signed certificate", e))?;
        self.check_issued(&cert).map_err(|e| PkiError::generate("check signed certificate", e))?;
        Ok(CertificateDer::from(der))
    }

    /// Whether `cert` was issued by this CA: its issuer is this CA's subject
    /// and its signature verifies with this CA's public key.
    pub(crate) fn check_issued(&self, cert: &X509Certificate<'_>) -> Result<(), String> {
        if cert.issuer().as_raw() != self.subject.as_slice() {
            return Err(format!("issued by {}, not by this CA", cert.issuer()));
        }
        let ca = parse_certificate(&self.cert_der)?;
        cert.verify_signature(Some(ca.public_key()))
            .map_err(|e| format!("signature does not verify with this CA's key: {e}"))
    }
}

/// A private key from PEM: PKCS#8 that `ring` can use, or a reason.
pub(crate) fn key_from_pem(pem: &[u8]) -> Result<KeyPair, String> {
    let key = PrivateKeyDer::from_pem_slice(pem).map_err(|e| pem_reason(&e, "PRIVATE KEY"))?;
    match &key {
        PrivateKeyDer::Pkcs8(_) => {}
        PrivateKeyDer::Sec1(_) => {
            return Err("an EC PRIVATE KEY (SEC1); convert it with `openssl pkcs8 -topk8 -nocrypt`".into());
        }
        PrivateKeyDer::Pkcs1(_) => {
            return Err("an RSA PRIVATE KEY (PKCS#1); convert it with `openssl pkcs8 -topk8 -nocrypt`".into());
        }
        _ => return Err("not a PKCS#8 private key".into()),
    }
    KeyPair::try_from(&key).map_err(|e| format!("key not usable: {e}"))
}

pub(crate) fn pem_reason(err: &pem::Error, label: &str) -> String {
    match err {
        pem::Error::NoItemsFound => format!("no PEM {label} block"),
        other => format!("bad PEM: {other}"),
    }
}

fn csr_reason(err: rcgen::Error) -> PkiError {
    PkiError::Csr(match err {
        rcgen::Error::CouldNotParseCertificationRequest => "not a DER PKCS#10 certificate signing request".into(),
        rcgen::Error::InvalidCertificationRequestSignature => "the request's signature does not verify".into(),
        rcgen::Error::UnsupportedExtension => "the request asks for an extension that cannot be signed".into(),
        rcgen::Error::UnsupportedSignatureAlgorithm => "the request's signature algorithm is not supported".into(),
        other => format!("unusable request: {other}"),
    })
}

/// Common names and organizations must be non-empty and free of control
/// characters (they end up in logs and in Kubernetes user names).
fn check_name(what: &'static str, value: &str) -> Result<(), PkiError> {
    if value.is_empty() {
        return Err(PkiError::invalid(what, value, "empty"));
    }
    if value.chars().any(char::is_control) {
        return Err(PkiError::invalid(what, value, "contains control characters"));
    }
    Ok(())
}

/// `notBefore` and `notAfter` for a certificate valid for `validity` from
/// `now`, with `notBefore` backdated for clock skew.
fn validity_window(now: OffsetDateTime, validity: Duration) -> Result<(OffsetDateTime, OffsetDateTime), PkiError> {
    if validity.is_zero() || validity > MAX_VALIDITY {
        return Err(PkiError::invalid(
            "validity",
            format!("{validity:?}"),
            "must be more than zero and at most 100 years",
        ));
    }
    let not_after = time::Duration::try_from(validity)
        .ok()
        .and_then(|v| now.checked_add(v))
        .ok_or_else(|| PkiError::invalid("validity", format!("{validity:?}"), "out of range"))?;
    Ok((now - BACKDATE, not_after))
}

/// A random positive serial number of 20 bytes (RFC 5280's maximum).
///
/// rcgen's default serial is a hash of the subject key, so a node that sends
/// the same key twice would get two certificates with one serial. This crate
/// has no random number generator of its own; rcgen reaches ring's only
/// through key generation, and the X coordinate of a fresh P-256 public key
/// (`04 || X || Y`) is random. The throw-away key costs about as much as one
/// signature.
fn random_serial() -> Result<SerialNumber, PkiError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| PkiError::generate("generate serial", e))?;
    let x = key
        .public_key_raw()
        .get(1..21)
        .ok_or_else(|| PkiError::Generate("generate serial: short public key".into()))?;
    let mut serial = x.to_vec();
    // Positive, and a leading bit that keeps the length at 20 bytes.
    serial[0] = (serial[0] & 0x7F) | 0x40;
    Ok(SerialNumber::from_slice(&serial))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_differ_and_are_positive() {
        let a = random_serial().unwrap().to_bytes();
        let b = random_serial().unwrap().to_bytes();
        assert_ne!(a, b);
        assert_eq!(a.len(), 20);
        assert_eq!(a[0] & 0xC0, 0x40);
    }

    #[test]
    fn validity_window_refuses_zero_and_absurd() {
        let now = OffsetDateTime::now_utc();
        assert!(matches!(validity_window(now, Duration::ZERO), Err(PkiError::Invalid { what: "validity", .. })));
        assert!(validity_window(now, Duration::from_secs(u64::MAX)).is_err());
        let (nb, na) = validity_window(now, Duration::from_secs(3600)).unwrap();
        assert_eq!(now - nb, BACKDATE);
        assert_eq!(na - now, time::Duration::hours(1));
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("common name", "system:node:edge-1").is_ok());
        assert!(check_name("common name", "").is_err());
        assert!(check_name("organization", "a\nb").is_err());
    }

    #[test]
    fn debug_does_not_show_the_key() {
        let ca = Ca::generate("debug-ca").unwrap();
        let issued = ca.issue_client("admin", &[], Duration::from_secs(60)).unwrap();
        let shown = format!("{issued:?}");
        assert!(shown.contains("redacted"));
        assert!(!shown.contains("PRIVATE"));
        assert!(!shown.contains(&issued.key_pem[30..60]));
        assert!(format!("{ca:?}").contains("debug-ca"));
    }
}
