//! WebSocket connections: exchange, identity, requests, control messages, and
//! the exact frames a KubeEdge peer sees.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns

mod common;

use std::time::Duration;

use common::*;
use edgehive_model::{Content, Message, op};
use edgehive_viaduct::{ConnConfig, Protocol};
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message as Frame;

#[tokio::test]
async fn messages_flow_both_ways_and_identity_is_known() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let (client, accepted) = pair(&pki, &mut srv, "edge-1").await;

    let peer = accepted.peer().clone();
    assert_eq!(peer.node_id, "edge-1");
    assert_eq!(peer.project_id, edgehive_model::well_known::DEFAULT_PROJECT_ID);
    assert_eq!(peer.protocol, Protocol::WebSocket);
    let cert = peer.cert.unwrap();
    assert_eq!(cert.common_name.as_deref(), Some("system:node:edge-1"));
    assert_eq!(cert.organizations, ["system:nodes"]);
    assert_eq!(cert.node_name(), Some("edge-1"));
    // The client sees the server's certificate.
    assert_eq!(client.peer().cert.as_ref().unwrap().common_name.as_deref(), Some("edgehive-cloud"));
    assert_eq!(client.peer().remote_addr, srv.local_addr());

    let (ctx, mut crx) = client.split();
    let (stx, mut srx) = accepted.split();
    let down = pod("nginx");
    stx.write(down.clone()).await.unwrap();
    assert_eq!(crx.recv().await.unwrap(), down);
    let up = down.response(Content::string("OK"));
    ctx.try_write(up.clone()).unwrap();
    assert_eq!(srx.recv().await.unwrap(), up);

    ctx.close();
    assert_eq!(ctx.closed().await, edgehive_viaduct::CloseReason::Local);
    assert!(srx.recv().await.is_none(), "server side ends when the client closes");
    assert_eq!(srx.close_reason(), Some(edgehive_viaduct::CloseReason::PeerClosed));
    assert!(ctx.write(pod("late")).await.is_err());
}

#[tokio::test]
async fn request_gets_the_response_matched_by_parent_id() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let (client, accepted) = pair(&pki, &mut srv, "edge-1").await;
    let (stx, mut srx) = accepted.split();
    tokio::spawn(async move {
        while let Some(m) = srx.recv().await {
            // An unrelated message first, then the response.
            stx.write(pod("noise")).await.unwrap();
            stx.write(m.response(Content::string("answer"))).await.unwrap();
        }
    });
    let (ctx, mut crx) = client.split();
    let resp = ctx.request(pod("q"), Duration::from_secs(10)).await.unwrap();
    assert_eq!(resp.content.as_text().as_deref(), Some("answer"));
    // The unrelated message went to the stream, not to the waiter.
    assert_eq!(crx.recv().await.unwrap().route.resource, "default/pod/noise");
}

#[tokio::test]
async fn no_response_is_lost_under_load() {
    const TASKS: usize = 16;
    const EACH: usize = 1_000;
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let (client, accepted) = pair(&pki, &mut srv, "edge-1").await;
    spawn_ok_responder(accepted);
    let (ctx, _crx) = client.split();
    let lost = lost_requests(&ctx, TASKS, EACH).await;
    assert_eq!(lost, 0, "responses lost out of {}", TASKS * EACH);
}

#[tokio::test]
async fn control_messages_are_acked_and_not_delivered() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let (client, accepted) = pair(&pki, &mut srv, "edge-1").await;
    let (_stx, mut srx) = accepted.split();
    let (ctx, _crx) = client.split();
    for operation in [op::VIADUCT_PING, op::VIADUCT_CONFIG, op::VIADUCT_PONG] {
        let m = Message::new().with_route("edgehub", "", "", operation);
        let ack = ctx.request(m, Duration::from_secs(10)).await.unwrap();
        assert_eq!(ack.content.as_text().as_deref(), Some("ack"));
    }
    // Nothing reached the application.
    ctx.write(pod("after")).await.unwrap();
    assert_eq!(srx.recv().await.unwrap().route.resource, "default/pod/after");
}

