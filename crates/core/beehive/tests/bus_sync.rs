//! Synchronous requests: responses, timeouts, late responses, cleanup.

mod common;

use std::time::Duration;

use common::*;
use edgehive_beehive::{Beehive, SendErrorKind, SyncError, WaitError};
use edgehive_model::{Content, Message};

#[tokio::test]
async fn send_sync_returns_the_response() {
    let mut b = Beehive::builder();
    b.register(responder("metamanager", "meta")).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let req = pod_msg("x");
    let id = req.header.msg_id.clone();
    let resp = ctx.send_sync("metamanager", req, Duration::from_secs(5)).await.unwrap();
    assert_eq!(resp.header.parent_msg_id, id);
    assert_eq!(resp.content.as_text().as_deref(), Some("OK"));
    assert_eq!(ctx.pending_waiters(), 0);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn request_is_marked_sync_and_gets_an_id() {
    let (m, mut rx) = sink("a", "g");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let mut req = Message::new();
    req.header.msg_id = Default::default();
    let waiting = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.send_sync("a", req, Duration::from_secs(5)).await }
    });
    let got = rx.recv().await.unwrap();
    assert!(got.header.sync);
    assert_eq!(got.header.msg_id.len(), 36);
    ctx.send_resp(got.response(Content::null())).unwrap();
    waiting.await.unwrap().unwrap();
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn timeout_then_late_response_is_dropped_and_counted() {
    let (m, mut rx) = sink("silent", "g");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);

    let err = ctx.send_sync("silent", pod_msg("x"), Duration::from_secs(3)).await.unwrap_err();
    let SyncError::Timeout { target, after, .. } = &err else { panic!("{err:?}") };
    assert_eq!(target, "silent");
    assert_eq!(*after, Duration::from_secs(3));
    assert_eq!(ctx.pending_waiters(), 0, "a timed-out waiter must not leak");

    let req = rx.recv().await.unwrap();
    let late = ctx.send_resp(req.response(Content::string("late"))).unwrap_err();
    assert_eq!(late.parent, req.header.msg_id);
    let stats = ctx.stats();
    assert_eq!(stats.sync_timeouts, 1);
    assert_eq!(stats.responses_without_waiter, 1);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn response_to_unknown_request_is_an_error() {
    let hive = Beehive::builder().build();
    let ctx = hive.context();
    let resp = Message::new().with_parent("never-asked");
    let err = ctx.send_resp(resp).unwrap_err();
    assert_eq!(err.parent, "never-asked");
    assert_eq!(ctx.stats().responses_without_waiter, 1);
}

#[tokio::test]
async fn a_second_response_finds_no_waiter() {
    let (m, mut rx) = sink("a", "g");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let waiting = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.send_sync("a", pod_msg("x"), Duration::from_secs(5)).await }
    });
    let req = rx.recv().await.unwrap();
    ctx.send_resp(req.response(Content::string("1"))).unwrap();
    assert!(ctx.send_resp(req.response(Content::string("2"))).is_err());
    assert_eq!(waiting.await.unwrap().unwrap().content.as_text().as_deref(), Some("1"));
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn sync_to_unknown_module_fails_at_once() {
    let hive = Beehive::builder().build();
    let ctx = hive.context();
    let err = ctx.send_sync("ghost", pod_msg("x"), Duration::from_secs(60)).await.unwrap_err();
    let SyncError::Send(e) = err else { panic!() };
    assert_eq!(e.kind, SendErrorKind::UnknownTarget);
    assert_eq!(ctx.pending_waiters(), 0);
}

#[tokio::test(start_paused = true)]
async fn sync_to_full_mailbox_times_out_with_message_back() {
    let mut b = Beehive::builder();
    b.register(deaf("stuck", "g", 1)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    ctx.send("stuck", pod_msg("fill")).await.unwrap();
    let req = pod_msg("x");
    let id = req.header.msg_id.clone();
    let err = ctx.send_sync("stuck", req, Duration::from_secs(2)).await.unwrap_err();
    let SyncError::Send(e) = err else { panic!("{err:?}") };
    assert_eq!(e.kind, SendErrorKind::Full);
    assert_eq!(e.into_message().header.msg_id, id);
    assert_eq!(ctx.pending_waiters(), 0);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn duplicate_pending_id_is_refused() {
    let (m, _rx) = sink("a", "g");
    let mut b = Beehive::builder();
    b.register(m).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    let req = pod_msg("x");
    let dup = req.clone();
    let first = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.send_sync("a", req, Duration::from_secs(30)).await }
    });
    eventually("first waiter registered", || ctx.pending_waiters() == 1).await;
    let err = ctx.send_sync("a", dup, Duration::from_secs(1)).await.unwrap_err();
    assert!(matches!(err, SyncError::DuplicateId(_)), "{err:?}");
    first.abort();
    let _ = first.await;
    assert_eq!(ctx.pending_waiters(), 0, "an aborted waiter must not leak");
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test]
async fn cleanup_fails_the_modules_pending_waiters_and_closes_it() {
    let (silent, _rx) = sink("silent", "g");
    let (other, _orx) = sink("caller", "g2");
    let mut b = Beehive::builder();
    b.register(silent).unwrap();
    b.register(other).unwrap();
    let hive = b.build();
    let root = hive.context();
    let (stop, h) = start(hive);

    // Two requests waited on by "caller", one by someone else.
    let as_caller = root.as_module("caller");
    let w1 = tokio::spawn({
        let c = as_caller.clone();
        async move { c.send_sync("silent", pod_msg("1"), Duration::from_secs(60)).await }
    });
    let w2 = tokio::spawn({
        let c = as_caller.clone();
        async move { c.send_sync("silent", pod_msg("2"), Duration::from_secs(60)).await }
    });
    let w3 = tokio::spawn({
        let c = root.as_module("bystander");
        async move { c.send_sync("silent", pod_msg("3"), Duration::from_millis(300)).await }
    });
    eventually("three waiters", || root.pending_waiters() == 3).await;

    assert!(root.cleanup("caller"));
    for w in [w1, w2] {
        let err = w.await.unwrap().unwrap_err();
        assert!(matches!(err, SyncError::Abandoned { cause: WaitError::CleanedUp, .. }), "{err:?}");
    }
    // The bystander's request is untouched (it times out on its own).
    assert!(matches!(w3.await.unwrap().unwrap_err(), SyncError::Timeout { .. }));
    assert_eq!(root.pending_waiters(), 0);

    // The cleaned-up module takes no more messages and is not restarted.
    let err = root.send("caller", pod_msg("x")).await.unwrap_err();
    assert_eq!(err.kind, SendErrorKind::Closed);
    eventually("caller stopped", || {
        root.stats().module("caller").unwrap().state == edgehive_beehive::ModuleState::Stopped
    })
    .await;
    assert!(!root.cleanup("unknown"));
    stop.cancel();
    h.await.unwrap();
}
