//! The records kept in the store, and the decisions made on them.

use edgehive_pki::{Ca, CertificateId, TokenClaims};
use edgehive_store::resources::{NAMESPACES, NODES, SECRETS};
use edgehive_store::{DeleteOptions, ListOptions, Store, StoreError};
use serde_json::{Value, json};
use std::sync::Arc;
use time::OffsetDateTime;

use crate::records::{
    IssuedWith, NODE_NAMESPACE, NodeRecord, TOKEN_NAMESPACE, TOKEN_PREFIX, TokenRecord, TokenSpec, token_secret_name,
};

/// Why a node may not have a certificate, or may not use the one it has.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The token has no record: never made here, revoked, or cleaned up
    /// after it expired; or it carries no id at all.
    #[error("{0}")]
    UnknownToken(String),
    /// The token's record says it has expired.
    #[error("token {id} expired at {}", edgehive_store::rfc3339(*at))]
    Expired {
        /// The token.
        id: String,
        /// When.
        at: OffsetDateTime,
    },
    /// A token may not take over a registered node that holds a valid
    /// certificate.
    #[error(
        "node {node:?} is registered and holds a valid certificate (until {}); a join token may not replace it. \
         Delete the Node first (kubectl delete node {node}), or make a token that may: \
         edgehive token create --rejoin {node}",
        edgehive_store::rfc3339(*until)
    )]
    NodeTaken {
        /// The node.
        node: String,
        /// When its certificate expires.
        until: OffsetDateTime,
    },
    /// The certificate was revoked, or replaced by a newer one.
    #[error("{0}")]
    CertificateRevoked(String),
    /// The store could not be read or written.
    #[error("the cloud's store failed: {0}")]
    Store(#[from] StoreError),
}

/// What a valid join token allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinGrant {
    /// The token's id.
    pub token_id: String,
    /// The node exists and holds a valid certificate, and the token names it
    /// in `rejoin-nodes`: the new certificate replaces the old.
    pub takes_over: bool,
}

/// Join tokens and node certificates, recorded in the store.
#[derive(Debug, Clone)]
pub struct Credentials {
    store: Store,
    ca: Arc<Ca>,
}

/// The namespaces the records live in, with Kubernetes' defaults.
fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
}

impl Credentials {
    /// Credentials kept in `store`; tokens are signed with `ca`'s key.
    pub fn new(store: Store, ca: Arc<Ca>) -> Credentials {
        Credentials { store, ca }
    }

    /// The CA tokens are signed with and certificates chain to.
    pub fn ca(&self) -> &Arc<Ca> {
        &self.ca
    }

    /// The store the records are kept in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Creates the records' namespaces if they are missing.
    pub async fn ensure_namespaces(&self) -> Result<(), StoreError> {
        for ns in [TOKEN_NAMESPACE, NODE_NAMESPACE] {
            match self.store.create(&NAMESPACES, namespace(ns)).await {
                Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Makes a token and its record: the token text (give it to the node)
    /// and the record as stored.
    pub async fn create_token(
        &self,
        spec: &TokenSpec,
        now: OffsetDateTime,
    ) -> Result<(String, TokenRecord), StoreError> {
        self.ensure_namespaces().await?;
        // Ids are random; a clash with a live record is retried.
        let mut last = None;
        for _ in 0..4 {
            let record = TokenRecord::new(spec, now);
            match self.store.create(&SECRETS, record.to_secret()).await {
                Ok(stored) => {
                    let token = record.token(&self.ca);
                    let record =
                        TokenRecord { created: stored.value().ok().and_then(crate::records::created), ..record };
                    tracing::info!(token = %record.id, expires = %edgehive_store::rfc3339(record.expires), rejoin = ?record.rejoin_nodes, "join token created");
                    return Ok((token, record));
                }
                Err(e @ StoreError::AlreadyExists { .. }) => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| StoreError::BadRequest("no free token id".into())))
    }

    /// Every token record, oldest first. Damaged records are logged and
    /// left out.
    pub async fn list_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let opts = ListOptions { namespace: Some(TOKEN_NAMESPACE.into()), ..ListOptions::default() };
        let list = self.store.list(&SECRETS, &opts).await?;
        let mut out = Vec::new();
        for obj in list.items {
            if !obj.name().starts_with(TOKEN_PREFIX) {
                continue;
            }
            match obj
                .value()
                .map_err(|e| e.to_string())
                .and_then(|v| TokenRecord::from_secret(v).map_err(|e| e.to_string()))
            {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(record = obj.name(), error = %e, "skipping a damaged join token record"),
            }
        }
        out.sort_by(|a, b| a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id)));
        Ok(out)
    }

