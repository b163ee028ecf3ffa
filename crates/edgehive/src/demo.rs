//! `edgehive demo`: a tour of the bus with KubeEdge's message shapes.
//!
//! Three modules with EdgeCore's names and groups: `websocket` (the hub, group
//! `hub`) holds a pod insert as the cloud sends it, routes it by group the way
//! EdgeHub does (`resource` → `meta`), `metamanager` keeps it in memory, passes
//! it to `edged` and answers with KubeEdge's `OK` ACK, which the hub prints as
//! it would go back on the wire. Nothing is persisted and no network is used:
//! this shows the bus and the message model, not the edge agent.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use edgehive_beehive::{Beehive, FnModule, ModuleContext, ModuleFuture};
use edgehive_model::{Content, Message, group, op, source, well_known};
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Number of pods to send through.
    #[arg(long, default_value_t = 3)]
    pods: u32,
}

type Lines = Arc<Mutex<Vec<String>>>;

fn say(lines: &Lines, s: String) {
    lines.lock().unwrap_or_else(|p| p.into_inner()).push(s);
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("start runtime")?;
    let lines: Lines = Arc::default();
    let acks = rt.block_on(tour(args.pods, lines.clone()))?;
    let mut out = std::io::stdout().lock();
    for l in lines.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        writeln!(out, "{l}")?;
    }
    writeln!(out, "{acks} of {} pods acknowledged", args.pods)?;
    Ok(if acks == args.pods { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

async fn tour(pods: u32, lines: Lines) -> anyhow::Result<u32> {
    let mut b = Beehive::builder();
    let l = lines.clone();
    b.register(Arc::new(FnModule::new(
        source::METAMANAGER,
        group::META,
        move |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
            let l = l.clone();
            Box::pin(async move {
                let mut store = std::collections::BTreeMap::new();
                while let Some(m) = ctx.receive_until(&cancel).await {
                    store.insert(m.route.resource.to_string(), m.content.clone());
                    say(
                        &l,
                        format!(
                            "metamanager: stored {} ({} objects); forwarding to edged",
                            m.route.resource,
                            store.len()
                        ),
                    );
                    ctx.send(source::EDGED, m.clone()).await?;
                    ctx.send_resp(m.response(Content::string(well_known::ACK_OK)))?;
                }
                Ok(())
            })
        },
    )))?;
    let l = lines.clone();
    b.register(Arc::new(FnModule::new(
        source::EDGED,
        group::EDGED,
        move |mut ctx: ModuleContext, cancel: CancellationToken| -> ModuleFuture {
            let l = l.clone();
            Box::pin(async move {
                while let Some(m) = ctx.receive_until(&cancel).await {
                    say(&l, format!("edged: got {} {}", m.route.operation, m.route.resource));
                }
                Ok(())
            })
        },
    )))?;
    let hive = b.build();
    let hub = hive.context().as_module(source::WEBSOCKET);
    let stop = CancellationToken::new();
    let running = tokio::spawn(hive.run(stop.clone()));

    let mut acked = 0;
    for i in 0..pods {
        let name = format!("nginx-{i}");
        let pod = serde_json::json!({
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": (100 + i).to_string()},
            "spec": {"nodeName": "edge-1", "containers": [{"name": "nginx", "image": "nginx"}]}
        });
        let msg = Message::build(
            source::EDGECONTROLLER,
            group::RESOURCE,
            format!("default/pod/{name}"),
            op::INSERT,
            Content::from_serialize(&pod)?,
        )
        .with_resource_version((100 + i).to_string());
        say(&lines, format!("cloud -> edge: {}", String::from_utf8_lossy(&msg.encode())));
        // EdgeHub routes groups `resource` and `func` to `meta`.
        let ack = hub.send_sync(source::METAMANAGER, msg, Duration::from_secs(5)).await?;
        say(&lines, format!("edge -> cloud: {}", String::from_utf8_lossy(&ack.encode())));
        acked += 1;
    }
    stop.cancel();
    let report = running.await.context("join bus")?;
    anyhow::ensure!(report.aborted.is_empty() && report.failed.is_empty(), "bus did not stop cleanly: {report:?}");
    Ok(acked)
}
