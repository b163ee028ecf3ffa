//! Certificates for tests: a CA, server and client certificates signed by it,
//! and the bad ones (another CA, expired) that a server must refuse.
//!
//! Keys are ECDSA P-256, as KubeEdge generates them.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, date_time_ymd,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A certificate and its key, DER-encoded.
#[derive(Debug)]
pub struct Issued {
    /// The certificate.
    pub cert: CertificateDer<'static>,
    /// Its private key (PKCS#8).
    pub key: PrivateKeyDer<'static>,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The key, PEM (PKCS#8).
    pub key_pem: String,
}

impl Clone for Issued {
    fn clone(&self) -> Self {
        Issued {
            cert: self.cert.clone(),
            key: self.key.clone_key(),
            cert_pem: self.cert_pem.clone(),
            key_pem: self.key_pem.clone(),
        }
    }
}

/// A test certificate authority.
pub struct TestCa {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate.
    pub cert: CertificateDer<'static>,
    /// The CA certificate, PEM.
    pub cert_pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

fn dn(cn: &str, org: Option<&str>) -> DistinguishedName {
    let mut d = DistinguishedName::new();
    d.push(DnType::CommonName, cn);
    if let Some(o) = org {
        d.push(DnType::OrganizationName, o);
    }
    d
}

impl TestCa {
    /// A new CA named `cn`.
    pub fn new(cn: &str) -> TestCa {
        let key = KeyPair::generate().expect("generate CA key");
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(cn, None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let signed = params.self_signed(&key).expect("self-sign CA");
        TestCa { params, key, cert: signed.der().clone(), cert_pem: signed.pem() }
    }

    fn issue(&self, mut params: CertificateParams) -> Issued {
        let key = KeyPair::generate().expect("generate key");
        let issuer = Issuer::from_params(&self.params, &self.key);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        let signed = params.signed_by(&key, &issuer).expect("sign certificate");
        Issued {
            cert: signed.der().clone(),
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            cert_pem: signed.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn("edgehive-cloud", Some("edgehive"));
        params.subject_alt_names = vec![
            SanType::DnsName("localhost".try_into().expect("dns name")),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate with subject `CN=system:node:{node}, O=system:nodes`.
    pub fn node(&self, node: &str) -> Issued {
        self.client(&format!("system:node:{node}"), Some("system:nodes"))
    }

    /// A client certificate with the given subject.
    pub fn client(&self, cn: &str, org: Option<&str>) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(cn, org);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params)
    }

    /// A node's client certificate that expires `secs` seconds from now.
    pub fn node_expiring_in(&self, node: &str, secs: i64) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("system:node:{node}"), Some("system:nodes"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(1);
        params.not_after = now + time::Duration::seconds(secs);
        self.issue(params)
    }

    /// A client certificate that expired in 2001.
    pub fn expired_node(&self, node: &str) -> Issued {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("system:node:{node}"), Some("system:nodes"));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.not_before = date_time_ymd(2000, 1, 1);
        params.not_after = date_time_ymd(2001, 1, 1);
        self.issue(params)
    }
}