#[tokio::test]
async fn frames_are_json_text_with_newline_and_binary_is_accepted() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    let mut raw = raw_ws(&pki, srv.local_addr(), "edge-raw").await;
    let accepted = srv.accept().await.unwrap();
    let (stx, mut srx) = accepted.split();

    let m = pod("nginx");
    stx.write(m.clone()).await.unwrap();
    let Some(Ok(Frame::Text(text))) = raw.next().await else { panic!("expected a text frame") };
    assert!(text.ends_with('\n'), "gorilla's WriteJSON appends a newline");
    assert_eq!(text.as_str(), format!("{}\n", m.encode_string()));

    // A KubeEdge edge may send binary frames; both kinds decode.
    let ack = m.response(Content::string("OK"));
    raw.send(Frame::Binary(ack.encode().into())).await.unwrap();
    raw.send(Frame::Text(format!("{}\n", m.encode_string()).into())).await.unwrap();
    assert_eq!(srx.recv().await.unwrap(), ack);
    assert_eq!(srx.recv().await.unwrap(), m);
}

async fn raw_upgrade(pki: &Pki, addr: std::net::SocketAddr, headers: &str) -> String {
    let mut tls = raw_tls(pki, addr, Some(&pki.ca.node("edge-go"))).await.unwrap();
    let req = format!(
        "GET /e632aba927ea4ac2b575ec1603d56f10/edge-go/events HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{headers}\r\n"
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tls.read(&mut buf).await.unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test]
async fn go_canonical_header_names_are_accepted() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    // As Go's net/http writes them.
    let resp =
        raw_upgrade(&pki, srv.local_addr(), "Node_id: edge-go\r\nProject_id: e632\r\nConnectionuse: msg\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 101"), "{resp}");
    let conn = srv.accept().await.unwrap();
    assert_eq!(conn.peer().node_id, "edge-go");
    assert_eq!(conn.peer().project_id, "e632");
}

#[tokio::test]
async fn upgrade_without_connection_use_msg_is_refused_with_a_reason() {
    let pki = Pki::new();
    let srv = server(&pki, ConnConfig::default()).await;
    let resp = raw_upgrade(&pki, srv.local_addr(), "Node_id: edge-go\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 400"), "{resp}");
    assert!(resp.contains("missing ConnectionUse header"), "{resp}");
    let resp = raw_upgrade(&pki, srv.local_addr(), "Node_id: edge-go\r\nConnectionUse: shr\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 400") && resp.contains("not supported"), "{resp}");
    let resp = raw_upgrade(&pki, srv.local_addr(), "ConnectionUse: msg\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 400") && resp.contains("missing node_id"), "{resp}");
    eventually("3 refused upgrades counted", || srv.stats().upgrade_failures() == 3).await;
}

#[tokio::test]
async fn ping_keepalive_is_used_only_when_both_ends_agree() {
    let pki = Pki::new();
    for (offer, accept) in [(true, true), (true, false), (false, true), (false, false)] {
        let mut cfg = edgehive_viaduct::ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
        cfg.ping_keepalive = accept;
        let mut srv = edgehive_viaduct::Server::bind_ws(cfg).await.unwrap();
        let mut client_cfg = client_config(&pki, srv.local_addr(), "edge-1");
        client_cfg.ping_keepalive = offer;
        client_cfg.conn.ping_interval = Some(Duration::from_millis(100));
        let client = edgehive_viaduct::ws::connect(&client_cfg).await.unwrap();
        let accepted = tokio::time::timeout(Duration::from_secs(10), srv.accept()).await.unwrap().unwrap();
        let agreed = offer && accept;
        assert_eq!(client.peer().ping_keepalive, agreed, "client, offer {offer} accept {accept}");
        assert_eq!(accepted.peer().ping_keepalive, agreed, "server, offer {offer} accept {accept}");
        // Pings alone keep the server's view of the edge fresh.
        let (_ctx, _crx) = client.split();
        let (_stx, srx) = accepted.split();
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(srx.idle_for() < Duration::from_millis(400), "idle for {:?}", srx.idle_for());
    }
}

