//! Certificates kept on disk across restarts: reused while still right,
//! reissued (and the reason logged) when not.

use std::collections::BTreeSet;
use std::path::Path;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use time::OffsetDateTime;

use crate::ca::{Issued, key_from_pem, pem_reason};
use crate::files::read_optional;
use crate::inspect::{Identity, LeafFacts, San, leaf_facts, parse_certificate};
use crate::{Ca, LEAF_VALIDITY, PkiError, RENEW_BEFORE};

/// Returns the serving certificate in `dir/{file_stem}.crt` and its key in
/// `dir/{file_stem}.key`, issuing a new one if needed.
///
/// The pair on disk is reused if the key belongs to the certificate, the
/// certificate was signed by `ca`, has extended key usage serverAuth, its
/// SANs are exactly `sans` as a set (DNS names compared case-insensitively),
/// and it expires more than 30 days from now. Otherwise a new certificate is
/// issued with [`Ca::issue_server`] (valid one year) and written, key first,
/// atomically, the key with mode 0600; the reason is logged. `dir` is
/// created (0700) if it does not exist. The common name is not compared:
/// TLS clients check SANs only.
///
/// Files that are missing, unreadable as PEM or not matching are replaced;
/// a file that cannot be read at all (permissions) is an error.
pub fn load_or_issue_server(
    dir: &Path,
    ca: &Ca,
    file_stem: &str,
    common_name: &str,
    sans: &[String],
) -> Result<Issued, PkiError> {
    check_stem(file_stem)?;
    let wanted = sans.iter().map(|s| San::parse(s)).collect::<Result<BTreeSet<_>, _>>()?;
    let check = |facts: &LeafFacts| {
        if !facts.server_auth {
            return Err(Reissue::plain("the certificate is not for serving (no serverAuth)"));
        }
        if facts.sans != wanted {
            return Err(Reissue::plain(format!(
                "the SANs changed from {} to {}",
                show_sans(&facts.sans),
                show_sans(&wanted)
            )));
        }
        Ok(())
    };
    load_or_issue(dir, ca, file_stem, check, || ca.issue_server(common_name, sans, LEAF_VALIDITY))
}

/// Returns the client certificate in `dir/{file_stem}.crt` and its key in
/// `dir/{file_stem}.key`, issuing a new one if needed.
///
/// The pair on disk is reused if the key belongs to the certificate, the
/// certificate was signed by `ca`, has extended key usage clientAuth, its
/// subject has exactly the common name `common_name` and the organizations
/// `organizations` (as a set: Kubernetes groups have no order), and it
/// expires more than 30 days from now. Otherwise a new certificate is issued
/// with [`Ca::issue_client`] (valid one year) and written as
/// [`load_or_issue_server`] does.
pub fn load_or_issue_client(
    dir: &Path,
    ca: &Ca,
    file_stem: &str,
    common_name: &str,
    organizations: &[&str],
) -> Result<Issued, PkiError> {
    check_stem(file_stem)?;
    let wanted_orgs: BTreeSet<&str> = organizations.iter().copied().collect();
    let check = |facts: &LeafFacts| {
        if !facts.client_auth {
            return Err(Reissue::plain("the certificate is not for clients (no clientAuth)"));
        }
        let same = match &facts.identity {
            Ok(Identity { common_name: cn, organizations: orgs }) => {
                cn == common_name && orgs.iter().map(String::as_str).collect::<BTreeSet<_>>() == wanted_orgs
            }
            Err(_) => false,
        };
        if !same {
            return Err(Reissue::plain("the subject changed"));
        }
        Ok(())
    };
    load_or_issue(dir, ca, file_stem, check, || ca.issue_client(common_name, organizations, LEAF_VALIDITY))
}

/// Why the files on disk are not reused.
struct Reissue {
    reason: String,
    /// The files are damaged, not merely out of date: logged as a warning.
    damaged: bool,
}

impl Reissue {
    fn plain(reason: impl Into<String>) -> Reissue {
        Reissue { reason: reason.into(), damaged: false }
    }

    fn damaged(reason: impl Into<String>) -> Reissue {
        Reissue { reason: reason.into(), damaged: true }
    }
}

fn load_or_issue(
    dir: &Path,
    ca: &Ca,
    stem: &str,
    check: impl Fn(&LeafFacts) -> Result<(), Reissue>,
    issue: impl FnOnce() -> Result<Issued, PkiError>,
) -> Result<Issued, PkiError> {
    let cert_path = dir.join(format!("{stem}.crt"));
    match load_existing(dir, ca, stem, OffsetDateTime::now_utc(), check)? {
        Ok(issued) => {
            tracing::debug!(cert = %cert_path.display(), "reusing certificate");
            Ok(issued)
        }
        Err(Reissue { reason, damaged }) => {
            if damaged {
                tracing::warn!(cert = %cert_path.display(), %reason, "replacing damaged certificate");
            } else {
                tracing::info!(cert = %cert_path.display(), %reason, "issuing certificate");
            }
            let issued = issue()?;
            crate::files::create_private_dir(dir)?;
            issued.write(dir, stem)?;
            Ok(issued)
        }
    }
}

