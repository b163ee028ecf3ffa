//! Just enough DER to write a subject with several `O` attributes.
//!
//! rcgen's `DistinguishedName` holds one value per attribute type, but a
//! Kubernetes client certificate carries one `O` per group. So rcgen builds
//! the certificate (serial, validity, key, extensions) and [`resign_with_names`]
//! then swaps in the issuer and subject names encoded here and signs the
//! result again with the CA key. Putting the CA certificate's own subject
//! bytes in as the issuer also guarantees the byte-for-byte issuer/subject
//! match that chain building relies on, whatever string types the CA uses.
//!
//! Only definite-length, low-tag-number DER is handled: that is all rcgen
//! writes. The input is always rcgen's output, never data from outside.

use rcgen::SigningKey;

use crate::PkiError;

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const UTF8_STRING: u8 = 0x0C;
const BIT_STRING: u8 = 0x03;
const VERSION_TAG: u8 = 0xA0;

/// id-at-commonName, 2.5.4.3.
const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// id-at-organizationName, 2.5.4.10.
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0A];

/// Appends a tag-length-value to `out`.
fn write_tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    let len = content.len();
    if len < 0x80 {
        // Fits in the short form.
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
}

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    write_tlv(&mut out, tag, content);
    out
}

/// The tag, header length and total length of the TLV at the start of
/// `input`, or `None` if it is not one.
fn read_tlv(input: &[u8]) -> Option<(u8, usize, usize)> {
    let tag = *input.first()?;
    if tag & 0x1F == 0x1F {
        return None; // high tag numbers: never written by rcgen
    }
    let first = *input.get(1)?;
    let (header, len) = if first < 0x80 {
        (2, usize::from(first))
    } else {
        let n = usize::from(first & 0x7F);
        if n == 0 || n > 4 {
            return None; // indefinite length or absurdly long
        }
        let len_bytes = input.get(2..2 + n)?;
        (2 + n, len_bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)))
    };
    let total = header.checked_add(len)?;
    (total <= input.len()).then_some((tag, header, total))
}

/// A subject (or issuer) `Name`: one RDN per organization, in the order
/// given, then the common name, as Go's `pkix.Name` orders them. Values are
/// UTF8String.
pub(crate) fn encode_name(common_name: &str, organizations: &[&str]) -> Vec<u8> {
    let mut rdns = Vec::new();
    for org in organizations {
        write_rdn(&mut rdns, OID_ORGANIZATION, org);
    }
    write_rdn(&mut rdns, OID_COMMON_NAME, common_name);
    tlv(SEQUENCE, &rdns)
}

fn write_rdn(out: &mut Vec<u8>, oid: &[u8], value: &str) {
    let mut atv = tlv(OID, oid);
    write_tlv(&mut atv, UTF8_STRING, value.as_bytes());
    write_tlv(out, SET, &tlv(SEQUENCE, &atv));
}

/// Re-signs the certificate `cert_der` with `signer` after replacing its
/// issuer and subject names with `issuer` and `subject` (complete DER
/// `Name`s). Everything else stays as rcgen wrote it.
pub(crate) fn resign_with_names(
    cert_der: &[u8],
    issuer: &[u8],
    subject: &[u8],
    signer: &impl SigningKey,
) -> Result<Vec<u8>, PkiError> {
    let malformed = || PkiError::Generate("re-encode certificate names: unexpected certificate layout".into());

    // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
    let (tag, header, total) = read_tlv(cert_der).ok_or_else(malformed)?;
    if tag != SEQUENCE || total != cert_der.len() {
        return Err(malformed());
    }
    let body = &cert_der[header..];
    let (tag, tbs_header, tbs_total) = read_tlv(body).ok_or_else(malformed)?;
    if tag != SEQUENCE {
        return Err(malformed());
    }
    let tbs = &body[tbs_header..tbs_total];
    let after_tbs = &body[tbs_total..];
    let (_, _, alg_total) = read_tlv(after_tbs).ok_or_else(malformed)?;
    let signature_algorithm = &after_tbs[..alg_total];

    // TBSCertificate ::= SEQUENCE { [0] version, serialNumber, signature,
    //     issuer, validity, subject, subjectPublicKeyInfo, ... }
    let mut fields = Vec::with_capacity(7);
    let mut rest = tbs;
    while fields.len() < 6 {
        let (tag, _, total) = read_tlv(rest).ok_or_else(malformed)?;
        if fields.is_empty() && tag != VERSION_TAG {
            return Err(malformed()); // rcgen always writes v3
        }
        fields.push(&rest[..total]);
        rest = &rest[total..];
    }
    let mut new_tbs_body = Vec::with_capacity(tbs.len() + issuer.len() + subject.len());
    new_tbs_body.extend_from_slice(fields[0]); // version
    new_tbs_body.extend_from_slice(fields[1]); // serial
    new_tbs_body.extend_from_slice(fields[2]); // signature algorithm
    new_tbs_body.extend_from_slice(issuer);
    new_tbs_body.extend_from_slice(fields[4]); // validity
    new_tbs_body.extend_from_slice(subject);
    new_tbs_body.extend_from_slice(rest); // key, extensions
    let new_tbs = tlv(SEQUENCE, &new_tbs_body);

    let signature = signer.sign(&new_tbs).map_err(|e| PkiError::generate("sign certificate", e))?;
    let mut bits = Vec::with_capacity(signature.len() + 1);
    bits.push(0); // no unused bits
    bits.extend_from_slice(&signature);

    let mut cert_body = new_tbs;
    cert_body.extend_from_slice(signature_algorithm);
    write_tlv(&mut cert_body, BIT_STRING, &bits);
    Ok(tlv(SEQUENCE, &cert_body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_use_the_short_and_long_forms() {
        assert_eq!(tlv(0x04, &[1, 2]), vec![0x04, 2, 1, 2]);
        let long = tlv(0x04, &[0; 200]);
        assert_eq!(&long[..3], &[0x04, 0x81, 200]);
        let longer = tlv(0x04, &[0; 300]);
        assert_eq!(&longer[..4], &[0x04, 0x82, 0x01, 0x2C]);
        assert_eq!(read_tlv(&longer), Some((0x04, 4, 304)));
        assert_eq!(read_tlv(&long), Some((0x04, 3, 203)));
    }

    #[test]
    fn read_tlv_refuses_what_does_not_fit() {
        assert_eq!(read_tlv(&[]), None);
        assert_eq!(read_tlv(&[0x30]), None);
        assert_eq!(read_tlv(&[0x30, 3, 0, 0]), None);
        assert_eq!(read_tlv(&[0x30, 0x80, 0, 0]), None);
        assert_eq!(read_tlv(&[0x1F, 0, 0]), None);
    }

    #[test]
    fn names_parse_back_with_x509_parser() {
        use x509_parser::prelude::FromDer as _;
        let der = encode_name("admin", &["system:masters", "ops"]);
        let (rest, name) = x509_parser::x509::X509Name::from_der(&der).unwrap();
        assert!(rest.is_empty());
        let cn: Vec<&str> = name.iter_common_name().map(|a| a.as_str().unwrap()).collect();
        let orgs: Vec<&str> = name.iter_organization().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(cn, ["admin"]);
        assert_eq!(orgs, ["system:masters", "ops"]);
    }
}