#[tokio::test]
async fn features_are_those_both_ends_have() {
    let pki = Pki::new();
    let inv = edgehive_viaduct::features::INVENTORY;
    for (offer, accept, agreed) in
        [(vec![inv, "future-thing"], vec![inv], vec![inv]), (vec![inv], vec![], vec![]), (vec![], vec![inv], vec![])]
    {
        let mut cfg = edgehive_viaduct::ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
        cfg.features = accept.iter().map(|s| s.to_string()).collect();
        let mut srv = edgehive_viaduct::Server::bind_ws(cfg).await.unwrap();
        let mut client_cfg = client_config(&pki, srv.local_addr(), "edge-1");
        client_cfg.features = offer.iter().map(|s| s.to_string()).collect();
        let client = edgehive_viaduct::ws::connect(&client_cfg).await.unwrap();
        let accepted = tokio::time::timeout(Duration::from_secs(10), srv.accept()).await.unwrap().unwrap();
        assert_eq!(client.peer().features, agreed, "client, offer {offer:?} accept {accept:?}");
        assert_eq!(accepted.peer().features, agreed, "server, offer {offer:?} accept {accept:?}");
        assert_eq!(client.peer().agreed(inv), !agreed.is_empty());
    }
    // A KubeEdge edge offers nothing and is answered nothing; a garbled offer
    // agrees on nothing and is not refused.
    let mut cfg = edgehive_viaduct::ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.features = vec![inv.to_owned()];
    let mut srv = edgehive_viaduct::Server::bind_ws(cfg).await.unwrap();
    let resp = raw_upgrade(&pki, srv.local_addr(), "Node_id: edge-go\r\nConnectionuse: msg\r\n").await;
    assert!(resp.starts_with("HTTP/1.1 101") && !resp.to_ascii_lowercase().contains("edgehive-features"), "{resp}");
    assert!(srv.accept().await.unwrap().peer().features.is_empty());
    let resp = raw_upgrade(
        &pki,
        srv.local_addr(),
        "Node_id: edge-go\r\nConnectionuse: msg\r\nEdgehive-Features: INVENTORY,,x_y,inventory-but-longer-than-thirty-two\r\n",
    )
    .await;
    assert!(resp.starts_with("HTTP/1.1 101") && !resp.to_ascii_lowercase().contains("edgehive-features"), "{resp}");
    let resp = raw_upgrade(
        &pki,
        srv.local_addr(),
        "Node_id: edge-go\r\nConnectionuse: msg\r\nEdgehive-Features: x, inventory\r\n",
    )
    .await;
    assert!(resp.to_ascii_lowercase().contains("edgehive-features: inventory\r\n"), "{resp}");
}

/// A WebSocket pair on which both ends agreed stream sessions: (edge, cloud).
async fn streams_pair(
    pki: &Pki,
) -> (edgehive_viaduct::Server, edgehive_viaduct::Connection, edgehive_viaduct::Connection) {
    let streams = edgehive_viaduct::stream::FEATURE.to_owned();
    let mut cfg = edgehive_viaduct::ServerConfig::new("127.0.0.1:0".parse().unwrap(), pki.server_tls());
    cfg.features = vec![streams.clone()];
    let mut srv = edgehive_viaduct::Server::bind_ws(cfg).await.unwrap();
    let mut client_cfg = client_config(pki, srv.local_addr(), "edge-1");
    client_cfg.features = vec![streams];
    let edge = edgehive_viaduct::ws::connect(&client_cfg).await.unwrap();
    let cloud = tokio::time::timeout(Duration::from_secs(10), srv.accept()).await.unwrap().unwrap();
    (srv, edge, cloud)
}

fn chunk(i: usize, len: usize) -> bytes::Bytes {
    bytes::Bytes::from(vec![(i % 251) as u8; len])
}

#[tokio::test]
async fn stream_sessions_carry_frames_both_ways_in_order_and_end_cleanly() {
    let pki = Pki::new();
    let (_srv, edge, cloud) = streams_pair(&pki).await;
    let mut incoming = edge.rx.incoming_streams().unwrap();
    assert!(edge.rx.incoming_streams().is_none(), "sessions are taken by one acceptor");

    let opened = cloud.tx.open_stream(bytes::Bytes::from_static(b"{\"kind\":\"exec\"}")).await.unwrap();
    let accepted = incoming.accept().await.unwrap();
    assert_eq!(accepted.header().as_ref(), b"{\"kind\":\"exec\"}");
    assert_eq!(accepted.id(), opened.id());
    let (mut ctx, mut crx) = opened.split();
    let (mut etx, mut erx) = accepted.split();

    // 2 MiB each way in frames of varying size: more than the window, so
    // credit must flow back; boundaries and order are kept.
    let sizes: Vec<usize> = (0..200).map(|i| 1 + (i * 7919) % edgehive_viaduct::stream::MAX_DATA).collect();
    let up_sizes = sizes.clone();
    let up = tokio::spawn(async move {
        for (i, n) in up_sizes.iter().enumerate() {
            etx.send(chunk(i, *n)).await.unwrap();
        }
        etx.finish().await.unwrap();
        etx
    });
    let down_sizes = sizes.clone();
    let down = tokio::spawn(async move {
        for (i, n) in down_sizes.iter().enumerate() {
            ctx.send(chunk(i + 1, *n)).await.unwrap();
        }
        ctx.finish().await.unwrap();
        ctx
    });
    for (i, n) in sizes.iter().enumerate() {
        assert_eq!(crx.recv().await.unwrap(), Some(chunk(i, *n)), "frame {i} up");
        assert_eq!(erx.recv().await.unwrap(), Some(chunk(i + 1, *n)), "frame {i} down");
    }
    assert_eq!(crx.recv().await.unwrap(), None, "the edge finished");
    assert_eq!(erx.recv().await.unwrap(), None, "the cloud finished");
    let (etx, ctx) = (up.await.unwrap(), down.await.unwrap());
    assert_eq!(cloud.tx.open_streams(), 1);
    drop((etx, erx, ctx, crx));
    eventually("sessions removed", || cloud.tx.open_streams() == 0 && edge.tx.open_streams() == 0).await;
    // The connection still carries messages.
    cloud.tx.write(pod("after")).await.unwrap();
    let mut erx = edge.rx;
    assert_eq!(erx.recv().await.unwrap().route.resource, pod("after").route.resource);
}

