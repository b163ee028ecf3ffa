//! The certificate authority from the outside: files on disk, issued
//! certificates read back with x509-parser, CSR signing, reuse, kubeconfig.
//!
//! "Verifies against the CA" below means: the issuer name equals the CA's
//! subject byte for byte and the signature verifies with the CA's public key
//! (x509-parser's `verify_signature`, ring underneath). It is not webpki's
//! full path validation and no TLS handshake is made here: rustls is not a
//! dependency of this crate, so that check belongs to a crate that serves TLS.

#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

use std::fs;
use std::net::IpAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use edgehive_pki::{
    CA_CERT_FILE, CA_KEY_FILE, CSR_SIZE_LIMIT, Ca, Identity, PkiError, identity_of, kubeconfig, load_or_issue_client,
    load_or_issue_server, write_private_file,
};
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86400);

/// A directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "edgehive-pki-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der).unwrap();
    assert!(rest.is_empty());
    cert
}

/// Issuer name equals the CA's subject and the signature verifies with the
/// CA's key.
fn verifies_against(cert_der: &[u8], ca: &Ca) -> bool {
    let cert = parse(cert_der);
    let ca_cert = parse(ca.cert_der());
    cert.issuer().as_raw() == ca_cert.subject().as_raw() && cert.verify_signature(Some(ca_cert.public_key())).is_ok()
}

fn sans_of(cert_der: &[u8]) -> (Vec<String>, Vec<IpAddr>) {
    let cert = parse(cert_der);
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for name in &cert.subject_alternative_name().unwrap().unwrap().value.general_names {
        match name {
            GeneralName::DNSName(d) => dns.push(d.to_string()),
            GeneralName::IPAddress(b) if b.len() == 4 => ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap())),
            GeneralName::IPAddress(b) => ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap())),
            other => panic!("unexpected SAN {other}"),
        }
    }
    (dns, ips)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---- the CA on disk ----

#[test]
fn create_then_load_gives_the_same_ca() {
    let tmp = TempDir::new();
    let dir = tmp.path().join("pki");
    let created = Ca::load_or_create(&dir, "edgehive-ca").unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(CA_KEY_FILE)), 0o600);
    assert_eq!(mode(&dir.join(CA_CERT_FILE)) & 0o022, 0, "certificate not writable by others");
    let on_disk = fs::read_to_string(dir.join(CA_CERT_FILE)).unwrap();
    assert_eq!(on_disk, created.cert_pem());
    // Nothing but the two files: no temporary files left behind.
    let mut names: Vec<String> =
        fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["ca.crt", "ca.key"]);

    let loaded = Ca::load_or_create(&dir, "ignored-when-loading").unwrap();
    assert_eq!(loaded.cert_der(), created.cert_der());
    assert_eq!(loaded.cert_pem(), created.cert_pem());
    // The loaded CA signs with the same key.
    let client = loaded.issue_client("admin", &[], HOUR).unwrap();
    assert!(verifies_against(&client.cert_der, &created));
}

#[test]
fn the_ca_certificate_is_a_ten_year_p256_ca() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let cert = parse(ca.cert_der());
    assert!(cert.is_ca());
    let cn: Vec<&str> = cert.subject().iter_common_name().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(cn, ["edgehive-ca"]);
    assert_eq!(cert.subject(), cert.issuer());
    cert.verify_signature(None).expect("self-signed");
    let ku = cert.key_usage().unwrap().unwrap().value;
    assert!(ku.key_cert_sign() && ku.crl_sign() && ku.digital_signature());
    let days = (cert.validity().not_after.to_datetime() - time::OffsetDateTime::now_utc()).whole_days();
    assert!((3649..=3650).contains(&days), "{days}");
    // id-ecPublicKey with prime256v1.
    let alg = &cert.public_key().algorithm;
    assert_eq!(alg.algorithm.to_id_string(), "1.2.840.10045.2.1");
    assert_eq!(alg.parameters.as_ref().unwrap().as_oid().unwrap().to_id_string(), "1.2.840.10045.3.1.7");
}

