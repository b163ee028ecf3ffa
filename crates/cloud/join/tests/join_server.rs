//! The join server over real TLS on 127.0.0.1: what a KubeEdge edge does to
//! join and to renew, and every way a request is refused (nothing issued,
//! the refusal counted, the server still serving).

#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use edgehive_join::RefusalReason;
use edgehive_pki::{TOKEN_VALIDITY, issue_token};
use http::Request;
use http_body_util::Full;
use support::{Chunked, Cloud, DAY, client_cert, eventually, kubeedge_csr, sha256_hex};
use time::OffsetDateTime;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use x509_parser::prelude::{FromDer as _, X509Certificate};

/// Asserts that `reply` is a node certificate for `node`, for `key`'s public
/// key, signed by the cloud's CA.
fn assert_node_certificate(cloud: &Cloud, reply: &support::Reply, node: &str, key: &rcgen::KeyPair) {
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert_eq!(reply.content_type(), "application/octet-stream");
    let (rest, cert) = X509Certificate::from_der(&reply.body).unwrap();
    assert!(rest.is_empty());
    let cns: Vec<&str> = cert.subject().iter_common_name().map(|cn| cn.as_str().unwrap()).collect();
    let orgs: Vec<&str> = cert.subject().iter_organization().map(|o| o.as_str().unwrap()).collect();
    assert_eq!(cns, [format!("system:node:{node}")]);
    assert_eq!(orgs, ["system:nodes"], "the CSR's O=kubeEdge is not copied");
    assert_eq!(cert.subject().iter_country().count(), 0, "nothing else from the CSR's subject");
    let (_, ca) = X509Certificate::from_der(cloud.ca.cert_der()).unwrap();
    assert_eq!(cert.issuer().as_raw(), ca.subject().as_raw());
    cert.verify_signature(Some(ca.public_key())).unwrap();
    assert_eq!(cert.public_key().subject_public_key.data.as_ref(), key.public_key_raw());
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    let lifetime = cert.validity().not_after.timestamp() - OffsetDateTime::now_utc().unix_timestamp();
    assert!((89 * 86400..=91 * 86400).contains(&lifetime), "valid for the default 90 days: {lifetime} s");
}

#[tokio::test]
async fn ca_crt_is_the_der_the_token_names() {
    let cloud = Cloud::start().await;
    let reply = cloud.get("/ca.crt").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type(), "application/octet-stream");
    assert_eq!(&reply.body[..], &cloud.ca.cert_der()[..]);
    let token = cloud.token();
    assert_eq!(token.split('.').count(), 4);
    assert_eq!(sha256_hex(&reply.body), token.split('.').next().unwrap());
    assert_eq!(cloud.stats.ca_served(), 1);

    let post = Request::post("/ca.crt").header("host", "127.0.0.1").body(Full::new(Bytes::new())).unwrap();
    let reply = cloud.send(None, post).await;
    assert_eq!(reply.status, 405);
    assert_eq!(reply.headers.get("allow").unwrap(), "GET, HEAD");
    assert_eq!(cloud.stats.refused(RefusalReason::MethodNotAllowed), 1);
}

#[tokio::test]
async fn a_token_and_a_kubeedge_csr_get_a_node_certificate() {
    let cloud = Cloud::start().await;
    let (key, csr) = kubeedge_csr();
    let reply = cloud.join("edge-1", &Cloud::bearer(&cloud.token()), &csr).await;
    assert_node_certificate(&cloud, &reply, "edge-1", &key);
    assert_eq!(cloud.stats.certificates_issued(), 1);

    // POST, with KubeEdge's optional usages header: still clientAuth only.
    let (key, csr) = kubeedge_csr();
    let bearer = Cloud::bearer(&cloud.token());
    let headers = [("Authorization", bearer.as_str()), ("NodeName", "edge-2"), ("ExtKeyUsages", "[1,2]")];
    let reply = cloud.edge_crt(None, "POST", &headers, csr).await;
    assert_node_certificate(&cloud, &reply, "edge-2", &key);
    assert_eq!(cloud.stats.certificates_issued(), 2);
    assert_eq!(cloud.stats.refused_total(), 0);

    let metrics = metrics_text(&cloud.stats);
    assert!(metrics.contains("\nedgehive_join_certificates_issued_total 2\n"), "{metrics}");
}

