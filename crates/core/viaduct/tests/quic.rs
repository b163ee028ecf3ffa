//! edgehive's QUIC mapping: exchange, identity, resumption (0-RTT too), connection
//! migration, refused headers and bad frames, and stream sessions on QUIC
//! streams of their own.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;

use common::*;
use edgehive_model::{Content, Message, op};
use edgehive_viaduct::Server;
use edgehive_viaduct::quic::{ALPN, QuicClient, encode_frame};
use edgehive_viaduct::stream::MAX_DATA;
use edgehive_viaduct::{
    CloseReason, ConnConfig, Connection, Protocol, ServerConfig, StreamError, StreamRx, StreamStats, StreamTx,
};

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
    raw_quic_from(pki, addr, "127.0.0.1:0").await
}

/// [`raw_quic`] from another local address.
async fn raw_quic_from(pki: &Pki, addr: SocketAddr, bind: &str) -> (quinn::Endpoint, quinn::Connection) {
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
    let mut ep = quinn::Endpoint::client(bind.parse().unwrap()).unwrap();
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

/// Each send carries one datagram (the connection keeps no transmit buffer
/// for ten): large messages still cross whole, both ways, in order.
#[tokio::test]
async fn large_messages_cross_whole_one_datagram_per_send() {
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let client = quic_client(&pki, srv.local_addr(), "edge-big");
    let conn = client.connect().await.unwrap();
    let accepted = srv.accept().await.unwrap();
    let (ctx, mut crx) = conn.split();
    let (stx, mut srx) = accepted.split();
    let big = |i: usize| {
        Message::new()
            .with_route("edgehub", "", format!("big/{i}"), op::UPDATE)
            .with_content(Content::string(&char::from(b'a' + i as u8).to_string().repeat((3 << 20) + i)))
    };
    for i in 0..3 {
        ctx.write(big(i)).await.unwrap();
        stx.write(big(i)).await.unwrap();
    }
    for rx in [&mut srx, &mut crx] {
        for i in 0..3 {
            let m = tokio::time::timeout(Duration::from_secs(20), rx.recv()).await.unwrap().unwrap();
            assert_eq!(m.route.resource, format!("big/{i}"));
            assert_eq!(m.content.as_text().unwrap().len(), (3 << 20) + i);
        }
    }
}

/// The bytes of a link's datagrams are counted where the configuration
/// asks (a socket of its own), and on a socket links share, every link's:
/// at least what the messages carried, both ways.
#[tokio::test]
async fn wire_bytes_are_counted_on_own_and_shared_sockets() {
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let payload = |tag: &str| {
        Message::new()
            .with_route("edgehub", "", format!("wire/{tag}"), op::UPDATE)
            .with_content(Content::string(&"w".repeat(50_000)))
    };
    let exchange = |conn: Connection, accepted: Connection, tag: &'static str| async move {
        let (ctx, mut crx) = conn.split();
        let (stx, mut srx) = accepted.split();
        ctx.write(payload(tag)).await.unwrap();
        stx.write(payload(tag)).await.unwrap();
        for rx in [&mut srx, &mut crx] {
            let m = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap();
            assert_eq!(m.route.resource, format!("wire/{tag}"));
        }
        (ctx, crx, stx, srx)
    };

    let own = Arc::new(edgehive_viaduct::WireBytes::default());
    let mut cfg = client_config(&pki, srv.local_addr(), "edge-own");
    cfg.conn.wire_bytes = Some(Arc::clone(&own));
    let client = QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let conn = client.connect().await.unwrap();
    let _own_link = exchange(conn, srv.accept().await.unwrap(), "own").await;
    let (sent, received) = own.get();
    assert!(sent > 50_000 && received > 50_000, "own socket: sent {sent}, received {received}");

    let shared = Arc::new(edgehive_viaduct::WireBytes::default());
    let endpoint =
        edgehive_viaduct::quic::QuicEndpoint::bind("127.0.0.1:0".parse().unwrap(), Some(Arc::clone(&shared))).unwrap();
    let mut links = Vec::new();
    for node in ["edge-s1", "edge-s2"] {
        let client = QuicClient::on(client_config(&pki, srv.local_addr(), node), endpoint.clone()).unwrap();
        let conn = client.connect().await.unwrap();
        links.push((client, exchange(conn, srv.accept().await.unwrap(), "shared").await));
    }
    let (sent, received) = shared.get();
    assert!(sent > 100_000 && received > 100_000, "shared socket: sent {sent}, received {received}");
    assert!(own.get().0 < 100_000, "the own socket's counter has none of the shared socket's links");
}

#[tokio::test]
async fn reconnect_resumes_in_zero_rtt_from_a_server_that_keeps_sessions() {
    let pki = Pki::new();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.zero_rtt_sessions = 16;
    let mut srv = Server::bind_quic(cfg).await.unwrap();
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
    let mut second_rx = second.rx;
    assert_delivers(&again.tx, &mut second_rx).await;
    second.tx.close();
    let _ = second.tx.closed().await;

    // A ticket is used once: the next reconnect resumes from the one the
    // resumed session brought.
    let third = client.connect().await.unwrap();
    assert!(third.peer().resumed, "the ticket of a resumed session resumes the next one");
    assert_eq!(client.zero_rtt_accepted(), 2);
    let once_more = srv.accept().await.unwrap();
    assert_delivers(&once_more.tx, &mut { third.rx }).await;
    assert_eq!(srv.stats().tls_resumed(), 2);
}

