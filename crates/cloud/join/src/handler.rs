//! One request: routing, then `/ca.crt` or `/edge.crt` (node name,
//! authentication, body limit, signing), and the refusals, each logged and
//! counted in one place.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use edgehive_credentials::{Credentials, JoinGrant, records::IssuedWith};
use edgehive_pki::{CertificateId, Identity, PkiError, verify_jwt};
use http::header::{ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, EXPECT, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use time::OffsetDateTime;

use crate::JoinConfig;
use crate::headers::{self, CLIENT_AUTH, NODE_NAME, shorten};
use crate::stats::{JoinStats, RefusalReason};

/// The group every node certificate carries.
const NODES_GROUP: &str = "system:nodes";

/// Most bytes of an oversize body read and thrown away before answering
/// 413, so that a client still sending sees the answer instead of a reset
/// connection. They are never kept; past this, the connection is closed.
const DRAIN_LIMIT: usize = 4 << 20;
/// Longest time spent draining an oversize body.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// State every request reads.
#[derive(Debug)]
pub(crate) struct JoinState {
    /// The CA, the token records and the node certificate records.
    pub(crate) credentials: Arc<Credentials>,
    /// The CA certificate, DER, ready to send.
    pub(crate) ca_der: Bytes,
    pub(crate) config: JoinConfig,
    pub(crate) stats: Arc<JoinStats>,
}

/// The identity in the client certificate of the connection, when the
/// client sent one. rustls has verified it against the CA (chain, validity,
/// clientAuth usage) before the first request is read; an `Err` is a
/// verified certificate whose subject names no single user.
pub(crate) type ClientIdentity = Option<Result<(Identity, CertificateId), String>>;

/// Reads the identity and serial of a client certificate rustls verified.
pub(crate) fn client_identity(cert_der: &[u8]) -> Result<(Identity, CertificateId), String> {
    let identity = edgehive_pki::identity_of(cert_der).map_err(|e| e.to_string())?;
    let id = edgehive_pki::certificate_id(cert_der).map_err(|e| e.to_string())?;
    Ok((identity, id))
}

/// How a node proved who it is.
#[derive(Debug, Clone)]
enum Proof {
    /// A bearer join token with a record.
    Token(JoinGrant),
    /// A client certificate of this CA for the same node (renewal), still
    /// accepted: its serial.
    Certificate(String),
}

/// A request turned down: the status, the counter it goes to, and a one-line
/// message for the body and the log.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    reason: RefusalReason,
    message: String,
    /// Extra response headers (`Allow`, `WWW-Authenticate`, `Connection`).
    headers: Vec<(http::HeaderName, HeaderValue)>,
}

impl Refusal {
    fn new(status: StatusCode, reason: RefusalReason, message: impl Into<String>) -> Refusal {
        Refusal { status, reason, message: message.into(), headers: Vec::new() }
    }

    fn with_header(mut self, name: http::HeaderName, value: &'static str) -> Refusal {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }

    fn method_not_allowed(method: &Method, allow: &'static str) -> Refusal {
        let message = format!("method {method} is not allowed here; use {allow}");
        Refusal::new(StatusCode::METHOD_NOT_ALLOWED, RefusalReason::MethodNotAllowed, message).with_header(ALLOW, allow)
    }

    fn unauthorized(reason: RefusalReason, message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::UNAUTHORIZED, reason, message).with_header(WWW_AUTHENTICATE, "Bearer")
    }

    fn too_large(message: String) -> Refusal {
        Refusal::new(StatusCode::PAYLOAD_TOO_LARGE, RefusalReason::TooLarge, message).with_header(CONNECTION, "close")
    }

    fn into_response(self) -> Response<Full<Bytes>> {
        // One line, whatever a parser's message held.
        let line: String = self.message.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let mut response = Response::new(Full::new(Bytes::from(format!("{line}\n"))));
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        response
    }
}

/// A 200 carrying DER.
fn der_response(der: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(der));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    response
}

