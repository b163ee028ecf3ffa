//! Throughput of the bus: async send→receive, send_sync round trips, group fan-out.
//!
//! `cargo bench -p edgehive-beehive --bench beehive`

#![allow(missing_docs, unreachable_pub, clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use edgehive_beehive::{Beehive, BeehiveBuilder, Config};
use edgehive_model::Content;
use tokio_util::sync::CancellationToken;

fn send_receive(c: &mut Criterion) {
    let rt = runtime();
    let counter = Counter::new();
    let mut b = BeehiveBuilder::with_config(Config { mailbox_capacity: 1024, ..Config::default() });
    b.register(sink("sink", "g", counter.clone())).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    let running = rt.spawn(hive.run(stop.clone()));

    let mut g = c.benchmark_group("send_receive");
    g.throughput(Throughput::Elements(1));
    for (label, content) in [("4B", Content::from_json("\"ping\"").unwrap()), ("1KB", pod_1k())] {
        g.bench_function(label, |bch| {
            bch.iter_custom(|iters| {
                let (ctx, content, counter) = (ctx.clone(), content.clone(), counter.clone());
                on_worker(&rt, async move {
                    counter.arm(iters);
                    let t0 = tokio::time::Instant::now();
                    for _ in 0..iters {
                        ctx.send("sink", fresh(&content)).await.unwrap();
                    }
                    counter.wait().await;
                    t0.elapsed()
                })
            })
        });
    }
    g.finish();
    stop.cancel();
    rt.block_on(running).unwrap();
}

fn send_sync(c: &mut Criterion) {
    let rt = runtime();
    let mut b = Beehive::builder();
    b.register(responder("resp")).unwrap();
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    let running = rt.spawn(hive.run(stop.clone()));
    let content = Content::from_json("\"ping\"").unwrap();

    let mut g = c.benchmark_group("send_sync");
    g.throughput(Throughput::Elements(1));
    g.bench_function("round_trip", |bch| {
        bch.iter_custom(|iters| {
            let (ctx, content) = (ctx.clone(), content.clone());
            on_worker(&rt, async move {
                let t0 = tokio::time::Instant::now();
                for _ in 0..iters {
                    ctx.send_sync("resp", fresh(&content), Duration::from_secs(10)).await.unwrap();
                }
                t0.elapsed()
            })
        })
    });
    g.finish();
    stop.cancel();
    rt.block_on(running).unwrap();
}

fn group_fanout(c: &mut Criterion) {
    const MEMBERS: u64 = 10;
    let rt = runtime();
    let counter = Counter::new();
    let mut b = Beehive::builder();
    for i in 0..MEMBERS {
        b.register(sink(&format!("m{i}"), "g", counter.clone())).unwrap();
    }
    let hive = b.build();
    let ctx = hive.context();
    let stop = CancellationToken::new();
    let running = rt.spawn(hive.run(stop.clone()));
    let content = Arc::new(pod_1k());

    let mut g = c.benchmark_group("send_to_group");
    // One element = one delivery to one member.
    g.throughput(Throughput::Elements(MEMBERS));
    g.bench_function("10_members", |bch| {
        bch.iter_custom(|iters| {
            let (ctx, content, counter) = (ctx.clone(), content.clone(), counter.clone());
            on_worker(&rt, async move {
                counter.arm(iters * MEMBERS);
                let t0 = tokio::time::Instant::now();
                for _ in 0..iters {
                    ctx.send_to_group("g", fresh(&content)).await.unwrap();
                }
                counter.wait().await;
                t0.elapsed()
            })
        })
    });
    g.finish();
    stop.cancel();
    rt.block_on(running).unwrap();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = send_receive, send_sync, group_fanout
}
criterion_main!(benches);
