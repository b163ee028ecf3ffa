//! Joining a real join server (edgehive-join on 127.0.0.1): a token gets a
//! certificate; a bad token, another cloud's token or a forged one get
//! nothing and write nothing; renewal over mutual TLS keeps the key; the
//! keeper renews a certificate past its renewal point at once.
#![allow(clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use edgehive_credentials::{Credentials, TokenSpec};
use edgehive_edgehub::{CertError, CertFiles, EdgeCerts, certs};
use edgehive_join::{JoinConfig, JoinServer};
use edgehive_pki::{Ca, TOKEN_VALIDITY, issue_token};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(15);

struct Cloud {
    ca: Arc<Ca>,
    url: String,
    /// A join token the cloud has a record of.
    token: String,
    _stop: tokio_util::sync::DropGuard,
    _dir: TempDir,
}

async fn cloud(validity: Duration) -> Cloud {
    let dir = TempDir::new("edge-join-cloud");
    let store =
        Store::open(StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false }))
            .await
            .unwrap();
    let ca = Arc::new(Ca::generate("edge-join-test").unwrap());
    let credentials = Arc::new(Credentials::new(store, Arc::clone(&ca)));
    let spec = TokenSpec { ttl: TOKEN_VALIDITY, description: String::new(), rejoin_nodes: Vec::new() };
    let (token, _) = credentials.create_token(&spec, OffsetDateTime::now_utc()).await.unwrap();
    let serving = ca.issue_server("cloud", &["127.0.0.1".to_string()], Duration::from_secs(86400)).unwrap();
    let mut cfg = JoinConfig::new((Ipv4Addr::LOCALHOST, 0).into());
    cfg.cert_validity = validity;
    let server = JoinServer::bind(cfg, credentials, (vec![serving.cert_der], serving.key_der)).await.unwrap();
    let url = format!("https://127.0.0.1:{}", server.local_addr().port());
    let stop = CancellationToken::new();
    tokio::spawn(server.serve(stop.clone()));
    Cloud { ca, url, token, _stop: stop.drop_guard(), _dir: dir }
}

/// A token signed by `ca` (recorded by no cloud).
fn signed_token(ca: &Ca) -> String {
    issue_token(ca, "abc123", OffsetDateTime::now_utc(), TOKEN_VALIDITY)
}

#[tokio::test]
async fn a_token_gets_a_node_certificate_kept_with_a_private_key() {
    let c = cloud(Duration::from_secs(86400)).await;
    let dir = TempDir::new("edge-join");
    let files = CertFiles::under(&dir.path().join("certs"));
    let got = certs::join(&c.url, "edge-1", &c.token, &files, DEADLINE).await.unwrap();
    assert_eq!(got.node_name().as_deref(), Some("edge-1"));
    assert_eq!(got.ca, *c.ca.cert_der());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&files.key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "key file mode");
    }
    // A later start reads the same material back.
    let loaded = EdgeCerts::load(&files).unwrap().unwrap();
    assert_eq!(loaded.cert, got.cert);
    assert_eq!(loaded.key.secret_der(), got.key.secret_der());
}

#[tokio::test]
async fn bad_tokens_get_nothing_and_write_nothing() {
    let c = cloud(Duration::from_secs(86400)).await;
    let other = Ca::generate("another-cloud").unwrap();
    let dir = TempDir::new("edge-join-bad");
    let files = CertFiles::under(dir.path());
    let good = c.token.clone();
    let expired = issue_token(&c.ca, "abc123", OffsetDateTime::now_utc() - time::Duration::days(2), TOKEN_VALIDITY);

    let e = certs::join(&c.url, "edge-1", &signed_token(&other), &files, DEADLINE).await.unwrap_err();
    assert!(matches!(e, CertError::CaMismatch { .. }), "{e}");
    // The right CA hash with another cloud's signature.
    let forged = format!("{}.{}", good.split_once('.').unwrap().0, signed_token(&other).split_once('.').unwrap().1);
    let e = certs::join(&c.url, "edge-1", &forged, &files, DEADLINE).await.unwrap_err();
    assert!(matches!(e, CertError::Refused { status: 401, .. }), "{e}");
    let e = certs::join(&c.url, "edge-1", &expired, &files, DEADLINE).await.unwrap_err();
    assert!(matches!(e, CertError::Refused { status: 401, .. }), "{e}");
    let e = certs::join(&c.url, "edge-1", "not-a-token", &files, DEADLINE).await.unwrap_err();
    assert!(matches!(e, CertError::Token(_)), "{e}");
    assert!(e.to_string().starts_with("join token:"), "{e}");
    assert!(EdgeCerts::load(&files).unwrap().is_none());
    assert!(!files.key.exists() && !files.cert.exists());
}

#[tokio::test]
async fn renewal_over_mutual_tls_keeps_the_key() {
    let c = cloud(Duration::from_secs(86400)).await;
    let dir = TempDir::new("edge-renew");
    let files = CertFiles::under(dir.path());
    let first = certs::join(&c.url, "edge-1", &c.token, &files, DEADLINE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let renewed = certs::renew(&c.url, "edge-1", &first, &files, DEADLINE).await.unwrap();
    assert_ne!(renewed.cert, first.cert);
    assert!(renewed.not_after > first.not_after);
    assert_eq!(renewed.key.secret_der(), first.key.secret_der());
    assert_eq!(renewed.node_name().as_deref(), Some("edge-1"));
    assert_eq!(EdgeCerts::load(&files).unwrap().unwrap().cert, renewed.cert);
}

#[tokio::test]
async fn the_keeper_renews_a_certificate_past_its_renewal_point_at_once() {
    // The certificate is backdated 5 minutes and valid for 30 s after
    // issue: 70-90 % of its lifetime is already behind it, as after a long
    // time offline.
    let c = cloud(Duration::from_secs(30)).await;
    let dir = TempDir::new("edge-keeper");
    let files = CertFiles::under(dir.path());
    let first = certs::join(&c.url, "edge-1", &c.token, &files, DEADLINE).await.unwrap();
    let first_cert = first.cert.clone();
    let (tx, mut rx) = tokio::sync::watch::channel(Arc::new(first));
    let stop = CancellationToken::new();
    let keeper = tokio::spawn(certs::keep_renewed(c.url.clone(), "edge-1".into(), files.clone(), tx, stop.clone()));
    tokio::time::timeout(DEADLINE, rx.changed()).await.expect("renewed in time").unwrap();
    assert_ne!(rx.borrow().cert, first_cert);
    stop.cancel();
    tokio::time::timeout(DEADLINE, keeper).await.unwrap().unwrap();
}