/// Corrupts one CA file with `damage` and checks that loading fails with an
/// error naming that file, and that neither file is changed.
fn refuses_damaged(file: &str, damage: impl FnOnce(&Path), check: impl FnOnce(&PkiError)) {
    let tmp = TempDir::new();
    let dir = tmp.path().join("pki");
    Ca::load_or_create(&dir, "edgehive-ca").unwrap();
    damage(&dir.join(file));
    let cert_before = fs::read(dir.join(CA_CERT_FILE)).unwrap();
    let key_before = fs::read(dir.join(CA_KEY_FILE)).unwrap();

    let err = Ca::load_or_create(&dir, "edgehive-ca").unwrap_err();
    let message = err.to_string();
    assert!(message.contains(&dir.join(file).display().to_string()), "{message}");
    check(&err);

    assert_eq!(fs::read(dir.join(CA_CERT_FILE)).unwrap(), cert_before);
    assert_eq!(fs::read(dir.join(CA_KEY_FILE)).unwrap(), key_before);
}

#[test]
fn a_corrupt_ca_certificate_is_an_error_naming_it() {
    refuses_damaged(
        CA_CERT_FILE,
        |p| fs::write(p, "not a certificate\n").unwrap(),
        |e| {
            assert!(matches!(e, PkiError::Parse { what: "CA certificate", .. }), "{e:?}");
            assert!(e.to_string().starts_with("parse CA certificate "), "{e}");
        },
    );
}

#[test]
fn a_truncated_ca_certificate_is_an_error_naming_it() {
    refuses_damaged(
        CA_CERT_FILE,
        |p| {
            let pem = fs::read_to_string(p).unwrap();
            fs::write(p, &pem[..pem.len() / 2]).unwrap();
        },
        |e| assert!(matches!(e, PkiError::Parse { what: "CA certificate", .. }), "{e:?}"),
    );
}

#[test]
fn a_corrupt_ca_key_is_an_error_naming_it() {
    refuses_damaged(
        CA_KEY_FILE,
        |p| {
            let body = STANDARD.encode([0x30, 0x03, 0x02, 0x01, 0x00]);
            fs::write(p, format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")).unwrap();
        },
        |e| assert!(matches!(e, PkiError::Parse { what: "CA key", .. }), "{e:?}"),
    );
}

#[test]
fn a_ca_key_that_is_not_the_certificates_is_a_mismatch() {
    let other = KeyPair::generate().unwrap();
    refuses_damaged(
        CA_KEY_FILE,
        |p| fs::write(p, other.serialize_pem()).unwrap(),
        |e| {
            let PkiError::Mismatch { path, cert } = e else { panic!("{e:?}") };
            assert!(path.ends_with(CA_KEY_FILE));
            assert!(cert.ends_with(CA_CERT_FILE));
        },
    );
}

#[test]
fn a_leaf_certificate_in_place_of_the_ca_is_refused() {
    let ca = Ca::generate("other").unwrap();
    let leaf = ca.issue_client("not-a-ca", &[], HOUR).unwrap();
    let tmp = TempDir::new();
    fs::write(tmp.path().join(CA_CERT_FILE), &leaf.cert_pem).unwrap();
    fs::write(tmp.path().join(CA_KEY_FILE), &leaf.key_pem).unwrap();
    let err = Ca::load_or_create(tmp.path(), "edgehive-ca").unwrap_err();
    assert!(err.to_string().contains("not a CA certificate"), "{err}");
}

#[test]
fn one_ca_file_alone_is_not_replaced() {
    let tmp = TempDir::new();
    let dir = tmp.path();
    Ca::load_or_create(dir, "edgehive-ca").unwrap();
    let cert_before = fs::read(dir.join(CA_CERT_FILE)).unwrap();
    fs::remove_file(dir.join(CA_KEY_FILE)).unwrap();

    let err = Ca::load_or_create(dir, "edgehive-ca").unwrap_err();
    let PkiError::Incomplete { present, missing } = &err else { panic!("{err:?}") };
    assert!(present.ends_with(CA_CERT_FILE) && missing.ends_with(CA_KEY_FILE));
    assert_eq!(fs::read(dir.join(CA_CERT_FILE)).unwrap(), cert_before);
    assert!(!dir.join(CA_KEY_FILE).exists());
}

#[test]
fn an_unreadable_ca_directory_is_an_io_error() {
    let tmp = TempDir::new();
    // A file where the directory should be.
    let dir = tmp.path().join("pki");
    fs::write(&dir, "").unwrap();
    let err = Ca::load_or_create(&dir, "edgehive-ca").unwrap_err();
    assert!(matches!(err, PkiError::Io { .. }), "{err:?}");
}

// ---- issuing ----

#[test]
fn server_certificates_verify_and_carry_ip_and_dns_sans() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let sans = strings(&["localhost", "127.0.0.1", "::1", "Cloud.Example", "10.1.2.3", "localhost"]);
    let issued = ca.issue_server("edgehive-apiserver", &sans, DAY).unwrap();
    assert!(verifies_against(&issued.cert_der, &ca));
    assert!(!verifies_against(&issued.cert_der, &Ca::generate("edgehive-ca").unwrap()));

    let (mut dns, mut ips) = sans_of(&issued.cert_der);
    dns.sort();
    ips.sort();
    assert_eq!(dns, ["cloud.example", "localhost"]);
    let want: Vec<IpAddr> = ["10.1.2.3", "127.0.0.1", "::1"].iter().map(|s| s.parse().unwrap()).collect();
    assert_eq!(ips, want);

    let cert = parse(&issued.cert_der);
    assert!(!cert.basic_constraints().unwrap().unwrap().value.ca, "explicit CA:FALSE");
    assert!(!cert.subject_alternative_name().unwrap().unwrap().critical, "the subject is not empty");
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && !eku.client_auth);
    let ku = cert.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
    assert_eq!(identity_of(&issued.cert_der).unwrap().common_name, "edgehive-apiserver");
    let lifetime = cert.validity().not_after.to_datetime() - time::OffsetDateTime::now_utc();
    assert!((lifetime - time::Duration::days(1)).abs() < time::Duration::minutes(1), "{lifetime}");

    // The key and certificate match, and the PEM forms decode to the DER forms.
    let key = KeyPair::from_pem(&issued.key_pem).unwrap();
    assert_eq!(key.public_key_raw(), &*cert.public_key().subject_public_key.data);
    assert_eq!(key.serialized_der(), issued.key_der.secret_der());
    let pem_der = rustls_pki_types::pem::PemObject::from_pem_slice(issued.cert_pem.as_bytes())
        .map(|c: rustls_pki_types::CertificateDer<'_>| c.to_vec())
        .unwrap();
    assert_eq!(pem_der, issued.cert_der.to_vec());
}

