//! `edgehive mapper`: the reference mappers, which register with an
//! edge's DMI socket and drive its devices of one protocol
//! (docs/devices.md), and a Modbus TCP device simulator for demos.
//!
//! ```sh
//! edgehive mapper modbus --dmi-sock /var/lib/edgehive/dmi.sock --sock /run/edgehive/modbus.sock
//! edgehive mapper virtualprotocol --dmi-sock ... --sock ...
//! edgehive mapper simulate --listen 127.0.0.1:5020 --holding 0=215
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Drive Modbus TCP devices (`spec.protocol.protocolName: modbus`).
    Modbus(Run),
    /// Drive in-memory virtual devices (`protocolName: virtualprotocol`), for demos.
    #[command(name = "virtualprotocol")]
    Virtual(Run),
    /// Serve a simulated Modbus TCP device (registers in memory; writes logged).
    Simulate(Simulate),
}

#[derive(Debug, clap::Args)]
struct Run {
    /// The edge's DMI socket (`modules.deviceTwin.dmiSockPath`).
    #[arg(long)]
    dmi_sock: PathBuf,
    /// This mapper's own socket, where the edge calls it.
    #[arg(long)]
    sock: PathBuf,
    /// The mapper's name (default `{protocol}-mapper`).
    #[arg(long)]
    name: Option<String>,
}

#[derive(Debug, clap::Args)]
struct Simulate {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:5020")]
    listen: SocketAddr,
    /// Holding registers to set at start, `ADDRESS=VALUE` (repeatable).
    #[arg(long, value_parser = register)]
    holding: Vec<(u16, u16)>,
}

fn register(s: &str) -> Result<(u16, u16), String> {
    let (a, v) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected ADDRESS=VALUE"))?;
    let a = a.trim().parse().map_err(|e| format!("{a:?}: {e}"))?;
    let v = v.trim().parse().map_err(|e| format!("{v:?}: {e}"))?;
    Ok((a, v))
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("start the runtime")?;
    rt.block_on(async move {
        let stop = CancellationToken::new();
        tokio::spawn({
            let stop = stop.clone();
            async move {
                crate::process::shutdown_signal().await;
                stop.cancel();
            }
        });
        match args.what {
            What::Modbus(r) => mapper(edgehive_mapper::device::MODBUS, r, stop).await,
            What::Virtual(r) => mapper(edgehive_mapper::device::VIRTUAL, r, stop).await,
            What::Simulate(s) => simulate(s, stop).await,
        }
    })
}

async fn mapper(protocol: &str, r: Run, stop: CancellationToken) -> anyhow::Result<ExitCode> {
    let mut cfg = edgehive_mapper::MapperConfig::new(protocol, r.dmi_sock, r.sock);
    if let Some(name) = r.name {
        cfg.name = name;
    }
    tracing::info!(protocol, name = %cfg.name, dmi = %cfg.dmi_sock.display(), sock = %cfg.sock.display(), "mapper starting");
    edgehive_mapper::run(cfg, stop).await?;
    Ok(ExitCode::SUCCESS)
}

async fn simulate(s: Simulate, stop: CancellationToken) -> anyhow::Result<ExitCode> {
    let device = edgehive_mapper::simulator::Device::default();
    for (a, v) in s.holding {
        device.set_holding(a, v);
    }
    let (addr, task) = edgehive_mapper::simulator::serve(s.listen, device, stop)
        .await
        .with_context(|| format!("listen on {}", s.listen))?;
    tracing::info!(%addr, "simulated Modbus TCP device listening");
    let _ = task.await;
    Ok(ExitCode::SUCCESS)
}
