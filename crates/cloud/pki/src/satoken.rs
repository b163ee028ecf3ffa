//! Service account tokens: what an edge asks for when a pod needs its
//! projected token (KubeEdge's `serviceaccounttoken` query; the Kubernetes
//! TokenRequest API).
//!
//! A token is a JSON Web Token signed with ECDSA P-256 (`ES256`) by a key
//! kept next to the CA (`sa.key`, PKCS#8, mode 0600), with the claims a
//! Kubernetes API server writes: `iss`, `sub`
//! (`system:serviceaccount:{namespace}:{name}`), `aud`, `exp`, `iat`, `nbf`
//! and `kubernetes.io` (namespace, service account, and the pod and node the
//! token is bound to). The API server accepts these tokens as bearer
//! credentials ([`ServiceAccountTokens::verify`]) when they are meant for
//! it ([`SA_API_AUDIENCES`]) and, for a token bound to a pod, while that pod
//! exists with the uid the token names ([`ServiceAccountIdentity::pod`]:
//! the caller checks, this module keeps no objects). `jsonwebtoken` encodes
//! and checks them, with *ring* underneath (`jwt.rs`).

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject as _;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::files::{PRIVATE_MODE, create_private_dir, pem_encode, read_optional, write_atomic};
use crate::jwt::{self, malformed};
use crate::{PkiError, TokenError};

/// The signing key's file name in the CA directory.
pub const SA_KEY_FILE: &str = "sa.key";
/// The `iss` of every token (Kubernetes' default issuer).
pub const SA_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The audiences the API server accepts, and those of a token requested
/// without any: the issuer, as Kubernetes' `--api-audiences` defaults to.
pub const SA_API_AUDIENCES: &[&str] = &[SA_ISSUER];
/// Shortest validity a request may ask for (Kubernetes: 10 minutes).
pub const SA_MIN_VALIDITY: Duration = Duration::from_secs(600);
/// Longest validity handed out (Kubernetes caps at 48 h by default).
pub const SA_MAX_VALIDITY: Duration = Duration::from_secs(48 * 3600);
/// How far in the future a token's `nbf` may be and the token still be
/// accepted: 60 s, Kubernetes' leeway for clock skew. `exp` has none: the
/// token is refused from `exp` on (Kubernetes allows 60 s there too; here
/// the one cloud that signs also verifies, on the same clock).
pub const SA_NOT_BEFORE_LEEWAY: Duration = Duration::from_secs(60);

/// What a token is issued for.
#[derive(Debug, Clone, Default)]
pub struct TokenFor<'a> {
    /// The service account's namespace.
    pub namespace: &'a str,
    /// The service account's name.
    pub name: &'a str,
    /// The service account's uid.
    pub uid: &'a str,
    /// The pod the token is bound to: (name, uid).
    pub pod: Option<(&'a str, &'a str)>,
    /// The node the pod runs on.
    pub node: Option<&'a str>,
    /// Audiences; empty means [`SA_API_AUDIENCES`].
    pub audiences: &'a [String],
    /// How long it is valid (clamped to 10 min – 48 h).
    pub validity: Duration,
}

/// Who a verified token names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceAccountIdentity {
    /// Namespace of the service account.
    pub namespace: String,
    /// Name of the service account.
    pub name: String,
    /// When the token expires.
    pub expires_at: OffsetDateTime,
    /// The pod the token is bound to, in the service account's namespace.
    /// Kubernetes' bound token semantics: such a token is valid only while
    /// that pod exists with this uid, which the caller checks.
    pub pod: Option<BoundPod>,
}

/// The pod a token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPod {
    /// The pod's name.
    pub name: String,
    /// The pod's uid when the token was made.
    pub uid: String,
}

impl ServiceAccountIdentity {
    /// The Kubernetes user name: `system:serviceaccount:{namespace}:{name}`.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The Kubernetes groups of a service account.
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".into(),
        ]
    }
}

