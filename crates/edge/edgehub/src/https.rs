//! The small HTTPS client the join and renewal requests use: one request per
//! connection, a deadline on the whole exchange, answers capped at 1 MiB.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::certs::CertError;

/// Largest answer read (KubeEdge's `MaxRespBodyLength`).
pub(crate) const MAX_BODY: usize = 1 << 20;

/// Whose server certificate is accepted.
#[derive(Debug)]
pub(crate) enum Trust<'a> {
    /// Any: only for downloading the CA, whose hash the token pins.
    Any,
    /// Chains to this CA, with the host name checked.
    Ca(&'a CertificateDer<'static>),
}

/// `https://host:port` split into what a connection needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Endpoint {
    /// Parses `https://host:port` (KubeEdge's `httpServer`); the port
    /// defaults to 10002.
    pub(crate) fn parse(url: &str) -> Result<Endpoint, CertError> {
        let bad = |why: &str| CertError::Config(format!("httpServer {url:?}: {why}"));
        let rest = url.strip_prefix("https://").ok_or_else(|| bad("must start with https://"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("unclosed ["))?;
            (h.to_owned(), after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (authority.to_owned(), None),
            }
        };
        let port = match port {
            Some(p) => p.parse().map_err(|_| bad("the port is not a number"))?,
            None => 10002,
        };
        Ok(Endpoint { host, port })
    }
}

/// A client identity: certificate chain and key.
pub(crate) type ClientCert<'a> = (&'a [CertificateDer<'static>], &'a PrivateKeyDer<'static>);

/// One request; the answer's status and body.
pub(crate) async fn exchange(
    endpoint: &Endpoint,
    trust: Trust<'_>,
    client: Option<ClientCert<'_>>,
    request: Request<Full<Bytes>>,
    deadline: Duration,
) -> Result<(u16, Bytes), CertError> {
    let what = format!("https://{}:{}{}", endpoint.host, endpoint.port, request.uri());
    let work = async {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| CertError::Tls(e.to_string()))?;
        let builder = match trust {
            Trust::Any => builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyServer(provider))),
            Trust::Ca(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(ca.clone()).map_err(|e| CertError::Tls(format!("CA certificate: {e}")))?;
                builder.with_root_certificates(roots)
            }
        };
        let config = match client {
            Some((chain, key)) => builder
                .with_client_auth_cert(chain.to_vec(), key.clone_key())
                .map_err(|e| CertError::Tls(format!("client certificate: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        let name = ServerName::try_from(endpoint.host.clone())
            .map_err(|e| CertError::Config(format!("server name {:?}: {e}", endpoint.host)))?;
        let tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|e| CertError::Http(format!("connect: {e}")))?;
        let tls = TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(|e| CertError::Http(format!("TLS handshake: {e}")))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| CertError::Http(e.to_string()))?;
        let driver = tokio::spawn(conn);
        let response = sender.send_request(request).await.map_err(|e| CertError::Http(e.to_string()));
        let result = match response {
            Ok(response) => {
                let status = response.status().as_u16();
                let body = Limited::new(response.into_body(), MAX_BODY)
                    .collect()
                    .await
                    .map_err(|e| CertError::Http(format!("reading the answer: {e}")))?
                    .to_bytes();
                Ok((status, body))
            }
            Err(e) => Err(e),
        };
        driver.abort();
        result
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(e.context(&what)),
        Err(_) => Err(CertError::Http(format!("{what}: no answer within {deadline:?}"))),
    }
}

/// Accepts any server certificate (signatures are still checked, so the
/// server holds the certificate's key). Used for `/ca.crt` only, as
/// KubeEdge does; the token's hash decides whether that CA is trusted.
#[derive(Debug)]
struct AnyServer(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("https://127.0.0.1:10002").unwrap();
        assert_eq!(e, Endpoint { host: "127.0.0.1".into(), port: 10002 });
        assert_eq!(Endpoint::parse("https://cloud.example/").unwrap().port, 10002);
        assert_eq!(Endpoint::parse("https://[::1]:443").unwrap().host, "::1");
        for bad in ["http://x:1", "https://", "https://x:port"] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