/// Answers one request. Every refusal is logged here, with the node, the
/// remote address and the reason, and counted.
pub(crate) async fn handle(
    shared: &JoinState,
    client: &ClientIdentity,
    remote: SocketAddr,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let node = req.headers().get(NODE_NAME).and_then(|v| v.to_str().ok()).map(|n| shorten(n).to_owned());
    let outcome = match path.as_str() {
        "/ca.crt" => ca_cert(shared, req.method()),
        "/edge.crt" => {
            let timeout = shared.config.request_timeout;
            match tokio::time::timeout(timeout, edge_cert(shared, client, remote, req)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(Refusal::new(
                    StatusCode::REQUEST_TIMEOUT,
                    RefusalReason::Timeout,
                    format!("the request was not received within {timeout:?}"),
                )
                .with_header(CONNECTION, "close")),
            }
        }
        _ => Err(Refusal::new(
            StatusCode::NOT_FOUND,
            RefusalReason::NotFound,
            format!("no such path {:?}; this server serves /ca.crt and /edge.crt", shorten(&path)),
        )),
    };
    let refusal = match outcome {
        Ok(response) => return response,
        Err(refusal) => refusal,
    };
    shared.stats.count_refused(refusal.reason);
    let node = node.as_deref().unwrap_or("");
    let (path, reason, status, message) =
        (shorten(&path), refusal.reason.as_str(), refusal.status.as_u16(), &refusal.message);
    match refusal.reason {
        RefusalReason::Internal => {
            tracing::error!(node, %remote, path, reason, status, message, "join request failed");
        }
        RefusalReason::Unauthenticated | RefusalReason::BadToken | RefusalReason::Forbidden => {
            tracing::warn!(node, %remote, path, reason, status, message, "join request refused");
        }
        _ => tracing::info!(node, %remote, path, reason, status, message, "join request refused"),
    }
    refusal.into_response()
}

/// `GET /ca.crt`: the CA certificate, DER, to anyone.
fn ca_cert(shared: &JoinState, method: &Method) -> Result<Response<Full<Bytes>>, Refusal> {
    if method != Method::GET && method != Method::HEAD {
        return Err(Refusal::method_not_allowed(method, "GET, HEAD"));
    }
    shared.stats.count_ca_served();
    Ok(der_response(shared.ca_der.clone()))
}

/// `GET` or `POST /edge.crt`: a node certificate for the CSR in the body.
async fn edge_cert(
    shared: &JoinState,
    client: &ClientIdentity,
    remote: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Refusal> {
    // KubeEdge's edge sends a GET with a body; POST is what the body means.
    if req.method() != Method::GET && req.method() != Method::POST {
        return Err(Refusal::method_not_allowed(req.method(), "GET, POST"));
    }
    let (parts, body) = req.into_parts();
    let node = headers::node_name(&parts.headers)
        .map_err(|m| Refusal::new(StatusCode::BAD_REQUEST, RefusalReason::BadNodeName, m))?;
    let common_name = format!("system:node:{node}");
    let proof = authenticate(&shared.credentials, client, &parts.headers, node, &common_name).await?;
    let usages = headers::ext_key_usages(&parts.headers)
        .map_err(|m| Refusal::new(StatusCode::BAD_REQUEST, RefusalReason::BadRequest, m))?;
    let csr = read_limited(body, &parts.headers, shared.config.max_csr_bytes).await?;

    let validity = shared.config.cert_validity;
    let cert = shared.credentials.ca().sign_csr(&csr, &common_name, &[NODES_GROUP], validity).map_err(|e| match e {
        PkiError::CsrTooLarge { size, limit } => Refusal::too_large(format!(
            "the certificate signing request is {size} bytes, over the {limit}-byte limit for a CSR"
        )),
        PkiError::Csr(reason) => Refusal::new(
            StatusCode::BAD_REQUEST,
            RefusalReason::BadCsr,
            format!("invalid certificate signing request: {reason}"),
        ),
        other => Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            RefusalReason::Internal,
            format!("could not sign the certificate: {other}"),
        ),
    })?;
    // Recorded before it is handed out: an unrecorded certificate would
    // escape revocation and the takeover check.
    let internal = |what: String| Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, RefusalReason::Internal, what);
    let issued = edgehive_pki::certificate_id(&cert).map_err(|e| internal(format!("read the new certificate: {e}")))?;
    let (with, renewed) = match &proof {
        Proof::Token(grant) => (IssuedWith::Token(grant.token_id.clone()), None),
        Proof::Certificate(serial) => (IssuedWith::Renewal, Some(serial.as_str())),
    };
    shared.credentials.record_issued(node, &issued, with, renewed, OffsetDateTime::now_utc()).await.map_err(
        |e| match e {
            edgehive_credentials::Refusal::Store(e) => internal(format!("record the certificate: {e}")),
            e => Refusal::new(StatusCode::FORBIDDEN, RefusalReason::Forbidden, e.to_string()),
        },
    )?;
    shared.stats.count_issued();
    // Every certificate is clientAuth only, whatever was asked: a node uses
    // it to connect to the cloud and for nothing else.
    let only_client_auth = usages.iter().all(|u| *u == CLIENT_AUTH);
    let (token, takes_over) = match &proof {
        Proof::Token(grant) => (grant.token_id.as_str(), grant.takes_over),
        Proof::Certificate(_) => ("", false),
    };
    if takes_over {
        tracing::warn!(node, %remote, token, "a token allowed to rejoin replaces the node's certificate");
    }
    tracing::info!(node, %remote, token, renewal = token.is_empty(), serial = %issued.serial, ?usages, only_client_auth, "issued node certificate");
    Ok(der_response(Bytes::from(cert.to_vec())))
}

