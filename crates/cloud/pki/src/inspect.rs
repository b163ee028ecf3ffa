//! Reading certificates back: the identity a client certificate carries, and
//! the facts the reuse logic needs (SANs, usages, expiry).

use std::collections::BTreeSet;
use std::net::IpAddr;

use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::x509::X509Name;

use crate::PkiError;

/// Who a client certificate says its holder is, the way Kubernetes reads it:
/// the user is the subject's common name, the groups are its organizations.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The subject's common name (`CN`): the user name.
    pub common_name: String,
    /// The subject's organizations (`O`), in certificate order: the groups.
    pub organizations: Vec<String>,
}

/// Reads the user and groups from a DER certificate's subject.
///
/// This only reads; it does not check who signed the certificate. Call it on
/// a certificate the TLS layer has already verified against the CA.
///
/// A subject without a common name, or with more than one, is refused: the
/// user would be empty or ambiguous (Go keeps the last CN, others the first).
///
/// ```
/// # use std::time::Duration;
/// let ca = edgehive_pki::Ca::generate("edgehive-ca")?;
/// let admin = ca.issue_client("admin", &["system:masters"], Duration::from_secs(3600))?;
/// let who = edgehive_pki::identity_of(&admin.cert_der)?;
/// assert_eq!(who.common_name, "admin");
/// assert_eq!(who.organizations, ["system:masters"]);
/// # Ok::<(), edgehive_pki::PkiError>(())
/// ```
pub fn identity_of(cert_der: &[u8]) -> Result<Identity, PkiError> {
    let cert = parse_certificate(cert_der).map_err(PkiError::Certificate)?;
    identity_in(cert.subject()).map_err(PkiError::Certificate)
}

/// What tells one certificate from the others issued for the same subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateId {
    /// The serial number, lowercase hexadecimal without leading zeros.
    pub serial: String,
    /// When the certificate stops being valid.
    pub not_after: OffsetDateTime,
}

/// Reads the serial number and expiry of a DER certificate.
///
/// ```
/// # use std::time::Duration;
/// let ca = edgehive_pki::Ca::generate("edgehive-ca")?;
/// let a = ca.issue_client("node", &[], Duration::from_secs(3600))?;
/// let b = ca.issue_client("node", &[], Duration::from_secs(3600))?;
/// let (a, b) = (edgehive_pki::certificate_id(&a.cert_der)?, edgehive_pki::certificate_id(&b.cert_der)?);
/// assert_ne!(a.serial, b.serial);
/// assert!(a.not_after > time::OffsetDateTime::now_utc());
/// # Ok::<(), edgehive_pki::PkiError>(())
/// ```
pub fn certificate_id(cert_der: &[u8]) -> Result<CertificateId, PkiError> {
    let cert = parse_certificate(cert_der).map_err(PkiError::Certificate)?;
    Ok(CertificateId { serial: serial_hex(cert.raw_serial()), not_after: cert.validity().not_after.to_datetime() })
}

/// A serial number's bytes as lowercase hexadecimal without leading zeros
/// (`0` for zero).
pub(crate) fn serial_hex(raw: &[u8]) -> String {
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    let trimmed = hex.trim_start_matches('0');
    if trimmed.is_empty() { "0".to_owned() } else { trimmed.to_owned() }
}

/// Parses one DER certificate with nothing after it.
pub(crate) fn parse_certificate(der: &[u8]) -> Result<X509Certificate<'_>, String> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| format!("not a DER certificate: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the certificate", rest.len()));
    }
    Ok(cert)
}