    /// Revokes token `id`: its record goes, so the token joins no node from
    /// now on. Certificates already issued with it stay valid (revoke their
    /// nodes for that). False when there was no such token.
    pub async fn revoke_token(&self, id: &str) -> Result<bool, StoreError> {
        match self.store.delete(&SECRETS, TOKEN_NAMESPACE, &token_secret_name(id), &DeleteOptions::default()).await {
            Ok(_) => {
                tracing::info!(token = %id, "join token revoked");
                Ok(true)
            }
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Deletes the records of tokens expired at `now` (Kubernetes' token
    /// cleaner); returns how many went.
    pub async fn clean_expired_tokens(&self, now: OffsetDateTime) -> Result<usize, StoreError> {
        let mut gone = 0;
        for record in self.list_tokens().await? {
            if record.expires <= now && self.revoke_token(&record.id).await? {
                gone += 1;
            }
        }
        Ok(gone)
    }

    /// The record of token `id`, if it has one that reads.
    async fn token_record(&self, id: &str) -> Result<Option<TokenRecord>, Refusal> {
        let obj = match self.store.get(&SECRETS, TOKEN_NAMESPACE, &token_secret_name(id)).await {
            Ok(o) => o,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match obj
            .value()
            .map_err(|e| e.to_string())
            .and_then(|v| TokenRecord::from_secret(v).map_err(|e| e.to_string()))
        {
            Ok(r) => Ok(Some(r)),
            Err(e) => {
                tracing::warn!(token = %id, error = %e, "join token record does not read; the token is refused");
                Ok(None)
            }
        }
    }

    /// The certificate record of `node`, if it has one that reads.
    pub async fn node_record(&self, node: &str) -> Result<Option<NodeRecord>, StoreError> {
        let obj = match self.store.get(&SECRETS, NODE_NAMESPACE, node).await {
            Ok(o) => o,
            Err(StoreError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        match node_record_of(&obj) {
            Ok(r) => Ok(Some(r)),
            // A damaged record must not open the door: treat it as revoked.
            Err(e) => {
                tracing::warn!(node, error = %e, "node certificate record does not read; the node's certificates are refused");
                Ok(Some(NodeRecord {
                    node: node.to_owned(),
                    serials: Vec::new(),
                    not_after: None,
                    issued_at: None,
                    issued_with: IssuedWith::Renewal,
                    revoked_at: Some(OffsetDateTime::UNIX_EPOCH),
                    last_expiry: None,
                }))
            }
        }
    }

    /// Whether a join token with `claims` (its signature already checked)
    /// may get a certificate for `node` at `now`: the token has a record that
    /// has not expired, and `node` is not a registered node holding a valid
    /// certificate, unless the token names it in `rejoin-nodes`.
    pub async fn authorize_join(
        &self,
        claims: &TokenClaims,
        node: &str,
        now: OffsetDateTime,
    ) -> Result<JoinGrant, Refusal> {
        let Some(id) = claims.id.as_deref() else {
            return Err(Refusal::UnknownToken(
                "the token has no id; tokens are recorded now, make a new one with `edgehive token create`".into(),
            ));
        };
        let Some(record) = self.token_record(id).await? else {
            return Err(Refusal::UnknownToken(format!(
                "token {id} is unknown: revoked, expired, or not made by this cloud"
            )));
        };
        if record.expires <= now {
            return Err(Refusal::Expired { id: id.to_owned(), at: record.expires });
        }
        let registered = match self.store.get(&NODES, "", node).await {
            Ok(_) => true,
            Err(StoreError::NotFound { .. }) => false,
            Err(e) => return Err(e.into()),
        };
        let live = match self.node_record(node).await? {
            Some(r) if r.is_live(now) => r.not_after,
            _ => None,
        };
        let takes_over = match (registered, live) {
            (true, Some(until)) if !record.rejoin_nodes.iter().any(|n| n == node) => {
                return Err(Refusal::NodeTaken { node: node.to_owned(), until });
            }
            (true, Some(_)) => true,
            _ => false,
        };
        Ok(JoinGrant { token_id: id.to_owned(), takes_over })
    }

    /// Whether `node` may still use the certificate with serial `serial`
    /// (to connect, or to renew it): refused when the node was revoked or the
    /// certificate has been replaced. A node without a record (certificates
    /// issued before records were kept, or by another tool with this CA) is
    /// accepted.
    pub async fn check_certificate(&self, node: &str, serial: &str) -> Result<(), Refusal> {
        let Some(record) = self.node_record(node).await? else { return Ok(()) };
        if let Some(at) = record.revoked_at {
            return Err(Refusal::CertificateRevoked(format!(
                "the certificates of node {node:?} were revoked at {}; join it again with a token",
                edgehive_store::rfc3339(at)
            )));
        }
        if !record.serials.iter().any(|s| s == serial) {
            return Err(Refusal::CertificateRevoked(format!(
                "this certificate of node {node:?} (serial {serial}) has been replaced by a newer one"
            )));
        }
        Ok(())
    }

    /// Records that `cert` was issued to `node`. A certificate from a token
    /// replaces every earlier one of the node; a renewal keeps the renewed
    /// certificate (`renewed`) valid beside the new one until it expires or
    /// is renewed in turn. A renewal is recorded only while the record still
    /// accepts the renewed certificate, checked in the same write as the
    /// record: a revocation (or a newer certificate) that lands between the
    /// renewal's check and this write refuses it
    /// ([`Refusal::CertificateRevoked`]), and the new certificate must not be
    /// handed out.
    pub async fn record_issued(
        &self,
        node: &str,
        cert: &CertificateId,
        with: IssuedWith,
        renewed: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<(), Refusal> {
        let mut serials = vec![cert.serial.clone()];
        let renewing = match (&with, renewed) {
            (IssuedWith::Renewal, Some(old)) => {
                serials.push(old.to_owned());
                Some(old)
            }
            _ => None,
        };
        let record = NodeRecord {
            node: node.to_owned(),
            serials,
            not_after: Some(cert.not_after),
            issued_at: Some(now),
            issued_with: with,
            revoked_at: None,
            last_expiry: Some(cert.not_after),
        };
        self.put_node_record(&record, renewing).await
    }

    /// Revokes `node`: none of its certificates is accepted from now on, to
    /// connect or to renew. Its Node object is the caller's to delete (which
    /// ends its session).
    pub async fn revoke_node(&self, node: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        let record = NodeRecord::revoked(node, now);
        self.put_node_record(&record, None).await.map_err(|e| match e {
            Refusal::Store(e) => e,
            other => StoreError::BadRequest(other.to_string()),
        })?;
        tracing::warn!(node, "node certificates revoked");
        Ok(())
    }

    /// Writes `record`, keeping the latest expiry the record it replaces
    /// covered. With `renewing`, only if the current record still accepts
    /// that certificate.
    async fn put_node_record(&self, record: &NodeRecord, renewing: Option<&str>) -> Result<(), Refusal> {
        self.ensure_namespaces().await?;
        match self.store.create(&SECRETS, record.to_secret()).await {
            Ok(_) => Ok(()),
            Err(StoreError::AlreadyExists { .. }) => self
                .store
                .update_with(&SECRETS, NODE_NAMESPACE, &record.node, |cur| {
                    let mut v = cur.to_value()?;
                    let old = NodeRecord::from_secret(&v).ok();
                    if let Some(serial) = renewing {
                        let accepted = old
                            .as_ref()
                            .is_some_and(|o| o.revoked_at.is_none() && o.serials.iter().any(|s| s == serial));
                        if !accepted {
                            return Err(Refusal::CertificateRevoked(format!(
                                "the certificate of node {:?} (serial {serial}) was revoked or replaced while it was \
                                 being renewed",
                                record.node
                            )));
                        }
                    }
                    let mut new = record.clone();
                    new.last_expiry = crate::records::later(record.spent_after(), old.and_then(|o| o.spent_after()));
                    let secret = new.to_secret();
                    v["type"] = secret["type"].clone();
                    v["data"] = secret["data"].clone();
                    Ok(Some(v))
                })
                .await
                .map(|_| ()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes the records of nodes whose every certificate the record
    /// covered has expired at `now` (past [`NodeRecord::spent_after`]): they
    /// refuse nothing any more, and a node name that joined once must not
    /// hold memory forever. A record that does not read is kept (it
    /// refuses the node's certificates); one changed meanwhile (a new
    /// join) is not touched. Returns how many went.
    pub async fn clean_spent_node_records(&self, now: OffsetDateTime) -> Result<usize, StoreError> {
        let mut opts =
            ListOptions { namespace: Some(NODE_NAMESPACE.into()), limit: RECORDS_PAGE, ..ListOptions::default() };
        let mut gone = 0;
        loop {
            let page = self.store.list(&SECRETS, &opts).await?;
            for obj in &page.items {
                let Ok(record) = node_record_of(obj) else { continue };
                if record.spent_after().is_none_or(|t| t > now) {
                    continue;
                }
                let unchanged = DeleteOptions {
                    uid: obj.uid().map(str::to_owned),
                    resource_version: Some(obj.rev()),
                    ..DeleteOptions::default()
                };
                match self.store.delete(&SECRETS, NODE_NAMESPACE, obj.name(), &unchanged).await {
                    Ok(_) => {
                        tracing::info!(
                            node = obj.name(),
                            "a node's certificate record removed: all its certificates expired"
                        );
                        gone += 1;
                    }
                    Err(StoreError::NotFound { .. } | StoreError::Conflict { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            match page.continue_token {
                Some(t) => opts.continue_token = Some(t),
                None => return Ok(gone),
            }
        }
    }
}

/// Node records read at a time by a cleanup.
const RECORDS_PAGE: usize = 1000;

/// A stored node record, read; why not, as text.
fn node_record_of(obj: &edgehive_store::Object) -> Result<NodeRecord, String> {
    obj.value().map_err(|e| e.to_string()).and_then(|v| NodeRecord::from_secret(v).map_err(|e| e.to_string()))
}