/// Who may have a certificate for `node`: the holder of a client certificate
/// of this CA for the same node that the cloud still accepts (not revoked,
/// not replaced), or else the bearer of a join token that has a record and
/// does not take over a registered node with a live certificate.
async fn authenticate(
    credentials: &Credentials,
    client: &ClientIdentity,
    headers: &HeaderMap,
    node: &str,
    common_name: &str,
) -> Result<Proof, Refusal> {
    let forbidden = |message: String| Refusal::new(StatusCode::FORBIDDEN, RefusalReason::Forbidden, message);
    match client {
        Some(Ok((identity, cert))) if identity.common_name == common_name => {
            credentials.check_certificate(node, &cert.serial).await.map_err(|e| refusal_of(e, &forbidden))?;
            Ok(Proof::Certificate(cert.serial.clone()))
        }
        Some(Ok((identity, _))) => Err(forbidden(format!(
            "the client certificate is for {:?}, not for node {node:?}",
            shorten(&identity.common_name)
        ))),
        Some(Err(reason)) => Err(forbidden(format!("the client certificate names no node: {reason}"))),
        None => {
            let jwt = headers::bearer(headers).map_err(|why| {
                Refusal::unauthorized(RefusalReason::Unauthenticated, format!("Invalid authorization token: {why}"))
            })?;
            // KubeEdge answers 400 when the JWT itself fails; 401 is the
            // status for bad credentials, and a KubeEdge edge treats any
            // answer but 200 as a failure, so it sees no difference.
            let now = OffsetDateTime::now_utc();
            let claims = verify_jwt(credentials.ca(), jwt, now)
                .map_err(|e| Refusal::unauthorized(RefusalReason::BadToken, e.to_string()))?;
            let grant = credentials.authorize_join(&claims, node, now).await.map_err(|e| refusal_of(e, &forbidden))?;
            Ok(Proof::Token(grant))
        }
    }
}

/// The answer to a refusal of the credentials: 401 for a token that is not
/// (or no longer) valid, 403 for a node that may not have a certificate, 500
/// when the records could not be read.
fn refusal_of(e: edgehive_credentials::Refusal, forbidden: &impl Fn(String) -> Refusal) -> Refusal {
    use edgehive_credentials::Refusal as R;
    match e {
        e @ (R::UnknownToken(_) | R::Expired { .. }) => Refusal::unauthorized(RefusalReason::BadToken, e.to_string()),
        e @ R::Store(_) => Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, RefusalReason::Internal, e.to_string()),
        e => forbidden(e.to_string()),
    }
}

/// The whole body, if it is at most `limit` bytes. A `Content-Length` over
/// the limit is refused before any of the body is read; a body that grows
/// past it is refused as soon as it does. Either way nothing more is kept.
async fn read_limited(mut body: Incoming, headers: &HeaderMap, limit: usize) -> Result<Bytes, Refusal> {
    let too_large =
        |size: String| Refusal::too_large(format!("the request body is {size}, over the {limit}-byte limit"));
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if let Some(declared) = declared.filter(|n| usize::try_from(*n).map_or(true, |n| n > limit)) {
        // A client waiting for "100 Continue" has sent nothing yet, and
        // polling the body would invite it to: answer at once.
        let waits = headers.get(EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        if !waits {
            drain(body, DRAIN_LIMIT).await;
        }
        return Err(too_large(format!("{declared} bytes")));
    }
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| {
            Refusal::new(
                StatusCode::BAD_REQUEST,
                RefusalReason::BadRequest,
                format!("could not read the request body: {e}"),
            )
        })?;
        let Ok(data) = frame.into_data() else { continue };
        if buf.len() + data.len() > limit {
            let seen = buf.len() + data.len();
            drop(buf);
            drain(body, DRAIN_LIMIT.saturating_sub(seen)).await;
            return Err(too_large(format!("at least {seen} bytes")));
        }
        buf.extend_from_slice(&data);
    }
    Ok(buf.freeze())
}

/// Reads and discards up to `max` more bytes of `body`, for at most
/// [`DRAIN_TIME`].
async fn drain(mut body: Incoming, max: usize) {
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        let mut seen = 0usize;
        while let Some(Ok(frame)) = body.frame().await {
            if let Ok(data) = frame.into_data() {
                seen += data.len();
                if seen > max {
                    break;
                }
            }
        }
    })
    .await;
}