/// A token's claims, fields in the order Kubernetes (Go's JSON, sorted
/// keys) writes them.
#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    /// Written always; not read back: jsonwebtoken has checked it against
    /// the audiences the verifier serves.
    #[serde(skip_deserializing)]
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    iss: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubernetesClaims,
    nbf: i64,
    sub: String,
}

/// The private claims under `kubernetes.io`.
#[derive(Debug, Serialize, Deserialize)]
struct KubernetesClaims {
    namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    node: Option<NodeRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<ObjectRef>,
    serviceaccount: ObjectRef,
}

#[derive(Debug, Serialize, Deserialize)]
struct ObjectRef {
    name: String,
    uid: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct NodeRef {
    name: String,
}

/// Issues and verifies service account tokens.
pub struct ServiceAccountTokens {
    /// The private key, PKCS#8 DER.
    signing: EncodingKey,
    /// The public point.
    verifying: DecodingKey,
    kid: String,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens").field("kid", &self.kid).finish_non_exhaustive()
    }
}

/// A unix time as a date, or why it cannot be one.
fn date(claim: &str, unix: i64) -> Result<OffsetDateTime, TokenError> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(|_| malformed(format!("{claim} {unix} is out of range")))
}

impl ServiceAccountTokens {
    fn from_pkcs8(der: &[u8]) -> Result<ServiceAccountTokens, String> {
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &SystemRandom::new())
            .map_err(|e| format!("not a P-256 PKCS#8 key: {e}"))?;
        let public = key.public_key().as_ref();
        let digest = ring::digest::digest(&ring::digest::SHA256, public);
        let kid = URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16]);
        Ok(ServiceAccountTokens {
            signing: EncodingKey::from_ec_der(der),
            verifying: DecodingKey::from_ec_der(public),
            kid,
        })
    }

    /// A new key, kept nowhere (tests).
    pub fn generate() -> Result<ServiceAccountTokens, PkiError> {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| PkiError::generate("service account key", e))?;
        ServiceAccountTokens::from_pkcs8(der.as_ref()).map_err(|e| PkiError::generate("service account key", e))
    }

    /// Loads `dir/sa.key`, or creates it (mode 0600) at first start.
    pub fn load_or_create(dir: &Path) -> Result<ServiceAccountTokens, PkiError> {
        let path = dir.join(SA_KEY_FILE);
        if let Some(pem) = read_optional(&path, "read service account key", "service account key")? {
            let der = PrivatePkcs8KeyDer::from_pem_slice(&pem)
                .map_err(|e| PkiError::parse("service account key", &path, crate::ca::pem_reason(&e, "PRIVATE KEY")))?;
            return ServiceAccountTokens::from_pkcs8(der.secret_pkcs8_der())
                .map_err(|e| PkiError::parse("service account key", &path, e));
        }
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| PkiError::generate("service account key", e))?;
        create_private_dir(dir)?;
        write_atomic(
            &path,
            pem_encode("PRIVATE KEY", der.as_ref()).as_bytes(),
            PRIVATE_MODE,
            "write service account key",
        )?;
        tracing::info!(path = %path.display(), "created the service account token key");
        ServiceAccountTokens::from_pkcs8(der.as_ref()).map_err(|e| PkiError::parse("service account key", &path, e))
    }

    /// A signed token and its expiry.
    pub fn issue(&self, t: &TokenFor<'_>, now: OffsetDateTime) -> Result<(String, OffsetDateTime), PkiError> {
        let validity = t.validity.clamp(SA_MIN_VALIDITY, SA_MAX_VALIDITY);
        let iat = now.unix_timestamp();
        let exp = iat + i64::try_from(validity.as_secs()).unwrap_or(i64::MAX / 2);
        let aud = if t.audiences.is_empty() {
            SA_API_AUDIENCES.iter().map(|a| a.to_string()).collect()
        } else {
            t.audiences.to_vec()
        };
        let claims = Claims {
            aud,
            exp,
            iat,
            iss: SA_ISSUER.into(),
            kubernetes: KubernetesClaims {
                namespace: t.namespace.into(),
                node: t.node.map(|name| NodeRef { name: name.into() }),
                pod: t.pod.map(|(name, uid)| ObjectRef { name: name.into(), uid: uid.into() }),
                serviceaccount: ObjectRef { name: t.name.into(), uid: t.uid.into() },
            },
            nbf: iat,
            sub: format!("system:serviceaccount:{}:{}", t.namespace, t.name),
        };
        let header = Header { kid: Some(self.kid.clone()), ..Header::new(Algorithm::ES256) };
        let token = jwt::encode(&header, &claims, &self.signing)
            .map_err(|e| PkiError::generate("sign service account token", e))?;
        let expires = OffsetDateTime::from_unix_timestamp(exp).map_err(|e| PkiError::generate("token expiry", e))?;
        Ok((token, expires))
    }

    /// Checks a token at `now` for a service that answers to `audiences`
    /// (the API server: [`SA_API_AUDIENCES`]); says who it names and the pod
    /// it is bound to.
    ///
    /// The checks: three parts; the header's `alg` is ES256, nothing else
    /// (`none`, HS256 keyed with the public key, ...); the signature, by this
    /// key ([`TokenError::BadSignature`]); `iss` is [`SA_ISSUER`]; `aud`
    /// names one of `audiences` ([`TokenError::WrongAudience`]; an empty
    /// `audiences` accepts no token); `exp` after `now`
    /// ([`TokenError::Expired`]); `nbf` no later than `now` plus
    /// [`SA_NOT_BEFORE_LEEWAY`] ([`TokenError::NotYetValid`]); a `sub` of a
    /// service account, the one `kubernetes.io` names. Each claim must be
    /// there with its JSON type. Nothing in the claims is read before the
    /// signature verifies.
    pub fn verify(
        &self,
        token: &str,
        audiences: &[&str],
        now: OffsetDateTime,
    ) -> Result<ServiceAccountIdentity, TokenError> {
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "sub", "aud"]);
        validation.set_issuer(&[SA_ISSUER]);
        validation.set_audience(audiences);
        validation.validate_aud = true;
        // Checked below against `now`; jsonwebtoken would read the system clock.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        let claims: Claims = jwt::decode(token, &self.verifying, &validation)?;

        let expires_at = date("exp", claims.exp)?;
        // RFC 7519: not accepted on or after its expiration time.
        if now >= expires_at {
            return Err(TokenError::Expired { at: expires_at });
        }
        let not_before = date("nbf", claims.nbf)?;
        if not_before > now + SA_NOT_BEFORE_LEEWAY {
            return Err(TokenError::NotYetValid { at: not_before });
        }
        let Some(rest) = claims.sub.strip_prefix("system:serviceaccount:") else {
            return Err(malformed("the subject is not a service account"));
        };
        let (namespace, name) = rest.split_once(':').ok_or_else(|| malformed("the subject has no namespace"))?;
        let k8s = claims.kubernetes;
        if k8s.namespace != namespace || k8s.serviceaccount.name != name {
            return Err(malformed("the subject is not the service account kubernetes.io names"));
        }
        Ok(ServiceAccountIdentity {
            namespace: namespace.into(),
            name: name.into(),
            expires_at,
            pod: k8s.pod.map(|p| BoundPod { name: p.name, uid: p.uid }),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const API: &[&str] = SA_API_AUDIENCES;

    fn for_default<'a>(aud: &'a [String]) -> TokenFor<'a> {
        TokenFor {
            namespace: "default",
            name: "default",
            uid: "sa-uid",
            pod: Some(("web", "pod-uid")),
            node: Some("edge-1"),
            audiences: aud,
            validity: Duration::from_secs(3600),
        }
    }

    fn claims_of(token: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap()
    }

    /// `claims` as they are, signed ES256 with `t`'s key: a token only a
    /// mistaken issuer would make.
    fn signed(t: &ServiceAccountTokens, claims: &Value) -> String {
        jwt::encode(&Header::new(Algorithm::ES256), claims, &t.signing).unwrap()
    }

    /// Good claims for `now`, to be spoiled one at a time.
    fn good_claims(now: OffsetDateTime) -> Value {
        let now = now.unix_timestamp();
        json!({"aud": [SA_ISSUER], "exp": now + 3600, "iat": now, "iss": SA_ISSUER, "nbf": now,
            "sub": "system:serviceaccount:default:default",
            "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "default", "uid": "u"}}})
    }

    fn malformed_reason(result: Result<ServiceAccountIdentity, TokenError>) -> String {
        match result {
            Err(TokenError::Malformed(reason)) => reason,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn a_token_verifies_and_names_its_service_account_and_pod() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let aud = vec!["api".to_string()];
        let (token, exp) = t.issue(&for_default(&aud), now).unwrap();
        let id = t.verify(&token, &["other", "api"], now).unwrap();
        assert_eq!(id.user(), "system:serviceaccount:default:default");
        assert_eq!(id.expires_at, exp);
        assert_eq!(id.pod, Some(BoundPod { name: "web".into(), uid: "pod-uid".into() }));
        let claims = claims_of(&token);
        assert_eq!(claims["kubernetes.io"]["pod"], json!({"name": "web", "uid": "pod-uid"}));
        assert_eq!(claims["kubernetes.io"]["serviceaccount"], json!({"name": "default", "uid": "sa-uid"}));
        assert_eq!(claims["kubernetes.io"]["node"], json!({"name": "edge-1"}));
        assert_eq!(claims["kubernetes.io"]["namespace"], "default");
        assert_eq!(claims["aud"], json!(["api"]));
        assert_eq!(claims["sub"], "system:serviceaccount:default:default");
        assert_eq!(claims["iss"], SA_ISSUER);
        let iat = now.unix_timestamp();
        assert_eq!((claims["iat"].as_i64(), claims["nbf"].as_i64()), (Some(iat), Some(iat)));
        assert_eq!(claims["exp"].as_i64(), Some(iat + 3600));
        // Kubernetes' claim names, in Go's order (sorted), and nothing else.
        let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert!(payload.starts_with(r#"{"aud":["api"],"exp":"#), "{payload}");
        let keys: Vec<&String> = claims.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["aud", "exp", "iat", "iss", "kubernetes.io", "nbf", "sub"]);
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!((header.alg, header.kid), (Algorithm::ES256, Some(t.kid.clone())));
    }

    #[test]
    fn a_token_without_audiences_is_for_the_api_server_and_one_without_a_pod_is_bound_to_none() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let (token, _) = t.issue(&TokenFor { pod: None, node: None, ..for_default(&[]) }, now).unwrap();
        assert_eq!(claims_of(&token)["aud"], json!([SA_ISSUER]));
        let id = t.verify(&token, API, now).unwrap();
        assert_eq!(id.pod, None);
        assert!(claims_of(&token)["kubernetes.io"].get("pod").is_none());
    }

    #[test]
    fn a_token_for_another_audience_is_refused() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let vault = vec!["vault".to_string()];
        let (token, _) = t.issue(&for_default(&vault), now).unwrap();
        assert_eq!(t.verify(&token, API, now), Err(TokenError::WrongAudience));
        assert_eq!(t.verify(&token, &[], now), Err(TokenError::WrongAudience));
        assert!(t.verify(&token, &["vault"], now).is_ok());
        // Ours but without any aud at all.
        let mut claims = good_claims(now);
        claims.as_object_mut().unwrap().remove("aud");
        assert!(malformed_reason(t.verify(&signed(&t, &claims), API, now)).contains("aud"));
    }

    #[test]
    fn a_token_not_yet_valid_is_refused_beyond_the_leeway() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let leeway = time::Duration::try_from(SA_NOT_BEFORE_LEEWAY).unwrap();
        assert_eq!(leeway, time::Duration::seconds(60));
        // Made 61 s ahead of the verifier's clock.
        let (early, _) = t.issue(&for_default(&[]), now + leeway + time::Duration::seconds(1)).unwrap();
        let nbf = OffsetDateTime::from_unix_timestamp(claims_of(&early)["nbf"].as_i64().unwrap()).unwrap();
        assert_eq!(t.verify(&early, API, now), Err(TokenError::NotYetValid { at: nbf }));
        assert!(t.verify(&early, API, nbf - leeway).is_ok(), "within the leeway");
        assert_eq!(
            t.verify(&early, API, nbf - leeway - time::Duration::seconds(1)),
            Err(TokenError::NotYetValid { at: nbf })
        );
        // An nbf far ahead, signed properly: the signature does not make it valid.
        let mut claims = good_claims(now);
        claims["nbf"] = json!(now.unix_timestamp() + 86400);
        assert!(matches!(t.verify(&signed(&t, &claims), API, now), Err(TokenError::NotYetValid { .. })));
        // An nbf of another JSON type is no nbf, not a skipped check
        // (jsonwebtoken < 10.3 skipped it: GHSA-h395-gr6q-cpjc).
        claims["nbf"] = json!((now.unix_timestamp() + 86400).to_string());
        assert!(malformed_reason(t.verify(&signed(&t, &claims), API, now)).contains("expected i64"));
        claims.as_object_mut().unwrap().remove("nbf");
        assert!(malformed_reason(t.verify(&signed(&t, &claims), API, now)).contains("nbf"));
    }

    #[test]
    fn an_expired_token_is_refused_from_exp_on() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let (token, exp) = t.issue(&for_default(&[]), now).unwrap();
        assert!(t.verify(&token, API, exp - time::Duration::seconds(1)).is_ok());
        assert_eq!(t.verify(&token, API, exp), Err(TokenError::Expired { at: exp }));
        assert_eq!(t.verify(&token, API, exp + time::Duration::days(1)), Err(TokenError::Expired { at: exp }));
        // A string exp is refused, not taken for "never".
        let mut claims = good_claims(now);
        claims["exp"] = json!("never");
        assert!(malformed_reason(t.verify(&signed(&t, &claims), API, now)).contains("expected i64"));
        // Validity is clamped to 10 minutes at least.
        let short = TokenFor { validity: Duration::from_secs(1), ..for_default(&[]) };
        let (_, exp) = t.issue(&short, now).unwrap();
        assert!(exp - now > time::Duration::minutes(10) - time::Duration::seconds(1));
    }

    #[test]
    fn a_bad_signature_is_refused() {
        let t = ServiceAccountTokens::generate().unwrap();
        let other = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let (token, _) = t.issue(&for_default(&[]), now).unwrap();
        assert_eq!(other.verify(&token, API, now), Err(TokenError::BadSignature));
        // Claims replaced under the old signature.
        let mut parts: Vec<&str> = token.split('.').collect();
        let mut forged = claims_of(&token);
        forged["sub"] = json!("system:serviceaccount:kube-system:admin");
        forged["kubernetes.io"]["namespace"] = json!("kube-system");
        forged["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
        let forged = URL_SAFE_NO_PAD.encode(forged.to_string());
        parts[1] = &forged;
        assert_eq!(t.verify(&parts.join("."), API, now), Err(TokenError::BadSignature));
        // The signature altered, or cut.
        let (signed_part, sig) = token.rsplit_once('.').unwrap();
        let mut sig = URL_SAFE_NO_PAD.decode(sig).unwrap();
        sig[10] ^= 1;
        let altered = format!("{signed_part}.{}", URL_SAFE_NO_PAD.encode(&sig));
        assert_eq!(t.verify(&altered, API, now), Err(TokenError::BadSignature));
        assert_eq!(t.verify(&format!("{signed_part}."), API, now), Err(TokenError::BadSignature));
    }

    #[test]
    fn alg_none_is_refused() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let claims = URL_SAFE_NO_PAD.encode(good_claims(now).to_string());
        for sig in ["", "AAAA"] {
            let reason = malformed_reason(t.verify(&format!("{header}.{claims}.{sig}"), API, now));
            assert!(reason.contains(r#""none" is not ES256"#), "{reason}");
        }
        let no_alg = URL_SAFE_NO_PAD.encode(r#"{"typ":"JWT"}"#);
        assert!(malformed_reason(t.verify(&format!("{no_alg}.{claims}."), API, now)).contains("no alg"));
    }

    #[test]
    fn hs256_keyed_with_the_public_key_is_refused() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let public = t.verifying.try_get_as_bytes().unwrap().to_vec();
        assert_eq!(public.len(), 65, "the uncompressed point");
        // The classic confusion: a verifier that takes the header's alg
        // would check this HMAC with the public key it holds, and pass it.
        let forged =
            jwt::encode(&Header::new(Algorithm::HS256), &good_claims(now), &EncodingKey::from_secret(&public)).unwrap();
        let reason = malformed_reason(t.verify(&forged, API, now));
        assert!(reason.contains(r#""HS256" is not ES256"#), "{reason}");
        // The library refuses it on its own too, without our header check.
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(API);
        let err = jsonwebtoken::decode::<Value>(&forged, &t.verifying, &validation).unwrap_err();
        assert_eq!(err.kind(), &jsonwebtoken::errors::ErrorKind::InvalidAlgorithm);
        // A join token (HS256, keyed with the CA key) is no service account token.
        let ca = crate::Ca::generate("sa-test-ca").unwrap();
        let join = crate::issue_token(&ca, "abc123", now, crate::TOKEN_VALIDITY);
        let jwt = join.split_once('.').unwrap().1;
        assert!(malformed_reason(t.verify(jwt, API, now)).contains(r#""HS256" is not ES256"#));
        // Nor the other way round.
        let (token, _) = t.issue(&for_default(&[]), now).unwrap();
        match crate::verify_jwt(&ca, &token, now) {
            Err(TokenError::Malformed(reason)) => assert!(reason.contains(r#""ES256" is not HS256"#), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_and_foreign_claims_are_refused() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let (token, _) = t.issue(&for_default(&[]), now).unwrap();
        for garbage in ["", "a", "a.b", "...", "a.b.c", "!!!.b.c", &format!("{token}.x"), &format!("{token}=")] {
            assert!(matches!(t.verify(garbage, API, now), Err(TokenError::Malformed(_))), "{garbage:?}");
        }
        let not_json = format!("{}.{}.AAAA", URL_SAFE_NO_PAD.encode("{not json"), "e30");
        assert!(malformed_reason(t.verify(&not_json, API, now)).contains("not JSON"));
        let typ = format!("{}.e30.AAAA", URL_SAFE_NO_PAD.encode(r#"{"alg":"ES256","typ":"JWE"}"#));
        assert!(malformed_reason(t.verify(&typ, API, now)).contains(r#""JWE" is not JWT"#));

        // Well signed, but not what this issuer writes.
        let spoiled = |change: &dyn Fn(&mut Value)| {
            let mut claims = good_claims(now);
            change(&mut claims);
            malformed_reason(t.verify(&signed(&t, &claims), API, now))
        };
        assert!(spoiled(&|c| c["iss"] = json!("https://elsewhere")).contains("issuer"));
        assert!(spoiled(&|c| c["sub"] = json!("alice")).contains("not a service account"));
        assert!(spoiled(&|c| c["sub"] = json!("system:serviceaccount:kube-system:admin")).contains("kubernetes.io"));
        assert!(
            spoiled(&|c| {
                c.as_object_mut().unwrap().remove("kubernetes.io");
            })
            .contains("kubernetes.io")
        );
        assert!(spoiled(&|c| c["exp"] = json!(i64::MAX)).contains("out of range"));
        // The unspoiled claims pass: each refusal above is the change's.
        assert!(t.verify(&signed(&t, &good_claims(now)), API, now).is_ok());
    }

    #[test]
    fn the_key_is_kept_and_reloaded() {
        let dir = std::env::temp_dir().join(format!("edgehive-sa-{}", std::process::id()));
        let a = ServiceAccountTokens::load_or_create(&dir).unwrap();
        let b = ServiceAccountTokens::load_or_create(&dir).unwrap();
        let (token, _) = a.issue(&for_default(&[]), OffsetDateTime::now_utc()).unwrap();
        assert!(b.verify(&token, API, OffsetDateTime::now_utc()).is_ok());
        assert_eq!(a.kid, b.kid);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
