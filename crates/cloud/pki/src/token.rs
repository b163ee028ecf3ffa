//! Join tokens: what a new node presents to get its first certificate.
//!
//! A token is `{caHash}.{header}.{payload}.{signature}`, KubeEdge's format:
//! the lowercase hex SHA-256 of the CA certificate ([`Ca::cert_sha256_hex`]),
//! then a JSON Web Token signed with HMAC-SHA256 (`HS256`) whose key is the
//! CA private key's DER bytes. The header is exactly
//! `{"alg":"HS256","typ":"JWT"}`, the claims `{"exp":<unix seconds>,
//! "jti":"<id>"}`, each part base64url without padding. KubeEdge's claims
//! are `exp` alone; the edge never reads them, so a stock EdgeCore carries
//! these tokens as it carries KubeEdge's. `jsonwebtoken` encodes them and
//! checks signature and algorithm, with *ring* underneath (`jwt.rs`); the
//! claims are checked here against the `now` the caller gives.
//!
//! The node uses the hash to check the CA certificate it downloads
//! unauthenticated, and sends the JWT alone (`Authorization: Bearer
//! {header}.{payload}.{signature}`) when it asks for its certificate.
//!
//! The signature proves the cloud made the token; the id (`jti`,
//! [`new_token_id`]: six characters of `[a-z0-9]`, as a Kubernetes
//! bootstrap token's) names the record the cloud keeps of it, so that a
//! token can be listed and revoked before it expires. Keeping that record is
//! the caller's business (`edgehive-credentials`); this module only signs
//! and checks signatures.

use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::Ca;
use crate::jwt::{self, malformed};

/// How often a new token is made: every 12 hours (KubeEdge's
/// `tokenRefreshDuration`).
pub const TOKEN_REFRESH: Duration = Duration::from_secs(12 * 3600);

/// How long a token is valid: twice the refresh interval, 24 hours, so the
/// token handed out just before a refresh still has 12 hours to live.
pub const TOKEN_VALIDITY: Duration = Duration::from_secs(2 * 12 * 3600);

/// The latest `exp` written: 9999-12-31T23:59:59Z, the end of the range
/// `time` represents, so that an absurd validity still gives a token that
/// verifies.
const MAX_EXP: i64 = 253_402_300_799;

/// The claims of a token this module makes, in the order they are written.
#[derive(Serialize)]
struct JoinClaims<'a> {
    exp: i64,
    jti: &'a str,
}

/// The claims of a token being checked, read as JSON values so that a
/// refusal can say what is wrong with them.
#[derive(Deserialize)]
struct ReceivedClaims {
    exp: Option<Value>,
    jti: Option<Value>,
}

/// What a valid token says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TokenClaims {
    /// When the token stops being valid (its `exp` claim).
    pub expires_at: OffsetDateTime,
    /// The token's id (its `jti` claim); `None` for a token made without
    /// one (KubeEdge's, or edgehive's before tokens were recorded).
    pub id: Option<String>,
}

/// Length of a token id.
pub const TOKEN_ID_LEN: usize = 6;

/// A new random token id: six characters of `[a-z0-9]`, the shape of a
/// Kubernetes bootstrap token id.
pub fn new_token_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let rng = ring::rand::SystemRandom::new();
    let mut id = String::with_capacity(TOKEN_ID_LEN);
    while id.len() < TOKEN_ID_LEN {
        let mut byte = [0u8; 1];
        // The system's random source does not fail on Linux once booted;
        // should it, the id is still unique enough for a record name.
        let _ = ring::rand::SecureRandom::fill(&rng, &mut byte);
        // 252 = 7 × 36: dropping the rest keeps every character equally likely.
        if byte[0] < 252 {
            id.push(char::from(ALPHABET[usize::from(byte[0]) % ALPHABET.len()]));
        }
    }
    id
}

