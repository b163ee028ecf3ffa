//! `edgehive`: the one binary. Wiring and command line only; every capability
//! lives in a library crate.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[cfg(feature = "cloud")]
mod admin;
#[cfg(feature = "cloud")]
mod cloud;
mod demo;
mod duration;
#[cfg(feature = "edge")]
mod edge;
#[cfg(feature = "edge")]
mod edge_config;
mod inspect;
mod logging;
#[cfg(feature = "mapper")]
mod mapper;
#[cfg(feature = "cloud")]
mod node;
mod process;
#[cfg(feature = "sim")]
mod sim;
#[cfg(feature = "cloud")]
mod token;
#[cfg(feature = "cloud")]
mod user;

/// KubeEdge's cloud–edge framework, rebuilt in Rust.
#[derive(Debug, Parser)]
#[command(name = "edgehive", version, about, long_about = None)]
struct Cli {
    /// Log filter, e.g. `info` or `edgehive_beehive=debug` (env: EDGEHIVE_LOG).
    #[arg(long, global = true, env = "EDGEHIVE_LOG", default_value = "info")]
    log: String,
    /// Write logs as JSON lines.
    #[arg(long, global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the cloud: the object store (SQLite by default, or etcd), the
    /// Kubernetes-compatible API kubectl drives, CloudHub, the controllers
    /// and the edge join service.
    #[cfg(feature = "cloud")]
    Cloud(Box<cloud::Args>),
    /// Run the beehive bus with KubeEdge's edge modules wired as in EdgeCore,
    /// and trace a pod insert from the hub to the metadata manager and its ACK
    /// back, printing each message in KubeEdge's wire JSON.
    Demo(demo::Args),
    /// Run an edge node: EdgeHub, MetaManager and the node agent.
    #[cfg(feature = "edge")]
    Edge(edge::Args),
    /// Join tokens for edge nodes: create one (the default; KubeEdge's
    /// format, valid 24 h), list them, revoke one.
    #[cfg(feature = "cloud")]
    Token(token::Args),
    /// Edge nodes: revoke one's certificates.
    #[cfg(feature = "cloud")]
    Node(node::Args),
    /// Users of the cloud's API: write a kubeconfig for one (a client
    /// certificate from the cloud's CA; RBAC decides what it may do).
    #[cfg(feature = "cloud")]
    User(user::Args),
    /// Read KubeEdge wire messages (one JSON per line) from stdin, check them,
    /// and print what they say.
    Inspect(inspect::Args),
    /// Run a mapper (Modbus TCP or virtual devices) registered with an
    /// edge's DMI socket, or a simulated Modbus TCP device.
    #[cfg(feature = "mapper")]
    Mapper(mapper::Args),
    /// Simulate a fleet of edge nodes against a cloud, each a real link
    /// (WebSocket or QUIC, mutual TLS), and measure it: hold, pods,
    /// fanout, storm, churn.
    #[cfg(feature = "sim")]
    Sim(Box<sim::Args>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A simulated fleet's thousands of links would each log their
    // connection at info: the simulator says what matters itself.
    #[cfg(feature = "sim")]
    let log =
        if matches!(cli.command, Command::Sim(_)) && std::env::var_os("EDGEHIVE_LOG").is_none() && cli.log == "info" {
            "warn".to_owned()
        } else {
            cli.log.clone()
        };
    #[cfg(not(feature = "sim"))]
    let log = cli.log.clone();
    if let Err(e) = logging::init(&log, cli.log_json) {
        eprintln!("edgehive: {e:#}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        #[cfg(feature = "cloud")]
        Command::Cloud(args) => cloud::run(*args),
        Command::Demo(args) => demo::run(args),
        #[cfg(feature = "edge")]
        Command::Edge(args) => edge::run(args),
        Command::Inspect(args) => inspect::run(args),
        #[cfg(feature = "mapper")]
        Command::Mapper(args) => mapper::run(args),
        #[cfg(feature = "sim")]
        Command::Sim(args) => sim::run(*args),
        #[cfg(feature = "cloud")]
        Command::Token(args) => token::run(args),
        #[cfg(feature = "cloud")]
        Command::Node(args) => node::run(args),
        #[cfg(feature = "cloud")]
        Command::User(args) => user::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "edgehive failed");
            eprintln!("edgehive: {e:#}");
            ExitCode::FAILURE
        }
    }
}
