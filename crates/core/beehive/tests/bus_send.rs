//! Asynchronous sends: delivery, unknown and disabled targets, backpressure,
//! many concurrent senders.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use edgehive_beehive::{Beehive, BeehiveBuilder, RegisterError, SendErrorKind};
use edgehive_model::Content;

#[tokio::test]
async fn send_and_receive() {
    let (m, mut rx) = sink("edged", "edged");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);

    let msg = pod_msg("nginx").with_content(Content::string("x"));
    let id = msg.header.msg_id.clone();
    ctx.send("edged", msg).await.unwrap();
    let got = rx.recv().await.unwrap();
    assert_eq!(got.header.msg_id, id);
    assert_eq!(got.route.resource, "default/pod/nginx");

    stop.cancel();
    let report = h.await.unwrap();
    assert!(report.aborted.is_empty() && report.failed.is_empty());
}

#[tokio::test]
async fn messages_sent_before_run_wait_in_the_mailbox() {
    let (m, mut rx) = sink("a", "g");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    ctx.send("a", pod_msg("early")).await.unwrap();
    assert_eq!(ctx.queue_depth("a"), Some(1));
    let (stop, h) = start(hive);
    assert_eq!(rx.recv().await.unwrap().route.resource, "default/pod/early");
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn unknown_target_hands_message_back_and_counts() {
    let (m, _rx) = sink("a", "g");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let msg = pod_msg("x");
    let id = msg.header.msg_id.clone();

    let err = ctx.send("nope", msg).await.unwrap_err();
    assert_eq!(err.kind, SendErrorKind::UnknownTarget);
    assert_eq!(err.target, "nope");
    assert_eq!(err.to_string(), "send to nope: unknown module or group");
    let back = err.into_message();
    assert_eq!(back.header.msg_id, id);

    let err = ctx.try_send("nope", back).unwrap_err();
    assert_eq!(err.kind, SendErrorKind::UnknownTarget);
    let err = ctx.send_to_group("nogroup", err.into_message()).await.unwrap_err();
    assert_eq!(err.kind, SendErrorKind::UnknownTarget);
    assert_eq!(ctx.stats().unknown_target, 3);
}

#[tokio::test]
async fn disabled_module_is_not_started_and_refuses_messages() {
    let (on, mut on_rx) = sink("on", "g");
    let (off, mut off_rx) = sink("off", "offgroup");
    let off = Arc::new(Arc::into_inner(off).unwrap().enabled(false));
    let mut b = Beehive::builder();
    b.register(on).unwrap();
    b.register(off).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);

    let err = ctx.send("off", pod_msg("x")).await.unwrap_err();
    assert_eq!(err.kind, SendErrorKind::Disabled);
    let err = ctx.send_to_group("offgroup", pod_msg("x")).await.unwrap_err();
    assert_eq!(err.kind, SendErrorKind::Disabled);
    assert_eq!(ctx.stats().disabled_target, 2);
    assert_eq!(ctx.stats().module("off").unwrap().state, edgehive_beehive::ModuleState::Disabled);

    // The enabled module is unaffected.
    ctx.send("on", pod_msg("y")).await.unwrap();
    assert_eq!(on_rx.recv().await.unwrap().route.resource, "default/pod/y");
    stop.cancel();
    h.await.unwrap();
    assert!(off_rx.try_recv().is_err());
}

#[tokio::test]
async fn try_send_on_full_mailbox_hands_message_back() {
    let mut b = Beehive::builder();
    b.register(deaf("slow", "g", 4)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    for i in 0..4 {
        ctx.try_send("slow", pod_msg(&format!("p{i}"))).unwrap();
    }
    assert_eq!(ctx.queue_depth("slow"), Some(4));
    let msg = pod_msg("overflow");
    let id = msg.header.msg_id.clone();
    let err = ctx.try_send("slow", msg).unwrap_err();
    assert_eq!(err.kind, SendErrorKind::Full);
    assert_eq!(err.into_message().header.msg_id, id);
    let stats = ctx.stats();
    assert_eq!(stats.full, 1);
    let slow = stats.module("slow").unwrap();
    assert_eq!((slow.queue_depth, slow.capacity), (4, 4));
    // `send_within` waits for room only so long, then hands it back too.
    let msg = pod_msg("late");
    let id = msg.header.msg_id.clone();
    let err = ctx.send_within("slow", msg, Duration::from_millis(20)).await.unwrap_err();
    assert_eq!(err.kind, SendErrorKind::Full);
    assert_eq!(err.into_message().header.msg_id, id);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn send_waits_for_room_then_delivers() {
    let (m, mut rx) = sink("a", "g");
    let m = Arc::new(Arc::into_inner(m).unwrap().mailbox_capacity(2));
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    // Not running yet: the mailbox fills, and the third send must wait.
    ctx.send("a", pod_msg("1")).await.unwrap();
    ctx.send("a", pod_msg("2")).await.unwrap();
    let ctx2 = ctx.clone();
    let blocked = tokio::spawn(async move { ctx2.send("a", pod_msg("3")).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!blocked.is_finished(), "send must wait while the mailbox is full");
    let ctx3 = ctx.clone();
    let within = tokio::spawn(async move { ctx3.send_within("a", pod_msg("4"), Duration::from_secs(30)).await });
    let (stop, h) = start(hive);
    blocked.await.unwrap().unwrap();
    within.await.unwrap().unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(rx.recv().await.unwrap().route.resource.to_string());
    }
    // The two waiting senders may take the room in either order.
    got[2..].sort();
    assert_eq!(got, ["default/pod/1", "default/pod/2", "default/pod/3", "default/pod/4"]);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_senders_lose_nothing_and_keep_order() {
    const SENDERS: usize = 16;
    const EACH: usize = 20_000;
    let (m, mut rx) = sink("target", "g");
    let mut b = BeehiveBuilder::with_config(quick_config());
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    for s in 0..SENDERS {
        let ctx = ctx.clone();
        tokio::spawn(async move {
            for i in 0..EACH {
                ctx.send("target", pod_msg(&format!("{s}-{i}"))).await.unwrap();
            }
        });
    }
    let mut next = [0usize; SENDERS];
    for _ in 0..SENDERS * EACH {
        let m = rx.recv().await.unwrap();
        let name = m.route.resource.rsplit('/').next().unwrap().to_owned();
        let (s, i) = name.split_once('-').unwrap();
        let (s, i): (usize, usize) = (s.parse().unwrap(), i.parse().unwrap());
        assert_eq!(next[s], i, "messages of sender {s} out of order");
        next[s] += 1;
    }
    assert!(next.iter().all(|&n| n == EACH));
    stop.cancel();
    h.await.unwrap();
}

#[test]
fn registration_errors() {
    let mut b = Beehive::builder();
    b.register(responder("a", "g")).unwrap();
    assert_eq!(b.register(responder("a", "h")).unwrap_err(), RegisterError::Duplicate("a".into()));
    assert_eq!(b.register(responder("", "h")).unwrap_err(), RegisterError::EmptyName);
}