/// Connects `client`, has the server send it one message (its session
/// ticket has then certainly arrived), and closes the connection.
async fn connect_once(srv: &mut Server, client: &QuicClient) {
    let conn = client.connect().await.unwrap();
    let accepted = srv.accept().await.unwrap();
    let (ctx, mut crx) = conn.split();
    accepted.tx.write(pod("a")).await.unwrap();
    crx.recv().await.unwrap();
    ctx.close();
    let _ = ctx.closed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_edge_resumes_from_a_stateless_ticket_however_many_there_are() {
    // More edges than a server-side session cache of rustls's default size
    // (256) holds: with stateless tickets (the default), every one of them
    // resumes, the first as well as the last.
    const EDGES: usize = 300;
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let cfg = client_config(&pki, srv.local_addr(), "edge-fleet");
    let endpoint = edgehive_viaduct::quic::QuicEndpoint::bind("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let clients: Vec<QuicClient> = (0..EDGES).map(|_| QuicClient::on(cfg.clone(), endpoint.clone()).unwrap()).collect();
    for client in &clients {
        connect_once(&mut srv, client).await;
    }
    assert_eq!(srv.stats().tls_resumed(), 0, "first connections are full handshakes");
    for client in &clients {
        connect_once(&mut srv, client).await;
    }
    assert_eq!(srv.stats().tls_resumed(), EDGES as u64, "every reconnection resumed");
    assert_eq!(clients.iter().map(QuicClient::zero_rtt_accepted).sum::<u64>(), 0, "no 0-RTT without kept sessions");
}

#[tokio::test]
async fn a_handshake_nobody_answers_is_given_up_after_a_third_of_the_deadline() {
    // A server that forgot a handshake (and whose close was lost) answers
    // nothing more; so does a black hole.
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let pki = Pki::new();
    dial_gives_up_within_a_third(&pki, hole.local_addr().unwrap(), "did not finish within 1s").await;
}

/// A dial to `addr` with a 3 s deadline fails before it with `why`.
async fn dial_gives_up_within_a_third(pki: &Pki, addr: SocketAddr, why: &str) {
    let mut cfg = client_config(pki, addr, "edge-unheard");
    cfg.handshake_timeout = Duration::from_secs(3);
    let client = QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let started = tokio::time::Instant::now();
    let err = client.connect().await.expect_err("nobody answers").to_string();
    assert!(err.contains(why), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3), "given up before the dial's deadline");
}

#[tokio::test]
async fn a_header_nobody_answers_is_given_up_after_a_third_of_the_deadline() {
    // A QUIC server that completes the handshake, takes the header stream
    // and says nothing, as one that forgot the connection and whose close
    // was lost looks to the client.
    let pki = Pki::new();
    let identity = pki.server_tls().identity;
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(identity.cert_chain, identity.key)
        .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let mute =
        quinn::Endpoint::server(quinn::ServerConfig::with_crypto(Arc::new(crypto)), "127.0.0.1:0".parse().unwrap())
            .unwrap();
    let addr = mute.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let conn = mute.accept().await.unwrap().await.unwrap();
        let stream = conn.accept_bi().await.unwrap();
        std::future::pending::<()>().await;
        drop((conn, stream));
    });
    dial_gives_up_within_a_third(&pki, addr, "no handshake reply within 1s").await;
    held.abort();
}