#[tokio::test]
async fn a_node_renews_with_its_certificate_and_no_token() {
    let cloud = Cloud::start().await;
    let (key, csr) = kubeedge_csr();
    let first = cloud.join("edge-1", &Cloud::bearer(&cloud.token()), &csr).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let held = client_cert(&first.body, &key);

    // Rotation: a new key, mutual TLS with the old certificate, no token.
    let (new_key, new_csr) = kubeedge_csr();
    let reply = cloud.edge_crt(Some(&held), "GET", &[("NodeName", "edge-1")], new_csr.clone()).await;
    assert_node_certificate(&cloud, &reply, "edge-1", &new_key);
    assert_eq!(cloud.stats.certificates_issued(), 2);

    // The same certificate asking for another node's name.
    let reply = cloud.edge_crt(Some(&held), "GET", &[("NodeName", "edge-2")], new_csr.clone()).await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert!(reply.text().contains("\"system:node:edge-1\", not for node \"edge-2\""), "{}", reply.text());
    // A certificate naming another node, even with a good token beside it.
    let other = cloud.ca.issue_client("system:node:edge-2", &["system:nodes"], DAY).unwrap();
    let other = (vec![other.cert_der], other.key_der);
    let bearer = Cloud::bearer(&cloud.token());
    let headers = [("NodeName", "edge-1"), ("Authorization", bearer.as_str())];
    let reply = cloud.edge_crt(Some(&other), "GET", &headers, new_csr.clone()).await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert_eq!(cloud.stats.refused(RefusalReason::Forbidden), 2);
    assert_eq!(cloud.stats.certificates_issued(), 2, "nothing issued on refusal");

    // A certificate of another CA does not get past the handshake.
    let stranger = edgehive_pki::Ca::generate("another-ca").unwrap();
    let foreign = stranger.issue_client("system:node:edge-1", &["system:nodes"], DAY).unwrap();
    let foreign = (vec![foreign.cert_der], foreign.key_der);
    let refused = async {
        let mut tls = cloud.connect(Some(&foreign)).await?;
        // TLS 1.3: the client learns of the refusal on its first read.
        tls.write_all(b"GET /ca.crt HTTP/1.1\r\nhost: x\r\n\r\n").await?;
        let mut buf = Vec::new();
        tls.read_to_end(&mut buf).await.map(|_| buf)
    };
    if let Ok(buf) = tokio::time::timeout(support::DEADLINE, refused).await.unwrap() {
        assert!(buf.is_empty(), "no answer: {}", String::from_utf8_lossy(&buf));
    }
    eventually("the failed handshake is counted", || cloud.stats.handshakes_failed() == 1).await;
    assert_eq!(cloud.stats.certificates_issued(), 2);
}

/// A request and the refusal it should get.
struct Case {
    name: &'static str,
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    status: u16,
    reason: RefusalReason,
    message: &'static str,
}

