//! Join tokens and node certificate records against a real store: what a
//! token holder may get, what a revoked or replaced certificate may not do.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use edgehive_credentials::records::{IssuedWith, NODE_NAMESPACE, TOKEN_NAMESPACE};
use edgehive_credentials::{Credentials, Refusal, TokenSpec};
use edgehive_pki::{Ca, CertificateId, TokenClaims};
use edgehive_store::resources::{NODES, SECRETS};
use edgehive_store::{BackendConfig, DeleteOptions, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use serde_json::json;
use time::OffsetDateTime;

struct Fixture {
    creds: Credentials,
    store: Store,
    _dir: TempDir,
}

async fn fixture() -> Fixture {
    let dir = TempDir::new("credentials");
    let store =
        Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
            .await
            .unwrap();
    let ca = Arc::new(Ca::generate("credentials-test-ca").unwrap());
    Fixture { creds: Credentials::new(store.clone(), ca), store, _dir: dir }
}

fn spec(ttl: Duration, rejoin: &[&str]) -> TokenSpec {
    TokenSpec { ttl, description: "test".into(), rejoin_nodes: rejoin.iter().map(|s| s.to_string()).collect() }
}

fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// The claims the join service reads from a token.
fn claims(f: &Fixture, token: &str) -> TokenClaims {
    edgehive_pki::verify_token(f.creds.ca(), token, now()).unwrap()
}

fn cert(serial: &str, days: i64) -> CertificateId {
    CertificateId { serial: serial.into(), not_after: now() + time::Duration::days(days) }
}

async fn register(f: &Fixture, node: &str) {
    f.store.create(&NODES, json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})).await.unwrap();
}