#[tokio::test]
async fn a_stuck_session_holds_back_neither_messages_nor_other_sessions() {
    let pki = Pki::new();
    let (_srv, edge, cloud) = streams_pair(&pki).await;
    let mut incoming = edge.rx.incoming_streams().unwrap();
    let (etx, mut erx) = edge.split();
    let (ctx, mut crx) = cloud.split();

    // Session A: the edge sends, nobody in the cloud reads.
    let a = ctx.open_stream(bytes::Bytes::from_static(b"a")).await.unwrap();
    let (mut a_etx, _a_erx) = incoming.accept().await.unwrap().split();
    let window = edgehive_viaduct::stream::WINDOW as usize;
    let max = edgehive_viaduct::stream::MAX_DATA;
    for i in 0..window / max {
        a_etx.send(chunk(i, max)).await.unwrap();
    }
    // The window is full: the next frame waits for credit.
    let mut blocked = Box::pin(a_etx.send(chunk(0, max)));
    assert!(tokio::time::timeout(Duration::from_millis(200), &mut blocked).await.is_err(), "sent past the window");

    // Messages flow both ways meanwhile.
    for i in 0..50 {
        ctx.write(pod(&format!("down-{i}"))).await.unwrap();
        etx.write(pod(&format!("up-{i}"))).await.unwrap();
    }
    for i in 0..50 {
        assert_eq!(erx.recv().await.unwrap().route.resource, pod(&format!("down-{i}")).route.resource);
        assert_eq!(crx.recv().await.unwrap().route.resource, pod(&format!("up-{i}")).route.resource);
    }
    // And session B moves 4 MiB.
    let b = ctx.open_stream(bytes::Bytes::from_static(b"b")).await.unwrap();
    let (mut b_etx, _b_erx) = incoming.accept().await.unwrap().split();
    let (_b_ctx, mut b_crx) = b.split();
    let sender = tokio::spawn(async move {
        for i in 0..128 {
            b_etx.send(chunk(i, max)).await.unwrap();
        }
        b_etx.finish().await.unwrap();
        b_etx
    });
    let mut got = 0;
    while let Some(f) = b_crx.recv().await.unwrap() {
        got += f.len();
    }
    assert_eq!(got, 128 * max);
    let _b_etx = sender.await.unwrap();

    // Reading A lets the stuck sender go on.
    let (_a_ctx, mut a_crx) = a.split();
    for i in 0..window / max {
        assert_eq!(a_crx.recv().await.unwrap(), Some(chunk(i, max)));
    }
    tokio::time::timeout(Duration::from_secs(10), blocked).await.unwrap().unwrap();
    assert_eq!(a_crx.recv().await.unwrap(), Some(chunk(0, max)));
}