#[tokio::test]
async fn refusals_issue_nothing_and_are_counted() {
    let cloud = Cloud::start().await;
    let (_, csr) = kubeedge_csr();
    let good = cloud.token();
    let now = OffsetDateTime::now_utc();
    let expired = issue_token(&cloud.ca, "abc123", now - time::Duration::days(2), TOKEN_VALIDITY);
    let forged = {
        let mut bytes = good.clone().into_bytes();
        let at = good.rfind('.').unwrap() + 1;
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };
    let stranger = edgehive_pki::Ca::generate("another-ca").unwrap();
    let foreign = issue_token(&stranger, "abc123", now, TOKEN_VALIDITY);
    // Signed with this CA's key, but never recorded (or since revoked).
    let unrecorded = issue_token(&cloud.ca, "zzzzzz", now, TOKEN_VALIDITY);
    let node = || ("NodeName", "edge-1".to_string());
    let auth = |value: String| ("Authorization", value);
    let case = |name, headers, body: &[u8], status, reason, message| Case {
        name,
        method: "GET",
        path: "/edge.crt",
        headers,
        body: body.to_vec(),
        status,
        reason,
        message,
    };
    use RefusalReason as R;
    let cases = vec![
        case("expired token", vec![node(), auth(Cloud::bearer(&expired))], &csr, 401, R::BadToken, "token expired at "),
        case("forged token", vec![node(), auth(Cloud::bearer(&forged))], &csr, 401, R::BadToken, "signature"),
        case("another CA's token", vec![node(), auth(Cloud::bearer(&foreign))], &csr, 401, R::BadToken, "signature"),
        case(
            "unrecorded token",
            vec![node(), auth(Cloud::bearer(&unrecorded))],
            &csr,
            401,
            R::BadToken,
            "token zzzzzz is unknown",
        ),
        case("whole token as bearer", vec![node(), auth(format!("Bearer {good}"))], &csr, 401, R::BadToken, "found 4"),
        case("no Authorization", vec![node()], &csr, 401, R::Unauthenticated, "Invalid authorization token"),
        case(
            "Bearer alone",
            vec![node(), auth("Bearer".into())],
            &csr,
            401,
            R::Unauthenticated,
            "Invalid authorization token",
        ),
        case(
            "Basic",
            vec![node(), auth("Basic x".into())],
            &csr,
            401,
            R::Unauthenticated,
            "Invalid authorization token",
        ),
        case("no NodeName", vec![auth(Cloud::bearer(&good))], &csr, 400, R::BadNodeName, "NodeName header is required"),
        case(
            "bad NodeName",
            vec![("NodeName", "Edge_1".into()), auth(Cloud::bearer(&good))],
            &csr,
            400,
            R::BadNodeName,
            "invalid NodeName",
        ),
        case(
            "garbage CSR",
            vec![node(), auth(Cloud::bearer(&good))],
            b"not a csr",
            400,
            R::BadCsr,
            "invalid certificate signing request: not a DER PKCS#10",
        ),
        case("empty CSR", vec![node(), auth(Cloud::bearer(&good))], b"", 400, R::BadCsr, "empty request"),
        case(
            "bad ExtKeyUsages",
            vec![node(), auth(Cloud::bearer(&good)), ("ExtKeyUsages", "clientAuth".into())],
            &csr,
            400,
            R::BadRequest,
            "ExtKeyUsages",
        ),
        case(
            "CSR over the CA's 64 KiB",
            vec![node(), auth(Cloud::bearer(&good))],
            &vec![0x30; 100 << 10],
            413,
            R::TooLarge,
            "certificate signing request is 102400 bytes, over the 65536-byte limit",
        ),
        Case {
            method: "DELETE",
            ..case(
                "wrong method",
                vec![node(), auth(Cloud::bearer(&good))],
                &csr,
                405,
                R::MethodNotAllowed,
                "method DELETE is not allowed",
            )
        },
        Case {
            path: "/node/edge-1",
            ..case("unknown path", vec![node()], b"", 404, R::NotFound, "no such path \"/node/edge-1\"")
        },
    ];
    for case in cases {
        let before = cloud.stats.refused(case.reason);
        let mut request = Request::builder().method(case.method).uri(case.path).header("host", "127.0.0.1");
        for (name, value) in &case.headers {
            request = request.header(*name, value);
        }
        let reply = cloud.send(None, request.body(Full::new(Bytes::from(case.body))).unwrap()).await;
        let text = reply.text();
        assert_eq!(reply.status, case.status, "{}: {text}", case.name);
        assert!(text.contains(case.message), "{}: {text}", case.name);
        assert!(text.ends_with('\n') && text.lines().count() == 1, "{}: one line: {text:?}", case.name);
        assert_eq!(reply.content_type(), "text/plain; charset=utf-8", "{}", case.name);
        if case.status == 401 {
            assert_eq!(reply.headers.get("www-authenticate").unwrap(), "Bearer", "{}", case.name);
        }
        assert_eq!(cloud.stats.refused(case.reason), before + 1, "{}", case.name);
        assert_eq!(cloud.stats.certificates_issued(), 0, "{}: nothing issued", case.name);
    }

    // After all that, a good request still works.
    let (key, csr) = kubeedge_csr();
    let reply = cloud.join("edge-1", &Cloud::bearer(&good), &csr).await;
    assert_node_certificate(&cloud, &reply, "edge-1", &key);
    assert_eq!(cloud.stats.certificates_issued(), 1);
}

