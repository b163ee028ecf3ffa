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
//! credentials ([`ServiceAccountTokens::verify`]).

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject as _;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::files::{PRIVATE_MODE, create_private_dir, pem_encode, read_optional, write_atomic};
use crate::{PkiError, TokenError};

/// The signing key's file name in the CA directory.
pub const SA_KEY_FILE: &str = "sa.key";
/// The `iss` of every token (Kubernetes' default issuer).
pub const SA_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Shortest validity a request may ask for (Kubernetes: 10 minutes).
pub const SA_MIN_VALIDITY: Duration = Duration::from_secs(600);
/// Longest validity handed out (Kubernetes caps at 48 h by default).
pub const SA_MAX_VALIDITY: Duration = Duration::from_secs(48 * 3600);

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
    /// Audiences; empty means the issuer.
    pub audiences: &'a [String],
    /// How long it is valid (clamped to 10 min – 48 h).
    pub validity: Duration,
}

/// Who a verified token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountIdentity {
    /// Namespace of the service account.
    pub namespace: String,
    /// Name of the service account.
    pub name: String,
    /// When the token expires.
    pub expires_at: OffsetDateTime,
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

/// Issues and verifies service account tokens.
pub struct ServiceAccountTokens {
    key: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens").field("kid", &self.kid).finish_non_exhaustive()
    }
}

fn malformed(reason: impl Into<String>) -> TokenError {
    TokenError::Malformed(reason.into())
}

impl ServiceAccountTokens {
    fn from_pkcs8(der: &[u8]) -> Result<ServiceAccountTokens, String> {
        let rng = SystemRandom::new();
        let key = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng)
            .map_err(|e| format!("not a P-256 PKCS#8 key: {e}"))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(&digest.as_ref()[..16]);
        Ok(ServiceAccountTokens { key, kid, rng })
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
        let audiences: Vec<&str> =
            if t.audiences.is_empty() { vec![SA_ISSUER] } else { t.audiences.iter().map(String::as_str).collect() };
        let mut k8s = json!({"namespace": t.namespace, "serviceaccount": {"name": t.name, "uid": t.uid}});
        if let Some((pod, uid)) = t.pod {
            k8s["pod"] = json!({"name": pod, "uid": uid});
        }
        if let Some(node) = t.node {
            k8s["node"] = json!({"name": node});
        }
        let claims = json!({
            "aud": audiences, "exp": exp, "iat": iat, "nbf": iat, "iss": SA_ISSUER,
            "sub": format!("system:serviceaccount:{}:{}", t.namespace, t.name),
            "kubernetes.io": k8s,
        });
        let header = json!({"alg": "ES256", "kid": self.kid, "typ": "JWT"});
        let signed =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let sig = self.key.sign(&self.rng, signed.as_bytes()).map_err(|e| PkiError::generate("token signature", e))?;
        let expires = OffsetDateTime::from_unix_timestamp(exp).map_err(|e| PkiError::generate("token expiry", e))?;
        Ok((format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())), expires))
    }

    /// Checks a token's signature, issuer and expiry; says who it names.
    /// Nothing in the claims is read before the signature verifies.
    pub fn verify(&self, token: &str, now: OffsetDateTime) -> Result<ServiceAccountIdentity, TokenError> {
        let parts: Vec<&str> = token.split('.').collect();
        let [h, p, s] = parts[..] else {
            return Err(malformed(format!("expected a JWT of 3 parts, found {}", parts.len())));
        };
        let decode = |what: &str, part: &str| {
            URL_SAFE_NO_PAD.decode(part).map_err(|e| malformed(format!("the {what} is not base64url: {e}")))
        };
        let header: Value = serde_json::from_slice(&decode("header", h)?)
            .map_err(|e| malformed(format!("the header is not JSON: {e}")))?;
        if header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return Err(malformed("the algorithm is not ES256"));
        }
        let sig = decode("signature", s)?;
        let public =
            signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref());
        public.verify(&token.as_bytes()[..h.len() + 1 + p.len()], &sig).map_err(|_| TokenError::BadSignature)?;
        let claims: Value = serde_json::from_slice(&decode("payload", p)?)
            .map_err(|e| malformed(format!("the claims are not JSON: {e}")))?;
        if claims.get("iss").and_then(Value::as_str) != Some(SA_ISSUER) {
            return Err(malformed("another issuer"));
        }
        let exp = claims.get("exp").and_then(Value::as_i64).ok_or_else(|| malformed("no exp"))?;
        let expires_at = OffsetDateTime::from_unix_timestamp(exp).map_err(|_| malformed("exp out of range"))?;
        if now >= expires_at {
            return Err(TokenError::Expired { at: expires_at });
        }
        let sub = claims.get("sub").and_then(Value::as_str).unwrap_or_default();
        let Some(rest) = sub.strip_prefix("system:serviceaccount:") else {
            return Err(malformed("the subject is not a service account"));
        };
        let (namespace, name) = rest.split_once(':').ok_or_else(|| malformed("the subject has no namespace"))?;
        Ok(ServiceAccountIdentity { namespace: namespace.into(), name: name.into(), expires_at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_token_verifies_and_names_its_service_account() {
        let t = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let aud = vec!["api".to_string()];
        let (token, exp) = t.issue(&for_default(&aud), now).unwrap();
        let id = t.verify(&token, now).unwrap();
        assert_eq!(id.user(), "system:serviceaccount:default:default");
        assert_eq!(id.expires_at, exp);
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(claims["kubernetes.io"]["pod"]["name"], "web");
        assert_eq!(claims["kubernetes.io"]["node"]["name"], "edge-1");
        assert_eq!(claims["aud"], json!(["api"]));
    }

    #[test]
    fn forged_expired_and_foreign_tokens_are_refused() {
        let t = ServiceAccountTokens::generate().unwrap();
        let other = ServiceAccountTokens::generate().unwrap();
        let now = OffsetDateTime::now_utc();
        let (token, exp) = t.issue(&for_default(&[]), now).unwrap();
        assert_eq!(other.verify(&token, now), Err(TokenError::BadSignature));
        assert_eq!(t.verify(&token, exp), Err(TokenError::Expired { at: exp }));
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged_claims = URL_SAFE_NO_PAD.encode(r#"{"iss":"https://kubernetes.default.svc.cluster.local","sub":"system:serviceaccount:kube-system:admin","exp":9999999999}"#);
        parts[1] = &forged_claims;
        assert_eq!(t.verify(&parts.join("."), now), Err(TokenError::BadSignature));
        assert!(matches!(t.verify("a.b", now), Err(TokenError::Malformed(_))));
        // Validity is clamped to 10 minutes at least.
        let short = TokenFor { validity: Duration::from_secs(1), ..for_default(&[]) };
        let (_, exp) = t.issue(&short, now).unwrap();
        assert!(exp - now > time::Duration::minutes(10) - time::Duration::seconds(1));
    }

    #[test]
    fn the_key_is_kept_and_reloaded() {
        let dir = std::env::temp_dir().join(format!("edgehive-sa-{}", std::process::id()));
        let a = ServiceAccountTokens::load_or_create(&dir).unwrap();
        let b = ServiceAccountTokens::load_or_create(&dir).unwrap();
        let (token, _) = a.issue(&for_default(&[]), OffsetDateTime::now_utc()).unwrap();
        assert!(b.verify(&token, OffsetDateTime::now_utc()).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
