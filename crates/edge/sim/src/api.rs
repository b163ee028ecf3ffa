//! The scenarios' client of the cloud's Kubernetes API: HTTPS/1.1 with the
//! admin's client certificate, connections kept and reused (a request per
//! connection would measure TLS handshakes, not the API), every request
//! with a deadline, and watches read as a stream of JSON lines.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

use crate::SimError;

/// Largest answer read.
const MAX_BODY: usize = 64 << 20;
/// Connections kept idle for reuse.
const IDLE: usize = 64;

/// Where the API is and who asks.
#[derive(Debug)]
pub struct ApiTarget {
    /// Host name or address (checked against the serving certificate).
    pub host: String,
    /// Port.
    pub port: u16,
    /// The cloud's CA.
    pub ca: CertificateDer<'static>,
    /// The client certificate.
    pub cert: CertificateDer<'static>,
    /// Its key.
    pub key: PrivateKeyDer<'static>,
}

/// A client of the API.
pub struct Api {
    host: String,
    port: u16,
    tls: Arc<rustls::ClientConfig>,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    deadline: Duration,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("host", &self.host).field("port", &self.port).finish_non_exhaustive()
    }
}

/// A watch's events, one JSON object per line.
#[derive(Debug)]
pub struct Watch {
    body: hyper::body::Incoming,
    buf: Vec<u8>,
}

impl Watch {
    /// The next event (`{"type", "object"}`); `None` when the watch ended.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                match serde_json::from_slice(&line) {
                    Ok(v) => return Some(v),
                    Err(_) => continue,
                }
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.buf.extend_from_slice(&data);
            }
        }
    }
}

impl Api {
    /// A client of the API at `target`.
    pub fn new(target: ApiTarget) -> Result<Api, SimError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(target.ca).map_err(|e| SimError::Config(format!("the API's CA: {e}")))?;
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| SimError::Config(e.to_string()))?
            .with_root_certificates(roots)
            .with_client_auth_cert(vec![target.cert], target.key)
            .map_err(|e| SimError::Config(format!("the API client certificate: {e}")))?;
        Ok(Api {
            host: target.host,
            port: target.port,
            tls: Arc::new(tls),
            idle: Mutex::new(Vec::new()),
            deadline: Duration::from_secs(30),
        })
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, SimError> {
        let err =
            |what: &str, e: &dyn std::fmt::Display| SimError::Api(format!("{what} {}:{}: {e}", self.host, self.port));
        let tcp =
            tokio::net::TcpStream::connect((self.host.as_str(), self.port)).await.map_err(|e| err("connect to", &e))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(self.host.clone()).map_err(|e| err("server name", &e))?;
        let tls = tokio_rustls::TlsConnector::from(Arc::clone(&self.tls))
            .connect(name, tcp)
            .await
            .map_err(|e| err("TLS with", &e))?;
        let (sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| err("HTTP with", &e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    async fn sender(&self) -> Result<SendRequest<Full<Bytes>>, SimError> {
        loop {
            let kept = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match kept {
                Some(mut s) => {
                    if s.ready().await.is_ok() {
                        return Ok(s);
                    }
                }
                None => return self.connect().await,
            }
        }
    }

    fn build(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> Result<Request<Full<Bytes>>, SimError> {
        Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, format!("{}:{}", self.host, self.port))
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Full::new(body.map(|b| Bytes::from(b.to_string())).unwrap_or_default()))
            .map_err(|e| SimError::Api(e.to_string()))
    }

    /// One request; its status and JSON body (`Null` when empty).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), SimError> {
        self.call_as(method, path, body, "application/json").await
    }

    /// One request with the body's content type (a patch's).
    pub async fn call_as(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> Result<(StatusCode, Value), SimError> {
        let what = format!("{method} {path}");
        let request = self.build(method, path, body, content_type)?;
        let exchange = async {
            let mut sender = self.sender().await?;
            let response = sender.send_request(request).await.map_err(|e| SimError::Api(format!("{what}: {e}")))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| SimError::Api(format!("{what}: reading the answer: {e}")))?
                .to_bytes();
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE {
                idle.push(sender);
            }
            Ok::<_, SimError>((status, body))
        };
        let (status, body) = tokio::time::timeout(self.deadline, exchange)
            .await
            .map_err(|_| SimError::Api(format!("{what}: no answer within {:?}", self.deadline)))??;
        let value = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).map_err(|e| SimError::Api(format!("{what}: the answer is not JSON: {e}")))?
        };
        Ok((status, value))
    }

    /// A request that must succeed: the body of a 2xx answer, else the
    /// API's message as the error.
    pub async fn expect(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Value, SimError> {
        let (status, value) = self.call(method.clone(), path, body).await?;
        if !status.is_success() {
            let message = value.get("message").and_then(Value::as_str).unwrap_or_default();
            return Err(SimError::Api(format!("{method} {path}: {status}: {message}")));
        }
        Ok(value)
    }

    /// Starts a watch (`path` with `watch=1`) on its own connection.
    pub async fn watch(&self, path: &str) -> Result<Watch, SimError> {
        let mut sender = self.connect().await?;
        let request = self.build(Method::GET, path, None, "application/json")?;
        let response = tokio::time::timeout(self.deadline, sender.send_request(request))
            .await
            .map_err(|_| SimError::Api(format!("watch {path}: no answer")))?
            .map_err(|e| SimError::Api(format!("watch {path}: {e}")))?;
        if !response.status().is_success() {
            return Err(SimError::Api(format!("watch {path}: {}", response.status())));
        }
        Ok(Watch { body: response.into_body(), buf: Vec::new() })
    }

    /// The sum of the samples of metric `name` on the cloud's `/metrics`
    /// whose labels include each of `labels` (`None` when it has none).
    pub async fn metric(&self, name: &str, labels: &[&str]) -> Result<Option<f64>, SimError> {
        let request = self.build(Method::GET, "/metrics", None, "application/json")?;
        let mut sender = self.sender().await?;
        let response = tokio::time::timeout(self.deadline, sender.send_request(request))
            .await
            .map_err(|_| SimError::Api("GET /metrics: no answer".into()))?
            .map_err(|e| SimError::Api(format!("GET /metrics: {e}")))?;
        let body = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| SimError::Api(format!("GET /metrics: {e}")))?
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        let mut found = None;
        for l in text.lines() {
            if l.starts_with(name)
                && l[name.len()..].starts_with(['{', ' '])
                && labels.iter().all(|x| l.contains(x))
                && let Some(v) = l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
            {
                found = Some(found.unwrap_or(0.0) + v);
            }
        }
        Ok(found)
    }
}