#[test]
fn bad_sans_and_names_are_refused() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let err = ca.issue_server("x", &strings(&["bad name"]), DAY).unwrap_err();
    assert!(matches!(err, PkiError::Invalid { what: "SAN", .. }), "{err:?}");
    let err = ca.issue_client("", &[], DAY).unwrap_err();
    assert!(matches!(err, PkiError::Invalid { what: "common name", .. }), "{err:?}");
    let err = ca.issue_client("admin", &[""], DAY).unwrap_err();
    assert!(matches!(err, PkiError::Invalid { what: "organization", .. }), "{err:?}");
    let err = ca.issue_client("admin", &[], Duration::ZERO).unwrap_err();
    assert!(matches!(err, PkiError::Invalid { what: "validity", .. }), "{err:?}");
}

#[test]
fn client_certificates_carry_user_and_groups() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let issued = ca.issue_client("admin", &["system:masters", "ops", "dev"], DAY).unwrap();
    assert!(verifies_against(&issued.cert_der, &ca));
    assert_eq!(
        identity_of(&issued.cert_der).unwrap(),
        Identity { common_name: "admin".into(), organizations: strings(&["system:masters", "ops", "dev"]) }
    );
    let cert = parse(&issued.cert_der);
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    assert!(cert.subject_alternative_name().unwrap().is_none());

    let no_groups = ca.issue_client("system:node:edge-1", &[], DAY).unwrap();
    assert_eq!(identity_of(&no_groups.cert_der).unwrap().organizations, Vec::<String>::new());
}

#[test]
fn every_certificate_gets_its_own_serial() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let a = ca.issue_client("a", &[], DAY).unwrap();
    let b = ca.issue_client("a", &[], DAY).unwrap();
    assert_ne!(parse(&a.cert_der).serial, parse(&b.cert_der).serial);
    assert_ne!(parse(&a.cert_der).serial, parse(ca.cert_der()).serial);
}

#[test]
fn issued_clones_keep_the_key() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let issued = ca.issue_client("a", &[], DAY).unwrap();
    let copy = issued.clone();
    assert_eq!(copy.key_der.secret_der(), issued.key_der.secret_der());
    assert_eq!(copy.cert_der, issued.cert_der);
    assert_eq!(copy.key_pem, issued.key_pem);
}

// ---- CSRs ----

fn node_csr() -> (KeyPair, Vec<u8>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["kubeedge.io".to_string()]).unwrap();
    params.distinguished_name.push(DnType::CommonName, "kubeedge.io");
    params.distinguished_name.push(DnType::OrganizationName, "evil");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let csr = params.serialize_request(&key).unwrap();
    (key, csr.der().to_vec())
}