#[tokio::test]
async fn sessions_need_agreement_and_an_acceptor_and_only_the_acceptor_is_opened_to() {
    let pki = Pki::new();
    // Not agreed (a KubeEdge peer, say): refused at once.
    let mut srv = server(&pki, ConnConfig::default()).await;
    let (_client, accepted) = pair(&pki, &mut srv, "edge-1").await;
    assert_eq!(
        accepted.tx.open_stream(bytes::Bytes::new()).await.unwrap_err(),
        edgehive_viaduct::StreamError::NotAgreed
    );

    // Agreed, but the edge takes no sessions: the session is reset with why.
    let (_srv, edge, cloud) = streams_pair(&pki).await;
    let (_tx, mut rx) = cloud.tx.open_stream(bytes::Bytes::new()).await.unwrap().split();
    match rx.recv().await {
        Err(edgehive_viaduct::StreamError::Reset(why)) => assert!(why.contains("does not accept"), "{why}"),
        other => panic!("{other:?}"),
    }
    // An edge opening a session to the cloud (which takes none) is refused
    // the same way, and the connection is unharmed.
    let (_etx, mut erx) = edge.tx.open_stream(bytes::Bytes::from_static(b"{\"kind\":\"exec\"}")).await.unwrap().split();
    assert!(matches!(erx.recv().await, Err(edgehive_viaduct::StreamError::Reset(_))));
    cloud.tx.write(pod("still")).await.unwrap();
    let mut edge_rx = edge.rx;
    assert_eq!(edge_rx.recv().await.unwrap().route.resource, pod("still").route.resource);
}

#[tokio::test]
async fn a_reset_or_a_closed_connection_ends_sessions_at_both_ends() {
    let pki = Pki::new();
    let (_srv, edge, cloud) = streams_pair(&pki).await;
    let mut incoming = edge.rx.incoming_streams().unwrap();

    let (mut ctx, mut crx) = cloud.tx.open_stream(bytes::Bytes::new()).await.unwrap().split();
    let (mut etx, mut erx) = incoming.accept().await.unwrap().split();
    ctx.send(bytes::Bytes::from_static(b"before")).await.unwrap();
    ctx.reset("pod deleted");
    assert_eq!(erx.recv().await.unwrap(), Some(bytes::Bytes::from_static(b"before")), "data before the reset arrives");
    assert_eq!(erx.recv().await.unwrap_err(), edgehive_viaduct::StreamError::Reset("pod deleted".into()));
    assert!(matches!(etx.send(bytes::Bytes::from_static(b"x")).await, Err(edgehive_viaduct::StreamError::Reset(_))));
    assert!(crx.recv().await.is_err());
    drop((ctx, crx, etx, erx));

    // Dropping a half-used session resets it for the peer.
    let (ctx, mut crx) = cloud.tx.open_stream(bytes::Bytes::new()).await.unwrap().split();
    let accepted = incoming.accept().await.unwrap();
    drop(accepted);
    assert!(matches!(crx.recv().await, Err(edgehive_viaduct::StreamError::Reset(_))));
    drop((ctx, crx));

    // The connection closing ends every session.
    let (mut ctx, mut crx) = cloud.tx.open_stream(bytes::Bytes::new()).await.unwrap().split();
    let (_etx, mut erx) = incoming.accept().await.unwrap().split();
    edge.tx.close();
    assert!(matches!(erx.recv().await, Err(edgehive_viaduct::StreamError::Closed(_))));
    assert!(matches!(crx.recv().await, Err(edgehive_viaduct::StreamError::Closed(_))));
    assert!(ctx.send(bytes::Bytes::from_static(b"x")).await.is_err());
    assert!(incoming.accept().await.is_none());
    assert!(matches!(cloud.tx.open_stream(bytes::Bytes::new()).await, Err(edgehive_viaduct::StreamError::Closed(_))));
}

#[tokio::test]
async fn a_client_writes_no_request_that_a_project_id_or_address_could_break() {
    let pki = Pki::new();
    let mut srv = server(&pki, ConnConfig::default()).await;
    for (what, project, server) in [
        ("header injection", "p\r\nX-Evil: 1", None),
        ("space in the path", "p q", None),
        ("line in the address", "p", Some(format!("{}\r\nX-Evil: 1", srv.local_addr()))),
    ] {
        let mut cfg = client_config(&pki, srv.local_addr(), "edge-1");
        cfg.project_id = project.into();
        if let Some(s) = server {
            cfg.server = s;
        }
        let err = edgehive_viaduct::ws::connect(&cfg).await.err().unwrap();
        assert!(matches!(err, edgehive_viaduct::ConnectError::Invalid(_)), "{what}: {err}");
    }
    // Nothing reached the server.
    assert_eq!(srv.stats().upgrade_failures(), 0);
    let (_client, _accepted) = pair(&pki, &mut srv, "edge-1").await;
}