/// The pair on disk if it passes every check, or why not. I/O errors other
/// than a missing file are returned as errors: overwriting a file that
/// could not be read is unlikely to work and would hide the problem.
fn load_existing(
    dir: &Path,
    ca: &Ca,
    stem: &str,
    now: OffsetDateTime,
    check: impl Fn(&LeafFacts) -> Result<(), Reissue>,
) -> Result<Result<Issued, Reissue>, PkiError> {
    let cert_path = dir.join(format!("{stem}.crt"));
    let key_path = dir.join(format!("{stem}.key"));
    let Some(cert_pem) = read_optional(&cert_path, "read certificate", "certificate")? else {
        return Ok(Err(Reissue::plain("no certificate yet")));
    };
    let Some(key_pem) = read_optional(&key_path, "read private key", "private key")? else {
        return Ok(Err(Reissue::damaged(format!("{} is missing", key_path.display()))));
    };
    Ok(check_pair(ca, &cert_pem, &key_pem, now, check))
}

fn check_pair(
    ca: &Ca,
    cert_pem: &[u8],
    key_pem: &[u8],
    now: OffsetDateTime,
    check: impl Fn(&LeafFacts) -> Result<(), Reissue>,
) -> Result<Issued, Reissue> {
    let cert_der = CertificateDer::from_pem_slice(cert_pem)
        .map_err(|e| Reissue::damaged(format!("certificate: {}", pem_reason(&e, "CERTIFICATE"))))?;
    let cert = parse_certificate(&cert_der).map_err(|e| Reissue::damaged(format!("certificate: {e}")))?;
    ca.check_issued(&cert).map_err(|e| Reissue::plain(format!("the certificate was {e}")))?;
    let facts = leaf_facts(&cert).map_err(|e| Reissue::damaged(format!("certificate: {e}")))?;
    check(&facts)?;
    if facts.not_after - now < RENEW_BEFORE {
        return Err(Reissue::plain(format!("the certificate expires at {} (within 30 days)", facts.not_after)));
    }
    let key = key_from_pem(key_pem).map_err(|e| Reissue::damaged(format!("private key: {e}")))?;
    if key.public_key_raw() != facts.public_key.as_slice() {
        return Err(Reissue::damaged("the private key does not belong to the certificate"));
    }
    Ok(Issued::new(cert_der.into_owned(), &key))
}

/// A file stem must name a file in `dir`, not a path.
fn check_stem(stem: &str) -> Result<(), PkiError> {
    let ok = !stem.is_empty()
        && stem != "."
        && stem != ".."
        && !stem.contains(['/', '\\', '\0'])
        && !stem.chars().any(char::is_control);
    if ok { Ok(()) } else { Err(PkiError::invalid("file stem", stem, "must be a plain file name")) }
}

fn show_sans(sans: &BTreeSet<San>) -> String {
    let names: Vec<String> = sans
        .iter()
        .map(|s| match s {
            San::Dns(d) => d.clone(),
            San::Ip(ip) => ip.to_string(),
        })
        .collect();
    format!("[{}]", names.join(", "))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn accept_all(_: &LeafFacts) -> Result<(), Reissue> {
        Ok(())
    }

    #[test]
    fn a_certificate_near_expiry_is_reissued() {
        let ca = Ca::generate("reuse-ca").unwrap();
        let issued = ca.issue_client("admin", &[], Duration::from_secs(90 * 86400)).unwrap();
        let (cert, key) = (issued.cert_pem.as_bytes(), issued.key_pem.as_bytes());
        let now = OffsetDateTime::now_utc();
        assert!(check_pair(&ca, cert, key, now, accept_all).is_ok());
        let later = now + time::Duration::days(61);
        let why = check_pair(&ca, cert, key, later, accept_all).err().unwrap();
        assert!(why.reason.contains("within 30 days"), "{}", why.reason);
        assert!(!why.damaged);
    }

    #[test]
    fn a_foreign_key_is_damage() {
        let ca = Ca::generate("reuse-ca").unwrap();
        let a = ca.issue_client("a", &[], Duration::from_secs(90 * 86400)).unwrap();
        let b = ca.issue_client("a", &[], Duration::from_secs(90 * 86400)).unwrap();
        let now = OffsetDateTime::now_utc();
        let why = check_pair(&ca, a.cert_pem.as_bytes(), b.key_pem.as_bytes(), now, accept_all).err().unwrap();
        assert!(why.damaged);
        assert!(why.reason.contains("does not belong"), "{}", why.reason);
    }

    #[test]
    fn stems_must_be_file_names() {
        assert!(check_stem("apiserver").is_ok());
        assert!(check_stem("admin.client").is_ok());
        for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert!(check_stem(bad).is_err(), "{bad:?}");
        }
    }
}
