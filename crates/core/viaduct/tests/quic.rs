//! edgehive's QUIC mapping: exchange, identity, 0-RTT resumption, connection
//! migration, refused headers and bad frames.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use edgehive_model::{Content, Message, op};
use edgehive_viaduct::Server;
use edgehive_viaduct::quic::{ALPN, QuicClient, encode_frame};
use edgehive_viaduct::{CloseReason, ConnConfig, Protocol, ServerConfig};

async fn quic_server(pki: &Pki, conn: ConnConfig) -> Server {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.conn = conn;
    cfg.handshake_timeout = Duration::from_secs(10);
    Server::bind_quic(cfg).await.unwrap()
}

fn quic_client(pki: &Pki, addr: SocketAddr, node: &str) -> QuicClient {
    QuicClient::new(client_config(pki, addr, node), "127.0.0.1:0".parse().unwrap()).unwrap()
}

/// A quinn connection that speaks the mapping by hand.
async fn raw_quic(pki: &Pki, addr: SocketAddr) -> (quinn::Endpoint, quinn::Connection) {
    let cert = pki.ca.node("raw");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca.cert.clone()).unwrap();
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![cert.cert], cert.key)
        .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
    (ep, conn)
}

fn header(node: serde_json::Value) -> Vec<u8> {
    let m = Message::new()
        .with_route("edgehub", "", "", op::VIADUCT_HEADER)
        .with_content(Content::from_serialize(&node).unwrap());
    encode_frame(&m)
}

#[tokio::test]
async fn exchange_identity_and_requests() {
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let client = quic_client(&pki, srv.local_addr(), "edge-q");
    let conn = client.connect().await.unwrap();
    let accepted = srv.accept().await.unwrap();
    assert_eq!(accepted.peer().node_id, "edge-q");
    assert_eq!(accepted.peer().protocol, Protocol::Quic);
    assert_eq!(accepted.peer().cert.as_ref().unwrap().node_name(), Some("edge-q"));
    assert_eq!(conn.peer().cert.as_ref().unwrap().common_name.as_deref(), Some("edgehive-cloud"));

    let (ctx, mut crx) = conn.split();
    assert_delivers(&accepted.tx, &mut crx).await;
    // Requests match their responses, and none is lost under load.
    spawn_ok_responder(accepted);
    assert_eq!(lost_requests(&ctx, 16, 1_000).await, 0);
}

#[tokio::test]
async fn reconnect_resumes_in_zero_rtt() {
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let client = quic_client(&pki, srv.local_addr(), "edge-flappy");

    let first = client.connect().await.unwrap();
    assert!(!first.peer().resumed, "the first connection is a full handshake");
    let (stx, _srx) = srv.accept().await.unwrap().split();
    let (ctx, mut crx) = first.split();
    // One exchange, so the session ticket has certainly arrived.
    stx.write(pod("a")).await.unwrap();
    crx.recv().await.unwrap();
    ctx.close();
    let _ = ctx.closed().await;

    let second = client.connect().await.unwrap();
    assert!(second.peer().resumed, "a reconnect resumes the TLS session and its headers ride in 0-RTT");
    assert_eq!(client.zero_rtt_accepted(), 1);
    let again = srv.accept().await.unwrap();
    assert_eq!(again.peer().node_id, "edge-flappy");
    assert_delivers(&again.tx, &mut { second.rx }).await;
}

