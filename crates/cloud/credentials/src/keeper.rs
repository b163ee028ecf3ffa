//! The token KubeEdge's tools read (`keadm gettoken` reads the Secret
//! `kubeedge/tokensecret`, key `tokendata`), kept fresh, and expired token
//! records and spent node certificate records cleaned up.

use std::time::Duration;

use base64::Engine as _;
use edgehive_store::StoreError;
use edgehive_store::resources::{NAMESPACES, SECRETS};
use serde_json::json;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::{Credentials, TokenSpec};

/// Namespace and name of KubeEdge's token Secret.
pub const KUBEEDGE_TOKEN_SECRET: (&str, &str) = ("kubeedge", "tokensecret");

/// How often the published token is replaced (KubeEdge's
/// `tokenRefreshDuration`, 12 h); each lives twice as long.
pub const REFRESH: Duration = edgehive_pki::TOKEN_REFRESH;

/// How often the keeper looks: a revoked published token is replaced, and
/// expired records removed, within this.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(600);

/// What the keeper decides, given the time: whether the published token
/// must be replaced. A plain struct, so the schedule is tested without a
/// clock.
#[derive(Debug, Default)]
pub struct Schedule {
    /// The published token's id and when it was made.
    current: Option<(String, OffsetDateTime)>,
}

impl Schedule {
    /// The published token's id.
    pub fn current(&self) -> Option<&str> {
        self.current.as_ref().map(|(id, _)| id.as_str())
    }

    /// True when a new token is due at `now`: none yet, or the current one
    /// is a refresh interval old.
    pub fn due(&self, now: OffsetDateTime) -> bool {
        match &self.current {
            None => true,
            Some((_, made)) => now >= *made + REFRESH,
        }
    }

    /// The published token is `id`, made at `now`.
    pub fn published(&mut self, id: String, now: OffsetDateTime) {
        self.current = Some((id, now));
    }

    /// The published token was revoked: a new one is due.
    pub fn revoked(&mut self) {
        self.current = None;
    }

    /// How long to wait before looking again.
    pub fn wait(&self, now: OffsetDateTime) -> Duration {
        let until_refresh = self
            .current
            .as_ref()
            .and_then(|(_, made)| Duration::try_from(*made + REFRESH - now).ok())
            .unwrap_or(Duration::ZERO);
        until_refresh.clamp(Duration::from_secs(1), CHECK_INTERVAL)
    }
}

impl Credentials {
    /// Publishes a new token in `kubeedge/tokensecret`; returns its id.
    pub async fn publish_kubeedge_token(&self, now: OffsetDateTime) -> Result<String, StoreError> {
        let spec = TokenSpec {
            ttl: 2 * REFRESH,
            description: "published in Secret kubeedge/tokensecret for KubeEdge's tools".into(),
            rejoin_nodes: Vec::new(),
        };
        let (token, record) = self.create_token(&spec, now).await?;
        let (ns, name) = KUBEEDGE_TOKEN_SECRET;
        let store = self.store();
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        match store.create(&NAMESPACES, namespace).await {
            Ok(_) | Err(StoreError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
        let data = base64::engine::general_purpose::STANDARD.encode(&token);
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": ns}, "data": {"tokendata": data}});
        match store.create(&SECRETS, secret).await {
            Ok(_) => {}
            Err(StoreError::AlreadyExists { .. }) => {
                store
                    .update_with(&SECRETS, ns, name, |cur| {
                        let mut v = cur.to_value()?;
                        v["data"]["tokendata"] = json!(data);
                        Ok(Some(v))
                    })
                    .await?;
            }
            Err(e) => return Err(e),
        }
        Ok(record.id)
    }

    /// Keeps `kubeedge/tokensecret` fresh (a new token at start, every
    /// [`REFRESH`], and soon after the published one is revoked) and deletes
    /// expired token records and spent node records, until `stop`.
    pub async fn keep_tokens(&self, stop: CancellationToken) {
        let mut schedule = Schedule::default();
        loop {
            let now = OffsetDateTime::now_utc();
            if let Some(id) = schedule.current()
                && let Ok(false) = self.token_exists(id).await
            {
                tracing::info!(token = %id, "the published join token was revoked; publishing a new one");
                schedule.revoked();
            }
            if schedule.due(now) {
                match self.publish_kubeedge_token(now).await {
                    Ok(id) => schedule.published(id, now),
                    Err(e) => tracing::warn!(error = %e, "publish a join token in kubeedge/tokensecret"),
                }
            }
            match self.clean_expired_tokens(now).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(removed = n, "expired join token records removed"),
                Err(e) => tracing::warn!(error = %e, "remove expired join token records"),
            }
            match self.clean_spent_node_records(now).await {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(removed = n, "certificate records of nodes whose certificates all expired removed")
                }
                Err(e) => tracing::warn!(error = %e, "remove spent node certificate records"),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(schedule.wait(now)) => {}
            }
        }
    }

    async fn token_exists(&self, id: &str) -> Result<bool, StoreError> {
        match self.store().get(&SECRETS, crate::records::TOKEN_NAMESPACE, &crate::records::token_secret_name(id)).await
        {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_refreshes_every_interval_and_after_a_revocation() {
        let t0 = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let mut s = Schedule::default();
        assert!(s.due(t0));
        assert_eq!(s.wait(t0), Duration::from_secs(1));
        s.published("abc123".into(), t0);
        assert!(!s.due(t0 + time::Duration::hours(11)));
        assert_eq!(s.wait(t0), CHECK_INTERVAL);
        assert_eq!(s.wait(t0 + time::Duration::hours(12) - time::Duration::seconds(30)), Duration::from_secs(30));
        assert!(s.due(t0 + time::Duration::hours(12)));
        s.revoked();
        assert!(s.due(t0 + time::Duration::hours(1)));
        assert_eq!(s.current(), None);
    }
}
