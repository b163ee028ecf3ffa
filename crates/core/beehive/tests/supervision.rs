//! Supervision: restart after panic or error with backoff, restart limits,
//! clean shutdown, aborting a module that ignores cancellation.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::*;
use edgehive_beehive::{
    Beehive, BeehiveBuilder, Config, FnModule, ModuleContext, ModuleFn, ModuleFuture, ModuleState, RestartMode,
    RestartPolicy,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn policy(mode: RestartMode, max: Option<u32>) -> RestartPolicy {
    RestartPolicy {
        mode,
        initial_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(8),
        max_restarts: max,
    }
}

/// A module that panics on a message whose resource ends in `boom`, and
/// forwards every other message (with the run number) to the test.
fn fragile(runs: Arc<AtomicU32>, tx: mpsc::UnboundedSender<(u32, String)>) -> FnModule<impl ModuleFn> {
    FnModule::new("fragile", "g", move |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
        let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
        let tx = tx.clone();
        Box::pin(async move {
            while let Some(m) = ctx.receive_until(&cancel).await {
                if m.route.resource.ends_with("boom") {
                    panic!("boom on run {run}");
                }
                let _ = tx.send((run, m.route.resource.to_string()));
            }
            Ok(())
        })
    })
}

#[tokio::test(start_paused = true)]
async fn panicking_module_is_restarted_and_keeps_its_mailbox() {
    let runs = Arc::new(AtomicU32::new(0));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let m = fragile(runs.clone(), tx).restart_policy(policy(RestartMode::OnFailure, None));
    let mut b = Beehive::builder();
    b.register(Arc::new(m)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);

    ctx.send("fragile", pod_msg("before")).await.unwrap();
    assert_eq!(rx.recv().await.unwrap(), (1, "default/pod/before".into()));
    // The panic happens with another message queued behind it.
    ctx.send("fragile", pod_msg("boom")).await.unwrap();
    ctx.send("fragile", pod_msg("after")).await.unwrap();
    let start = tokio::time::Instant::now();
    assert_eq!(rx.recv().await.unwrap(), (2, "default/pod/after".into()));
    assert!(start.elapsed() >= Duration::from_secs(1), "restart waits for the backoff");
    let stats = ctx.stats();
    let s = stats.module("fragile").unwrap();
    assert_eq!(s.restarts, 1);
    assert_eq!(s.state, ModuleState::Running);

    // A second failure in a row waits twice as long.
    ctx.send("fragile", pod_msg("boom")).await.unwrap();
    ctx.send("fragile", pod_msg("again")).await.unwrap();
    let start = tokio::time::Instant::now();
    assert_eq!(rx.recv().await.unwrap(), (3, "default/pod/again".into()));
    assert!(start.elapsed() >= Duration::from_secs(2));

    stop.cancel();
    let report = h.await.unwrap();
    assert!(report.failed.is_empty() && report.aborted.is_empty());
}

#[tokio::test(start_paused = true)]
async fn erroring_module_gives_up_after_max_restarts() {
    let runs = Arc::new(AtomicU32::new(0));
    let counter = runs.clone();
    let m = FnModule::new("flaky", "g", move |_ctx: ModuleContext, _c: CancellationToken| -> ModuleFuture {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Err("cannot open database".into()) })
    })
    .restart_policy(policy(RestartMode::OnFailure, Some(3)));
    let (ok, mut ok_rx) = sink("healthy", "g2");
    let mut b = Beehive::builder();
    b.register(Arc::new(m)).unwrap();
    b.register(ok).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    eventually("flaky gave up", || ctx.stats().module("flaky").unwrap().state == ModuleState::Failed).await;
    assert_eq!(runs.load(Ordering::SeqCst), 4, "first run plus three restarts");
    // Others are unaffected.
    ctx.send("healthy", pod_msg("x")).await.unwrap();
    assert!(ok_rx.recv().await.is_some());
    stop.cancel();
    let report = h.await.unwrap();
    assert_eq!(report.failed, ["flaky"]);
}

#[tokio::test(start_paused = true)]
async fn never_policy_and_clean_return() {
    let m = FnModule::new("once", "g", |_ctx: ModuleContext, _c: CancellationToken| -> ModuleFuture {
        Box::pin(async { Ok(()) })
    })
    .restart_policy(RestartPolicy::default());
    let crash = FnModule::new("crash", "g", |_ctx: ModuleContext, _c: CancellationToken| -> ModuleFuture {
        Box::pin(async { panic!("no restart for me") })
    })
    .restart_policy(RestartPolicy::NEVER);
    let mut b = Beehive::builder();
    b.register(Arc::new(m)).unwrap();
    b.register(Arc::new(crash)).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    // Both end on their own, so run returns without a shutdown request.
    let report = hive.run(CancellationToken::new()).await;
    assert_eq!(report.failed, ["crash"]);
    assert_eq!(ctx.stats().module("once").unwrap().state, ModuleState::Stopped);
    assert_eq!(ctx.stats().module("crash").unwrap().restarts, 0);
}

#[tokio::test(start_paused = true)]
async fn always_policy_restarts_after_clean_return() {
    let runs = Arc::new(AtomicU32::new(0));
    let counter = runs.clone();
    let m = FnModule::new("loop", "g", move |_ctx: ModuleContext, _c: CancellationToken| -> ModuleFuture {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(()) })
    })
    .restart_policy(policy(RestartMode::Always, None));
    let mut b = Beehive::builder();
    b.register(Arc::new(m)).unwrap();
    let hive = b.build();
    let (stop, h) = start(hive);
    tokio::time::sleep(Duration::from_secs(20)).await;
    // Backoff 1+2+4+8+8 s fits five restarts into 20 s.
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    stop.cancel();
    h.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_everything_and_aborts_a_stuck_module() {
    let stuck = FnModule::new("stuck", "g", |_ctx: ModuleContext, _c: CancellationToken| -> ModuleFuture {
        Box::pin(async {
            // Ignores cancellation.
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        })
    });
    let mut b = BeehiveBuilder::with_config(Config { shutdown_timeout: Duration::from_secs(2), ..Config::default() });
    b.register(Arc::new(stuck)).unwrap();
    b.register(responder("polite", "g")).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);
    eventually("running", || ctx.stats().module("polite").unwrap().state == ModuleState::Running).await;
    let t0 = tokio::time::Instant::now();
    stop.cancel();
    let report = h.await.unwrap();
    assert_eq!(report.aborted, ["stuck"]);
    assert!(t0.elapsed() >= Duration::from_secs(2) && t0.elapsed() < Duration::from_secs(60));
    assert_eq!(ctx.stats().module("polite").unwrap().state, ModuleState::Stopped);
    assert_eq!(ctx.stats().module("stuck").unwrap().state, ModuleState::Failed);
}

#[tokio::test(start_paused = true)]
async fn shutdown_token_of_the_hive_also_stops_it() {
    let mut b = Beehive::builder();
    b.register(responder("a", "g")).unwrap();
    let hive = b.build();
    let token = hive.shutdown_token();
    let h = tokio::spawn(hive.run(CancellationToken::new()));
    token.cancel();
    let report = h.await.unwrap();
    assert_eq!(report, Default::default());
}