#[test]
fn a_signed_csr_gets_our_subject_not_the_requested_one() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let (key, csr) = node_csr();
    let cert_der = ca.sign_csr(&csr, "system:node:edge-1", &["system:nodes"], DAY).unwrap();
    assert!(verifies_against(&cert_der, &ca));
    assert_eq!(
        identity_of(&cert_der).unwrap(),
        Identity { common_name: "system:node:edge-1".into(), organizations: strings(&["system:nodes"]) }
    );
    let cert = parse(&cert_der);
    assert_eq!(cert.public_key().subject_public_key.data.as_ref(), key.public_key_raw());
    assert!(cert.subject_alternative_name().unwrap().is_none(), "requested SANs are ignored");
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth, "requested EKU is ignored");
    assert!(!cert.is_ca());
    let lifetime = cert.validity().not_after.to_datetime() - time::OffsetDateTime::now_utc();
    assert!((lifetime - time::Duration::days(1)).abs() < time::Duration::minutes(1), "{lifetime}");
}

#[test]
fn a_csr_asking_to_be_a_ca_gets_a_leaf() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.subject_alt_names = vec![SanType::DnsName("evil.example".try_into().unwrap())];
    let csr = params.serialize_request(&key).unwrap();
    let cert_der = ca.sign_csr(csr.der(), "system:node:edge-2", &["system:nodes"], DAY).unwrap();
    assert!(!parse(&cert_der).is_ca());
}

#[test]
fn the_same_csr_twice_gets_two_serials() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let (_, csr) = node_csr();
    let a = ca.sign_csr(&csr, "system:node:edge-1", &["system:nodes"], DAY).unwrap();
    let b = ca.sign_csr(&csr, "system:node:edge-1", &["system:nodes"], DAY).unwrap();
    assert_ne!(parse(&a).serial, parse(&b).serial);
}

fn csr_error(ca: &Ca, input: &[u8]) -> PkiError {
    ca.sign_csr(input, "system:node:edge-1", &["system:nodes"], DAY).unwrap_err()
}

#[test]
fn bad_csrs_are_refused_with_a_csr_error() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let (_, csr) = node_csr();

    let err = csr_error(&ca, b"garbage, not DER at all");
    assert!(matches!(err, PkiError::Csr(_)), "{err:?}");
    assert!(err.to_string().starts_with("sign CSR: "), "{err}");

    let err = csr_error(&ca, &[]);
    assert!(matches!(&err, PkiError::Csr(m) if m.contains("empty")), "{err:?}");

    for len in [1, 2, csr.len() / 2, csr.len() - 1] {
        let err = csr_error(&ca, &csr[..len]);
        assert!(matches!(err, PkiError::Csr(_)), "truncated to {len}: {err:?}");
    }

    let mut tampered = csr.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0x01; // the last byte of the signature's s value
    let err = csr_error(&ca, &tampered);
    assert!(matches!(&err, PkiError::Csr(m) if m.contains("signature")), "{err:?}");

    let mut tampered_body = csr.clone();
    // A byte inside the subject (the signed part): "kubeedge.io" -> "kubeedge.iO".
    let at = tampered_body.windows(11).position(|w| w == b"kubeedge.io").unwrap() + 10;
    tampered_body[at] = b'O';
    let err = csr_error(&ca, &tampered_body);
    assert!(matches!(&err, PkiError::Csr(m) if m.contains("signature")), "{err:?}");

    let mut trailing = csr.clone();
    trailing.push(0);
    let err = csr_error(&ca, &trailing);
    assert!(matches!(&err, PkiError::Csr(m) if m.contains("after the request")), "{err:?}");
}

#[test]
fn csrs_over_64_kib_are_refused_unread() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    assert_eq!(CSR_SIZE_LIMIT, 64 * 1024);
    let err = csr_error(&ca, &vec![0x30; CSR_SIZE_LIMIT + 1]);
    let PkiError::CsrTooLarge { size, limit } = err else { panic!("{err:?}") };
    assert_eq!((size, limit), (CSR_SIZE_LIMIT + 1, CSR_SIZE_LIMIT));
    // At the limit it is parsed (and is garbage).
    let err = csr_error(&ca, &vec![0x30; CSR_SIZE_LIMIT]);
    assert!(matches!(err, PkiError::Csr(_)), "{err:?}");
}

// ---- reuse ----