#[tokio::test]
async fn bodies_over_1_mib_get_413_and_the_server_carries_on() {
    let cloud = Cloud::start().await;
    let bearer = Cloud::bearer(&cloud.token());
    let headers = [("Authorization", bearer.as_str()), ("NodeName", "edge-1")];
    let oversize = vec![0x30u8; (1 << 20) + 1];

    // With Content-Length: refused on the header.
    let reply = cloud.edge_crt(None, "GET", &headers, oversize.clone()).await;
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert_eq!(reply.text(), "the request body is 1048577 bytes, over the 1048576-byte limit\n");
    assert_eq!(reply.headers.get("connection").unwrap(), "close");

    // Chunked, so the size is only learnt while reading (a POST: hyper's
    // client sends no chunked body with a GET).
    let mut request = Request::post("/edge.crt").header("host", "127.0.0.1");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let reply = cloud.send(None, request.body(Chunked(Some(Bytes::from(vec![0x30u8; 2 << 20])))).unwrap()).await;
    assert_eq!(reply.status, 413, "{}", reply.text());
    assert!(reply.text().contains("over the 1048576-byte limit"), "{}", reply.text());

    assert_eq!(cloud.stats.refused(RefusalReason::TooLarge), 2);
    assert_eq!(cloud.stats.certificates_issued(), 0);
    let (key, csr) = kubeedge_csr();
    let reply = cloud.join("edge-1", &bearer, &csr).await;
    assert_node_certificate(&cloud, &reply, "edge-1", &key);
}

/// Writes a request head on a new connection and reads until the server
/// closes it.
async fn raw_exchange(cloud: &Cloud, head: &str) -> String {
    let mut tls = cloud.connect(None).await.unwrap();
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    // The answer, then the end of the connection (an error is an end too).
    let _ = tokio::time::timeout(support::DEADLINE, tls.read_to_end(&mut answer)).await.unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn a_client_expecting_100_continue_is_refused_before_sending() {
    let cloud = Cloud::start().await;
    let bearer = Cloud::bearer(&cloud.token());
    let head = format!(
        "GET /edge.crt HTTP/1.1\r\nhost: 127.0.0.1\r\nNodeName: edge-1\r\nAuthorization: {bearer}\r\n\
         content-length: 5000000\r\nexpect: 100-continue\r\n\r\n"
    );
    let answer = raw_exchange(&cloud, &head).await;
    assert!(answer.starts_with("HTTP/1.1 413 "), "no 100 Continue first: {answer}");
    assert!(answer.ends_with("the request body is 5000000 bytes, over the 1048576-byte limit\n"), "{answer}");
    assert_eq!(cloud.stats.refused(RefusalReason::TooLarge), 1);
}

#[tokio::test]
async fn a_body_that_never_comes_times_out() {
    let cloud = Cloud::start_with(|c| c.request_timeout = Duration::from_millis(300)).await;
    let bearer = Cloud::bearer(&cloud.token());
    let head = format!(
        "GET /edge.crt HTTP/1.1\r\nhost: 127.0.0.1\r\nNodeName: edge-1\r\nAuthorization: {bearer}\r\n\
         content-length: 400\r\n\r\n"
    );
    let answer = raw_exchange(&cloud, &head).await;
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.ends_with("the request was not received within 300ms\n"), "{answer}");
    assert_eq!(cloud.stats.refused(RefusalReason::Timeout), 1);
    assert_eq!(cloud.stats.certificates_issued(), 0);
}

