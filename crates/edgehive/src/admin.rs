//! The admin commands' client of the running cloud's API (`edgehive token`,
//! `edgehive node`): the kubeconfig `edgehive cloud` writes in its data
//! directory (server, CA, admin certificate), one HTTPS/1.1 request per
//! call with a deadline.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

/// Deadline of one request, connection included.
const DEADLINE: Duration = Duration::from_secs(15);
/// Largest answer read.
const MAX_BODY: usize = 16 << 20;

/// A client of the cloud's API as its admin.
pub(crate) struct AdminClient {
    host: String,
    port: u16,
    tls: Arc<rustls::ClientConfig>,
}

/// The base64 field `key` of the kubeconfig's first entry of `list`.
fn pem_field(config: &Value, list: &str, inner: &str, key: &str) -> anyhow::Result<Vec<u8>> {
    let text = config
        .pointer(&format!("/{list}/0/{inner}/{key}"))
        .and_then(Value::as_str)
        .with_context(|| format!("the kubeconfig has no {list}[0].{inner}.{key}"))?;
    base64::engine::general_purpose::STANDARD.decode(text.trim()).with_context(|| format!("{key} is not base64"))
}

/// What a kubeconfig written by `edgehive cloud` says: the server, its
/// CA, and the admin's client certificate and key.
pub(crate) struct Kubeconfig {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) ca: CertificateDer<'static>,
    pub(crate) cert: CertificateDer<'static>,
    pub(crate) key: PrivateKeyDer<'static>,
}

impl Kubeconfig {
    /// Reads `path`.
    pub(crate) fn read(path: &Path) -> anyhow::Result<Kubeconfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        let config: Value =
            serde_saphyr::from_str(&text).with_context(|| format!("{} is not a kubeconfig", path.display()))?;
        let server = config
            .pointer("/clusters/0/cluster/server")
            .and_then(Value::as_str)
            .context("the kubeconfig names no server")?;
        let authority = server.strip_prefix("https://").context("the server is not https://")?.trim_end_matches('/');
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h.trim_start_matches('[').trim_end_matches(']').to_owned(), p.parse().context("port")?),
            None => (authority.to_owned(), 443),
        };
        let ca =
            CertificateDer::from_pem_slice(&pem_field(&config, "clusters", "cluster", "certificate-authority-data")?)
                .context("the CA certificate")?;
        let cert = CertificateDer::from_pem_slice(&pem_field(&config, "users", "user", "client-certificate-data")?)
            .context("the client certificate")?;
        let key = PrivateKeyDer::from_pem_slice(&pem_field(&config, "users", "user", "client-key-data")?)
            .context("the client key")?;
        Ok(Kubeconfig { host, port, ca, cert, key })
    }
}

impl AdminClient {
    /// The client `data_dir/kubeconfig.yaml` describes.
    pub(crate) fn from_data_dir(data_dir: &Path) -> anyhow::Result<AdminClient> {
        let path = data_dir.join("kubeconfig.yaml");
        if !path.exists() {
            bail!("no {} (start `edgehive cloud --data-dir {}` first)", path.display(), data_dir.display());
        }
        let Kubeconfig { host, port, ca, cert, key } = Kubeconfig::read(&path)?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca).context("the CA certificate")?;
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(vec![cert], key)
            .context("the client certificate")?;
        Ok(AdminClient { host, port, tls: Arc::new(tls) })
    }

    /// One request; the answer's status and JSON body (`Null` when empty).
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let what = format!("{method} https://{}:{}{path}", self.host, self.port);
        tokio::time::timeout(DEADLINE, self.exchange(method, path, body))
            .await
            .with_context(|| format!("{what}: no answer within {DEADLINE:?}"))?
            .with_context(|| what.clone())
    }

    async fn exchange(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<(StatusCode, Value)> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port)).await.context("connect")?;
        let name = ServerName::try_from(self.host.clone()).context("server name")?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls)).connect(name, tcp).await.context("TLS")?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
        let driver = tokio::spawn(conn);
        let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, format!("{}:{}", self.host, self.port))
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(bytes))?;
        let answer = async {
            let response = sender.send_request(request).await?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| anyhow::anyhow!("reading the answer: {e}"))?
                .to_bytes();
            anyhow::Ok((status, body))
        }
        .await;
        driver.abort();
        let (status, body) = answer?;
        let value = if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).context("the answer")? };
        Ok((status, value))
    }

    /// A request that must succeed: the body of a 2xx answer, else the
    /// API's message as the error.
    pub(crate) async fn expect(&self, method: Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let (status, value) = self.call(method, path, body).await?;
        if !status.is_success() {
            let message = value.get("message").and_then(Value::as_str).unwrap_or_default();
            bail!("the cloud answered {status}: {message}");
        }
        Ok(value)
    }
}
