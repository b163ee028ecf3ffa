//! send_sync round-trip latency percentiles, and memory during group fan-out.
//!
//! `cargo bench -p edgehive-beehive --bench sync_latency`
//!
//! Criterion reports means; the latency target is a p99, so this harness
//! records every round trip and prints percentiles.

#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::print_stdout)]

mod common;

use std::time::Duration;

use common::*;
use edgehive_beehive::Beehive;
use edgehive_model::Content;
use tokio_util::sync::CancellationToken;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        })
        .unwrap_or(0)
}

fn main() {
    // `cargo test --benches` runs bench binaries with no `--bench` flag; keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let rt = runtime();
    let mut b = Beehive::builder();
    b.register(responder("resp")).unwrap();
    let (counter, members) = (Counter::new(), 10u64);
    for i in 0..members {
        b.register(sink(&format!("m{i}"), "g", counter.clone())).unwrap();
    }
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    let running = rt.spawn(hive.run(stop.clone()));
    let content = Content::from_json("\"ping\"").unwrap();

    let n = if quick { 10_000 } else { 1_000_000 };
    let c2 = ctx.clone();
    let mut samples = on_worker(&rt, async move {
        let ctx = c2;
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n / 10 {
            ctx.send_sync("resp", fresh(&content), Duration::from_secs(10)).await.unwrap();
        }
        for _ in 0..n {
            let t0 = tokio::time::Instant::now();
            ctx.send_sync("resp", fresh(&content), Duration::from_secs(10)).await.unwrap();
            samples.push(t0.elapsed());
        }
        samples
    });
    samples.sort();
    println!(
        "send_sync round trip over {n}: p50 {:?}  p99 {:?}  p99.9 {:?}  max {:?}",
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        percentile(&samples, 0.999),
        samples[samples.len() - 1]
    );

    let pod = pod_1k();
    let rounds = if quick { 2 } else { 10 };
    let per_round = 200_000u64;
    let (c3, counter3) = (ctx.clone(), counter.clone());
    let rss = on_worker(&rt, async move {
        let (ctx, counter) = (c3, counter3);
        let mut rss = Vec::new();
        for _ in 0..rounds {
            counter.arm(per_round * members);
            let t0 = tokio::time::Instant::now();
            for _ in 0..per_round {
                ctx.send_to_group("g", fresh(&pod)).await.unwrap();
            }
            counter.wait().await;
            let secs = t0.elapsed().as_secs_f64();
            rss.push(rss_kib());
            println!(
                "send_to_group 10 members: {:.2} M deliveries/s, RSS {} KiB",
                (per_round * members) as f64 / secs / 1e6,
                rss[rss.len() - 1]
            );
        }
        rss
    });
    println!("RSS after first and last fan-out round: {} KiB -> {} KiB", rss[0], rss[rss.len() - 1]);
    stop.cancel();
    rt.block_on(running).unwrap();
}