/// Sends a join request whose body never comes: the connection is past its
/// handshake and serving a request until the request timeout.
async fn start_a_request(cloud: &Cloud) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let bearer = Cloud::bearer(&cloud.token());
    let mut tls = cloud.connect(None).await.unwrap();
    let head = format!(
        "GET /edge.crt HTTP/1.1\r\nhost: 127.0.0.1\r\nNodeName: edge-1\r\nAuthorization: {bearer}\r\n\
         content-length: 400\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

#[tokio::test]
async fn connections_over_the_limit_are_closed() {
    let cloud = Cloud::start_with(|c| c.max_connections = 1).await;
    let held = start_a_request(&cloud).await;
    eventually("the held connection serves a request", || {
        cloud.stats.connections_open() == 1 && cloud.stats.pending_handshakes() == 0
    })
    .await;
    // Nothing pending to evict: the server closes the second connection
    // before its handshake ends.
    let second = tokio::time::timeout(support::DEADLINE, cloud.connect(None)).await.unwrap();
    assert!(second.is_err(), "a second connection is refused");
    assert_eq!(cloud.stats.connections_refused(), 1);
    assert_eq!(cloud.stats.handshakes_evicted(), 0);

    drop(held);
    // The slot frees once the server has seen the first connection end.
    let mut reply = None;
    for _ in 0..500 {
        if let Ok(tls) = cloud.connect(None).await {
            let request = Request::get("/ca.crt").header("host", "127.0.0.1").body(Full::new(Bytes::new())).unwrap();
            reply = Some(support::send_on(tls, request).await);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(reply.expect("a connection is accepted once the first is gone").status, 200);
    assert!(cloud.stats.connections_refused() >= 1);
    let metrics = metrics_text(&cloud.stats);
    assert!(metrics.contains("\nedgehive_join_ca_served_total 1\n"), "{metrics}");
}

/// Issue 14: about 1,000 idle connections used to take every connection
/// slot and lock joining edges out. Now each new connection closes the
/// oldest pending one of its source (all of these come from 127.0.0.1).
#[tokio::test]
async fn a_flood_of_silent_connections_does_not_lock_a_joining_edge_out() {
    const FLOOD: usize = 2_000;
    // Handshakes never time out during the test, so only eviction makes room.
    let cloud = Cloud::start_with(|c| c.handshake_timeout = Duration::from_secs(600)).await;
    let per_source = edgehive_join::JoinConfig::new(cloud.addr).max_pending_handshakes_per_source as u64;
    let mut flood = support::silent_connections(cloud.addr, FLOOD).await;

    let reply = tokio::time::timeout(Duration::from_secs(2), cloud.get("/ca.crt"))
        .await
        .expect("GET /ca.crt answered within 2 s");
    assert_eq!(reply.status, 200);
    assert_eq!(&reply.body[..], &cloud.ca.cert_der()[..]);

    eventually("the flood evicted", || cloud.stats.handshakes_evicted_at_source_limit() >= FLOOD as u64 - per_source)
        .await;
    assert!(support::closed_within(&mut flood[0], support::DEADLINE).await, "the oldest was closed");
    assert!(cloud.stats.pending_handshakes() <= per_source);
    assert_eq!(cloud.stats.connections_refused(), 0);
    assert_eq!(cloud.stats.handshakes_timed_out(), 0);
    let metrics = metrics_text(&cloud.stats);
    assert!(metrics.contains("\nedgehive_join_handshakes_evicted_total{limit=\"source\"} "), "{metrics}");
}

#[tokio::test]
async fn a_full_server_closes_its_oldest_pending_connection() {
    let cloud = Cloud::start_with(|c| {
        c.handshake_timeout = Duration::from_secs(600);
        c.max_connections = 3;
    })
    .await;
    let serving = start_a_request(&cloud).await;
    eventually("one connection serves a request", || {
        cloud.stats.connections_open() == 1 && cloud.stats.pending_handshakes() == 0
    })
    .await;
    let mut silent = support::silent_connections(cloud.addr, 2).await;
    eventually("two pending", || cloud.stats.pending_handshakes() == 2).await;

    // The server is full: the request's connection evicts the oldest
    // pending one, not the one serving a request.
    let reply = cloud.get("/ca.crt").await;
    assert_eq!(reply.status, 200);
    assert!(support::closed_within(&mut silent[0], support::DEADLINE).await, "the oldest pending is closed");
    assert_eq!(cloud.stats.handshakes_evicted_at_connection_limit(), 1);
    assert_eq!(cloud.stats.handshakes_evicted_at_source_limit(), 0);
    assert_eq!(cloud.stats.connections_refused(), 0);
    drop(serving);
}

#[tokio::test]
async fn a_connection_silent_before_or_after_tls_is_closed_at_the_handshake_deadline() {
    let cloud = Cloud::start_with(|c| c.handshake_timeout = Duration::from_millis(300)).await;
    // No TLS at all.
    let mut silent = support::silent_connections(cloud.addr, 1).await;
    assert!(support::closed_within(&mut silent[0], support::DEADLINE).await, "closed at the deadline");
    eventually("one timeout counted", || cloud.stats.handshakes_timed_out() == 1).await;
    // TLS, then no request.
    let mut tls = cloud.connect(None).await.unwrap();
    assert!(support::closed_within(&mut tls, support::DEADLINE).await, "closed at the deadline");
    eventually("two timeouts counted", || cloud.stats.handshakes_timed_out() == 2).await;
    assert_eq!(cloud.stats.handshakes_failed(), 0);
    // A prompt request is served.
    assert_eq!(cloud.get("/ca.crt").await.status, 200);
}

/// A token holder may not take over a node that is registered and holds a
/// live certificate; an admin's token for that node may, and then the old
/// certificate can neither renew nor (at CloudHub) connect. A revoked node
/// cannot renew, and a revoked token joins nothing.
#[tokio::test]
async fn a_token_cannot_take_over_a_node_and_replaced_or_revoked_certificates_cannot_renew() {
    use edgehive_store::resources::NODES;
    let cloud = Cloud::start().await;
    let (key, csr) = kubeedge_csr();
    let first = cloud.join("edge-1", &Cloud::bearer(&cloud.token()), &csr).await;
    assert_node_certificate(&cloud, &first, "edge-1", &key);
    let first_cert = client_cert(&first.body, &key);
    cloud
        .store
        .create(&NODES, serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge-1"}}))
        .await
        .unwrap();

    // Another holder of a token (the same one, or a fresh one) asks for edge-1.
    let other_token = Cloud::make_token(&cloud.credentials, &[]).await;
    for token in [cloud.token(), other_token] {
        let (_, csr) = kubeedge_csr();
        let reply = cloud.join("edge-1", &Cloud::bearer(&token), &csr).await;
        assert_eq!(reply.status, 403, "{}", reply.text());
        assert!(reply.text().contains("is registered and holds a valid certificate"), "{}", reply.text());
        assert!(reply.text().contains("edgehive token create --rejoin edge-1"), "{}", reply.text());
    }
    assert_eq!(cloud.stats.refused(RefusalReason::Forbidden), 2);
    assert_eq!(cloud.stats.certificates_issued(), 1);
    // A free name is fine with the same token.
    let (key2, csr2) = kubeedge_csr();
    let reply = cloud.join("edge-2", &Cloud::bearer(&cloud.token()), &csr2).await;
    assert_node_certificate(&cloud, &reply, "edge-2", &key2);

    // The admin's token for edge-1 replaces its certificate...
    let rejoin = Cloud::make_token(&cloud.credentials, &["edge-1"]).await;
    let (new_key, new_csr) = kubeedge_csr();
    let reply = cloud.join("edge-1", &Cloud::bearer(&rejoin), &new_csr).await;
    assert_node_certificate(&cloud, &reply, "edge-1", &new_key);
    let new_cert = client_cert(&reply.body, &new_key);
    // ...so the old one cannot renew any more.
    let (_, csr) = kubeedge_csr();
    let reply = cloud.edge_crt(Some(&first_cert), "GET", &[("NodeName", "edge-1")], csr).await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert!(reply.text().contains("replaced by a newer one"), "{}", reply.text());
    // The new one renews, and the one it renewed stays good until the next.
    let (renewed_key, csr) = kubeedge_csr();
    let reply = cloud.edge_crt(Some(&new_cert), "GET", &[("NodeName", "edge-1")], csr).await;
    assert_node_certificate(&cloud, &reply, "edge-1", &renewed_key);
    let renewed = client_cert(&reply.body, &renewed_key);
    let serial = |c: &support::ClientCert| edgehive_pki::certificate_id(&c.0[0]).unwrap().serial;
    cloud.credentials.check_certificate("edge-1", &serial(&new_cert)).await.unwrap();
    cloud.credentials.check_certificate("edge-1", &serial(&renewed)).await.unwrap();

    // Revoked: no certificate of edge-1 renews.
    cloud.credentials.revoke_node("edge-1", OffsetDateTime::now_utc()).await.unwrap();
    let (_, csr) = kubeedge_csr();
    let reply = cloud.edge_crt(Some(&renewed), "GET", &[("NodeName", "edge-1")], csr).await;
    assert_eq!(reply.status, 403, "{}", reply.text());
    assert!(reply.text().contains("revoked"), "{}", reply.text());

    // A revoked token joins nothing.
    let id = edgehive_pki::verify_token(&cloud.ca, &cloud.token(), OffsetDateTime::now_utc()).unwrap().id.unwrap();
    assert!(cloud.credentials.revoke_token(&id).await.unwrap());
    let (_, csr) = kubeedge_csr();
    let reply = cloud.join("edge-3", &Cloud::bearer(&cloud.token()), &csr).await;
    assert_eq!(reply.status, 401, "{}", reply.text());
    assert!(reply.text().contains("unknown"), "{}", reply.text());
}

/// The join server's metrics, registered and encoded as `edgehive cloud`
/// exports them.
fn metrics_text(stats: &edgehive_join::JoinStats) -> String {
    let mut registry = prometheus_client::registry::Registry::with_prefix("edgehive");
    stats.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    text
}
