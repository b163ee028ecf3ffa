//! `edgehive user kubeconfig --name NAME [--group G]...`: a kubeconfig for
//! another user of the cloud's API, with a client certificate signed by the
//! cloud's CA (CN = the user, one O per group), as `kubeadm kubeconfig
//! user` makes one. What the user may do is up to RBAC: a new user has no
//! bindings and may only discover the API and ask about themselves; bind a
//! role with `kubectl create rolebinding`. The certificate stays valid
//! until it expires (`--ttl`); take a user's access away by deleting their
//! bindings, as in Kubernetes.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Write a kubeconfig for a user (to --out, or to stdout).
    Kubeconfig(KubeconfigArgs),
}

#[derive(Debug, clap::Args)]
struct KubeconfigArgs {
    /// The cloud's data directory (as given to `edgehive cloud`).
    #[arg(long, env = "EDGEHIVE_DATA_DIR", default_value_os_t = crate::cloud::default_data_dir())]
    data_dir: PathBuf,
    /// The user name (the certificate's CN), e.g. `alice`.
    #[arg(long)]
    name: String,
    /// A group of the user (the certificate's O); repeat for several.
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
    /// How long the certificate is valid (365d, 12h).
    #[arg(long, default_value = "365d", value_parser = crate::duration::positive)]
    ttl: Duration,
    /// Where to write the kubeconfig (mode 0600); stdout when not given.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// A user or group name a certificate can carry: not empty, no control
/// characters, at most 256 bytes.
fn check_name(what: &str, name: &str) -> anyhow::Result<()> {
    if name.is_empty() {
        bail!("{what} may not be empty");
    }
    if name.len() > 256 {
        bail!("{what} {name:?} is longer than 256 bytes");
    }
    if name.chars().any(char::is_control) {
        bail!("{what} {name:?} contains a control character");
    }
    Ok(())
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Command::Kubeconfig(args) = args.command;
    check_name("--name", &args.name)?;
    for g in &args.groups {
        check_name("--group", g)?;
    }
    let dir = &args.data_dir;
    let tls = dir.join("tls");
    if !tls.join(edgehive_pki::CA_CERT_FILE).exists() {
        bail!("no CA under {}; start `edgehive cloud --data-dir {}` first", tls.display(), dir.display());
    }
    let admin = dir.join("kubeconfig.yaml");
    let text = std::fs::read_to_string(&admin).with_context(|| {
        format!("read {} (start `edgehive cloud --data-dir {}` first)", admin.display(), dir.display())
    })?;
    let config: Value =
        serde_saphyr::from_str(&text).with_context(|| format!("{} is not a kubeconfig", admin.display()))?;
    let server = config
        .pointer("/clusters/0/cluster/server")
        .and_then(Value::as_str)
        .with_context(|| format!("{} names no server", admin.display()))?;
    let ca = edgehive_pki::Ca::load_or_create(&tls, "edgehive-ca").context("load the cloud's CA")?;
    let groups: Vec<&str> = args.groups.iter().map(String::as_str).collect();
    let issued = ca.issue_client(&args.name, &groups, args.ttl).context("issue the user's certificate")?;
    let kubeconfig = edgehive_pki::kubeconfig(
        server,
        ca.cert_pem(),
        &issued.cert_pem,
        &issued.key_pem,
        &format!("{}@edgehive", args.name),
    );
    match &args.out {
        Some(path) => {
            edgehive_pki::write_private_file(path, kubeconfig.as_bytes())
                .with_context(|| format!("write {}", path.display()))?;
            tracing::info!(user = %args.name, groups = ?args.groups, path = %path.display(), "wrote a user kubeconfig");
        }
        None => std::io::stdout().lock().write_all(kubeconfig.as_bytes()).context("write the kubeconfig")?,
    }
    Ok(ExitCode::SUCCESS)
}