#[tokio::test]
async fn the_last_message_before_a_close_reaches_the_peer() {
    // A refusal is a message and then the close: closing a QUIC connection
    // discards what the peer has not acknowledged, so the close waits for it.
    let pki = Pki::new();
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let client = quic_client(&pki, srv.local_addr(), "edge-refused");
    let conn = client.connect().await.unwrap();
    let accepted = srv.accept().await.unwrap();
    let (_ctx, mut crx) = conn.split();
    for i in 0..3 {
        accepted.tx.try_write(pod(&format!("before-{i}"))).unwrap();
    }
    accepted.tx.close_with(pod("the-reason")).await.unwrap();
    for i in 0..3 {
        assert_eq!(crx.recv().await.unwrap().route.resource, format!("default/pod/before-{i}"));
    }
    assert_eq!(crx.recv().await.unwrap().route.resource, "default/pod/the-reason");
    assert!(crx.recv().await.is_none(), "then the connection closes");
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

/// A QUIC server on a loopback port whose stateless reset keys derive from
/// `secret`.
async fn quic_server_with_secret(pki: &Pki, secret: [u8; 32]) -> Server {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.restart_secret = Some(secret);
    Server::bind_quic(cfg).await.unwrap()
}

/// A client that sends a keep-alive every `ping` and gives a silent
/// connection a minute.
fn talkative_client(pki: &Pki, addr: SocketAddr, node: &str, ping: Duration) -> QuicClient {
    let mut cfg = client_config(pki, addr, node);
    cfg.conn.ping_interval = Some(ping);
    cfg.conn.read_timeout = Some(Duration::from_secs(60));
    QuicClient::new(cfg, "127.0.0.1:0".parse().unwrap()).unwrap()
}

/// An edge whose server dies without a word and comes back (same secret,
/// another port behind the same address) learns at its next packet that
/// its connection is gone: the new server recognises the connection ID its
/// predecessor issued and answers with a stateless reset the edge accepts.
/// Without the shared secret the edge would wait out its idle timeout (a
/// minute here, past the test's deadline).
#[tokio::test]
async fn an_edge_of_a_restarted_server_learns_at_its_next_packet_that_its_connection_is_gone() {
    let pki = Pki::new();
    let secret = [7u8; 32];
    let mut srv = quic_server_with_secret(&pki, secret).await;
    let relay = edgehive_testkit::udp::UdpRelay::start(srv.local_addr()).await.unwrap();
    let client = talkative_client(&pki, relay.addr(), "edge-restart", Duration::from_millis(500));
    let conn = client.connect().await.unwrap();
    let accepted = srv.accept().await.unwrap();
    let (ctx, mut crx) = conn.split();
    ctx.write(pod("before")).await.unwrap();
    let (_stx, mut srx) = accepted.split();
    assert_eq!(srx.recv().await.unwrap().route.resource, "default/pod/before");

    // The server dies: nothing it says reaches the edge any more.
    relay.set_blackhole(true);
    drop((srx, srv));
    let srv2 = quic_server_with_secret(&pki, secret).await;
    relay.set_upstream(srv2.local_addr());
    relay.set_blackhole(false);

    let ended = tokio::time::timeout(Duration::from_secs(20), async { while crx.recv().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the edge still holds its connection to the dead server");
    assert_eq!(crx.close_reason(), Some(CloseReason::PeerClosed), "ended by the reset, not by its idle timeout");
    // And it connects to the new server, resuming the TLS session the old
    // one made: the tickets' keys derive from the same secret.
    let mut srv2 = srv2;
    let again = client.connect().await.unwrap();
    let accepted = srv2.accept().await.unwrap();
    again.split().0.write(pod("after")).await.unwrap();
    assert_eq!(accepted.split().1.recv().await.unwrap().route.resource, "default/pod/after");
    assert_eq!(srv2.stats().tls_resumed(), 1, "the restarted server took its predecessor's ticket");
}

/// The other side of the same key: a server with another secret (another
/// cloud, or one whose secret was lost) cannot end another server's
/// connections. Its resets carry tokens the edge does not accept, and it
/// sends none for connection IDs it did not sign.
#[tokio::test]
async fn a_server_with_another_secret_cannot_end_the_connection() {
    let pki = Pki::new();
    let mut srv = quic_server_with_secret(&pki, [7u8; 32]).await;
    let relay = edgehive_testkit::udp::UdpRelay::start(srv.local_addr()).await.unwrap();
    let client = talkative_client(&pki, relay.addr(), "edge-other", Duration::from_millis(200));
    let conn = client.connect().await.unwrap();
    let (stx, _srx) = srv.accept().await.unwrap().split();
    let (_ctx, mut crx) = conn.split();

    // Its packets go to an impostor for a while: keep-alives and their
    // retransmissions, each a chance for a reset.
    let other = quic_server_with_secret(&pki, [8u8; 32]).await;
    relay.set_upstream(other.local_addr());
    let ended = tokio::time::timeout(Duration::from_secs(2), crx.recv()).await;
    assert!(ended.is_err(), "a server with another secret ended the connection: {:?}", crx.close_reason());
    // Back to its own server: the connection carries on.
    relay.set_upstream(srv.local_addr());
    stx.write(pod("still")).await.unwrap();
    assert_eq!(crx.recv().await.unwrap().route.resource, "default/pod/still");
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

/// A QUIC server behind on its work (told that any lag is too much), its
/// handshake budget cut to 2; `per_source`: its per-source limit, if not the
/// default.
async fn behind(per_source: Option<usize>, pki: &Pki) -> Server {
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.handshake_timeout = Duration::from_secs(10);
    cfg.max_lag = Some(Duration::ZERO);
    cfg.min_handshake_budget = 2;
    if let Some(n) = per_source {
        cfg.max_pending_handshakes_per_source = n;
    }
    let srv = Server::bind_quic(cfg).await.unwrap();
    eventually("the budget cut to its floor", || srv.stats().handshake_budget() == 2).await;
    srv
}

/// Holds the budget of a server [`behind`] with two silent handshakes from
/// `sources`.
async fn fill(pki: &Pki, srv: &Server, sources: [&str; 2]) -> [(quinn::Endpoint, quinn::Connection); 2] {
    let a = raw_quic_from(pki, srv.local_addr(), sources[0]).await;
    let b = raw_quic_from(pki, srv.local_addr(), sources[1]).await;
    assert_eq!(srv.stats().pending_handshakes(), 2);
    [a, b]
}

async fn behind_and_full(
    pki: &Pki,
    per_source: Option<usize>,
    sources: [&str; 2],
) -> (Server, [(quinn::Endpoint, quinn::Connection); 2]) {
    let srv = behind(per_source, pki).await;
    let held = fill(pki, &srv, sources).await;
    (srv, held)
}

/// A server behind on its work (here: told that any lag is too much) runs
/// at most its handshake budget at once. The attacker's move: open silent
/// handshakes up to the budget so that no edge gets in. A new edge past the
/// budget waits for a slot at most `MAX_WAIT` (2 s); then its attempt is
/// left unanswered, before any crypto and with nothing kept of it, and the
/// edge retransmits. Once the silent handshakes have taken half the
/// deadline, a retransmission gives the oldest up and gets in, within the
/// edge's one dial: silent connections hold the budget no longer than that.
#[tokio::test]
async fn a_server_behind_defers_past_its_budget_and_silent_handshakes_hold_it_only_so_long() {
    let pki = Pki::new();
    let (mut srv, [(_a, silent_a), _b]) = behind_and_full(&pki, None, ["127.0.0.1:0", "127.0.0.1:0"]).await;
    let opened = tokio::time::Instant::now();

    let client = quic_client(&pki, srv.local_addr(), "edge-q");
    let dial = tokio::spawn(async move { client.connect().await });
    eventually("the edge waits for a slot, then goes unanswered", || srv.stats().quic_deferred() >= 1).await;
    assert!(opened.elapsed() < Duration::from_secs(5), "the silent handshakes are still young");
    assert_eq!(srv.stats().pending_handshakes(), 2);
    assert!(!dial.is_finished(), "the dial goes on");

    // Half the deadline on, a retransmission of the same dial gets in.
    let conn = dial.await.unwrap().expect("in, by the same dial");
    assert!(opened.elapsed() >= Duration::from_secs(5), "not before the oldest silent one was half the deadline old");
    assert_eq!(conn.peer().node_id, "edge-q");
    assert_eq!(srv.accept().await.unwrap().peer().node_id, "edge-q");
    assert_eq!(srv.stats().evicted_budget(), 1);
    assert_eq!(srv.stats().refused_overload(), 0, "nobody refused");
    assert_eq!(srv.stats().quic_retries(), 1, "its address was validated once, for the whole dial");
    tokio::time::timeout(Duration::from_secs(30), silent_a.closed()).await.expect("the oldest silent one is closed");
}

/// Waits up to `within` for a spawned dial of `node`, which must succeed,
/// and takes the connection the server accepted for it.
async fn dialed_in(
    srv: &mut Server,
    dial: tokio::task::JoinHandle<Result<Connection, edgehive_viaduct::ConnectError>>,
    within: Duration,
    node: &str,
    what: &str,
) {
    let conn = tokio::time::timeout(within, dial).await.expect(what).unwrap().expect("not refused");
    assert_eq!(conn.peer().node_id, node);
    assert_eq!(srv.accept().await.unwrap().peer().node_id, node);
}

/// In a reconnection storm an edge's dial may go unanswered while the
/// server is behind; when its retransmission gets in, the session ticket
/// of its ClientHello still resumes the session (a refused dial would have
/// spent it, and the edge come back for a full handshake).
#[tokio::test]
async fn a_dial_left_unanswered_still_resumes_its_session() {
    let pki = Pki::new();
    let mut srv = behind(None, &pki).await;
    let client = quic_client(&pki, srv.local_addr(), "edge-q");
    connect_once(&mut srv, &client).await;
    assert_eq!(srv.stats().tls_resumed(), 0);

    let [(_a, silent_a), _b] = fill(&pki, &srv, ["127.0.0.1:0", "127.0.0.1:0"]).await;
    let dial = tokio::spawn(async move { client.connect().await });
    eventually("the dial goes unanswered", || srv.stats().quic_deferred() >= 1).await;
    silent_a.close(0u32.into(), b"gone");
    dialed_in(&mut srv, dial, Duration::from_secs(10), "edge-q", "in by a retransmission").await;
    assert_eq!(srv.stats().tls_resumed(), 1, "the ticket in the unanswered ClientHello resumed");
}

/// In a reconnection storm the budget of a server that is behind is full
/// most of the time, and a refused edge backs off for seconds while slots
/// free up. A new edge past the budget therefore waits (up to `MAX_WAIT`)
/// and gets the first slot that frees, instead of being refused.
#[tokio::test]
async fn a_connection_past_the_budget_waits_for_the_next_free_slot() {
    let pki = Pki::new();
    let (mut srv, [(_a, silent_a), _b]) = behind_and_full(&pki, None, ["127.0.0.1:0", "127.0.0.1:0"]).await;

    let client = quic_client(&pki, srv.local_addr(), "edge-q");
    let dial = tokio::spawn(async move { client.connect().await });
    eventually("the edge waits for a slot", || srv.stats().waiting_handshakes() == 1).await;
    // One silent handshake ends (its client goes): its slot is the edge's.
    silent_a.close(0u32.into(), b"gone");
    dialed_in(&mut srv, dial, Duration::from_secs(5), "edge-q", "in as soon as a slot freed").await;
    assert_eq!(srv.stats().refused_overload(), 0);
    assert_eq!(srv.stats().waiting_handshakes(), 0);
}

/// One source holds at most its per-source share of the waiting room, so
/// one address (an attacker's, or a site's NAT) cannot fill it for everyone
/// else: past its share, its next attempt is left unanswered at once while
/// the one already waiting keeps its place; the unanswered one gets in by a
/// retransmission once there is room.
#[tokio::test]
async fn one_source_waits_only_up_to_its_share() {
    let pki = Pki::new();
    // The budget is held from two other addresses.
    let (mut srv, [(_a, silent_a), _b]) = behind_and_full(&pki, Some(1), ["127.0.0.3:0", "127.0.0.4:0"]).await;

    let first = quic_client(&pki, srv.local_addr(), "edge-1");
    let first = tokio::spawn(async move { first.connect().await });
    eventually("the first waits", || srv.stats().waiting_handshakes() == 1).await;
    let second = quic_client(&pki, srv.local_addr(), "edge-2");
    let second = tokio::spawn(async move { second.connect().await });
    eventually("the second goes unanswered: its source's share is taken", || srv.stats().quic_deferred() >= 1).await;
    assert_eq!(srv.stats().waiting_handshakes(), 1, "the first keeps its place");

    silent_a.close(0u32.into(), b"gone");
    dialed_in(&mut srv, first, Duration::from_secs(5), "edge-1", "the first in once a slot freed").await;
    dialed_in(&mut srv, second, Duration::from_secs(10), "edge-2", "the second in by a retransmission").await;
    assert_eq!(srv.stats().refused_overload(), 0);
}

/// The budget also follows how long handshakes take to complete, since one
/// socket's reader (or the edges) can be the bottleneck while the runtime
/// is on time: most handshakes completed in a look taking over a quarter of
/// the deadline cut it. Only completed handshakes count, so a stranger's
/// silent handshake that times out moves nothing.
#[tokio::test]
async fn slow_completed_handshakes_cut_the_budget_and_silent_ones_do_not() {
    let pki = Pki::new();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.handshake_timeout = Duration::from_secs(2);
    // Lag alone never cuts here.
    cfg.max_lag = Some(Duration::from_secs(60));
    cfg.min_handshake_budget = 1;
    let mut srv = Server::bind_quic(cfg).await.unwrap();
    let (_ep, silent) = raw_quic(&pki, srv.local_addr()).await;
    tokio::time::timeout(Duration::from_secs(30), silent.closed()).await.expect("the silent connection is closed");
    eventually("the timeout counted", || srv.stats().handshake_timeouts() == 1).await;
    // Two looks pass after it.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(srv.stats().budget_cuts(), 0, "a timeout does not cut");

    // An edge that sends its header after 700 ms (over 2 s / 4).
    let (_ep, conn) = raw_quic(&pki, srv.local_addr()).await;
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    send.write_all(&header(serde_json::json!({"node_id": "slow"}))).await.unwrap();
    assert_eq!(srv.accept().await.unwrap().peer().node_id, "slow");
    eventually("the budget cut", || srv.stats().budget_cuts() == 1).await;
    assert!(srv.stats().handshake_budget() < 4096);
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

/// Session liveness (`keepalive: ping`) is agreed only when the client
/// offers it and the server accepts it; once agreed, QUIC's keep-alives
/// keep a link that carries no message up and show the server it lives,
/// and a link whose keep-alives stop looks idle.
#[tokio::test]
async fn session_liveness_is_agreed_in_the_header_frame_and_carried_by_keepalives() {
    let pki = Pki::new();
    for (offer, accept) in [(true, true), (true, false), (false, true), (false, false)] {
        let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
        cfg.ping_keepalive = accept;
        let mut srv = Server::bind_quic(cfg).await.unwrap();
        let mut ccfg = client_config(&pki, srv.local_addr(), "edge-live");
        ccfg.ping_keepalive = offer;
        ccfg.features = vec![edgehive_viaduct::features::INVENTORY.to_owned()];
        let conn = QuicClient::new(ccfg, "127.0.0.1:0".parse().unwrap()).unwrap().connect().await.unwrap();
        let accepted = srv.accept().await.unwrap();
        assert_eq!(conn.peer().ping_keepalive, offer && accept, "client, offer {offer} accept {accept}");
        assert_eq!(accepted.peer().ping_keepalive, offer && accept, "server, offer {offer} accept {accept}");
    }
    // `pair(keep-alive interval)`: a server and client agreeing liveness,
    // with a 600 ms idle timeout (the connections' read timeout).
    let pair = |every: Duration| {
        let pki = &pki;
        async move {
            let idle = ConnConfig { read_timeout: Some(Duration::from_millis(600)), ..ConnConfig::default() };
            let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
            cfg.ping_keepalive = true;
            cfg.conn = idle.clone();
            let mut srv = Server::bind_quic(cfg).await.unwrap();
            let mut ccfg = client_config(pki, srv.local_addr(), "edge-live");
            ccfg.ping_keepalive = true;
            ccfg.conn = ConnConfig { ping_interval: Some(every), ..idle };
            let client = QuicClient::new(ccfg, "127.0.0.1:0".parse().unwrap()).unwrap();
            let conn = client.connect().await.unwrap();
            let accepted = srv.accept().await.unwrap();
            (srv, client, conn, accepted)
        }
    };
    let (_srv, _client, conn, accepted) = pair(Duration::from_millis(100)).await;
    let (_ctx, crx) = conn.split();
    let (_stx, srx) = accepted.split();
    // Three idle timeouts without a message: both ends still up, and the
    // server has heard from the edge within the last few keep-alives.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert!(
        crx.close_reason().is_none() && srx.close_reason().is_none(),
        "the link stays up on keep-alives alone: {:?} {:?}",
        crx.close_reason(),
        srx.close_reason()
    );
    assert!(srx.idle_for() < Duration::from_millis(500), "keep-alives count as life: {:?}", srx.idle_for());
    // Keep-alives every 10 s against a 600 ms idle timeout: the link goes
    // silent, the server sees it idle, and the transport ends it.
    let (_srv, _client, conn, accepted) = pair(Duration::from_secs(10)).await;
    let (_ctx, _crx) = conn.split();
    let (_stx, mut srx) = accepted.split();
    // The handshake's last packets settle first (ACKs within 25 ms).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = srx.idle_for();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(srx.idle_for() >= Duration::from_millis(300), "silence shows: {:?}", srx.idle_for());
    let ended = tokio::time::timeout(Duration::from_secs(5), srx.recv()).await.unwrap();
    assert!(ended.is_none(), "a silent link ends at its idle timeout");
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

/// A QUIC pair on which both ends agreed stream sessions, each counting
/// them: (server, the edge's endpoint, edge, cloud).
async fn quic_streams_pair(
    pki: &Pki,
    cloud_stats: Option<Arc<StreamStats>>,
    edge_stats: Option<Arc<StreamStats>>,
) -> (Server, QuicClient, Connection, Connection) {
    let streams = edgehive_viaduct::stream::FEATURE.to_owned();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.features = vec![streams.clone()];
    cfg.conn.stream_stats = cloud_stats;
    let mut srv = Server::bind_quic(cfg).await.unwrap();
    let mut ccfg = client_config(pki, srv.local_addr(), "edge-q");
    ccfg.features = vec![streams];
    ccfg.conn.stream_stats = edge_stats;
    let client = QuicClient::new(ccfg, "127.0.0.1:0".parse().unwrap()).unwrap();
    let edge = client.connect().await.unwrap();
    let cloud = srv.accept().await.unwrap();
    (srv, client, edge, cloud)
}

/// Frame `i` of the data tagged `tag`.
fn pattern(tag: usize, i: usize) -> Bytes {
    Bytes::from(vec![((tag * 31 + i) % 251) as u8; MAX_DATA])
}

/// A mebibyte of session data, in frames.
const MIB_FRAMES: usize = (1 << 20) / MAX_DATA;

async fn send_mib(mut tx: StreamTx, tag: usize, sent: Arc<AtomicUsize>) -> StreamTx {
    for i in 0..MIB_FRAMES {
        tx.send(pattern(tag, i)).await.unwrap();
        sent.fetch_add(1, Ordering::Relaxed);
    }
    tx.finish().await.unwrap();
    tx
}

async fn recv_mib(mut rx: StreamRx, tag: usize) -> StreamRx {
    for i in 0..MIB_FRAMES {
        assert_eq!(rx.recv().await.unwrap(), Some(pattern(tag, i)), "frame {i} of {tag}");
    }
    assert_eq!(rx.recv().await.unwrap(), None, "the end of {tag}");
    rx
}

/// Session frames as a hand-made peer writes them: kind, length, payload.
fn session_frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![kind];
    f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The next session frame on `recv`; `None` at the end of the stream.
async fn read_session_frame(recv: &mut quinn::RecvStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    match recv.read_exact(&mut head).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) => return None,
        Err(e) => panic!("{e}"),
    }
    let mut payload = vec![0; u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize];
    recv.read_exact(&mut payload).await.unwrap();
    Some((head[0], payload))
}

/// A hand-made edge: its handshake (offering `features`) done, its message
/// stream.
async fn raw_edge(
    pki: &Pki,
    addr: SocketAddr,
    features: &[&str],
) -> (quinn::Endpoint, quinn::Connection, quinn::SendStream, quinn::RecvStream) {
    let (ep, conn) = raw_quic(pki, addr).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&header(serde_json::json!({"node_id": "raw", "features": features}))).await.unwrap();
    let mut len = [0u8; 4];
    recv.read_exact(&mut len).await.unwrap();
    let mut reply = vec![0; u32::from_be_bytes(len) as usize];
    recv.read_exact(&mut reply).await.unwrap();
    (ep, conn, send, recv)
}

/// Over QUIC each session is a QUIC stream of its own: twenty move a
/// mebibyte each way at once, while one of them has a reader that does not
/// read. That stops its sender only, at the session's window: the others
/// finish, messages still flow, and it goes on once read. Sessions are
/// counted as on WebSocket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_sessions_move_a_mebibyte_each_way_and_a_stuck_reader_stops_only_its_sender() {
    const SESSIONS: usize = 20;
    const UP: usize = 1_000;
    let pki = Pki::new();
    let (cloud_stats, edge_stats) = (Arc::new(StreamStats::default()), Arc::new(StreamStats::default()));
    let (_srv, _client, edge, cloud) =
        quic_streams_pair(&pki, Some(cloud_stats.clone()), Some(edge_stats.clone())).await;
    let mut incoming = edge.rx.incoming_streams().unwrap();
    assert!(cloud.rx.incoming_streams().is_none(), "the cloud opens sessions and takes none");

    let mut opened = Vec::new();
    for n in 0..SESSIONS {
        opened.push(cloud.tx.open_stream(Bytes::from(vec![n as u8])).await.unwrap());
    }
    let mut accepted = Vec::new();
    for _ in 0..SESSIONS {
        accepted.push(incoming.accept().await.unwrap());
    }
    assert_eq!(cloud.tx.open_streams(), SESSIONS);

    let mut tasks = Vec::new();
    let mut rx_tasks = Vec::new();
    let stuck_sent = Arc::new(AtomicUsize::new(0));
    let mut stuck_sender = None;
    for s in accepted {
        let n = s.header()[0] as usize;
        let (tx, rx) = s.split();
        let sent = if n == 0 { stuck_sent.clone() } else { Arc::new(AtomicUsize::new(0)) };
        let up = tokio::spawn(send_mib(tx, UP + n, sent));
        if n == 0 {
            stuck_sender = Some(up);
        } else {
            tasks.push(up);
        }
        rx_tasks.push(tokio::spawn(recv_mib(rx, n)));
    }
    let mut stuck_rx = None;
    for s in opened {
        let n = s.header()[0] as usize;
        let (tx, rx) = s.split();
        tasks.push(tokio::spawn(send_mib(tx, n, Arc::new(AtomicUsize::new(0)))));
        if n == 0 {
            // The cloud never reads session 0's upward direction (yet).
            stuck_rx = Some(rx);
        } else {
            rx_tasks.push(tokio::spawn(recv_mib(rx, UP + n)));
        }
    }
    let mut halves = Vec::new();
    let done = async {
        for t in tasks {
            halves.push(t.await.unwrap());
        }
        let mut rxs = Vec::new();
        for t in rx_tasks {
            rxs.push(t.await.unwrap());
        }
        rxs
    };
    let rxs = tokio::time::timeout(Duration::from_secs(120), done).await.expect("the other sessions finish");

    // The stuck session's sender stopped at its window.
    let stuck_sender = stuck_sender.unwrap();
    assert!(!stuck_sender.is_finished(), "the stuck session's sender waits");
    let sent = stuck_sent.load(Ordering::Relaxed);
    assert!(sent <= edgehive_viaduct::stream::WINDOW as usize / MAX_DATA, "{sent} frames sent past the window");
    // Messages flow both ways meanwhile.
    let (etx, mut erx) = edge.split();
    let (ctx, mut crx) = cloud.split();
    assert_delivers(&ctx, &mut erx).await;
    assert_delivers(&etx, &mut crx).await;

    // Read, the stuck session goes on to its end.
    let stuck_rx = recv_mib(stuck_rx.unwrap(), UP).await;
    halves.push(stuck_sender.await.unwrap());
    drop((halves, rxs, stuck_rx));
    eventually("every session ended cleanly at both ends", || {
        ctx.open_streams() == 0
            && etx.open_streams() == 0
            && cloud_stats.closed.get() == SESSIONS as u64
            && edge_stats.closed.get() == SESSIONS as u64
    })
    .await;
    let bytes = (SESSIONS * MIB_FRAMES * MAX_DATA) as u64;
    for (side, st) in [("cloud", &cloud_stats), ("edge", &edge_stats)] {
        assert_eq!(st.opened.get(), SESSIONS as u64, "{side}");
        assert_eq!(st.reset.get(), 0, "{side}");
        assert_eq!(st.open.get(), 0, "{side}");
        assert_eq!(st.bytes_sent.get(), bytes, "{side}");
        assert_eq!(st.bytes_received.get(), bytes, "{side}");
    }
}

/// A data frame over the limit resets its session, with why, and nothing
/// else: another session and the messages go on.
#[tokio::test]
async fn an_oversize_frame_resets_only_its_session() {
    let pki = Pki::new();
    let streams = edgehive_viaduct::stream::FEATURE.to_owned();
    let mut cfg = ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.features = vec![streams];
    let mut srv = Server::bind_quic(cfg).await.unwrap();
    let (_ep, conn, mut msg_send, mut msg_recv) =
        raw_edge(&pki, srv.local_addr(), &[edgehive_viaduct::stream::FEATURE]).await;
    let cloud = srv.accept().await.unwrap();

    let (_a_tx, mut a_rx) = cloud.tx.open_stream(Bytes::from_static(b"a")).await.unwrap().split();
    let (_b_tx, mut b_rx) = cloud.tx.open_stream(Bytes::from_static(b"b")).await.unwrap().split();
    let (mut a_send, mut a_recv) = conn.accept_bi().await.unwrap();
    let (mut b_send, mut b_recv) = conn.accept_bi().await.unwrap();
    assert_eq!(read_session_frame(&mut a_recv).await, Some((1, b"a".to_vec())), "OPEN with the header");
    assert_eq!(read_session_frame(&mut b_recv).await, Some((1, b"b".to_vec())));

    // DATA one byte over the limit on session a.
    let mut oversize = vec![2];
    oversize.extend_from_slice(&(MAX_DATA as u32 + 1).to_be_bytes());
    a_send.write_all(&oversize).await.unwrap();
    let why = match a_rx.recv().await {
        Err(StreamError::Reset(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(why.contains("over the limit of 32768"), "{why}");
    // The edge reads why, then the end; its direction is stopped.
    let (kind, reason) = read_session_frame(&mut a_recv).await.unwrap();
    assert_eq!((kind, String::from_utf8(reason).unwrap()), (5, why));
    assert_eq!(read_session_frame(&mut a_recv).await, None);
    let stopped = a_send.stopped().await.unwrap();
    assert_eq!(stopped, Some(quinn::VarInt::from_u32(edgehive_viaduct::quic::CODE_SESSION_RESET)));

    // Session b and the messages are untouched.
    b_send.write_all(&session_frame(2, b"fine")).await.unwrap();
    assert_eq!(b_rx.recv().await.unwrap().unwrap().as_ref(), b"fine");
    let (ctx, mut crx) = cloud.split();
    msg_send.write_all(&encode_frame(&pod("up"))).await.unwrap();
    assert_eq!(crx.recv().await.unwrap().route.resource, pod("up").route.resource);
    ctx.write(pod("down")).await.unwrap();
    let mut len = [0u8; 4];
    msg_recv.read_exact(&mut len).await.unwrap();
    let mut line = vec![0; u32::from_be_bytes(len) as usize];
    msg_recv.read_exact(&mut line).await.unwrap();
    assert_eq!(Message::decode(&line).unwrap().route.resource, pod("down").route.resource);
    assert!(!ctx.is_closed());
}

/// Only the cloud opens sessions over QUIC. An edge's is refused with why,
/// again and again, and the connection lives; a stream from a peer that did
/// not agree sessions is refused the same way.
#[tokio::test]
async fn sessions_opened_by_the_edge_or_without_agreement_are_refused_and_the_connection_lives() {
    let pki = Pki::new();
    let (_srv, _client, edge, cloud) = quic_streams_pair(&pki, None, None).await;
    // More than the streams the cloud lets an edge have open at once: the
    // refused ones make room again.
    for _ in 0..10 {
        let (_etx, mut erx) = edge.tx.open_stream(Bytes::from_static(b"{\"kind\":\"exec\"}")).await.unwrap().split();
        match erx.recv().await {
            Err(StreamError::Reset(why)) => assert!(why.contains("does not accept"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
    let (etx, mut erx) = edge.split();
    let (ctx, mut crx) = cloud.split();
    assert_delivers(&ctx, &mut erx).await;
    assert_delivers(&etx, &mut crx).await;
    // The cloud's own sessions still open.
    let mut incoming = erx.incoming_streams().unwrap();
    let (mut tx, _rx) = ctx.open_stream(Bytes::new()).await.unwrap().split();
    let (_etx2, mut erx2) = incoming.accept().await.unwrap().split();
    tx.send(Bytes::from_static(b"hello")).await.unwrap();
    assert_eq!(erx2.recv().await.unwrap().unwrap().as_ref(), b"hello");

    // No agreement: the cloud refuses a session stream, and opens none.
    let mut srv = quic_server(&pki, ConnConfig::default()).await;
    let (_ep, conn, mut msg_send, _msg_recv) = raw_edge(&pki, srv.local_addr(), &[]).await;
    let cloud = srv.accept().await.unwrap();
    assert_eq!(cloud.tx.open_stream(Bytes::new()).await.unwrap_err(), StreamError::NotAgreed);
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&session_frame(1, b"{}")).await.unwrap();
    let (kind, why) = read_session_frame(&mut recv).await.unwrap();
    assert_eq!(kind, 5);
    assert!(String::from_utf8_lossy(&why).contains("not agreed"), "{why:?}");
    assert_eq!(
        send.stopped().await.unwrap(),
        Some(quinn::VarInt::from_u32(edgehive_viaduct::quic::CODE_SESSION_REFUSED))
    );
    msg_send.write_all(&encode_frame(&pod("still"))).await.unwrap();
    let mut crx = cloud.rx;
    assert_eq!(crx.recv().await.unwrap().route.resource, pod("still").route.resource);
}

/// A reset's reason reaches the peer both ways, after the data sent before
/// it; the peer's sender learns at once. When the peer's window is full
/// the reason cannot go, and the peer reads that the session was reset.
#[tokio::test]
async fn reset_reasons_reach_the_peer() {
    let pki = Pki::new();
    let (_srv, _client, edge, cloud) = quic_streams_pair(&pki, None, None).await;
    let mut incoming = edge.rx.incoming_streams().unwrap();

    // The cloud resets.
    let (mut ctx, mut crx) = cloud.tx.open_stream(Bytes::new()).await.unwrap().split();
    let (mut etx, mut erx) = incoming.accept().await.unwrap().split();
    ctx.send(Bytes::from_static(b"before")).await.unwrap();
    ctx.reset("pod deleted");
    assert!(ctx.is_reset());
    tokio::time::timeout(Duration::from_secs(10), etx.reset_by_peer()).await.expect("the edge's sender learns");
    assert!(etx.is_reset());
    assert_eq!(erx.recv().await.unwrap(), Some(Bytes::from_static(b"before")), "data before the reset arrives");
    assert_eq!(erx.recv().await.unwrap_err(), StreamError::Reset("pod deleted".into()));
    assert!(matches!(etx.send(Bytes::from_static(b"x")).await, Err(StreamError::Reset(_))));
    assert_eq!(crx.recv().await.unwrap_err(), StreamError::Reset("pod deleted".into()));
    drop((ctx, crx, etx, erx));

    // The edge resets.
    let (ctx, mut crx) = cloud.tx.open_stream(Bytes::new()).await.unwrap().split();
    let (etx, _erx) = incoming.accept().await.unwrap().split();
    etx.reset("container \"c\" not found");
    assert_eq!(crx.recv().await.unwrap_err(), StreamError::Reset("container \"c\" not found".into()));
    tokio::time::timeout(Duration::from_secs(10), ctx.reset_by_peer()).await.unwrap();
    drop((ctx, crx, etx));

    // A window the edge has not read is full: the reason does not fit.
    let (mut ctx, _crx) = cloud.tx.open_stream(Bytes::new()).await.unwrap().split();
    let (_etx, mut erx) = incoming.accept().await.unwrap().split();
    // With their 5-byte heads (and the OPEN's), these fill the window exactly.
    for i in 0..edgehive_viaduct::stream::WINDOW as usize / MAX_DATA {
        let len = if i == 0 { MAX_DATA - 10 } else { MAX_DATA - 5 };
        ctx.send(Bytes::from(vec![9; len])).await.unwrap();
    }
    ctx.reset("a reason that does not fit");
    let err = loop {
        match erx.recv().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("finished instead of reset"),
            Err(e) => break e,
        }
    };
    assert_eq!(err, StreamError::Reset("stream session reset by the peer".into()));
    // A dropped session is reset for the peer.
    let (_ctx, mut crx) = cloud.tx.open_stream(Bytes::new()).await.unwrap().split();
    drop(incoming.accept().await.unwrap());
    assert_eq!(crx.recv().await.unwrap_err(), StreamError::Reset("stream session closed".into()));
}

/// Each end finishes its own direction: the peer reads everything, then
/// the end; the other direction goes on; both finished, the session ends
/// cleanly (not counted as a reset). The connection closing ends sessions.
#[tokio::test]
async fn finish_ends_one_direction_and_both_end_the_session_cleanly() {
    let pki = Pki::new();
    let (cloud_stats, edge_stats) = (Arc::new(StreamStats::default()), Arc::new(StreamStats::default()));
    let (_srv, _client, edge, cloud) =
        quic_streams_pair(&pki, Some(cloud_stats.clone()), Some(edge_stats.clone())).await;
    let mut incoming = edge.rx.incoming_streams().unwrap();
    let (mut ctx, mut crx) = cloud.tx.open_stream(Bytes::from_static(b"h")).await.unwrap().split();
    let accepted = incoming.accept().await.unwrap();
    assert_eq!(accepted.header().as_ref(), b"h");
    let (mut etx, mut erx) = accepted.split();

    ctx.send(Bytes::from_static(b"one")).await.unwrap();
    ctx.finish().await.unwrap();
    ctx.finish().await.unwrap();
    assert_eq!(ctx.send(Bytes::from_static(b"late")).await.unwrap_err(), StreamError::Finished);
    assert_eq!(erx.recv().await.unwrap().unwrap().as_ref(), b"one");
    assert_eq!(erx.recv().await.unwrap(), None);
    assert_eq!(erx.recv().await.unwrap(), None, "the end stays the end");
    // The other direction still goes.
    etx.send(Bytes::from_static(b"reply")).await.unwrap();
    assert_eq!(crx.recv().await.unwrap().unwrap().as_ref(), b"reply");
    etx.finish().await.unwrap();
    assert_eq!(crx.recv().await.unwrap(), None);
    assert!(!ctx.is_reset() && !etx.is_reset());
    // Joined again, the session keeps its header.
    let joined = edgehive_viaduct::Stream::join(etx, erx);
    assert_eq!(joined.header().as_ref(), b"h");
    drop((joined, ctx, crx));
    eventually("the session ended at both ends", || {
        cloud.tx.open_streams() == 0
            && edge.tx.open_streams() == 0
            && cloud_stats.closed.get() == 1
            && edge_stats.closed.get() == 1
    })
    .await;
    assert_eq!((cloud_stats.reset.get(), edge_stats.reset.get()), (0, 0), "a finished session is no reset");

    // A session dropped unfinished is counted as a reset.
    let opened = cloud.tx.open_stream(Bytes::new()).await.unwrap();
    drop(incoming.accept().await.unwrap());
    drop(opened);
    eventually("counted as reset", || cloud_stats.reset.get() == 1 && edge_stats.reset.get() == 1).await;

    // The edge's usual end of a log or an exec: it sends, finishes its
    // direction and drops the session while the cloud's is still open.
    // Everything it sent arrives, then the end (no reset discards it).
    let (_ctx, mut crx) = cloud.tx.open_stream(Bytes::new()).await.unwrap().split();
    let (mut etx, erx) = incoming.accept().await.unwrap().split();
    for i in 0..6 {
        etx.send(pattern(i, 0)).await.unwrap();
    }
    etx.finish().await.unwrap();
    drop((etx, erx));
    let mut got = Vec::new();
    while let Some(b) = crx.recv().await.unwrap() {
        got.push(b);
    }
    assert_eq!(got, (0..6).map(|i| pattern(i, 0)).collect::<Vec<_>>());

    // The connection closing ends every session at both ends.
    let (mut ctx, mut crx) = cloud.tx.open_stream(Bytes::new()).await.unwrap().split();
    let (_etx, mut erx) = incoming.accept().await.unwrap().split();
    edge.tx.close();
    assert!(matches!(erx.recv().await, Err(StreamError::Closed(_))));
    assert!(matches!(crx.recv().await, Err(StreamError::Closed(_))));
    assert!(ctx.send(Bytes::from_static(b"x")).await.is_err());
    assert!(incoming.accept().await.is_none());
    assert!(matches!(cloud.tx.open_stream(Bytes::new()).await, Err(StreamError::Closed(_))));
}
