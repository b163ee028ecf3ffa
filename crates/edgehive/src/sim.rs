//! `edgehive sim <scenario>`: a fleet of simulated edge nodes against a
//! cloud (`edgehive-sim`), wired to the command line: the cloud's data
//! directory gives the API (its kubeconfig) and the join token, and with
//! `--spawn-cloud` the simulator starts the cloud itself (so it can measure
//! it and kill it in a storm).

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use edgehive_edgehub::Transport;
use edgehive_sim::api::{Api, ApiTarget};
use edgehive_sim::{Behaviour, Cloud, FleetConfig, RunOptions, Scenario, StormKind};

use crate::admin::Kubeconfig;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ScenarioName {
    /// N nodes connect and stay idle: the cloud's memory and CPU per node,
    /// bytes per node both ways.
    Hold,
    /// Pods created through the API at a rate: pod start latency
    /// (create → Running in the API), API latency.
    Pods,
    /// One configmap used by every node, updated again and again:
    /// deliveries a second, write → edge latency.
    Fanout,
    /// Every node disconnects at once (or the cloud is killed and
    /// restarted): how long until all are back, what was sent again.
    Storm,
    /// Nodes leave and new ones join continuously.
    Churn,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TransportName {
    Websocket,
    Quic,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum StormName {
    /// Every node's connection breaks at once.
    Disconnect,
    /// The cloud is killed (SIGKILL) and started again (needs --spawn-cloud).
    CloudRestart,
}

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// What to run.
    #[arg(value_enum)]
    scenario: ScenarioName,
    /// Simulated nodes.
    #[arg(long, default_value_t = 100)]
    nodes: usize,
    /// The cloud's data directory: its kubeconfig (the API) and CA (for a
    /// join token). With --spawn-cloud, where the simulator runs the cloud.
    #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = crate::cloud::default_data_dir())]
    data_dir: PathBuf,
    /// Start `edgehive cloud` on the data directory here, on free loopback
    /// ports (arguments after `--` go to it): its memory and CPU are
    /// measured, and a cloud-restart storm can kill it.
    #[arg(long)]
    spawn_cloud: bool,
    /// The cloud's address for the links and the join service.
    #[arg(long, default_value = "127.0.0.1")]
    server: String,
    /// The cloud's WebSocket port.
    #[arg(long, default_value_t = 10000)]
    websocket_port: u16,
    /// The cloud's QUIC port.
    #[arg(long, default_value_t = 10001)]
    quic_port: u16,
    /// The join service's port.
    #[arg(long, default_value_t = 10002)]
    join_port: u16,
    /// The cloud's process id, to measure its memory and CPU.
    #[arg(long)]
    cloud_pid: Option<u32>,
    /// How the links reach the cloud.
    #[arg(long, value_enum, default_value = "websocket")]
    transport: TransportName,
    /// A join token for nodes without a certificate (default: one is made
    /// through the API with the CA in the data directory).
    #[arg(long, env = "EDGEHIVE_SIM_TOKEN")]
    token: Option<String>,
    /// Where the nodes' certificates are kept between runs.
    #[arg(long, default_value = ".edgehive-sim/certs")]
    certs_dir: PathBuf,
    /// Node names are this and a number.
    #[arg(long, default_value = "sim-")]
    prefix: String,
    /// Local addresses to spread the links over (`127.0.0.2-127.0.0.9`):
    /// each has its own ephemeral ports.
    #[arg(long)]
    sources: Option<String>,
    /// EdgeHub's heartbeat.
    #[arg(long, default_value = "15s", value_parser = crate::duration::positive)]
    heartbeat: Duration,
    /// Keep alive with `keepalive` messages (as KubeEdge) instead of pings.
    #[arg(long)]
    no_ping_keepalive: bool,
    /// Links started a second (0: all at once).
    #[arg(long, default_value_t = 0.0)]
    start_rate: f64,
    /// A pod's start: from its arrival to its Running report.
    #[arg(long, default_value = "1s", value_parser = crate::duration::positive)]
    pod_start: Duration,
    /// Percent of pods whose containers fail (exit 1, then restarts).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=100))]
    fail_percent: u8,
    /// hold, churn: how long.
    #[arg(long, default_value = "60s", value_parser = crate::duration::positive)]
    duration: Duration,
    /// pods, storm: pods per node.
    #[arg(long, default_value_t = 1)]
    pods_per_node: usize,
    /// pods: creates a second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// pods: leave the pods to the scheduler instead of binding each to its node.
    #[arg(long)]
    schedule: bool,
    /// fanout: configmap updates.
    #[arg(long, default_value_t = 20)]
    writes: usize,
    /// fanout: time between updates.
    #[arg(long, default_value = "1s", value_parser = crate::duration::positive)]
    interval: Duration,
    /// storm: how it starts.
    #[arg(long, value_enum, default_value = "disconnect")]
    storm: StormName,
    /// churn: nodes replaced a second.
    #[arg(long, default_value_t = 5.0)]
    churn_rate: f64,
    /// The namespace of the scenario's objects (default: a new one,
    /// `sim-{run}`, deleted at the end).
    #[arg(long)]
    namespace: Option<String>,
    /// Keep the scenario's namespace and objects at the end.
    #[arg(long)]
    keep: bool,
    /// How long bringing the fleet up, or its return after a storm, may take.
    #[arg(long, default_value = "600s", value_parser = crate::duration::positive)]
    deadline: Duration,
    /// Also write the summary as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress lines.
    #[arg(long, short)]
    quiet: bool,
    /// Arguments for the cloud --spawn-cloud starts.
    #[arg(last = true)]
    cloud_args: Vec<String>,
}

/// A cloud this process started, and how to start it again.
struct Spawned {
    command: Vec<String>,
    log: PathBuf,
    child: Mutex<Child>,
}

impl Spawned {
    fn start(command: &[String], log: &Path) -> anyhow::Result<Child> {
        let exe = std::env::current_exe().context("find this program")?;
        let out = std::fs::OpenOptions::new().create(true).append(true).open(log).context("open the cloud's log")?;
        Command::new(exe)
            .args(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .context("start edgehive cloud")
    }

    fn pid(&self) -> u32 {
        self.child.lock().unwrap_or_else(|p| p.into_inner()).id()
    }

    /// SIGKILL, then the same command again.
    fn restart(&self) -> anyhow::Result<u32> {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
        *child = Spawned::start(&self.command, &self.log)?;
        Ok(child.id())
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0").context("find a free port")?.local_addr()?.port())
}

/// Waits for `path` to exist and `port` to take connections.
async fn wait_serving(path: &Path, port: u16, child: &Spawned, log: &Path) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !(path.exists() && tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()) {
        if let Ok(Some(status)) = child.child.lock().unwrap_or_else(|p| p.into_inner()).try_wait() {
            bail!("edgehive cloud exited ({status}); see {}", log.display());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("edgehive cloud not serving after 2 min; see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Starts `edgehive cloud` on `args`' data directory on free loopback
/// ports, and points `args` at it.
async fn spawn_cloud(args: &mut Args) -> anyhow::Result<Arc<Spawned>> {
    let (api, ws, quic, join) = (free_port()?, free_port()?, free_port()?, free_port()?);
    let mut command: Vec<String> = vec!["cloud".into(), "--data-dir".into(), args.data_dir.display().to_string()];
    for (flag, port) in [("--bind", api), ("--websocket-bind", ws), ("--quic-bind", quic), ("--join-bind", join)] {
        command.push(flag.into());
        command.push(format!("127.0.0.1:{port}"));
    }
    command.push("--node-limit".into());
    command.push((args.nodes * 2 + 1000).to_string());
    command.extend(args.cloud_args.iter().cloned());
    std::fs::create_dir_all(&args.data_dir).context("create the data directory")?;
    let log = args.data_dir.join("cloud.log");
    let kubeconfig = args.data_dir.join("kubeconfig.yaml");
    // A kubeconfig from an earlier run names other ports.
    let _ = std::fs::remove_file(&kubeconfig);
    let child = Spawned::start(&command, &log)?;
    let s = Arc::new(Spawned { command, log: log.clone(), child: Mutex::new(child) });
    wait_serving(&kubeconfig, api, &s, &log).await?;
    (args.server, args.websocket_port, args.quic_port, args.join_port) = ("127.0.0.1".into(), ws, quic, join);
    if !args.quiet {
        eprintln!("edgehive cloud started (pid {}), log {}", s.pid(), log.display());
    }
    Ok(s)
}

pub(crate) fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the runtime")?;
    let mut spawned = None;
    let report = rt.block_on(async {
        if args.spawn_cloud {
            spawned = Some(spawn_cloud(&mut args).await?);
        }
        simulate(args, spawned.clone()).await
    });
    // The links end with the runtime, before the cloud they talk to.
    rt.shutdown_timeout(Duration::from_secs(2));
    drop(spawned);
    writeln!(std::io::stdout().lock(), "{}", report?.table()).context("write the summary")?;
    Ok(ExitCode::SUCCESS)
}

async fn simulate(args: Args, spawned: Option<Arc<Spawned>>) -> anyhow::Result<edgehive_sim::Report> {
    let kc = Kubeconfig::read(&args.data_dir.join("kubeconfig.yaml"))?;
    let api = Arc::new(Api::new(ApiTarget { host: kc.host, port: kc.port, ca: kc.ca, cert: kc.cert, key: kc.key })?);
    let token = match args.token.clone() {
        Some(t) => Some(t),
        None => {
            let spec = edgehive_credentials::TokenSpec {
                ttl: Duration::from_secs(24 * 3600),
                description: "edgehive sim".into(),
                rejoin_nodes: Vec::new(),
            };
            Some(crate::token::new_token(&args.data_dir, &spec).await.context("make a join token")?)
        }
    };
    let namespace = args.namespace.clone().unwrap_or_else(|| {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
        format!("sim-{:06x}", nanos & 0xff_ffff)
    });
    let (transport, port) = match args.transport {
        TransportName::Websocket => (Transport::WebSocket, args.websocket_port),
        TransportName::Quic => (Transport::Quic, args.quic_port),
    };
    let mut cfg = FleetConfig::new(
        args.prefix.clone(),
        transport,
        format!("{}:{port}", args.server),
        format!("https://{}:{}", args.server, args.join_port),
    );
    cfg.token = token;
    cfg.certs_dir = args.certs_dir.clone();
    if let Some(s) = &args.sources {
        cfg.sources = edgehive_sim::limits::parse_sources(s).map_err(|e| anyhow::anyhow!("--sources: {e}"))?;
    }
    cfg.heartbeat = args.heartbeat;
    cfg.ping_keepalive = !args.no_ping_keepalive;
    cfg.start_rate = args.start_rate;
    cfg.behaviour = Behaviour { pod_start: args.pod_start, fail_percent: args.fail_percent, ..Behaviour::default() };
    let scenario = match args.scenario {
        ScenarioName::Hold => Scenario::Hold { duration: args.duration },
        ScenarioName::Pods => Scenario::Pods { per_node: args.pods_per_node, rate: args.rate, bind: !args.schedule },
        ScenarioName::Fanout => {
            cfg.record_configmap = Some((namespace.clone(), "sim-fanout".into()));
            Scenario::Fanout { writes: args.writes, interval: args.interval }
        }
        ScenarioName::Storm => Scenario::Storm {
            kind: match args.storm {
                StormName::Disconnect => StormKind::Disconnect,
                StormName::CloudRestart => StormKind::CloudRestart,
            },
            per_node: args.pods_per_node,
        },
        ScenarioName::Churn => Scenario::Churn { rate: args.churn_rate, duration: args.duration },
    };
    let restart: Option<Box<dyn Fn() -> Result<u32, edgehive_sim::SimError> + Send + Sync>> =
        spawned.as_ref().map(|s| {
            let s = Arc::clone(s);
            Box::new(move || s.restart().map_err(|e| edgehive_sim::SimError::Io(format!("{e:#}"))))
                as Box<dyn Fn() -> Result<u32, edgehive_sim::SimError> + Send + Sync>
        });
    let cloud = Cloud { api, pid: args.cloud_pid.or(spawned.as_ref().map(|s| s.pid())), restart };
    let opts =
        RunOptions { nodes: args.nodes, namespace, keep: args.keep, deadline: args.deadline, progress: !args.quiet };
    let report = edgehive_sim::run(scenario, cfg, opts, cloud).await?;
    if let Some(path) = &args.json {
        std::fs::write(path, format!("{:#}\n", report.json())).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(report)
}