#[test]
fn a_valid_serving_certificate_is_reused() {
    let tmp = TempDir::new();
    let ca = Ca::load_or_create(tmp.path(), "edgehive-ca").unwrap();
    let sans = strings(&["localhost", "127.0.0.1"]);
    let first = load_or_issue_server(tmp.path(), &ca, "apiserver", "edgehive-apiserver", &sans).unwrap();
    assert_eq!(mode(&tmp.path().join("apiserver.key")), 0o600);
    assert!(verifies_against(&first.cert_der, &ca));
    let lifetime = parse(&first.cert_der).validity().not_after.to_datetime() - time::OffsetDateTime::now_utc();
    assert_eq!(lifetime.whole_days(), 364, "one year");

    let second = load_or_issue_server(tmp.path(), &ca, "apiserver", "edgehive-apiserver", &sans).unwrap();
    assert_eq!(second.cert_der, first.cert_der);
    assert_eq!(second.key_der.secret_der(), first.key_der.secret_der());

    // The same SANs in another order and case are the same set.
    let reordered = strings(&["127.0.0.1", "LocalHost"]);
    let third = load_or_issue_server(tmp.path(), &ca, "apiserver", "edgehive-apiserver", &reordered).unwrap();
    assert_eq!(third.cert_der, first.cert_der);
}

#[test]
fn a_serving_certificate_is_reissued_when_the_sans_change() {
    let tmp = TempDir::new();
    let ca = Ca::generate("edgehive-ca").unwrap();
    let first = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &strings(&["localhost"])).unwrap();
    let more = strings(&["localhost", "192.168.1.10"]);
    let second = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &more).unwrap();
    assert_ne!(second.cert_der, first.cert_der);
    assert_eq!(sans_of(&second.cert_der).1, ["192.168.1.10".parse::<IpAddr>().unwrap()]);
    // And fewer SANs is a change too.
    let third = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &strings(&["192.168.1.10"])).unwrap();
    assert_ne!(third.cert_der, second.cert_der);
    assert_eq!(fs::read_to_string(tmp.path().join("apiserver.crt")).unwrap(), third.cert_pem);
}

#[test]
fn a_serving_certificate_is_reissued_when_the_ca_changes() {
    let tmp = TempDir::new();
    let old = Ca::generate("edgehive-ca").unwrap();
    let new = Ca::generate("edgehive-ca").unwrap();
    let sans = strings(&["localhost"]);
    let first = load_or_issue_server(tmp.path(), &old, "apiserver", "cn", &sans).unwrap();
    let second = load_or_issue_server(tmp.path(), &new, "apiserver", "cn", &sans).unwrap();
    assert_ne!(second.cert_der, first.cert_der);
    assert!(verifies_against(&second.cert_der, &new));
}

#[test]
fn a_certificate_near_expiry_is_reissued() {
    let tmp = TempDir::new();
    let ca = Ca::generate("edgehive-ca").unwrap();
    let sans = strings(&["localhost"]);
    let short = ca.issue_server("cn", &sans, 10 * DAY).unwrap();
    fs::write(tmp.path().join("apiserver.crt"), &short.cert_pem).unwrap();
    fs::write(tmp.path().join("apiserver.key"), &short.key_pem).unwrap();
    let renewed = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &sans).unwrap();
    assert_ne!(renewed.cert_der, short.cert_der);

    // 31 days left is still fine.
    let enough = ca.issue_server("cn", &sans, 31 * DAY).unwrap();
    fs::write(tmp.path().join("apiserver.crt"), &enough.cert_pem).unwrap();
    fs::write(tmp.path().join("apiserver.key"), &enough.key_pem).unwrap();
    let kept = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &sans).unwrap();
    assert_eq!(kept.cert_der, enough.cert_der);
}

#[test]
fn damaged_or_mismatched_files_are_replaced() {
    let tmp = TempDir::new();
    let ca = Ca::generate("edgehive-ca").unwrap();
    let sans = strings(&["localhost"]);
    let first = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &sans).unwrap();

    fs::write(tmp.path().join("apiserver.crt"), "garbage").unwrap();
    let second = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &sans).unwrap();
    assert_ne!(second.cert_der, first.cert_der);

    // The key of another certificate.
    fs::write(tmp.path().join("apiserver.key"), &first.key_pem).unwrap();
    let third = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &sans).unwrap();
    assert_ne!(third.cert_der, second.cert_der);
    let key = KeyPair::from_pem(&fs::read_to_string(tmp.path().join("apiserver.key")).unwrap()).unwrap();
    assert_eq!(key.public_key_raw(), &*parse(&third.cert_der).public_key().subject_public_key.data);

    // A client certificate under a serving certificate's name.
    let client = ca.issue_client("cn", &[], 100 * DAY).unwrap();
    fs::write(tmp.path().join("apiserver.crt"), &client.cert_pem).unwrap();
    fs::write(tmp.path().join("apiserver.key"), &client.key_pem).unwrap();
    let fourth = load_or_issue_server(tmp.path(), &ca, "apiserver", "cn", &sans).unwrap();
    assert_ne!(fourth.cert_der, client.cert_der);
}