#[tokio::test]
async fn a_token_is_accepted_while_its_record_lives() {
    let f = fixture().await;
    let (token, record) = f.creds.create_token(&spec(Duration::from_secs(3600), &[]), now()).await.unwrap();
    assert!(edgehive_pki::is_token_id(&record.id));
    assert!(record.created.is_some());
    let c = claims(&f, &token);
    assert_eq!(c.id.as_deref(), Some(record.id.as_str()));
    let grant = f.creds.authorize_join(&c, "edge-1", now()).await.unwrap();
    assert_eq!(grant.token_id, record.id);
    assert!(!grant.takes_over);

    let listed = f.creds.list_tokens().await.unwrap();
    assert_eq!(listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), [record.id.as_str()]);
    // Stored as a Kubernetes bootstrap token Secret.
    let secret = f.store.get(&SECRETS, TOKEN_NAMESPACE, &format!("bootstrap-token-{}", record.id)).await.unwrap();
    assert_eq!(secret.value().unwrap()["type"], "bootstrap.kubernetes.io/token");

    assert!(f.creds.revoke_token(&record.id).await.unwrap());
    assert!(!f.creds.revoke_token(&record.id).await.unwrap(), "already gone");
    let refused = f.creds.authorize_join(&c, "edge-1", now()).await.unwrap_err();
    assert!(matches!(refused, Refusal::UnknownToken(_)), "{refused}");
    assert!(refused.to_string().contains("unknown"), "{refused}");
    assert!(f.creds.list_tokens().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_token_without_an_id_or_record_or_past_its_record_is_refused() {
    let f = fixture().await;
    // Signed by the CA, but never recorded (as every token made before records).
    let unrecorded = edgehive_pki::issue_token(f.creds.ca(), "zzzzzz", now(), Duration::from_secs(3600));
    let e = f.creds.authorize_join(&claims(&f, &unrecorded), "edge-1", now()).await.unwrap_err();
    assert!(matches!(e, Refusal::UnknownToken(_)), "{e}");
    let mut no_id: TokenClaims = claims(&f, &unrecorded);
    no_id.id = None;
    let e = f.creds.authorize_join(&no_id, "edge-1", now()).await.unwrap_err();
    assert!(e.to_string().contains("no id"), "{e}");

    // The record's expiry counts, whatever the token says: an admin may
    // shorten it.
    let (token, record) = f.creds.create_token(&spec(Duration::from_secs(3600), &[]), now()).await.unwrap();
    let later = now() + time::Duration::hours(2);
    let e = f.creds.authorize_join(&claims(&f, &token), "edge-1", later).await.unwrap_err();
    assert!(matches!(e, Refusal::Expired { .. }), "{e}");
    assert_eq!(f.creds.clean_expired_tokens(later).await.unwrap(), 1);
    assert!(f.creds.list_tokens().await.unwrap().is_empty());
    let _ = record;

    // A damaged record is logged and refuses, never accepts.
    let (token, record) = f.creds.create_token(&spec(Duration::from_secs(3600), &[]), now()).await.unwrap();
    f.store
        .update_with::<_, edgehive_store::StoreError>(
            &SECRETS,
            TOKEN_NAMESPACE,
            &format!("bootstrap-token-{}", record.id),
            |cur| {
                let mut v = cur.to_value()?;
                v["data"]["expiration"] = json!("!!!");
                Ok(Some(v))
            },
        )
        .await
        .unwrap();
    let e = f.creds.authorize_join(&claims(&f, &token), "edge-1", now()).await.unwrap_err();
    assert!(matches!(e, Refusal::UnknownToken(_)), "{e}");
}

#[tokio::test]
async fn a_token_may_not_take_over_a_registered_node_with_a_live_certificate() {
    let f = fixture().await;
    // Long-lived, so that it is still valid when the node's certificate is not.
    let (token, _) = f.creds.create_token(&spec(Duration::from_secs(200 * 86400), &[]), now()).await.unwrap();
    let c = claims(&f, &token);
    // edge-1 joined and registered.
    f.creds.record_issued("edge-1", &cert("a1", 90), IssuedWith::Token("first1".into()), None, now()).await.unwrap();
    register(&f, "edge-1").await;
    let e = f.creds.authorize_join(&c, "edge-1", now()).await.unwrap_err();
    assert!(matches!(e, Refusal::NodeTaken { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("kubectl delete node edge-1") && text.contains("--rejoin edge-1"), "{text}");
    // Another name is fine.
    assert!(f.creds.authorize_join(&c, "edge-2", now()).await.is_ok());

    // A token an admin made for it may.
    let (rejoin, _) = f.creds.create_token(&spec(Duration::from_secs(3600), &["edge-1"]), now()).await.unwrap();
    let grant = f.creds.authorize_join(&claims(&f, &rejoin), "edge-1", now()).await.unwrap();
    assert!(grant.takes_over);

    // The certificate expired: not live, so the node may rejoin.
    assert!(f.creds.authorize_join(&c, "edge-1", now() + time::Duration::days(91)).await.is_ok());
    // The Node deleted first: allowed.
    f.store.delete(&NODES, "", "edge-1", &DeleteOptions::default()).await.unwrap();
    assert!(f.creds.authorize_join(&c, "edge-1", now()).await.is_ok());
    // Revoked and registered again: allowed (the revocation ended the old holder).
    register(&f, "edge-1").await;
    f.creds.revoke_node("edge-1", now()).await.unwrap();
    assert!(f.creds.authorize_join(&c, "edge-1", now()).await.is_ok());
    // A registered node without a record (created by an admin for a
    // KubeEdge edge): nothing to protect yet.
    register(&f, "edge-3").await;
    assert!(f.creds.authorize_join(&c, "edge-3", now()).await.is_ok());
}

#[tokio::test]
async fn only_the_recorded_certificates_of_a_node_are_accepted() {
    let f = fixture().await;
    // No record: accepted (certificates issued before records, or by a test CA).
    f.creds.check_certificate("edge-1", "ff").await.unwrap();
    f.creds.record_issued("edge-1", &cert("a1", 90), IssuedWith::Token("abc123".into()), None, now()).await.unwrap();
    f.creds.check_certificate("edge-1", "a1").await.unwrap();
    let e = f.creds.check_certificate("edge-1", "ff").await.unwrap_err();
    assert!(e.to_string().contains("replaced"), "{e}");
    // A renewal keeps the renewed one until the next.
    f.creds.record_issued("edge-1", &cert("b2", 90), IssuedWith::Renewal, Some("a1"), now()).await.unwrap();
    f.creds.check_certificate("edge-1", "a1").await.unwrap();
    f.creds.check_certificate("edge-1", "b2").await.unwrap();
    f.creds.record_issued("edge-1", &cert("c3", 90), IssuedWith::Renewal, Some("b2"), now()).await.unwrap();
    assert!(f.creds.check_certificate("edge-1", "a1").await.is_err());
    // A new join replaces them all.
    f.creds.record_issued("edge-1", &cert("d4", 90), IssuedWith::Token("abc123".into()), None, now()).await.unwrap();
    assert!(f.creds.check_certificate("edge-1", "c3").await.is_err());
    f.creds.check_certificate("edge-1", "d4").await.unwrap();
    // Revoked: nothing is.
    f.creds.revoke_node("edge-1", now()).await.unwrap();
    let e = f.creds.check_certificate("edge-1", "d4").await.unwrap_err();
    assert!(e.to_string().contains("revoked"), "{e}");
    let record = f.creds.node_record("edge-1").await.unwrap().unwrap();
    assert!(record.serials.is_empty() && record.revoked_at.is_some());
    // Other nodes are not touched.
    f.creds.record_issued("edge-2", &cert("e5", 90), IssuedWith::Token("abc123".into()), None, now()).await.unwrap();
    f.creds.check_certificate("edge-2", "e5").await.unwrap();
    // A damaged record locks the node out rather than letting anything in.
    f.store
        .update_with::<_, edgehive_store::StoreError>(&SECRETS, NODE_NAMESPACE, "edge-2", |cur| {
            let mut v = cur.to_value()?;
            v["type"] = json!("Opaque");
            Ok(Some(v))
        })
        .await
        .unwrap();
    assert!(f.creds.check_certificate("edge-2", "e5").await.is_err());
}

/// The attacker holds a certificate that is being revoked and asks for a
/// renewal at that moment: the renewal's check passes just before the
/// revocation lands, its record write comes after. The write sees the
/// revocation and refuses, so the revocation stands and the new
/// certificate is never accepted (the join service hands out nothing it
/// could not record). The same for a certificate replaced meanwhile.
#[tokio::test]
async fn a_renewal_that_races_a_revocation_does_not_undo_it() {
    let f = fixture().await;
    f.creds.record_issued("edge-1", &cert("a1", 90), IssuedWith::Token("abc123".into()), None, now()).await.unwrap();
    f.creds.check_certificate("edge-1", "a1").await.unwrap();
    f.creds.revoke_node("edge-1", now()).await.unwrap();
    let e = f.creds.record_issued("edge-1", &cert("b2", 90), IssuedWith::Renewal, Some("a1"), now()).await.unwrap_err();
    assert!(matches!(e, Refusal::CertificateRevoked(_)), "{e}");
    for serial in ["a1", "b2"] {
        let e = f.creds.check_certificate("edge-1", serial).await.unwrap_err();
        assert!(e.to_string().contains("revoked"), "{serial}: {e}");
    }
    // A new join brings it back; a renewal of the certificate it replaced
    // is refused, and the new one stays the only one.
    f.creds.record_issued("edge-1", &cert("c3", 90), IssuedWith::Token("abc123".into()), None, now()).await.unwrap();
    let e = f.creds.record_issued("edge-1", &cert("d4", 90), IssuedWith::Renewal, Some("a1"), now()).await.unwrap_err();
    assert!(matches!(e, Refusal::CertificateRevoked(_)), "{e}");
    assert_eq!(f.creds.node_record("edge-1").await.unwrap().unwrap().serials, vec!["c3".to_owned()]);
    // A renewal of the accepted one goes through.
    f.creds.record_issued("edge-1", &cert("e5", 90), IssuedWith::Renewal, Some("c3"), now()).await.unwrap();
    f.creds.check_certificate("edge-1", "e5").await.unwrap();
}

/// A node's record stays while any certificate it covered is valid — a
/// replaced one that outlives the newest, a revoked one — and goes once
/// they have all expired: a fleet whose names churn does not keep a record
/// per name forever. A record that does not say when (a revocation from
/// before expiries were kept) or does not read stays.
#[tokio::test]
async fn a_node_record_goes_once_every_certificate_it_covered_expired() {
    let f = fixture().await;
    let day = time::Duration::days(1);
    let t0 = now();
    let token = || IssuedWith::Token("abc123".into());
    f.creds.record_issued("short", &cert("a1", 1), token(), None, t0).await.unwrap();
    f.creds.record_issued("replaced", &cert("b1", 90), token(), None, t0).await.unwrap();
    f.creds.record_issued("replaced", &cert("b2", 30), token(), None, t0).await.unwrap();
    f.creds.record_issued("revoked", &cert("c1", 10), token(), None, t0).await.unwrap();
    f.creds.revoke_node("revoked", t0).await.unwrap();
    f.creds.record_issued("renewed", &cert("d1", 10), token(), None, t0).await.unwrap();
    f.creds.record_issued("renewed", &cert("d2", 20), IssuedWith::Renewal, Some("d1"), t0).await.unwrap();
    // A revocation as older versions stored it: no expiry at all.
    let mut old = edgehive_credentials::records::NodeRecord::revoked("old-revocation", t0);
    old.last_expiry = None;
    f.creds.ensure_namespaces().await.unwrap();
    f.store.create(&SECRETS, old.to_secret()).await.unwrap();
    f.creds.record_issued("damaged", &cert("e1", 1), token(), None, t0).await.unwrap();
    f.store
        .update_with::<_, edgehive_store::StoreError>(&SECRETS, NODE_NAMESPACE, "damaged", |cur| {
            let mut v = cur.to_value()?;
            v["data"]["last-expiry"] = json!("%%%");
            Ok(Some(v))
        })
        .await
        .unwrap();
    let records = || async {
        let list = f
            .store
            .list(
                &SECRETS,
                &edgehive_store::ListOptions { namespace: Some(NODE_NAMESPACE.into()), ..Default::default() },
            )
            .await
            .unwrap();
        list.items.iter().map(|o| o.name().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(f.creds.clean_spent_node_records(t0).await.unwrap(), 0);
    assert_eq!(f.creds.clean_spent_node_records(t0 + 2 * day).await.unwrap(), 1, "short's one certificate expired");
    assert_eq!(records().await, ["damaged", "old-revocation", "renewed", "replaced", "revoked"]);
    // The revoked one outlives the revocation by its certificate's life.
    assert_eq!(f.creds.clean_spent_node_records(t0 + 9 * day).await.unwrap(), 0);
    assert!(f.creds.check_certificate("revoked", "c1").await.is_err());
    assert_eq!(f.creds.clean_spent_node_records(t0 + 11 * day).await.unwrap(), 1);
    // The renewed certificate's 20 days, not the first one's 10; the
    // replaced first certificate's 90, not the newest's 30.
    assert_eq!(f.creds.clean_spent_node_records(t0 + 19 * day).await.unwrap(), 0);
    assert_eq!(f.creds.clean_spent_node_records(t0 + 21 * day).await.unwrap(), 1);
    assert_eq!(f.creds.clean_spent_node_records(t0 + 31 * day).await.unwrap(), 0);
    assert!(f.creds.check_certificate("replaced", "b1").await.is_err(), "the replaced certificate is still refused");
    assert_eq!(f.creds.clean_spent_node_records(t0 + 91 * day).await.unwrap(), 1);
    assert_eq!(f.creds.clean_spent_node_records(t0 + 1000 * day).await.unwrap(), 0);
    assert_eq!(records().await, ["damaged", "old-revocation"]);
}

#[tokio::test]
async fn the_published_kubeedge_token_joins_and_the_keeper_publishes_one_at_start() {
    let f = fixture().await;
    let id = f.creds.publish_kubeedge_token(now()).await.unwrap();
    let secret = f.store.get(&SECRETS, "kubeedge", "tokensecret").await.unwrap();
    let data = secret.value().unwrap()["data"]["tokendata"].as_str().unwrap().to_owned();
    use base64::Engine as _;
    let token = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).unwrap()).unwrap();
    let c = claims(&f, &token);
    assert_eq!(c.id.as_deref(), Some(id.as_str()));
    assert!(f.creds.authorize_join(&c, "edge-1", now()).await.is_ok());

    // The keeper publishes a fresh one when it starts.
    let stop = tokio_util::sync::CancellationToken::new();
    let keeper = tokio::spawn({
        let (creds, stop) = (f.creds.clone(), stop.clone());
        async move { creds.keep_tokens(stop).await }
    });
    let published = |f: &Fixture| {
        let store = f.store.clone();
        async move {
            let v = store.get(&SECRETS, "kubeedge", "tokensecret").await.unwrap().value().unwrap().clone();
            v["data"]["tokendata"].as_str().unwrap().to_owned()
        }
    };
    let first = published(&f).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while published(&f).await == first {
        assert!(tokio::time::Instant::now() < deadline, "the keeper published a token at start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    keeper.await.unwrap();
    // Two tokens were made; both records exist.
    assert_eq!(f.creds.list_tokens().await.unwrap().len(), 2);
}
