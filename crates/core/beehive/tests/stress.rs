//! Under contention no sync response is ever lost.
//!
//! KubeEdge's beehive registers the waiter after queueing the request, so a
//! fast responder can answer before anyone listens and the caller times out
//! (about one in 4,000 under load). Here a million requests from many
//! concurrent callers must all be answered.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use edgehive_beehive::{BeehiveBuilder, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_sync_requests_lose_no_response() {
    const CALLERS: u64 = 64;
    const EACH: u64 = 1_000_000 / CALLERS;
    let mut b = BeehiveBuilder::with_config(Config { mailbox_capacity: 256, ..Config::default() });
    // Two responders share the load, as two modules of one side would.
    b.register(responder("r0", "g")).unwrap();
    b.register(responder("r1", "g")).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let (stop, h) = start(hive);

    let ok = Arc::new(AtomicU64::new(0));
    let lost = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..CALLERS {
        let (ctx, ok, lost) = (ctx.clone(), ok.clone(), lost.clone());
        tasks.push(tokio::spawn(async move {
            let target = if c % 2 == 0 { "r0" } else { "r1" };
            for _ in 0..EACH {
                // The deadline is far beyond any plausible delay: a timeout here
                // means a lost response, not a slow machine.
                match ctx.send_sync(target, pod_msg("q"), Duration::from_secs(60)).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(_) => lost.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(lost.load(Ordering::Relaxed), 0);
    assert_eq!(ok.load(Ordering::Relaxed), CALLERS * EACH);
    let stats = ctx.stats();
    assert_eq!(stats.responses_without_waiter, 0);
    assert_eq!(stats.pending_waiters, 0);
    stop.cancel();
    h.await.unwrap();
}
