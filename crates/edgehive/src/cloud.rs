//! `edgehive cloud`: the control plane on one machine — the object store
//! (embedded SQLite by default, or etcd) and the Kubernetes-compatible API
//! that kubectl drives.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use edgehive_apiserver::{ApiServer, ApiServerConfig};
use edgehive_store::{BackendConfig, Store, StoreConfig};
use tokio_util::sync::CancellationToken;

/// Which store backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StoreKind {
    /// One SQLite file under the data directory.
    Sqlite,
    /// An etcd cluster (`--etcd-endpoints`).
    Etcd,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where the database, certificates and kubeconfig live.
    #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = default_data_dir())]
    data_dir: PathBuf,
    /// Address of the Kubernetes API (HTTPS).
    #[arg(long, default_value = "0.0.0.0:6443")]
    bind: SocketAddr,
    /// Store backend.
    #[arg(long, value_enum, default_value = "sqlite")]
    store: StoreKind,
    /// etcd client URLs, comma-separated (with `--store etcd`).
    #[arg(long, value_delimiter = ',', default_value = "http://127.0.0.1:2379")]
    etcd_endpoints: Vec<String>,
    /// Extra names or addresses for the API's serving certificate.
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Do not fsync each SQLite commit (an acknowledged write still survives
    /// a crash of the process, but not of the machine).
    #[arg(long)]
    no_fsync: bool,
}

fn default_data_dir() -> PathBuf {
    let root =
        std::env::var_os("USER").is_some_and(|u| u == "root") || std::env::var_os("HOME").is_some_and(|h| h == "/root");
    match std::env::var_os("HOME") {
        Some(home) if !root => PathBuf::from(home).join(".edgehive"),
        _ => PathBuf::from("/var/lib/edgehive"),
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("start the runtime")?;
    rt.block_on(Box::pin(serve(args)))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("create {}", args.data_dir.display()))?;
    let backend = match args.store {
        StoreKind::Sqlite => BackendConfig::Sqlite { path: args.data_dir.join("state.db"), fsync: !args.no_fsync },
        StoreKind::Etcd => BackendConfig::Etcd { endpoints: args.etcd_endpoints.clone() },
    };
    let store = Store::open(StoreConfig::new(backend)).await.context("open the store")?;
    let mut config = ApiServerConfig::new(args.bind, args.data_dir.clone());
    config.sans = args.tls_sans;
    let server = ApiServer::bind(config, store.clone()).await.context("start the API server")?;
    tracing::info!(
        addr = %server.local_addr(),
        kubeconfig = %server.kubeconfig_path().display(),
        store = ?args.store,
        "edgehive cloud is up; run: KUBECONFIG={} kubectl get namespaces",
        server.kubeconfig_path().display()
    );
    let stop = CancellationToken::new();
    let serving = tokio::spawn(server.serve(stop.clone()));
    shutdown_signal().await;
    tracing::info!("shutting down");
    stop.cancel();
    let _ = serving.await;
    store.close().await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = ctrl_c.await;
                return;
            }
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
