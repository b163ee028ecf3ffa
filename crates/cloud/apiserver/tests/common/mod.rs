//! An API server in the test process on a free loopback port, over SQLite
//! in a temporary directory, with `kube` clients for the admin and for other
//! identities, and raw requests for what typed clients never send.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;

use bytes::Bytes;
use edgehive_apiserver::{ApiServer, ApiServerConfig};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use edgehive_testkit::fixtures::TempDir;
use http_body_util::BodyExt as _;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub(crate) struct Cluster {
    pub(crate) store: Store,
    pub(crate) addr: SocketAddr,
    pub(crate) dir: TempDir,
    pub(crate) kubeconfig: std::path::PathBuf,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Cluster {
    pub(crate) async fn start() -> Cluster {
        Cluster::start_with(|_| {}).await
    }

    pub(crate) async fn start_with(tune: impl FnOnce(&mut StoreConfig)) -> Cluster {
        let dir = TempDir::new("apiserver-test");
        let mut config = StoreConfig::new(BackendConfig::Sqlite { path: dir.path().join("state.db"), fsync: false });
        tune(&mut config);
        let store = Store::open(config).await.unwrap();
        let config = ApiServerConfig::new("127.0.0.1:0".parse().unwrap(), dir.path().to_path_buf());
        let server = ApiServer::bind(config, store.clone()).await.unwrap();
        let addr = server.local_addr();
        let kubeconfig = server.kubeconfig_path().to_path_buf();
        let stop = CancellationToken::new();
        let task = tokio::spawn(server.serve(stop.clone()));
        Cluster { store, addr, dir, kubeconfig, stop, task }
    }

    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
        self.store.close().await;
    }

    /// A `kube` client with the admin kubeconfig.
    pub(crate) async fn admin(&self) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// A client with a certificate from the cluster's CA for `user` in `groups`.
    pub(crate) async fn as_user(&self, user: &str, groups: &[&str]) -> kube::Client {
        let ca = edgehive_pki::Ca::load_or_create(&self.dir.path().join("tls"), "edgehive-ca").unwrap();
        let issued = ca.issue_client(user, groups, std::time::Duration::from_secs(3600)).unwrap();
        self.client_with(Some((issued.cert_pem, issued.key_pem))).await
    }

    /// A client presenting `token` as `Authorization: Bearer`, no certificate.
    pub(crate) async fn with_bearer(&self, token: &str) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let mut config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        config.auth_info.client_certificate_data = None;
        config.auth_info.client_key_data = None;
        config.auth_info.token = Some(token.to_owned().into());
        kube::Client::try_from(config).unwrap()
    }

    /// A client presenting no certificate at all.
    pub(crate) async fn anonymous(&self) -> kube::Client {
        self.client_with(None).await
    }

    async fn client_with(&self, identity: Option<(String, String)>) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).unwrap();
        let mut config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.unwrap();
        config.auth_info.client_certificate_data = None;
        config.auth_info.client_key_data = None;
        if let Some((cert, key)) = identity {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD;
            config.auth_info.client_certificate_data = Some(b64.encode(cert));
            config.auth_info.client_key_data = Some(b64.encode(key).into());
        }
        kube::Client::try_from(config).unwrap()
    }
}

/// A raw request's answer: status code and JSON body.
pub(crate) struct Answer {
    pub(crate) code: u16,
    pub(crate) body: Value,
    pub(crate) content_type: String,
}

/// Sends a raw request through `client`.
pub(crate) async fn raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: impl Into<Vec<u8>>,
) -> Answer {
    let mut req = http::Request::builder().method(method).uri(path);
    if !content_type.is_empty() {
        req = req.header(http::header::CONTENT_TYPE, content_type);
    }
    let req = req.body(kube::client::Body::from(body.into())).unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let content_type =
        resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes: Bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer { code, body, content_type }
}

/// GET with an `Accept` header.
pub(crate) async fn get_accept(client: &kube::Client, path: &str, accept: &str) -> Answer {
    let req = http::Request::builder()
        .method("GET")
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let content_type =
        resp.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let bytes: Bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Answer { code, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null), content_type }
}
