//! The two records, as the Secrets they are stored as. Pure conversions, so
//! that the cloud (through the store) and `edgehive token` (through the API)
//! read and write the same shapes.
//!
//! - A join token's record is a Kubernetes bootstrap token Secret:
//!   `kube-system/bootstrap-token-{id}`, type `bootstrap.kubernetes.io/token`,
//!   with `token-id`, `expiration` (RFC 3339), `description` and
//!   `usage-bootstrap-authentication: "true"`, plus edgehive's `rejoin-nodes`
//!   (comma-separated): existing nodes this token may take over. It holds no
//!   secret part: the token's signature is made with the CA key, so listing
//!   records reveals no usable token.
//! - A node's certificate record is `edgehive-nodes/{node}`, type
//!   `edgehive.io/node-certificates`: `serials` (comma-separated, newest
//!   first: the certificates of that node still accepted), `not-after` of the
//!   newest, `issued-at`, `issued-with` (`token {id}` or `renewal`),
//!   `revoked-at` once revoked, and `last-expiry`: when the last certificate
//!   the record has ever judged (accepted, replaced or revoked) expires.
//!   Past it the record decides nothing (no certificate of the node it
//!   covered is valid any more) and is cleaned up
//!   ([`crate::Credentials::clean_spent_node_records`]).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

/// Namespace of join token records (Kubernetes' bootstrap tokens).
pub const TOKEN_NAMESPACE: &str = "kube-system";
/// Name prefix of a join token record.
pub const TOKEN_PREFIX: &str = "bootstrap-token-";
/// Secret type of a join token record.
pub const TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";
/// Namespace of node certificate records, one per node, named as the node.
pub const NODE_NAMESPACE: &str = "edgehive-nodes";
/// Secret type of a node certificate record.
pub const NODE_TYPE: &str = "edgehive.io/node-certificates";

/// A record that does not read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {reason}")]
pub struct BadRecord {
    /// Which record (`kube-system/bootstrap-token-abc123`).
    pub what: String,
    /// What is wrong.
    pub reason: String,
}

/// What the cloud keeps of a join token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The token's id (its `jti`).
    pub id: String,
    /// When it stops being accepted.
    pub expires: OffsetDateTime,
    /// What it is for, as its maker said.
    pub description: String,
    /// Existing nodes it may take over (see the crate documentation).
    pub rejoin_nodes: Vec<String>,
    /// When the record was made (`None` before it is stored).
    pub created: Option<OffsetDateTime>,
}

/// What a new token is to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSpec {
    /// How long the token is accepted.
    pub ttl: std::time::Duration,
    /// What it is for.
    pub description: String,
    /// Existing nodes it may take over.
    pub rejoin_nodes: Vec<String>,
}

/// The Secret name of token `id`.
pub fn token_secret_name(id: &str) -> String {
    format!("{TOKEN_PREFIX}{id}")
}

fn b64(s: &str) -> Value {
    Value::String(B64.encode(s))
}

