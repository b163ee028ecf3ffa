//! A fleet reconnecting after the cloud flapped: with full jitter, a
//! thousand edges' attempts spread over the backoff window instead of
//! arriving in the same second (KubeEdge retries after a fixed 30 s).
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use edgehive_edgehub::Backoff;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn a_thousand_edges_spread_their_reconnects_over_the_window() {
    const EDGES: usize = 1000;
    let base = Duration::from_secs(1);
    let cap = Duration::from_secs(30);
    let start = Instant::now();
    // Every edge fails 6 times in a row (the cloud is down ~1 min), as the
    // EdgeHub loop does: wait the next delay, try, fail.
    let tasks: Vec<_> = (0..EDGES)
        .map(|i| {
            tokio::spawn(async move {
                let mut b = Backoff::with_rng(base, cap, fastrand::Rng::with_seed(i as u64 * 7919 + 1));
                let mut attempts = Vec::new();
                for _ in 0..6 {
                    tokio::time::sleep(b.next_delay()).await;
                    attempts.push(Instant::now() - start);
                }
                attempts
            })
        })
        .collect();
    let mut sixth = Vec::with_capacity(EDGES);
    for t in tasks {
        let attempts = t.await.unwrap();
        sixth.push(attempts[5]);
    }
    // The sixth attempt: cumulative jittered delays (window 1+2+4+8+16+30 = 61 s).
    let mut per_second = [0usize; 62];
    for t in &sixth {
        per_second[(t.as_secs() as usize).min(61)] += 1;
    }
    let busiest = per_second.iter().max().copied().unwrap();
    let occupied = per_second.iter().filter(|n| **n > 0).count();
    // A fixed retry would put all 1,000 in one second. Here no second holds
    // more than 8 % of the fleet and attempts land in most seconds.
    assert!(busiest <= EDGES * 8 / 100, "busiest second has {busiest} of {EDGES}: {per_second:?}");
    assert!(occupied >= 30, "only {occupied} seconds used: {per_second:?}");
    let first_second = sixth.iter().filter(|t| t.as_secs() < 1).count();
    assert!(first_second < EDGES / 20, "{first_second} retried in the first second");
}