/// True for a string [`new_token_id`] could have made.
pub fn is_token_id(id: &str) -> bool {
    id.len() == TOKEN_ID_LEN && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Why a token (a join token or a service account token) was refused. The
/// messages can be shown to the node's operator as they are; none of them
/// reveals the key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a token of ours at all: wrong number of parts, bad base64, bad
    /// JSON, another algorithm than the one expected (HS256 for join tokens,
    /// ES256 for service account tokens; `none` included), a claim missing
    /// or of the wrong type, another issuer.
    #[error("malformed token: {0}")]
    Malformed(String),
    /// A well-formed token that names another CA: it was made by another
    /// cloud, or this cloud's CA has been replaced since.
    #[error("token is for another CA (its CA hash is {got}, this CA's is {expected})")]
    WrongCa {
        /// This CA's hash.
        expected: String,
        /// The hash in the token.
        got: String,
    },
    /// The signature does not verify with this CA's key: forged, altered,
    /// or signed by another CA's key.
    #[error("token signature does not verify with this CA's key")]
    BadSignature,
    /// The token was valid until `at`.
    #[error("token expired at {}", rfc3339(*at))]
    Expired {
        /// The token's `exp`.
        at: OffsetDateTime,
    },
    /// The token is not valid before `at`, later than now by more than the
    /// leeway allowed ([`crate::SA_NOT_BEFORE_LEEWAY`]).
    #[error("token is not valid before {}", rfc3339(*at))]
    NotYetValid {
        /// The token's `nbf`.
        at: OffsetDateTime,
    },
    /// A token whose audiences are none of those the verifier serves: a
    /// service account token made for another service, or a join token
    /// naming any audience (they name none).
    #[error("token is meant for another audience")]
    WrongAudience,
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_else(|_| at.unix_timestamp().to_string())
}

/// Makes a join token for `ca` with the id `id`, valid for `validity` from
/// `now`. The token is only as good as the record of `id` the cloud keeps.
///
/// ```
/// use edgehive_pki::{Ca, TOKEN_VALIDITY, issue_token, new_token_id, verify_token};
/// use time::OffsetDateTime;
///
/// let ca = Ca::generate("edgehive-ca")?;
/// let now = OffsetDateTime::now_utc();
/// let id = new_token_id();
/// let token = issue_token(&ca, &id, now, TOKEN_VALIDITY);
/// assert!(token.starts_with(&format!("{}.", ca.cert_sha256_hex())));
/// let claims = verify_token(&ca, &token, now).expect("a fresh token is valid");
/// assert!(claims.expires_at > now);
/// assert_eq!(claims.id, Some(id));
/// # Ok::<(), edgehive_pki::PkiError>(())
/// ```
pub fn issue_token(ca: &Ca, id: &str, now: OffsetDateTime, validity: Duration) -> String {
    issue_token_expiring(ca, id, expiry(now, validity))
}

/// Makes a join token for `ca` with the id `id` that expires at `expires`
/// (whole seconds).
pub fn issue_token_expiring(ca: &Ca, id: &str, expires: OffsetDateTime) -> String {
    let claims = JoinClaims { exp: expires.unix_timestamp().min(MAX_EXP), jti: id };
    // `{"alg":"HS256","typ":"JWT"}` as KubeEdge writes it (Go's JSON sorts
    // the keys): jsonwebtoken writes its own `typ` before `alg`, and extra
    // fields after them.
    let mut header = Header { typ: None, ..Header::new(Algorithm::HS256) };
    header.extras.insert("typ", "JWT");
    // HS256 with an HMAC key cannot fail (ring's HMAC is infallible), nor
    // can writing these claims as JSON.
    let jwt = jwt::encode(&header, &claims, &EncodingKey::from_secret(ca.key_der()))
        .expect("HS256 signing with an HMAC key does not fail");
    format!("{}.{jwt}", ca.cert_sha256_hex())
}

/// When a token made at `now` for `validity` expires (as [`issue_token`]
/// writes it: whole seconds, at most the end of year 9999).
pub fn expiry(now: OffsetDateTime, validity: Duration) -> OffsetDateTime {
    let validity = i64::try_from(validity.as_secs()).unwrap_or(i64::MAX);
    let exp = now.unix_timestamp().saturating_add(validity).min(MAX_EXP);
    OffsetDateTime::from_unix_timestamp(exp).unwrap_or(now)
}

/// Checks a whole join token (four parts) against `ca` at `now`.
///
/// The checks, in order: four parts; the first is this CA's hash
/// ([`TokenError::WrongCa`]); then [`verify_jwt`] on the other three.
pub fn verify_token(ca: &Ca, token: &str, now: OffsetDateTime) -> Result<TokenClaims, TokenError> {
    let parts = token.split('.').count();
    if parts != 4 {
        return Err(malformed(format!("expected 4 parts separated by '.', found {parts}")));
    }
    let (hash, jwt) = token.split_once('.').ok_or_else(|| malformed("no '.'"))?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return Err(malformed("the CA hash is not 64 lowercase hexadecimal digits"));
    }
    let expected = ca.cert_sha256_hex();
    if hash != expected {
        return Err(TokenError::WrongCa { expected, got: hash.to_owned() });
    }
    verify_jwt(ca, jwt, now)
}

