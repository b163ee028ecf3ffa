//! What join tokens and service account tokens share: `jsonwebtoken` encodes
//! and checks both, with *ring* as its crypto.
//!
//! `jsonwebtoken` 10 and later ship two crypto back ends, aws-lc-rs and
//! RustCrypto, and take any other through their `CryptoProvider`. Either
//! would be a second crypto stack beside *ring*, which rustls and rcgen
//! already use; so [`RING`] is a provider for the two algorithms edgehive
//! signs with, HS256 (join tokens) and ES256 (service account tokens), and
//! refuses every other. (9.x used *ring* itself, but it lets an `exp` or
//! `nbf` of the wrong JSON type pass unchecked, GHSA-h395-gr6q-cpjc, fixed
//! only from 10.3.)
//!
//! Keys follow the built-in providers' conventions: HMAC keys are the secret
//! bytes, ECDSA signing keys PKCS#8 DER, ECDSA verifying keys the
//! uncompressed public point; so should another crate install another
//! provider first, tokens still sign and verify alike.
//!
//! Time claims are not left to `jsonwebtoken`: it reads the system clock,
//! and the callers here are handed `now`. Each verifier turns its time
//! checks off in [`jsonwebtoken::Validation`] and makes them itself.

use std::sync::Once;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{Error, ErrorKind};
use jsonwebtoken::signature::{self, Signer, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, EncodingKey, Header, Validation};
use ring::hmac;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, UnparsedPublicKey};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::TokenError;

/// `jsonwebtoken`'s crypto: HS256 and ES256 with *ring*. The JWK helpers
/// are not used here and answer "unsupported".
static RING: CryptoProvider = CryptoProvider {
    signer_factory: new_signer,
    verifier_factory: new_verifier,
    key_utils: KeyUtils {
        rsa_pub_components_from_private_key: |_| Err(unsupported()),
        rsa_pub_components_from_public_key: |_| Err(unsupported()),
        ec_pub_components_from_private_key: |_, _| Err(unsupported()),
        ed_pub_components_from_private_key: |_, _| Err(unsupported()),
        compute_digest: |_, _| Err(unsupported()),
    },
};

fn unsupported() -> Error {
    ErrorKind::UnsupportedAlgorithm.into()
}

/// Makes [`RING`] `jsonwebtoken`'s provider for this process, once, before
/// the first token is signed or checked.
fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        if RING.install_default().is_err() {
            tracing::debug!("another jsonwebtoken crypto provider was installed first; tokens use it");
        }
    });
}

fn new_signer(alg: &Algorithm, key: &EncodingKey) -> Result<Box<dyn JwtSigner>, Error> {
    match alg {
        Algorithm::HS256 if key.family() == AlgorithmFamily::Hmac => Ok(Box::new(Hs256(hmac_key(key.as_bytes())))),
        Algorithm::ES256 if key.family() == AlgorithmFamily::Ec => {
            let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, key.as_bytes(), &SystemRandom::new())
                .map_err(|_| ErrorKind::InvalidEcdsaKey)?;
            Ok(Box::new(Es256Signer(pair)))
        }
        Algorithm::HS256 | Algorithm::ES256 => Err(ErrorKind::InvalidKeyFormat.into()),
        _ => Err(unsupported()),
    }
}

fn new_verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>, Error> {
    match alg {
        Algorithm::HS256 if key.family() == AlgorithmFamily::Hmac => {
            Ok(Box::new(Hs256(hmac_key(key.try_get_as_bytes()?))))
        }
        Algorithm::ES256 if key.family() == AlgorithmFamily::Ec => {
            Ok(Box::new(Es256Verifier(key.try_get_as_bytes()?.to_vec())))
        }
        Algorithm::HS256 | Algorithm::ES256 => Err(ErrorKind::InvalidKeyFormat.into()),
        _ => Err(unsupported()),
    }
}

fn hmac_key(secret: &[u8]) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, secret)
}

/// HMAC-SHA256, signing and verifying (in constant time).
struct Hs256(hmac::Key);

impl Signer<Vec<u8>> for Hs256 {
    fn try_sign(&self, msg: &[u8]) -> Result<Vec<u8>, signature::Error> {
        Ok(hmac::sign(&self.0, msg).as_ref().to_vec())
    }
}

impl Verifier<Vec<u8>> for Hs256 {
    fn verify(&self, msg: &[u8], signature: &Vec<u8>) -> Result<(), signature::Error> {
        hmac::verify(&self.0, msg, signature).map_err(|_| signature::Error::new())
    }
}

impl JwtSigner for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

impl JwtVerifier for Hs256 {
    fn algorithm(&self) -> Algorithm {
        Algorithm::HS256
    }
}

/// ECDSA P-256 with SHA-256, the signature as r ‖ s (JWS's form).
struct Es256Signer(EcdsaKeyPair);

impl Signer<Vec<u8>> for Es256Signer {
    fn try_sign(&self, msg: &[u8]) -> Result<Vec<u8>, signature::Error> {
        let sig = self.0.sign(&SystemRandom::new(), msg).map_err(|_| signature::Error::new())?;
        Ok(sig.as_ref().to_vec())
    }
}

