//! Group sends: fan-out, group sync with a silent member.

mod common;

use std::time::Duration;

use common::*;
use edgehive_beehive::{Beehive, SyncError};

#[tokio::test]
async fn send_to_group_reaches_every_member_sharing_content() {
    let mut rxs = Vec::new();
    let mut b = Beehive::builder();
    for i in 0..5 {
        let (m, rx) = sink(&format!("m{i}"), "bus");
        b.register(m).unwrap();
        rxs.push(rx);
    }
    let (outsider, mut out_rx) = sink("outsider", "other");
    b.register(outsider).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);

    let msg = pod_msg("fan").with_content(edgehive_model::Content::from_json(r#"{"big":"body"}"#).unwrap());
    let content = msg.content.clone();
    assert_eq!(ctx.send_to_group("bus", msg).await.unwrap(), 5);
    for rx in &mut rxs {
        let got = rx.recv().await.unwrap();
        assert!(got.content.ptr_eq(&content), "fan-out must share the encoded content");
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(out_rx.try_recv().is_err(), "other groups get nothing");
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn group_sync_collects_every_answer() {
    let mut b = Beehive::builder();
    for name in ["twin", "meta", "bus"] {
        b.register(responder(name, "connect")).unwrap();
    }
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let req = pod_msg("x");
    let id = req.header.msg_id.clone();
    let resps = ctx.send_to_group_sync("connect", req, Duration::from_secs(5)).await.unwrap();
    assert_eq!(resps.len(), 3);
    assert!(resps.iter().all(|r| r.header.parent_msg_id == id));
    assert_eq!(ctx.pending_waiters(), 0);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn group_sync_with_a_silent_member_names_it() {
    let mut b = Beehive::builder();
    b.register(responder("a", "g")).unwrap();
    b.register(responder("c", "g")).unwrap();
    let (silent, _rx) = sink("b", "g");
    b.register(silent).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let err = ctx.send_to_group_sync("g", pod_msg("x"), Duration::from_secs(2)).await.unwrap_err();
    let SyncError::GroupTimeout { group, missing, received, after } = &err else { panic!("{err:?}") };
    assert_eq!(group, "g");
    assert_eq!(missing, &["b"]);
    assert_eq!(received.len(), 2);
    assert_eq!(*after, Duration::from_secs(2));
    assert_eq!(err.to_string(), "group g: no response from [\"b\"] within 2s");
    assert_eq!(ctx.pending_waiters(), 0);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn duplicate_answers_from_one_member_count_once() {
    let mut b = Beehive::builder();
    let (m, mut rx) = sink("twice", "g");
    b.register(m).unwrap();
    b.register(responder("once", "g")).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let waiting = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.send_to_group_sync("g", pod_msg("x"), Duration::from_millis(500)).await }
    });
    let req = rx.recv().await.unwrap();
    let me = ctx.as_module("twice");
    me.send_resp(req.response(edgehive_model::Content::string("1"))).unwrap();
    let _ = me.send_resp(req.response(edgehive_model::Content::string("2")));
    let resps = waiting.await.unwrap().unwrap();
    assert_eq!(resps.len(), 2);
    stop.cancel();
    h.await.unwrap();
}