#[tokio::test]
async fn connection_survives_a_change_of_client_address() {
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let client = quic_client(&pki, srv.local_addr(), "edge-mobile");
    let conn = client.connect().await.unwrap();
    let (stx, mut srx) = srv.accept().await.unwrap().split();
    let (ctx, mut crx) = conn.split();
    ctx.write(pod("before")).await.unwrap();
    assert_eq!(srx.recv().await.unwrap().route.resource, "default/pod/before");

    let old = client.local_addr().unwrap();
    client.rebind(std::net::UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap();
    let new = client.local_addr().unwrap();
    assert_ne!(old.port(), new.port());

    // Both directions still work on the same connection, from the new address.
    ctx.write(pod("after")).await.unwrap();
    assert_eq!(srx.recv().await.unwrap().route.resource, "default/pod/after");
    stx.write(pod("down")).await.unwrap();
    assert_eq!(crx.recv().await.unwrap().route.resource, "default/pod/down");
    assert!(!ctx.is_closed() && !stx.is_closed());
}

#[tokio::test]
async fn certificate_from_another_ca_is_refused() {
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let foreign = edgehive_testkit::pki::TestCa::new("someone-else");
    let mut cfg = client_config(&pki, srv.local_addr(), "intruder");
    let c = foreign.node("intruder");
    cfg.tls.identity = edgehive_viaduct::Identity { cert_chain: vec![c.cert], key: c.key };
    let client = QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    assert!(client.connect().await.is_err());
    eventually("TLS failure counted", || srv.stats().tls_failures() == 1).await;
    // A good edge still gets in.
    let good = quic_client(&pki, srv.local_addr(), "good");
    good.connect().await.unwrap();
    assert_eq!(srv.accept().await.unwrap().peer().node_id, "good");
}

#[tokio::test]
async fn bad_headers_are_refused_with_a_reason() {
    let pki = Pki::new();
    let srv = quic_server(&pki, ConnConfig::default()).await;
    for (hdr, want) in [
        (header(serde_json::json!({"project_id": "p"})), "missing node_id"),
        (header(serde_json::json!({"node_id": "a/b"})), "invalid node_id"),
        (b"\x00\x00\x00\x05hello".to_vec(), "handshake headers"),
    ] {
        let (_ep, conn) = raw_quic(&pki, srv.local_addr()).await;
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(&hdr).await.unwrap();
        let err = conn.closed().await;
        let quinn::ConnectionError::ApplicationClosed(close) = err else { panic!("{err:?}") };
        assert_eq!(close.error_code, quinn::VarInt::from_u32(edgehive_viaduct::quic::CODE_REFUSED));
        let reason = String::from_utf8_lossy(&close.reason);
        assert!(reason.contains(want), "{reason}");
    }
}

#[tokio::test]
async fn bad_frames_close_only_that_connection() {
    let pki = Pki::new();
    let limit = 16 * 1024;
    let mut srv = quic_server(&pki, ConnConfig { max_frame_size: limit, ..ConnConfig::default() }).await;
    type Check = fn(&CloseReason) -> bool;
    let cases: Vec<(Vec<u8>, Check)> = vec![
        ((limit as u32 + 1).to_be_bytes().to_vec(), |r| matches!(r, CloseReason::FrameTooLarge { .. })),
        (b"\x00\x00\x00\x04nope".to_vec(), |r| matches!(r, CloseReason::Malformed(_))),
        (b"\x00\x00\x00\x64{\"hea".to_vec(), |r| matches!(r, CloseReason::Malformed(m) if m.contains("truncated"))),
    ];
    for (bytes, check) in cases {
        let (_ep, conn) = raw_quic(&pki, srv.local_addr()).await;
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(&header(serde_json::json!({"node_id": "raw"}))).await.unwrap();
        let (_tx, mut rx) = srv.accept().await.unwrap().split();
        send.write_all(&bytes).await.unwrap();
        send.finish().unwrap();
        assert!(rx.recv().await.is_none());
        let reason = rx.close_reason().unwrap();
        assert!(check(&reason), "{reason:?}");
    }
    let client = quic_client(&pki, srv.local_addr(), "healthy");
    let conn = client.connect().await.unwrap();
    assert_delivers(&srv.accept().await.unwrap().tx, &mut { conn.rx }).await;
}

/// A QUIC connection that completes its handshake but never sends the
/// header frame holds a handshake slot; a new edge from the same address
/// evicts it, after proving its address with a Retry (a forged source could
/// otherwise evict someone else's handshake).
#[tokio::test]
async fn a_silent_handshake_is_evicted_for_an_edge_that_validates_its_address() {
    let pki = Pki::new();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.handshake_timeout = Duration::from_secs(600);
    cfg.max_pending_handshakes_per_source = 1;
    let mut srv = Server::bind_quic(cfg).await.unwrap();
    let (_ep, silent) = raw_quic(&pki, srv.local_addr()).await;
    assert_eq!(srv.stats().pending_handshakes(), 1);

    let client = quic_client(&pki, srv.local_addr(), "edge-q");
    let conn = client.connect().await.unwrap();
    assert_eq!(srv.accept().await.unwrap().peer().node_id, "edge-q");
    assert_eq!(conn.peer().node_id, "edge-q");
    assert_eq!(srv.stats().quic_retries(), 1);
    assert_eq!(srv.stats().evicted_per_source(), 1);
    // The evicted connection is closed by the server, long before its deadline.
    tokio::time::timeout(Duration::from_secs(30), silent.closed()).await.expect("the silent connection is closed");
}

/// The QUIC handshake and the header frame must arrive within the deadline.
#[tokio::test]
async fn a_silent_handshake_times_out() {
    let pki = Pki::new();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.handshake_timeout = Duration::from_millis(300);
    let srv = Server::bind_quic(cfg).await.unwrap();
    let (_ep, silent) = raw_quic(&pki, srv.local_addr()).await;
    tokio::time::timeout(Duration::from_secs(30), silent.closed()).await.expect("the silent connection is closed");
    eventually("the timeout counted", || srv.stats().handshake_timeouts() == 1).await;
}

#[tokio::test]
async fn features_are_agreed_in_the_header_frame() {
    let pki = Pki::new();
    let inv = edgehive_viaduct::features::INVENTORY;
    for (offer, accept, agreed) in [(vec![inv, "later"], vec![inv], vec![inv]), (vec![inv], vec![], vec![])] {
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
        cfg.features = accept.iter().map(|s| s.to_string()).collect();
        let mut srv = Server::bind_quic(cfg).await.unwrap();
        let mut ccfg = client_config(&pki, srv.local_addr(), "edge-q");
        ccfg.features = offer.iter().map(|s| s.to_string()).collect();
        let conn = QuicClient::new(ccfg, "127.0.0.1:0".parse().unwrap()).unwrap().connect().await.unwrap();
        let accepted = srv.accept().await.unwrap();
        assert_eq!(conn.peer().features, agreed, "client, offer {offer:?} accept {accept:?}");
        assert_eq!(accepted.peer().features, agreed, "server, offer {offer:?} accept {accept:?}");
    }
    // A header frame with a features field of the wrong shape is refused with a reason.
    let srv = quic_server(&pki, ConnConfig::default()).await;
    let (_ep, conn) = raw_quic(&pki, srv.local_addr()).await;
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    send.write_all(&header(serde_json::json!({"node_id": "raw", "features": "inventory"}))).await.unwrap();
    let quinn::ConnectionError::ApplicationClosed(close) = conn.closed().await else { panic!() };
    assert!(String::from_utf8_lossy(&close.reason).contains("handshake headers"), "{close:?}");
}

#[tokio::test]
async fn stream_sessions_run_over_quic_beside_messages() {
    let pki = Pki::new();
    let streams = edgehive_viaduct::stream::FEATURE.to_owned();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.features = vec![streams.clone()];
    let mut srv = Server::bind_quic(cfg).await.unwrap();
    let mut ccfg = client_config(&pki, srv.local_addr(), "edge-q");
    ccfg.features = vec![streams];
    let client = QuicClient::new(ccfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let edge = client.connect().await.unwrap();
    let cloud = srv.accept().await.unwrap();
    let mut incoming = edge.rx.incoming_streams().unwrap();
    let (mut ctx, mut crx) = cloud.tx.open_stream(bytes::Bytes::from_static(b"{}")).await.unwrap().split();
    let (mut etx, mut erx) = incoming.accept().await.unwrap().split();
    // More than the window each way, while messages flow.
    let max = edgehive_viaduct::stream::MAX_DATA;
    let up = tokio::spawn(async move {
        for i in 0..64u8 {
            etx.send(bytes::Bytes::from(vec![i; max])).await.unwrap();
        }
        etx.finish().await.unwrap();
        etx
    });
    assert_delivers(&cloud.tx, &mut { edge.rx }).await;
    for i in 0..64u8 {
        assert_eq!(crx.recv().await.unwrap().unwrap(), bytes::Bytes::from(vec![i; max]));
    }
    assert_eq!(crx.recv().await.unwrap(), None);
    let _etx = up.await.unwrap();
    ctx.send(bytes::Bytes::from_static(b"down")).await.unwrap();
    ctx.finish().await.unwrap();
    assert_eq!(erx.recv().await.unwrap().unwrap().as_ref(), b"down");
    assert_eq!(erx.recv().await.unwrap(), None);
}