/// Checks the JWT of a join token (three parts, without the CA hash: what a
/// node sends as `Authorization: Bearer ...`) against `ca` at `now`.
///
/// The checks, in order: three base64url parts; a header with `alg` HS256
/// (no other algorithm, `none` included) and `typ`, if any, `JWT`; the HMAC,
/// compared in constant time ([`TokenError::BadSignature`]); no `aud`; an
/// integer `exp`, and `now` before it ([`TokenError::Expired`], no leeway:
/// the cloud that made the token checks it, on the same clock); a string
/// `jti` or none. Nothing in the payload is read before its signature has
/// been checked.
pub fn verify_jwt(ca: &Ca, jwt: &str, now: OffsetDateTime) -> Result<TokenClaims, TokenError> {
    let mut validation = Validation::new(Algorithm::HS256);
    // `exp` is checked below, against `now` and with a reason for each way
    // it can be wrong; jsonwebtoken would read the system clock.
    validation.required_spec_claims.clear();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    // No audience is expected: a token that names one is not a join token.
    validation.validate_aud = true;
    let claims: ReceivedClaims = jwt::decode(jwt, &DecodingKey::from_secret(ca.key_der()), &validation)?;
    let exp = match claims.exp {
        Some(Value::Number(n)) => n.as_i64().ok_or_else(|| malformed(format!("exp {n} is not an integer")))?,
        Some(other) => return Err(malformed(format!("exp {other} is not a number"))),
        None => return Err(malformed("the claims have no exp")),
    };
    let expires_at =
        OffsetDateTime::from_unix_timestamp(exp).map_err(|_| malformed(format!("exp {exp} is out of range")))?;
    // RFC 7519: not accepted on or after its expiration time.
    if now >= expires_at {
        return Err(TokenError::Expired { at: expires_at });
    }
    let id = match claims.jti {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id),
        Some(other) => return Err(malformed(format!("jti {other} is not a string"))),
    };
    Ok(TokenClaims { expires_at, id })
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::hmac;

    use super::*;

    /// The header of every join token, before base64url.
    const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

    /// `{header}.{payload}.{signature}` for any JSON texts (or none), signed
    /// HMAC-SHA256 with `key`: by hand, as jsonwebtoken writes only good
    /// tokens.
    fn sign_jwt_with(key: &[u8], header: &str, payload: &str) -> String {
        let signed = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
        let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    fn sign_jwt(ca: &Ca, header: &str, payload: &str) -> String {
        sign_jwt_with(ca.key_der(), header, payload)
    }

    fn t0() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_750_000_000).unwrap()
    }

    fn ca() -> Ca {
        Ca::generate("token-test-ca").unwrap()
    }

    /// A token signed with `ca`'s key over arbitrary header and claims.
    fn crafted(ca: &Ca, header: &str, claims: &str) -> String {
        format!("{}.{}", ca.cert_sha256_hex(), sign_jwt(ca, header, claims))
    }

    /// `token` with the character at `index` replaced by another base64url
    /// character, so the result still decodes.
    fn flip(token: &str, index: usize) -> String {
        let mut bytes = token.as_bytes().to_vec();
        bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    }

    fn malformed_reason(result: Result<TokenClaims, TokenError>) -> String {
        match result {
            Err(TokenError::Malformed(reason)) => reason,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn hash_is_lowercase_hex_sha256_of_the_der() {
        let ca = ca();
        let digest = ring::digest::digest(&ring::digest::SHA256, ca.cert_der());
        let expected: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(ca.cert_sha256_hex(), expected);
    }

    #[test]
    fn round_trip() {
        let ca = ca();
        let token = issue_token(&ca, "abc123", t0(), TOKEN_VALIDITY);
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[0], ca.cert_sha256_hex());
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[1]).unwrap(), br#"{"alg":"HS256","typ":"JWT"}"#);
        let exp = t0().unix_timestamp() + 24 * 3600;
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap(), format!(r#"{{"exp":{exp},"jti":"abc123"}}"#).as_bytes());

        let claims = verify_token(&ca, &token, t0()).unwrap();
        assert_eq!(claims.expires_at, t0() + time::Duration::hours(24));
        assert_eq!(claims.id.as_deref(), Some("abc123"));
        let jwt = token.split_once('.').unwrap().1;
        assert_eq!(verify_jwt(&ca, jwt, t0()).unwrap(), claims);
        // The same CA loaded again (same key) accepts it too: nothing is kept.
        assert_eq!(verify_token(&ca, &token, t0() + time::Duration::hours(23)).unwrap(), claims);
    }

    #[test]
    fn expired_on_and_after_exp() {
        let ca = ca();
        let token = issue_token(&ca, "abc123", t0(), Duration::from_secs(3600));
        let exp = t0() + time::Duration::hours(1);
        assert!(verify_token(&ca, &token, exp - time::Duration::seconds(1)).is_ok());
        for now in [exp, exp + time::Duration::days(3)] {
            let err = verify_token(&ca, &token, now).unwrap_err();
            assert_eq!(err, TokenError::Expired { at: exp });
            assert_eq!(err.to_string(), "token expired at 2025-06-15T16:06:40Z");
        }
    }

    #[test]
    fn altered_signature_or_payload_is_refused() {
        let ca = ca();
        let token = issue_token(&ca, "abc123", t0(), TOKEN_VALIDITY);
        let signature_at = token.rfind('.').unwrap() + 1;
        let payload_at = token[..signature_at - 1].rfind('.').unwrap() + 1;
        for index in [signature_at, payload_at] {
            let forged = flip(&token, index);
            assert_ne!(forged, token);
            assert_eq!(verify_token(&ca, &forged, t0()), Err(TokenError::BadSignature), "{forged}");
        }
        // A later exp with the old signature.
        let [hash, header, _, signature] = token.split('.').collect::<Vec<_>>()[..] else { unreachable!() };
        let later = URL_SAFE_NO_PAD.encode(format!(r#"{{"exp":{}}}"#, t0().unix_timestamp() + 365 * 86400));
        let extended = format!("{hash}.{header}.{later}.{signature}");
        assert_eq!(verify_token(&ca, &extended, t0()), Err(TokenError::BadSignature));
    }

    #[test]
    fn token_of_another_ca_is_refused() {
        let (ours, theirs) = (ca(), ca());
        let token = issue_token(&theirs, "abc123", t0(), TOKEN_VALIDITY);
        assert_eq!(
            verify_token(&ours, &token, t0()),
            Err(TokenError::WrongCa { expected: ours.cert_sha256_hex(), got: theirs.cert_sha256_hex() })
        );
        // Their JWT under our hash: the key gives it away.
        let jwt = token.split_once('.').unwrap().1;
        let relabelled = format!("{}.{jwt}", ours.cert_sha256_hex());
        assert_eq!(verify_token(&ours, &relabelled, t0()), Err(TokenError::BadSignature));
        assert_eq!(verify_jwt(&ours, jwt, t0()), Err(TokenError::BadSignature));
    }

    #[test]
    fn malformed_tokens_are_refused() {
        let ca = ca();
        let good = issue_token(&ca, "abc123", t0(), TOKEN_VALIDITY);
        let hash = ca.cert_sha256_hex();
        let jwt = good.split_once('.').unwrap().1;
        let exp = t0().unix_timestamp() + 3600;
        let claims = format!(r#"{{"exp":{exp}}}"#);

        assert!(malformed_reason(verify_token(&ca, jwt, t0())).contains("found 3"));
        assert!(malformed_reason(verify_token(&ca, &format!("{good}.x"), t0())).contains("found 5"));
        assert!(malformed_reason(verify_token(&ca, "", t0())).contains("found 1"));
        assert!(malformed_reason(verify_token(&ca, "...", t0())).contains("hash"));
        assert!(malformed_reason(verify_token(&ca, &good.to_uppercase(), t0())).contains("hash"));
        let not_base64 = format!("{hash}.!!!.{}", jwt.split_once('.').unwrap().1);
        assert!(malformed_reason(verify_token(&ca, &not_base64, t0())).contains("header is not base64url"));
        let padded = format!("{good}=");
        assert!(malformed_reason(verify_token(&ca, &padded, t0())).contains("signature is not base64url"));

        // alg "none", with an empty signature as such tokens carry, and with ours.
        let none_header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(&claims);
        assert!(
            malformed_reason(verify_token(&ca, &format!("{hash}.{none_header}.{payload}."), t0())).contains("none")
        );
        let none = crafted(&ca, r#"{"alg":"none","typ":"JWT"}"#, &claims);
        assert!(malformed_reason(verify_token(&ca, &none, t0())).contains("\"none\" is not HS256"));
        let rs256 = crafted(&ca, r#"{"alg":"RS256","typ":"JWT"}"#, &claims);
        assert!(malformed_reason(verify_token(&ca, &rs256, t0())).contains("\"RS256\" is not HS256"));
        let no_alg = crafted(&ca, r#"{"typ":"JWT"}"#, &claims);
        assert!(malformed_reason(verify_token(&ca, &no_alg, t0())).contains("no alg"));
        let not_json = crafted(&ca, HEADER, "exp=1");
        assert!(malformed_reason(verify_token(&ca, &not_json, t0())).contains("not JSON"));

        let no_exp = crafted(&ca, HEADER, r#"{"nbf":1}"#);
        assert!(malformed_reason(verify_token(&ca, &no_exp, t0())).contains("no exp"));
        let text_exp = crafted(&ca, HEADER, &format!(r#"{{"exp":"{exp}"}}"#));
        assert!(malformed_reason(verify_token(&ca, &text_exp, t0())).contains("not a number"));
        let float_exp = crafted(&ca, HEADER, &format!(r#"{{"exp":{exp}.5}}"#));
        assert!(malformed_reason(verify_token(&ca, &float_exp, t0())).contains("not an integer"));
        let far_exp = crafted(&ca, HEADER, r#"{"exp":9223372036854775807}"#);
        assert!(malformed_reason(verify_token(&ca, &far_exp, t0())).contains("out of range"));

        // The same checks through verify_jwt, which takes three parts only.
        assert!(malformed_reason(verify_jwt(&ca, &good, t0())).contains("found 4"));
        assert!(verify_jwt(&ca, jwt, t0()).is_ok());
    }

    #[test]
    fn absurd_validity_still_verifies() {
        let ca = ca();
        let token = issue_token(&ca, "abc123", t0(), Duration::MAX);
        let claims = verify_token(&ca, &token, t0()).unwrap();
        assert_eq!(claims.expires_at.year(), 9999);
    }

    #[test]
    fn ids_have_the_bootstrap_token_shape_and_differ() {
        let ids: std::collections::HashSet<String> = (0..200).map(|_| new_token_id()).collect();
        assert_eq!(ids.len(), 200);
        assert!(ids.iter().all(|id| is_token_id(id)), "{ids:?}");
        assert!(!is_token_id("ABC123") && !is_token_id("abc12") && !is_token_id("abc-12"));
    }

    #[test]
    fn other_algorithms_types_and_audiences_are_refused_even_when_keyed_with_the_ca_key() {
        let ca = ca();
        let claims = format!(r#"{{"exp":{}}}"#, t0().unix_timestamp() + 3600);
        assert!(verify_token(&ca, &crafted(&ca, HEADER, &claims), t0()).is_ok());
        for alg in ["HS384", "HS512", "ES256", "PS256", "EdDSA"] {
            let token = crafted(&ca, &format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#), &claims);
            let reason = malformed_reason(verify_token(&ca, &token, t0()));
            assert!(reason.contains(&format!(r#""{alg}" is not HS256"#)), "{reason}");
        }
        let jwe = crafted(&ca, r#"{"alg":"HS256","typ":"JWE"}"#, &claims);
        assert!(malformed_reason(verify_token(&ca, &jwe, t0())).contains(r#""JWE" is not JWT"#));
        let no_typ = crafted(&ca, r#"{"alg":"HS256"}"#, &claims);
        assert!(verify_token(&ca, &no_typ, t0()).is_ok(), "typ is optional (RFC 7519)");
        let with_aud = crafted(&ca, HEADER, &format!(r#"{{"exp":{},"aud":["x"]}}"#, t0().unix_timestamp() + 3600));
        assert_eq!(verify_token(&ca, &with_aud, t0()), Err(TokenError::WrongAudience));
        // HS256 keyed with the CA certificate (public) instead of its key.
        let public = format!("{}.{}", ca.cert_sha256_hex(), sign_jwt_with(ca.cert_der(), HEADER, &claims));
        assert_eq!(verify_token(&ca, &public, t0()), Err(TokenError::BadSignature));
    }

    #[test]
    fn a_token_without_an_id_verifies_with_none_and_a_bad_id_is_malformed() {
        let ca = ca();
        let exp = t0().unix_timestamp() + 3600;
        let plain = crafted(&ca, HEADER, &format!(r#"{{"exp":{exp}}}"#));
        assert_eq!(verify_token(&ca, &plain, t0()).unwrap().id, None);
        let numeric = crafted(&ca, HEADER, &format!(r#"{{"exp":{exp},"jti":7}}"#));
        assert!(malformed_reason(verify_token(&ca, &numeric, t0())).contains("jti 7"));
    }
}