pub(crate) fn identity_in(subject: &X509Name<'_>) -> Result<Identity, String> {
    let mut names = subject.iter_common_name();
    let common_name = match (names.next(), names.next()) {
        (Some(cn), None) => cn.as_str().map_err(|e| format!("common name is not a string: {e}"))?,
        (None, _) => return Err("subject has no common name".into()),
        (Some(_), Some(_)) => return Err("subject has more than one common name".into()),
    };
    let organizations = subject
        .iter_organization()
        .map(|o| o.as_str().map(str::to_owned).map_err(|e| format!("organization is not a string: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Identity { common_name: common_name.to_owned(), organizations })
}

/// A subject alternative name, normalised for comparison (DNS names are
/// case-insensitive, so they are kept in lower case).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum San {
    Dns(String),
    Ip(IpAddr),
}

impl San {
    /// An IP SAN if `s` parses as an IP address, else a DNS SAN.
    pub(crate) fn parse(s: &str) -> Result<San, PkiError> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(San::Ip(ip));
        }
        let valid = !s.is_empty()
            && s.len() <= 253
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'*'));
        if !valid {
            return Err(PkiError::invalid(
                "SAN",
                s,
                "neither an IP address nor a DNS name (ASCII letters, digits, '.', '-', '_', '*')",
            ));
        }
        Ok(San::Dns(s.to_ascii_lowercase()))
    }
}

/// What the reuse logic needs to know about an existing leaf certificate.
#[derive(Debug)]
pub(crate) struct LeafFacts {
    pub(crate) not_after: OffsetDateTime,
    pub(crate) sans: BTreeSet<San>,
    pub(crate) server_auth: bool,
    pub(crate) client_auth: bool,
    pub(crate) identity: Result<Identity, String>,
    /// The subject public key (the BIT STRING's bytes).
    pub(crate) public_key: Vec<u8>,
}

pub(crate) fn leaf_facts(cert: &X509Certificate<'_>) -> Result<LeafFacts, String> {
    let mut sans = BTreeSet::new();
    let san_ext = cert.subject_alternative_name().map_err(|e| format!("bad subjectAltName: {e}"))?;
    for name in san_ext.iter().flat_map(|ext| ext.value.general_names.iter()) {
        match name {
            GeneralName::DNSName(dns) => {
                sans.insert(San::Dns(dns.to_ascii_lowercase()));
            }
            GeneralName::IPAddress(bytes) => {
                let ip = match bytes.len() {
                    4 => <[u8; 4]>::try_from(*bytes).map(IpAddr::from).ok(),
                    16 => <[u8; 16]>::try_from(*bytes).map(IpAddr::from).ok(),
                    _ => None,
                };
                sans.insert(San::Ip(ip.ok_or("bad IP address SAN")?));
            }
            // Other name types are never issued here; a certificate with one
            // will simply not match any requested set.
            other => {
                sans.insert(San::Dns(format!("<{other}>")));
            }
        }
    }
    let eku = cert.extended_key_usage().map_err(|e| format!("bad extendedKeyUsage: {e}"))?;
    let (server_auth, client_auth) = eku.map_or((false, false), |e| (e.value.server_auth, e.value.client_auth));
    Ok(LeafFacts {
        not_after: cert.validity().not_after.to_datetime(),
        sans,
        server_auth,
        client_auth,
        identity: identity_in(cert.subject()),
        public_key: cert.public_key().subject_public_key.data.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sans_parse_as_ip_or_dns() {
        assert_eq!(San::parse("10.0.0.1").unwrap(), San::Ip("10.0.0.1".parse().unwrap()));
        assert_eq!(San::parse("::1").unwrap(), San::Ip("::1".parse().unwrap()));
        assert_eq!(San::parse("Cloud.Example").unwrap(), San::Dns("cloud.example".into()));
        assert_eq!(San::parse("*.svc").unwrap(), San::Dns("*.svc".into()));
        for bad in ["", "a b", "été.example", "x/y"] {
            assert!(matches!(San::parse(bad), Err(PkiError::Invalid { what: "SAN", .. })), "{bad:?}");
        }
    }

    #[test]
    fn identity_of_garbage_is_an_error() {
        assert!(matches!(identity_of(b"not a certificate"), Err(PkiError::Certificate(_))));
        assert!(matches!(identity_of(&[]), Err(PkiError::Certificate(_))));
    }
}