/// The decoded `data` of a Secret; a value that is not base64 UTF-8 is an error.
fn data_of(secret: &Value, what: &str) -> Result<Map<String, Value>, BadRecord> {
    let bad = |reason: String| BadRecord { what: what.to_owned(), reason };
    let mut out = Map::new();
    let Some(data) = secret.get("data") else { return Ok(out) };
    let Some(data) = data.as_object() else { return Err(bad("data is not a map".into())) };
    for (k, v) in data {
        let text = v.as_str().ok_or_else(|| bad(format!("data[{k}] is not a string")))?;
        let bytes = B64.decode(text).map_err(|e| bad(format!("data[{k}] is not base64: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| bad(format!("data[{k}] is not UTF-8")))?;
        out.insert(k.clone(), Value::String(text));
    }
    Ok(out)
}

fn field<'a>(data: &'a Map<String, Value>, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

fn time_field(data: &Map<String, Value>, key: &str, what: &str) -> Result<Option<OffsetDateTime>, BadRecord> {
    match field(data, key) {
        "" => Ok(None),
        text => edgehive_store::parse_rfc3339(text).map(Some).ok_or_else(|| BadRecord {
            what: what.to_owned(),
            reason: format!("{key} {text:?} is not an RFC 3339 time"),
        }),
    }
}

/// The later of two times, either of which may be unknown.
pub(crate) fn later(a: Option<OffsetDateTime>, b: Option<OffsetDateTime>) -> Option<OffsetDateTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// When a stored record was made (its `metadata.creationTimestamp`).
pub(crate) fn created(secret: &Value) -> Option<OffsetDateTime> {
    secret.pointer("/metadata/creationTimestamp").and_then(Value::as_str).and_then(edgehive_store::parse_rfc3339)
}

impl TokenRecord {
    /// The record of a new token made at `now` with a fresh id; the token
    /// itself is [`TokenRecord::token`].
    pub fn new(spec: &TokenSpec, now: OffsetDateTime) -> TokenRecord {
        TokenRecord {
            id: edgehive_pki::new_token_id(),
            expires: edgehive_pki::expiry(now, spec.ttl),
            description: spec.description.clone(),
            rejoin_nodes: spec.rejoin_nodes.clone(),
            created: None,
        }
    }

    /// The token this record stands for, signed with `ca`'s key; it expires
    /// when the record does.
    pub fn token(&self, ca: &edgehive_pki::Ca) -> String {
        edgehive_pki::issue_token_expiring(ca, &self.id, self.expires)
    }

    /// The record as the Secret it is stored as.
    pub fn to_secret(&self) -> Value {
        let mut data = Map::new();
        data.insert("token-id".into(), b64(&self.id));
        data.insert("expiration".into(), b64(&edgehive_store::rfc3339(self.expires)));
        data.insert("usage-bootstrap-authentication".into(), b64("true"));
        if !self.description.is_empty() {
            data.insert("description".into(), b64(&self.description));
        }
        if !self.rejoin_nodes.is_empty() {
            data.insert("rejoin-nodes".into(), b64(&self.rejoin_nodes.join(",")));
        }
        json!({"apiVersion": "v1", "kind": "Secret", "type": TOKEN_TYPE,
            "metadata": {"name": token_secret_name(&self.id), "namespace": TOKEN_NAMESPACE},
            "data": data})
    }

    /// Reads a stored record. Only records made for joining count: one
    /// without `usage-bootstrap-authentication: "true"` is an error.
    pub fn from_secret(secret: &Value) -> Result<TokenRecord, BadRecord> {
        let name = secret.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let what = format!("{TOKEN_NAMESPACE}/{name}");
        let bad = |reason: String| BadRecord { what: what.clone(), reason };
        if secret.get("type").and_then(Value::as_str) != Some(TOKEN_TYPE) {
            return Err(bad(format!("not of type {TOKEN_TYPE}")));
        }
        let data = data_of(secret, &what)?;
        let id = field(&data, "token-id").to_owned();
        if name != token_secret_name(&id) {
            return Err(bad(format!("token-id {id:?} does not match the name")));
        }
        if field(&data, "usage-bootstrap-authentication") != "true" {
            return Err(bad("not usable for joining (usage-bootstrap-authentication is not \"true\")".into()));
        }
        let expires = time_field(&data, "expiration", &what)?.ok_or_else(|| bad("no expiration".into()))?;
        Ok(TokenRecord {
            id,
            expires,
            description: field(&data, "description").to_owned(),
            rejoin_nodes: list(field(&data, "rejoin-nodes")),
            created: created(secret),
        })
    }
}

/// How a node's newest certificate was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssuedWith {
    /// With the join token of this id.
    Token(String),
    /// By renewing a certificate of the node.
    Renewal,
}

impl IssuedWith {
    fn text(&self) -> String {
        match self {
            IssuedWith::Token(id) => format!("token {id}"),
            IssuedWith::Renewal => "renewal".into(),
        }
    }

    fn parse(text: &str) -> IssuedWith {
        match text.strip_prefix("token ") {
            Some(id) => IssuedWith::Token(id.to_owned()),
            None => IssuedWith::Renewal,
        }
    }
}

/// What the cloud keeps of a node's certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    /// The node.
    pub node: String,
    /// Serial numbers of the certificates still accepted, newest first
    /// (the newest, and the one it renewed until the node uses the new one).
    pub serials: Vec<String>,
    /// When the newest certificate expires.
    pub not_after: Option<OffsetDateTime>,
    /// When the newest certificate was issued.
    pub issued_at: Option<OffsetDateTime>,
    /// How the newest certificate was obtained.
    pub issued_with: IssuedWith,
    /// When the node was revoked (then `serials` is empty).
    pub revoked_at: Option<OffsetDateTime>,
    /// When the last certificate this record has covered expires (the
    /// newest's `not_after`, or a replaced one's if that is later).
    pub last_expiry: Option<OffsetDateTime>,
}

impl NodeRecord {
    /// True while the node holds a certificate the cloud accepts: not
    /// revoked, and the newest not yet expired at `now`.
    pub fn is_live(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && !self.serials.is_empty() && self.not_after.is_some_and(|t| t > now)
    }

    /// The record of a revocation of `node` at `now` (the expiry of what it
    /// revokes is carried over from the record it replaces).
    pub fn revoked(node: &str, now: OffsetDateTime) -> NodeRecord {
        NodeRecord {
            node: node.to_owned(),
            serials: Vec::new(),
            not_after: None,
            issued_at: None,
            issued_with: IssuedWith::Renewal,
            revoked_at: Some(now),
            last_expiry: None,
        }
    }

    /// After this time every certificate the record covered has expired,
    /// so it refuses nothing a TLS handshake would not: it may go. `None`
    /// when that is unknown (a revocation recorded without the expiry of
    /// what it revoked): kept.
    pub fn spent_after(&self) -> Option<OffsetDateTime> {
        later(self.last_expiry, self.not_after)
    }

    /// The record as the Secret it is stored as.
    pub fn to_secret(&self) -> Value {
        let mut data = Map::new();
        data.insert("serials".into(), b64(&self.serials.join(",")));
        let times = [
            ("not-after", self.not_after),
            ("issued-at", self.issued_at),
            ("revoked-at", self.revoked_at),
            ("last-expiry", self.last_expiry),
        ];
        for (key, t) in times {
            if let Some(t) = t {
                data.insert(key.into(), b64(&edgehive_store::rfc3339(t)));
            }
        }
        data.insert("issued-with".into(), b64(&self.issued_with.text()));
        json!({"apiVersion": "v1", "kind": "Secret", "type": NODE_TYPE,
            "metadata": {"name": self.node, "namespace": NODE_NAMESPACE},
            "data": data})
    }

    /// Reads a stored record.
    pub fn from_secret(secret: &Value) -> Result<NodeRecord, BadRecord> {
        let node = secret.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let what = format!("{NODE_NAMESPACE}/{node}");
        if secret.get("type").and_then(Value::as_str) != Some(NODE_TYPE) {
            return Err(BadRecord { what, reason: format!("not of type {NODE_TYPE}") });
        }
        let data = data_of(secret, &what)?;
        Ok(NodeRecord {
            serials: list(field(&data, "serials")),
            not_after: time_field(&data, "not-after", &what)?,
            issued_at: time_field(&data, "issued-at", &what)?,
            issued_with: IssuedWith::parse(field(&data, "issued-with")),
            revoked_at: time_field(&data, "revoked-at", &what)?,
            last_expiry: time_field(&data, "last-expiry", &what)?,
            node,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> OffsetDateTime {
        edgehive_store::parse_rfc3339(s).unwrap()
    }

    #[test]
    fn token_records_round_trip_as_bootstrap_token_secrets() {
        let r = TokenRecord {
            id: "abc123".into(),
            expires: t("2026-11-25T00:00:00Z"),
            description: "for the shop floor".into(),
            rejoin_nodes: vec!["edge-1".into(), "edge-2".into()],
            created: None,
        };
        let s = r.to_secret();
        assert_eq!(s["metadata"]["name"], "bootstrap-token-abc123");
        assert_eq!(s["metadata"]["namespace"], "kube-system");
        assert_eq!(s["type"], "bootstrap.kubernetes.io/token");
        assert_eq!(s["data"]["usage-bootstrap-authentication"], B64.encode("true"));
        assert_eq!(s["data"]["expiration"], B64.encode("2026-11-25T00:00:00Z"));
        assert_eq!(TokenRecord::from_secret(&s).unwrap(), r);
    }

    #[test]
    fn a_damaged_or_foreign_token_record_is_an_error() {
        let good = TokenRecord {
            id: "abc123".into(),
            expires: t("2026-11-25T00:00:00Z"),
            description: String::new(),
            rejoin_nodes: vec![],
            created: None,
        }
        .to_secret();
        type Damage = (&'static str, Box<dyn Fn(&mut Value)>);
        let cases: Vec<Damage> = vec![
            ("type", Box::new(|s| s["type"] = json!("Opaque"))),
            ("does not match", Box::new(|s| s["metadata"]["name"] = json!("bootstrap-token-zzzzzz"))),
            ("not base64", Box::new(|s| s["data"]["expiration"] = json!("%%%"))),
            ("RFC 3339", Box::new(|s| s["data"]["expiration"] = json!(B64.encode("tomorrow")))),
            ("joining", Box::new(|s| s["data"]["usage-bootstrap-authentication"] = json!(B64.encode("false")))),
            ("no expiration", Box::new(|s| s["data"].as_object_mut().unwrap().retain(|k, _| k != "expiration"))),
            ("not a map", Box::new(|s| s["data"] = json!([1]))),
        ];
        for (says, damage) in cases {
            let mut s = good.clone();
            damage(&mut s);
            let e = TokenRecord::from_secret(&s).unwrap_err();
            assert!(e.to_string().contains(says), "{says}: {e}");
            assert!(e.to_string().starts_with("kube-system/"), "{e}");
        }
    }

    #[test]
    fn node_records_round_trip_and_say_when_they_are_live() {
        let r = NodeRecord {
            node: "edge-1".into(),
            serials: vec!["1f".into(), "0a".into()],
            not_after: Some(t("2027-01-01T00:00:00Z")),
            issued_at: Some(t("2026-10-01T00:00:00Z")),
            issued_with: IssuedWith::Token("abc123".into()),
            revoked_at: None,
            last_expiry: Some(t("2027-02-01T00:00:00Z")),
        };
        let s = r.to_secret();
        assert_eq!(s["metadata"], json!({"name": "edge-1", "namespace": "edgehive-nodes"}));
        assert_eq!(NodeRecord::from_secret(&s).unwrap(), r);
        assert!(r.is_live(t("2026-12-01T00:00:00Z")));
        assert!(!r.is_live(t("2027-01-01T00:00:00Z")), "expired");
        assert_eq!(r.spent_after(), Some(t("2027-02-01T00:00:00Z")), "a replaced certificate outlives the newest");
        let revoked = NodeRecord { serials: vec![], revoked_at: Some(t("2026-11-01T00:00:00Z")), ..r.clone() };
        assert!(!revoked.is_live(t("2026-12-01T00:00:00Z")));
        assert_eq!(NodeRecord::from_secret(&revoked.to_secret()).unwrap(), revoked);
        let renewed = NodeRecord { issued_with: IssuedWith::Renewal, ..r };
        assert_eq!(NodeRecord::from_secret(&renewed.to_secret()).unwrap(), renewed);
    }
}