#[test]
fn a_client_certificate_is_reused_until_its_subject_or_ca_changes() {
    let tmp = TempDir::new();
    let dir = tmp.path().join("clients");
    let ca = Ca::generate("edgehive-ca").unwrap();
    let first = load_or_issue_client(&dir, &ca, "admin", "admin", &["system:masters", "ops"]).unwrap();
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("admin.key")), 0o600);

    let again = load_or_issue_client(&dir, &ca, "admin", "admin", &["ops", "system:masters"]).unwrap();
    assert_eq!(again.cert_der, first.cert_der, "groups are a set");

    let fewer = load_or_issue_client(&dir, &ca, "admin", "admin", &["system:masters"]).unwrap();
    assert_ne!(fewer.cert_der, first.cert_der);
    assert_eq!(identity_of(&fewer.cert_der).unwrap().organizations, ["system:masters"]);

    let renamed = load_or_issue_client(&dir, &ca, "admin", "root", &["system:masters"]).unwrap();
    assert_ne!(renamed.cert_der, fewer.cert_der);
    assert_eq!(identity_of(&renamed.cert_der).unwrap().common_name, "root");

    let other_ca = Ca::generate("edgehive-ca").unwrap();
    let moved = load_or_issue_client(&dir, &other_ca, "admin", "root", &["system:masters"]).unwrap();
    assert_ne!(moved.cert_der, renamed.cert_der);
    assert!(verifies_against(&moved.cert_der, &other_ca));
}

#[test]
fn file_stems_must_be_names() {
    let tmp = TempDir::new();
    let ca = Ca::generate("edgehive-ca").unwrap();
    let err = load_or_issue_client(tmp.path(), &ca, "../admin", "admin", &[]).unwrap_err();
    assert!(matches!(err, PkiError::Invalid { what: "file stem", .. }), "{err:?}");
}

// ---- kubeconfig and private files ----

#[test]
fn kubeconfig_embeds_the_pems() {
    let ca = Ca::generate("edgehive-ca").unwrap();
    let admin = ca.issue_client("admin", &["system:masters"], DAY).unwrap();
    let yaml = kubeconfig("https://127.0.0.1:6443", ca.cert_pem(), &admin.cert_pem, &admin.key_pem, "edgehive");

    for line in [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: \"edgehive\"",
        "    server: \"https://127.0.0.1:6443\"",
        "users:",
        "contexts:",
        "    cluster: \"edgehive\"",
        "    user: \"edgehive\"",
        "current-context: \"edgehive\"",
    ] {
        assert!(yaml.lines().any(|l| l == line), "missing line {line:?} in\n{yaml}");
    }
    let value = |key: &str| -> String {
        let prefix = format!("    {key}: ");
        let line = yaml.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("no {key}"));
        String::from_utf8(STANDARD.decode(&line[prefix.len()..]).unwrap()).unwrap()
    };
    assert_eq!(value("certificate-authority-data"), ca.cert_pem());
    assert_eq!(value("client-certificate-data"), admin.cert_pem);
    assert_eq!(value("client-key-data"), admin.key_pem);
    // No tabs (YAML forbids them in indentation) and every line ends.
    assert!(!yaml.contains('\t') && yaml.ends_with('\n'));
}

#[test]
fn private_files_are_written_whole_with_mode_0600() {
    let tmp = TempDir::new();
    let path = tmp.path().join("admin.kubeconfig");
    fs::write(&path, "old").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    write_private_file(&path, b"new contents").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"new contents");
    assert_eq!(mode(&path), 0o600, "replaced, not rewritten in place");
    let leftovers = fs::read_dir(tmp.path()).unwrap().count();
    assert_eq!(leftovers, 1, "no temporary file left");

    let err = write_private_file(&tmp.path().join("missing-dir/file"), b"x").unwrap_err();
    assert!(matches!(err, PkiError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("missing-dir"), "{err}");
}