impl JwtSigner for Es256Signer {
    fn algorithm(&self) -> Algorithm {
        Algorithm::ES256
    }
}

/// The uncompressed public point.
struct Es256Verifier(Vec<u8>);

impl Verifier<Vec<u8>> for Es256Verifier {
    fn verify(&self, msg: &[u8], signature: &Vec<u8>) -> Result<(), signature::Error> {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &self.0)
            .verify(msg, signature)
            .map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for Es256Verifier {
    fn algorithm(&self) -> Algorithm {
        Algorithm::ES256
    }
}

/// `{header}.{claims}.{signature}`, signed with `key` by `header.alg`.
pub(crate) fn encode<T: Serialize>(header: &Header, claims: &T, key: &EncodingKey) -> Result<String, Error> {
    install();
    jsonwebtoken::encode(header, claims, key)
}

/// The claims of `jwt` once its shape, its header, its signature and what
/// `validation` asks have been checked; nothing of the claims is read before
/// the signature verifies.
///
/// The shape and the header are checked here first, so that a refusal says
/// why: three parts; a header naming `alg` (the only algorithm `validation`
/// allows) and, if it has a `typ`, `JWT`.
pub(crate) fn decode<T: DeserializeOwned>(
    jwt: &str,
    key: &DecodingKey,
    validation: &Validation,
) -> Result<T, TokenError> {
    let parts = jwt.split('.').count();
    if parts != 3 {
        return Err(malformed(format!("expected a JWT of 3 parts separated by '.', found {parts}")));
    }
    let [alg] = validation.algorithms[..] else {
        return Err(malformed("exactly one algorithm is accepted"));
    };
    let header = jsonwebtoken::decode_header(jwt).map_err(|e| header_refused(jwt, alg, &e))?;
    if header.alg != alg {
        return Err(malformed(format!("algorithm \"{:?}\" is not {alg:?}", header.alg)));
    }
    if let Some(typ) = header.typ.as_deref()
        && !typ.eq_ignore_ascii_case("JWT")
    {
        return Err(malformed(format!("type {typ:?} is not JWT")));
    }
    install();
    jsonwebtoken::decode::<T>(jwt, key, validation).map(|data| data.claims).map_err(refused)
}

pub(crate) fn malformed(reason: impl Into<String>) -> TokenError {
    TokenError::Malformed(reason.into())
}

/// Why `jsonwebtoken` could not read the header of `jwt`. Its `Algorithm`
/// has no `none` nor any name it does not know, so for a JSON header the
/// `alg` is read again here to name it.
fn header_refused(jwt: &str, expected: Algorithm, e: &Error) -> TokenError {
    match e.kind() {
        ErrorKind::Base64(e) => malformed(format!("the header is not base64url: {e}")),
        ErrorKind::Json(e) => {
            let part = jwt.split('.').next().unwrap_or_default();
            let header: Option<Value> = URL_SAFE_NO_PAD.decode(part).ok().and_then(|h| serde_json::from_slice(&h).ok());
            let expected = format!("{expected:?}");
            match header.as_ref().map(|h| h.get("alg")) {
                None => malformed(format!("the header is not JSON: {e}")),
                Some(None) => malformed("the header has no alg"),
                Some(Some(Value::String(alg))) if *alg != expected => {
                    malformed(format!("algorithm {alg:?} is not {expected}"))
                }
                Some(Some(_)) => malformed(format!("the header is not a JWT header: {e}")),
            }
        }
        _ => malformed(format!("the header is refused: {e}")),
    }
}

/// A [`TokenError`] for what `jsonwebtoken::decode` refused (the header has
/// been checked already).
fn refused(e: Error) -> TokenError {
    match e.into_kind() {
        ErrorKind::InvalidSignature => TokenError::BadSignature,
        ErrorKind::InvalidAudience => TokenError::WrongAudience,
        ErrorKind::InvalidIssuer => malformed("the issuer is another"),
        ErrorKind::InvalidSubject => malformed("the subject is another"),
        // Absent, or of another JSON type (a string `nbf`, say).
        ErrorKind::MissingRequiredClaim(claim) => malformed(format!("the claims have no valid {claim}")),
        ErrorKind::InvalidClaimFormat(claim) => malformed(format!("the claim {claim} has the wrong type")),
        // The claims are decoded only after the signature verified: short of
        // a bad payload signed with our key, it is the signature.
        ErrorKind::Base64(e) => malformed(format!("the signature is not base64url: {e}")),
        ErrorKind::Json(e) => malformed(format!("the claims are not JSON of the expected shape: {e}")),
        ErrorKind::Utf8(e) => malformed(format!("the claims are not UTF-8: {e}")),
        ErrorKind::InvalidKeyFormat | ErrorKind::InvalidEcdsaKey => malformed("the key does not fit the algorithm"),
        other => malformed(Error::from(other).to_string()),
    }
}
